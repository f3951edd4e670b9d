//===- Importer.cpp - YAML model description to the tfc dialect -----------===//
//
// The driver: walks the located YAML tree (YamlDoc.h) from the top, declares the
// function's inputs, expands the stacks and the output head, and records the
// model-level attributes. The expansion itself lives by concern in the files
// ImporterInternal.h lists: the schema checks, parameters and expressions, the
// components, the stacks, and the `ops:` table. See docs/model-format.md for the
// format.
//
//===----------------------------------------------------------------------------===//
#include "frontend/Importer.h"
#include "frontend/ImporterInternal.h"
#include "frontend/HfDir.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <map>
#include <set>
#include <tuple>

using namespace mlir;
namespace td = ::mlir::tfc;

namespace tfc {
namespace detail {

//===----------------------------------------------------------------------===//
// Op construction helpers
//===----------------------------------------------------------------------===//

Value Importer::constF(Location l, double v) {
  auto t = RankedTensorType::get({}, b.getF32Type());
  return *make<td::ConstantOp>(
      l, {}, {attr("value", DenseElementsAttr::get(t, (float)v))});
}

Value Importer::constI(Location l, int64_t v) {
  auto t = RankedTensorType::get({}, b.getI64Type());
  return *make<td::ConstantOp>(l, {}, {attr("value", DenseElementsAttr::get(t, v))});
}

FailureOr<Value> Importer::gelu(Location l, Value x, td::GeluApprox approx) {
  return make<td::GeluOp>(
      l, {x}, {attr("approximate", td::GeluApproxAttr::get(&ctx, approx))});
}

FailureOr<Value> Importer::weight(const Node &at, const std::string &name,
                                  std::vector<int64_t> shape, WeightRole role) {
  std::string err;
  if (!ws.declare(name, shape, role, err))
    return error(at, err);
  // NaN or infinite values compile (a model may mean them, e.g. a -inf mask
  // buffer) but are worth one warning per weight; --nonfinite-weights=error
  // makes that an error.
  uint64_t first = 0;
  if (nonFiniteChecked.insert(name).second)
    if (uint64_t bad = ws.countNonFinite(name, first)) {
      std::string msg = "weight '" + name + "' holds " + std::to_string(bad) +
                        " NaN or infinite value" + (bad == 1 ? "" : "s") +
                        " (the first at flat index " + std::to_string(first) + ")";
      if (opts.nonFiniteWeightsError) {
        if (!errored)
          emitError(loc(at)) << msg << " [--nonfinite-weights=error]";
        errored = true;
        return failure();
      }
      emitWarning(loc(at)) << msg;
    }
  auto t = RankedTensorType::get(shape, b.getF32Type());
  return make<td::WeightOp>(loc(at), {},
                            {attr("name", b.getStringAttr(name)),
                             attr("type", TypeAttr::get(t))});
}

//===----------------------------------------------------------------------===//
// The model
//===----------------------------------------------------------------------===//

FailureOr<OwningOpRef<ModuleOp>> Importer::run() {
  if (failed(checkDocument()) || failed(loadParams()))
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
  // Owned from here on: every error return below erases the half-built module
  // (a raw ModuleOp leaked it; found by tests/fuzz/fuzz_yaml).
  OwningOpRef<ModuleOp> owned = ModuleOp::create(fileLoc(root));
  ModuleOp module = owned.get();
  b.setInsertionPointToEnd(module.getBody());
  auto idsType = RankedTensorType::get({kDyn, kDyn}, b.getI64Type());
  std::vector<std::pair<std::string, std::string>> inputList; // name, seq dim
  // Optional inputs (docs/model-format.md, "Optional inputs"): name -> (kind,
  // the stack input it is made from). Kinds: "zeros", "not_pad" (the stack
  // input != pad_id, an attention_mask).
  std::map<std::string, std::pair<std::string, std::string>> defaults;
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
        if (tt->isMap()) {
          if (const Node *in = tt->get("input"))
            if (in->isScalar())
              nm = in->scalar;
          if (const Node *opt = tt->get("optional")) {
            auto v = getBool(*opt, "optional");
            if (failed(v))
              return failure();
            if (*v)
              defaults[nm] = {"zeros", stack == enc ? encIn : decIn};
          }
        }
        inputList.push_back({nm, dim});
      }
  // `attention_mask: NAME`: an input of 1s and 0s (transformers' attention_mask)
  // that the stack's padding masks read instead of comparing tokens with pad_id.
  std::string encMask, decMask;
  for (auto [stack, dim, name] :
       {std::tuple<const Node *, std::string, std::string *>{enc, inputList.front().second, &encMask},
        {dec, inputList.back().second, &decMask}})
    if (stack && stack->isMap())
      if (const Node *am = stack->get("attention_mask")) {
        // `attention_mask: NAME`, or `{input: NAME, optional: true}`: when the
        // caller leaves it out, it is the stack's tokens != pad_id.
        const Node *nameNode = am;
        bool optional = false;
        if (am->isMap()) {
          if (failed(checkKeys(*am, "attention_mask", {"input", "optional"})))
            return failure();
          auto in = require(*am, "input", "attention_mask");
          if (failed(in))
            return failure();
          nameNode = *in;
          if (const Node *opt = am->get("optional")) {
            auto v = getBool(*opt, "optional");
            if (failed(v))
              return failure();
            optional = *v;
          }
        }
        auto s = getString(*nameNode, "attention_mask");
        if (failed(s))
          return failure();
        if (optional && !paramNodes.count("pad_id"))
          return error(*am, "an optional attention_mask is made from pad_id; the params "
                            "need a 'pad_id'");
        *name = *s;
        inputList.push_back({*s, dim});
        if (optional)
          defaults[*s] = {"not_pad", stack == enc ? encIn : decIn};
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
    if (auto d = defaults.find(inputList[i].first); d != defaults.end()) {
      SmallVector<NamedAttribute> fields{
          b.getNamedAttr("kind", b.getStringAttr(d->second.first)),
          b.getNamedAttr("source", b.getStringAttr(d->second.second))};
      if (d->second.first == "not_pad") {
        auto pad = paramInt("pad_id", *paramNodes["pad_id"], 0);
        if (failed(pad))
          return failure();
        fields.push_back(b.getNamedAttr("pad", b.getI64IntegerAttr(*pad)));
      }
      func.setArgAttr(i, "tfc.default", b.getDictionaryAttr(fields));
    }
  }
  SmallVector<NamedAttribute> dimMax{b.getNamedAttr("batch", b.getI64IntegerAttr(maxBatch))};
  for (const auto &in : inputList)
    if (!llvm::any_of(dimMax, [&](NamedAttribute a) { return a.getName() == in.second; }))
      dimMax.push_back(b.getNamedAttr(in.second, b.getI64IntegerAttr(maxLen)));
  func->setAttr("tfc.dim_max", b.getDictionaryAttr(dimMax));
  b.setInsertionPointToStart(entry);

