//===- ImporterParams.cpp - parameters and expressions --------------------===//
//
// `params:` maps names to numbers or expressions over other parameters (Expr.h);
// --set replaces a parameter's text. Parameters are evaluated lazily and memoized,
// so they may be listed in any order; a cycle is an error naming its path. An
// error inside a parameter's text is reported at that parameter's line (and
// column), wherever the parameter was used from.
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace tfc::detail {

std::map<std::string, double> Importer::evaluatedParams() const {
  std::map<std::string, double> m;
  for (const auto &kv : paramValues)
    m[kv.first] = kv.second.value;
  return m;
}

static std::string quoteNumber(const Number &v);

bool Importer::resolveParam(const std::string &name, Number &out, std::string &err) {
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
  // An integer past int64: one error at the parameter (even one nothing uses,
  // which tfc.params still records), not an undefined cast later. 2^63 itself
  // is what INT64_MAX written out reads as (a double rounds it); the limits
  // of the parameters that are used say more about it.
  if (out.isInt && !(std::fabs(out.value) <= 9223372036854775808.0)) {
    const std::string shown = out.literal.empty() && std::fabs(out.value) >= 1e20
                                  ? llvm::formatv("{0:e}", out.value).str()
                                  : quoteNumber(out);
    const std::string msg =
        "parameter '" + name + "' is " + shown + ", outside the 64-bit integers";
    if (!reportedInner) {
      reportedInner = true;
      (void)error(n, ov != overrideText.end() ? "in --set " + name + "=" + text + ": " + msg
                                               : msg);
    }
    err.clear();
    return false;
  }
  paramValues[name] = out;
  return true;
}

FailureOr<Number> Importer::evalNum(const Node &n, StringRef what) {
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
            // Inside a layer's blocks, `i` is the layer's index (unless a
            // parameter is named so): e.g. Gemma's local and global layers.
            if (nm == "i" && layerIndex >= 0 && !paramNodes.count(nm)) {
              o = Number{(double)layerIndex, true, {}};
              return true;
            }
            return resolveParam(nm, o, e);
          },
          out, err, off)) {
    if (!reportedInner)
      (void)error(n, err, (int)off);
    return failure();
  }
  return out;
}

/// A number as the user wrote it when it was one literal (a double rounds
/// integers past 2^53: 9223372036854775807 would read 9223372036854775808),
/// else its computed value.
static std::string quoteNumber(const Number &v) {
  return !v.literal.empty() ? v.literal : llvm::formatv("{0:F0}", v.value).str();
}

FailureOr<double> Importer::evalSoftcap(const Node &n) {
  const Node *cn = n.get("softcap");
  if (!cn)
    return 0.0;
  auto c = evalNum(*cn, "softcap");
  if (failed(c))
    return failure();
  if (!(c->value >= 0) || !std::isfinite(c->value))
    return error(*cn, "'softcap' must be a finite number, 0 or more");
  return c->value;
}

FailureOr<int64_t> Importer::evalInt(const Node &n, StringRef what, int64_t min) {
  auto v = evalNum(n, what);
  if (failed(v))
    return failure();
  if (!v->isInt || std::floor(v->value) != v->value)
    return error(n, "'" + what + "' must be an integer, got " +
                        llvm::formatv("{0}", v->value).str());
  if (v->value > kMaxInt)
    return error(n, "'" + what + "' must be at most " + Twine((int64_t)kMaxInt) +
                        ", got " + quoteNumber(*v));
  if (v->value < (double)min)
    return error(n, "'" + what + "' must be at least " + Twine(min) + ", got " +
                        Twine((int64_t)v->value));
  return (int64_t)v->value;
}

FailureOr<int64_t> Importer::paramInt(StringRef name, const Node &at, int64_t min) {
  Number v;
  std::string err;
  reportedInner = false;
  if (!resolveParam(name.str(), v, err)) {
    if (!reportedInner)
      (void)error(at, err.empty() ? "bad parameter" : err);
    return failure();
  }
  if (!v.isInt || v.value < min)
    return error(at, "parameter '" + name + "' must be an integer >= " + Twine(min) + ", got " +
                         quoteNumber(v));
  if (v.value > kMaxInt)
    return error(at, "parameter '" + name + "' must be at most " +
                         Twine((int64_t)kMaxInt) + ", got " + quoteNumber(v));
  return (int64_t)v.value;
}

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
  // The special token ids, one rule for all three: an integer id >= 0 (the
  // vocabulary bound is checked where the vocabulary is known, at run time).
  for (const char *id : {"bos_id", "eos_id", "pad_id"})
    if (paramNodes.count(id) && failed(paramInt(id, *paramNodes[id], 0)))
      return failure();
  // transformers' forced_bos_token_id / forced_eos_token_id: an id, or -1 for none.
  for (const char *id : {"forced_bos_id", "forced_eos_id", "suppress_id"})
    if (paramNodes.count(id) && failed(paramInt(id, *paramNodes[id], -1)))
      return failure();
  // The generation defaults transformers' generation_config.json holds
  // (docs/generation.md): integers >= their least value.
  for (auto [id, least] : {std::pair<const char *, int64_t>{"num_beams", 1},
                           {"max_length", 0},
                           {"min_length", 0},
                           {"no_repeat_ngram_size", 0},
                           {"early_stopping", 0}})
    if (paramNodes.count(id) && failed(paramInt(id, *paramNodes[id], least)))
      return failure();
  if (paramNodes.count("early_stopping")) {
    auto v = paramInt("early_stopping", *paramNodes["early_stopping"], 0);
    if (failed(v))
      return failure();
    if (*v > 2)
      return error(*paramNodes["early_stopping"],
                   "early_stopping must be 0 (transformers' False), 1 (True) or 2 (\"never\"), "
                   "got " + std::to_string(*v));
  }
  return success();
}

} // namespace tfc::detail
