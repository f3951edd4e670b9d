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
// The weights are laid out as the int8 kernels' (gemm_s8_avx2.h): 16-column
// panels, 4 consecutive inputs of a column together, two quads per byte (the
// low nibbles one quad, the high nibbles the next). One 32-byte load gives 8
// columns x 8 inputs; per row, a block of 32 inputs is 8 vpmaddubsw summed in
// s16 (at most 8 * 2 * 15 * 128 = 30720 < 32767, still exact), one vpmaddwd,
// then one FMA by scale_w * scale_x per 8 columns. Unpacking (vpand, vpsrlw)
// is shared by every row of a tile. Decode (a few rows) reads each weight
// once; prefill takes tiles of 4 rows over row blocks that stay in L2. Both
// are parallel over panels (OpenMP).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_GEMM_Q4_AVX2_H
#define TFC_BACKENDS_CPU_GEMM_Q4_AVX2_H

#include "backends/cpu/weight_memory.h"

#include <cstdint>
#include <memory>

namespace tfc::cpu {

/// W [n, k] int4 repacked for the kernel: 16-column panels of kPad (k padded
/// to whole blocks of 32 with zeros) inputs, 64 bytes per 8 inputs (u = q + 8
/// in nibbles: byte 32 h + 4 c + t of a group of 8 inputs holds input t of
/// column 8 h + c in its low nibble and input 4 + t in its high one); and one
/// f32 scale per block of 32 and column, [panel][block][16] (0 past n and k).
struct PackedQ4 {
  int64_t n = 0, k = 0, kPad = 0, blocks = 0, panels = 0;
  WeightMemory nibbles{nullptr, std::free};
  WeightMemory scales{nullptr, std::free};
  const uint8_t *panel(int64_t p) const {
    return static_cast<const uint8_t *>(nibbles.get()) + p * kPad * 8;
  }
  const float *panelScales(int64_t p) const {
    return static_cast<const float *>(scales.get()) + p * blocks * 16;
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
/// |blocks| is the packed weight's (ceil(k / 32)). |tiled|: in the row-tile
/// layout of gemm_s8_avx2.h (s8TileIndex, tileScaleIndex; tiledRows(rows)
/// rows, the last tile's extra rows unwritten), which the VNNI form reads.
void quantizeQ8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, float *dsum8, bool tiled = false);

/// y [rows, n] (row stride n) = x W^T from quantizeQ8Blocks' output. Where
/// the CPU has AVX512_VNNI this is avx512::gemmQ4 (gemm_q_avx512.h), which
/// gives the same bits and reads the row-tile layout: quantize with |tiled|
/// = gemmQ4Tiled().
void gemmQ4(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
            int64_t rows, float *y);
/// Whether gemmQ4 reads quantizeQ8Blocks' row-tile layout (its VNNI form).
bool gemmQ4Tiled();
/// The AVX2 form, whatever the CPU (for the tests that compare the two).
void gemmQ4Avx2(const PackedQ4 &w, const int8_t *q, const float *d, const float *dsum8,
                int64_t rows, float *y);

} // namespace tfc::cpu

#endif
