//===- kernels_cuda.cc - CUDA kernel dispatch ------------------------------===//
//
// Host side of the CUDA backend, part two: runKernel(), which checks operands,
// works out shapes, strides and broadcasting exactly as kernels_cpu.cc does,
// and launches the kernels of kernels_cuda.cu and attention_cuda.cu or the
// cuBLASLt GEMMs of linear_cuda.cc on the Context's stream. Nothing here waits
// for the device. Contexts and memory are in context_cuda.cc.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_internal.h"

#include "backends/kernel_rules.h"
#include "tfc/abi.h"

#include <algorithm>
#include <cmath>

namespace tfc::cuda {

// --- Dispatch --------------------------------------------------------------------

namespace {

/// Merges adjacent dims of |shape| that every operand walks contiguously
/// (stride[d] == stride[d + 1] * shape[d + 1]) and drops dims of size 1, so
/// that the common same-shape case becomes one flat dim.
void coalesce(const std::vector<int64_t> &shape, std::vector<std::vector<int64_t>> &strides,
              Broadcast &bc) {
  const size_t nin = strides.size();
  std::vector<int64_t> sh;
  std::vector<std::vector<int64_t>> st(nin);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !sh.empty();
    for (size_t k = 0; k < nin && merge; ++k)
      merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      sh.back() *= shape[d];
      for (size_t k = 0; k < nin; ++k)
        st[k].back() = strides[k][d];
    } else {
      sh.push_back(shape[d]);
      for (size_t k = 0; k < nin; ++k)
        st[k].push_back(strides[k][d]);
    }
  }
  bc = Broadcast{};
  bc.rank = static_cast<int>(sh.size());
  for (size_t d = 0; d < sh.size(); ++d) {
    bc.shape[d] = sh[d];
    for (size_t k = 0; k < nin; ++k)
      bc.stride[k][d] = st[k][d];
  }
}

/// Row-major strides of |shape|, in elements.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

/// Each input's strides over |out| with numpy broadcasting (0 on broadcast
/// dims), as kernels_cpu.cc's broadcastStrides, then coalesced.
Status broadcastOver(const Tensor &out, const std::vector<const Tensor *> &ins, Broadcast &bc) {
  const size_t r = out.shape.size();
  if (r > static_cast<size_t>(kMaxRank))
    return Status::unsupported("rank " + std::to_string(r) + " is above the CUDA backend's " +
                               std::to_string(kMaxRank));
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor *t : ins) {
    if (t->shape.size() > r)
      return Status::invalidModel("an operand of rank " + std::to_string(t->shape.size()) +
                                  " does not broadcast to rank " + std::to_string(r));
    std::vector<int64_t> st(r, 0);
    int64_t s = 1;
    for (size_t i = 0; i < t->shape.size(); ++i) {
      const size_t d = t->shape.size() - 1 - i, o = r - 1 - i;
      st[o] = t->shape[d] == 1 ? 0 : s;
      s *= t->shape[d];
    }
    strides.push_back(std::move(st));
  }
  coalesce(out.shape, strides, bc);
  return Status::ok();
}

/// Splits |shape| around |axis| into outer x len x inner.
void aroundAxis(const std::vector<int64_t> &shape, int64_t axis, AxisArgs &a) {
  a.outer = 1;
  a.inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    a.outer *= shape[i];
  a.len = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    a.inner *= shape[i];
}

Status elementwise(Context &ctx, EwOp op, int32_t pred, float value,
                   const std::vector<const Tensor *> &ins, Tensor &out) {
  EwArgs a;
  a.op = op;
  a.pred = pred;
  a.value = value;
  a.nin = static_cast<int32_t>(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) {
    a.in[k] = ins[k]->data;
    a.inType[k] = ins[k]->dtype;
  }
  a.out = out.data;
  a.outType = out.dtype;
  a.n = out.numel();
  TFC_RETURN_IF_ERROR(broadcastOver(out, ins, a.bc));
  return launchElementwise(a, ctx.stream);
}

