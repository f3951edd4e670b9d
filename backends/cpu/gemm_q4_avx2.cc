//===- gemm_q4_avx2.cc - int4 weights x int8 activation blocks, AVX2 -------===//
#include "backends/cpu/gemm_q4_avx2.h"

#include "backends/cpu/convert_cpu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tfc::cpu {

namespace {
constexpr int64_t kBlock = 32;

/// A block's 32 nibbles as bytes 0..15: elements 0-15 in the low half, 16-31
/// in the high half.
inline __m256i unpack(const uint8_t *b) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b));
  const __m256i both =
      _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Activation rows [r0, r0 + R) against weight rows [j0, j0 + J): R x J sums.
template <int R, int J>
void tile(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8, int64_t r0,
          int64_t j0, float *y) {
  const int64_t blocks = w.blocks, perGroup = w.group / kBlock;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][J];
  float corr[R][J];
  for (int r = 0; r < R; ++r)
    for (int jj = 0; jj < J; ++jj) {
      acc[r][jj] = _mm256_setzero_ps();
      corr[r][jj] = 0.0f;
    }
  const uint8_t *wb[J];
  const float *ws[J];
  for (int jj = 0; jj < J; ++jj) {
    wb[jj] = w.rowBlocks(j0 + jj);
    ws[jj] = w.rowScales(j0 + jj);
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    float s[J];
    for (int jj = 0; jj < J; ++jj)
      s[jj] = ws[jj][g];
    const int64_t b1 = std::min(blocks, (g + 1) * perGroup);
    for (int64_t b = g * perGroup; b < b1; ++b) {
      __m256i wv[J];
      for (int jj = 0; jj < J; ++jj)
        wv[jj] = unpack(wb[jj] + b * 16);
      for (int r = 0; r < R; ++r) {
        const int64_t at = (r0 + r) * blocks + b;
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + at * kBlock));
        const float dx = d[at], ds = dsum8[at];
        for (int jj = 0; jj < J; ++jj) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[jj], xv), ones);
          acc[r][jj] =
              _mm256_fmadd_ps(_mm256_set1_ps(s[jj] * dx), _mm256_cvtepi32_ps(p), acc[r][jj]);
          corr[r][jj] += s[jj] * ds;
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int jj = 0; jj < J; ++jj)
      y[(r0 + r) * w.n + j0 + jj] = hsum(acc[r][jj]) - corr[r][jj];
}

using TileFn = void (*)(const PackedQ4 &, const int8_t *, const float *, const float *, int64_t,
                        int64_t, float *);
/// tile<R, J> for R in 1..4 and J in 1..2: kTiles[R - 1][J - 1].
constexpr TileFn kTiles[4][2] = {{tile<1, 1>, tile<1, 2>},
                                 {tile<2, 1>, tile<2, 2>},
                                 {tile<3, 1>, tile<3, 2>},
                                 {tile<4, 1>, tile<4, 2>}};
} // namespace

std::unique_ptr<PackedQ4> packQ4(const uint8_t *w, const float *scales, int64_t n, int64_t k,
                                 int64_t group) {
  auto p = std::make_unique<PackedQ4>();
  p->n = n;
  p->k = k;
  p->group = group;
  p->blocks = (k + kBlock - 1) / kBlock;
  p->groups = (k + group - 1) / group;
  p->nibbles = allocWeightMemory((size_t)(n * p->blocks * 16));
  p->scales = allocWeightMemory((size_t)(n * p->groups) * sizeof(float));
  if (!p->nibbles || !p->scales)
    return nullptr;
  std::memcpy(p->scales.get(), scales, (size_t)(n * p->groups) * sizeof(float));
  // u = q + 8 of element c of row j; 8 (zero) past k.
  auto u = [&](int64_t j, int64_t c) -> uint8_t {
    if (c >= k)
      return 8;
    const uint64_t e = (uint64_t)j * (uint64_t)k + (uint64_t)c;
    return (uint8_t)(((w[e / 2] >> (e % 2 ? 4 : 0)) & 0xF) ^ 8);
  };
#pragma omp parallel for schedule(static) if (n * k > (1 << 20))
  for (int64_t j = 0; j < n; ++j) {
    uint8_t *out = static_cast<uint8_t *>(p->nibbles.get()) + j * p->blocks * 16;
    for (int64_t b = 0; b < p->blocks; ++b)
      for (int64_t i = 0; i < 16; ++i)
        out[b * 16 + i] = (uint8_t)(u(j, b * kBlock + i) | u(j, b * kBlock + 16 + i) << 4);
  }
  return p;
}

void quantizeQ8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, float *dsum8) {
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#pragma omp parallel for schedule(static) if (rows * k > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      alignas(32) float v[kBlock];
      const int64_t c0 = b * kBlock, len = std::min(kBlock, k - c0);
      if (bf16)
        bf16ToF32(static_cast<const uint16_t *>(x) + r * k + c0, v, len);
      else
        std::memcpy(v, static_cast<const float *>(x) + r * k + c0, len * sizeof(float));
      std::fill(v + len, v + kBlock, 0.0f);
      float amax = 0.0f;
      bool finite = true;
      for (int64_t i = 0; i < kBlock; ++i) {
        finite &= std::isfinite(v[i]);
        amax = std::max(amax, std::fabs(v[i]));
      }
      int8_t *qb = q + (r * blocks + b) * kBlock;
      const int64_t at = r * blocks + b;
      if (!finite) { // the row's outputs are NaN (docs/precision.md, "Non-finite values")
        std::memset(qb, 0, kBlock);
        d[at] = dsum8[at] = NAN;
        continue;
      }
      const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
      __m256i i[4];
      for (int h = 0; h < 4; ++h)
        i[h] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(v + 8 * h), inv));
      const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]),
                                           _mm256_add_epi32(i[2], i[3]));
      const __m256i packed = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(qb), packed);
      alignas(32) int32_t s[8];
      _mm256_store_si256(reinterpret_cast<__m256i *>(s), sum);
      const int32_t total = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
      d[at] = amax / 127.0f;
      dsum8[at] = 8.0f * d[at] * (float)total;
    }
  }
}

void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
            int64_t rows, float *y) {
  const int64_t n = w.n;
  if (rows < 4) {
    // Decode: each weight row read once, two at a time.
    const int64_t pairs = (n + 1) / 2;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < pairs; ++t) {
      const int64_t j = 2 * t, jn = std::min<int64_t>(2, n - j);
      for (int64_t r = 0; r < rows; ++r)
        kTiles[0][jn - 1](w, q, d, dsum8, r, j, y);
    }
    return;
  }
  // Prefill: chunks of weight rows small enough to stay in cache while every
  // tile of 4 activation rows passes over them.
  constexpr int64_t kChunk = 16;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t j0 = c * kChunk, j1 = std::min(n, j0 + kChunk);
    for (int64_t r = 0; r < rows; r += 4) {
      const int64_t rn = std::min<int64_t>(4, rows - r);
      for (int64_t j = j0; j < j1; j += 2)
        kTiles[rn - 1][std::min<int64_t>(2, j1 - j) - 1](w, q, d, dsum8, r, j, y);
    }
  }
}

} // namespace tfc::cpu
