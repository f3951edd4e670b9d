//===- convert_cpu.cc - dtype conversions and int8 quantization -----------===//
//
// Picks the AVX-512 or the AVX2 instance of convert_impl.h at run time.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/convert_cpu.h"

#include "backends/cpu/cpu_isa.h"

namespace tfc::cpu {

#define TFC_CONVERT_DECLARE(NS)                                                          \
  namespace NS {                                                                         \
  void f32ToBf16(const float *x, uint16_t *y, int64_t n);                                \
  void bf16ToF32(const uint16_t *x, float *y, int64_t n);                                \
  void quantizeRows(const void *x, bool isBf16, int64_t rows, int64_t k, uint8_t *q,     \
                    float *scale, int32_t *zero, int levels);                            \
  }
TFC_CONVERT_DECLARE(avx2)
TFC_CONVERT_DECLARE(avx512)
#undef TFC_CONVERT_DECLARE

void f32ToBf16(const float *x, uint16_t *y, int64_t n) {
  cpuPaths().avx512 ? avx512::f32ToBf16(x, y, n) : avx2::f32ToBf16(x, y, n);
}

void bf16ToF32(const uint16_t *x, float *y, int64_t n) {
  cpuPaths().avx512 ? avx512::bf16ToF32(x, y, n) : avx2::bf16ToF32(x, y, n);
}

void quantizeRows(const void *x, bool isBf16, int64_t rows, int64_t k, uint8_t *q,
                  float *scale, int32_t *zero, int levels) {
  if (cpuPaths().avx512)
    avx512::quantizeRows(x, isBf16, rows, k, q, scale, zero, levels);
  else
    avx2::quantizeRows(x, isBf16, rows, k, q, scale, zero, levels);
}

} // namespace tfc::cpu