/// A kernel of tfc/unary.def on |x|.
Status unary(Context &ctx, uint32_t kernel, int64_t mode, const Tensor &x, Tensor &out) {
  EwArgs a;
  a.op = EwOp::Unary;
  a.kernel = kernel;
  a.pred = static_cast<int32_t>(mode);
  a.nin = 1;
  a.in[0] = x.data;
  a.inType[0] = x.dtype;
  a.out = out.data;
  a.outType = out.dtype;
  a.n = out.numel();
  TFC_RETURN_IF_ERROR(broadcastOver(out, {&x}, a.bc));
  return launchElementwise(a, ctx.stream);
}

/// An attention's relative position bias (T5): its [num_buckets, H] f32
/// table (the shape rules checked it).
void setRelativeBias(AttnArgs &a, const Tensor *table, bool bidirectional, int64_t maxDistance) {
  if (!table)
    return;
  a.relBias = static_cast<const float *>(table->data);
  a.relBuckets = table->shape[0];
  a.relBidirectional = bidirectional ? 1 : 0;
  a.relMaxDistance = maxDistance;
}

} // namespace

Status launchCast(const void *in, uint32_t inType, void *out, uint32_t outType, int64_t n,
                  cudaStream_t s) {
  EwArgs c;
  c.op = EwOp::Cast;
  c.in[0] = in;
  c.inType[0] = inType;
  c.out = out;
  c.outType = outType;
  c.n = n;
  c.bc.rank = 1;
  c.bc.shape[0] = n;
  c.bc.stride[0][0] = 1;
  return launchElementwise(c, s);
}

Status run(Context &ctx, const AttentionCall &c) {
  const Tensor &q = *c.q, &k = *c.k, &v = *c.v;
  Tensor &out = *c.out;
  const auto &at = c.attrs;
  AttnArgs a;
  a.q = q.data;
  a.k = k.data;
  a.v = v.data;
  a.out = out.data;
  a.qType = q.dtype;
  a.kType = k.dtype;
  a.vType = v.dtype;
  a.outType = out.dtype;
  a.batch = q.shape[0];
  a.qLen = q.shape[1];
  a.kvLen = k.shape[1];
  a.heads = at.num_heads;
  a.group = at.num_kv_heads > 0 ? at.num_heads / at.num_kv_heads : 1;
  a.window = at.window;
  a.softcap = (float)at.softcap;
  a.dk = q.shape[2] / a.heads;
  a.dv = v.shape[2] * a.group / a.heads;
  a.qRow = q.shape[2];
  a.kRow = k.shape[2];
  a.vRow = v.shape[2];
  a.oRow = out.shape[2];
  a.qBatch = a.qLen * a.qRow;
  a.kBatch = a.kvLen * a.kRow;
  a.vBatch = a.kvLen * a.vRow;
  a.oBatch = a.qLen * a.oRow;
  a.scale = static_cast<float>(at.scale);
  a.mask = static_cast<int32_t>(at.mask_kind);
  a.maskValue = static_cast<float>(at.mask_value);
  a.padId = at.pad_id;
  if (c.key_tokens) {
    a.tokens = c.key_tokens->data;
    a.tokensType = c.key_tokens->dtype;
    a.tokensBatch = a.kvLen;
  }
  if (c.mask) {
    // The additive mask broadcasts to [B, H, Sq, Sk].
    const AdditiveMaskStrides st = additiveMaskStrides(*c.mask);
    a.add = c.mask->data;
    a.addType = c.mask->dtype;
    a.addQ = st.q;
    a.addH = st.h;
    a.addB = st.b;
  }
  setRelativeBias(a, c.bias_table, at.bidirectional, at.max_distance);
  if (const Tensor *t = c.block_table) {
    // k and v are [N, L, D] blocks that rows share; row b's key j is at
    // j % L of block table[b][j / L] (kernel_rules.cc checked the shapes).
    a.table = static_cast<const int64_t *>(t->data);
    a.blocksPerRow = t->shape[1];
    a.blockLen = k.shape[1];
    a.numBlocks = k.shape[0];
    // A row's keys: its key tokens' count (at most nb * L), else nb * L.
    a.kvLen = c.key_tokens ? c.key_tokens->shape[1] : a.blocksPerRow * a.blockLen;
    a.tokensBatch = a.kvLen;
    TFC_RETURN_IF_ERROR(
        fillZero(ctx, out.data, tfc_dtype_bytes(out.dtype, (uint64_t)out.numel())));
  }
  if (a.kvLen == 0) // softmax over no keys, times an empty V: zeros
    return fillZero(ctx, out.data, tfc_dtype_bytes(out.dtype, (uint64_t)out.numel()));
  return launchAttention(a, ctx.stream);
}

