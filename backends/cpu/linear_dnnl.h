//===- linear_dnnl.h - linear layers on oneDNN matmul ---------------------===//
//
// y = act(x W^T + b) + residual on oneDNN's matmul with the weights reordered
// once, at model load, into the layout oneDNN prefers (format_tag::any), and the
// bias, activation and residual add as post-ops. We use oneDNN rather than our own
// GEMM because its brgemm kernels reach this machine's practical ceilings
// (../shared/BUILD-NOTES.md), and pick AMX, AVX-512 BF16 or VNNI by themselves.
//
// Three weight precisions:
// - f32: x and y f32.
// - bf16: x is converted to bf16 if it is f32; the GEMM accumulates in f32; y is
//   f32 or bf16; the bias, activation and residual are applied to the f32 sums.
// - int8 (per-output-channel symmetric, scales from the compiler): x is quantized
//   per row at run time (quantizeRows), the s8 x s8 GEMM accumulates in s32, and
//   one pass applies scale_x[r] * scale_w[n], bias, activation and residual.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_LINEAR_DNNL_H
#define TFC_BACKENDS_CPU_LINEAR_DNNL_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tfc::cpu {

/// The weights of one linear layer [N, K] in oneDNN's preferred layout, plus the
/// matmul primitives created for it (per row count and epilogue). Immutable after
/// packing except for the internally synchronized primitive cache, so one
/// instance serves every session and thread.
class PackedLinear;

/// Packs W [n, k] (row-major, as torch.nn.Linear stores it) of |dtype|
/// (TFC_DTYPE_F32, _BF16, _I8 or _I4). |scales|: i8 [n] or i4 [n, ceil(k /
/// group)], copied. Returns null and sets |err| if
/// it cannot.
std::shared_ptr<PackedLinear> packLinear(const void *w, uint32_t dtype, int64_t n, int64_t k,
                                         const float *scales, int64_t group, std::string &err,
                                         const std::function<void(uint64_t, uint64_t)> &done = {});

/// One call: y[rows, n] = act(x[rows, k] W^T + bias) + residual; act: 0 none,
/// 1 relu, 2 gelu (erf), 3 gelu (tanh). bias ([n]) and residual ([rows, n]) are
/// f32 and may be null. x and y are f32 or bf16 (tfc_dtype_t).
struct GemmCall {
  const void *x = nullptr;
  uint32_t xDtype = 0;
  int64_t rows = 0;
  const float *bias = nullptr;
  const float *residual = nullptr;
  /// y = act(x W^T + b) * multiplier + residual (a gated FFN's product; f32
  /// [rows, n] like the residual).
  const float *multiplier = nullptr;
  int act = 0;
  /// Group-wise int8 weights: the bits their activation blocks are quantized
  /// to, 16 (0: the default) or 8 (`tfc compile --activation-bits 8`).
  int actBits = 0;
  void *y = nullptr;
  uint32_t yDtype = 0;
};

/// Returns "" or an error message.
std::string runPackedLinear(const PackedLinear &w, const GemmCall &c);

/// The oneDNN primitives made so far (matmuls and eltwises), shared by every
/// weight of a shape: each row count up to 128 makes its own, and larger
/// GEMMs run in slices of 128 rows, so the count stays bounded whatever row
/// counts a server sees. For tests and diagnostics.
size_t dnnlPrimitivesMade();

/// Row j of W, exactly as stored (an i8 row dequantized with its scale, as
/// q * scale), times |mul|, into out[k] (or added to it with |accumulate|),
/// read from the packed copy: a tied token table (an embedding that shares the
/// lm_head's weight) then reads the copy the lm_head keeps instead of faulting
/// model.bin's pages back in, so the table is resident once. False, writing
/// nothing, where the packed layout has no plain rows (int4; an i8 row the
/// packing clipped; a oneDNN format that is not blocked or carries extra data).
bool packedRowTimes(const PackedLinear &w, int64_t j, float mul, float *out, bool accumulate);

} // namespace tfc::cpu

#endif
