//===- kernel_rules.cc - the shape relations of each kernel ---------------===//
//
// One checkShapes() per row of tfc/kernels.def. Each rule is the
// precondition of a read or write in the CPU kernels or the CUDA dispatch: a
// dim a loop runs to, a stride, a divisor. Arity, dtypes and attribute ranges
// were checked from the schema before these run (kernel_call.cc).
//
//===----------------------------------------------------------------------===//
#include "backends/kernel_rules.h"

#include "tfc/abi.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tfc {
namespace {

using Shape = std::vector<int64_t>;

/// |cond|, or records |what| and is false. A macro so that the message, which
/// formats shapes, is built only when the rule is broken: these checks run
/// before every kernel call.
#define TFC_REQUIRE(cond, what) ((cond) || r.fail(what))

std::string str(const Shape &s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i)
    t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

std::string str(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

/// The first broken rule of one call.
class Rules {
public:
  Rules(const char *kernel, const Tensor &out) : kernel(kernel), out(out) {}

  bool fail(const std::string &what) {
    if (err.empty())
      err = std::string(kernel) + ": " + what;
    return false;
  }
  bool rank(const Tensor &t, const char *what, size_t n) {
    return t.shape.size() == n ||
           fail(std::string(what) + " has rank " + std::to_string(t.shape.size()) + ", not " +
                std::to_string(n) + " (shape " + str(t.shape) + ")");
  }
  bool same(const Tensor &a, const char *wa, const Shape &want) {
    return a.shape == want || fail(std::string(wa) + " is " + str(a.shape) + ", not " + str(want));
  }
  bool numel(const Tensor &t, const char *what, int64_t n) {
    return t.numel() == n ||
           fail(std::string(what) + " is " + str(t.shape) + ", not [" + std::to_string(n) + "]");
  }
  bool range(int64_t v, int64_t lo, int64_t hi, const char *what) {
    return (v >= lo && v <= hi) ||
           fail(std::string(what) + " is " + std::to_string(v) + ", outside [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  bool positive(int64_t v, const char *what) {
    return v >= 1 || fail(std::string(what) + " " + std::to_string(v) + " is not positive");
  }
  /// numpy broadcasting of |t| to the output's shape.
  bool broadcasts(const Tensor &t, const char *what) {
    bool ok = t.shape.size() <= out.shape.size();
    for (size_t i = 0; ok && i < t.shape.size(); ++i) {
      int64_t d = t.shape[t.shape.size() - 1 - i], o = out.shape[out.shape.size() - 1 - i];
      ok = d == o || d == 1;
    }
    return ok || fail(std::string(what) + " " + str(t.shape) + " does not broadcast to the " +
                      "output " + str(out.shape));
  }
  /// |x| split around |axis|: the axis in range.
  bool axis(const Tensor &x, int64_t axis) {
    return range(axis, 0, (int64_t)x.shape.size() - 1, "the axis");
  }
  /// A relative position bias table [num_buckets, heads] with its bucketing
  /// (tfc/relative_bucket.h).
  bool relativeBias(const Tensor &t, int64_t heads, bool bidirectional, int64_t maxDistance) {
    if (!rank(t, "the position bias table", 2) ||
        !(t.shape[1] == heads || fail("the position bias table " + str(t.shape) + " is not [" +
                                      "num_buckets, " + std::to_string(heads) + "]")))
      return false;
    const int64_t exact = bidirectional ? t.shape[0] / 4 : t.shape[0] / 2;
    return (exact >= 1 && maxDistance > exact) ||
           fail(std::to_string(t.shape[0]) + " buckets with max_distance " +
                std::to_string(maxDistance) + " are not a bucketing");
  }
  /// An i8 weight comes with its descriptor's scales, one per row or per
  /// group of a multiple of 32 (the loader checked their shape); a float one
  /// with none.
  bool quantized(const Tensor &w, const char *what) {
    if (w.dtype == TFC_DTYPE_I4)
      return (w.scales && w.group > 0 && w.group % 32 == 0) ||
             fail(std::string("the i4 ") + what +
                  (w.scales ? " has groups of " + std::to_string(w.group) +
                                  ", not a multiple of 32"
                            : " has no scales"));
    if (w.dtype != TFC_DTYPE_I8)
      return true;
    return (w.scales && (w.group == 0 || (w.group > 0 && w.group % 32 == 0))) ||
           fail(std::string("the i8 ") + what + (w.scales ? " has groups of " +
                                                                std::to_string(w.group) +
                                                                ", not a multiple of 32"
                                                          : " has no scales"));
  }
  /// q [B, Sq, H*Dk], k [B, Sk, H*Dk], v [B, Sk, H*Dv] -> out [B, Sq, H*Dv].
  /// h query heads over kv key/value heads (0: h) of the same width: q is h
  /// heads, k and v kv heads each. The output's width goes to |outWidth|.
  bool heads(const Tensor &q, const Tensor &k, const Tensor &v, int64_t h, int64_t kv,
             int64_t &outWidth) {
    if (!positive(h, "the head count"))
      return false;
    if (kv == 0)
      kv = h;
    if (kv < 0 || h % kv != 0)
      return fail(std::to_string(kv) + " key/value heads do not divide " + std::to_string(h) +
                  " heads");
    outWidth = kv ? v.shape[2] / kv * h : 0;
    return (q.shape[2] % h == 0 && v.shape[2] % kv == 0 && k.shape[2] % kv == 0 &&
            k.shape[2] / kv == q.shape[2] / h) ||
           fail(std::to_string(h) + " heads" +
                (kv == h ? std::string() : " over " + std::to_string(kv) + " key/value heads") +
                " do not divide q " + str(q.shape) + ", k " + str(k.shape) + " and v " +
                str(v.shape));
  }

  const char *kernel;
  const Tensor &out;
  std::string err;
};

/// The linear kernels: x [..., K], weight [N, K] -> [..., N]; bias [N];
/// residual and multiplier like the output; an i8 weight brings its per-row
/// scales.
template <typename CallT>
std::string linearShapes(const CallT &c, const Tensor *residual,
                         const Tensor *multiplier = nullptr) {
  Rules r(c.kName, *c.out);
  const Tensor &x = *c.x, &w = *c.weight;
  if (!r.rank(w, "the weight", 2))
    return r.err;
  const int64_t n = w.shape[0], k = w.shape[1];
  if (!TFC_REQUIRE(k >= 1 && n >= 1, "the weight " + str(w.shape) + " is empty") ||
      !TFC_REQUIRE(!x.shape.empty() && x.shape.back() == k,
                   "the input " + str(x.shape) + " does not end in the weight's " +
                       std::to_string(k) + " inputs"))
    return r.err;
  Shape want(x.shape.begin(), x.shape.end() - 1);
  want.push_back(n);
  (void)(r.same(*c.out, "the output", want) &&
         (!c.bias || r.numel(*c.bias, "the bias", n)) &&
         (!residual || r.same(*residual, "the residual", c.out->shape)) &&
         (!multiplier || r.same(*multiplier, "the multiplier", c.out->shape)) &&
         r.quantized(w, "weight"));
  return r.err;
}

std::string unaryShapes(const char *name, const Tensor &in, const Tensor &out) {
  Rules r(name, out);
  r.same(in, "the input", out.shape);
  return r.err;
}

template <typename CallT> std::string broadcastShapes(const CallT &c) {
  Rules r(c.kName, *c.out);
  (void)(r.broadcasts(*c.lhs, "the left operand") && r.broadcasts(*c.rhs, "the right operand"));
  return r.err;
}

/// Reductions and softmaxes over one axis of their input.
template <typename CallT> std::string axisShapes(const CallT &c, bool reduces) {
  Rules r(c.kName, *c.out);
  const Tensor &x = *c.input;
  if (!r.axis(x, c.attrs.axis))
    return r.err;
  if (!reduces) {
    r.same(*c.out, "the output", x.shape);
    return r.err;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < c.attrs.axis; ++i)
    outer *= x.shape[i];
  for (size_t i = c.attrs.axis + 1; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  TFC_REQUIRE(c.out->numel() == outer * inner,
              "the output " + str(c.out->shape) + " is not the input " + str(x.shape) + " reduced");
  return r.err;
}

/// Views: the executor aliases the source and checks the sizes agree.
std::string viewShapes(const char *name, const Tensor &in, const Tensor &out) {
  Rules r(name, out);
  TFC_REQUIRE(in.numel() == out.numel(),
              "the view " + str(out.shape) + " does not have its source's size");
  return r.err;
}

} // namespace

std::vector<int64_t> additiveMaskDims(const Tensor &m) {
  std::vector<int64_t> full(4, 1);
  for (size_t i = 0; i < m.shape.size() && i < 4; ++i)
    full[4 - std::min<size_t>(m.shape.size(), 4) + i] = m.shape[i];
  return full;
}

AdditiveMaskStrides additiveMaskStrides(const Tensor &m) {
  const std::vector<int64_t> full = additiveMaskDims(m);
  const int64_t sk = full[3], sq = full[2], sh = full[1];
  return {full[2] == 1 ? 0 : sk, full[1] == 1 ? 0 : sq * sk, full[0] == 1 ? 0 : sh * sq * sk};
}

std::string checkShapes(const TokenEmbeddingCall &c) {
  Rules r(c.kName, *c.out);
  const Tensor &ids = *c.ids, &table = *c.table;
  if (!r.rank(ids, "the ids", 2) || !r.rank(table, "the table", 2) ||
      !r.same(*c.out, "the output", {ids.shape[0], ids.shape[1], table.shape[1]}))
    return r.err;
  if (c.positions)
    (void)(r.rank(*c.positions, "the positional table", 2) &&
           TFC_REQUIRE(c.positions->shape[1] == table.shape[1],
                       "the positional table is " + str(c.positions->shape) +
                           ", not as wide as the table"));
  if (c.type_ids)
    (void)(r.same(*c.type_ids, "the type ids", ids.shape) &&
           r.rank(*c.type_table, "the type table", 2) &&
           TFC_REQUIRE(c.type_table->shape[1] == table.shape[1],
                       "the type table is " + str(c.type_table->shape) +
                           ", not as wide as the table"));
  if (c.offset)
    TFC_REQUIRE(c.offset->numel() == 1 || (c.offset->shape.size() == 1 &&
                                          c.offset->shape[0] == c.ids->shape[0]),
                "the position offset " + str(c.offset->shape) +
                    " is neither one value nor one per row of the ids " + str(c.ids->shape));
  r.quantized(table, "table");
  return r.err;
}

std::string checkShapes(const EmbeddingCall &c) {
  Rules r(c.kName, *c.out);
  if (!r.rank(*c.table, "the table", 2))
    return r.err;
  Shape want = c.ids->shape;
  want.push_back(c.table->shape[1]);
  r.same(*c.out, "the output", want);
  return r.err;
}

std::string checkShapes(const LinearCall &c) { return linearShapes(c, nullptr); }
std::string checkShapes(const FusedLinearCall &c) {
  return linearShapes(c, c.residual, c.multiplier);
}

std::string checkShapes(const MatmulCall &c) {
  Rules r(c.kName, *c.out);
  const Tensor &a = *c.a, &b = *c.b, &out = *c.out;
  const size_t ra = a.shape.size(), rb = b.shape.size(), ro = out.shape.size();
  if (!TFC_REQUIRE(ra >= 2 && rb >= 2 && ro >= 2 && ro >= ra && ro >= rb,
                   "operands " + str(a.shape) + " x " + str(b.shape) + " -> " + str(out.shape) +
                       " are not batched matrices"))
    return r.err;
  const bool tb = c.attrs.transpose_b;
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1];
  const int64_t bk = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  const int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  bool ok = TFC_REQUIRE(bk == k && out.shape[ro - 2] == m && out.shape[ro - 1] == n,
                        str(a.shape) + " x " + str(b.shape) + (tb ? "^T" : "") +
                            " does not give " + str(out.shape));
  // The batch dims broadcast to the output's.
  for (const Tensor *t : {&a, &b})
    for (size_t i = 2; ok && i < t->shape.size(); ++i) {
      int64_t d = t->shape[t->shape.size() - 1 - i], o = out.shape[ro - 1 - i];
      ok = TFC_REQUIRE(d == o || d == 1, "the batch dims of " + str(t->shape) +
                                             " do not broadcast to " + str(out.shape));
    }
  return r.err;
}

/// The CPU reads an f32 operation's operands and output as f32: with an f32
/// left operand, the right one and the output are f32 too.
template <typename CallT> std::string arithmeticShapes(const CallT &c) {
  std::string err = broadcastShapes(c);
  if (err.empty() && c.lhs->dtype == TFC_DTYPE_F32 &&
      (c.rhs->dtype != TFC_DTYPE_F32 || c.out->dtype != TFC_DTYPE_F32))
    err = std::string(c.kName) + ": an f32 operation reads " + tfc_dtype_name(c.rhs->dtype) +
          " and writes " + tfc_dtype_name(c.out->dtype);
  return err;
}

std::string checkShapes(const AddCall &c) { return arithmeticShapes(c); }
std::string checkShapes(const SubCall &c) { return arithmeticShapes(c); }
std::string checkShapes(const MulCall &c) { return arithmeticShapes(c); }
std::string checkShapes(const DivCall &c) { return arithmeticShapes(c); }
std::string checkShapes(const AndCall &c) { return broadcastShapes(c); }
std::string checkShapes(const CompareCall &c) { return broadcastShapes(c); }
std::string checkShapes(const NotCall &c) { return unaryShapes(c.kName, *c.input, *c.out); }

std::string checkShapes(const CastCall &c) {
  Rules r(c.kName, *c.out);
  TFC_REQUIRE(c.input->numel() == c.out->numel(), "the input " + str(c.input->shape) +
                                                      " and the output " + str(c.out->shape) +
                                                      " differ in size");
  return r.err;
}

std::string checkShapes(const MaskedFillCall &c) {
  Rules r(c.kName, *c.out);
  (void)(r.broadcasts(*c.input, "the input") && r.broadcasts(*c.mask, "the mask"));
  return r.err;
}

std::string checkShapes(const SelectCall &c) {
  Rules r(c.kName, *c.out);
  (void)(r.broadcasts(*c.condition, "the condition") &&
         r.broadcasts(*c.on_true, "the first choice") &&
         r.broadcasts(*c.on_false, "the second choice"));
  return r.err;
}

std::string checkShapes(const ReshapeCall &c) { return viewShapes(c.kName, *c.input, *c.out); }
std::string checkShapes(const UnsqueezeCall &c) { return viewShapes(c.kName, *c.input, *c.out); }

std::string checkShapes(const TransposeCall &c) {
  Rules r(c.kName, *c.out);
  const Tensor &x = *c.input;
  const std::vector<int64_t> &perm = c.attrs.perm;
  const size_t n = x.shape.size();
  if (!TFC_REQUIRE(perm.size() == n && c.out->shape.size() == n,
                   "the permutation has " + std::to_string(perm.size()) +
                       " entries for an input of rank " + std::to_string(n) +
                       " and an output of rank " + std::to_string(c.out->shape.size())))
    return r.err;
  std::vector<char> seen(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!TFC_REQUIRE(perm[i] >= 0 && perm[i] < (int64_t)n && !seen[perm[i]],
                     "the permutation is not one of 0.." + std::to_string(n - 1)))
      return r.err;
    seen[perm[i]] = 1;
    if (!TFC_REQUIRE(c.out->shape[i] == x.shape[perm[i]],
                     "the output " + str(c.out->shape) + " is not the permuted input " +
                         str(x.shape)))
      return r.err;
  }
  return r.err;
}

std::string checkShapes(const SliceCall &c) {
  Rules r(c.kName, *c.out);
  const Tensor &x = *c.input;
  if (!r.axis(x, c.attrs.axis))
    return r.err;
  const int64_t len = x.shape[c.attrs.axis], size = c.attrs.size;
  const int64_t start = sliceStart(c.attrs.start, len);
  if (!TFC_REQUIRE(start >= 0 && size >= 0 && start <= len && size <= len - start,
                   "rows [" + std::to_string(c.attrs.start) + ", +" + std::to_string(size) +
                       ") are outside the input's " + std::to_string(len)))
    return r.err;
  Shape want = x.shape;
  want[c.attrs.axis] = size;
  r.same(*c.out, "the output", want);
  return r.err;
}

std::string checkShapes(const ReduceMeanCall &c) { return axisShapes(c, true); }
std::string checkShapes(const ReduceSumCall &c) { return axisShapes(c, true); }
std::string checkShapes(const SoftmaxCall &c) { return axisShapes(c, false); }
std::string checkShapes(const LogSoftmaxCall &c) { return axisShapes(c, false); }
std::string checkShapes(const SqrtCall &c) { return unaryShapes(c.kName, *c.input, *c.out); }
std::string checkShapes(const ReluCall &c) { return unaryShapes(c.kName, *c.input, *c.out); }
std::string checkShapes(const GeluCall &c) { return unaryShapes(c.kName, *c.input, *c.out); }
std::string checkShapes(const SiluCall &c) { return unaryShapes(c.kName, *c.input, *c.out); }
std::string checkShapes(const TanhCall &c) { return unaryShapes(c.kName, *c.input, *c.out); }

std::string checkShapes(const LayerNormCall &c) {
  Rules r(c.kName, *c.out);
  const Tensor &x = *c.x;
  if (!TFC_REQUIRE(!x.shape.empty() && x.shape.back() >= 1,
                   "the input " + str(x.shape) + " has no axis to normalize"))
    return r.err;
  const int64_t d = x.shape.back();
  (void)(r.same(*c.out, "the output", x.shape) && r.numel(*c.gamma, "the scale", d) &&
         (!c.beta || r.numel(*c.beta, "the shift", d)));
  return r.err;
}

std::string checkShapes(const AttentionCall &c) {
  Rules r(c.kName, *c.out);
  const Tensor &q = *c.q, &k = *c.k, &v = *c.v;
  const auto &a = c.attrs;
  if (!(r.rank(q, "q", 3) && r.rank(k, "k", 3) && r.rank(v, "v", 3) &&
        r.rank(*c.out, "the output", 3)))
    return r.err;
  const int64_t b = q.shape[0], sq = q.shape[1];
  int64_t sk = k.shape[1];
  int64_t width = 0;
  if (const Tensor *t = c.block_table) {
    // k and v are [N, L, D] blocks the rows share; row b reads nb of them:
    // its keys are the key tokens' count, else all nb * L.
    if (!(TFC_REQUIRE(t->shape.size() == 2 && t->shape[0] == b && t->shape[1] >= 1,
                      "the block table " + str(t->shape) + " is not [" + std::to_string(b) +
                          ", blocks]") &&
          TFC_REQUIRE(k.shape[0] == v.shape[0] && k.shape[1] == v.shape[1],
                      "the key blocks " + str(k.shape) + " and value blocks " +
                          str(v.shape) + " disagree") &&
          TFC_REQUIRE(a.mask_kind == TFC_MASK_NONE || a.mask_kind == TFC_MASK_KEY_PADDING,
                      "a block table takes no causal or additive mask") &&
          TFC_REQUIRE(!c.bias_table, "a block table takes no position bias")))
      return r.err;
    sk = t->shape[1] * k.shape[1];
    if (c.key_tokens && c.key_tokens->shape.size() == 2 && c.key_tokens->shape[0] == b) {
      if (!TFC_REQUIRE(c.key_tokens->shape[1] <= sk,
                       "the key tokens " + str(c.key_tokens->shape) + " outnumber the " +
                           std::to_string(sk) + " keys of " + std::to_string(t->shape[1]) +
                           " blocks of " + std::to_string(k.shape[1])))
        return r.err;
      sk = c.key_tokens->shape[1];
    }
  } else if (!TFC_REQUIRE(k.shape[0] == b && v.shape[0] == b && v.shape[1] == sk,
                          "q " + str(q.shape) + ", k " + str(k.shape) + " and v " +
                              str(v.shape) + " disagree on the batch or the keys")) {
    return r.err;
  }
  if (!(r.heads(q, k, v, a.num_heads, a.num_kv_heads, width) &&
        r.same(*c.out, "the output", {b, sq, width})))
    return r.err;
  if (!TFC_REQUIRE(a.window == 0 || (a.window > 0 && (a.mask_kind == TFC_MASK_CAUSAL ||
                                                       a.mask_kind == TFC_MASK_PADDING_CAUSAL)),
                   "a sliding window of " + std::to_string(a.window) +
                       " must be positive and needs a causal mask"))
    return r.err;
  if (!TFC_REQUIRE(a.softcap >= 0, "the score soft-cap " + str(a.softcap) +
                                       " is negative"))
    return r.err;
  if (c.bias_table &&
      !(TFC_REQUIRE(a.mask_kind != TFC_MASK_ADDITIVE, "takes a position bias with an additive mask") &&
        r.relativeBias(*c.bias_table, a.num_heads, a.bidirectional, a.max_distance)))
    return r.err;
  if (c.key_tokens)
    r.same(*c.key_tokens, "the key tokens", {b, sk});
  if (c.mask) { // additive: broadcasts to [B, H, Sq, Sk]
    const Tensor &m = *c.mask;
    if (!TFC_REQUIRE(m.shape.size() <= 4,
                     "the additive mask has rank " + std::to_string(m.shape.size())))
      return r.err;
    const Shape full = additiveMaskDims(m);
    if (full[3] != sk) // the kernel's own wording
      return r.fail("additive mask does not cover every key"), r.err;
    TFC_REQUIRE((full[0] == 1 || full[0] == b) && (full[1] == 1 || full[1] == a.num_heads) &&
                    (full[2] == 1 || full[2] == sq),
                "the additive mask " + str(m.shape) + " does not broadcast to [" +
                    std::to_string(b) + ", " + std::to_string(a.num_heads) + ", " +
                    std::to_string(sq) + ", " + std::to_string(sk) + "]");
  }
  return r.err;
}

std::string checkShapes(const CachedAttentionCall &c) {
  // q, k, v [B, T, *], k_cache [R, L, Dk], v_cache [R, L, Dv], pos.
  Rules r(c.kName, *c.out);
  const Tensor &q = *c.q, &k = *c.k, &v = *c.v, &kc = *c.k_cache, &vc = *c.v_cache;
  if (!(r.rank(q, "q", 3) && r.rank(k, "k", 3) && r.rank(v, "v", 3) &&
        r.rank(kc, "the key cache", 3) && r.rank(vc, "the value cache", 3) &&
        r.rank(*c.out, "the output", 3)))
    return r.err;
  const int64_t heads = c.attrs.num_heads, b = q.shape[0], t = q.shape[1];
  int64_t width = 0;
  if (!TFC_REQUIRE(c.attrs.window >= 0,
                   "the sliding window " + std::to_string(c.attrs.window) + " is negative") ||
      !TFC_REQUIRE(c.attrs.softcap >= 0, "the score soft-cap " + str(c.attrs.softcap) +
                                             " is negative"))
    return r.err;
  if (c.bias_table &&
      !r.relativeBias(*c.bias_table, heads, c.attrs.bidirectional, c.attrs.max_distance))
    return r.err;
  (void)(TFC_REQUIRE(k.shape[0] == b && v.shape[0] == b && k.shape[1] == t && v.shape[1] == t,
                     "q " + str(q.shape) + ", k " + str(k.shape) + " and v " + str(v.shape) +
                         " disagree on the batch or the new positions") &&
         r.heads(q, k, v, heads, c.attrs.num_kv_heads, width) &&
         TFC_REQUIRE(kc.shape[2] == k.shape[2] && vc.shape[2] == v.shape[2] &&
                         kc.shape[1] == vc.shape[1] && kc.shape[0] == vc.shape[0],
                     "the caches " + str(kc.shape) + " and " + str(vc.shape) +
                         " do not hold k and v rows") &&
         TFC_REQUIRE(c.pos->numel() == 1 || (c.pos->shape.size() == 1 && c.pos->shape[0] == b),
                     "the positions " + str(c.pos->shape) +
                         " are neither one value nor one per row of the batch " +
                         std::to_string(b)) &&
         (!c.block_table ||
          TFC_REQUIRE(c.block_table->shape.size() == 2 && c.block_table->shape[0] == b &&
                          c.block_table->shape[1] >= 1,
                      "the block table " + str(c.block_table->shape) + " is not [" +
                          std::to_string(b) + ", blocks]")) &&
         (!c.inv_freq ||
          (r.rank(*c.inv_freq, "inv_freq", 1) &&
           TFC_REQUIRE(c.inv_freq->shape[0] >= 1 && 2 * c.inv_freq->shape[0] <= q.shape[2] / heads,
                       "inv_freq " + str(c.inv_freq->shape) + " rotates more than head_dim " +
                           std::to_string(q.shape[2] / heads)))) &&
         r.same(*c.out, "the output", {b, t, width}));
  return r.err;
}

std::string checkShapes(const RotaryCall &c) {
  // x [B, S, H * head_dim], inv_freq [R / 2] with R <= head_dim, offset.
  Rules r(c.kName, *c.out);
  const Tensor &x = *c.x, &f = *c.inv_freq;
  const int64_t hd = c.attrs.head_dim;
  (void)(r.rank(x, "the input", 3) && r.rank(f, "inv_freq", 1) &&
         TFC_REQUIRE(hd > 0 && hd % 2 == 0 && x.shape[2] % hd == 0,
                     "head_dim " + std::to_string(hd) + " does not split the input " +
                         str(x.shape) + " into heads of even width") &&
         TFC_REQUIRE(f.shape[0] >= 1 && 2 * f.shape[0] <= hd,
                     "inv_freq " + str(f.shape) + " rotates more than head_dim " +
                         std::to_string(hd)) &&
         (!c.offset ||
          TFC_REQUIRE(c.offset->numel() == 1 ||
                          (c.offset->shape.size() == 1 && c.offset->shape[0] == x.shape[0]),
                      "the offsets " + str(c.offset->shape) +
                          " are neither one value nor one per row of the batch " +
                          std::to_string(x.shape[0]))) &&
         r.same(*c.out, "the output", x.shape));
  return r.err;
}

std::string checkShapes(const RelativePositionBiasCall &c) {
  // table [num_buckets, H], query ids [B, Sq], key ids [B, Sk] -> [1, H, Sq, Sk]
  Rules r(c.kName, *c.out);
  const Tensor &t = *c.table;
  (void)(r.rank(*c.query_ids, "the query ids", 2) && r.rank(*c.key_ids, "the key ids", 2) &&
         r.rank(t, "the position bias table", 2) &&
         r.relativeBias(t, t.shape[1], c.attrs.bidirectional, c.attrs.max_distance) &&
         r.same(*c.out, "the output",
                {1, t.shape[1], c.query_ids->shape[1], c.key_ids->shape[1]}));
  return r.err;
}

std::string checkShapes(const PositionsCall &c) {
  // With padding_idx: RoBERTa's positions of ids [B, S], [B, S].
  // With padding_idx (RoBERTa) the input is ids [B, S] and so is the output.
  Rules r(c.kName, *c.out);
  if (c.attrs.padding_idx >= 0)
    (void)(r.rank(*c.input, "the ids", 2) &&
           TFC_REQUIRE(c.input->dtype == TFC_DTYPE_I64 || c.input->dtype == TFC_DTYPE_I32,
                       std::string("the ids are ") + tfc_dtype_name(c.input->dtype) +
                           ", not i64 or i32") &&
           r.same(*c.out, "the output", c.input->shape));
  return r.err;
}

std::string checkShapes(const NopeakMaskCall &c) {
  Rules r(c.kName, *c.out);
  (void)(r.rank(*c.out, "the output", 3) &&
         r.same(*c.out, "the output", {1, c.out->shape[1], c.out->shape[1]}));
  return r.err;
}

} // namespace tfc
