//===- ImporterOps.cpp - the `ops:` table and its interpreter -------------===//
//
// An `ops:` block is a list of primitive ops, each a map with a `name` (the value
// it defines), an `op` (its kind), operands (`input` and/or `inputs`) and the keys
// of its kind. The kinds are data: kOpKinds below lists, per kind, its name, how
// many operands it takes, the keys it accepts, and the function that builds it.
// The interpreter (OpsBlock) resolves operands, checks the arity and the keys
// against the table, and calls the builder; it knows no op kind by name.
//
// Adding a kind is one entry in kOpKinds (plus a row in docs/model-format.md);
// an elementwise op with no keys is `{"name", 1, {}, plain<td::NameOp>}`.
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace mlir;
namespace td = ::mlir::tfc;

namespace tfc::detail {
namespace {

/// One op of an `ops:` block being built: what its kind's builder sees.
struct OpCall {
  Importer &imp;
  const Node &op;          // the op's map
  const std::string &kind; // its `op:`
  Location loc;            // its YAML position, named by its module path
  SmallVector<Value> ins;  // its operands, as many as the kind's arity

  /// The value of |key|, or "op '<kind>' needs '<key>'".
  FailureOr<const Node *> need(const char *key) {
    return imp.require(op, key, "op '" + kind + "'");
  }
  /// Integer |key| (>= |min|); |dflt| when absent, or required if none.
  FailureOr<int64_t> intKey(const char *key, std::optional<int64_t> dflt,
                            int64_t min) {
    const Node *a = op.get(key);
    if (!a) {
      if (dflt)
        return *dflt;
      return imp.error(op, "op '" + kind + "' needs '" + key + "'");
    }
    return imp.evalInt(*a, key, min);
  }
  /// Required list of integers |key|, each >= |min|.
  FailureOr<SmallVector<int64_t>> listKey(const char *key, int64_t min = -1) {
    const Node *a = op.get(key);
    if (!a || !a->isSeq())
      return imp.error(a ? *a : op, "op '" + kind + "' needs '" + key + "' as a list");
    SmallVector<int64_t> out;
    for (const Node &i : a->items) {
      auto v = imp.evalInt(i, key, min);
      if (failed(v))
        return failure();
      out.push_back(*v);
    }
    return out;
  }
  /// Boolean |key|, |dflt| when absent.
  FailureOr<bool> boolKey(const char *key, bool dflt) {
    if (const Node *a = op.get(key))
      return imp.getBool(*a, key);
    return dflt;
  }
};

/// Builds one op kind; the operands are resolved and counted already.
using OpBuildFn = FailureOr<Value> (*)(OpCall &);

/// One entry of the `ops:` table.
struct OpKind {
  /// The `op:` value.
  const char *name;
  /// How many operands `input`/`inputs` must give. 0: the op takes none, and
  /// `input`/`inputs` are not among its keys.
  unsigned arity;
  /// The keys of this kind besides `op`, `name` (and `input`, `inputs`).
  std::vector<std::string> keys;
  OpBuildFn build;
};

//===----------------------------------------------------------------------===//
// Builders shared by several kinds
//===----------------------------------------------------------------------===//

/// An op of operands only (elementwise arithmetic and logic, select, ...).
template <typename OpT>
FailureOr<Value> plain(OpCall &c) {
  return c.imp.make<OpT>(c.loc, c.ins);
}

constexpr int64_t kRequired = std::numeric_limits<int64_t>::min();

/// An op with one `axis` attribute, |Default| when absent (kRequired: none).
/// With |CheckRank| the axis must name a dimension of the input.
template <typename OpT, int64_t Default, bool CheckRank>
FailureOr<Value> axisOp(OpCall &c) {
  auto ax = c.intKey("axis",
                     Default == kRequired ? std::optional<int64_t>()
                                          : std::optional<int64_t>(Default),
                     -64);
  if (failed(ax))
    return failure();
  auto r = c.imp.make<OpT>(c.loc, c.ins, {c.imp.i64("axis", *ax)});
  if (CheckRank && succeeded(r)) {
    int64_t rank = c.ins[0].getType().cast<RankedTensorType>().getRank();
    if (td::normalizeAxis(*ax, rank) < 0)
      return c.imp.error(*c.op.get("axis"), "axis " + Twine(*ax) +
                                                " is out of range for rank " +
                                                Twine(rank));
  }
  return r;
}

/// reduce_mean / reduce_sum: `axis` (default -1) and `keepdim` (default true).
template <typename OpT>
FailureOr<Value> reduceOp(OpCall &c) {
  auto ax = c.intKey("axis", -1, -64);
  if (failed(ax))
    return failure();
  auto keep = c.boolKey("keepdim", true);
  if (failed(keep))
    return failure();
  return c.imp.make<OpT>(
      c.loc, c.ins,
      {c.imp.i64("axis", *ax), c.imp.attr("keepdim", c.imp.b.getBoolAttr(*keep))});
}

//===----------------------------------------------------------------------===//
// Builders of one kind
//===----------------------------------------------------------------------===//

FailureOr<Value> buildLinear(OpCall &c) {
  auto wn = c.need("weight");
  if (failed(wn))
    return failure();
  auto spec = c.imp.parseLinear(**wn, "weight");
  if (failed(spec))
    return failure();
  auto in = c.intKey("in", c.imp.dModel, 1);
  auto out = c.intKey("out", c.imp.dModel, 1);
  if (failed(in) || failed(out))
    return failure();
  return c.imp.applyLinear(*spec, c.ins[0], *in, *out);
}

FailureOr<Value> buildMatmul(OpCall &c) {
  auto tb = c.boolKey("transpose_b", false);
  if (failed(tb))
    return failure();
  return c.imp.make<td::MatmulOp>(
      c.loc, c.ins, {c.imp.attr("transpose_b", c.imp.b.getBoolAttr(*tb))});
}

FailureOr<Value> buildCompare(OpCall &c) {
  auto pn = c.need("predicate");
  if (failed(pn))
    return failure();
  auto p = c.imp.getChoice(**pn, "predicate", {"eq", "ne", "lt", "le", "gt", "ge"});
  if (failed(p))
    return failure();
  // Comparing token ids with a number: make the constant an integer.
  if (c.ins[0].getType().cast<RankedTensorType>().getElementType().isInteger(64) &&
      c.ins[1].getDefiningOp<td::ConstantOp>()) {
    auto k = c.ins[1].getDefiningOp<td::ConstantOp>();
    if (auto fa = k.getValue().dyn_cast<DenseFPElementsAttr>())
      if (fa.isSplat())
        c.ins[1] = c.imp.constI(c.loc, (int64_t)fa.getSplatValue<float>());
  }
  return c.imp.make<td::CompareOp>(
      c.loc, c.ins,
      {c.imp.attr("predicate", td::CmpPredicateAttr::get(
                                   &c.imp.ctx, *td::symbolizeCmpPredicate(*p)))});
}

FailureOr<Value> buildCast(OpCall &c) {
  auto dn = c.need("dtype");
  if (failed(dn))
    return failure();
  auto d = c.imp.getChoice(**dn, "dtype", {"f32", "i64", "i1"});
  if (failed(d))
    return failure();
  OpBuilder &b = c.imp.b;
  Type t = *d == "f32"   ? (Type)b.getF32Type()
           : *d == "i64" ? (Type)b.getI64Type()
                         : (Type)b.getI1Type();
  return c.imp.make<td::CastOp>(c.loc, c.ins,
                                {c.imp.attr("element_type", TypeAttr::get(t))});
}

FailureOr<Value> buildMaskedFill(OpCall &c) {
  auto vn = c.need("value");
  if (failed(vn))
    return failure();
  auto v = c.imp.evalNum(**vn, "value");
  if (failed(v))
    return failure();
  return c.imp.make<td::MaskedFillOp>(c.loc, c.ins, {c.imp.f64("value", v->value)});
}

FailureOr<Value> buildReshape(OpCall &c) {
  auto sh = c.listKey("shape");
  if (failed(sh))
    return failure();
  return c.imp.make<td::ReshapeOp>(c.loc, c.ins, {c.imp.arr("shape", *sh)});
}

FailureOr<Value> buildTranspose(OpCall &c) {
  auto p = c.listKey("perm");
  if (failed(p))
    return failure();
  return c.imp.make<td::TransposeOp>(c.loc, c.ins, {c.imp.arr("perm", *p)});
}

FailureOr<Value> buildSlice(OpCall &c) {
  auto ax = c.intKey("axis", std::nullopt, -64);
  auto st = c.intKey("start", std::nullopt, 0);
  auto sz = c.intKey("size", std::nullopt, 1);
  if (failed(ax) || failed(st) || failed(sz))
    return failure();
  Importer &imp = c.imp;
  return imp.make<td::SliceOp>(
      c.loc, c.ins,
      {imp.i64("axis", *ax), imp.i64("start", *st), imp.i64("size", *sz)});
}

FailureOr<Value> buildGelu(OpCall &c) {
  td::GeluApprox ap = td::GeluApprox::none;
  if (const Node *a = c.op.get("approximate")) {
    auto v = c.imp.getChoice(*a, "approximate", {"none", "tanh"});
    if (failed(v))
      return failure();
    ap = *td::symbolizeGeluApprox(*v);
  }
  return c.imp.gelu(c.loc, c.ins[0], ap);
}

FailureOr<Value> buildLayerNorm(OpCall &c) {
  // The norm's keys live on the op itself; its `weight` is the norm's name.
  Node normNode = c.op;
  normNode.entries.clear();
  for (const auto &e : c.op.entries)
    if (e.first.scalar == "kind" || e.first.scalar == "eps" ||
        e.first.scalar == "gain" || e.first.scalar == "shift")
      normNode.entries.push_back(e);
  auto wn = c.need("weight");
  if (failed(wn))
    return failure();
  normNode.entries.push_back({Node{Node::Kind::Scalar, "name"}, **wn});
  return c.imp.emitNorm(normNode, c.ins[0], "layer_norm");
}

/// `weight` and `embedding`: a tensor named by `weight`, of shape `shape`,
/// initialised as |role| (none: a bias if rank 1, else a matrix).
FailureOr<Value> namedTensor(OpCall &c, std::optional<WeightRole> role) {
  auto wn = c.need("weight");
  auto sh = c.listKey("shape", 1);
  if (failed(wn) || failed(sh))
    return failure();
  auto s = c.imp.getString(**wn, "weight");
  if (failed(s))
    return failure();
  if (!role)
    role = sh->size() == 1 ? WeightRole::Bias : WeightRole::Matrix;
  return c.imp.weight(c.op, c.imp.qualify(*s),
                      std::vector<int64_t>(sh->begin(), sh->end()), *role);
}

FailureOr<Value> buildWeight(OpCall &c) { return namedTensor(c, std::nullopt); }

FailureOr<Value> buildEmbedding(OpCall &c) {
  auto t = namedTensor(c, WeightRole::Matrix);
  if (failed(t))
    return failure();
  return c.imp.make<td::EmbeddingOp>(c.loc, {*t, c.ins[0]});
}

FailureOr<Value> buildConstant(OpCall &c) {
  auto vn = c.need("value");
  if (failed(vn))
    return failure();
  auto num = c.imp.evalNum(**vn, "value");
  if (failed(num))
    return failure();
  return c.imp.constF(c.loc, num->value);
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

/// Every op kind an `ops:` block accepts, in the order "unknown op" suggestions
/// are searched. docs/model-format.md describes each.
const OpKind kOpKinds[] = {
    {"linear", 1, {"weight", "in", "out"}, buildLinear},
    {"matmul", 2, {"transpose_b"}, buildMatmul},
    {"add", 2, {}, plain<td::AddOp>},
    {"sub", 2, {}, plain<td::SubOp>},
    {"mul", 2, {}, plain<td::MulOp>},
    {"div", 2, {}, plain<td::DivOp>},
    {"and", 2, {}, plain<td::AndOp>},
    {"not", 1, {}, plain<td::NotOp>},
    {"compare", 2, {"predicate"}, buildCompare},
    {"cast", 1, {"dtype"}, buildCast},
    {"masked_fill", 2, {"value"}, buildMaskedFill},
    {"select", 3, {}, plain<td::SelectOp>},
    {"reshape", 1, {"shape"}, buildReshape},
    {"transpose", 1, {"perm"}, buildTranspose},
    {"unsqueeze", 1, {"axis"}, axisOp<td::UnsqueezeOp, kRequired, false>},
    {"slice", 1, {"axis", "start", "size"}, buildSlice},
    {"reduce_mean", 1, {"axis", "keepdim"}, reduceOp<td::ReduceMeanOp>},
    {"reduce_sum", 1, {"axis", "keepdim"}, reduceOp<td::ReduceSumOp>},
    {"sqrt", 1, {}, plain<td::SqrtOp>},
    {"relu", 1, {}, plain<td::ReluOp>},
    {"gelu", 1, {"approximate"}, buildGelu},
    {"softmax", 1, {"axis"}, axisOp<td::SoftmaxOp, kRequired, true>},
    {"log_softmax", 1, {"axis"}, axisOp<td::LogSoftmaxOp, kRequired, true>},
    {"layer_norm", 1, {"weight", "kind", "eps", "gain", "shift"}, buildLayerNorm},
    {"weight", 0, {"weight", "shape"}, buildWeight},
    {"constant", 0, {"value"}, buildConstant},
    {"positions", 1, {"axis"}, axisOp<td::PositionsOp, 1, false>},
    {"nopeak_mask", 1, {}, plain<td::NopeakMaskOp>},
    {"dropout", 1, {}, [](OpCall &c) -> FailureOr<Value> { return c.ins[0]; }},
    {"embedding", 1, {"weight", "shape"}, buildEmbedding},
    {"silu", 1, {}, plain<td::SiluOp>},
    {"tanh", 1, {}, plain<td::TanhOp>},
};

/// One `activation:` of feed_forward: its name and how it is built.
struct Activation {
  const char *name;
  FailureOr<Value> (*build)(Importer &imp, Location l, Value h);
};

template <typename OpT>
FailureOr<Value> unaryActivation(Importer &imp, Location l, Value h) {
  return imp.make<OpT>(l, {h});
}
template <td::GeluApprox Approx>
FailureOr<Value> geluActivation(Importer &imp, Location l, Value h) {
  return imp.gelu(l, h, Approx);
}

/// The activations feed_forward accepts, in the order its error lists them; the
/// first is the default. A new elementwise activation is one line here.
const Activation kActivations[] = {
    {"relu", unaryActivation<td::ReluOp>},
    {"gelu", geluActivation<td::GeluApprox::none>},      // exact (erf)
    {"gelu_tanh", geluActivation<td::GeluApprox::tanh>}, // tanh approximation
    {"silu", unaryActivation<td::SiluOp>},
};

const OpKind *findOpKind(StringRef name) {
  for (const OpKind &k : kOpKinds)
    if (name == k.name)
      return &k;
  return nullptr;
}

std::vector<std::string> opKindNames() {
  std::vector<std::string> names;
  for (const OpKind &k : kOpKinds)
    names.push_back(k.name);
  return names;
}

/// Every key an op of kind |k| accepts, common keys first.
std::vector<std::string> allowedKeys(const OpKind &k) {
  std::vector<std::string> keys = {"op", "name"};
  if (k.arity > 0)
    keys.insert(keys.end(), {"input", "inputs"});
  keys.insert(keys.end(), k.keys.begin(), k.keys.end());
  return keys;
}

//===----------------------------------------------------------------------===//
// The interpreter
//===----------------------------------------------------------------------===//

/// One `ops:` block. The ops are indexed by the value they define so they may be
/// listed in any order, then built depth-first, which is also where a cycle is
/// found.
class OpsBlock {
public:
  OpsBlock(Importer &imp, const Node &block) : imp(imp), block(block) {}
  FailureOr<Value> run(Value x, const StackEnv &env);

private:
  FailureOr<Value> operand(const Node &ref);
  FailureOr<Value> get(const std::string &name, const Node &at);
  FailureOr<Value> build(const std::string &name, const Node &op);

  Importer &imp;
  const Node &block;
  std::map<std::string, Value> values;       // defined so far, and the block's inputs
  std::map<std::string, const Node *> defs;  // every op, by the value it defines
  std::vector<std::string> defNames;         // the same, in list order
  std::vector<std::string> visiting;         // the ops being built (cycles)
};

FailureOr<Value> OpsBlock::run(Value x, const StackEnv &env) {
  const Node &list = *block.get("ops");
  if (!list.isSeq())
    return imp.error(list, "'ops' must be a list of ops, got " +
                               std::string(kindName(list)));
  // Values visible to the ops: the block input, the encoder output, token inputs.
  values["x"] = x;
  if (env.memory)
    values["memory"] = env.memory;
  for (const auto &in : imp.inputs)
    values[in.first] = in.second;

  for (const Node &op : list.items) {
    if (failed(imp.expectMap(op, "op")))
      return failure();
    auto nm = imp.require(op, "name", "an op");
    if (failed(nm))
      return failure();
    auto name = imp.getString(**nm, "name");
    if (failed(name))
      return failure();
    if (defs.count(*name) || values.count(*name))
      return imp.error(**nm, "value '" + *name + "' is defined twice");
    defs[*name] = &op;
    defNames.push_back(*name);
  }

  std::string outName = defNames.empty() ? "x" : defNames.back();
  const Node *outNode = &block;
  if (const Node *o = block.get("output")) {
    auto s = imp.getString(*o, "output");
    if (failed(s))
      return failure();
    outName = *s;
    outNode = o;
  }
  // Build every op (so unused ones are still checked), then return the output.
  for (const auto &nm : defNames)
    if (failed(get(nm, *defs[nm])))
      return failure();
  if (!values.count(outName))
    return imp.error(*outNode, "unknown value '" + outName + "'" +
                                   didYouMean(outName, defNames));
  return values[outName];
}

/// Resolves an operand: a value name, or a number/expression (a scalar constant).
FailureOr<Value> OpsBlock::operand(const Node &ref) {
  if (!ref.isScalar())
    return imp.error(ref, "an op input must be a value name or a number");
  if (values.count(ref.scalar) || defs.count(ref.scalar))
    return get(ref.scalar, ref);
  if (isIdentifier(ref.scalar) && !imp.paramNodes.count(ref.scalar)) {
    std::vector<std::string> known = defNames;
    for (const auto &v : values)
      known.push_back(v.first);
    return imp.error(ref, "unknown value '" + ref.scalar + "'" +
                              didYouMean(ref.scalar, known));
  }
  auto num = imp.evalNum(ref, "input");
  if (failed(num))
    return failure();
  return imp.constF(imp.loc(ref), num->value);
}

/// The value |name|, building its op first if needed; |at| locates a cycle.
FailureOr<Value> OpsBlock::get(const std::string &name, const Node &at) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto cyc = std::find(visiting.begin(), visiting.end(), name);
  if (cyc != visiting.end()) {
    std::string path;
    for (auto i = cyc; i != visiting.end(); ++i)
      path += *i + " -> ";
    return imp.error(at, "cycle among ops: " + path + name);
  }
  visiting.push_back(name);
  auto r = build(name, *defs.at(name));
  if (failed(r))
    return failure();
  visiting.pop_back();
  values[name] = *r;
  return *r;
}

FailureOr<Value> OpsBlock::build(const std::string &name, const Node &op) {
  auto opNode = imp.require(op, "op", "an op");
  if (failed(opNode))
    return failure();
  auto kindName = imp.getString(**opNode, "op");
  if (failed(kindName))
    return failure();
  const OpKind *kind = findOpKind(*kindName);
  if (!kind)
    return imp.error(**opNode, "unknown op '" + *kindName + "'" +
                                   didYouMean(*kindName, opKindNames()));
  if (failed(imp.checkKeys(op, "op '" + *kindName + "'", allowedKeys(*kind),
                           /*listAllowed=*/true)))
    return failure();

  OpCall call{imp, op, *kindName, imp.loc(op, imp.scope + name), {}};
  if (const Node *in = op.get("input")) {
    auto v = operand(*in);
    if (failed(v))
      return failure();
    call.ins.push_back(*v);
  }
  if (const Node *in = op.get("inputs")) {
    if (!in->isSeq())
      return imp.error(*in, "'inputs' must be a list");
    for (const Node &i : in->items) {
      auto v = operand(i);
      if (failed(v))
        return failure();
      call.ins.push_back(*v);
    }
  }
  if (kind->arity > 0 && call.ins.size() != kind->arity)
    return imp.error(op, "op '" + *kindName + "' takes " + Twine(kind->arity) +
                             " input" + (kind->arity == 1 ? "" : "s") + ", got " +
                             Twine(call.ins.size()));
  return kind->build(call);
}

} // namespace

std::vector<std::string> Importer::activationNames() {
  std::vector<std::string> names;
  for (const Activation &a : kActivations)
    names.push_back(a.name);
  return names;
}

FailureOr<Value> Importer::buildActivation(llvm::StringRef name, Location l, Value h) {
  for (const Activation &a : kActivations)
    if (name == a.name)
      return a.build(*this, l, h);
  return emitError(l) << "unknown activation '" << name << "'";
}

FailureOr<Value> Importer::emitOps(const Node &block, Value x, const StackEnv &env) {
  return OpsBlock(*this, block).run(x, env);
}

//===----------------------------------------------------------------------===//
// Feed-forward
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitFeedForward(const Node &n, Value x) {
  if (failed(expectMap(n, "feed_forward")) ||
      failed(checkKeys(n, "feed_forward",
                       {"fc1", "fc2", "gate", "gate_up", "activation", "d_ff"})))
    return failure();
  int64_t dff;
  if (const Node *d = n.get("d_ff")) {
    auto v = evalInt(*d, "d_ff");
    if (failed(v))
      return failure();
    dff = *v;
  } else {
    if (!paramNodes.count("d_ff"))
      return error(n, "feed_forward needs 'd_ff' (or a 'd_ff' parameter)");
    auto v = paramInt("d_ff", n);
    if (failed(v))
      return failure();
    dff = *v;
  }
  // The activations are a table next to the ops: table (ImporterOps.cpp).
  const std::vector<std::string> names = activationNames();
  std::string actName = names.front();
  if (const Node *a = n.get("activation")) {
    auto v = getChoice(*a, "activation", names);
    if (failed(v))
      return failure();
    actName = *v;
  }
  // fc1 first (unless the packed gate_up stands in for it), then fc2: one error
  // for the first key missing.
  const Node *gu = n.get("gate_up");
  const Node *fc1n = gu ? nullptr : n.get("fc1");
  if (!gu && !fc1n)
    return error(n, "feed_forward needs 'fc1'");
  auto fc2n = require(n, "fc2", "feed_forward");
  if (failed(fc2n))
    return failure();
  auto fc2 = parseLinear(**fc2n, "fc2");
  if (failed(fc2))
    return failure();
  // fc2(act(gate(x)) * up(x)) when gated: up is fc1, or with the packed gate_up
  // (Phi-3's gate_up_proj) its second half, the gate its first.
  FailureOr<Value> h, gv;
  if (gu) {
    for (const char *key : {"gate", "fc1"})
      if (n.get(key))
        return error(*n.keyNode(key), std::string("'") + key +
                                           "' conflicts with the packed 'gate_up'");
    auto spec = parseLinear(*gu, "gate_up");
    if (failed(spec))
      return failure();
    gv = applyLinear(*spec, x, dModel, dff, 0, 2 * dff);
    h = applyLinear(*spec, x, dModel, dff, dff, 2 * dff);
  } else {
    auto fc1 = parseLinear(*fc1n, "fc1");
    if (failed(fc1))
      return failure();
    h = applyLinear(*fc1, x, dModel, dff);
    if (failed(h))
      return failure();
    if (const Node *gn = n.get("gate")) { // T5 v1.1's wi_0 / wi_1, GLU variants
      auto gate = parseLinear(*gn, "gate");
      if (failed(gate))
        return failure();
      gv = applyLinear(*gate, x, dModel, dff);
    } else {
      gv = Value();
    }
  }
  if (failed(h) || failed(gv))
    return failure();
  if (*gv) {
    auto ga = buildActivation(actName, loc(n), *gv);
    if (failed(ga))
      return failure();
    auto prod = make<td::MulOp>(loc(n), {*ga, *h});
    if (failed(prod))
      return failure();
    return applyLinear(*fc2, *prod, dff, dModel);
  }
  auto a = buildActivation(actName, loc(n), *h);
  if (failed(a))
    return failure();
  return applyLinear(*fc2, *a, dff, dModel);
}


} // namespace tfc::detail
