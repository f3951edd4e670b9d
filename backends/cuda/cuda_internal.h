//===- cuda_internal.h - shared by the CUDA backend's sources -------------===//
//
// Not a public header: the Context's definition, the error helpers, and the
// argument structs and launchers of the device kernels (kernels_cuda.cu,
// attention_cuda.cu) that the host-side dispatch (kernels_cuda.cc) and the
// GEMMs (linear_cuda.cc) call. Host code only (the CUDA runtime API, no
// device code), so both nvcc and the C++ compiler include it.
//
// Most kernels read and write their tensors through the element type given at
// run time (tfc_dtype_t) rather than through a template parameter: the switch
// is uniform across a launch, so it costs a few instructions per element of a
// memory-bound kernel, and it keeps the number of instantiations (and CI's
// compile time) small. Mixed dtypes (an f32 bias on a bf16 layer, an f32 KV
// cache behind bf16 activations) come for free.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CUDA_CUDA_INTERNAL_H
#define TFC_BACKENDS_CUDA_CUDA_INTERNAL_H

#include "backends/cuda/kernels_cuda.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

namespace tfc::cuda {

/// The largest rank of a tensor in model.bin (docs/model-bin.md).
constexpr int kMaxRank = 8;

/// "CUDA error in <what>: <reason>", or "" for cudaSuccess.
std::string cudaMessage(cudaError_t e, const char *what);

/// A CUDA runtime call's result as a Status with cudaMessage's text: OK for
/// cudaSuccess, OutOfMemory for cudaErrorMemoryAllocation, Internal otherwise
/// (a device failure the caller did not cause).
Status cudaStatus(cudaError_t e, const char *what);

/// Returns the Status of a failed CUDA runtime call from the calling function.
#define TFC_CUDA_RETURN_IF_ERROR(expr, what)                                                  \
  do {                                                                                        \
    cudaError_t tfc_cuda_err_ = (expr);                                                       \
    if (tfc_cuda_err_ != cudaSuccess)                                                         \
      return ::tfc::cuda::cudaStatus(tfc_cuda_err_, what);                                    \
  } while (0)

/// Data errors found by kernels (see kernels_cuda.h). The first one wins.
enum DeviceErrorCode : uint32_t {
  kErrNone = 0,
  kErrTokenId = 1,        ///< a: the id, b: the table's rows
  kErrPosition = 2,       ///< a: the position, b: the positional table's rows
  kErrNegativeOffset = 3, ///< a: the offset
  kErrDecodePosition = 4, ///< a: pos + T, b: the KV cache's length
  kErrKvBlock = 5,        ///< a: the block (cache row), b: the cache's rows
};
struct DeviceError {
  uint32_t code;
  uint32_t unused;
  long long a, b;
};

/// cuBLASLt state of a Context (linear_cuda.cc).
struct GemmState;
struct GemmStateDeleter {
  void operator()(GemmState *s) const;
};
/// Creates |ctx|'s GemmState (handle, workspace). Called by createContext.
Status createGemmState(Context &ctx);

class Context {
public:
  int device = 0;
  cudaStream_t stream = nullptr;
  /// The data-error record in device memory, and its page-locked host mirror.
  DeviceError *error = nullptr;
  DeviceError *errorHost = nullptr;
  /// f32 scratch for GEMMs whose epilogue runs as a separate kernel.
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  std::unique_ptr<GemmState, GemmStateDeleter> gemm;

