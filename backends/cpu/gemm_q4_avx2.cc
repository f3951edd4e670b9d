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
constexpr int64_t kStep = 8; // blocks per step of the kernel: one vector of 8 block sums

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/// Lane i of the result: the sum of the 8 lanes of p[i].
inline __m256i laneSums(const __m256i p[8]) {
  const __m256i t0 = _mm256_hadd_epi32(p[0], p[1]), t1 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i t2 = _mm256_hadd_epi32(p[4], p[5]), t3 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}

/// Activation rows [r0, r0 + R) against weight rows [j0, j0 + J): R x J sums.
/// Each step takes 8 blocks: 4 loads of 32 weight bytes (two blocks each, one
/// per nibble), per row 8 vpmaddubsw + vpmaddwd, one reduction to a vector of
/// the 8 block sums, and one FMA by the 8 products scale_w * scale_x.
template <int R, int J>
void tile(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8, int64_t r0,
          int64_t j0, float *y) {
  const int64_t blocks = w.blocks;
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F);
  __m256 acc[R][J], corr[R][J];
  for (int r = 0; r < R; ++r)
    for (int jj = 0; jj < J; ++jj)
      acc[r][jj] = corr[r][jj] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; b += kStep) {
    for (int jj = 0; jj < J; ++jj) {
      const uint8_t *wb = w.rowBlocks(j0 + jj) + b * 16;
      __m256i wv[kStep];
      for (int i = 0; i < kStep / 2; ++i) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(wb + 32 * i));
        wv[2 * i] = _mm256_and_si256(v, low);
        wv[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
      }
      const __m256 ws = _mm256_loadu_ps(w.rowScales(j0 + jj) + b);
      for (int r = 0; r < R; ++r) {
        const int64_t at = (r0 + r) * blocks + b;
        const int8_t *xb = q + at * kBlock;
        __m256i p[kStep];
        for (int i = 0; i < kStep; ++i)
          p[i] = _mm256_madd_epi16(
              _mm256_maddubs_epi16(
                  wv[i], _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + i * kBlock))),
              ones);
        const __m256 sums = _mm256_cvtepi32_ps(laneSums(p));
        acc[r][jj] = _mm256_fmadd_ps(_mm256_mul_ps(ws, _mm256_loadu_ps(d + at)), sums, acc[r][jj]);
        corr[r][jj] = _mm256_fmadd_ps(ws, _mm256_loadu_ps(dsum8 + at), corr[r][jj]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int jj = 0; jj < J; ++jj)
      y[(r0 + r) * w.n + j0 + jj] = hsum(_mm256_sub_ps(acc[r][jj], corr[r][jj]));
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
  p->blocks = ((k + kBlock - 1) / kBlock + kStep - 1) / kStep * kStep;
  const int64_t groups = (k + group - 1) / group;
  p->nibbles = allocWeightMemory((size_t)(n * p->blocks * 16));
  p->scales = allocWeightMemory((size_t)(n * p->blocks) * sizeof(float));
  if (!p->nibbles || !p->scales)
    return nullptr;
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
    float *sc = static_cast<float *>(p->scales.get()) + j * p->blocks;
    // Blocks in pairs: byte t of a pair's 32 holds element t of the first
    // block in its low nibble and of the second in its high one.
    for (int64_t b = 0; b < p->blocks; b += 2)
      for (int64_t t = 0; t < kBlock; ++t)
        out[b * 16 + t] = (uint8_t)(u(j, b * kBlock + t) | u(j, (b + 1) * kBlock + t) << 4);
    for (int64_t b = 0; b < p->blocks; ++b)
      sc[b] = b * kBlock < k ? scales[j * groups + b * kBlock / group] : 0.0f;
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
      const int64_t c0 = b * kBlock, len = std::max<int64_t>(0, std::min(kBlock, k - c0));
      if (len > 0 && bf16)
        bf16ToF32(static_cast<const uint16_t *>(x) + r * k + c0, v, len);
      else if (len > 0)
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

void dequantizeQ4Rows(const PackedQ4 &w, int64_t j0, int64_t j1, float *out) {
  const int64_t k = w.k;
#pragma omp parallel for schedule(static) if ((j1 - j0) * k > 65536)
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t *wb = w.rowBlocks(j);
    const float *sc = w.rowScales(j);
    float *o = out + (j - j0) * k;
    for (int64_t c = 0; c < k; ++c) {
      const int64_t b = c / kBlock, t = c % kBlock;
      const uint8_t byte = wb[(b & ~int64_t(1)) * 16 + t];
      o[c] = sc[b] * (float)((b & 1 ? byte >> 4 : byte & 0xF) - 8);
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