Status run(Context &ctx, const CachedAttentionCall &c) {
  // q/k/v: [B, T, D] new tokens at positions pos..pos+T-1; caches [B', L, D].
  const Tensor &q = *c.q, &k = *c.k, &v = *c.v, &kc = *c.k_cache, &vc = *c.v_cache,
               &pos = *c.pos;
  Tensor &out = *c.out;
  const int64_t B = q.shape[0], T = q.shape[1], L = kc.shape[1];
  // With a block table the caches are [N, L, D] blocks and row b's position p
  // is at p % L of block table[b][p / L] (a paged cache, in the engine).
  const Tensor *table = c.block_table;
  if (!table && (kc.shape[0] < B || vc.shape[0] < B))
    return Status::invalidArgument("the KV cache holds fewer rows than the batch");
  const bool posPerRow = pos.numel() > 1;
  const int64_t *tableData = table ? static_cast<const int64_t *>(table->data) : nullptr;
  const int64_t nb = table ? table->shape[1] : 1;
  CacheWriteArgs w;
  w.k = k.data;
  w.v = v.data;
  w.kType = k.dtype;
  w.vType = v.dtype;
  w.kc = kc.data;
  w.vc = vc.data;
  w.kcType = kc.dtype;
  w.vcType = vc.dtype;
  w.batch = B;
  w.steps = T;
  w.len = L;
  w.dk = k.shape[2];
  w.dv = v.shape[2];
  w.pos = pos.data;
  w.posType = pos.dtype;
  w.posPerRow = posPerRow;
  w.table = tableData;
  w.blocksPerRow = nb;
  w.cacheRows = kc.shape[0];
  // A folded-in rotary: the write rotates the keys, and the queries into an
  // f32 scratch the attention reads.
  const void *qData = q.data;
  uint32_t qType = q.dtype;
  if (c.inv_freq) {
    void *scratch = nullptr;
    TFC_RETURN_IF_ERROR(ctx.scratchFor(B * T * q.shape[2] * sizeof(float), &scratch));
    w.invFreq = static_cast<const float *>(c.inv_freq->data);
    w.half = c.inv_freq->shape[0];
    w.headDim = q.shape[2] / c.attrs.num_heads;
    w.qWidth = q.shape[2];
    w.interleaved = c.attrs.rotary_interleaved;
    w.q = q.data;
    w.qType = q.dtype;
    w.qOut = static_cast<float *>(scratch);
    qData = scratch;
    qType = TFC_DTYPE_F32;
  }
  TFC_RETURN_IF_ERROR(launchCacheWrite(w, ctx.error, ctx.stream));

  AttnArgs a;
  a.q = qData;
  a.k = kc.data;
  a.v = vc.data;
  a.out = out.data;
  a.qType = qType;
  a.kType = kc.dtype;
  a.vType = vc.dtype;
  a.outType = out.dtype;
  a.batch = B;
  a.qLen = T;
  a.heads = c.attrs.num_heads;
  a.group = c.attrs.num_kv_heads > 0 ? c.attrs.num_heads / c.attrs.num_kv_heads : 1;
  a.window = c.attrs.window;
  a.softcap = (float)c.attrs.softcap;
  a.dk = q.shape[2] / a.heads;
  a.dv = v.shape[2] * a.group / a.heads;
  a.qRow = q.shape[2];
  a.kRow = kc.shape[2];
  a.vRow = vc.shape[2];
  a.oRow = out.shape[2];
  a.qBatch = T * a.qRow;
  a.kBatch = L * a.kRow;
  a.vBatch = L * a.vRow;
  a.oBatch = T * a.oRow;
  a.scale = static_cast<float>(c.attrs.scale);
  a.mask = TFC_MASK_CAUSAL; // over cache rows 0 .. pos + i
  a.maskValue = -INFINITY;
  a.pos = pos.data;
  a.posType = pos.dtype;
  a.posPerRow = posPerRow;
  a.table = tableData;
  a.blocksPerRow = nb;
  a.blockLen = L;
  a.numBlocks = kc.shape[0];
  a.cacheLen = nb * L;
  setRelativeBias(a, c.bias_table, c.attrs.bidirectional, c.attrs.max_distance);
  return launchAttention(a, ctx.stream);
}

