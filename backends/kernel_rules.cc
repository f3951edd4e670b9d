//===- kernel_rules.cc - what each kernel's operands must satisfy ---------===//
//
// One function per kernel family. Each rule is the precondition of a read or
// write in the CPU kernels (backends/cpu/kernels_cpu.cc and the functions it
// calls) or the CUDA dispatch: a dim a loop runs to, a stride, a divisor, an
// index into the operand list. Dtype rules apply to the CPU, whose kernels
// read fixed element types; the CUDA dispatch checks its own dtypes.
//
//===----------------------------------------------------------------------===//
#include "backends/kernel_rules.h"

#include "tfc/abi.h"

#include <cmath>

namespace tfc {
namespace {

using Shape = std::vector<int64_t>;

/// |cond|, or records |what| and is false. A macro so that the message, which
/// formats shapes, is built only when the rule is broken: these checks run
/// before every kernel call.
#define TFC_REQUIRE(cond, what) ((cond) || fail(what))

std::string str(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

class Call {
public:
  Call(KernelBackend be, uint32_t kernel, const std::vector<const Tensor *> &in,
       const Tensor &out, const std::vector<int64_t> &ints, const std::vector<double> &floats)
      : be(be), kernel(kernel), in(in), out(out), ints(ints), floats(floats) {}

  /// Records the first broken rule; returns false so checks read `ok = ok && ...`.
  bool fail(const std::string &what) {
    if (err.empty())
      err = std::string(tfc_kernel_name(kernel)) + ": " + what;
    return false;
  }

  bool inputs(size_t n) {
    return TFC_REQUIRE(in.size() == n, "takes " + std::to_string(n) + " inputs, the plan gives " +
                                       std::to_string(in.size()));
  }
  bool rank(const Tensor &t, const char *what, size_t r) {
    return TFC_REQUIRE(t.shape.size() == r, std::string(what) + " has rank " +
                                            std::to_string(t.shape.size()) + ", not " +
                                            std::to_string(r) + " " + "(shape " +
                                            str(t.shape) + ")");
  }
  bool same(const Tensor &a, const char *wa, const Shape &want) {
    return TFC_REQUIRE(a.shape == want, std::string(wa) + " is " + str(a.shape) + ", not " +
                                        str(want));
  }
  bool flag(size_t i, const char *what) {
    return TFC_REQUIRE(ints[i] == 0 || ints[i] == 1,
                   std::string(what) + " is " + std::to_string(ints[i]) + ", not 0 or 1");
  }
  bool range(int64_t v, int64_t lo, int64_t hi, const char *what) {
    return TFC_REQUIRE(v >= lo && v <= hi, std::string(what) + " is " + std::to_string(v) +
                                           ", outside [" + std::to_string(lo) + ", " +
                                           std::to_string(hi) + "]");
  }
  bool finite(double v, const char *what) {
    return TFC_REQUIRE(std::isfinite(v), std::string(what) + " is not finite");
  }
  /// numpy broadcasting of |t| to the output's shape.
  bool broadcasts(const Tensor &t, const char *what) {
    bool ok = t.shape.size() <= out.shape.size();
    for (size_t i = 0; ok && i < t.shape.size(); ++i) {
      int64_t d = t.shape[t.shape.size() - 1 - i], o = out.shape[out.shape.size() - 1 - i];
      ok = d == o || d == 1;
    }
    return TFC_REQUIRE(ok, std::string(what) + " " + str(t.shape) + " does not broadcast to the " +
                           "output " + str(out.shape));
  }
  /// The CPU's element types: |t|'s dtype is one of |allowed|.
  bool dtype(const Tensor &t, const char *what, std::initializer_list<uint32_t> allowed) {
    if (be != KernelBackend::Cpu)
      return true;
    for (uint32_t a : allowed)
      if (t.dtype == a)
        return true;
    return fail(std::string(what) + " has dtype " + std::to_string(t.dtype) +
                ", which this kernel does not read");
  }
  bool dtypeEq(const Tensor &a, const Tensor &b, const char *what) {
    return TFC_REQUIRE(a.dtype == b.dtype, std::string(what) + " have different dtypes");
  }
  /// Where the CPU allows bf16 (abi.h); CUDA computes every float in its dtype.
  std::initializer_list<uint32_t> f32() const { return {TFC_DTYPE_F32}; }

  std::string check();

private:
  bool tokenEmbedding();
  bool embedding();
  bool linear();
  bool matmul();
  bool elementwise();
  bool transpose();
  bool slice();
  bool aroundAxis(const Tensor &x, int64_t axis, int64_t &outer, int64_t &len, int64_t &inner);
  bool layerNorm();
  bool attention();
  bool cachedAttention();
  bool relativeBias(const Tensor &table, int64_t heads, size_t at);

  KernelBackend be;
  uint32_t kernel;
  const std::vector<const Tensor *> &in;
  const Tensor &out;
  const std::vector<int64_t> &ints;
  const std::vector<double> &floats;
  std::string err;
};

constexpr uint32_t kF32 = TFC_DTYPE_F32, kBF16 = TFC_DTYPE_BF16, kI8 = TFC_DTYPE_I8,
                   kI64 = TFC_DTYPE_I64, kI32 = TFC_DTYPE_I32, kBool = TFC_DTYPE_BOOL;

bool Call::tokenEmbedding() {
  // Inputs: ids, table, [positions], [type_ids, type_table], [offset], [scales].
  bool ok = range(ints[0], 0, 1, "the position axis") && flag(1, "has_positions") &&
            flag(2, "has_type_ids") && (ints.size() < 4 || flag(3, "has_offset")) &&
            finite(floats[0], "the scale");
  if (!ok)
    return false;
  const bool hasPos = ints[1], hasTypes = ints[2], hasOffset = ints.size() > 3 && ints[3];
  const Tensor &ids = *in[0], &table = *in[1];
  const size_t want = 2 + hasPos + 2 * hasTypes + hasOffset + (table.dtype == kI8);
  ok = inputs(want) && rank(ids, "the ids", 2) && rank(table, "the table", 2) &&
       dtype(ids, "the ids", {kI64, kI32}) && dtype(table, "the table", {kF32, kBF16, kI8}) &&
       same(out, "the output", {ids.shape[0], ids.shape[1], table.shape[1]}) &&
       dtype(out, "the output", {kF32});
  size_t next = 2;
  if (ok && hasPos) {
    const Tensor &pos = *in[next++];
    ok = rank(pos, "the positional table", 2) &&
         TFC_REQUIRE(pos.shape[1] == table.shape[1], "the positional table is " + str(pos.shape) +
                                                     ", not as wide as the table") &&
         dtype(pos, "the positional table", {kF32});
  }
  if (ok && hasTypes) {
    const Tensor &typeIds = *in[next++], &typeTable = *in[next++];
    ok = same(typeIds, "the type ids", ids.shape) && dtype(typeIds, "the type ids", {kI64, kI32}) &&
         rank(typeTable, "the type table", 2) &&
         TFC_REQUIRE(typeTable.shape[1] == table.shape[1], "the type table is " +
                                                           str(typeTable.shape) +
                                                           ", not as wide as the table") &&
         dtype(typeTable, "the type table", {kF32, kBF16});
  }
  if (ok && hasOffset) {
    const Tensor &offset = *in[next++];
    ok = TFC_REQUIRE(offset.numel() >= 1, "the position offset is empty") &&
         dtype(offset, "the position offset", {kI64});
  }
  if (ok && table.dtype == kI8) {
    const Tensor &scales = *in[next++];
    ok = TFC_REQUIRE(scales.numel() == table.shape[0], "the i8 table's scales are " +
                                                       str(scales.shape) + ", not [" +
                                                       std::to_string(table.shape[0]) + "]") &&
         dtype(scales, "the scales", {kF32});
  }
  return ok;
}

bool Call::embedding() {
  const Tensor &table = *in[0], &ids = *in[1];
  if (!inputs(2) || !rank(table, "the table", 2))
    return false;
  Shape want = ids.shape;
  want.push_back(table.shape[1]);
  return same(out, "the output", want) && dtype(table, "the table", {kF32, kBF16}) &&
         dtype(ids, "the ids", {kI64, kI32}) && dtype(out, "the output", {kF32});
}

bool Call::linear() {
  // Inputs: x, weight [N, K], [bias [N]], [residual], [scales of an i8 weight [N]].
  const bool fused = kernel == TFC_KERNEL_FUSED_LINEAR;
  bool ok = flag(0, "has_bias") && (!fused || (flag(1, "has_residual") &&
                                               range(ints[2], 0, 3, "the activation")));
  if (!ok)
    return false;
  const bool hasBias = ints[0], hasRes = fused && ints[1];
  const Tensor &x = *in[0], &w = *in[1];
  const bool i8 = w.dtype == kI8;
  if (!inputs(2 + hasBias + hasRes + i8) || !rank(w, "the weight", 2))
    return false;
  const int64_t n = w.shape[0], k = w.shape[1];
  ok = TFC_REQUIRE(k >= 1 && n >= 1, "the weight " + str(w.shape) + " is empty") &&
       TFC_REQUIRE(!x.shape.empty() && x.shape.back() == k,
               "the input " + str(x.shape) + " does not end in the weight's " +
                   std::to_string(k) + " inputs");
  if (!ok)
    return false;
  Shape want(x.shape.begin(), x.shape.end() - 1);
  want.push_back(n);
  ok = same(out, "the output", want) && dtype(x, "the input", {kF32, kBF16}) &&
       dtype(w, "the weight", {kF32, kBF16, kI8}) && dtype(out, "the output", {kF32, kBF16});
  size_t next = 2;
  if (ok && hasBias) {
    const Tensor &b = *in[next++];
    ok = TFC_REQUIRE(b.numel() == n, "the bias is " + str(b.shape) + ", not [" +
                                     std::to_string(n) + "]") &&
         dtype(b, "the bias", {kF32});
  }
  if (ok && hasRes) {
    const Tensor &r = *in[next++];
    ok = same(r, "the residual", out.shape) && dtype(r, "the residual", {kF32});
  }
  if (ok && i8) {
    const Tensor &s = *in[next++];
    ok = TFC_REQUIRE(s.numel() == n, "the i8 weight's scales are " + str(s.shape) + ", not [" +
                                     std::to_string(n) + "]") &&
         dtype(s, "the scales", {kF32});
  }
  return ok;
}

bool Call::matmul() {
  if (!inputs(2) || !flag(0, "transpose_b"))
    return false;
  const Tensor &a = *in[0], &b = *in[1];
  const size_t ra = a.shape.size(), rb = b.shape.size(), ro = out.shape.size();
  if (!TFC_REQUIRE(ra >= 2 && rb >= 2 && ro >= 2 && ro >= ra && ro >= rb,
               "operands " + str(a.shape) + " x " + str(b.shape) + " -> " + str(out.shape) +
                   " are not batched matrices"))
    return false;
  const bool tb = ints[0];
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
  return ok && dtype(a, "the left operand", {kF32}) && dtype(b, "the right operand", {kF32}) &&
         dtype(out, "the output", {kF32});
}

bool Call::elementwise() {
  const std::initializer_list<uint32_t> scalar = {kF32, kI64, kI32, kBool};
  switch (kernel) {
  case TFC_KERNEL_ADD:
  case TFC_KERNEL_SUB:
  case TFC_KERNEL_MUL:
  case TFC_KERNEL_DIV:
    // The f32 path reads both inputs and writes the output as f32.
    return inputs(2) && broadcasts(*in[0], "the left operand") &&
           broadcasts(*in[1], "the right operand") && dtype(*in[0], "the left operand", scalar) &&
           dtype(*in[1], "the right operand", scalar) && dtype(out, "the output", scalar) &&
           (in[0]->dtype != kF32 || be != KernelBackend::Cpu ||
            (dtype(*in[1], "the right operand of an f32 operation", {kF32}) &&
             dtype(out, "the output of an f32 operation", {kF32})));
  case TFC_KERNEL_AND:
    return inputs(2) && broadcasts(*in[0], "the left operand") &&
           broadcasts(*in[1], "the right operand") && dtype(*in[0], "the left operand", {kBool}) &&
           dtype(*in[1], "the right operand", {kBool}) && dtype(out, "the output", {kBool});
  case TFC_KERNEL_COMPARE:
    return inputs(2) && range(ints[0], 0, 5, "the predicate") &&
           broadcasts(*in[0], "the left operand") && broadcasts(*in[1], "the right operand") &&
           dtype(*in[0], "the left operand", scalar) &&
           dtype(*in[1], "the right operand", scalar) && dtype(out, "the output", {kBool});
  case TFC_KERNEL_NOT:
    return inputs(1) && same(*in[0], "the input", out.shape) &&
           dtype(*in[0], "the input", {kBool}) && dtype(out, "the output", {kBool});
  case TFC_KERNEL_CAST:
    return inputs(1) && TFC_REQUIRE(in[0]->numel() == out.numel(), "the input " + str(in[0]->shape) +
                                                                   " and the output " +
                                                                   str(out.shape) +
                                                                   " differ in size") &&
           dtype(*in[0], "the input", scalar) && dtype(out, "the output", scalar);
  case TFC_KERNEL_MASKED_FILL:
    return inputs(2) && broadcasts(*in[0], "the input") && broadcasts(*in[1], "the mask") &&
           dtype(*in[0], "the input", {kF32}) && dtype(*in[1], "the mask", {kBool}) &&
           dtype(out, "the output", {kF32});
  case TFC_KERNEL_SELECT:
    return inputs(3) && broadcasts(*in[0], "the condition") &&
           broadcasts(*in[1], "the first choice") && broadcasts(*in[2], "the second choice") &&
           dtype(*in[0], "the condition", {kBool}) && dtype(*in[1], "the first choice", scalar) &&
           dtype(*in[2], "the second choice", scalar) && dtype(out, "the output", scalar);
  default: // tfc/unary.def
    return inputs(1) && same(*in[0], "the input", out.shape) &&
           dtype(*in[0], "the input", {kF32}) && dtype(out, "the output", {kF32});
  }
}

bool Call::transpose() {
  const Tensor &x = *in[0];
  const size_t r = x.shape.size();
  if (!inputs(1) || !TFC_REQUIRE(ints.size() == r && out.shape.size() == r,
                             "the permutation has " + std::to_string(ints.size()) +
                                 " entries for an input of rank " + std::to_string(r) +
                                 " and an output of rank " + std::to_string(out.shape.size())))
    return false;
  std::vector<char> seen(r, 0);
  for (size_t i = 0; i < r; ++i) {
    if (!TFC_REQUIRE(ints[i] >= 0 && ints[i] < (int64_t)r && !seen[ints[i]],
                 "the permutation is not one of 0.." + std::to_string(r - 1)))
      return false;
    seen[ints[i]] = 1;
    if (!TFC_REQUIRE(out.shape[i] == x.shape[ints[i]],
                 "the output " + str(out.shape) + " is not the permuted input " + str(x.shape)))
      return false;
  }
  return dtypeEq(x, out, "the input and the output") &&
         dtype(x, "the input", {kF32, kI64, kI32, kBool});
}

bool Call::slice() {
  const Tensor &x = *in[0];
  const int64_t r = (int64_t)x.shape.size();
  if (!inputs(1) || !range(ints[0], 0, r - 1, "the axis"))
    return false;
  const int64_t axis = ints[0], start = ints[1], size = ints[2], len = x.shape[axis];
  if (!TFC_REQUIRE(start >= 0 && size >= 0 && start <= len && size <= len - start,
               "rows [" + std::to_string(start) + ", +" + std::to_string(size) +
                   ") are outside the input's " + std::to_string(len)))
    return false;
  Shape want = x.shape;
  want[axis] = size;
  return same(out, "the output", want) && dtypeEq(x, out, "the input and the output") &&
         TFC_REQUIRE(tfc_dtype_size(x.dtype) != 0, "the input's dtype is unknown");
}

bool Call::aroundAxis(const Tensor &x, int64_t axis, int64_t &outer, int64_t &len,
                      int64_t &inner) {
  if (!range(axis, 0, (int64_t)x.shape.size() - 1, "the axis"))
    return false;
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.shape[i];
  len = x.shape[axis];
  for (size_t i = axis + 1; i < x.shape.size(); ++i)
    inner *= x.shape[i];
  return true;
}

bool Call::layerNorm() {
  const Tensor &x = *in[0];
  // rms_norm (2) has no shift.
  if (!range(ints[0], 0, 2, "the variant") || !inputs(ints[0] == 2 ? 2 : 3) ||
      !finite(floats[0], "eps") ||
      !TFC_REQUIRE(!x.shape.empty() && x.shape.back() >= 1, "the input " + str(x.shape) +
                                                            " has no axis to normalize"))
    return false;
  const int64_t d = x.shape.back();
  return same(out, "the output", x.shape) &&
         TFC_REQUIRE(in[1]->numel() == d && in.back()->numel() == d,
                 "the scale and shift are " + str(in[1]->shape) + " and " +
                     str(in.back()->shape) + ", not [" + std::to_string(d) + "]") &&
         dtype(x, "the input", {kF32, kBF16}) && dtype(out, "the output", {kF32, kBF16}) &&
         dtype(*in[1], "the scale", {kF32}) && dtype(*in.back(), "the shift", {kF32});
}

bool Call::attention() {
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
  bool ok = TFC_REQUIRE(in.size() >= 3, "lacks q, k or v") && rank(q, "q", 3) && rank(k, "k", 3) &&
            rank(v, "v", 3) && rank(out, "the output", 3) &&
            range(ints[0], 0, 4, "the mask kind") &&
            TFC_REQUIRE(ints[1] >= 1, "the head count " + std::to_string(ints[1]) +
                                      " is not positive") &&
            finite(floats[0], "the scale") && !std::isnan(floats[1]);
  if (!ok)
    return fail("the mask value is NaN");
  const int64_t heads = ints[1], b = q.shape[0], sq = q.shape[1], sk = k.shape[1];
  ok = TFC_REQUIRE(k.shape[0] == b && v.shape[0] == b && v.shape[1] == sk,
               "q " + str(q.shape) + ", k " + str(k.shape) + " and v " + str(v.shape) +
                   " disagree on the batch or the keys") &&
       TFC_REQUIRE(q.shape[2] % heads == 0 && v.shape[2] % heads == 0 && k.shape[2] == q.shape[2],
               std::to_string(heads) + " heads do not divide q " + str(q.shape) + ", k " +
                   str(k.shape) + " and v " + str(v.shape)) &&
       same(out, "the output", {b, sq, v.shape[2]});
  if (!ok)
    return false;
  const int64_t mask = ints[0];
  // T5's relative position bias (ints 3..5): the table is the last input.
  const bool bias = ints.size() > 3 && ints[3] != 0;
  if (bias && !(TFC_REQUIRE(ints.size() >= 6, "lacks the position bias attributes") &&
                flag(3, "has_bias") && flag(4, "bidirectional") &&
                TFC_REQUIRE(mask != 4, "takes a position bias with an additive mask") &&
                TFC_REQUIRE(in.size() >= 4, "lacks its position bias table") &&
                relativeBias(*in.back(), heads, 4)))
    return false;
  const size_t nb = bias ? 1 : 0;
  if (mask == 1 || mask == 3) // key padding: the key tokens [B, Sk]
    return inputs(4 + nb) && same(*in[3], "the key tokens", {b, sk}) &&
           TFC_REQUIRE(in[3]->dtype == kI64, "attention key tokens must be i64");
  if (mask == 4) { // additive: broadcasts to [B, H, Sq, Sk]
    const Tensor &m = *in[3];
    if (!inputs(4) || !TFC_REQUIRE(m.shape.size() <= 4, "the additive mask has rank " +
                                                        std::to_string(m.shape.size())))
      return false;
    Shape full(4, 1);
    for (size_t i = 0; i < m.shape.size(); ++i)
      full[4 - m.shape.size() + i] = m.shape[i];
    if (full[3] != sk) // the kernel's own wording
      return fail("additive mask does not cover every key");
    return TFC_REQUIRE((full[0] == 1 || full[0] == b) && (full[1] == 1 || full[1] == heads) &&
                       (full[2] == 1 || full[2] == sq),
                   "the additive mask " + str(m.shape) + " does not broadcast to [" +
                       std::to_string(b) + ", " + std::to_string(heads) + ", " +
                       std::to_string(sq) + ", " + std::to_string(sk) + "]") &&
           dtype(m, "the additive mask", {kF32});
  }
  return inputs(3 + nb) && dtypeEq(q, k, "q and k") && dtypeEq(q, v, "q and v") &&
         dtype(q, "q", {kF32, kBF16}) && dtype(out, "the output", {kF32, kBF16});
}

/// A relative position bias table [num_buckets, heads] f32 with its bucket
/// parameters ints[at] (bidirectional) and ints[at + 1] (max_distance), as
/// tfc/relative_bucket.h needs them.
bool Call::relativeBias(const Tensor &t, int64_t heads, size_t at) {
  if (!rank(t, "the position bias table", 2) ||
      !TFC_REQUIRE(t.shape[1] == heads, "the position bias table " + str(t.shape) + " is not [" +
                                            "num_buckets, " + std::to_string(heads) + "]") ||
      !TFC_REQUIRE(t.dtype == kF32, "the position bias table must be f32"))
    return false;
  const int64_t exact = ints[at] ? t.shape[0] / 4 : t.shape[0] / 2;
  return TFC_REQUIRE(exact >= 1 && ints[at + 1] > exact,
                     std::to_string(t.shape[0]) + " buckets with max_distance " +
                         std::to_string(ints[at + 1]) + " are not a bucketing");
}

bool Call::cachedAttention() {
  // q, k, v [B, T, *], k_cache [R, L, Dk], v_cache [R, L, Dv], pos.
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2], &kc = *in[3], &vc = *in[4];
  bool ok = TFC_REQUIRE(in.size() >= 6, "lacks q, k, v, the caches or pos") && rank(q, "q", 3) && rank(k, "k", 3) && rank(v, "v", 3) &&
            rank(kc, "the key cache", 3) && rank(vc, "the value cache", 3) &&
            rank(out, "the output", 3) &&
            TFC_REQUIRE(ints[0] >= 1, "the head count " + std::to_string(ints[0]) +
                                      " is not positive") &&
            finite(floats[0], "the scale");
  if (!ok)
    return false;
  const int64_t heads = ints[0], b = q.shape[0], t = q.shape[1];
  const bool bias = ints.size() > 1 && ints[1] != 0;
  if (bias ? !(TFC_REQUIRE(ints.size() >= 4, "lacks the position bias attributes") &&
               flag(1, "has_bias") && flag(2, "bidirectional") && inputs(7) &&
               relativeBias(*in[6], heads, 2))
           : !inputs(6))
    return false;
  return TFC_REQUIRE(k.shape[0] == b && v.shape[0] == b && k.shape[1] == t && v.shape[1] == t,
                 "q " + str(q.shape) + ", k " + str(k.shape) + " and v " + str(v.shape) +
                     " disagree on the batch or the new positions") &&
         TFC_REQUIRE(q.shape[2] % heads == 0 && v.shape[2] % heads == 0 && k.shape[2] == q.shape[2],
                 std::to_string(heads) + " heads do not divide q " + str(q.shape) + ", k " +
                     str(k.shape) + " and v " + str(v.shape)) &&
         TFC_REQUIRE(kc.shape[2] == k.shape[2] && vc.shape[2] == v.shape[2] &&
                     kc.shape[1] == vc.shape[1] && kc.shape[0] == vc.shape[0],
                 "the caches " + str(kc.shape) + " and " + str(vc.shape) +
                     " do not hold k and v rows") &&
         TFC_REQUIRE(in[5]->numel() >= 1, "the position is empty") &&
         dtype(*in[5], "the position", {kI64}) && same(out, "the output", {b, t, v.shape[2]}) &&
         dtype(q, "q", {kF32}) && dtype(k, "k", {kF32}) && dtype(v, "v", {kF32}) &&
         dtype(kc, "the key cache", {kF32}) && dtype(vc, "the value cache", {kF32}) &&
         dtype(out, "the output", {kF32});
}

std::string Call::check() {
  uint32_t minIn = 0, minInts = 0, minFloats = 0;
  if (!tfc_kernel_min_arity(kernel, &minIn, &minInts, &minFloats))
    return "kernel " + std::to_string(kernel) + " is unknown";
  // The fewest operands each kernel reads: its row of tfc/kernels.def.
  if (in.size() < minIn || ints.size() < minInts || floats.size() < minFloats)
    return std::string(tfc_kernel_name(kernel)) + ": too few inputs or attributes";
  for (const Tensor *t : in)
    if (!t || tfc_dtype_size(t->dtype) == 0)
      return std::string(tfc_kernel_name(kernel)) + ": an input has an unknown dtype";
  if (tfc_dtype_size(out.dtype) == 0)
    return std::string(tfc_kernel_name(kernel)) + ": the output has an unknown dtype";
  int64_t outer, len, inner;
  switch (kernel) {
  case TFC_KERNEL_TOKEN_EMBEDDING:
    tokenEmbedding();
    break;
  case TFC_KERNEL_EMBEDDING:
    embedding();
    break;
  case TFC_KERNEL_LINEAR:
  case TFC_KERNEL_FUSED_LINEAR:
    linear();
    break;
  case TFC_KERNEL_MATMUL:
    matmul();
    break;
  case TFC_KERNEL_TRANSPOSE:
    transpose();
    break;
  case TFC_KERNEL_SLICE:
    slice();
    break;
  case TFC_KERNEL_REDUCE_MEAN:
  case TFC_KERNEL_REDUCE_SUM:
    if (inputs(1) && flag(1, "keepdim") && aroundAxis(*in[0], ints[0], outer, len, inner))
      TFC_REQUIRE(out.numel() == outer * inner, "the output " + str(out.shape) +
                                                " is not the input " + str(in[0]->shape) +
                                                " reduced") &&
          dtype(*in[0], "the input", {kF32}) && dtype(out, "the output", {kF32});
    break;
  case TFC_KERNEL_SOFTMAX:
  case TFC_KERNEL_LOG_SOFTMAX:
    if (inputs(1) && aroundAxis(*in[0], ints[0], outer, len, inner))
      same(out, "the output", in[0]->shape) && dtype(*in[0], "the input", {kF32}) &&
          dtype(out, "the output", {kF32});
    break;
  case TFC_KERNEL_LAYER_NORM:
    layerNorm();
    break;
  case TFC_KERNEL_ATTENTION:
    attention();
    break;
  case TFC_KERNEL_CACHED_ATTENTION:
    cachedAttention();
    break;
  case TFC_KERNEL_RELATIVE_POSITION_BIAS:
    // table [num_buckets, H], query ids [B, Sq], key ids [B, Sk] -> [1, H, Sq, Sk]
    if (inputs(3) && flag(0, "bidirectional") && rank(*in[1], "the query ids", 2) &&
        rank(*in[2], "the key ids", 2) && relativeBias(*in[0], in[0]->shape.size() == 2 ? in[0]->shape[1] : 0, 0))
      same(out, "the output", {1, in[0]->shape[1], in[1]->shape[1], in[2]->shape[1]}) &&
          dtype(out, "the output", {kF32});
    break;
  case TFC_KERNEL_POSITIONS:
    // With a second int (padding_idx): RoBERTa's positions of ids [B, S], [B, S].
    if (dtype(out, "the output", {kI64}) && ints.size() > 1)
      inputs(1) && rank(*in[0], "the ids", 2) && dtype(*in[0], "the ids", {kI64, kI32}) &&
          same(out, "the output", in[0]->shape) &&
          TFC_REQUIRE(ints[1] >= 0, "padding_idx " + std::to_string(ints[1]) + " is negative");
    break;
  case TFC_KERNEL_NOPEAK_MASK:
    rank(out, "the output", 3) &&
        same(out, "the output", {1, out.shape[1], out.shape[1]}) &&
        dtype(out, "the output", {kBool});
    break;
  case TFC_KERNEL_RESHAPE:
  case TFC_KERNEL_UNSQUEEZE:
    // Views: the executor aliases the source and checks the sizes agree.
    TFC_REQUIRE(in.size() >= 1 && in[0]->numel() == out.numel(),
            "the view " + str(out.shape) + " does not have its source's size");
    break;
  default: // the elementwise kernels, tfc/unary.def included
    elementwise();
    break;
  }
  return err;
}

} // namespace

std::string checkKernelCall(KernelBackend backend, uint32_t kernel,
                            const std::vector<const Tensor *> &in, const Tensor &out,
                            const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  return Call(backend, kernel, in, out, ints, floats).check();
}

} // namespace tfc
