//===- gemm_s8_avx2.cc - exact u8 x s8 GEMM for CPUs without VNNI ---------===//
#include "backends/cpu/gemm_s8_avx2.h"

#include "backends/cpu/convert_cpu.h"
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm_q_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace tfc::cpu {

namespace {
constexpr int64_t kPanel = 16; // columns per panel: two 8-lane s32 vectors
constexpr int kRows = 4;       // rows per register tile: 4 x 2 accumulators
constexpr int kRows7 = 6;      // gemmU7S8's: 6 x 2 accumulators (no |a| operand)
constexpr int64_t kRowBlock = 48; // rows per cache block (a multiple of kRows and kRows7)

/// a_i * w_i summed over 4 consecutive k, for 8 columns: |a| * (w sign a).
inline __m256i dot4(__m256i absA, __m256i a, __m256i w, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(absA, _mm256_sign_epi8(w, a)), ones);
}

/// One tile row's 16 sums (lo: columns 0-7, hi: 8-15), plus 128 * wsum[j]
/// when |wsum| is given (the exact kernel's recentring), into cr[0, cols): two
/// vector stores for a whole panel, element by element for the last one.
inline void storeRow(__m256i lo, __m256i hi, int32_t *cr, int64_t cols, const int32_t *wsum) {
  if (cols == kPanel) {
    if (wsum) {
      lo = _mm256_add_epi32(lo, _mm256_slli_epi32(
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i *>(wsum)), 7));
      hi = _mm256_add_epi32(hi, _mm256_slli_epi32(_mm256_loadu_si256(
                                    reinterpret_cast<const __m256i *>(wsum + 8)), 7));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(cr), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(cr + 8), hi);
    return;
  }
  alignas(32) int32_t out[2 * 8];
  _mm256_store_si256(reinterpret_cast<__m256i *>(out), lo);
  _mm256_store_si256(reinterpret_cast<__m256i *>(out + 8), hi);
  for (int64_t j = 0; j < cols; ++j)
    cr[j] = out[j] + (wsum ? 128 * wsum[j] : 0);
}

/// Rows [r0, r0 + R) of one panel: R x 16 outputs.
template <int R>
void tile(const PackedS8 &w, const int8_t *a, int64_t r0, int64_t panel, int32_t *c,
          int64_t ldc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const int8_t *wp = w.panels8() + panel * w.kPad * kPanel;
  // a (recentred) and |a| side by side, so that |a| is a broadcast from
  // memory (a load) rather than a vpabsb per tile step: the loop is bound by
  // the vector ALUs, 8 sign + 8 maddubs + 8 madd + 8 add per 256 products.
  const int8_t *ar = a + r0 * 2 * w.kPad;
  for (int64_t kk = 0; kk < w.kPad; kk += 4) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(wp + kk * kPanel));
    const __m256i w1 =
        _mm256_load_si256(reinterpret_cast<const __m256i *>(wp + kk * kPanel + 32));
    for (int r = 0; r < R; ++r) {
      int32_t four, fourAbs;
      std::memcpy(&four, ar + r * 2 * w.kPad + kk, 4);
      std::memcpy(&fourAbs, ar + (r * 2 + 1) * w.kPad + kk, 4);
      const __m256i av = _mm256_set1_epi32(four);
      const __m256i aa = _mm256_set1_epi32(fourAbs);
      acc[r][0] = _mm256_add_epi32(acc[r][0], dot4(aa, av, w0, ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], dot4(aa, av, w1, ones));
    }
  }
  // sum_k q w = sum_k (q - 128) w + 128 * sum_k w.
  const int64_t n0 = panel * kPanel, cols = w.n - n0 < kPanel ? w.n - n0 : kPanel;
  for (int r = 0; r < R; ++r)
    storeRow(acc[r][0], acc[r][1], c + (r0 + r) * ldc + n0, cols, w.wsum.get() + n0);
}
/// The 7-bit form: A is u7 (0..127), so a pair of u7 x s8 products is at most
/// 2 * 127 * 127 = 32258 and vpmaddubsw takes A as it is: vpmaddubsw, vpmaddwd,
/// vpaddd per 32 products (two of them on the multiply pipes, against three
/// with vpsignb). Rows [r0, r0 + R) of one panel, A padded to kPad per row.
template <int R>
void tile7(const PackedS8 &w, const uint8_t *a, int64_t r0, int64_t panel, int32_t *c,
           int64_t ldc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const int8_t *wp = w.panels8() + panel * w.kPad * kPanel;
  const uint8_t *ar = a + r0 * w.kPad;
  for (int64_t kk = 0; kk < w.kPad; kk += 4) {
    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(wp + kk * kPanel));
    const __m256i w1 =
        _mm256_load_si256(reinterpret_cast<const __m256i *>(wp + kk * kPanel + 32));
    for (int r = 0; r < R; ++r) {
      int32_t four;
      std::memcpy(&four, ar + r * w.kPad + kk, 4);
      const __m256i av = _mm256_set1_epi32(four);
      acc[r][0] = _mm256_add_epi32(
          acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w0), ones));
      acc[r][1] = _mm256_add_epi32(
          acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w1), ones));
    }
  }
  const int64_t n0 = panel * kPanel, cols = w.n - n0 < kPanel ? w.n - n0 : kPanel;
  for (int r = 0; r < R; ++r)
    storeRow(acc[r][0], acc[r][1], c + (r0 + r) * ldc + n0, cols, nullptr);
}

