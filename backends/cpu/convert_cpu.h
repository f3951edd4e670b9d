//===- convert_cpu.h - dtype conversions and int8 quantization ---*- C++ -*-===//
//
// The bulk conversions the reduced-precision plans need between kernels:
// f32 <-> bf16 with round-to-nearest-even (the rounding of tfc/bf16.h, so the
// compiler's weights and the runtime's activations round alike), and the
// dynamic per-row asymmetric int8 quantization of a linear layer's input.
// AVX-512 or AVX2, whichever cpu_isa.h chose for this CPU.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_CONVERT_CPU_H
#define TFC_BACKENDS_CPU_CONVERT_CPU_H

#include <cstdint>

namespace tfc::cpu {

void f32ToBf16(const float *x, uint16_t *y, int64_t n);
void bf16ToF32(const uint16_t *x, float *y, int64_t n);

/// Quantizes each of |rows| rows of |k| values (f32, or bf16 when |isBf16|)
/// asymmetrically to uint8 over the row's range widened to include 0
/// [lo, hi] = [min(min x, 0), max(max x, 0)], with L = |levels| (255, or 127
/// for the AVX2 GEMM whose vpmaddubsw pairs must not saturate: gemm_s8_avx2.h):
///   scale[r] = (hi - lo) / L, zero[r] = round(-lo / scale[r]),
///   q[r, i] = clamp(round(x[r, i] / scale[r]) + zero[r], 0, L),
/// so x ~ scale * (q - zero), and 0 (a ReLU's output, padding) is exact. 255
/// levels over the actual range rather than 127 over [-amax, amax]: about
/// twice the resolution of symmetric int8 for the same GEMM (u8 x s8 is also
/// the form VNNI and AMX multiply natively). An all-zero row gets scale 0.
/// A row holding inf or NaN gets scale NaN, so its outputs are NaN.
/// Parallel over rows.
void quantizeRows(const void *x, bool isBf16, int64_t rows, int64_t k, uint8_t *q,
                  float *scale, int32_t *zero, int levels = 255);

} // namespace tfc::cpu

#endif