  Value out;
  StackEnv encEnv{"encoder", enc ? inputs[encIn] : Value(), {}, {},
                  encMask.empty() ? Value() : inputs[encMask], {}};
  if (enc) {
    auto y = emitStack(*enc, "encoder", encEnv);
    if (failed(y))
      return failure();
    out = *y;
  }
  if (dec) {
    StackEnv decEnv{"decoder", inputs[decIn], enc ? out : Value(),
                    enc ? inputs[encIn] : Value(),
                    decMask.empty() ? Value() : inputs[decMask], encEnv.mask};
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
    // An integer an i64 holds as one (loadParams refused larger ones; 2^63,
    // INT64_MAX as a double, is recorded as a float).
    const bool asInt = v.isInt && std::fabs(v.value) < 9223372036854775808.0;
    ps.push_back(b.getNamedAttr(name, asInt ? (Attribute)b.getI64IntegerAttr((int64_t)v.value)
                                            : (Attribute)b.getF64FloatAttr(v.value)));
  }
  module->setAttr("tfc.params", b.getDictionaryAttr(ps));

  if (failed(verify(module)))
    return failure();

  auto unused = ws.unusedCheckpointTensors();
  if (!unused.empty()) {
    const Node &at = weightsNode ? *weightsNode : root;
    // Many (an image-text checkpoint's vision tower): counted by their first two
    // name components, so the warning stays one readable line.
    std::string list;
    if (unused.size() <= 12) {
      for (size_t i = 0; i < unused.size(); ++i)
        list += (i ? ", " : "") + unused[i];
    } else {
      std::map<std::string, size_t> groups;
      for (const std::string &n : unused) {
        size_t dot = n.find('.');
        dot = dot == std::string::npos ? dot : n.find('.', dot + 1);
        ++groups[dot == std::string::npos ? n : n.substr(0, dot) + ".*"];
      }
      for (const auto &[g, count] : groups)
        list += (list.empty() ? "" : ", ") + g +
                (count > 1 ? " (" + std::to_string(count) + ")" : "");
    }
    emitWarning(fileLoc(at))
        << unused.size() << " weight tensor" << (unused.size() == 1 ? "" : "s")
        << " in '" << ws.checkpointPath() << "' "
        << (unused.size() == 1 ? "is" : "are") << " not used by the model: " << list;
  }
  return std::move(owned);
}

} // namespace detail

FailureOr<ImportedModel> importModel(MLIRContext &ctx, const ImportOptions &optsIn) {
  ImportOptions opts = optsIn;
  std::string text, generated;
  Location fl = FileLineColLoc::get(&ctx, opts.yamlPath, 1, 1);
  if (llvm::sys::fs::is_directory(opts.yamlPath)) {
    // A Hugging Face model directory: its description is generated from the
    // bundled family and config.json; its lines are those `tfc import` writes.
    hf::DirModel dm;
    hf::DirError de;
    if (!hf::describeDirectory(opts.yamlPath, dm, de, opts.hfHead)) {
      if (de.line > 0)
        emitError(FileLineColLoc::get(&ctx, de.file, de.line, de.col)) << de.message;
      else
        emitError(UnknownLoc::get(&ctx)) << de.file << ": " << de.message;
      return failure();
    }
    generated = text = dm.yamlText;
    opts.yamlPath = dm.configPath + " (tfc import)";
    fl = FileLineColLoc::get(&ctx, opts.yamlPath, 1, 1);
  } else {
    auto buf = llvm::MemoryBuffer::getFile(opts.yamlPath, /*IsText=*/true);
    if (!buf) {
      emitError(fl) << "cannot read model description: " << buf.getError().message();
      return failure();
    }
    text = (*buf)->getBuffer().str();
  }
  yaml::Node root;
  yaml::Error perr;
  if (!yaml::parse(text, root, perr)) {
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
  detail::Importer imp(ctx, opts, root, *model.weights);
  auto m = imp.run();
  if (failed(m))
    return failure();
  model.module = std::move(*m);
  model.params = imp.evaluatedParams();
  model.generatedYaml = std::move(generated);
  return model;
}

} // namespace tfc
