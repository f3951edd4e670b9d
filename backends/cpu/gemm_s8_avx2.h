//===- gemm_s8_avx2.h - exact u8 x s8 GEMM for CPUs without VNNI -*- C++ -*-===//
//
// C[m, n] = sum_k A[m, k] * W[n, k] in s32, exactly, for u8 A (the quantized
// activations, 0..255) and s8 W (the int8 weights, -127..127), with AVX2 only.
//
// Why our own: without VNNI, oneDNN 2.6 (like every int8 GEMM built on
// vpmaddubsw) adds pairs of u8 x s8 products in saturating s16, and 2 * 255 *
// 127 > 32767, so its sums are wrong. Here A is recentred to s8 (a = q - 128)
// and each product is formed as |a| * (w * sign(a)) (vpabsb, vpsignb, then
// vpmaddubsw): 2 * 128 * 127 = 32512 fits in s16, so no pair saturates, and
// sum_k q w = sum_k a w + 128 * sum_k w. This is the trick ggml uses for its
// AVX2 int8 dot products. It costs one vpsignb per 32 products more than the
// saturating form; an int8 encoder runs 1.5x faster than f32 on OpenBLAS with it
// (docs/precision.md).
//
// Group-wise int8 weights (decoder-only LLMs) take s16 activations instead
// (gemmQ8S16): vpmaddwd on the weights widened to s16 forms each pair of
// products exactly, with no saturation and no sign trick.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_GEMM_S8_AVX2_H
#define TFC_BACKENDS_CPU_GEMM_S8_AVX2_H

#include "backends/cpu/weight_memory.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>

namespace tfc::cpu {

/// One row of a 16-column panel's f32 results (lo: columns 0-7, hi: 8-15) into
/// y[0, cols): two vector stores for a whole panel, a copy for the last one.
inline void storePanelRow(float *y, __m256 lo, __m256 hi, int64_t cols) {
  if (cols == 16) {
    _mm256_storeu_ps(y, lo);
    _mm256_storeu_ps(y + 8, hi);
    return;
  }
  alignas(32) float out[16];
  _mm256_store_ps(out, lo);
  _mm256_store_ps(out + 8, hi);
  std::memcpy(y, out, (size_t)cols * sizeof(float));
}

/// W [n, k] s8 repacked for the kernel: 16-column panels, 4 consecutive k of a
/// column together (the vpmaddubsw + vpmaddwd reduction order), zero-padded to
/// whole panels and k groups; plus sum_k W[n, k]. -128 is clamped to -127.
struct PackedS8 {
  int64_t n = 0, k = 0, kPad = 0, panels = 0;
  WeightMemory data{nullptr, std::free};
  const int8_t *panels8() const { return static_cast<const int8_t *>(data.get()); }
  std::unique_ptr<int32_t[]> wsum;
  bool clipped = false; ///< some -128 went in as -127 (the kernel's range)