/// Rows [r0, r1) of one panel: whole Rows-row tiles, then the tail.
template <int Rows, typename Tile>
void panelRows(int64_t r0, int64_t r1, int64_t panel, Tile &&tileAt) {
  const int64_t full = r0 + (r1 - r0) / Rows * Rows;
  for (int64_t r = r0; r < full; r += Rows)
    tileAt(std::integral_constant<int, Rows>{}, r, panel);
  switch (r1 - full) {
  case 5:
    tileAt(std::integral_constant<int, 5>{}, full, panel);
    break;
  case 4:
    tileAt(std::integral_constant<int, 4>{}, full, panel);
    break;
  case 3:
    tileAt(std::integral_constant<int, 3>{}, full, panel);
    break;
  case 2:
    tileAt(std::integral_constant<int, 2>{}, full, panel);
    break;
  case 1:
    tileAt(std::integral_constant<int, 1>{}, full, panel);
    break;
  default:
    break;
  }
}

/// Every panel over every row, with tileAt(R, r0, panel) for each R-row tile
/// (R = Rows, or fewer at a tail). |rowBytes| is what one row of A occupies.
template <int Rows, typename Packed, typename Tile>
void overBlocks(const Packed &w, int64_t m, int64_t rowBytes, Tile &&tileAt) {
  const bool par = m * w.n * w.k > (1 << 18);
  if (m * rowBytes <= (int64_t{1} << 18)) {
    // A fits in L2 (a decoding step's rows): each panel is read from memory
    // once and meets every row while it is in L1. This is the order for the
    // vocabulary projection, whose weights (30 MB at 58k x 512) would
    // otherwise stream past once per row block.
#pragma omp parallel for schedule(static) if (par)
    for (int64_t panel = 0; panel < w.panels; ++panel)
      panelRows<Rows>(0, m, panel, tileAt);
    return;
  }
  // Row blocks of kRowBlock rows x 16-column panels: a block's rows stay in
  // L2 while the panels stream past them; consecutive iterations (one block,
  // neighbouring panels) go to the same thread.
  const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(2) schedule(static) if (par)
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t panel = 0; panel < w.panels; ++panel)
      panelRows<Rows>(blk * kRowBlock, std::min(m, (blk + 1) * kRowBlock), panel, tileAt);
}
} // namespace

int8_t PackedS8::at(int64_t j, int64_t i) const {
  return panels8()[(j / kPanel) * kPad * kPanel + (i / 4) * 4 * kPanel + (j % kPanel) * 4 + i % 4];
}

