//===- Reference.h - naive double-precision references of tfc's ops -*- C++ -*-===//
//
// The one copy of the test references: the kernel unit tests
// (tests/unit/kernels) check every backend's kernels against these, and the
// lit suite's oracle, tfc-ref (tests/oracle), evaluates printed tfc IR with
// them. Each function is the formula of its op in ir/TfcOps.td, computed in
// double with plain loops over row-major data; none is meant to be fast.
//
// The enums are numbered as the dialect's (ir/TfcOps.td), and so are the CPU
// backend's MaskKind and NormVariant and the plan's integer attributes that
// the kernel tests pass: callers convert with a static_cast.
//
// No MLIR, no backend, no GoogleTest: plain C++ that anything under tests/ may
// link (the TfcTestReference library).
//
//===----------------------------------------------------------------------===//
#ifndef TFC_TESTS_REFERENCE_REFERENCE_H
#define TFC_TESTS_REFERENCE_REFERENCE_H

#include <cstdint>
#include <functional>
#include <vector>

namespace tfc::ref {

/// The activation fused into a linear layer (tfc.fused_linear's `activation`).
enum class Activation : int { None = 0, Relu = 1, Gelu = 2, GeluTanh = 3, Silu = 4 };

/// tfc.layer_norm's variants.
enum class NormVariant : int {
  LayerNorm = 0, ///< gamma * (x - mean) / sqrt(var_biased + eps) + beta (nn.LayerNorm)
  StdNorm = 1,   ///< gamma * (x - mean) / (std_unbiased + eps) + beta (the tutorials' Norm)
  RmsNorm = 2,   ///< gamma * x / sqrt(mean(x^2) + eps), no beta (T5)
};

/// tfc.attention's mask kinds.
enum class Mask : int { None = 0, KeyPadding = 1, Causal = 2, PaddingCausal = 3, Additive = 4 };

// --- Shapes -----------------------------------------------------------------------

/// Number of elements of |shape| (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);

/// numpy broadcasting of two shapes (aligned on the right, a 1 stretches). The
/// caller has checked that they broadcast.
std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a, const std::vector<int64_t> &b);

/// The flat index into a row-major tensor of shape |in| that broadcasts to the
/// flat element |e| of a tensor of shape |out|.
int64_t broadcastIndex(const std::vector<int64_t> &out, const std::vector<int64_t> &in, int64_t e);

// --- Elementwise ------------------------------------------------------------------

/// GELU: 0.5 x (1 + erf(x / sqrt 2)), or with |tanhApprox| the tanh form
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
double gelu(double x, bool tanhApprox);
/// SiLU (swish), x * sigmoid(x), as torch.nn.functional.silu.
double silu(double x);

/// |act| applied to |x|.
double activate(Activation act, double x);

// --- Linear algebra ---------------------------------------------------------------

/// y = act(x W^T + bias) * multiplier + residual, row by row (tfc.linear /
/// tfc.fused_linear): x is [rows, k], w is [n, k], bias [n], residual and
/// multiplier [rows, n] may be null, y is [rows, n].
void linear(int64_t rows, int64_t k, int64_t n, const double *x, const double *w,
            const double *bias, Activation act, const double *residual, double *y,
            const double *multiplier = nullptr);

/// Batched matrix product with broadcast batch dims, as torch.matmul
/// (tfc.matmul): [..., M, K] x [..., K, N] (with |transposeB|, [..., N, K]).
/// Both operands have rank >= 2. Returns the result; its shape in |outShape|.
std::vector<double> matmul(const std::vector<int64_t> &aShape, const double *a,
                           const std::vector<int64_t> &bShape, const double *b, bool transposeB,
                           std::vector<int64_t> &outShape);

// --- Normalizations ---------------------------------------------------------------

/// Softmax (or with |logSoftmax| log-softmax) over the middle index of x viewed
/// as [outer, len, inner]. A slice whose entries are all -inf gives NaN, as
/// PyTorch's does.
void softmax(const double *x, int64_t outer, int64_t len, int64_t inner, bool logSoftmax,
             double *out);

/// tfc.layer_norm over rows of |dim| values: row r of x starts at x + r * xStride,
/// row r of out at out + r * dim. |gamma| and |beta| ([dim]) may be null (1 and
/// 0). std_norm of a single value is NaN (its unbiased std is undefined).
void layerNorm(NormVariant variant, int64_t rows, int64_t dim, const double *x, int64_t xStride,
               const double *gamma, const double *beta, double eps, double *out);

// --- Attention --------------------------------------------------------------------

/// One multi-head attention call, as the unfused tutorial code computes it: per
/// batch b, head h and query i, the scores s_j = scale * q_i . k_j (plus the
/// additive mask), masked scores set to |maskValue|, softmax over the keys,
/// times V; the heads side by side in the output.
///
/// Element d of head h of query row i of batch b is at
/// q[b * qBatchStride + i * qRowStride + h * headDim + d] (likewise k and v over
/// the keys, with vHeadDim); a stride of 0 means the contiguous default
/// ([batch, len, heads * dim]).
struct Attention {
  int64_t batch = 1, qLen = 1, kvLen = 1, heads = 1, headDim = 1;
  int64_t vHeadDim = 0; ///< 0: headDim
  /// Key/value heads (grouped-query attention): query head h reads key/value
  /// head h / (heads / kvHeads). 0: heads.
  int64_t kvHeads = 0;
  const double *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t qRowStride = 0, kRowStride = 0, vRowStride = 0;
  int64_t qBatchStride = 0, kBatchStride = 0, vBatchStride = 0;
  double scale = 1.0;
  Mask mask = Mask::None;
  double maskValue = -1e9;
  /// KeyPadding and PaddingCausal: the token of key j of batch b; a key whose
  /// token is |padId| is masked.
  std::function<int64_t(int64_t b, int64_t j)> keyToken;
  int64_t padId = 0;
  /// Additive: the value added to the score of (b, h, i, j).
  std::function<double(int64_t b, int64_t h, int64_t i, int64_t j)> additive;
  /// A relative position bias (T5), any mask: added to the score of
  /// (b, h, i, j) before the mask; empty for none.
  std::function<double(int64_t b, int64_t h, int64_t i, int64_t j)> bias;
  /// Causal and PaddingCausal: query i is at position i + qPosOffset and does
  /// not see keys after it (incremental decoding starts past 0).
  int64_t qPosOffset = 0;
  /// Causal and PaddingCausal: a sliding window (0: none); query i also does
  /// not see keys j <= i + qPosOffset - window.
  int64_t window = 0;
  /// Soft-capping of the scaled scores, softcap * tanh(s / softcap), before
  /// any bias and mask (Gemma 2); 0: none.
  double softcap = 0;
  /// Round every score (scaled, then with the additive mask added) to f32, as
  /// unfused f32 code materializes them. Off: scores stay in double.
  bool f32Scores = false;
};

/// The output of |a|, [batch, qLen, heads * vHeadDim]. A row whose scores are
/// all -inf (every key masked with -inf) is NaN, as PyTorch's softmax gives.
std::vector<double> attention(const Attention &a);

} // namespace tfc::ref

#endif // TFC_TESTS_REFERENCE_REFERENCE_H
