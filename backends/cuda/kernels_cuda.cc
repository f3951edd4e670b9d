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

#include "tfc/abi.h"

#include <algorithm>
#include <cmath>

namespace tfc::cuda {

// --- Dispatch --------------------------------------------------------------------

namespace {

bool isFloat(uint32_t t) {
  return t == TFC_DTYPE_F32 || t == TFC_DTYPE_F16 || t == TFC_DTYPE_BF16;
}
bool isInt(uint32_t t) { return t == TFC_DTYPE_I64 || t == TFC_DTYPE_I32; }

std::string dtypeName(uint32_t t) {
  static const char *const names[] = {"f32", "i64", "i32", "bool", "f16", "bf16", "i8"};
  return t < sizeof(names) / sizeof(names[0]) ? names[t] : "dtype " + std::to_string(t);
}

/// "" when |t| is f32, f16 or bf16, else a message naming |what|.
std::string requireFloat(const Tensor &t, const char *what) {
  if (isFloat(t.dtype))
    return "";
  return std::string(what) + " is " + dtypeName(t.dtype) + ", not f32, f16 or bf16";
}

/// "" when every tensor is bool, else a message naming |what|.
std::string requireBool(const Tensor &t, const char *what) {
  if (t.dtype == TFC_DTYPE_BOOL)
    return "";
  return std::string(what) + " is " + dtypeName(t.dtype) + ", not bool";
}

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
std::string broadcastOver(const Tensor &out, const std::vector<const Tensor *> &ins,
                          Broadcast &bc) {
  const size_t r = out.shape.size();
  if (r > static_cast<size_t>(kMaxRank))
    return "rank " + std::to_string(r) + " is above the CUDA backend's " +
           std::to_string(kMaxRank);
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor *t : ins) {
    if (t->shape.size() > r)
      return "an operand of rank " + std::to_string(t->shape.size()) +
             " does not broadcast to rank " + std::to_string(r);
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
  return "";
}

int64_t normalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
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

std::string elementwise(Context &ctx, EwOp op, int32_t pred, float value,
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
  std::string err = broadcastOver(out, ins, a.bc);
  if (!err.empty())
    return err;
  return launchElementwise(a, ctx.stream);
}

/// A kernel of tfc/unary.def on |x|.
std::string unary(Context &ctx, uint32_t kernel, int64_t mode, const Tensor &x, Tensor &out) {
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
  std::string err = broadcastOver(out, {&x}, a.bc);
  if (!err.empty())
    return err;
  return launchElementwise(a, ctx.stream);
}

/// ATTENTION's operands as kernels_cpu.cc reads them.
/// An attention's relative position bias (T5): its [num_buckets, H] f32 table.
std::string setRelativeBias(AttnArgs &a, const Tensor &table, int64_t bidirectional,
                            int64_t maxDistance) {
  if (table.dtype != TFC_DTYPE_F32 || table.shape.size() != 2 || table.shape[1] != a.heads)
    return "attention: the position bias table must be [num_buckets, heads] f32";
  a.relBias = static_cast<const float *>(table.data);
  a.relBuckets = table.shape[0];
  a.relBidirectional = bidirectional ? 1 : 0;
  a.relMaxDistance = maxDistance;
  return "";
}

std::string attention(Context &ctx, const std::vector<const Tensor *> &in, Tensor &out,
                      const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
  if (q.shape.size() != 3 || k.shape.size() != 3 || v.shape.size() != 3 ||
      out.shape.size() != 3)
    return "attention operands must be [B, S, D]";
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
  a.heads = ints[1];
  if (a.heads <= 0 || q.shape[2] % a.heads != 0 || v.shape[2] % a.heads != 0)
    return "attention: num_heads " + std::to_string(a.heads) + " does not divide the width";
  a.dk = q.shape[2] / a.heads;
  a.dv = v.shape[2] / a.heads;
  a.qRow = q.shape[2];
  a.kRow = k.shape[2];
  a.vRow = v.shape[2];
  a.oRow = out.shape[2];
  a.qBatch = a.qLen * a.qRow;
  a.kBatch = a.kvLen * a.kRow;
  a.vBatch = a.kvLen * a.vRow;
  a.oBatch = a.qLen * a.oRow;
  a.scale = static_cast<float>(floats[0]);
  a.mask = static_cast<int32_t>(ints[0]);
  a.maskValue = static_cast<float>(floats[1]);
  a.padId = ints[2];
  if (a.mask < 0 || a.mask > 4)
    return "attention: unknown mask kind " + std::to_string(a.mask);
  if (a.mask == 1 || a.mask == 3) {
    if (in.size() < 4)
      return "attention: the key padding mask needs the key token ids";
    if (!isInt(in[3]->dtype))
      return "attention key tokens must be i64 or i32";
    a.tokens = in[3]->data;
    a.tokensType = in[3]->dtype;
    a.tokensBatch = a.kvLen;
  }
  if (a.mask == 4) {
    if (in.size() < 4)
      return "attention: the additive mask is missing";
    // The additive mask broadcasts to [B, H, Sq, Sk]; right-align its dims.
    const Tensor &m = *in[3];
    if (!isFloat(m.dtype))
      return "attention: the additive mask must be f32, f16 or bf16";
    if (m.shape.size() > 4 || m.shape.empty())
      return "attention: the additive mask must have rank 1 to 4";
    std::vector<int64_t> full(4, 1);
    for (size_t i = 0; i < m.shape.size(); ++i)
      full[4 - m.shape.size() + i] = m.shape[i];
    const int64_t sk = full[3], sq = full[2], sh = full[1];
    a.add = m.data;
    a.addType = m.dtype;
    a.addQ = full[2] == 1 ? 0 : sk;
    a.addH = full[1] == 1 ? 0 : sq * sk;
    a.addB = full[0] == 1 ? 0 : sh * sq * sk;
    if (full[3] != a.kvLen)
      return "additive mask does not cover every key";
  }
  if (ints.size() > 5 && ints[3]) { // T5's relative position bias: the last input
    std::string err = setRelativeBias(a, *in.back(), ints[4], ints[5]);
    if (!err.empty())
      return err;
  }
  if (a.kvLen == 0) // softmax over no keys, times an empty V: zeros
    return fillZero(ctx, out.data, out.numel() * tfc_dtype_size(out.dtype));
  return launchAttention(a, ctx.stream);
}

std::string cachedAttention(Context &ctx, const std::vector<const Tensor *> &in, Tensor &out,
                            const std::vector<int64_t> &ints,
                            const std::vector<double> &floats) {
  // q/k/v: [B, T, D] new tokens at positions pos..pos+T-1; caches [B', L, D].
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2], &kc = *in[3], &vc = *in[4], &pos = *in[5];
  if (q.shape.size() != 3 || k.shape.size() != 3 || v.shape.size() != 3 ||
      kc.shape.size() != 3 || vc.shape.size() != 3 || out.shape.size() != 3)
    return "cached attention operands must be [B, S, D]";
  if (!isInt(pos.dtype))
    return "cached attention: pos must be i64 or i32";
  const int64_t B = q.shape[0], T = q.shape[1], L = kc.shape[1];
  if (kc.shape[0] < B || vc.shape[0] < B)
    return "the KV cache holds fewer rows than the batch";
  if (vc.shape[1] != L || kc.shape[2] != k.shape[2] || vc.shape[2] != v.shape[2])
    return "cached attention: the caches do not match the keys and values";
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
  std::string err = launchCacheWrite(w, ctx.error, ctx.stream);
  if (!err.empty())
    return err;