std::unique_ptr<PackedS8> packS8(const int8_t *w, int64_t n, int64_t k,
                                 const PackProgress &done) {
  auto p = std::make_unique<PackedS8>();
  p->n = n;
  p->k = k;
  p->kPad = (k + 3) / 4 * 4;
  p->panels = (n + kPanel - 1) / kPanel;
  const size_t bytes = (size_t)(p->panels * kPanel * p->kPad);
  p->data = allocWeightMemory(bytes);
  p->wsum.reset(new (std::nothrow) int32_t[n]);
  if (!p->data || !p->wsum)
    return nullptr;
  auto *base = static_cast<int8_t *>(p->data.get());
  std::memset(base, 0, bytes);
  for (int64_t j = 0; j < n; ++j) {
    int32_t sum = 0;
    int8_t *panel = base + (j / kPanel) * p->kPad * kPanel;
    const int64_t col = j % kPanel;
    for (int64_t i = 0; i < k; ++i) {
      const int8_t v = w[j * k + i] == -128 ? -127 : w[j * k + i];
      p->clipped |= w[j * k + i] == -128;
      // k group i / 4, column col, byte i % 4.
      panel[(i / 4) * 4 * kPanel + col * 4 + i % 4] = v;
      sum += v;
    }
    p->wsum[j] = sum;
    constexpr int64_t kRowsPerReport = 1024;
    if (done && (j + 1) % kRowsPerReport == 0)
      done((uint64_t)(j + 1 - kRowsPerReport) * (uint64_t)k, (uint64_t)kRowsPerReport * (uint64_t)k);
  }
  return p;
}

void gemmU8S8(const PackedS8 &w, const uint8_t *a, int64_t m, int32_t *c, int8_t *scratch) {
  // Per row: recentred to s8 (q - 128 flips the top bit), then its absolute
  // value as u8 (|-128| = 128), each padded with zeros to kPad.
  // k and kPad in locals: the stores below are through char types, which may
  // alias anything, so with w.k in the loop condition GCC reloaded it after
  // every byte and left both loops scalar (4% of an int8 translation).
  const int64_t k = w.k, kPad = w.kPad;
#pragma omp parallel for schedule(static) if (m * k > (1 << 16))
  for (int64_t r = 0; r < m; ++r) {
    int8_t *__restrict dst = scratch + r * 2 * kPad;
    uint8_t *__restrict abs = reinterpret_cast<uint8_t *>(dst + kPad);
    const uint8_t *__restrict src = a + r * k;
    // Two simple loops (vpxor; vpsubb, vpabsb), each vectorized.
    for (int64_t i = 0; i < k; ++i)
      dst[i] = (int8_t)(src[i] ^ 0x80);
    for (int64_t i = 0; i < k; ++i)
      abs[i] = (uint8_t)(src[i] >= 128 ? src[i] - 128 : 128 - src[i]);
    for (int64_t i = k; i < kPad; ++i)
      dst[i] = 0, abs[i] = 0;
  }
  overBlocks<kRows>(w, m, 2 * w.kPad, [&](auto R, int64_t r0, int64_t panel) {
    tile<decltype(R)::value>(w, scratch, r0, panel, c, w.n);
  });
}

void gemmU7S8(const PackedS8 &w, const uint8_t *a, int64_t m, int32_t *c, uint8_t *scratch) {
  // Rows padded with zeros to kPad (a copy only when k is not a multiple of 4).
  const uint8_t *ap = a;
  if (w.kPad != w.k) {
#pragma omp parallel for schedule(static) if (m * w.k > (1 << 16))
    for (int64_t r = 0; r < m; ++r) {
      std::memcpy(scratch + r * w.kPad, a + r * w.k, (size_t)w.k);
      std::memset(scratch + r * w.kPad + w.k, 0, (size_t)(w.kPad - w.k));
    }
    ap = scratch;
  }
  overBlocks<kRows7>(w, m, w.kPad, [&](auto R, int64_t r0, int64_t panel) {
    tile7<decltype(R)::value>(w, ap, r0, panel, c, w.n);
  });
}

