//===- elementwise_cpu.h - the unary kernels, vectorized and threaded -*- C++ -*-===//
//
// The elementwise kernels of tfc/unary.def over a contiguous f32 tensor. Each
// is one pass over memory, so a plain scalar loop on one thread is what it
// used to be; at a Transformer FFN's size (Marian's swish over [rows, 2048]
// every decoding step) that loop cost as much as the FFN's GEMM share on an
// AVX2 CPU and did not shrink with a second thread (docs/performance.md).
// Here the loop is split across the OpenMP threads above a size where that
// pays, and SiLU and tanh-GELU use the attention kernel's vexp (about 1 ulp
// of expf) in vectors; the others expand unary.def's formula as before.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_ELEMENTWISE_CPU_H
#define TFC_BACKENDS_CPU_ELEMENTWISE_CPU_H

#include <cstdint>

namespace tfc::cpu {

/// o[i] = f(a[i]) for i < n, with f the unary.def formula of |kernel| (a
/// TFC_KERNEL_* id that has a TFC_UNARY row) and |mode| its first int
/// attribute. Returns false, writing nothing, for a kernel with no row.
bool runUnary(int kernel, int64_t mode, const float *a, float *o, int64_t n);

/// y[i] = act(y[i]) for i < n: the unary.def row that activation |act| (a
/// tfc_act_t) names in tfc/enums.def; nothing for TFC_ACT_NONE. The fused
/// linear's epilogue, wherever oneDNN has no post-op for it.
void applyActivation(int64_t act, float *y, int64_t n);

/// applyActivation on this thread only: for one row of a GEMM's epilogue,
/// inside the caller's parallel loop (a parallel region per row costs as much
/// as the row's activation).
void applyActivationRow(int64_t act, float *y, int64_t n);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_ELEMENTWISE_CPU_H