  AttnArgs a;
  a.q = q.data;
  a.k = kc.data;
  a.v = vc.data;
  a.out = out.data;
  a.qType = q.dtype;
  a.kType = kc.dtype;
  a.vType = vc.dtype;
  a.outType = out.dtype;
  a.batch = B;
  a.qLen = T;
  a.heads = ints[0];
  if (a.heads <= 0 || q.shape[2] % a.heads != 0 || v.shape[2] % a.heads != 0)
    return "cached attention: num_heads " + std::to_string(a.heads) +
           " does not divide the width";
  a.dk = q.shape[2] / a.heads;
  a.dv = v.shape[2] / a.heads;
  a.qRow = q.shape[2];
  a.kRow = kc.shape[2];
  a.vRow = vc.shape[2];
  a.oRow = out.shape[2];
  a.qBatch = T * a.qRow;
  a.kBatch = L * a.kRow;
  a.vBatch = L * a.vRow;
  a.oBatch = T * a.oRow;
  a.scale = static_cast<float>(floats[0]);
  a.mask = 2; // causal, over cache rows 0 .. pos + i
  a.maskValue = -INFINITY;
  a.pos = pos.data;
  a.posType = pos.dtype;
  a.cacheLen = L;
  if (ints.size() > 3 && ints[1]) {
    if (in.size() < 7)
      return "cached attention: the position bias table is missing";
    err = setRelativeBias(a, *in[6], ints[2], ints[3]);
    if (!err.empty())
      return err;
  }
  return launchAttention(a, ctx.stream);
}

std::string tokenEmbedding(Context &ctx, const std::vector<const Tensor *> &in, Tensor &out,
                           const std::vector<int64_t> &ints,
                           const std::vector<double> &floats) {
  // Inputs: ids, table, [positions], [type_ids, type_table], [offset],
  // [row scales of an i8 table].
  const Tensor &ids = *in[0], &table = *in[1];
  const bool hasPos = ints[1], hasTypes = ints[2];
  const bool hasOffset = ints.size() > 3 && ints[3];
  size_t next = 2;
  const Tensor *pos = hasPos ? in[next++] : nullptr;
  const Tensor *typeIds = hasTypes ? in[next++] : nullptr;
  const Tensor *typeTable = hasTypes ? in[next++] : nullptr;
  const Tensor *offset = hasOffset ? in[next++] : nullptr;
  const bool i8 = table.dtype == TFC_DTYPE_I8;
  const Tensor *rowScales = i8 ? in[next++] : nullptr;
  if (in.size() < next)
    return "token_embedding: expected " + std::to_string(next) + " inputs, got " +
           std::to_string(in.size());
  if (table.shape.size() != 2 || (pos && pos->shape.size() != 2) ||
      (typeTable && typeTable->shape.size() != 2))
    return "token_embedding: tables must be [rows, D]";
  if (pos && ids.shape.size() != 2)
    return "token_embedding: positional ids must be [B, S]";
  if (!isInt(ids.dtype) || (typeIds && !isInt(typeIds->dtype)) ||
      (offset && !isInt(offset->dtype)))
    return "token_embedding: ids must be i64 or i32";
  if (rowScales && rowScales->dtype != TFC_DTYPE_F32)
    return "token_embedding: an i8 table's row scales must be f32";
  EmbedArgs a;
  a.ids = ids.data;
  a.idsType = ids.dtype;
  a.tokens = ids.numel();
  a.seq = ids.shape.size() >= 2 ? ids.shape[1] : 1;
  a.table = table.data;
  a.tableType = table.dtype;
  a.vocab = table.shape[0];
  a.dim = table.shape[1];
  a.rowScales = rowScales ? static_cast<const float *>(rowScales->data) : nullptr;
  a.scale = static_cast<float>(floats[0]);
  if (typeTable) {
    a.typeIds = typeIds->data;
    a.typeIdsType = typeIds->dtype;
    a.typeTable = typeTable->data;
    a.typeTableType = typeTable->dtype;
    a.typeVocab = typeTable->shape[0];
  }
  if (pos) {
    a.pos = pos->data;
    a.posType = pos->dtype;
    a.posRows = pos->shape[0];
    a.axis = static_cast<int32_t>(ints[0]);
  }
  if (offset) {
    a.offset = offset->data;
    a.offsetType = offset->dtype;
  }
  a.out = out.data;
  a.outType = out.dtype;
  return launchEmbedding(a, ctx.error, ctx.stream);
}

/// Operand dtypes the kernels rely on (the verifier guarantees them for a
/// compiled plan; this keeps a bad call from reading memory as the wrong type).
std::string checkDtypes(uint32_t kernel, const std::vector<const Tensor *> &in,
                        const Tensor &out) {
  std::string err;
  auto need = [&err](std::string e) {
    if (err.empty())
      err = std::move(e);
  };
  switch (kernel) {
  case TFC_KERNEL_TOKEN_EMBEDDING:
    if (in[1]->dtype != TFC_DTYPE_I8)
      need(requireFloat(*in[1], "the table"));
    need(requireFloat(out, "the output"));
    break;
  case TFC_KERNEL_EMBEDDING:
    need(requireFloat(*in[0], "the table"));
    need(requireFloat(out, "the output"));
    break;
  case TFC_KERNEL_AND:
    need(requireBool(*in[1], "the rhs"));
    [[fallthrough]];
  case TFC_KERNEL_NOT:
    need(requireBool(*in[0], "the input"));
    need(requireBool(out, "the output"));
    break;
  case TFC_KERNEL_COMPARE:
    need(requireBool(out, "the output"));
    break;
  case TFC_KERNEL_MASKED_FILL:
    need(requireFloat(out, "the output"));
    need(requireBool(*in[1], "the mask"));
    break;
  case TFC_KERNEL_SELECT:
    need(requireBool(*in[0], "the condition"));
    break;
#define TFC_UNARY(ENUM, EXPR) case TFC_KERNEL_##ENUM:
#include "tfc/unary.def"
#undef TFC_UNARY
  case TFC_KERNEL_REDUCE_MEAN:
  case TFC_KERNEL_REDUCE_SUM:
  case TFC_KERNEL_SOFTMAX:
  case TFC_KERNEL_LOG_SOFTMAX:
  case TFC_KERNEL_LAYER_NORM:
    need(requireFloat(*in[0], "the input"));
    need(requireFloat(out, "the output"));
    for (size_t i = 1; i < in.size() && kernel == TFC_KERNEL_LAYER_NORM; ++i)
      need(requireFloat(*in[i], "gamma/beta"));
    break;
  case TFC_KERNEL_ATTENTION:
  case TFC_KERNEL_CACHED_ATTENTION:
    need(requireFloat(*in[0], "the query"));
    need(requireFloat(*in[1], "the key"));
    need(requireFloat(*in[2], "the value"));
    need(requireFloat(out, "the output"));
    if (kernel == TFC_KERNEL_CACHED_ATTENTION) {
      need(requireFloat(*in[3], "the key cache"));
      need(requireFloat(*in[4], "the value cache"));
    }
    break;
  case TFC_KERNEL_RESHAPE:
  case TFC_KERNEL_UNSQUEEZE:
  case TFC_KERNEL_TRANSPOSE:
  case TFC_KERNEL_SLICE:
    if (in[0]->dtype != out.dtype)
      need("the output is " + dtypeName(out.dtype) + ", the input " + dtypeName(in[0]->dtype));
    break;
  default:
    break;
  }
  return err;
}

std::string dispatch(Context &ctx, uint32_t kernel, const std::vector<const Tensor *> &in,
                     Tensor &out, const std::vector<int64_t> &ints,
                     const std::vector<double> &floats) {
  switch (kernel) {
  case TFC_KERNEL_TOKEN_EMBEDDING:
    return tokenEmbedding(ctx, in, out, ints, floats);
  case TFC_KERNEL_EMBEDDING: {
    const Tensor &table = *in[0], &ids = *in[1];
    if (table.shape.size() != 2)
      return "embedding: the table must be [V, D]";
    if (!isInt(ids.dtype))
      return "embedding: ids must be i64 or i32";
    EmbedArgs a;
    a.ids = ids.data;
    a.idsType = ids.dtype;
    a.tokens = ids.numel();
    a.table = table.data;
    a.tableType = table.dtype;
    a.vocab = table.shape[0];
    a.dim = table.shape[1];
    a.out = out.data;
    a.outType = out.dtype;
    return launchEmbedding(a, ctx.error, ctx.stream);
  }
  case TFC_KERNEL_LINEAR:
  case TFC_KERNEL_FUSED_LINEAR: {
    // Inputs: x, weight, [bias], [residual], [scales of an i8 weight].
    const bool hasBias = ints[0];
    const bool hasRes = kernel == TFC_KERNEL_FUSED_LINEAR && ints[1];
    const int act = kernel == TFC_KERNEL_FUSED_LINEAR ? static_cast<int>(ints[2]) : 0;
    const size_t need = 2 + hasBias + hasRes;
    if (in.size() < need)
      return "linear: expected " + std::to_string(need) + " inputs, got " +
             std::to_string(in.size());
    return runLinear(ctx, *in[0], *in[1], hasBias ? in[2] : nullptr,
                     hasRes ? in[hasBias ? 3 : 2] : nullptr, act, out);
  }
  case TFC_KERNEL_MATMUL:
    return runMatmul(ctx, *in[0], *in[1], ints[0] != 0, out);
  case TFC_KERNEL_ADD:
  case TFC_KERNEL_SUB:
  case TFC_KERNEL_MUL:
  case TFC_KERNEL_DIV: {
    const EwOp op = kernel == TFC_KERNEL_ADD   ? EwOp::Add
                    : kernel == TFC_KERNEL_SUB ? EwOp::Sub
                    : kernel == TFC_KERNEL_MUL ? EwOp::Mul
                                               : EwOp::Div;
    return elementwise(ctx, op, 0, 0, {in[0], in[1]}, out);
  }
  case TFC_KERNEL_AND:
    return elementwise(ctx, EwOp::And, 0, 0, {in[0], in[1]}, out);
  case TFC_KERNEL_NOT:
    return elementwise(ctx, EwOp::Not, 0, 0, {in[0]}, out);
  case TFC_KERNEL_COMPARE:
    if (ints[0] < 0 || ints[0] > 5)
      return "compare: unknown predicate " + std::to_string(ints[0]);
    return elementwise(ctx, EwOp::Compare, static_cast<int32_t>(ints[0]), 0, {in[0], in[1]},
                       out);
  case TFC_KERNEL_CAST:
    return elementwise(ctx, EwOp::Cast, 0, 0, {in[0]}, out);
  case TFC_KERNEL_MASKED_FILL:
    return elementwise(ctx, EwOp::MaskedFill, 0, static_cast<float>(floats[0]), {in[0], in[1]},
                       out);
  case TFC_KERNEL_SELECT:
    return elementwise(ctx, EwOp::Select, 0, 0, {in[0], in[1], in[2]}, out);
  case TFC_KERNEL_RESHAPE:
  case TFC_KERNEL_UNSQUEEZE:
    // Views: the executor aliases them; copy only when asked to materialize.
    if (out.data == in[0]->data)
      return "";
    return copyOnDevice(ctx, out.data, in[0]->data,
                        out.numel() * tfc_dtype_size(out.dtype));
  case TFC_KERNEL_TRANSPOSE: {
    const Tensor &x = *in[0];
    const size_t r = x.shape.size();
    if (ints.size() != r || out.shape.size() != r)
      return "transpose: the permutation does not match the rank";
    if (r > static_cast<size_t>(kMaxRank))
      return "rank " + std::to_string(r) + " is above the CUDA backend's " +
             std::to_string(kMaxRank);
    const std::vector<int64_t> inStride = contiguousStrides(x.shape);
    std::vector<std::vector<int64_t>> st(1, std::vector<int64_t>(r));
    for (size_t i = 0; i < r; ++i) {
      if (ints[i] < 0 || ints[i] >= static_cast<int64_t>(r))
        return "transpose: bad permutation";
      st[0][i] = inStride[ints[i]];
    }
    EwArgs a;
    a.op = EwOp::Copy;
    a.in[0] = x.data;
    a.inType[0] = x.dtype;
    a.out = out.data;
    a.outType = out.dtype;
    a.n = out.numel();
    coalesce(out.shape, st, a.bc);
    return launchElementwise(a, ctx.stream);
  }
  case TFC_KERNEL_SLICE: {
    const Tensor &x = *in[0];
    const int64_t axis = normalizeAxis(ints[0], x.shape.size()), start = ints[1];
    if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
      return "slice: axis out of range";
    if (x.shape.size() > static_cast<size_t>(kMaxRank))
      return "rank " + std::to_string(x.shape.size()) + " is above the CUDA backend's " +
             std::to_string(kMaxRank);
    if (start < 0 || start + out.shape[axis] > x.shape[axis])
      return "slice: [" + std::to_string(start) + ", " + std::to_string(start + out.shape[axis]) +
             ") is outside the axis of " + std::to_string(x.shape[axis]);
    const std::vector<int64_t> inStride = contiguousStrides(x.shape);
    std::vector<std::vector<int64_t>> st(1, inStride);
    EwArgs a;
    a.op = EwOp::Copy;
    a.in[0] = static_cast<const char *>(x.data) + start * inStride[axis] * tfc_dtype_size(x.dtype);
    a.inType[0] = x.dtype;
    a.out = out.data;
    a.outType = out.dtype;
    a.n = out.numel();
    coalesce(out.shape, st, a.bc);
    return launchElementwise(a, ctx.stream);
  }
  case TFC_KERNEL_REDUCE_MEAN:
  case TFC_KERNEL_REDUCE_SUM:
  case TFC_KERNEL_SOFTMAX:
  case TFC_KERNEL_LOG_SOFTMAX: {
    const Tensor &x = *in[0];
    const int64_t axis = normalizeAxis(ints[0], x.shape.size());
    if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
      return "axis " + std::to_string(ints[0]) + " is out of range";
    AxisArgs a;
    a.x = x.data;
    a.xType = x.dtype;
    a.y = out.data;
    a.yType = out.dtype;
    aroundAxis(x.shape, axis, a);
    if (kernel == TFC_KERNEL_REDUCE_MEAN || kernel == TFC_KERNEL_REDUCE_SUM)
      return launchReduce(a, kernel == TFC_KERNEL_REDUCE_MEAN, ctx.stream);
    return launchSoftmax(a, kernel == TFC_KERNEL_LOG_SOFTMAX, ctx.stream);
  }
#define TFC_UNARY(ENUM, EXPR) case TFC_KERNEL_##ENUM:
#include "tfc/unary.def"
#undef TFC_UNARY
    return unary(ctx, kernel, ints.empty() ? 0 : ints[0], *in[0], out);
  case TFC_KERNEL_LAYER_NORM: {
    const Tensor &x = *in[0];
    if (x.shape.empty())
      return "layer_norm: the input has no axis to normalize";
    NormArgs a;
    a.x = x.data;
    a.xType = x.dtype;
    if (in.size() > 1) {
      a.gamma = in[1]->data;
      a.gammaType = in[1]->dtype;
    }
    if (in.size() > 2) {
      a.beta = in[2]->data;
      a.betaType = in[2]->dtype;
    }
    a.y = out.data;
    a.yType = out.dtype;
    a.dim = x.shape.back();
    a.rows = a.dim > 0 ? x.numel() / a.dim : 0;
    a.variant = ints[0] == 1 || ints[0] == 2 ? static_cast<int32_t>(ints[0]) : 0;
    a.eps = static_cast<float>(floats[0]);
    return launchLayerNorm(a, ctx.stream);
  }
  case TFC_KERNEL_ATTENTION:
    return attention(ctx, in, out, ints, floats);
  case TFC_KERNEL_CACHED_ATTENTION:
    return cachedAttention(ctx, in, out, ints, floats);
  case TFC_KERNEL_POSITIONS:
    if (!isInt(out.dtype))
      return "positions must be i64 or i32";
    if (ints.size() > 1)
      return launchPaddedPositions(in[0]->data, in[0]->dtype, out.data, in[0]->shape[0],
                                   in[0]->shape[1], ints[1], ctx.stream);
    return launchIota(out.data, out.dtype, out.numel(), ctx.stream);
  case TFC_KERNEL_RELATIVE_POSITION_BIAS:
    if (in[0]->dtype != TFC_DTYPE_F32 || out.dtype != TFC_DTYPE_F32 || in[0]->shape.size() != 2 ||
        out.shape.size() != 4)
      return "relative_position_bias: an f32 [buckets, H] table and [1, H, Sq, Sk] output";
    return launchRelativeBias(static_cast<const float *>(in[0]->data), in[0]->shape[0],
                              in[0]->shape[1], static_cast<float *>(out.data), out.shape[2],
                              out.shape[3], ints[0] ? 1 : 0, ints[1], ctx.stream);
  case TFC_KERNEL_NOPEAK_MASK:
    if (out.shape.size() != 3 || out.shape[1] != out.shape[2] || out.dtype != TFC_DTYPE_BOOL)
      return "nopeak_mask: the output must be [1, S, S] bool";
    return launchNopeak(out.data, out.shape[1], ctx.stream);
  default:
    return "kernel " + std::to_string(kernel) + " is not implemented on CUDA";
  }
}

} // namespace

std::string runKernel(Context &ctx, uint32_t kernel, const std::vector<const Tensor *> &in,
                      Tensor &out, const std::vector<int64_t> &ints,
                      const std::vector<double> &floats) {
  // The fewest operands each kernel reads: its row of tfc/kernels.def.
  uint32_t minIn = 0, minInts = 0, minFloats = 0;
  if (tfc_kernel_min_arity(kernel, &minIn, &minInts, &minFloats) &&
      (in.size() < minIn || ints.size() < minInts || floats.size() < minFloats))
    return "kernel " + std::to_string(kernel) + ": too few inputs or attributes";
  for (const Tensor *t : in)
    if (!t || tfc_dtype_size(t->dtype) == 0)
      return "kernel " + std::to_string(kernel) + ": an input has an unknown dtype";
  if (tfc_dtype_size(out.dtype) == 0)
    return "kernel " + std::to_string(kernel) + ": the output has an unknown dtype";
  std::string err = checkDtypes(kernel, in, out);
  if (!err.empty())
    return "kernel " + std::to_string(kernel) + ": " + err;
  err = ctx.activate();
  if (!err.empty())
    return err;
  return dispatch(ctx, kernel, in, out, ints, floats);
}

} // namespace tfc::cuda
