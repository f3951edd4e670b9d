//===- convert_cpu.cc - dtype conversions and int8 quantization -----------===//
#include "backends/cpu/convert_cpu.h"

#include "tfc/bf16.h"

#include <algorithm>
#include <cmath>
#if defined(__AVX512BF16__) && defined(__AVX512F__)
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

void quantizeRows(const void *x, bool isBf16, int64_t rows, int64_t k, uint8_t *q,
                  float *scale, int32_t *zero) {
#pragma omp parallel for schedule(static) if (rows * k > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    float buf[256];
    // bf16 rows are widened in chunks, so each row is read twice at most.
    auto row = [&](int64_t from, int64_t len) -> const float * {
      if (!isBf16)
        return static_cast<const float *>(x) + r * k + from;
      bf16ToF32(static_cast<const uint16_t *>(x) + r * k + from, buf, len);
      return buf;
    };
    float lo = 0.0f, hi = 0.0f;
    bool finite = true;
    for (int64_t c = 0; c < k; c += 256) {
      int64_t len = std::min<int64_t>(256, k - c);
      const float *xr = row(c, len);
      for (int64_t i = 0; i < len; ++i) {
        lo = std::min(lo, xr[i]);
        hi = std::max(hi, xr[i]);
        finite &= std::isfinite(xr[i]);
      }
    }
    uint8_t *qr = q + r * k;
    if (!finite || !(hi - lo > 0.0f) || !std::isfinite(hi - lo)) {
      // All zeros (exact as scale 0), or inf/NaN (the output row is NaN).
      scale[r] = finite && hi == lo ? 0.0f : NAN;
      zero[r] = 0;
      std::fill(qr, qr + k, (uint8_t)0);
      continue;
    }
    const float s = (hi - lo) / 255.0f, inv = 255.0f / (hi - lo);
    const float zp = std::nearbyint(-lo * inv);
    scale[r] = s;
    zero[r] = (int32_t)zp;
    for (int64_t c = 0; c < k; c += 256) {
      int64_t len = std::min<int64_t>(256, k - c);
      const float *xr = row(c, len);
      for (int64_t i = 0; i < len; ++i) {
        float v = std::nearbyint(xr[i] * inv) + zp;
        qr[c + i] = (uint8_t)std::min(255.0f, std::max(0.0f, v));
      }
    }
  }
}

} // namespace tfc::cpu
