//===- kernels_cpu.cc - CPU kernels for every plan instruction ------------===//
//
// Straightforward, correct implementations of every primitive kernel (the unfused
// model needs them all), plus the dispatch to the tuned fused kernels:
// attention_cpu.cc (our FlashAttention-style kernel) and layer_norm_cpu.cc.
// Elementwise kernels broadcast with numpy rules through per-input strides.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/kernels_cpu.h"

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/convert_cpu.h"
#include "backends/cpu/elementwise_cpu.h"
#include "backends/cpu/layer_norm_cpu.h"
#include "backends/cpu/linear_dnnl.h"
#include "backends/kernel_rules.h"
#include "tfc/abi.h"
#include "tfc/bf16.h"
#include "tfc/relative_bucket.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tfc::cpu {
namespace {

/// Strides of |in| for iterating over |out|'s shape (0 on broadcast dims).
std::vector<int64_t> broadcastStrides(const Tensor &in, const std::vector<int64_t> &out) {
  size_t r = out.size();
  std::vector<int64_t> st(r, 0);
  int64_t s = 1;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    size_t d = in.shape.size() - 1 - i;
    size_t o = r - 1 - i;
    st[o] = in.shape[d] == 1 ? 0 : s;
    s *= in.shape[d];
  }
  return st;
}

/// Calls f(outIndex, offsets...) for every element of |out|, with each input's
/// broadcast offset.
template <size_t N, typename F>
void forEachBroadcast(const Tensor &out, const Tensor *const (&ins)[N], F f) {
  const std::vector<int64_t> &shape = out.shape;
  size_t r = shape.size();
  std::vector<int64_t> strides[N];
  for (size_t k = 0; k < N; ++k)
    strides[k] = broadcastStrides(*ins[k], shape);
  std::vector<int64_t> idx(r, 0);
  int64_t off[N] = {};
  int64_t n = out.numel();
  for (int64_t e = 0; e < n; ++e) {
    f(e, off);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k)
          off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k)
        off[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

double loadAsDouble(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case TFC_DTYPE_F32:
    return t.as<float>()[i];
  case TFC_DTYPE_I64:
    return (double)t.as<int64_t>()[i];
  case TFC_DTYPE_I32:
    return t.as<int32_t>()[i];
  case TFC_DTYPE_BOOL:
    return t.as<uint8_t>()[i];
  default:
    return 0;
  }
}

void storeFromDouble(Tensor &t, int64_t i, double v) {
  switch (t.dtype) {
  case TFC_DTYPE_F32:
    t.as<float>()[i] = (float)v;
    break;
  case TFC_DTYPE_I64:
    t.as<int64_t>()[i] = (int64_t)v;
    break;
  case TFC_DTYPE_I32:
    t.as<int32_t>()[i] = (int32_t)v;
    break;
  case TFC_DTYPE_BOOL:
    t.as<uint8_t>()[i] = v != 0;
    break;
  default:
    break;
  }
}

float gelu(float x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5f * x *
           (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
}

/// Splits |shape| around |axis| into outer x axis x inner.
void aroundAxis(const std::vector<int64_t> &shape, int64_t axis, int64_t &outer,
                int64_t &len, int64_t &inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  len = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

/// y[r, n] = act(sum_k x[r, k] w[n, k] + b[n]) + res[r, n]. W is [N, K] row-major,
/// so every dot product reads two contiguous rows.
void linear(const float *x, const float *w, const float *b, const float *res, float *y,
            int64_t rows, int64_t k, int64_t n, int act) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * k;
    for (int64_t j = 0; j < n; ++j) {
      const float *wj = w + j * k;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < k; ++i)
        acc += xr[i] * wj[i];
      if (b)
        acc += b[j];
      if (act == 1)
        acc = acc > 0 ? acc : 0;
      else if (act == 2 || act == 3)
        acc = gelu(acc, act == 3);
      if (res)
        acc += res[r * n + j];
      y[r * n + j] = acc;
    }
  }
}

