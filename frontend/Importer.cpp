//===- Importer.cpp - YAML model description to the tfc dialect -----------===//
//
// Walks the located YAML tree (YamlDoc.h) and expands each component into primitive
// tfc ops, exactly as the PyTorch code the description mirrors computes it:
// attention becomes linear / reshape / transpose / matmul / scale / masked_fill /
// softmax / matmul, norms become reductions and arithmetic. Fusing them back is the
// passes' job, so the frontend stays a faithful transcription.
//
// The schema is checked as we go: unknown keys (with a did-you-mean), values of the
// wrong kind, dangling references and cycles all stop the import with one error at
// the offending node. See docs/model-format.md for the format.
//
//===----------------------------------------------------------------------------===//
#include "frontend/Importer.h"

#include "frontend/Expr.h"
#include "frontend/YamlDoc.h"
#include "ir/TfcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <set>

using namespace mlir;
using ::tfc::yaml::Node;
namespace td = ::mlir::tfc;

namespace tfc {
namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;
/// Largest size, count or id a description may use: 2^40 keeps every product of
/// two sizes (a weight's element count) far from int64 overflow.
constexpr double kMaxInt = 1099511627776.0;

/// Levenshtein distance, for did-you-mean suggestions.
size_t editDistance(StringRef a, StringRef b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1,
                         prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

/// "; did you mean 'x'?" when a candidate is close enough, else "".
std::string didYouMean(StringRef word, ArrayRef<std::string> candidates) {
  std::string best;
  size_t bestD = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto &c : candidates) {
    size_t d = editDistance(word, c);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return os.str();
}

const char *kindName(const Node &n) {
  switch (n.kind) {
  case Node::Kind::Null:
    return "nothing";
  case Node::Kind::Scalar:
    return "a scalar";
  case Node::Kind::Sequence:
    return "a list";
  case Node::Kind::Map:
    return "a map";
  }
  return "?";
}

/// The stream a stack of layers works on, and what its attention masks refer to.
struct StackEnv {
  std::string name;    // "encoder" / "decoder"
  Value tokens;        // token ids [B, S] of this stack
  Value memory;        // encoder output, for cross-attention (decoder only)
  Value memoryTokens;  // encoder token ids, for the cross-attention padding mask
};

class Importer {
public:
  Importer(MLIRContext &ctx, const ImportOptions &opts, const Node &root,
           WeightStore &ws)
      : ctx(ctx), b(&ctx), opts(opts), root(root), ws(ws) {
    file = opts.yamlPath;
  }

  FailureOr<OwningOpRef<ModuleOp>> run();
  std::map<std::string, double> evaluatedParams() const {
    std::map<std::string, double> m;
    for (const auto &kv : paramValues)
      m[kv.first] = kv.second.value;
    return m;
  }

private:
  MLIRContext &ctx;
  OpBuilder b;
  const ImportOptions &opts;
  const Node &root;
  WeightStore &ws;
  std::string file;

  // Parameters: their nodes, evaluated values, and the evaluation stack (cycles).
  const Node *paramsNode = nullptr;
  std::map<std::string, const Node *> paramNodes;
  std::vector<std::string> paramOrder;
  std::map<std::string, std::string> overrideText;
  std::map<std::string, Number> paramValues;
  std::vector<std::string> evaluating;

  int64_t dModel = 0, maxLen = 0, maxBatch = 0;
  std::string scope; // weight-name prefix inside a layer, e.g. "encoder.layers.0."

  //===--------------------------------------------------------------------===//
  // Locations and errors
  //===--------------------------------------------------------------------===//

  Location fileLoc(const Node &n, int colOffset = 0) {
    return FileLineColLoc::get(&ctx, file, std::max(n.line, 1),
                               std::max(n.col, 1) + colOffset);
  }
  /// The location of ops made for |n|: the YAML position, named by the module path.
  Location loc(const Node &n, StringRef name = "") {
    std::string path = name.empty() ? scopeName() : name.str();
    if (path.empty())
      return fileLoc(n);
    return NameLoc::get(StringAttr::get(&ctx, path), fileLoc(n));
  }
  std::string scopeName() const {
    return scope.empty() ? "" : scope.substr(0, scope.size() - 1);
  }
  /// Emits the import's one error. The import stops at the first error, but
  /// some checks run side by side (both weights of a norm); only the first is
  /// reported so the user sees exactly one error line.
  LogicalResult error(const Node &n, const Twine &msg, int colOffset = 0) {
    if (!errored)
      emitError(fileLoc(n, colOffset)) << msg;
    errored = true;
    return failure();
  }
  bool errored = false;

  //===--------------------------------------------------------------------===//
  // Schema helpers
  //===--------------------------------------------------------------------===//

  LogicalResult expectMap(const Node &n, StringRef what) {
    if (!n.isMap())
      return error(n, "'" + what + "' must be a map, got " + kindName(n));
    return success();
  }

  LogicalResult checkKeys(const Node &n, StringRef what,
                          std::vector<std::string> allowed) {
    for (const auto &e : n.entries) {
      const std::string &k = e.first.scalar;
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
        return error(e.first, "unknown key '" + k + "' in " + what +
                                  didYouMean(k, allowed));
    }
    return success();
  }

  FailureOr<const Node *> require(const Node &map, StringRef key, StringRef what) {
    const Node *v = map.get(key.str());
    if (!v)
      return error(map, what + " needs '" + key + "'");
    return v;
  }

  FailureOr<std::string> getString(const Node &n, StringRef what) {
    if (!n.isScalar())
      return error(n, "'" + what + "' must be a string, got " + kindName(n));
    return n.scalar;
  }

  FailureOr<bool> getBool(const Node &n, StringRef what) {
    if (n.isScalar()) {
      if (n.scalar == "true" || n.scalar == "yes" || n.scalar == "on")
        return true;
      if (n.scalar == "false" || n.scalar == "no" || n.scalar == "off")
        return false;
    }
    return error(n, "'" + what + "' must be true or false, got " +
                         (n.isScalar() ? "'" + n.scalar + "'" : kindName(n)));
  }

  FailureOr<std::string> getChoice(const Node &n, StringRef what,
                                   std::vector<std::string> choices) {
    auto s = getString(n, what);
    if (failed(s))
      return failure();
    if (std::find(choices.begin(), choices.end(), *s) == choices.end())
      return error(n, "unknown " + what + " '" + *s + "' (expected one of: " +
                           llvm::join(choices, ", ") + ")" + didYouMean(*s, choices));
    return *s;
  }

  //===--------------------------------------------------------------------===//
  // Parameters and expressions
  //===--------------------------------------------------------------------===//

  bool resolveParam(const std::string &name, Number &out, std::string &err) {
    auto v = paramValues.find(name);
    if (v != paramValues.end()) {
      out = v->second;
      return true;
    }
    auto p = paramNodes.find(name);
    if (p == paramNodes.end()) {
      err = "unknown parameter '" + name + "'" + didYouMean(name, paramOrder);
      return false;
    }
    auto cyc = std::find(evaluating.begin(), evaluating.end(), name);
    if (cyc != evaluating.end()) {
      std::string path;
      for (auto it = cyc; it != evaluating.end(); ++it)
        path += *it + " -> ";
      err = "parameter cycle: " + path + name;
      return false;
    }
    evaluating.push_back(name);
    const Node &n = *p->second;
    auto ov = overrideText.find(name);
    std::string text = ov != overrideText.end() ? ov->second : n.scalar;
    if (ov == overrideText.end() && !n.isScalar()) {
      err = "parameter '" + name + "' must be a number or an expression, got " +
            kindName(n);
      evaluating.pop_back();
      return false;
    }
    size_t off = 0;
    std::string innerErr;
    bool ok = evalExpr(
        text,
        [&](const std::string &nm, Number &o, std::string &e) {
          return resolveParam(nm, o, e);
        },
        out, innerErr, off);
    evaluating.pop_back();
    if (!ok) {
      // Report errors inside a parameter at the parameter's own line.
      if (!reportedInner) {
        reportedInner = true;
        if (ov != overrideText.end())
          (void)error(n, "in --set " + name + "=" + text + ": " + innerErr);
        else
          (void)error(n, innerErr, (int)off);
      }
      err.clear();
      return false;
    }
    paramValues[name] = out;
    return true;
  }
  bool reportedInner = false;

  FailureOr<Number> evalNum(const Node &n, StringRef what) {
    if (!n.isScalar())
      return error(n, "'" + what + "' must be a number or an expression, got " +
                           kindName(n));
    Number out;
    std::string err;
    size_t off = 0;
    reportedInner = false;
    if (!evalExpr(
            n.scalar,
            [&](const std::string &nm, Number &o, std::string &e) {
              return resolveParam(nm, o, e);
            },
            out, err, off)) {
      if (!reportedInner)
        (void)error(n, err, (int)off);
      return failure();
    }
    return out;
  }

  FailureOr<int64_t> evalInt(const Node &n, StringRef what, int64_t min = 1) {
    auto v = evalNum(n, what);
    if (failed(v))
      return failure();
    if (!v->isInt || std::floor(v->value) != v->value)
      return error(n, "'" + what + "' must be an integer, got " +
                           llvm::formatv("{0}", v->value).str());
    if (v->value > kMaxInt)
      return error(n, "'" + what + "' must be at most " + Twine((int64_t)kMaxInt) +
                          ", got " + llvm::formatv("{0:F0}", v->value).str());
    if (v->value < (double)min)
      return error(n, "'" + what + "' must be at least " + Twine(min) + ", got " +
                          Twine((int64_t)v->value));
    return (int64_t)v->value;
  }

  FailureOr<int64_t> paramInt(StringRef name, const Node &at, int64_t min = 1) {
    Number v;
    std::string err;
    reportedInner = false;
    if (!resolveParam(name.str(), v, err)) {
      if (!reportedInner)
        (void)error(at, err.empty() ? "bad parameter" : err);
      return failure();
    }
    if (!v.isInt || v.value < min)
      return error(at, "parameter '" + name + "' must be an integer >= " + Twine(min));
    if (v.value > kMaxInt)
      return error(at, "parameter '" + name + "' must be at most " +
                           Twine((int64_t)kMaxInt) + ", got " +
                           llvm::formatv("{0:F0}", v.value).str());
    return (int64_t)v.value;
  }

  LogicalResult loadParams();

  //===--------------------------------------------------------------------===//
  // Op construction. Result types are inferred before the op is built, so a
  // shape error becomes a located diagnostic instead of a builder assertion.
  //===--------------------------------------------------------------------===//

  template <typename OpT>
  FailureOr<Value> make(Location l, ValueRange operands,
                        ArrayRef<NamedAttribute> attrs = {}) {
    SmallVector<Type> types;
    if (errored)
      return failure();
    DictionaryAttr dict = DictionaryAttr::get(&ctx, attrs);
    if (failed(OpT::inferReturnTypes(&ctx, l, operands, dict, {}, types))) {
      errored = true;
      return failure();
    }
    OperationState st(l, OpT::getOperationName());
    st.addOperands(operands);
    st.addAttributes(attrs);
    st.addTypes(types);
    return b.create(st)->getResult(0);
  }

  NamedAttribute attr(StringRef name, Attribute a) {
    return b.getNamedAttr(name, a);
  }
  NamedAttribute i64(StringRef name, int64_t v) {
    return attr(name, b.getI64IntegerAttr(v));
  }
  NamedAttribute f64(StringRef name, double v) {
    return attr(name, b.getF64FloatAttr(v));
  }
  NamedAttribute arr(StringRef name, ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }

  Value constF(Location l, double v) {
    auto t = RankedTensorType::get({}, b.getF32Type());
    return *make<td::ConstantOp>(
        l, {}, {attr("value", DenseElementsAttr::get(t, (float)v))});
  }
  Value constI(Location l, int64_t v) {
    auto t = RankedTensorType::get({}, b.getI64Type());
    return *make<td::ConstantOp>(
        l, {}, {attr("value", DenseElementsAttr::get(t, v))});
  }

  FailureOr<Value> weight(const Node &at, const std::string &name,
                          std::vector<int64_t> shape, WeightRole role) {
    std::string err;
    if (!ws.declare(name, shape, role, err))
      return error(at, err);
    auto t = RankedTensorType::get(shape, b.getF32Type());
    return make<td::WeightOp>(loc(at), {},
                               {attr("name", b.getStringAttr(name)),
                                attr("type", TypeAttr::get(t))});
  }

  std::string qualify(const std::string &name) const { return scope + name; }

  //===--------------------------------------------------------------------===//
  // Components
  //===--------------------------------------------------------------------===//

  struct LinearSpec {
    std::string weight, bias; // full names; bias empty if none
    bool inOut = false;       // Conv1D layout [in, out]
    const Node *node = nullptr;
  };
  FailureOr<LinearSpec> parseLinear(const Node &n, StringRef what);
  FailureOr<Value> applyLinear(const LinearSpec &s, Value x, int64_t in,
                               int64_t out, int64_t rowOffset = 0,
                               int64_t rowsTotal = -1);
  FailureOr<Value> emitNorm(const Node &n, Value x, StringRef what);
  FailureOr<Value> emitAttention(const Node &n, Value x, const StackEnv &env);
  FailureOr<Value> emitFeedForward(const Node &n, Value x);
  FailureOr<Value> emitOps(const Node &block, Value x, const StackEnv &env);
  FailureOr<Value> emitBlock(const Node &n, Value x, const StackEnv &env);
  FailureOr<Value> emitStack(const Node &n, StringRef which, StackEnv &env);
  FailureOr<Value> emitEmbedding(const Node &stack, Value tokens);
  FailureOr<Value> emitOutput(const Node &n, Value x, int64_t vocabHint,
                              std::string &outName);

  // Function inputs by name, for stacks and `ops:` blocks.
  std::map<std::string, Value> inputs;
  std::map<std::string, std::string> inputSeqDim;
};

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

LogicalResult Importer::loadParams() {
  paramsNode = root.get("params");
  if (!paramsNode)
    return error(root, "the model description needs a 'params' map (d_model, "
                       "heads, ...)");
  if (failed(expectMap(*paramsNode, "params")))
    return failure();
  for (const auto &e : paramsNode->entries) {
    if (!isIdentifier(e.first.scalar))
      return error(e.first, "parameter name '" + e.first.scalar +
                                "' is not an identifier");
    paramNodes[e.first.scalar] = &e.second;
    paramOrder.push_back(e.first.scalar);
  }
  for (const auto &ov : opts.overrides) {
    if (!paramNodes.count(ov.first))
      return error(*root.keyNode("params"),
                   "--set " + ov.first + "=" + ov.second + ": unknown parameter '" +
                       ov.first + "'" + didYouMean(ov.first, paramOrder));
    overrideText[ov.first] = ov.second;
  }
  // Evaluate all now so a bad or cyclic parameter is reported even if unused.
  for (const auto &name : paramOrder) {
    Number v;
    std::string err;
    reportedInner = false;
    if (!resolveParam(name, v, err)) {
      if (!reportedInner)
        return error(*paramNodes[name], err);
      return failure();
    }
  }
  const Node &pk = *root.keyNode("params");
  for (const char *req : {"d_model", "max_len"})
    if (!paramNodes.count(req))
      return error(pk, std::string("params must define '") + req + "'");
  auto d = paramInt("d_model", *paramNodes["d_model"]);
  auto ml = paramInt("max_len", *paramNodes["max_len"]);
  if (failed(d) || failed(ml))
    return failure();
  dModel = *d;
  maxLen = *ml;
  if (paramNodes.count("max_batch")) {
    auto mb = paramInt("max_batch", *paramNodes["max_batch"]);
    if (failed(mb))
      return failure();
    maxBatch = *mb;
  } else {
    maxBatch = 64;
  }
  if (paramNodes.count("pad_id") && failed(paramInt("pad_id", *paramNodes["pad_id"], 0)))
    return failure();
  return success();
}

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

/// Applies a linear layer. For a packed weight (QKV in one tensor), |rowOffset|
/// and |rowsTotal| select the output features [rowOffset, rowOffset + out) of a
/// weight that has |rowsTotal| outputs in all.
FailureOr<Value> Importer::applyLinear(const LinearSpec &s, Value x, int64_t in,
                                       int64_t out, int64_t rowOffset,
                                       int64_t rowsTotal) {
  const Node &at = *s.node;
  Location l = loc(at);
  int64_t total = rowsTotal < 0 ? out : rowsTotal;
  std::vector<int64_t> wshape =
      s.inOut ? std::vector<int64_t>{in, total} : std::vector<int64_t>{total, in};
  auto w = weight(at, s.weight, wshape, WeightRole::Matrix);
  if (failed(w))
    return failure();
  Value wv = *w;
  if (total != out) {
    auto sl = make<td::SliceOp>(l, {wv},
                                 {i64("axis", s.inOut ? 1 : 0),
                                  i64("start", rowOffset), i64("size", out)});
    if (failed(sl))
      return failure();
    wv = *sl;
  }
  Value bv;
  if (!s.bias.empty()) {
    auto bw = weight(at, s.bias, {total}, WeightRole::Bias);
    if (failed(bw))
      return failure();
    bv = *bw;
    if (total != out) {
      auto sl = make<td::SliceOp>(
          l, {bv}, {i64("axis", 0), i64("start", rowOffset), i64("size", out)});
      if (failed(sl))
        return failure();
      bv = *sl;
    }
  }
  if (s.inOut) {
    // Conv1D (GPT-2): y = x @ W + b with W stored [in, out].
    auto y = make<td::MatmulOp>(l, {x, wv});
    if (failed(y) || !bv)
      return y;
    return make<td::AddOp>(l, {*y, bv});
  }
  SmallVector<Value, 3> ops{x, wv};
  if (bv)
    ops.push_back(bv);
  return make<td::LinearOp>(l, ops);
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitNorm(const Node &n, Value x, StringRef what) {
  if (failed(expectMap(n, what)) ||
      failed(checkKeys(n, what, {"kind", "name", "eps", "gain", "shift"})))
    return failure();
  std::string kind = "layer_norm";
  if (const Node *k = n.get("kind")) {
    auto v = getChoice(*k, "norm kind", {"layer_norm", "std_norm"});
    if (failed(v))
      return failure();
    kind = *v;
  }
  bool stdNorm = kind == "std_norm";
  auto nameNode = require(n, "name", what);
  if (failed(nameNode))
    return failure();
  auto name = getString(**nameNode, "name");
  if (failed(name))
    return failure();
  double eps = stdNorm ? 1e-6 : 1e-5;
  if (const Node *e = n.get("eps")) {
    auto v = evalNum(*e, "eps");
    if (failed(v))
      return failure();
    if (!(v->value >= 0))
      return error(*e, "'eps' must be non-negative");
    eps = v->value;
  }
  std::string gain = stdNorm ? "alpha" : "weight";
  std::string shift = "bias";
  for (auto [key, dst] : {std::pair<const char *, std::string *>{"gain", &gain},
                          {"shift", &shift}})
    if (const Node *g = n.get(key)) {
      auto v = getString(*g, key);
      if (failed(v))
        return failure();
      *dst = *v;
    }
  auto xt = x.getType().cast<RankedTensorType>();
  if (!xt.getElementType().isa<FloatType>() || xt.getRank() < 1 ||
      (xt.getShape().back() != kDyn && xt.getShape().back() != dModel))
    return error(n, what + " normalizes over d_model (" + Twine(dModel) +
                        ") features, but its input is " + typeStr(xt));
  std::string prefix = qualify(*name) + ".";
  auto g = weight(n, prefix + gain, {dModel}, WeightRole::Gain);
  auto s = weight(n, prefix + shift, {dModel}, WeightRole::Shift);
  if (failed(g) || failed(s))
    return failure();
  Location l = loc(n, prefix.substr(0, prefix.size() - 1));
  auto red = [&](auto tag, Value v) {
    using OpT = decltype(tag);
    return make<OpT>(l, {v}, {i64("axis", -1), attr("keepdim", b.getBoolAttr(true))});
  };
  // mean, centered input.
  auto mean = red(td::ReduceMeanOp(), x);
  if (failed(mean))
    return failure();
  Value xc = *make<td::SubOp>(l, {x, *mean});
  Value sq = *make<td::MulOp>(l, {xc, xc});
  Value y;
  if (stdNorm) {
    // alpha * (x - mean) / (x.std(unbiased) + eps) + bias
    Value ss = *red(td::ReduceSumOp(), sq);
    Value var = *make<td::DivOp>(l, {ss, constF(l, (double)(dModel - 1))});
    Value sd = *make<td::SqrtOp>(l, {var});
    Value den = *make<td::AddOp>(l, {sd, constF(l, eps)});
    Value num = *make<td::MulOp>(l, {*g, xc});
    y = *make<td::DivOp>(l, {num, den});
  } else {
    // (x - mean) / sqrt(var_biased + eps) * weight
    Value var = *red(td::ReduceMeanOp(), sq);
    Value ve = *make<td::AddOp>(l, {var, constF(l, eps)});
    Value sd = *make<td::SqrtOp>(l, {ve});
    Value xn = *make<td::DivOp>(l, {xc, sd});
    y = *make<td::MulOp>(l, {xn, *g});
  }
  return make<td::AddOp>(l, {y, *s});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitAttention(const Node &n, Value x,
                                         const StackEnv &env) {
  if (failed(expectMap(n, "attention")) ||
      failed(checkKeys(n, "attention",
                       {"type", "mask", "q", "k", "v", "qkv", "out", "heads",
                        "scale", "divide_by", "mask_value", "mask_mode", "name"})))
    return failure();
  Location l = loc(n);
  if (const Node *nm = n.get("name")) {
    // The module path of the attention (e.g. encoder.layers.0.attn) for reports.
    auto s = getString(*nm, "name");
    if (failed(s))
      return failure();
    l = loc(n, qualify(*s));
  }
  bool cross = false;
  if (const Node *t = n.get("type")) {
    auto v = getChoice(*t, "attention type", {"self", "cross"});
    if (failed(v))
      return failure();
    cross = *v == "cross";
  }
  if (cross && !env.memory)
    return error(n, "cross-attention needs an encoder; this model has none");
  int64_t heads;
  if (const Node *h = n.get("heads")) {
    auto v = evalInt(*h, "heads");
    if (failed(v))
      return failure();
    heads = *v;
  } else {
    if (!paramNodes.count("heads"))
      return error(n, "attention needs 'heads' (or a 'heads' parameter)");
    auto v = paramInt("heads", n);
    if (failed(v))
      return failure();
    heads = *v;
  }
  if (dModel % heads != 0)
    return error(n, "d_model " + Twine(dModel) + " is not divisible by heads " +
                         Twine(heads));
  int64_t dk = dModel / heads;

  // Mask.
  std::string maskKind = "none";
  if (const Node *m = n.get("mask")) {
    auto v = getChoice(*m, "mask", {"none", "padding", "causal", "padding+causal"});
    if (failed(v))
      return failure();
    maskKind = *v;
  }
  double maskValue = -1e9;
  if (const Node *mv = n.get("mask_value")) {
    auto v = evalNum(*mv, "mask_value");
    if (failed(v))
      return failure();
    maskValue = v->value;
  }
  bool additive = false;
  if (const Node *mm = n.get("mask_mode")) {
    auto v = getChoice(*mm, "mask_mode", {"fill", "additive"});
    if (failed(v))
      return failure();
    additive = *v == "additive";
  }
  if (additive && maskKind != "padding")
    return error(n, "mask_mode 'additive' is supported for 'padding' masks only");
  bool wantsPad = maskKind == "padding" || maskKind == "padding+causal";
  if (wantsPad && !paramNodes.count("pad_id"))
    return error(n, "a padding mask needs a 'pad_id' parameter");
  if (cross && (maskKind == "causal" || maskKind == "padding+causal"))
    return error(n, "a causal mask makes no sense for cross-attention");

  Value kvIn = cross ? env.memory : x;

  // Projections.
  Value q = x, k = kvIn, v = kvIn;
  if (const Node *qkv = n.get("qkv")) {
    for (const char *key : {"q", "k", "v"})
      if (n.get(key))
        return error(*n.keyNode(key), std::string("'") + key +
                                           "' conflicts with the packed 'qkv'");
    auto spec = parseLinear(*qkv, "qkv");
    if (failed(spec))
      return failure();
    auto pq = applyLinear(*spec, x, dModel, dModel, 0, 3 * dModel);
    auto pk = applyLinear(*spec, kvIn, dModel, dModel, dModel, 3 * dModel);
    auto pv = applyLinear(*spec, kvIn, dModel, dModel, 2 * dModel, 3 * dModel);
    if (failed(pq) || failed(pk) || failed(pv))
      return failure();
    q = *pq, k = *pk, v = *pv;
  } else {
    // A missing q/k/v means the input is used unprojected (tutorial 001 defines
    // per-head projections but never applies them).
    for (auto [key, val, in] : {std::tuple<const char *, Value *, Value>{"q", &q, x},
                                {"k", &k, kvIn},
                                {"v", &v, kvIn}}) {
      if (const Node *pn = n.get(key)) {
        auto spec = parseLinear(*pn, key);
        if (failed(spec))
          return failure();
        auto r = applyLinear(*spec, in, dModel, dModel);
        if (failed(r))
          return failure();
        *val = *r;
      }
    }
  }

  // Split heads: [B, S, D] -> [B, S, H, dk] -> [B, H, S, dk].
  auto split = [&](Value t) -> FailureOr<Value> {
    auto r = make<td::ReshapeOp>(l, {t}, {arr("shape", {0, 0, heads, dk})});
    if (failed(r))
      return failure();
    return make<td::TransposeOp>(l, {*r}, {arr("perm", {0, 2, 1, 3})});
  };
  auto qh = split(q), kh = split(k), vh = split(v);
  if (failed(qh) || failed(kh) || failed(vh))
    return failure();
  auto scores = make<td::MatmulOp>(l, {*qh, *kh},
                                    {attr("transpose_b", b.getBoolAttr(true))});
  if (failed(scores))
    return failure();
  Value s = *scores;

  // Scale: by default scores / sqrt(d_k), as the tutorials write it.
  if (n.get("scale") && n.get("divide_by"))
    return error(*n.keyNode("divide_by"), "give either 'scale' or 'divide_by'");
  if (const Node *sc = n.get("scale")) {
    auto f = evalNum(*sc, "scale");
    if (failed(f))
      return failure();
    s = *make<td::MulOp>(l, {s, constF(l, f->value)});
  } else {
    double div = std::sqrt((double)dk);
    if (const Node *dv = n.get("divide_by")) {
      auto f = evalNum(*dv, "divide_by");
      if (failed(f))
        return failure();
      if (f->value == 0)
        return error(*dv, "'divide_by' must not be zero");
      div = f->value;
    }
    s = *make<td::DivOp>(l, {s, constF(l, div)});
  }

  // Mask, built as the tutorials build it: (tokens != pad).unsqueeze(-2), the
  // no-peek triangle, their conjunction, .unsqueeze(1), then masked_fill(mask == 0).
  if (maskKind != "none") {
    Value keyTokens = cross ? env.memoryTokens : env.tokens;
    Value keep; // [B or 1, 1 or Sq, Sk]
    if (wantsPad) {
      auto pad = paramInt("pad_id", n, 0);
      if (failed(pad))
        return failure();
      auto ne = make<td::CompareOp>(
          l, {keyTokens, constI(l, *pad)},
          {attr("predicate", td::CmpPredicateAttr::get(&ctx, td::CmpPredicate::ne))});
      if (failed(ne))
        return failure();
      if (additive) {
        // BERT: (1 - mask) * -10000 added to the scores, mask [B, 1, 1, Sk].
        auto f = make<td::CastOp>(l, {*ne},
                                   {attr("element_type", TypeAttr::get(b.getF32Type()))});
        Value inv = *make<td::SubOp>(l, {constF(l, 1.0), *f});
        Value add = *make<td::MulOp>(l, {inv, constF(l, maskValue)});
        Value u1 = *make<td::UnsqueezeOp>(l, {add}, {i64("axis", 1)});
        Value u2 = *make<td::UnsqueezeOp>(l, {u1}, {i64("axis", 1)});
        auto r = make<td::AddOp>(l, {s, u2});
        if (failed(r))
          return failure();
        s = *r;
      } else {
        keep = *make<td::UnsqueezeOp>(l, {*ne}, {i64("axis", 1)});
      }
    }
    if (maskKind == "causal" || maskKind == "padding+causal") {
      Value nopeak = *make<td::NopeakMaskOp>(l, {env.tokens});
      if (keep) {
        auto a = make<td::AndOp>(l, {keep, nopeak});
        if (failed(a))
          return failure();
        keep = *a;
      } else {
        keep = nopeak;
      }
    }
    if (keep) {
      Value k4 = *make<td::UnsqueezeOp>(l, {keep}, {i64("axis", 1)});
      Value masked = *make<td::NotOp>(l, {k4});
      auto r = make<td::MaskedFillOp>(l, {s, masked}, {f64("value", maskValue)});
      if (failed(r))
        return failure();
      s = *r;
    }
  }

  auto p = make<td::SoftmaxOp>(l, {s}, {i64("axis", -1)});
  if (failed(p))
    return failure();
  auto o = make<td::MatmulOp>(l, {*p, *vh});
  if (failed(o))
    return failure();
  // Merge heads: [B, H, Sq, dk] -> [B, Sq, H, dk] -> [B, Sq, D].
  Value ot = *make<td::TransposeOp>(l, {*o}, {arr("perm", {0, 2, 1, 3})});
  auto merged = make<td::ReshapeOp>(l, {ot}, {arr("shape", {0, 0, dModel})});
  if (failed(merged))
    return failure();
  if (const Node *on = n.get("out")) {
    auto spec = parseLinear(*on, "out");
    if (failed(spec))
      return failure();
    return applyLinear(*spec, *merged, dModel, dModel);
  }
  return *merged;
}

//===----------------------------------------------------------------------===//
// Feed-forward
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitFeedForward(const Node &n, Value x) {
  if (failed(expectMap(n, "feed_forward")) ||
      failed(checkKeys(n, "feed_forward", {"fc1", "fc2", "activation", "d_ff"})))
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
  std::string act = "relu";
  if (const Node *a = n.get("activation")) {
    auto v = getChoice(*a, "activation", {"relu", "gelu", "gelu_tanh"});
    if (failed(v))
      return failure();
    act = *v;
  }
  auto fc1n = require(n, "fc1", "feed_forward");
  auto fc2n = require(n, "fc2", "feed_forward");
  if (failed(fc1n) || failed(fc2n))
    return failure();
  auto fc1 = parseLinear(**fc1n, "fc1");
  auto fc2 = parseLinear(**fc2n, "fc2");
  if (failed(fc1) || failed(fc2))
    return failure();
  auto h = applyLinear(*fc1, x, dModel, dff);
  if (failed(h))
    return failure();
  Location l = loc(n);
  Value a;
  if (act == "relu")
    a = *make<td::ReluOp>(l, {*h});
  else
    a = *make<td::GeluOp>(
        l, {*h},
        {attr("approximate",
              td::GeluApproxAttr::get(&ctx, act == "gelu" ? td::GeluApprox::none
                                                            : td::GeluApprox::tanh))});
  return applyLinear(*fc2, a, dff, dModel);
}

//===----------------------------------------------------------------------===//
// Hand-written blocks of primitive ops
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitOps(const Node &block, Value x, const StackEnv &env) {
  const Node &list = *block.get("ops");
  if (!list.isSeq())
    return error(list, "'ops' must be a list of ops, got " + std::string(kindName(list)));
  static const std::vector<std::string> kOps = {
      "linear",  "matmul",     "add",         "sub",         "mul",
      "div",     "and",        "not",         "compare",     "cast",
      "masked_fill", "select", "reshape",     "transpose",   "unsqueeze",
      "slice",   "reduce_mean", "reduce_sum", "sqrt",        "relu",
      "gelu",    "softmax",    "log_softmax", "layer_norm",  "weight",
      "constant", "positions", "nopeak_mask", "dropout",     "embedding"};
  // Values visible to the ops: the block input, the encoder output, token inputs.
  std::map<std::string, Value> values;
  values["x"] = x;
  if (env.memory)
    values["memory"] = env.memory;
  for (const auto &in : inputs)
    values[in.first] = in.second;

  // Index the ops by the value they define so they may be listed in any order;
  // then build them depth-first, which is also where a cycle is found.
  std::map<std::string, const Node *> defs;
  std::vector<std::string> defNames;
  for (const Node &op : list.items) {
    if (failed(expectMap(op, "op")))
      return failure();
    auto nm = require(op, "name", "an op");
    if (failed(nm))
      return failure();
    auto name = getString(**nm, "name");
    if (failed(name))
      return failure();
    if (defs.count(*name) || values.count(*name))
      return error(**nm, "value '" + *name + "' is defined twice");
    defs[*name] = &op;
    defNames.push_back(*name);
  }
  std::vector<std::string> visiting;
  std::function<FailureOr<Value>(const std::string &, const Node &)> get;

  // Resolves an operand: a value name, or a number/expression (a scalar constant).
  auto operand = [&](const Node &ref) -> FailureOr<Value> {
    if (!ref.isScalar())
      return error(ref, "an op input must be a value name or a number");
    if (values.count(ref.scalar) || defs.count(ref.scalar))
      return get(ref.scalar, ref);
    if (isIdentifier(ref.scalar) && !paramNodes.count(ref.scalar)) {
      std::vector<std::string> known = defNames;
      for (const auto &v : values)
        known.push_back(v.first);
      return error(ref, "unknown value '" + ref.scalar + "'" +
                             didYouMean(ref.scalar, known));
    }
    auto num = evalNum(ref, "input");
    if (failed(num))
      return failure();
    return constF(loc(ref), num->value);
  };

  get = [&](const std::string &name, const Node &at) -> FailureOr<Value> {
    auto it = values.find(name);
    if (it != values.end())
      return it->second;
    auto cyc = std::find(visiting.begin(), visiting.end(), name);
    if (cyc != visiting.end()) {
      std::string path;
      for (auto i = cyc; i != visiting.end(); ++i)
        path += *i + " -> ";
      return error(at, "cycle among ops: " + path + name);
    }
    const Node &op = *defs.at(name);
    visiting.push_back(name);
    auto opNode = require(op, "op", "an op");
    if (failed(opNode))
      return failure();
    auto kind = getString(**opNode, "op");
    if (failed(kind))
      return failure();
    if (std::find(kOps.begin(), kOps.end(), *kind) == kOps.end())
      return error(**opNode, "unknown op '" + *kind + "'" + didYouMean(*kind, kOps));
    if (failed(checkKeys(op, "op '" + *kind + "'",
                         {"op", "name", "input", "inputs", "weight", "axis", "perm",
                          "shape", "value", "predicate", "approximate",
                          "transpose_b", "keepdim", "kind", "eps", "gain", "shift",
                          "start", "size", "dtype", "bias", "layout", "in", "out"})))
      return failure();
    Location l = loc(op, scope + name);
    // Collect operands.
    SmallVector<Value> ins;
    if (const Node *in = op.get("input")) {
      auto v = operand(*in);
      if (failed(v))
        return failure();
      ins.push_back(*v);
    }
    if (const Node *in = op.get("inputs")) {
      if (!in->isSeq())
        return error(*in, "'inputs' must be a list");
      for (const Node &i : in->items) {
        auto v = operand(i);
        if (failed(v))
          return failure();
        ins.push_back(*v);
      }
    }
    auto needInputs = [&](size_t k) -> LogicalResult {
      if (ins.size() != k)
        return error(op, "op '" + *kind + "' takes " + Twine(k) + " input" +
                             (k == 1 ? "" : "s") + ", got " + Twine(ins.size()));
      return success();
    };
    auto intAttr = [&](const char *key, std::optional<int64_t> dflt,
                       int64_t min) -> FailureOr<int64_t> {
      const Node *a = op.get(key);
      if (!a) {
        if (dflt)
          return *dflt;
        return error(op, "op '" + *kind + "' needs '" + key + "'");
      }
      return evalInt(*a, key, min);
    };
    auto listAttr = [&](const char *key, int64_t min = -1) -> FailureOr<SmallVector<int64_t>> {
      const Node *a = op.get(key);
      if (!a || !a->isSeq())
        return error(a ? *a : op, "op '" + *kind + "' needs '" + key + "' as a list");
      SmallVector<int64_t> out;
      for (const Node &i : a->items) {
        auto v = evalInt(i, key, min);
        if (failed(v))
          return failure();
        out.push_back(*v);
      }
      return out;
    };
    FailureOr<Value> r = failure();
    const std::string &k = *kind;
    if (k == "dropout") { // identity at inference
      if (failed(needInputs(1)))
        return failure();
      r = ins[0];
    } else if (k == "weight") {
      auto wn = require(op, "weight", "op 'weight'");
      auto sh = listAttr("shape", 1);
      if (failed(wn) || failed(sh))
        return failure();
      auto s = getString(**wn, "weight");
      if (failed(s))
        return failure();
      r = weight(op, qualify(*s), std::vector<int64_t>(sh->begin(), sh->end()),
                 sh->size() == 1 ? WeightRole::Bias : WeightRole::Matrix);
    } else if (k == "constant") {
      auto vn = require(op, "value", "op 'constant'");
      if (failed(vn))
        return failure();
      auto num = evalNum(**vn, "value");
      if (failed(num))
        return failure();
      r = constF(l, num->value);
    } else if (k == "linear") {
      if (failed(needInputs(1)))
        return failure();
      auto wn = require(op, "weight", "op 'linear'");
      if (failed(wn))
        return failure();
      auto spec = parseLinear(**wn, "weight");
      if (failed(spec))
        return failure();
      auto in = intAttr("in", dModel, 1);
      auto outF = intAttr("out", dModel, 1);
      if (failed(in) || failed(outF))
        return failure();
      r = applyLinear(*spec, ins[0], *in, *outF);
    } else if (k == "embedding") {
      if (failed(needInputs(1)))
        return failure();
      auto wn = require(op, "weight", "op 'embedding'");
      auto sh = listAttr("shape", 1);
      if (failed(wn) || failed(sh))
        return failure();
      auto s = getString(**wn, "weight");
      if (failed(s))
        return failure();
      auto t = weight(op, qualify(*s), std::vector<int64_t>(sh->begin(), sh->end()),
                      WeightRole::Matrix);
      if (failed(t))
        return failure();
      r = make<td::EmbeddingOp>(l, {*t, ins[0]});
    } else if (k == "matmul") {
      if (failed(needInputs(2)))
        return failure();
      bool tb = false;
      if (const Node *t = op.get("transpose_b")) {
        auto v = getBool(*t, "transpose_b");
        if (failed(v))
          return failure();
        tb = *v;
      }
      r = make<td::MatmulOp>(l, ins, {attr("transpose_b", b.getBoolAttr(tb))});
    } else if (k == "add" || k == "sub" || k == "mul" || k == "div" || k == "and") {
      if (failed(needInputs(2)))
        return failure();
      if (k == "add")
        r = make<td::AddOp>(l, ins);
      else if (k == "sub")
        r = make<td::SubOp>(l, ins);
      else if (k == "mul")
        r = make<td::MulOp>(l, ins);
      else if (k == "div")
        r = make<td::DivOp>(l, ins);
      else
        r = make<td::AndOp>(l, ins);
    } else if (k == "compare") {
      if (failed(needInputs(2)))
        return failure();
      auto pn = require(op, "predicate", "op 'compare'");
      if (failed(pn))
        return failure();
      auto p = getChoice(**pn, "predicate", {"eq", "ne", "lt", "le", "gt", "ge"});
      if (failed(p))
        return failure();
      // Comparing token ids with a number: make the constant an integer.
      if (ins[0].getType().cast<RankedTensorType>().getElementType().isInteger(64) &&
          ins[1].getDefiningOp<td::ConstantOp>()) {
        auto c = ins[1].getDefiningOp<td::ConstantOp>();
        if (auto fa = c.getValue().dyn_cast<DenseFPElementsAttr>())
          if (fa.isSplat())
            ins[1] = constI(l, (int64_t)fa.getSplatValue<float>());
      }
      r = make<td::CompareOp>(
          l, ins,
          {attr("predicate",
                td::CmpPredicateAttr::get(&ctx, *td::symbolizeCmpPredicate(*p)))});
    } else if (k == "not" || k == "sqrt" || k == "relu" || k == "nopeak_mask") {
      if (failed(needInputs(1)))
        return failure();
      if (k == "not")
        r = make<td::NotOp>(l, ins);
      else if (k == "sqrt")
        r = make<td::SqrtOp>(l, ins);
      else if (k == "relu")
        r = make<td::ReluOp>(l, ins);
      else
        r = make<td::NopeakMaskOp>(l, ins);
    } else if (k == "gelu") {
      if (failed(needInputs(1)))
        return failure();
      td::GeluApprox ap = td::GeluApprox::none;
      if (const Node *a = op.get("approximate")) {
        auto v = getChoice(*a, "approximate", {"none", "tanh"});
        if (failed(v))
          return failure();
        ap = *td::symbolizeGeluApprox(*v);
      }
      r = make<td::GeluOp>(l, ins,
                            {attr("approximate", td::GeluApproxAttr::get(&ctx, ap))});
    } else if (k == "cast") {
      if (failed(needInputs(1)))
        return failure();
      auto dn = require(op, "dtype", "op 'cast'");
      if (failed(dn))
        return failure();
      auto d = getChoice(**dn, "dtype", {"f32", "i64", "i1"});
      if (failed(d))
        return failure();
      Type t = *d == "f32" ? (Type)b.getF32Type()
                           : *d == "i64" ? (Type)b.getI64Type() : (Type)b.getI1Type();
      r = make<td::CastOp>(l, ins, {attr("element_type", TypeAttr::get(t))});
    } else if (k == "masked_fill") {
      if (failed(needInputs(2)))
        return failure();
      auto vn = require(op, "value", "op 'masked_fill'");
      if (failed(vn))
        return failure();
      auto v = evalNum(**vn, "value");
      if (failed(v))
        return failure();
      r = make<td::MaskedFillOp>(l, ins, {f64("value", v->value)});
    } else if (k == "select") {
      if (failed(needInputs(3)))
        return failure();
      r = make<td::SelectOp>(l, ins);
    } else if (k == "reshape") {
      if (failed(needInputs(1)))
        return failure();
      auto sh = listAttr("shape");
      if (failed(sh))
        return failure();
      r = make<td::ReshapeOp>(l, ins, {arr("shape", *sh)});
    } else if (k == "transpose") {
      if (failed(needInputs(1)))
        return failure();
      auto p = listAttr("perm");
      if (failed(p))
        return failure();
      r = make<td::TransposeOp>(l, ins, {arr("perm", *p)});
    } else if (k == "unsqueeze" || k == "softmax" || k == "log_softmax" ||
               k == "positions") {
      if (failed(needInputs(1)))
        return failure();
      auto ax = intAttr("axis", k == "positions" ? std::optional<int64_t>(1)
                                                 : std::optional<int64_t>(),
                        -64);
      if (failed(ax))
        return failure();
      if (k == "unsqueeze")
        r = make<td::UnsqueezeOp>(l, ins, {i64("axis", *ax)});
      else if (k == "softmax")
        r = make<td::SoftmaxOp>(l, ins, {i64("axis", *ax)});
      else if (k == "log_softmax")
        r = make<td::LogSoftmaxOp>(l, ins, {i64("axis", *ax)});
      else
        r = make<td::PositionsOp>(l, ins, {i64("axis", *ax)});
      if (succeeded(r) && k != "unsqueeze" && k != "positions") {
        int64_t rank = ins[0].getType().cast<RankedTensorType>().getRank();
        if (td::normalizeAxis(*ax, rank) < 0)
          return error(*op.get("axis"), "axis " + Twine(*ax) +
                                             " is out of range for rank " +
                                             Twine(rank));
      }
    } else if (k == "reduce_mean" || k == "reduce_sum") {
      if (failed(needInputs(1)))
        return failure();
      auto ax = intAttr("axis", -1, -64);
      if (failed(ax))
        return failure();
      bool keep = true;
      if (const Node *kd = op.get("keepdim")) {
        auto v = getBool(*kd, "keepdim");
        if (failed(v))
          return failure();
        keep = *v;
      }
      SmallVector<NamedAttribute> as{i64("axis", *ax),
                                     attr("keepdim", b.getBoolAttr(keep))};
      r = k == "reduce_mean" ? make<td::ReduceMeanOp>(l, ins, as)
                             : make<td::ReduceSumOp>(l, ins, as);
    } else if (k == "slice") {
      if (failed(needInputs(1)))
        return failure();
      auto ax = intAttr("axis", std::nullopt, -64);
      auto st = intAttr("start", std::nullopt, 0);
      auto sz = intAttr("size", std::nullopt, 1);
      if (failed(ax) || failed(st) || failed(sz))
        return failure();
      r = make<td::SliceOp>(l, ins,
                             {i64("axis", *ax), i64("start", *st), i64("size", *sz)});
    } else if (k == "layer_norm") {
      if (failed(needInputs(1)))
        return failure();
      Node normNode = op; // the norm keys live on the op itself
      normNode.entries.clear();
      for (const auto &e : op.entries)
        if (e.first.scalar == "kind" || e.first.scalar == "eps" ||
            e.first.scalar == "gain" || e.first.scalar == "shift")
          normNode.entries.push_back(e);
      auto wn = require(op, "weight", "op 'layer_norm'");
      if (failed(wn))
        return failure();
      normNode.entries.push_back({Node{Node::Kind::Scalar, "name"}, **wn});
      r = emitNorm(normNode, ins[0], "layer_norm");
    }
    if (failed(r))
      return failure();
    visiting.pop_back();
    values[name] = *r;
    return *r;
  };

  std::string outName = defNames.empty() ? "x" : defNames.back();
  const Node *outNode = &block;
  if (const Node *o = block.get("output")) {
    auto s = getString(*o, "output");
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
    return error(*outNode, "unknown value '" + outName + "'" +
                                didYouMean(outName, defNames));
  return values[outName];
}

//===----------------------------------------------------------------------===//
// Blocks, stacks, embeddings, output
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitBlock(const Node &n, Value x, const StackEnv &env) {
  if (failed(expectMap(n, "block")) ||
      failed(checkKeys(n, "block",
                       {"residual", "norm", "attention", "feed_forward", "ops",
                        "output"})))
    return failure();
  int bodies = (n.get("attention") ? 1 : 0) + (n.get("feed_forward") ? 1 : 0) +
               (n.get("ops") ? 1 : 0);
  if (bodies != 1)
    return error(n, "a block needs exactly one of 'attention', 'feed_forward' or "
                     "'ops'");
  std::string residual = "pre";
  if (const Node *r = n.get("residual")) {
    auto v = getChoice(*r, "residual", {"pre", "post", "none"});
    if (failed(v))
      return failure();
    residual = *v;
  }
  const Node *norm = n.get("norm");
  if (!norm && residual != "none")
    return error(n, "a '" + residual + "' residual block needs a 'norm'");

  auto body = [&](Value in) -> FailureOr<Value> {
    if (const Node *a = n.get("attention"))
      return emitAttention(*a, in, env);
    if (const Node *f = n.get("feed_forward"))
      return emitFeedForward(*f, in);
    return emitOps(n, in, env);
  };
  if (residual == "pre") {
    // x + sublayer(norm(x))
    auto xn = emitNorm(*norm, x, "norm");
    if (failed(xn))
      return failure();
    auto y = body(*xn);
    if (failed(y))
      return failure();
    return make<td::AddOp>(loc(n), {x, *y});
  }
  if (residual == "post") {
    // norm(sublayer(x) + x)
    auto y = body(x);
    if (failed(y))
      return failure();
    auto s = make<td::AddOp>(loc(n), {*y, x});
    if (failed(s))
      return failure();
    return emitNorm(*norm, *s, "norm");
  }
  auto y = body(x);
  if (failed(y) || !norm)
    return y;
  return emitNorm(*norm, *y, "norm");
}

FailureOr<Value> Importer::emitEmbedding(const Node &stack, Value tokens) {
  auto en = require(stack, "embedding", "a stack");
  if (failed(en))
    return failure();
  const Node &e = **en;
  if (failed(expectMap(e, "embedding")) ||
      failed(checkKeys(e, "embedding", {"weight", "vocab", "scale"})))
    return failure();
  auto wn = require(e, "weight", "embedding");
  auto vn = require(e, "vocab", "embedding");
  if (failed(wn) || failed(vn))
    return failure();
  auto wname = getString(**wn, "weight");
  auto vocab = evalInt(**vn, "vocab");
  if (failed(wname) || failed(vocab))
    return failure();
  Location l = loc(e, *wname);
  auto table = weight(e, *wname, {*vocab, dModel}, WeightRole::Matrix);
  if (failed(table))
    return failure();
  auto x = make<td::EmbeddingOp>(l, {*table, tokens});
  if (failed(x))
    return failure();
  Value h = *x;
  if (const Node *sc = e.get("scale")) {
    auto f = evalNum(*sc, "scale");
    if (failed(f))
      return failure();
    h = *make<td::MulOp>(l, {h, constF(l, f->value)});
  }

  if (const Node *tt = stack.get("token_types")) {
    if (failed(expectMap(*tt, "token_types")) ||
        failed(checkKeys(*tt, "token_types", {"input", "weight", "vocab"})))
      return failure();
    auto ttw = require(*tt, "weight", "token_types");
    auto ttv = require(*tt, "vocab", "token_types");
    if (failed(ttw) || failed(ttv))
      return failure();
    std::string inName = "token_types";
    if (const Node *in = tt->get("input")) {
      auto s = getString(*in, "input");
      if (failed(s))
        return failure();
      inName = *s;
    }
    auto tname = getString(**ttw, "weight");
    auto tv = evalInt(**ttv, "vocab");
    if (failed(tname) || failed(tv))
      return failure();
    auto ttab = weight(*tt, *tname, {*tv, dModel}, WeightRole::Matrix);
    if (failed(ttab))
      return failure();
    Value ids = inputs.at(inName);
    auto te = make<td::EmbeddingOp>(loc(*tt, *tname), {*ttab, ids});
    if (failed(te))
      return failure();
    h = *make<td::AddOp>(loc(*tt, *tname), {h, *te});
  }

  if (const Node *pn = stack.get("positional")) {
    const Node &p = *pn;
    if (failed(expectMap(p, "positional")) ||
        failed(checkKeys(p, "positional",
                         {"kind", "variant", "max_len", "weight", "buffer", "index"})))
      return failure();
    auto kn = require(p, "kind", "positional");
    if (failed(kn))
      return failure();
    auto kind = getChoice(**kn, "positional kind", {"sinusoidal", "learned", "none"});
    if (failed(kind))
      return failure();
    if (*kind != "none") {
      int64_t rows = maxLen;
      if (const Node *m = p.get("max_len")) {
        auto v = evalInt(*m, "max_len");
        if (failed(v))
          return failure();
        rows = *v;
      }
      bool byBatch = false;
      if (const Node *ix = p.get("index")) {
        auto v = getChoice(*ix, "index", {"position", "batch"});
        if (failed(v))
          return failure();
        byBatch = *v == "batch";
      }
      int64_t needed = byBatch ? maxBatch : maxLen;
      if (rows < needed)
        return error(p, "positional table has " + Twine(rows) +
                             " rows but the model accepts " +
                             (byBatch ? "batches" : "sequences") + " up to " +
                             Twine(needed));
      Value tab;
      if (*kind == "learned") {
        auto wn2 = require(p, "weight", "a learned positional encoding");
        if (failed(wn2))
          return failure();
        auto s = getString(**wn2, "weight");
        if (failed(s))
          return failure();
        auto t = weight(p, *s, {rows, dModel}, WeightRole::Matrix);
        if (failed(t))
          return failure();
        tab = *t;
      } else {
        td::PEVariant variant = td::PEVariant::standard;
        if (const Node *vn2 = p.get("variant")) {
          auto v = getChoice(*vn2, "variant", {"standard", "exp2i", "exp2i_cos_next"});
          if (failed(v))
            return failure();
          variant = *td::symbolizePEVariant(*v);
        }
        if (dModel % 2 != 0)
          return error(p, "a sinusoidal table needs an even d_model, got " +
                               Twine(dModel));
        tab = *make<td::SinusoidTableOp>(
            loc(p), {},
            {attr("variant", td::PEVariantAttr::get(&ctx, variant)),
             i64("rows", rows), i64("dim", dModel)});
        if (const Node *buf = p.get("buffer")) {
          // A registered buffer (e.g. 'encoder.pe.pe') may be in the checkpoint;
          // it is recomputed here, so it is accepted and not reported as unused.
          auto s = getString(*buf, "buffer");
          if (failed(s))
            return failure();
          ws.accept(*s);
        }
      }
      Value pos = *make<td::PositionsOp>(loc(p), {tokens},
                                          {i64("axis", byBatch ? 0 : 1)});
      auto pe = make<td::EmbeddingOp>(loc(p), {tab, pos});
      if (failed(pe))
        return failure();
      h = *make<td::AddOp>(loc(p), {h, *pe});
    }
  }

  if (const Node *nn = stack.get("embedding_norm")) {
    auto r = emitNorm(*nn, h, "embedding_norm");
    if (failed(r))
      return failure();
    h = *r;
  }
  return h;
}

FailureOr<Value> Importer::emitStack(const Node &n, StringRef which, StackEnv &env) {
  if (failed(expectMap(n, which)) ||
      failed(checkKeys(n, which,
                       {"input", "embedding", "positional", "token_types",
                        "embedding_norm", "layers", "final_norm"})))
    return failure();
  auto x = emitEmbedding(n, env.tokens);
  if (failed(x))
    return failure();
  Value h = *x;
  if (const Node *ln = n.get("layers")) {
    if (failed(expectMap(*ln, "layers")) ||
        failed(checkKeys(*ln, "layers", {"count", "name", "blocks"})))
      return failure();
    auto cn = require(*ln, "count", "layers");
    auto nn = require(*ln, "name", "layers");
    auto bn = require(*ln, "blocks", "layers");
    if (failed(cn) || failed(nn) || failed(bn))
      return failure();
    auto count = evalInt(**cn, "count", 0);
    auto pattern = getString(**nn, "name");
    if (failed(count) || failed(pattern))
      return failure();
    if (pattern->find("{i}") == std::string::npos)
      return error(**nn, "layer name '" + *pattern +
                              "' must contain '{i}' for the layer index");
    if (!(*bn)->isSeq())
      return error(**bn, "'blocks' must be a list, got " +
                              std::string(kindName(**bn)));
    for (int64_t i = 0; i < *count; ++i) {
      std::string layerName = *pattern;
      layerName.replace(layerName.find("{i}"), 3, std::to_string(i));
      scope = layerName + ".";
      for (const Node &blk : (*bn)->items) {
        auto y = emitBlock(blk, h, env);
        if (failed(y))
          return failure();
        h = *y;
      }
      scope.clear();
    }
  }
  if (const Node *fn = n.get("final_norm")) {
    auto y = emitNorm(*fn, h, "final_norm");
    if (failed(y))
      return failure();
    h = *y;
  }
  return h;
}

FailureOr<Value> Importer::emitOutput(const Node &n, Value x, int64_t vocab,
                                      std::string &outName) {
  if (failed(expectMap(n, "output")) ||
      failed(checkKeys(n, "output", {"linear", "vocab", "log_softmax", "name"})))
    return failure();
  Value y = x;
  outName = "hidden";
  if (const Node *vn = n.get("vocab")) {
    auto v = evalInt(*vn, "vocab");
    if (failed(v))
      return failure();
    vocab = *v;
  }
  if (const Node *ln = n.get("linear")) {
    if (vocab <= 0)
      return error(n, "output needs 'vocab' for its linear layer");
    auto spec = parseLinear(*ln, "linear");
    if (failed(spec))
      return failure();
    auto r = applyLinear(*spec, y, dModel, vocab);
    if (failed(r))
      return failure();
    y = *r;
    outName = "logits";
  }
  if (const Node *ls = n.get("log_softmax")) {
    auto v = getBool(*ls, "log_softmax");
    if (failed(v))
      return failure();
    if (*v) {
      y = *make<td::LogSoftmaxOp>(loc(*ls), {y}, {i64("axis", -1)});
      outName = "log_probs";
    }
  }
  if (const Node *nm = n.get("name")) {
    auto s = getString(*nm, "name");
    if (failed(s))
      return failure();
    outName = *s;
  }
  return y;
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

FailureOr<OwningOpRef<ModuleOp>> Importer::run() {
  if (!root.isMap())
    return error(root, "the model description must be a map, got " +
                            std::string(kindName(root)));
  if (failed(checkKeys(root, "the model description",
                       {"tfc", "name", "description", "params", "weights", "rename",
                        "seed", "encoder", "decoder", "output"})))
    return failure();
  if (const Node *v = root.get("tfc")) {
    if (!v->isScalar() || v->scalar != "1")
      return error(*v, "unsupported model format version '" +
                            (v->isScalar() ? v->scalar : std::string("?")) +
                            "' (this tfc reads version 1)");
  }
  if (failed(loadParams()))
    return failure();

  // Weights: --weights wins over the description's path (relative to the YAML).
  std::string weightsPath = opts.weightsPath;
  const Node *weightsNode = root.get("weights");
  if (weightsPath.empty() && weightsNode) {
    auto s = getString(*weightsNode, "weights");
    if (failed(s))
      return failure();
    SmallString<256> p(llvm::sys::path::parent_path(file));
    llvm::sys::path::append(p, *s);
    weightsPath = llvm::sys::path::is_absolute(*s) ? *s : std::string(p.str());
  }
  if (const Node *rn = root.get("rename")) {
    if (failed(expectMap(*rn, "rename")))
      return failure();
    for (const auto &e : rn->entries) {
      auto to = getString(e.second, e.first.scalar);
      if (failed(to))
        return failure();
      ws.addRename(e.first.scalar, *to);
    }
  }
  uint64_t seed = 0;
  if (const Node *sn = root.get("seed")) {
    auto v = evalInt(*sn, "seed", 0);
    if (failed(v))
      return failure();
    seed = (uint64_t)*v;
  }
  if (opts.seed)
    seed = *opts.seed;
  ws.setSeed(seed);
  if (!weightsPath.empty()) {
    std::string err;
    if (!ws.openCheckpoint(weightsPath, err)) {
      const Node &at = weightsNode && opts.weightsPath.empty() ? *weightsNode : root;
      return error(at, "cannot read weights '" + weightsPath + "': " + err);
    }
  }

  const Node *enc = root.get("encoder");
  const Node *dec = root.get("decoder");
  if (!enc && !dec)
    return error(root, "the model needs an 'encoder', a 'decoder', or both");
  bool encDec = enc && dec;

  // Inputs: token ids [batch, seq] with symbolic dims.
  auto module = ModuleOp::create(fileLoc(root));
  b.setInsertionPointToEnd(module.getBody());
  auto idsType = RankedTensorType::get({kDyn, kDyn}, b.getI64Type());
  std::vector<std::pair<std::string, std::string>> inputList; // name, seq dim
  auto stackInput = [&](const Node *stack, const char *dflt) -> FailureOr<std::string> {
    if (!stack->isMap())
      return std::string(dflt); // reported by emitStack
    if (const Node *in = stack->get("input"))
      return getString(*in, "input");
    return std::string(dflt);
  };
  std::string encIn, decIn;
  if (enc) {
    auto s = stackInput(enc, encDec ? "src" : "tokens");
    if (failed(s))
      return failure();
    encIn = *s;
    inputList.push_back({encIn, encDec ? "src_len" : "seq_len"});
  }
  if (dec) {
    auto s = stackInput(dec, encDec ? "tgt" : "tokens");
    if (failed(s))
      return failure();
    decIn = *s;
    inputList.push_back({decIn, encDec ? "tgt_len" : "seq_len"});
  }
  for (auto [stack, dim] : {std::pair<const Node *, std::string>{enc, inputList.front().second},
                             {dec, inputList.back().second}})
    if (stack && stack->isMap())
      if (const Node *tt = stack->get("token_types")) {
        std::string nm = "token_types";
        if (tt->isMap())
          if (const Node *in = tt->get("input"))
            if (in->isScalar())
              nm = in->scalar;
        inputList.push_back({nm, dim});
      }
  {
    std::set<std::string> seen;
    for (const auto &in : inputList)
      if (!seen.insert(in.first).second)
        return error(dec ? *dec : root, "two model inputs are both named '" + in.first +
                                            "'; give each stack its own 'input'");
  }

  SmallVector<Type> argTypes(inputList.size(), idsType);
  auto func = b.create<func::FuncOp>(fileLoc(root), "forward",
                                     b.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  for (size_t i = 0; i < inputList.size(); ++i) {
    inputs[inputList[i].first] = entry->getArgument(i);
    func.setArgAttr(i, "tfc.name", b.getStringAttr(inputList[i].first));
    func.setArgAttr(i, "tfc.dims",
                    b.getStrArrayAttr({"batch", inputList[i].second}));
  }
  SmallVector<NamedAttribute> dimMax{b.getNamedAttr("batch", b.getI64IntegerAttr(maxBatch))};
  for (const auto &in : inputList)
    if (!llvm::any_of(dimMax, [&](NamedAttribute a) { return a.getName() == in.second; }))
      dimMax.push_back(b.getNamedAttr(in.second, b.getI64IntegerAttr(maxLen)));
  func->setAttr("tfc.dim_max", b.getDictionaryAttr(dimMax));
  b.setInsertionPointToStart(entry);

  Value out;
  StackEnv encEnv{"encoder", enc ? inputs[encIn] : Value(), {}, {}};
  if (enc) {
    auto y = emitStack(*enc, "encoder", encEnv);
    if (failed(y))
      return failure();
    out = *y;
  }
  if (dec) {
    StackEnv decEnv{"decoder", inputs[decIn], enc ? out : Value(),
                    enc ? inputs[encIn] : Value()};
    auto y = emitStack(*dec, "decoder", decEnv);
    if (failed(y))
      return failure();
    out = *y;
  }
  std::string outName = "hidden";
  if (const Node *on = root.get("output")) {
    int64_t vocab = -1;
    for (const char *p : {"tgt_vocab", "vocab"})
      if (vocab < 0 && paramNodes.count(p)) {
        auto v = paramInt(p, *on);
        if (failed(v))
          return failure();
        vocab = *v;
      }
    auto y = emitOutput(*on, out, vocab, outName);
    if (failed(y))
      return failure();
    out = *y;
  }
  b.create<func::ReturnOp>(fileLoc(root), out);
  func.setType(b.getFunctionType(argTypes, {out.getType()}));
  func.setResultAttr(0, "tfc.name", b.getStringAttr(outName));

  // Model-level facts later stages need: the name and the evaluated parameters.
  if (const Node *nm = root.get("name"))
    if (nm->isScalar())
      module->setAttr("tfc.model", b.getStringAttr(nm->scalar));
  SmallVector<NamedAttribute> ps;
  for (const auto &name : paramOrder) {
    const Number &v = paramValues[name];
    ps.push_back(b.getNamedAttr(
        name, v.isInt ? (Attribute)b.getI64IntegerAttr((int64_t)v.value)
                      : (Attribute)b.getF64FloatAttr(v.value)));
  }
  module->setAttr("tfc.params", b.getDictionaryAttr(ps));

  if (failed(verify(module))) {
    module.erase();
    return failure();
  }

  auto unused = ws.unusedCheckpointTensors();
  if (!unused.empty()) {
    const Node &at = weightsNode ? *weightsNode : root;
    std::string list;
    for (size_t i = 0; i < unused.size(); ++i)
      list += (i ? ", " : "") + unused[i];
    emitWarning(fileLoc(at))
        << unused.size() << " weight tensor" << (unused.size() == 1 ? "" : "s")
        << " in '" << ws.checkpointPath() << "' "
        << (unused.size() == 1 ? "is" : "are") << " not used by the model: " << list;
  }
  return OwningOpRef<ModuleOp>(module);
}

} // namespace

FailureOr<ImportedModel> importModel(MLIRContext &ctx, const ImportOptions &opts) {
  auto buf = llvm::MemoryBuffer::getFile(opts.yamlPath, /*IsText=*/true);
  Location fl = FileLineColLoc::get(&ctx, opts.yamlPath, 1, 1);
  if (!buf) {
    emitError(fl) << "cannot read model description: " << buf.getError().message();
    return failure();
  }
  Node root;
  yaml::Error perr;
  if (!yaml::parse((*buf)->getBuffer().str(), root, perr)) {
    emitError(FileLineColLoc::get(&ctx, opts.yamlPath, std::max(perr.line, 1),
                                  std::max(perr.col, 1)))
        << perr.message;
    return failure();
  }
  if (root.isNull()) {
    emitError(fl) << "the model description is empty";
    return failure();
  }
  ImportedModel model;
  model.weights = std::make_unique<WeightStore>();
  Importer imp(ctx, opts, root, *model.weights);
  auto m = imp.run();
  if (failed(m))
    return failure();
  model.module = std::move(*m);
  model.params = imp.evaluatedParams();
  return model;
}

} // namespace tfc
