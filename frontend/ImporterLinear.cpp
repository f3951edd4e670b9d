//===- ImporterLinear.cpp - linear specs and linear layers ----------------===//
//
// A linear layer's description (a module name, or its weight and bias tensors,
// and its layout) and the tfc.linear it becomes: the whole weight, a block of
// rows of a packed one (Q, K and V in one tensor), or rows gathered from
// interleaved heads (GPT-NeoX).
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include <set>

using namespace mlir;
namespace td = ::mlir::tfc;

namespace tfc::detail {

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

FailureOr<Importer::LinearSpec> Importer::parseLinear(const Node &n, StringRef what) {
  LinearSpec s;
  s.node = &n;
  if (n.isScalar()) {
    s.weight = qualify(n.scalar + ".weight");
    s.bias = qualify(n.scalar + ".bias");
    return s;
  }
  if (!n.isMap())
    return error(n, "'" + what + "' must be a module name or a map, got " +
                         kindName(n));
  if (failed(checkKeys(n, what, {"name", "weight", "bias", "layout"})))
    return failure();
  std::string prefix;
  if (const Node *nm = n.get("name")) {
    auto v = getString(*nm, "name");
    if (failed(v))
      return failure();
    prefix = *v;
  }
  if (const Node *w = n.get("weight")) {
    auto v = getString(*w, "weight");
    if (failed(v))
      return failure();
    s.weight = qualify(*v);
  } else if (!prefix.empty()) {
    s.weight = qualify(prefix + ".weight");
  } else {
    return error(n, what + " needs 'name' or 'weight'");
  }
  s.bias = prefix.empty() ? "" : qualify(prefix + ".bias");
  if (const Node *bn = n.get("bias")) {
    static const std::set<std::string> kBools = {"true", "false", "yes", "no",
                                                 "on", "off"};
    if (bn->isScalar() && kBools.count(bn->scalar)) {
      if (bn->scalar == "false" || bn->scalar == "no" || bn->scalar == "off")
        s.bias.clear();
      else if (prefix.empty())
        return error(*bn, "'bias: true' needs 'name' to derive the bias tensor; "
                           "give the bias tensor's name instead");
    } else {
      auto v = getString(*bn, "bias");
      if (failed(v))
        return failure();
      s.bias = qualify(*v);
    }
  }
  if (const Node *ln = n.get("layout")) {
    auto v = getChoice(*ln, "layout", {"out_in", "in_out"});
    if (failed(v))
      return failure();
    s.inOut = *v == "in_out";
  }
  return s;
}

FailureOr<Value> Importer::applyLinear(const LinearSpec &s, Value x, int64_t in,
                                       int64_t out, int64_t rowOffset,
                                       int64_t rowsTotal, int64_t count,
                                       int64_t stride) {
  const Node &at = *s.node;
  Location l = loc(at);
  int64_t total = rowsTotal < 0 ? out : rowsTotal;
  if (count > 1 && s.inOut)
    return error(at, "a packed projection whose heads interleave needs the [out, in] layout");
  // The outputs this layer keeps along |axis| of a packed weight or bias: one
  // slice, or (heads interleaved) count slices concatenated, constants the plan
  // writer evaluates, so model.bin holds the rows in order.
  auto select = [&](Value t, int64_t axis) -> FailureOr<Value> {
    if (total == out)
      return t;
    SmallVector<Value> parts;
    for (int64_t j = 0; j < count; ++j) {
      auto sl = make<td::SliceOp>(l, {t}, {i64("axis", axis), i64("start", rowOffset + j * stride),
                                           i64("size", out / count)});
      if (failed(sl))
        return failure();
      parts.push_back(*sl);
    }
    if (count == 1)
      return parts.front();
    return make<td::ConcatOp>(l, parts, {i64("axis", axis)});
  };
  std::vector<int64_t> wshape =
      s.inOut ? std::vector<int64_t>{in, total} : std::vector<int64_t>{total, in};
  auto w = weight(at, s.weight, wshape, WeightRole::Matrix);
  if (failed(w))
    return failure();
  auto wv = select(*w, s.inOut ? 1 : 0);
  if (failed(wv))
    return failure();
  Value bv;
  if (!s.bias.empty()) {
    auto bw = weight(at, s.bias, {total}, WeightRole::Bias);
    if (failed(bw))
      return failure();
    auto b = select(*bw, 0);
    if (failed(b))
      return failure();
    bv = *b;
  }
  if (s.inOut) {
    // Conv1D (GPT-2): y = x @ W + b with W stored [in, out].
    auto y = make<td::MatmulOp>(l, {x, *wv});
    if (failed(y) || !bv)
      return y;
    return make<td::AddOp>(l, {*y, bv});
  }
  SmallVector<Value, 3> ops{x, *wv};
  if (bv)
    ops.push_back(bv);
  return make<td::LinearOp>(l, ops);
}

} // namespace tfc::detail