Status run(Context &ctx, const RotaryCall &c) {
  const Tensor &x = *c.x;
  RotaryArgs a;
  a.x = x.data;
  a.out = c.out->data;
  a.xType = x.dtype;
  a.outType = c.out->dtype;
  a.invFreq = static_cast<const float *>(c.inv_freq->data);
  a.batch = x.shape[0];
  a.seq = x.shape[1];
  a.headDim = c.attrs.head_dim;
  a.heads = x.shape[2] / a.headDim;
  a.half = c.inv_freq->shape[0];
  a.interleaved = c.attrs.interleaved;
  if (c.offset) { // i64 on the device; a negative one is recorded as a data error
    a.offset = static_cast<const int64_t *>(c.offset->data);
    a.offsetPerRow = c.offset->numel() > 1;
  }
  return launchRotary(a, ctx.error, ctx.stream);
}

Status run(Context &ctx, const TokenEmbeddingCall &c) {
  const Tensor &ids = *c.ids, &table = *c.table;
  EmbedArgs a;
  a.ids = ids.data;
  a.idsType = ids.dtype;
  a.tokens = ids.numel();
  a.seq = ids.shape.size() >= 2 ? ids.shape[1] : 1;
  a.table = table.data;
  a.tableType = table.dtype;
  a.vocab = table.shape[0];
  a.dim = table.shape[1];
  a.rowScales = table.scales;
  a.group = table.group;
  a.scale = static_cast<float>(c.attrs.scale);
  if (c.type_table) {
    a.typeIds = c.type_ids->data;
    a.typeIdsType = c.type_ids->dtype;
    a.typeTable = c.type_table->data;
    a.typeTableType = c.type_table->dtype;
    a.typeVocab = c.type_table->shape[0];
  }
  if (c.positions) {
    a.pos = c.positions->data;
    a.posType = c.positions->dtype;
    a.posRows = c.positions->shape[0];
    a.axis = static_cast<int32_t>(c.attrs.position_axis);
  }
  if (c.offset) {
    a.offset = c.offset->data;
    a.offsetType = c.offset->dtype;
    a.offsetPerRow = c.offset->numel() > 1;
  }
  a.out = c.out->data;
  a.outType = c.out->dtype;
  return launchEmbedding(a, ctx.error, ctx.stream);
}

Status run(Context &ctx, const EmbeddingCall &c) {
  const Tensor &table = *c.table, &ids = *c.ids;
  EmbedArgs a;
  a.ids = ids.data;
  a.idsType = ids.dtype;
  a.tokens = ids.numel();
  a.table = table.data;
  a.tableType = table.dtype;
  a.vocab = table.shape[0];
  a.dim = table.shape[1];
  a.out = c.out->data;
  a.outType = c.out->dtype;
  return launchEmbedding(a, ctx.error, ctx.stream);
}

namespace {
template <typename CallT> Status binary(Context &ctx, EwOp op, int32_t pred, const CallT &c) {
  return elementwise(ctx, op, pred, 0, {c.lhs, c.rhs}, *c.out);
}
} // namespace

Status run(Context &ctx, const AddCall &c) { return binary(ctx, EwOp::Add, 0, c); }
Status run(Context &ctx, const SubCall &c) { return binary(ctx, EwOp::Sub, 0, c); }
Status run(Context &ctx, const MulCall &c) { return binary(ctx, EwOp::Mul, 0, c); }
Status run(Context &ctx, const DivCall &c) { return binary(ctx, EwOp::Div, 0, c); }
Status run(Context &ctx, const AndCall &c) { return binary(ctx, EwOp::And, 0, c); }
Status run(Context &ctx, const CompareCall &c) {
  return binary(ctx, EwOp::Compare, static_cast<int32_t>(c.attrs.predicate), c);
}
Status run(Context &ctx, const NotCall &c) {
  return elementwise(ctx, EwOp::Not, 0, 0, {c.input}, *c.out);
}
Status run(Context &ctx, const CastCall &c) {
  return elementwise(ctx, EwOp::Cast, 0, 0, {c.input}, *c.out);
}
Status run(Context &ctx, const MaskedFillCall &c) {
  return elementwise(ctx, EwOp::MaskedFill, 0, static_cast<float>(c.attrs.value), {c.input, c.mask},
                     *c.out);
}
Status run(Context &ctx, const SelectCall &c) {
  return elementwise(ctx, EwOp::Select, 0, 0, {c.condition, c.on_true, c.on_false}, *c.out);
}