  /// Element (j, i) as packed: panels of kPanel columns, k in groups of 4.
  int8_t at(int64_t j, int64_t i) const;
};

/// Told, while packing, that the source bytes [offset, offset + bytes) of W
/// have been read and will not be again (the CPU device drops their pages, so
/// that packing a large weight does not hold both copies at once).
using PackProgress = std::function<void(uint64_t offset, uint64_t bytes)>;

/// Null when out of memory. k is padded to a multiple of 4.
std::unique_ptr<PackedS8> packS8(const int8_t *w, int64_t n, int64_t k,
                                 const PackProgress &done = {});

/// Group-wise int8 weights (`--precision int8` on decoder-only models; the
/// weights of llama.cpp's Q8_0): 16-column panels with 2 consecutive k of a
/// column together (the vpmaddwd pair order), [panel][k / 2][16][2], k padded
/// to blocks of 32 with zeros; and one f32 scale per block of 32 inputs and
/// column, [panel][block][16] (0 past n and k), the group's scale repeated.
/// Every s8 value is kept, -128 included.
struct PackedQ8 {
  int64_t n = 0, k = 0, kPad = 0, panels = 0, blocks = 0;
  WeightMemory data{nullptr, std::free};
  WeightMemory scales{nullptr, std::free};
  const int8_t *panels8() const { return static_cast<const int8_t *>(data.get()); }
  int8_t at(int64_t j, int64_t i) const {
    return panels8()[(j / 16) * kPad * 16 + (i / 2) * 32 + (j % 16) * 2 + i % 2];
  }
  float scale(int64_t j, int64_t block) const {
    return static_cast<const float *>(scales.get())[((j / 16) * blocks + block) * 16 + j % 16];
  }
};

/// The group-wise kernels' scales (int8 here, int4 in gemm_q4_avx2.h): one
/// f32 per panel, block of 32 inputs and column, [panel][block][16], from
/// |scales| [n, ceil(k / group)] (group a multiple of 32; 0 past n and k).
/// Null when out of memory.
WeightMemory panelBlockScales(const float *scales, int64_t n, int64_t k, int64_t group,
                              int64_t panels, int64_t blocks);

/// W [n, k] with |scales| [n, ceil(k / group)] (group a multiple of 32). Null
/// when out of memory.
std::unique_ptr<PackedQ8> packQ8(const int8_t *w, const float *scales, int64_t n, int64_t k,
                                 int64_t group, const PackProgress &done = {});

/// Block |b| (32 inputs) of row |r| of x (f32 or bf16 |bf16|, rows of k) into
/// v[32] as f32, zeros past k, and its largest magnitude into |amax|. False
/// (amax unset) when the block holds a NaN or an infinity. The group-wise
/// kernels' activation quantizers (s8 here for int4, s16 for int8) share it.
bool loadBlock32(const void *x, bool bf16, int64_t r, int64_t k, int64_t b, float *v,
                 float &amax);

/// The activations of |rows| rows quantized per block of 32 inputs to s16:
/// q [rows, blocks * 32] (zero past k) and the blocks' scales d [rows, blocks]
/// (amax / |levels|; a block with a NaN or an infinity gets d = NaN, so its
/// row's outputs are NaN). |x| is f32 or bf16 (|bf16|), rows of k. |levels|
/// is 32767, or 127 for 8-bit activations on a CPU without VNNI (the codes of
/// quantizeS8Blocks, widened). |tiled|: in the row-tile layout instead
/// (s16TileIndex, tileScaleIndex; q holds tiledRows(rows) * blocks * 32
/// values and d tiledRows(rows) * blocks, the last tile's extra rows left
/// unwritten), which the VNNI kernel reads (gemmQ8S16Tiled).
void quantizeS16Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                       int16_t *q, float *d, float levels = 32767.0f, bool tiled = false);

/// 8-bit activations for group-wise int8 weights (`tfc compile --activation-bits
/// 8`: Q8_0's arithmetic, docs/precision.md): the activations quantized per
/// block of 32 inputs to s8 as int4's quantizeQ8Blocks does (scale amax /
/// 127), with each block's sum of codes, for avx512::gemmQ8S8 (VNNI), in its
/// row-tile layout: tiles of kTileRows rows, and per tile and block the
/// codes [8 steps of 4 inputs][kTileRows rows][4] (256 bytes), d and qsum
/// [kTileRows]. One base pointer then reaches a tile's rows at constant
/// offsets: the kernel with one pointer per row ran out of registers and
/// measured 1.07x-1.17x slower. q holds tiledRows(rows) * blocks * 32
/// bytes, d and qsum tiledRows(rows) * blocks values; the last tile's rows
/// past |rows| are left unwritten (no tile reads them). A CPU without VNNI
/// takes the same codes from quantizeS16Blocks with 127 levels into
/// gemmQ8S16 instead: AVX2 has no faster exact s8 x s8 form (vpmaddubsw needs
/// a sign trick that costs what the widening to s16 does). In
/// gemm_q4_avx2.cc, beside int4's.
void quantizeS8Blocks(const void *x, bool bf16, int64_t rows, int64_t k, int64_t blocks,
                      int8_t *q, float *d, int32_t *qsum);