/// out[i, :] (+)= table[ids[i], :] * scale for an f32, bf16 or i8 table (an
/// i8 row is dequantized with its |rowScales| entry).
std::string embeddingRows(const Tensor &table, const Tensor &ids, float scale,
                          const float *rowScales, float *out, bool accumulate) {
  int64_t v = table.shape[0], d = table.shape[1];
  int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = (int64_t)loadAsDouble(ids, i);
    if (id < 0 || id >= v)
      return "token id " + std::to_string(id) + " is out of range [0, " +
             std::to_string(v) + ")";
    float *o = out + i * d;
    auto emit = [&](auto load, float s) {
      if (accumulate)
        for (int64_t j = 0; j < d; ++j)
          o[j] += load(j) * s;
      else
        for (int64_t j = 0; j < d; ++j)
          o[j] = load(j) * s;
    };
    if (table.dtype == TFC_DTYPE_BF16) {
      const uint16_t *row = table.as<uint16_t>() + id * d;
      emit([&](int64_t j) { return tfc_bf16_to_f32(row[j]); }, scale);
    } else if (table.dtype == TFC_DTYPE_I8) {
      const int8_t *row = table.as<int8_t>() + id * d;
      emit([&](int64_t j) { return (float)row[j]; }, scale * rowScales[id]);
    } else {
      const float *row = table.as<float>() + id * d;
      emit([&](int64_t j) { return row[j]; }, scale);
    }
  }
  return "";
}

/// A bf16 tensor's values widened to f32 in |buf|, or the f32 tensor's own data.
const float *asF32(const Tensor &t, std::vector<float> &buf) {
  if (t.dtype != TFC_DTYPE_BF16)
    return t.as<float>();
  buf.resize(t.numel());
  bf16ToF32(t.as<uint16_t>(), buf.data(), (int64_t)buf.size());
  return buf.data();
}

/// Where an f32 kernel writes |out|: its own memory, or |buf| when |out| is
/// bf16 (narrowed afterwards by finishOut).
float *outF32(Tensor &out, std::vector<float> &buf) {
  if (out.dtype != TFC_DTYPE_BF16)
    return out.as<float>();
  buf.resize(out.numel());
  return buf.data();
}
void finishOut(Tensor &out, const std::vector<float> &buf) {
  if (out.dtype == TFC_DTYPE_BF16)
    f32ToBf16(buf.data(), out.as<uint16_t>(), out.numel());
}

/// An attention's relative position bias (T5): the [num_buckets, H] table.
void setRelativeBias(AttentionParams &p, const Tensor &table, int64_t bidirectional,
                     int64_t maxDistance) {
  p.rel_bias = table.as<float>();
  p.rel_buckets = table.shape[0];
  p.rel_bidirectional = bidirectional != 0;
  p.rel_max_distance = maxDistance;
}

} // namespace

