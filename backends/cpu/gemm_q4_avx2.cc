//===- gemm_q4_avx2.cc - int4 weights x int8 activation blocks, AVX2 -------===//
#include "backends/cpu/gemm_q4_avx2.h"

#include "backends/cpu/convert_cpu.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm_q_avx512.h"
#include "backends/cpu/gemm_s8_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tfc::cpu {

namespace {
constexpr int64_t kBlock = 32;
constexpr int64_t kPanel = 16;
constexpr int64_t kRowBlock = 64; // prefill rows per cache block (a multiple of 4)

/// Rows [r0, r0 + R) of one panel: R x 16 outputs. Per block: 4 loads of 64
/// bytes' halves unpacked into 8 vectors of u (0..15), per row 8 vpmaddubsw
/// summed in s16, 2 vpmaddwd, and the scales: y = sum_b sw * (d S - 8 d sum q).
template <int R>
void tile(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8, int64_t r0,
          int64_t panel, float *y) {
  const int64_t kPad = w.kPad, blocks = w.blocks;
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F);
  __m256 f[R][2];
  for (int r = 0; r < R; ++r)
    f[r][0] = f[r][1] = _mm256_setzero_ps();
  const uint8_t *wp = w.panel(panel);
  const float *ws = w.panelScales(panel);
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i s16[R][2];
    for (int r = 0; r < R; ++r)
      s16[r][0] = s16[r][1] = _mm256_setzero_si256();
    for (int64_t kk = b * kBlock; kk < (b + 1) * kBlock; kk += 8) {
      const uint8_t *g = wp + kk * 8; // 64 bytes per 8 inputs
      const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(g));
      const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(g + 32));
      const __m256i lo0 = _mm256_and_si256(v0, low), lo1 = _mm256_and_si256(v1, low);
      const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low);
      const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low);
      for (int r = 0; r < R; ++r) {
        int32_t x0, x1;
        std::memcpy(&x0, q + (r0 + r) * kPad + kk, 4);
        std::memcpy(&x1, q + (r0 + r) * kPad + kk + 4, 4);
        const __m256i a0 = _mm256_set1_epi32(x0), a1 = _mm256_set1_epi32(x1);
        s16[r][0] = _mm256_add_epi16(
            s16[r][0], _mm256_add_epi16(_mm256_maddubs_epi16(lo0, a0), _mm256_maddubs_epi16(hi0, a1)));
        s16[r][1] = _mm256_add_epi16(
            s16[r][1], _mm256_add_epi16(_mm256_maddubs_epi16(lo1, a0), _mm256_maddubs_epi16(hi1, a1)));
      }
    }
    const __m256 w0 = _mm256_loadu_ps(ws + b * kPanel), w1 = _mm256_loadu_ps(ws + b * kPanel + 8);
    for (int r = 0; r < R; ++r) {
      const int64_t at = (r0 + r) * blocks + b;
      const __m256 db = _mm256_set1_ps(d[at]), cb = _mm256_set1_ps(dsum8[at]);
      const __m256 t0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[r][0], ones));
      const __m256 t1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[r][1], ones));
      f[r][0] = _mm256_fmadd_ps(w0, _mm256_fmsub_ps(t0, db, cb), f[r][0]);
      f[r][1] = _mm256_fmadd_ps(w1, _mm256_fmsub_ps(t1, db, cb), f[r][1]);
    }
  }
  const int64_t n0 = panel * kPanel, cols = std::min(kPanel, w.n - n0);
  for (int r = 0; r < R; ++r)
    storePanelRow(y + (r0 + r) * w.n + n0, f[r][0], f[r][1], cols);
}

using TileFn = void (*)(const PackedQ4 &, const int8_t *, const float *, const float *, int64_t,
                        int64_t, float *);
constexpr TileFn kTiles[4] = {tile<1>, tile<2>, tile<3>, tile<4>};
} // namespace

std::unique_ptr<PackedQ4> packQ4(const uint8_t *w, const float *scales, int64_t n, int64_t k,
                                 int64_t group) {
  auto p = std::make_unique<PackedQ4>();
  p->n = n;
  p->k = k;
  p->kPad = (k + kBlock - 1) / kBlock * kBlock;
  p->blocks = p->kPad / kBlock;
  p->panels = (n + kPanel - 1) / kPanel;
  p->nibbles = allocWeightMemory((size_t)(p->panels * p->kPad * 8));
  p->scales = panelBlockScales(scales, n, k, group, p->panels, p->blocks);
  if (!p->nibbles || !p->scales)
    return nullptr;
  // u = q + 8 of element i of row j; 8 (zero) past n and k.
  auto u = [&](int64_t j, int64_t i) -> uint8_t {
    if (j >= n || i >= k)
      return 8;
    const uint64_t e = (uint64_t)j * (uint64_t)k + (uint64_t)i;
    return (uint8_t)(((w[e / 2] >> (e % 2 ? 4 : 0)) & 0xF) ^ 8);
  };
#pragma omp parallel for schedule(static) if (n * k > (1 << 20))
  for (int64_t pn = 0; pn < p->panels; ++pn) {
    uint8_t *out = static_cast<uint8_t *>(p->nibbles.get()) + pn * p->kPad * 8;
    for (int64_t kk = 0; kk < p->kPad; kk += 8)
      for (int64_t c = 0; c < kPanel; ++c)
        for (int64_t t = 0; t < 4; ++t) {
          const int64_t j = pn * kPanel + c;
          out[kk * 8 + (c / 8) * 32 + (c % 8) * 4 + t] =
              (uint8_t)(u(j, kk + t) | u(j, kk + 4 + t) << 4);
        }
  }
  return p;
}

