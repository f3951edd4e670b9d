//===- gemm_q4_avx2.h - int4 weights x int8 activation blocks, AVX2 -*- C++ -*-===//
//
// y[m, n] = sum_k x[m, k] W[n, k] for int4 weights with one f32 scale per group
// of G inputs (G a multiple of 32), the weights of `tfc compile --precision
// int4` (docs/precision.md, "int4").
//
// The activations are quantized per block of 32 inputs to int8 (symmetric,
// scale amax / 127), as llama.cpp's Q8_0 and ONNX Runtime's accuracy level 4
// do: then a block's 32 products are integer multiply-adds (vpmaddubsw,
// vpmaddwd) and one f32 fused multiply-add by scale_w * scale_x. Keeping the
// activations f32 would need the weights widened to f32 first: 4 conversion
// instructions per 8 weights instead of 3 integer ones per 32.
//
// No saturation: the weights go in as unsigned nibbles u = q + 8 (0..15) and
// the activations as s8, so a vpmaddubsw pair is at most 2 * 15 * 128 = 3840 <
// 32767, and the sums are exact. sum u x = sum q x + 8 sum x: the second term
// is taken out per block with the activations' own sum.
//
// Decode (a few rows) reads each weight once, 4 weight rows at a time for
// independent accumulator chains; prefill takes tiles of 4 activation rows x 2
// weight rows, so each unpacked weight block serves 4 rows. Both are parallel
// over the weight rows (OpenMP).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_GEMM_Q4_AVX2_H
#define TFC_BACKENDS_CPU_GEMM_Q4_AVX2_H

#include "backends/cpu/weight_memory.h"

#include <cstdint>
#include <memory>

namespace tfc::cpu {

/// W [n, k] int4 repacked for the kernel: per row, ceil(k / 32) blocks of 16
/// bytes, byte i of a block holding u[i] in its low nibble and u[i + 16] in its
/// high one (u = q + 8; llama.cpp's Q4_0 order), zero-padded (u = 8) past k;
/// and the row's f32 scales, one per group.
struct PackedQ4 {
  int64_t n = 0, k = 0, blocks = 0, group = 0, groups = 0;
  WeightMemory nibbles{nullptr, std::free};
  WeightMemory scales{nullptr, std::free};
  const uint8_t *rowBlocks(int64_t j) const {
    return static_cast<const uint8_t *>(nibbles.get()) + j * blocks * 16;
  }
  const float *rowScales(int64_t j) const {
    return static_cast<const float *>(scales.get()) + j * groups;
  }
};

/// Packs W [n, k] stored as tfc's i4 (two's complement, element e in the low
/// nibble of byte e / 2 when e is even, else the high one) with |scales|
/// [n, ceil(k / group)]. Null when out of memory.
std::unique_ptr<PackedQ4> packQ4(const uint8_t *w, const float *scales, int64_t n, int64_t k,
                                 int64_t group);

/// The activations of |rows| rows quantized per block of 32 inputs: q [rows,
/// blocks * 32] (zero past k), the blocks' scales d [rows, blocks] and
/// 8 * d * sum(q) [rows, blocks]. |x| is f32 or bf16 (|bf16|), rows of k.
void quantizeQ8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, float *dsum8);

/// y [rows, n] (row stride n) = x W^T from quantizeQ8Blocks' output.
void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
            int64_t rows, float *y);

} // namespace tfc::cpu

#endif