namespace {

/// The kernels' dispatch: an error message, or "" on success.
std::string dispatch(uint32_t kernel, const std::vector<const Tensor *> &in, Tensor &out,
                     const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  switch (kernel) {
  case TFC_KERNEL_TOKEN_EMBEDDING: {
    // table[ids] * scale (+ type_table[type_ids]) + positions[pos(ids)]
    // Inputs: ids, table, [positions], [type_ids, type_table], [offset],
    // [row scales of an i8 table].
    const Tensor &ids = *in[0], &table = *in[1];
    int64_t axis = ints[0];
    bool hasPos = ints[1], hasTypes = ints[2];
    bool hasOffset = ints.size() > 3 && ints[3];
    size_t next = 2;
    const Tensor *pos = hasPos ? in[next++] : nullptr;
    const Tensor *typeIds = hasTypes ? in[next++] : nullptr;
    const Tensor *typeTable = hasTypes ? in[next++] : nullptr;
    const Tensor *offsetT = hasOffset ? in[next++] : nullptr;
    const float *rowScales = table.dtype == TFC_DTYPE_I8 ? in[next++]->as<float>() : nullptr;
    float *o = out.as<float>();
    std::string err = embeddingRows(table, ids, (float)floats[0], rowScales, o, false);
    if (!err.empty())
      return err;
    if (hasTypes) {
      err = embeddingRows(*typeTable, *typeIds, 1.0f, nullptr, o, true);
      if (!err.empty())
        return err;
    }
    if (pos) {
      int64_t b = ids.shape[0], s = ids.shape[1], d = table.shape[1];
      int64_t rows = pos->shape[0];
      // decode_step: the new tokens sit at positions offset, offset + 1, ...
      int64_t offset = offsetT ? *offsetT->as<int64_t>() : 0;
      if (offset < 0)
        return "negative position offset " + std::to_string(offset);
      for (int64_t i = 0; i < b; ++i)
        for (int64_t j = 0; j < s; ++j) {
          int64_t p = axis == 0 ? i : j + offset;
          if (p >= rows)
            return "position " + std::to_string(p) + " is beyond the " +
                   std::to_string(rows) + "-row positional table";
          const float *row = pos->as<float>() + p * d;
          float *dst = o + (i * s + j) * d;
          for (int64_t k = 0; k < d; ++k)
            dst[k] += row[k];
        }
    }
    return "";
  }
  case TFC_KERNEL_EMBEDDING:
    return embeddingRows(*in[0], *in[1], 1.0f, nullptr, out.as<float>(), false);
  case TFC_KERNEL_LINEAR:
  case TFC_KERNEL_FUSED_LINEAR: {
    // Inputs: x, weight, [bias], [residual], [scales of an i8 weight].
    const Tensor &x = *in[0], &w = *in[1];
    bool hasBias = ints[0];
    bool hasRes = kernel == TFC_KERNEL_FUSED_LINEAR && ints[1];
    int act = kernel == TFC_KERNEL_FUSED_LINEAR ? (int)ints[2] : 0;
    int64_t k = w.shape[1], n = w.shape[0];
    int64_t rows = x.numel() / k;
    const float *b = hasBias ? in[2]->as<float>() : nullptr;
    const float *res = hasRes ? in[hasBias ? 3 : 2]->as<float>() : nullptr;
    if (w.packed) {
      LinearCall c;
      c.x = x.data;
      c.xDtype = x.dtype;
      c.rows = rows;
      c.bias = b;
      c.residual = res;
      c.act = act;
      c.y = out.data;
      c.yDtype = out.dtype;
      return runPackedLinear(*static_cast<const PackedLinear *>(w.packed), c);
    }
    if (w.dtype != TFC_DTYPE_F32 || x.dtype != TFC_DTYPE_F32 || out.dtype != TFC_DTYPE_F32)
      return "an unpacked linear layer must be f32";
    linear(x.as<float>(), w.as<float>(), b, res, out.as<float>(), rows, k, n, act);
    return "";
  }
  case TFC_KERNEL_MATMUL: {
    const Tensor &a = *in[0], &b = *in[1];
    bool tb = ints[0];
    size_t ra = a.shape.size(), rb = b.shape.size(), ro = out.shape.size();
    int64_t m = a.shape[ra - 2], k = a.shape[ra - 1];
    int64_t n = out.shape[ro - 1];
    // Batch dims of the output, and each operand's batch strides (broadcast 0).
    Tensor ab{nullptr, 0, std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2)};
    Tensor bb{nullptr, 0, std::vector<int64_t>(b.shape.begin(), b.shape.end() - 2)};
    Tensor ob{nullptr, 0, std::vector<int64_t>(out.shape.begin(), out.shape.end() - 2)};
    std::vector<int64_t> offA, offB;
    const Tensor *pair[2] = {&ab, &bb};
    forEachBroadcast<2>(ob, pair, [&](int64_t, const int64_t *o) {
      offA.push_back(o[0]);
      offB.push_back(o[1]);
    });
    if (ob.shape.empty()) {
      offA = {0};
      offB = {0};
    }
    const float *A = a.as<float>(), *B = b.as<float>();
    float *C = out.as<float>();
    int64_t batches = offA.size();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t i = 0; i < m; ++i) {
        const float *ar = A + offA[bi] * m * k + i * k;
        const float *bm = B + offB[bi] * k * n;
        float *cr = C + bi * m * n + i * n;
        for (int64_t j = 0; j < n; ++j) {
          float acc = 0;
          if (tb) {
            const float *br = bm + j * k;
            for (int64_t x = 0; x < k; ++x)
              acc += ar[x] * br[x];
          } else {
            for (int64_t x = 0; x < k; ++x)
              acc += ar[x] * bm[x * n + j];
          }
          cr[j] = acc;
        }
      }
    (void)rb;
    return "";
  }
  case TFC_KERNEL_ADD:
  case TFC_KERNEL_SUB:
  case TFC_KERNEL_MUL:
  case TFC_KERNEL_DIV:
  case TFC_KERNEL_AND:
  case TFC_KERNEL_COMPARE: {
    const Tensor *pair[2] = {in[0], in[1]};
    if (kernel == TFC_KERNEL_AND) {
      const uint8_t *a = in[0]->as<uint8_t>(), *b = in[1]->as<uint8_t>();
      uint8_t *o = out.as<uint8_t>();
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *off) {
        o[e] = a[off[0]] && b[off[1]];
      });
      return "";
    }
    if (kernel == TFC_KERNEL_COMPARE) {
      int64_t pred = ints[0];
      uint8_t *o = out.as<uint8_t>();
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *off) {
        double x = loadAsDouble(*in[0], off[0]), y = loadAsDouble(*in[1], off[1]);
        bool r = pred == 0 ? x == y : pred == 1 ? x != y : pred == 2 ? x < y
                 : pred == 3 ? x <= y : pred == 4 ? x > y : x >= y;
        o[e] = r;
      });
      return "";
    }
    if (in[0]->dtype != TFC_DTYPE_F32) {
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *off) {
        double x = loadAsDouble(*in[0], off[0]), y = loadAsDouble(*in[1], off[1]);
        double r = kernel == TFC_KERNEL_ADD ? x + y : kernel == TFC_KERNEL_SUB ? x - y
                   : kernel == TFC_KERNEL_MUL ? x * y : x / y;
        storeFromDouble(out, e, r);
      });
      return "";
    }
    const float *a = in[0]->as<float>(), *b = in[1]->as<float>();
    float *o = out.as<float>();
    switch (kernel) {
    case TFC_KERNEL_ADD:
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *f) { o[e] = a[f[0]] + b[f[1]]; });
      break;
    case TFC_KERNEL_SUB:
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *f) { o[e] = a[f[0]] - b[f[1]]; });
      break;
    case TFC_KERNEL_MUL:
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *f) { o[e] = a[f[0]] * b[f[1]]; });
      break;
    default:
      forEachBroadcast<2>(out, pair, [&](int64_t e, const int64_t *f) { o[e] = a[f[0]] / b[f[1]]; });
      break;
    }
    return "";
  }
  case TFC_KERNEL_NOT: {
    const uint8_t *a = in[0]->as<uint8_t>();
    uint8_t *o = out.as<uint8_t>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
      o[i] = !a[i];
    return "";
  }
  case TFC_KERNEL_CAST:
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
      storeFromDouble(out, i, loadAsDouble(*in[0], i));
    return "";
  case TFC_KERNEL_MASKED_FILL: {
    const Tensor *pair[2] = {in[0], in[1]};
    const float *x = in[0]->as<float>();
    const uint8_t *m = in[1]->as<uint8_t>();
    float v = (float)floats[0];
    float *o = out.as<float>();
    forEachBroadcast<2>(out, pair,
                        [&](int64_t e, const int64_t *f) { o[e] = m[f[1]] ? v : x[f[0]]; });
    return "";
  }
  case TFC_KERNEL_SELECT: {
    const Tensor *tri[3] = {in[0], in[1], in[2]};
    const uint8_t *c = in[0]->as<uint8_t>();
    forEachBroadcast<3>(out, tri, [&](int64_t e, const int64_t *f) {
      storeFromDouble(out, e, c[f[0]] ? loadAsDouble(*in[1], f[1]) : loadAsDouble(*in[2], f[2]));
    });
    return "";
  }
  case TFC_KERNEL_TRANSPOSE: {
    const Tensor &x = *in[0];
    size_t r = x.shape.size(), es = x.dtype == TFC_DTYPE_I64 ? 8 : x.dtype == TFC_DTYPE_BOOL ? 1 : 4;
    // Input strides permuted into output order.
    std::vector<int64_t> inStride(r), st(r);
    int64_t s = 1;
    for (size_t i = r; i-- > 0;) {
      inStride[i] = s;
      s *= x.shape[i];
    }
    for (size_t i = 0; i < r; ++i)
      st[i] = inStride[ints[i]];
    std::vector<int64_t> idx(r, 0);
    int64_t off = 0;
    const char *src = static_cast<const char *>(x.data);
    char *dst = static_cast<char *>(out.data);
    for (int64_t e = 0, n = out.numel(); e < n; ++e) {
      std::memcpy(dst + e * es, src + off * es, es);
      for (size_t d = r; d-- > 0;) {
        if (++idx[d] < out.shape[d]) {
          off += st[d];
          break;
        }
        off -= st[d] * (out.shape[d] - 1);
        idx[d] = 0;
      }
    }
    return "";
  }
  case TFC_KERNEL_SLICE: {
    const Tensor &x = *in[0];
    int64_t axis = ints[0], start = ints[1], size = ints[2];
    int64_t outer, len, inner;
    aroundAxis(x.shape, axis, outer, len, inner);
    size_t es = tfc_dtype_size(x.dtype);
    const char *src = static_cast<const char *>(x.data);
    char *dst = static_cast<char *>(out.data);
    // A packed QKV projection's slices are 2 MB each at 1280 rows: worth both threads.
#pragma omp parallel for schedule(static) if (outer * size * inner * (int64_t)es >= (1 << 18))
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * size * inner * es, src + (o * len + start) * inner * es,
                  size * inner * es);
    return "";
  }
  case TFC_KERNEL_REDUCE_MEAN:
  case TFC_KERNEL_REDUCE_SUM: {
    const Tensor &x = *in[0];
    int64_t outer, len, inner;
    aroundAxis(x.shape, ints[0], outer, len, inner);
    const float *a = x.as<float>();
    float *o = out.as<float>();
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        float acc = 0;
        for (int64_t l = 0; l < len; ++l)
          acc += a[(i * len + l) * inner + j];
        o[i * inner + j] = kernel == TFC_KERNEL_REDUCE_MEAN ? acc / (float)len : acc;
      }
    return "";
  }
  // The elementwise float kernels of tfc/unary.def: elementwise_cpu.cc.
