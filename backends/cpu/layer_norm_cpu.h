//===- layer_norm_cpu.h - Row normalization on the CPU -----------*- C++ -*-===//
//
// The CPU kernel behind `tfc.layer_norm`: normalization over the last axis in
// the two variants the bundled models use, nn.LayerNorm and the tutorials'
// Norm class (unbiased std, eps added to the std rather than the variance).
// Statistics are accumulated in double and the input is centered before it is
// squared (two passes), so rows with a large mean and a small spread keep
// their precision. oneDNN 2.6's layer normalization is a slow reference
// implementation here (see shared/BUILD-NOTES.md), hence this kernel.
//
// Plain C++17, no MLIR/LLVM dependency: the runtime links it. f32 only.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_BACKENDS_CPU_LAYER_NORM_CPU_H
#define TFC_BACKENDS_CPU_LAYER_NORM_CPU_H

#include "tfc/abi.h"

#include <cstdint>

namespace tfc::cpu {

/// The normalization formula: tfc/enums.def's TFC_NORM_* (layer_norm,
/// std_norm, rms_norm).
using NormVariant = tfc_norm_t;

/// Normalizes each of the `rows` rows of `dim` floats of x (row r at
/// x + r * x_stride) into y (row r at y + r * y_stride), then applies the
/// per-column gamma and beta ([dim] each; a null gamma means 1, a null beta
/// means 0).
///
/// As in PyTorch, StdNorm of a one-element row is NaN (the unbiased std of a
/// single value is 0/0); a constant row gives beta in both variants (eps > 0).
/// y may be x itself (same stride); otherwise they must not overlap. Only the
/// dim columns of each y row are written. Parallel over rows with OpenMP;
/// bitwise the same for any thread count. Thread-safe: no global state.
void layerNorm(NormVariant v, int64_t rows, int64_t dim, const float *x, int64_t x_stride,
               const float *gamma, const float *beta, float eps, float *y, int64_t y_stride);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_LAYER_NORM_CPU_H