namespace {
/// Views: the executor aliases them; copy only when asked to materialize.
Status view(Context &ctx, const Tensor &in, Tensor &out) {
  if (out.data == in.data)
    return Status();
  return copyOnDevice(ctx, out.data, in.data, tfc_dtype_bytes(out.dtype, (uint64_t)out.numel()));
}

/// A strided copy of |x| into |out| (transpose and slice).
Status stridedCopy(Context &ctx, const void *src, uint32_t srcType,
                   std::vector<std::vector<int64_t>> st, Tensor &out) {
  if (out.shape.size() > static_cast<size_t>(kMaxRank))
    return Status::unsupported("rank " + std::to_string(out.shape.size()) +
                               " is above the CUDA backend's " + std::to_string(kMaxRank));
  EwArgs a;
  a.op = EwOp::Copy;
  a.in[0] = src;
  a.inType[0] = srcType;
  a.out = out.data;
  a.outType = out.dtype;
  a.n = out.numel();
  coalesce(out.shape, st, a.bc);
  return launchElementwise(a, ctx.stream);
}
} // namespace

Status run(Context &ctx, const ReshapeCall &c) { return view(ctx, *c.input, *c.out); }
Status run(Context &ctx, const UnsqueezeCall &c) { return view(ctx, *c.input, *c.out); }

Status run(Context &ctx, const TransposeCall &c) {
  const Tensor &x = *c.input;
  const std::vector<int64_t> inStride = contiguousStrides(x.shape);
  std::vector<std::vector<int64_t>> st(1, std::vector<int64_t>(x.shape.size()));
  for (size_t i = 0; i < x.shape.size(); ++i)
    st[0][i] = inStride[c.attrs.perm[i]];
  return stridedCopy(ctx, x.data, x.dtype, std::move(st), *c.out);
}

Status run(Context &ctx, const SliceCall &c) {
  const Tensor &x = *c.input;
  const std::vector<int64_t> inStride = contiguousStrides(x.shape);
  const int64_t start = sliceStart(c.attrs.start, x.shape[c.attrs.axis]);
  const char *src = static_cast<const char *>(x.data) +
                    tfc_dtype_bytes(x.dtype, (uint64_t)(start * inStride[c.attrs.axis]));
  return stridedCopy(ctx, src, x.dtype, {inStride}, *c.out);
}

namespace {
Status overAxis(Context &ctx, const Tensor &x, int64_t axis, Tensor &out, bool reduce,
                bool variant) {
  AxisArgs a;
  a.x = x.data;
  a.xType = x.dtype;
  a.y = out.data;
  a.yType = out.dtype;
  aroundAxis(x.shape, axis, a);
  return reduce ? launchReduce(a, variant, ctx.stream) : launchSoftmax(a, variant, ctx.stream);
}

/// A kernel of tfc/unary.def.
template <typename CallT> Status unaryCall(Context &ctx, const CallT &c, int64_t mode) {
  return unary(ctx, CallT::kKernel, mode, *c.input, *c.out);
}
} // namespace

Status run(Context &ctx, const ReduceMeanCall &c) {
  return overAxis(ctx, *c.input, c.attrs.axis, *c.out, true, true);
}
Status run(Context &ctx, const ReduceSumCall &c) {
  return overAxis(ctx, *c.input, c.attrs.axis, *c.out, true, false);
}
Status run(Context &ctx, const SoftmaxCall &c) {
  return overAxis(ctx, *c.input, c.attrs.axis, *c.out, false, false);
}
Status run(Context &ctx, const LogSoftmaxCall &c) {
  return overAxis(ctx, *c.input, c.attrs.axis, *c.out, false, true);
}
Status run(Context &ctx, const SqrtCall &c) { return unaryCall(ctx, c, 0); }
Status run(Context &ctx, const ReluCall &c) { return unaryCall(ctx, c, 0); }
Status run(Context &ctx, const GeluCall &c) { return unaryCall(ctx, c, c.attrs.approximate); }
Status run(Context &ctx, const SiluCall &c) { return unaryCall(ctx, c, 0); }
Status run(Context &ctx, const TanhCall &c) { return unaryCall(ctx, c, 0); }

