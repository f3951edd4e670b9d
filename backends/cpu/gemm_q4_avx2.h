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
// Each step of the kernel takes 8 blocks: their 8 vectors of partial sums
// reduce to one vector of 8 block sums, which one FMA scales by the 8 products
// scale_w * scale_x (no per-block broadcast or conversion). Decode (a few rows)
// reads each weight once, 2 weight rows at a time for independent chains;
// prefill takes tiles of 4 activation rows x 2 weight rows, so each unpacked
// weight block serves 4 rows. Both are parallel over the weight rows (OpenMP).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_GEMM_Q4_AVX2_H
#define TFC_BACKENDS_CPU_GEMM_Q4_AVX2_H

#include "backends/cpu/weight_memory.h"

#include <cstdint>
#include <memory>

namespace tfc::cpu {

/// W [n, k] int4 repacked for the kernel: per row, |blocks| blocks of 32
/// inputs (ceil(k / 32) rounded up to a multiple of 8, zero past k) in pairs of
/// 32 bytes, byte t holding u = q + 8 of element t of the pair's first block in
/// its low nibble and of its second block in its high one; and one f32 scale
/// per block (the group's, repeated; 0 past k).
struct PackedQ4 {
  int64_t n = 0, k = 0, blocks = 0;
  WeightMemory nibbles{nullptr, std::free};
  WeightMemory scales{nullptr, std::free};
  const uint8_t *rowBlocks(int64_t j) const {
    return static_cast<const uint8_t *>(nibbles.get()) + j * blocks * 16;
  }
  const float *rowScales(int64_t j) const {
    return static_cast<const float *>(scales.get()) + j * blocks;
  }
};

/// Packs W [n, k] stored as tfc's i4 (two's complement, element e in the low
/// nibble of byte e / 2 when e is even, else the high one) with |scales|
/// [n, ceil(k / group)]. Null when out of memory.
std::unique_ptr<PackedQ4> packQ4(const uint8_t *w, const float *scales, int64_t n, int64_t k,
                                 int64_t group);

/// The activations of |rows| rows quantized per block of 32 inputs: q [rows,
/// blocks * 32] (zero past k), the blocks' scales d [rows, blocks] and
/// 8 * d * sum(q) [rows, blocks]. |x| is f32 or bf16 (|bf16|), rows of k;
/// |blocks| is the packed weight's.
void quantizeQ8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, float *dsum8);

/// Weight rows [j0, j1) as f32 (scale * q), [j1 - j0, k] row-major: prefill's
/// many rows run on an f32 GEMM over these (linear_dnnl.cc).
void dequantizeQ4Rows(const PackedQ4 &w, int64_t j0, int64_t j1, float *out);

/// y [rows, n] (row stride n) = x W^T from quantizeQ8Blocks' output.
void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
            int64_t rows, float *y);

} // namespace tfc::cpu

#endif
