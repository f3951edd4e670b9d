//===- linear_dnnl.h - linear layers on oneDNN matmul ---------------------===//
//
// y = act(x W^T + b) + residual on oneDNN's matmul with the weights reordered
// once, at model load, into the layout oneDNN prefers (format_tag::any), and the
// bias, activation and residual add as post-ops. We use oneDNN rather than our own
// GEMM because its brgemm kernels reach this machine's practical ceilings
// (../shared/BUILD-NOTES.md).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_LINEAR_DNNL_H
#define TFC_BACKENDS_CPU_LINEAR_DNNL_H

#include <cstdint>
#include <memory>
#include <string>

namespace tfc::cpu {

/// The weights of one linear layer [N, K] in oneDNN's preferred layout, plus the
/// matmul primitives created for it (per row count and epilogue). Immutable after
/// packing except for the internally synchronized primitive cache, so one
/// instance serves every session and thread.
class PackedLinear;

/// Packs W [n, k] (row-major, as torch.nn.Linear stores it). Returns null and sets
/// |err| if oneDNN cannot.
std::shared_ptr<PackedLinear> packLinear(const float *w, int64_t n, int64_t k,
                                         std::string &err);

/// y[rows, n] = act(x[rows, k] W^T + bias) + residual; act: 0 none, 1 relu,
/// 2 gelu (erf), 3 gelu (tanh). bias and residual may be null. Returns "" or an
/// error message.
std::string runPackedLinear(const PackedLinear &w, const float *x, int64_t rows,
                            const float *bias, const float *residual, int act, float *y);

} // namespace tfc::cpu

#endif