Status run(Context &ctx, const LayerNormCall &c) {
  const Tensor &x = *c.x;
  NormArgs a;
  a.x = x.data;
  a.xType = x.dtype;
  a.gamma = c.gamma->data;
  a.gammaType = c.gamma->dtype;
  if (c.beta) {
    a.beta = c.beta->data;
    a.betaType = c.beta->dtype;
  }
  a.y = c.out->data;
  a.yType = c.out->dtype;
  a.dim = x.shape.back();
  a.rows = x.numel() / a.dim;
  a.variant = static_cast<int32_t>(c.attrs.variant);
  a.eps = static_cast<float>(c.attrs.eps);
  return launchLayerNorm(a, ctx.stream);
}

Status run(Context &ctx, const PositionsCall &c) {
  if (c.attrs.padding_idx >= 0)
    return launchPaddedPositions(c.input->data, c.input->dtype, c.out->data, c.input->shape[0],
                                 c.input->shape[1], c.attrs.padding_idx, ctx.stream);
  return launchIota(c.out->data, c.out->dtype, c.out->numel(), ctx.stream);
}

Status run(Context &ctx, const RelativePositionBiasCall &c) {
  const Tensor &t = *c.table;
  return launchRelativeBias(static_cast<const float *>(t.data), t.shape[0], t.shape[1],
                            static_cast<float *>(c.out->data), c.out->shape[2], c.out->shape[3],
                            c.attrs.bidirectional ? 1 : 0, c.attrs.max_distance, ctx.stream);
}

Status run(Context &ctx, const NopeakMaskCall &c) {
  return launchNopeak(c.out->data, c.out->shape[1], ctx.stream);
}

Status run(Context &ctx, const LinearCall &c) {
  return runLinear(ctx, *c.x, *c.weight, c.bias, nullptr, nullptr, TFC_ACT_NONE, *c.out);
}
Status run(Context &ctx, const FusedLinearCall &c) {
  return runLinear(ctx, *c.x, *c.weight, c.bias, c.residual, c.multiplier, c.attrs.activation,
                   *c.out);
}
Status run(Context &ctx, const MatmulCall &c) {
  return runMatmul(ctx, *c.a, *c.b, c.attrs.transpose_b, *c.out);
}

namespace {

using Entry = Status (*)(Context &, const RawCall &);

/// Binds, checks and runs one kernel's typed call.
template <typename CallT> Status entry(Context &ctx, const RawCall &r) {
  CallT c;
  TFC_RETURN_IF_ERROR(bindCall(schema::Backend::Cuda, r, c));
  std::string bad = checkShapes(c);
  if (!bad.empty())
    return Status::invalidModel(std::move(bad));
  TFC_RETURN_IF_ERROR(ctx.activate());
  return run(ctx, c);
}

constexpr Entry kEntries[] = {
#define TFC_KERNEL(ENUM, name, Camel, ...) &entry<tfc::Camel##Call>,
#include "tfc/kernels.def"
#undef TFC_KERNEL
};
static_assert(sizeof(kEntries) / sizeof(kEntries[0]) == TFC_KERNEL_COUNT,
              "one CUDA entry per row of kernels.def");

} // namespace

Status runKernel(Context &ctx, uint32_t kernel, const std::vector<const Tensor *> &in,
                 Tensor &out, const std::vector<int64_t> &ints,
                 const std::vector<double> &floats) {
  if (kernel >= TFC_KERNEL_COUNT)
    return Status::unsupported("kernel " + std::to_string(kernel) + " is not implemented on CUDA");
  return kEntries[kernel](ctx, RawCall{kernel, in, out, ints, floats});
}

} // namespace tfc::cuda