  /// Makes this Context's device current on the calling thread.
  Status activate();
  /// |bytes| of scratch (grown, never shrunk; growing waits for the device).
  Status scratchFor(size_t bytes, void **out);
  /// A second scratch, for a quantized weight dequantized for one GEMM
  /// (runLinear then takes the first for its own operands).
  void *weightScratch = nullptr;
  size_t weightScratchBytes = 0;
  Status weightScratchFor(size_t bytes, void **out);
  ~Context();
};

// --- Elementwise kernels (kernels_cuda.cu) -------------------------------

/// The output's shape and, per input, its strides in elements over that shape
/// (0 on broadcast dims), with adjacent dims merged where every operand allows.
struct Broadcast {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {};
};

enum class EwOp : int32_t {
  Add,
  Sub,
  Mul,
  Div,
  And,
  Not,
  Compare, ///< pred: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge
  Cast,
  MaskedFill, ///< in0 ? value : in1 ... see EwArgs
  Select,
  Unary, ///< a row of tfc/unary.def: EwArgs::kernel, with pred as its mode
  Copy, ///< raw element copy (transpose, slice, views)
};

/// One elementwise launch: out[e] = op(in0[off0(e)], in1[off1(e)], in2[off2(e)]).
/// MaskedFill: in0 is the input, in1 the mask. Select: in0 the condition.
struct EwArgs {
  EwOp op = EwOp::Copy;
  int32_t pred = 0;
  uint32_t kernel = 0; ///< Unary: the tfc_kernel_t
  int32_t nin = 1;
  const void *in[3] = {};
  uint32_t inType[3] = {};
  void *out = nullptr;
  uint32_t outType = 0;
  float value = 0;
  int64_t n = 0;
  Broadcast bc;
};
Status launchElementwise(const EwArgs &a, cudaStream_t s);
/// n contiguous elements of |in| (dtype inType) into |out| as outType.
Status launchCast(const void *in, uint32_t inType, void *out, uint32_t outType, int64_t n,
                  cudaStream_t s);

/// A tensor seen as [outer, len, inner] around one axis.
struct AxisArgs {
  const void *x = nullptr;
  uint32_t xType = 0;
  void *y = nullptr;
  uint32_t yType = 0;
  int64_t outer = 1, len = 1, inner = 1;
};
Status launchReduce(const AxisArgs &a, bool mean, cudaStream_t s);
Status launchSoftmax(const AxisArgs &a, bool log, cudaStream_t s);

struct NormArgs {
  const void *x = nullptr, *gamma = nullptr, *beta = nullptr;
  uint32_t xType = 0, gammaType = 0, betaType = 0;
  void *y = nullptr;
  uint32_t yType = 0;
  int64_t rows = 0, dim = 0;
  int32_t variant = 0; ///< 0 nn.LayerNorm, 1 the tutorials' Norm (layer_norm_cpu.h)
  float eps = 0;
};
Status launchLayerNorm(const NormArgs &a, cudaStream_t s);

/// token_embedding (and embedding: no positions, no types, scale 1).
struct EmbedArgs {
  const void *ids = nullptr;
  uint32_t idsType = 0;
  int64_t tokens = 0, seq = 1; ///< seq: ids' dim 1, for the positions
  const void *table = nullptr;
  uint32_t tableType = 0;
  int64_t vocab = 0, dim = 0;
  /// An i8 table's scales: one per row (group 0), or [vocab, ceil(dim / group)].
  const float *rowScales = nullptr;
  int64_t group = 0;
  float scale = 1;
  const void *typeIds = nullptr, *typeTable = nullptr;
  uint32_t typeIdsType = 0, typeTableType = 0;
  int64_t typeVocab = 0;
  const void *pos = nullptr; ///< the positional table [posRows, dim], or null
  uint32_t posType = 0;
  int64_t posRows = 0;
  int32_t axis = 1;
  const void *offset = nullptr; ///< device scalar or [rows] (decode_step), or null
  uint32_t offsetType = 0;
  bool offsetPerRow = false; ///< offset holds one value per row of the ids
  void *out = nullptr;
  uint32_t outType = 0;
};
Status launchEmbedding(const EmbedArgs &a, DeviceError *err, cudaStream_t s);

/// y[r, j] = act(acc[r, j] + bias[j]) * mul[r, j] + res[r, j], with act the
/// tfc/unary.def row actKernel in mode actMode (-1: none), as FUSED_LINEAR's
/// activation names it in tfc/enums.def.
struct EpilogueArgs {
  const void *acc = nullptr, *bias = nullptr, *res = nullptr, *mul = nullptr;
  uint32_t accType = 0, biasType = 0, resType = 0, mulType = 0;
  void *out = nullptr;
  uint32_t outType = 0;
  int64_t rows = 0, n = 0;
  int32_t actKernel = -1, actMode = 0;
};
Status launchLinearEpilogue(const EpilogueArgs &a, cudaStream_t s);

/// A linear layer's int8 or int4 weight [n, k] as model.bin stores it
/// (docs/model-bin.md): element [r, c] is scales[r * groups + c / group] *
/// q[r, c] with groups = ceil(k / group), or scales[r] when group is 0; int4
/// is two's complement, element e in the low nibble of byte e / 2 when e is
/// even, the high nibble when odd.
struct QuantWeightArgs {
  const void *q = nullptr;
  uint32_t qType = 0; ///< TFC_DTYPE_I8 or TFC_DTYPE_I4
  const float *scales = nullptr;
  int64_t n = 0, k = 0, group = 0;
};
/// The rows up to which a quantized linear layer runs as a GEMV on the
/// quantized weight (decoding); more rows dequantize it for cuBLAS.
constexpr int64_t kQuantGemvRows = 8;
/// acc[r, j] = sum_c x[r, c] * w[j, c], f32, for rows <= kQuantGemvRows: one
/// warp per output column, reading the weight's bytes once.
Status launchQuantGemv(const QuantWeightArgs &w, const void *x, uint32_t xType, int64_t rows,
                       float *acc, cudaStream_t s);
/// The weight as f32 [n, k]: q * scale, exact.
Status launchDequantize(const QuantWeightArgs &w, float *out, cudaStream_t s);

/// k, v [B, T, dk|dv] into the caches [>=B, L, dk|dv] at rows pos .. pos+T-1,
/// with pos read from device memory; records kErrDecodePosition instead when
/// pos < 0 or pos + T is past the row's positions, kErrKvBlock for a block
/// index outside the caches.
struct CacheWriteArgs {
  const void *k = nullptr, *v = nullptr;
  uint32_t kType = 0, vType = 0;
  void *kc = nullptr, *vc = nullptr;
  uint32_t kcType = 0, vcType = 0;
  int64_t batch = 0, steps = 0, len = 0, dk = 0, dv = 0;
  const void *pos = nullptr;
  uint32_t posType = 0;
  bool posPerRow = false; ///< pos holds one position per batch row
  /// A block table (i64 [batch, blocksPerRow]), or null: cache row b. With
  /// one, the caches are [cacheRows, len, D] blocks and row b's position p is
  /// at p % len of block table[b][p / len]; a row holds blocksPerRow * len
  /// positions.
  const int64_t *table = nullptr;
  int64_t blocksPerRow = 1;
  int64_t cacheRows = 0;
  /// A folded-in rotary (tfc-fuse-rotary), or null: k is rotated by its
  /// position (pairs of |half| in each head of |headDim|, interleaved or
  /// not) as it is written, and q [batch * steps, qWidth] into qOut (f32).
  const float *invFreq = nullptr;
  int64_t half = 0, headDim = 0, qWidth = 0;
  bool interleaved = false;
  const void *q = nullptr;
  uint32_t qType = 0;
  float *qOut = nullptr;
};
Status launchCacheWrite(const CacheWriteArgs &a, DeviceError *err, cudaStream_t s);

Status launchConvertF32(const float *src, void *dst, uint32_t dtype, int64_t n, cudaStream_t s);
/// out[i] = i (positions), i64 or i32.
Status launchIota(void *out, uint32_t dtype, int64_t n, cudaStream_t s);
/// RoBERTa's positions of ids [rows, seq] (kernel_rules.h checked the shapes).
Status launchPaddedPositions(const void *ids, uint32_t idType, void *out, int64_t rows, int64_t seq,
                             int64_t pad, cudaStream_t s);
/// out[i, j] = j <= i, S x S bytes.
Status launchNopeak(void *out, int64_t seq, cudaStream_t s);
/// T5's relative position bias [1, H, sq, sk] f32 from its [buckets, H] table.
Status launchRelativeBias(const float *table, int64_t buckets, int64_t heads, float *out,
                          int64_t sq, int64_t sk, int bidirectional, int64_t maxDistance,
                          cudaStream_t s);

// --- Attention (attention_cuda.cu) ----------------------------------------

/// Layout and masks of one attention launch; the fields of
/// tfc::cpu::AttentionParams, with strides in elements and batch strides
/// resolved (never 0), plus the dtypes and, for cached attention, the device
/// scalar `pos` from which kv_len = pos + q_len and the query offset = pos
/// are read (the launch does nothing when pos is out of range: the cache
/// write has recorded the error).
struct AttnArgs {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *out = nullptr;
  uint32_t qType = 0, kType = 0, vType = 0, outType = 0;
  int64_t batch = 0, heads = 0, qLen = 0, kvLen = 0, dk = 0, dv = 0;
  /// Query heads per key/value head (grouped-query attention): query head h
  /// reads key/value head h / group.
  int64_t group = 1;
  int64_t window = 0; ///< a sliding window (causal only; 0: none)
  float softcap = 0.0f; ///< c * tanh(s / c) of the scaled scores (0: none)
  int64_t qRow = 0, kRow = 0, vRow = 0, oRow = 0;
  int64_t qBatch = 0, kBatch = 0, vBatch = 0, oBatch = 0;
  int64_t qPosOffset = 0;
  float scale = 1;
  int32_t mask = 0; ///< a tfc_mask_t (tfc/enums.def)
  float maskValue = -1e9f;
  int64_t padId = 0;
  const void *tokens = nullptr;
  uint32_t tokensType = 0;
  int64_t tokensBatch = 0;
  const void *add = nullptr;
  uint32_t addType = 0;
  int64_t addB = 0, addH = 0, addQ = 0;
  const void *pos = nullptr;
  uint32_t posType = 0;
  bool posPerRow = false; ///< cached attention: pos holds one position per batch row
  /// A block table (i64 [batch, blocksPerRow], device memory), or null: row
  /// b's keys are k[b]. With one, k and v are [numBlocks, blockLen, D] blocks
  /// and row b's key j is at position j % blockLen of block
  /// table[b][j / blockLen]: a paged KV cache (cached attention), or the
  /// blocks of encoder memory that an item's rows share (cross-attention).
  const int64_t *table = nullptr;
  int64_t blocksPerRow = 0, blockLen = 0, numBlocks = 0;
  int64_t cacheLen = 0; ///< cached attention: the positions a row can hold
  /// T5's relative position bias: the [relBuckets, heads] f32 table, or null;
  /// score (i, j) gets relBias[bucket(j - i - qOffset) * heads + h] added
  /// before the masks (tfc/relative_bucket.h).
  const float *relBias = nullptr;
  int64_t relBuckets = 0, relMaxDistance = 128;
  int32_t relBidirectional = 0;
};
Status launchAttention(const AttnArgs &a, cudaStream_t s);

/// ROTARY: each head of x [rows = B * S, heads * headDim] rotated by its
/// token's position (s + offset[b or 0], offset may be null), pairs (i, i +
/// half) or (2i, 2i + 1) with interleaved; features past 2 * half pass through.
struct RotaryArgs {
  const void *x = nullptr;
  void *out = nullptr;
  uint32_t xType = 0, outType = 0;
  const float *invFreq = nullptr;
  const int64_t *offset = nullptr; ///< device; null: 0
  bool offsetPerRow = false;
  int64_t batch = 0, seq = 0, heads = 0, headDim = 0, half = 0;
  bool interleaved = false;
};
Status launchRotary(const RotaryArgs &a, DeviceError *err, cudaStream_t s);

// --- GEMMs on cuBLASLt (linear_cuda.cc) -------------------------------------

/// y = act(x W^T + bias) * multiplier + residual (LINEAR, FUSED_LINEAR); bias,
/// residual, multiplier may be null; act a tfc_act_t (tfc/enums.def).
Status runLinear(Context &ctx, const Tensor &x, const Tensor &w, const Tensor *bias,
                 const Tensor *residual, const Tensor *multiplier, int act, Tensor &out);
/// MATMUL: out[..., M, N] = a[..., M, K] b[..., K, N] (b [..., N, K] if transB),
/// batch dims broadcast.
Status runMatmul(Context &ctx, const Tensor &a, const Tensor &b, bool transB, Tensor &out);

} // namespace tfc::cuda

#endif // TFC_BACKENDS_CUDA_CUDA_INTERNAL_H