namespace {
constexpr int kRows16 = 4; // gemmQ8S16's rows per tile: 4 x 2 s32 accumulators

/// Rows [r0, r0 + R) of one panel of group-wise weights against s16
/// activations: R x 16 outputs. Each block's s32 sums, scaled by scale_w * d,
/// go to f32 sums kept in L1 (|yt|), not in registers: the inner loop then
/// holds only the 2R s32 accumulators, two weight vectors, a broadcast and a
/// product (with the f32 sums in registers too, GCC spilled an accumulator and
/// every step waited on a store). The weights are widened here (vpmovsxbw);
/// widening a panel once per row block instead measured no faster.
template <int R>
void tileQ8S16(const PackedQ8 &w, const int16_t *a, const float *d, int64_t r0, int64_t panel,
               float *y) {
  const int64_t kPad = w.kPad, blocks = w.blocks;
  alignas(32) float yt[R][kPanel] = {};
  const int8_t *wp = w.panels8() + panel * kPad * kPanel;
  const float *ws = static_cast<const float *>(w.scales.get()) + panel * blocks * kPanel;
  const int16_t *ar = a + r0 * kPad;
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i acc[R][2];
    for (int r = 0; r < R; ++r)
      acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t kk = b * 32; kk < b * 32 + 32; kk += 2) {
      // 16 columns x 2 inputs: columns 0-7 and 8-15 as s16.
      const __m256i w0 = _mm256_cvtepi8_epi16(
          _mm_load_si128(reinterpret_cast<const __m128i *>(wp + kk * kPanel)));
      const __m256i w1 = _mm256_cvtepi8_epi16(
          _mm_load_si128(reinterpret_cast<const __m128i *>(wp + kk * kPanel + 16)));
      for (int r = 0; r < R; ++r) {
        int32_t two;
        std::memcpy(&two, ar + r * kPad + kk, 4);
        const __m256i av = _mm256_set1_epi32(two);
        // The sum into the accumulator's own register (vpaddd acc, p, acc):
        // as plain intrinsics GCC adds into the product's register and then
        // copies it back, 8 vmovdqa per step (16% more uops).
        const __m256i p0 = _mm256_madd_epi16(w0, av), p1 = _mm256_madd_epi16(w1, av);
        asm("vpaddd %1, %0, %0" : "+x"(acc[r][0]) : "x"(p0));
        asm("vpaddd %1, %0, %0" : "+x"(acc[r][1]) : "x"(p1));
      }
    }
    const __m256 s0 = _mm256_loadu_ps(ws + b * kPanel), s1 = _mm256_loadu_ps(ws + b * kPanel + 8);
    for (int r = 0; r < R; ++r) {
      const __m256 db = _mm256_set1_ps(d[(r0 + r) * blocks + b]);
      _mm256_store_ps(yt[r], _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][0]),
                                             _mm256_mul_ps(s0, db), _mm256_load_ps(yt[r])));
      _mm256_store_ps(yt[r] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][1]),
                                                 _mm256_mul_ps(s1, db),
                                                 _mm256_load_ps(yt[r] + 8)));
    }
  }
  const int64_t n0 = panel * kPanel, cols = std::min(kPanel, w.n - n0);
  for (int r = 0; r < R; ++r)
    storePanelRow(y + (r0 + r) * w.n + n0, _mm256_load_ps(yt[r]), _mm256_load_ps(yt[r] + 8),
                  cols);
}

} // namespace

WeightMemory panelBlockScales(const float *scales, int64_t n, int64_t k, int64_t group,
                              int64_t panels, int64_t blocks) {
  WeightMemory m = allocWeightMemory((size_t)(panels * blocks * kPanel) * sizeof(float));
  if (!m)
    return m;
  auto *out = static_cast<float *>(m.get());
  const int64_t groups = (k + group - 1) / group;
  for (int64_t panel = 0; panel < panels; ++panel)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t j = panel * kPanel + c;
        out[(panel * blocks + b) * kPanel + c] =
            j < n && b * 32 < k ? scales[j * groups + b * 32 / group] : 0.0f;
      }
  return m;
}

std::unique_ptr<PackedQ8> packQ8(const int8_t *w, const float *scales, int64_t n, int64_t k,
                                 int64_t group, const PackProgress &done) {
  auto p = std::make_unique<PackedQ8>();
  p->n = n;
  p->k = k;
  p->kPad = (k + 31) / 32 * 32;
  p->panels = (n + kPanel - 1) / kPanel;
  p->blocks = p->kPad / 32;
  const size_t bytes = (size_t)(p->panels * kPanel * p->kPad);
  p->data = allocWeightMemory(bytes);
  if (!p->data)
    return nullptr;
  auto *base = static_cast<int8_t *>(p->data.get());
  std::memset(base, 0, bytes);
  constexpr int64_t kRowsPerReport = 1024;
  for (int64_t j = 0; j < n; ++j) {
    int8_t *panel = base + (j / kPanel) * p->kPad * kPanel + (j % kPanel) * 2;
    for (int64_t i = 0; i < k; ++i) // k pair i / 2, column j % 16, element i % 2
      panel[(i / 2) * 2 * kPanel + i % 2] = w[j * k + i];
    if (done && (j + 1) % kRowsPerReport == 0)
      done((uint64_t)(j + 1 - kRowsPerReport) * (uint64_t)k, (uint64_t)kRowsPerReport * (uint64_t)k);
  }
  p->scales = panelBlockScales(scales, n, k, group, p->panels, p->blocks);
  if (!p->scales)
    return nullptr;
  return p;
}

