//===- convert_cpu.cc - dtype conversions and int8 quantization -----------===//
#include "backends/cpu/convert_cpu.h"

#include "tfc/bf16.h"

#include <algorithm>
#include <cmath>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tfc::cpu {

void f32ToBf16(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  // vcvtne2ps2bf16 rounds to nearest even, as tfc_f32_to_bf16 does.
  for (; i + 32 <= n; i += 32) {
    __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(reinterpret_cast<void *>(y + i), reinterpret_cast<__m512i>(v));
  }
#endif
  for (; i < n; ++i)
    y[i] = tfc_f32_to_bf16(x[i]);
}

void bf16ToF32(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BF16__)
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i)));
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
#endif
  for (; i < n; ++i)
    y[i] = tfc_bf16_to_f32(x[i]);
}

namespace {
/// Loads 16 values of a row (f32, or bf16 widened) as f32.
#if defined(__AVX512F__)
inline __m512 load16(const void *x, bool isBf16, int64_t i) {
  if (isBf16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(
        static_cast<const uint16_t *>(x) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return _mm512_loadu_ps(static_cast<const float *>(x) + i);
}
#endif
inline float load1(const void *x, bool isBf16, int64_t i) {
  return isBf16 ? tfc_bf16_to_f32(static_cast<const uint16_t *>(x)[i])
                : static_cast<const float *>(x)[i];
}
} // namespace

void quantizeRows(const void *x, bool isBf16, int64_t rows, int64_t k, uint8_t *q,
                  float *scale, int32_t *zero) {
  const size_t es = isBf16 ? 2 : 4;
#pragma omp parallel for schedule(static) if (rows * k > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const void *xr = static_cast<const char *>(x) + r * k * es;
    float lo = 0.0f, hi = 0.0f;
    bool nan = false; // min/max drop NaNs: track them apart
    int64_t i = 0;
#if defined(__AVX512F__)
    __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
    __mmask16 nanMask = 0;
    for (; i + 16 <= k; i += 16) {
      __m512 v = load16(xr, isBf16, i);
      vlo = _mm512_min_ps(vlo, v);
      vhi = _mm512_max_ps(vhi, v);
      nanMask |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    lo = _mm512_reduce_min_ps(vlo);
    hi = _mm512_reduce_max_ps(vhi);
    nan = nanMask != 0;
#endif
    for (; i < k; ++i) {
      float v = load1(xr, isBf16, i);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      nan |= std::isnan(v);
    }
    uint8_t *qr = q + r * k;
    bool finite = !nan && std::isfinite(lo) && std::isfinite(hi) && std::isfinite(hi - lo);
    if (!finite || !(hi - lo > 0.0f)) {
      // All zeros (exact as scale 0), or inf/NaN (the output row is NaN).
      scale[r] = finite ? 0.0f : NAN;
      zero[r] = 0;
      std::fill(qr, qr + k, (uint8_t)0);
      continue;
    }
    const float s = (hi - lo) / 255.0f, inv = 255.0f / (hi - lo);
    const float zp = std::nearbyint(-lo * inv);
    scale[r] = s;
    zero[r] = (int32_t)zp;
    i = 0;
#if defined(__AVX512F__)
    const __m512 vinv = _mm512_set1_ps(inv), vzp = _mm512_set1_ps(zp);
    const __m512 v0 = _mm512_setzero_ps(), v255 = _mm512_set1_ps(255.0f);
    for (; i + 16 <= k; i += 16) {
      __m512 v = _mm512_add_ps(
          _mm512_roundscale_ps(_mm512_mul_ps(load16(xr, isBf16, i), vinv),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
          vzp);
      v = _mm512_min_ps(_mm512_max_ps(v, v0), v255);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(qr + i),
                       _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
    }
#endif
    for (; i < k; ++i) {
      float v = std::nearbyint(load1(xr, isBf16, i) * inv) + zp;
      qr[i] = (uint8_t)std::min(255.0f, std::max(0.0f, v));
    }
  }
}

} // namespace tfc::cpu