namespace {
/// The s8 block quantizer of int4 and of group-wise int8 at 8 activation
/// bits: codes round(x * 127 / amax) (half to even), d = amax / 127, handed
/// to done(r, b, codes[32], d, sum of the codes, finite) per block. A block
/// with a NaN or an infinity gets zero codes and d = NaN (its row's outputs
/// are NaN: docs/precision.md, "Non-finite values").
template <typename Done>
void quantizeS8BlocksImpl(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                          Done &&done) {
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#pragma omp parallel for schedule(static) if (rows * k > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      alignas(32) float v[kBlock];
      alignas(32) int8_t codes[kBlock];
      float amax;
      if (!loadBlock32(x, bf16, r, k, b, v, amax)) {
        std::memset(codes, 0, kBlock);
        done(r, b, codes, NAN, 0, false);
        continue;
      }
      // Below 1e-30 a block counts as zeros: 127 / amax would overflow to
      // inf for a subnormal amax, and 0 * inf to NaN codes.
      if (amax < 1e-30f)
        amax = 0.0f;
      const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      __m256i i[4];
      for (int h = 0; h < 4; ++h)
        i[h] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(v + 8 * h), inv));
      const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]),
                                           _mm256_add_epi32(i[2], i[3]));
      const __m256i packed = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3])),
          order);
      _mm256_store_si256(reinterpret_cast<__m256i *>(codes), packed);
      alignas(32) int32_t s[8];
      _mm256_store_si256(reinterpret_cast<__m256i *>(s), sum);
      done(r, b, codes, amax / 127.0f, s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7],
           true);
    }
  }
}
/// Block |b|'s 32 codes of row |r| into the s8 row-tile layout of a call of
/// |rows| rows (gemm_s8_avx2.h): 4 codes a step, tileHeight(rows) rows apart.
void storeS8Tiled(int8_t *q, int64_t r, int64_t b, int64_t blocks, int64_t rows,
                  const int8_t *codes) {
  for (int64_t step = 0; step < kBlock / 4; ++step)
    std::memcpy(q + s8TileIndex(r, b * kBlock + step * 4, blocks, rows), codes + step * 4, 4);
}
} // namespace

void quantizeQ8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, float *dsum8, bool tiled) {
  quantizeS8BlocksImpl(x, bf16, rows, k, blocks,
                       [&](int64_t r, int64_t b, const int8_t *codes, float scale, int32_t total,
                           bool finite) {
                         const int64_t at =
                             tiled ? tileScaleIndex(r, b, blocks, rows) : r * blocks + b;
                         if (tiled)
                           storeS8Tiled(q, r, b, blocks, rows, codes);
                         else
                           std::memcpy(q + at * kBlock, codes, kBlock);
                         d[at] = scale;
                         dsum8[at] = finite ? 8.0f * scale * (float)total : NAN;
                       });
}

void quantizeS8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, int32_t *qsum) {
  quantizeS8BlocksImpl(x, bf16, rows, k, blocks,
                       [&](int64_t r, int64_t b, const int8_t *codes, float scale, int32_t total,
                           bool) {
                         const int64_t at = tileScaleIndex(r, b, blocks, rows);
                         storeS8Tiled(q, r, b, blocks, rows, codes);
                         d[at] = scale;
                         qsum[at] = total;
                       });
}

bool gemmQ4Tiled() { return cpuPaths().avx512Vnni; }

void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
            int64_t rows, float *y) {
  if (cpuPaths().avx512Vnni)
    return avx512::gemmQ4(w, q, d, dsum8, rows, y);
  gemmQ4Avx2(w, q, d, dsum8, rows, y);
}

void gemmQ4Avx2(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
                int64_t rows, float *y) {
  const bool par = rows * w.n * w.k > (1 << 18);
  if (rows < 4) { // decode: each panel read once, against every row
#pragma omp parallel for schedule(static) if (par)
    for (int64_t pn = 0; pn < w.panels; ++pn)
      kTiles[rows - 1](w, q, d, dsum8, 0, pn, y);
    return;
  }
  // Prefill: row blocks that stay in L2 while the panels stream past them.
  const int64_t rblocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(2) schedule(static) if (par)
  for (int64_t rb = 0; rb < rblocks; ++rb)
    for (int64_t pn = 0; pn < w.panels; ++pn)
      for (int64_t r = rb * kRowBlock; r < std::min(rows, (rb + 1) * kRowBlock); r += 4)
        kTiles[std::min<int64_t>(4, rows - r) - 1](w, q, d, dsum8, r, pn, y);
}

} // namespace tfc::cpu