bool loadBlock32(const void *x, bool bf16, int64_t r, int64_t k, int64_t b, float *v,
                 float &amax) {
  const int64_t c0 = b * 32, len = std::max<int64_t>(0, std::min<int64_t>(32, k - c0));
  if (len > 0 && bf16)
    bf16ToF32(static_cast<const uint16_t *>(x) + r * k + c0, v, len);
  else if (len > 0)
    std::memcpy(v, static_cast<const float *>(x) + r * k + c0, len * sizeof(float));
  std::fill(v + len, v + 32, 0.0f);
  __m256 amax8 = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  for (int h = 0; h < 4; ++h) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(v + 8 * h), absMask);
    // NaN compares unordered: not less than infinity.
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
    amax8 = _mm256_max_ps(amax8, a);
  }
  if (_mm256_movemask_ps(bad))
    return false;
  alignas(32) float m8[8];
  _mm256_store_ps(m8, amax8);
  amax = 0.0f;
  for (float m : m8)
    amax = std::max(amax, m);
  return true;
}

void quantizeS16Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                       int16_t *q, float *d, float levels, bool tiled) {
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
#pragma omp parallel for schedule(static) if (rows * k > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      alignas(32) float v[32];
      float amax;
      const bool finite = loadBlock32(x, bf16, r, k, b, v, amax);
      alignas(32) int16_t tile[32];
      int16_t *qb = tiled ? tile : q + (r * blocks + b) * 32;
      const int64_t at = tiled ? tileScaleIndex(r, b, blocks, rows) : r * blocks + b;
      // The row-tile layout: the block's pairs go 2 * tileHeight(rows) apart.
      auto place = [&] {
        if (tiled)
          for (int64_t i = 0; i < 32; i += 2)
            std::memcpy(q + s16TileIndex(r, b * 32 + i, blocks, rows), tile + i,
                        2 * sizeof(int16_t));
      };
      if (!finite) { // the row's outputs are NaN (docs/precision.md, "Non-finite values")
        std::memset(qb, 0, 32 * sizeof(int16_t));
        place();
        d[at] = NAN;
        continue;
      }
      // Below 1e-30 a block counts as zeros: 32767 / amax would overflow to
      // inf near FLT_MIN, and 0 * inf to NaN codes.
      if (amax < 1e-30f)
        amax = 0.0f;
      const __m256 inv = _mm256_set1_ps(amax > 0.0f ? levels / amax : 0.0f);
      __m256i i[4];
      for (int h = 0; h < 4; ++h)
        i[h] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(v + 8 * h), inv));
      // vpackssdw packs within 128-bit lanes; the permute restores the order.
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(qb),
                          _mm256_permutevar8x32_epi32(_mm256_packs_epi32(i[0], i[1]), order));
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(qb + 16),
                          _mm256_permutevar8x32_epi32(_mm256_packs_epi32(i[2], i[3]), order));
      place();
      d[at] = amax / levels;
    }
  }
}

bool gemmQ8S16Tiled() { return cpuPaths().avx512Vnni; }

void gemmQ8S16(const PackedQ8 &w, const int16_t *q, const float *d, int64_t m, float *y) {
  if (cpuPaths().avx512Vnni)
    return avx512::gemmQ8S16(w, q, d, m, y);
  gemmQ8S16Avx2(w, q, d, m, y);
}

void gemmQ8S16Avx2(const PackedQ8 &w, const int16_t *q, const float *d, int64_t m, float *y) {
  overBlocks<kRows16>(w, m, w.kPad * (int64_t)sizeof(int16_t),
                      [&](auto R, int64_t r0, int64_t panel) {
                        tileQ8S16<decltype(R)::value>(w, q, d, r0, panel, y);
                      });
}

} // namespace tfc::cpu
