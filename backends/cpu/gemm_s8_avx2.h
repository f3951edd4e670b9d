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
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_GEMM_S8_AVX2_H
#define TFC_BACKENDS_CPU_GEMM_S8_AVX2_H

#include "backends/cpu/weight_memory.h"

#include <cstdint>
#include <memory>

namespace tfc::cpu {

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

/// Null when out of memory.
std::unique_ptr<PackedS8> packS8(const int8_t *w, int64_t n, int64_t k);

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