#define TFC_UNARY(ENUM, EXPR) case TFC_KERNEL_##ENUM:
#include "tfc/unary.def"
#undef TFC_UNARY
    runUnary(kernel, ints.empty() ? 0 : ints[0], in[0]->as<float>(), out.as<float>(),
             out.numel());
    return "";
  case TFC_KERNEL_SOFTMAX:
  case TFC_KERNEL_LOG_SOFTMAX: {
    const Tensor &x = *in[0];
    int64_t outer, len, inner;
    aroundAxis(x.shape, ints[0], outer, len, inner);
    const float *a = x.as<float>();
    float *o = out.as<float>();
    bool logp = kernel == TFC_KERNEL_LOG_SOFTMAX;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        const float *row = a + i * len * inner + j;
        float *orow = o + i * len * inner + j;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t l = 0; l < len; ++l)
          mx = std::max(mx, row[l * inner]);
        double sum = 0;
        for (int64_t l = 0; l < len; ++l)
          sum += std::exp((double)row[l * inner] - mx);
        for (int64_t l = 0; l < len; ++l)
          orow[l * inner] = logp ? (float)((double)row[l * inner] - mx - std::log(sum))
                                 : (float)(std::exp((double)row[l * inner] - mx) / sum);
      }
    return "";
  }
  case TFC_KERNEL_LAYER_NORM: {
    const Tensor &x = *in[0];
    int64_t d = x.shape.back();
    int64_t rows = x.numel() / d;
    thread_local std::vector<float> xbuf, ybuf;
    const NormVariant variant = ints[0] == 1   ? NormVariant::StdNorm
                                : ints[0] == 2 ? NormVariant::RmsNorm
                                               : NormVariant::LayerNorm;
    layerNorm(variant, rows, d, asF32(x, xbuf), d, in[1]->as<float>(),
              in.size() > 2 ? in[2]->as<float>() : nullptr, (float)floats[0],
              outF32(out, ybuf), d);
    finishOut(out, ybuf);
    return "";
  }
  case TFC_KERNEL_ATTENTION: {
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
    AttentionParams p{};
    p.batch = q.shape[0];
    p.q_len = q.shape[1];
    p.kv_len = k.shape[1];
    p.heads = ints[1];
    p.head_dim = q.shape[2] / p.heads;
    p.v_head_dim = v.shape[2] / p.heads;
    p.q_row_stride = q.shape[2];
    p.k_row_stride = k.shape[2];
    p.v_row_stride = v.shape[2];
    p.out_row_stride = out.shape[2];
    p.scale = (float)floats[0];
    p.mask = static_cast<MaskKind>(ints[0]);
    p.mask_value = (float)floats[1];
    p.pad_id = ints[2];
    if (p.mask == MaskKind::KeyPadding || p.mask == MaskKind::PaddingCausal) {
      if (in[3]->dtype != TFC_DTYPE_I64)
        return "attention key tokens must be i64";
      p.key_tokens = in[3]->as<int64_t>();
    }
    if (p.mask == MaskKind::Additive) {
      // The additive mask broadcasts to [B, H, Sq, Sk]; right-align its dims.
      const Tensor &m = *in[3];
      std::vector<int64_t> full(4, 1);
      for (size_t i = 0; i < m.shape.size(); ++i)
        full[4 - m.shape.size() + i] = m.shape[i];
      int64_t sk = full[3], sq = full[2], sh = full[1];
      p.additive = m.as<float>();
      p.add_stride_q = full[2] == 1 ? 0 : sk;
      p.add_stride_h = full[1] == 1 ? 0 : sq * sk;
      p.add_stride_b = full[0] == 1 ? 0 : sh * sq * sk;
      if (full[3] != p.kv_len)
        return "additive mask does not cover every key";
    }
    if (ints.size() > 5 && ints[3]) // T5's relative position bias: the last input
      setRelativeBias(p, *in.back(), ints[4], ints[5]);
    // bf16 q/k/v are widened once (the kernel's arithmetic is f32 either way).
    thread_local std::vector<float> qb, kb, vb, ob;
    attention(p, asF32(q, qb), asF32(k, kb), asF32(v, vb), outF32(out, ob));
    finishOut(out, ob);
    return "";
  }
  case TFC_KERNEL_CACHED_ATTENTION: {
    // q/k/v: [B, T, D] new tokens at positions pos..pos+T-1; caches [B, L, D].
    const Tensor &q = *in[0], &k = *in[1], &v = *in[2], &kc = *in[3], &vc = *in[4];
    const int64_t pos = *in[5]->as<int64_t>();
    const int64_t B = q.shape[0], T = q.shape[1], L = kc.shape[1];
    const int64_t dk = k.shape[2], dv = v.shape[2];
    if (pos < 0 || pos + T > L)
      return "decode position " + std::to_string(pos + T) + " is beyond the KV cache's " +
             std::to_string(L) + " positions";
    if (kc.shape[0] < B || vc.shape[0] < B)
      return "the KV cache holds fewer rows than the batch";
    float *kcache = kc.as<float>(), *vcache = vc.as<float>();
    for (int64_t b = 0; b < B; ++b) {
      std::memcpy(kcache + (b * L + pos) * dk, k.as<float>() + b * T * dk,
                  sizeof(float) * T * dk);
      std::memcpy(vcache + (b * L + pos) * dv, v.as<float>() + b * T * dv,
                  sizeof(float) * T * dv);
    }
    AttentionParams p{};
    p.batch = B;
    p.q_len = T;
    p.kv_len = pos + T;
    p.heads = ints[0];
    p.head_dim = q.shape[2] / p.heads;
    p.v_head_dim = dv / p.heads;
    p.q_row_stride = q.shape[2];
    p.k_row_stride = dk;
    p.v_row_stride = dv;
    p.out_row_stride = out.shape[2];
    p.k_batch_stride = L * dk;
    p.v_batch_stride = L * dv;
    p.q_pos_offset = pos;
    p.scale = (float)floats[0];
    p.mask = MaskKind::Causal;
    p.mask_value = -INFINITY;
    if (ints.size() > 3 && ints[1])
      setRelativeBias(p, *in[6], ints[2], ints[3]);
    attention(p, q.as<float>(), kcache, vcache, out.as<float>());
    return "";
  }
  case TFC_KERNEL_RELATIVE_POSITION_BIAS: {
    // out[0, h, i, j] = table[bucket(j - i), h]
    const Tensor &t = *in[0];
    const int64_t nb = t.shape[0], H = t.shape[1], sq = out.shape[2], sk = out.shape[3];
    const float *tab = t.as<float>();
    float *o = out.as<float>();
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j) {
        const int64_t row = tfc_relative_bucket(j - i, ints[0] ? 1 : 0, nb, ints[1]);
        for (int64_t h = 0; h < H; ++h)
          o[(h * sq + i) * sk + j] = tab[row * H + h];
      }
    return "";
  }
  case TFC_KERNEL_POSITIONS: {
    int64_t *o = out.as<int64_t>();
    if (ints.size() > 1) { // RoBERTa: real tokens numbered from padding_idx + 1
      const Tensor &ids = *in[0];
      const int64_t pad = ints[1], rows = ids.shape[0], seq = ids.shape[1];
      for (int64_t b = 0; b < rows; ++b) {
        int64_t count = 0;
        for (int64_t i = 0; i < seq; ++i) {
          const int64_t id = ids.dtype == TFC_DTYPE_I32 ? ids.as<int32_t>()[b * seq + i]
                                                        : ids.as<int64_t>()[b * seq + i];
          o[b * seq + i] = id != pad ? pad + ++count : pad;
        }
      }
      return "";
    }
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
      o[i] = i;
    return "";
  }
  case TFC_KERNEL_NOPEAK_MASK: {
    int64_t s = out.shape[1];
    uint8_t *o = out.as<uint8_t>();
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j)
        o[i * s + j] = j <= i;
    return "";
  }
  default:
    return "kernel " + std::to_string(kernel) + " is not implemented on the CPU";
  }
}

} // namespace

Status runKernel(uint32_t kernel, const std::vector<const Tensor *> &in, Tensor &out,
                 const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  // The kernel's contract first (backends/kernel_rules.h): whatever the plan
  // says, no kernel below reads or writes outside its operands.
  std::string bad = checkKernelCall(KernelBackend::Cpu, kernel, in, out, ints, floats);
  if (!bad.empty())
    return Status::invalidModel(std::move(bad));
  return Status::fromMessage(dispatch(kernel, in, out, ints, floats));
}

} // namespace tfc::cpu