constexpr int64_t kTileRows = 8;
/// The row-tile height of a call of |rows| rows: kTileRows, or |rows| when
/// fewer, so that decoding's 1 or 2 rows stay dense (8-row tiles spread one
/// row's codes over 8 times the cache lines: 1.15x-1.4x slower decode GEMVs).
inline int64_t tileHeight(int64_t rows) { return rows < kTileRows ? rows : kTileRows; }
/// The rows the row-tile layouts hold for |rows| rows: whole tiles.
inline int64_t tiledRows(int64_t rows) {
  const int64_t t = tileHeight(rows);
  return t == 0 ? 0 : (rows + t - 1) / t * t;
}
/// Where the row-tile layouts of a call of |rows| rows put input |i| of row
/// |r| (an element index): per tile of tileHeight(rows) rows T and block of
/// 32 inputs, steps of 4 bytes of each row in turn (4 s8 codes, or 2 s16),
/// [step][row][4 bytes].
inline int64_t s8TileIndex(int64_t r, int64_t i, int64_t blocks, int64_t rows) {
  const int64_t t = tileHeight(rows);
  return ((r / t) * blocks + i / 32) * (32 * t) + (i % 32) / 4 * (4 * t) + (r % t) * 4 + i % 4;
}
inline int64_t s16TileIndex(int64_t r, int64_t i, int64_t blocks, int64_t rows) {
  const int64_t t = tileHeight(rows);
  return ((r / t) * blocks + i / 32) * (32 * t) + (i % 32) / 2 * (2 * t) + (r % t) * 2 + i % 2;
}
/// Where they put block |b|'s scale (and sum) of row |r|.
inline int64_t tileScaleIndex(int64_t r, int64_t b, int64_t blocks, int64_t rows) {
  const int64_t t = tileHeight(rows);
  return ((r / t) * blocks + b) * t + r % t;
}

/// y [m, n] (row stride n) = x W^T for x from quantizeS16Blocks. Each block's
/// 32 products s16 x s8 are summed exactly in s32 (vpmaddwd: a pair is at most
/// 2 * 32767 * 128, a block 2^27) and scaled once by scale_w * d: per 16
/// columns and 2 inputs, two weight widenings (vpmovsxbw, shared by the rows
/// of a tile) and per row one broadcast, two vpmaddwd and two vpaddd.
/// Parallel over panels (OpenMP). Where the CPU has AVX512_VNNI this is
/// avx512::gemmQ8S16 (gemm_q_avx512.h), which gives the same bits and reads
/// the row-tile layout: quantize with |tiled| = gemmQ8S16Tiled().
void gemmQ8S16(const PackedQ8 &w, const int16_t *q, const float *d, int64_t m, float *y);
/// Whether gemmQ8S16 reads quantizeS16Blocks' row-tile layout (its VNNI form).
bool gemmQ8S16Tiled();
/// The AVX2 form, whatever the CPU (for the tests that compare the two).
void gemmQ8S16Avx2(const PackedQ8 &w, const int16_t *q, const float *d, int64_t m, float *y);


/// C [m, n] (row stride n) = A [m, k] (u8, row stride k) x W^T. |scratch| holds
/// 2 * m * kPad bytes (the recentred A and its absolute values). Parallel over panels (OpenMP).
void gemmU8S8(const PackedS8 &w, const uint8_t *a, int64_t m, int32_t *c, int8_t *scratch);

/// The same for u7 A (0..127: quantizeRows with 127 levels): no pair of
/// products can saturate vpmaddubsw, so A goes in as it is, one multiply-pipe
/// instruction per 32 products fewer than gemmU8S8, at half the activations'
/// resolution (docs/precision.md). |scratch| holds m * kPad bytes, used only
/// when k is not a multiple of 4.
void gemmU7S8(const PackedS8 &w, const uint8_t *a, int64_t m, int32_t *c, uint8_t *scratch);

} // namespace tfc::cpu

#endif
