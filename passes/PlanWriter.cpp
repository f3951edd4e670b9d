//===- PlanWriter.cpp - fused tfc IR to model.bin --------------------------===//
//
// Four steps over each function (@forward, and @encode/@decode_step when
// tfc-derive-generation made them), sharing one weights section (identical
// weight data is stored once) and one table of symbolic dims:
//  1. Symbolic shapes: the function is re-typed with each symbolic dim replaced by
//     a distinct large prime and every op's result type re-inferred; a dim equal to
//     a prime is that symbol, a small one a constant. The same with the declared
//     maximums gives the sizes the arena is planned for.
//  2. Constant evaluation (PlanConstants.cpp): tfc.weight, tfc.constant,
//     tfc.sinusoid_table and transpose/slice/concat of those are computed at
//     compile time, so the weights section holds exactly what the kernels read
//     (packed QKV, transposed Conv1D weights). Every other op runs as the kernel
//     its KernelOpInterface names (ir/TfcInterfaces.td).
//  3. Precision (--precision bf16 / int8): linear weights and embedding tables
//     are stored converted (bf16, or int8 with per-row scales as an extra input),
//     and each activation the kernels can exchange in bf16 is made bf16; see
//     assignActivations.
//  4. Memory plan: every other value gets an arena slot by liveness (best fit,
//     largest first); reshape and unsqueeze are views of their input.
//     `tfc.state` arguments (the KV caches) live in the session state instead,
//     one slot each at the declared maximums.
//  5. Serialization, with an FNV-1a checksum over everything after the header.
//
//===----------------------------------------------------------------------------===//
#include "passes/PlanWriterImpl.h"

#include "ir/TfcDialect.h"
#include "passes/SymbolicShapes.h"
#include "format/arena_plan.h"
#include "tfc/kernel_schema.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

using namespace mlir;
namespace td = mlir::tfc;

namespace tfc {
namespace plan {
namespace {

uint32_t dtypeOf(Type t) {
  Type e = t.cast<RankedTensorType>().getElementType();
  if (e.isInteger(1))
    return TFC_DTYPE_BOOL;
  if (e.isInteger(64))
    return TFC_DTYPE_I64;
  if (e.isInteger(32))
    return TFC_DTYPE_I32;
  return TFC_DTYPE_F32;
}

} // namespace

LogicalResult Writer::inferSymbolicShapes(
    func::FuncOp f, llvm::DenseMap<Value, std::vector<int64_t>> &sym,
    llvm::DenseMap<Value, std::vector<int64_t>> &max) {
  // Inference twice: once with a sentinel per symbol, once with the maximums.
  for (int pass = 0; pass < 2; ++pass) {
    auto dimValue = [&](StringRef name) -> FailureOr<int64_t> {
      auto it = llvm::find(symbolNames, name);
      size_t s = it - symbolNames.begin();
      if (it == symbolNames.end()) {
        auto dm = f->getAttrOfType<DictionaryAttr>("tfc.dim_max");
        auto mx = dm ? dm.getAs<IntegerAttr>(name) : IntegerAttr();
        if (!mx)
          return f.emitError("symbolic dim '") << name << "' has no declared maximum";
        if (s >= std::size(td::kDimSentinels))
          return f.emitError("too many symbolic dims");
        symbolNames.push_back(name.str());
        symbolMax.push_back(mx.getInt());
      }
      return pass == 0 ? td::kDimSentinels[s] : symbolMax[s];
    };
    auto record = [&](Value orig, Value cl) -> LogicalResult {
      auto t = cl.getType().cast<RankedTensorType>();
      std::vector<int64_t> dims(t.getShape().begin(), t.getShape().end());
      if (pass == 1) {
        max[orig] = dims;
        return success();
      }
      for (int64_t &d : dims) {
        if (d < td::kDimSentinels[0])
          continue;
        auto it = llvm::find(td::kDimSentinels, d);
        if (it == std::end(td::kDimSentinels)) {
          if (llvm::any_of(td::kDimSentinels, [&](int64_t p) { return d % p == 0; }))
            return emitError(orig.getLoc(), "a dim depends on a product of symbolic dims, "
                                            "which the plan cannot express");
          // A constant dim as large as the sentinels (symbolic dims stand in
          // for them during inference): a declared size like max_len.
          return emitError(orig.getLoc(), "a dim of ")
                 << d << " is larger than the plan supports (at most "
                 << td::kDimSentinels[0] - 1
                 << " for a dim that is not a symbolic input dim); lower the parameter "
                    "that sets it, such as max_len";
        }
        d = -((it - std::begin(td::kDimSentinels)) + 1);
      }
      sym[orig] = dims;
      return success();
    };
    if (failed(td::reinferWithDims(f, dimValue, record)))
      return failure();
  }
  return success();
}

/// Picks the activations that travel in bf16 (--precision bf16 / int8). A value
/// is bf16 when its producer can write bf16 and every reader can read it, as
/// the kernels' schema says (include/tfc/kernels.def: the CPU's dtype sets,
/// which are the plan's):
/// - writers: kernels whose output may be bf16 (linear, fused_linear,
///   attention, layer_norm, and the dtype-keeping views and slices);
/// - readers: operands that may be bf16 (a linear's input, attention's q/k/v,
///   layer_norm's input, a view's or a slice's input). Operands tied to the
///   first one (attention's k and v, a view's output) are bf16 all together or
///   not at all.
/// One precision policy on top: the residual stream stays f32, so a kernel
/// that adds a residual operand writes f32; so does one that multiplies by a
/// multiplier operand (a gated FFN's product, f32 as the mul it replaces). Everything else stays f32:
/// softmax/log_softmax, elementwise ops, the KV caches and cached_attention,
/// and every function output. Starting from all writers, values that break a
/// rule are cleared until nothing changes.
void Writer::assignActivations(const std::vector<Instr> &plan,
                               const std::vector<uint32_t> &outputs) {
  if (opts.precision == Precision::F32)
    return;
  constexpr uint32_t kBf16 = TFC_DTS(BF16);
  // Each instruction's operand rows, by input position (null: none).
  std::vector<std::vector<const schema::OperandInfo *>> rows(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const Instr &in = plan[i];
    std::vector<uint32_t> dts;
    for (uint32_t v : in.inputs)
      dts.push_back(values[v].dtype);
    for (size_t p = 0; p < in.inputs.size(); ++p)
      rows[i].push_back(
          schema::operandRow(in.kernel, p, in.ints, in.floats, {dts.data(), dts.size()}));
  }
  auto info = [](const Instr &in) { return schema::kernelInfo(in.kernel); };
  auto tiedOut = [&](const Instr &in) { return info(in)->out.flags & TFC_AF_TIED; };
  auto writes = [&](size_t i) {
    if (!(info(plan[i])->out.cpu & kBf16))
      return false;
    for (const schema::OperandInfo *row : rows[i])
      if (row && (std::string(row->name) == "residual" || std::string(row->name) == "multiplier"))
        return false; // the residual stream stays f32, and so does a gated FFN's
                      // product, as the elementwise mul it replaces wrote it
    return true;
  };
  auto reads = [&](size_t i, size_t p) { return rows[i][p] && rows[i][p]->cpu & kBf16; };
  std::vector<char> bf(values.size(), 0);
  for (size_t i = 0; i < plan.size(); ++i)
    if (writes(i) && values[plan[i].output].dtype == TFC_DTYPE_F32)
      bf[plan[i].output] = 1;
  for (uint32_t o : outputs)
    bf[o] = 0;
  bool changed = true;
  auto clear = [&](uint32_t v) {
    if (bf[v]) {
      bf[v] = 0;
      changed = true;
    }
  };
  while (changed) {
    changed = false;
    for (size_t i = 0; i < plan.size(); ++i) {
      const Instr &in = plan[i];
      for (size_t p = 0; p < in.inputs.size(); ++p)
        if (bf[in.inputs[p]] && !reads(i, p))
          clear(in.inputs[p]);
      if (in.inputs.empty())
        continue;
      // Tied operands (and a tied output) have the first operand's dtype.
      bool all = bf[in.inputs[0]];
      for (size_t p = 1; p < in.inputs.size(); ++p)
        if (rows[i][p] && rows[i][p]->flags & TFC_AF_TIED)
          all = all && bf[in.inputs[p]];
      if (tiedOut(in))
        all = all && bf[in.output];
      if (!all) {
        clear(in.inputs[0]);
        for (size_t p = 1; p < in.inputs.size(); ++p)
          if (rows[i][p] && rows[i][p]->flags & TFC_AF_TIED)
            clear(in.inputs[p]);
        if (tiedOut(in))
          clear(in.output);
      }
    }
  }
  for (size_t v = 0; v < values.size(); ++v)
    if (bf[v])
      values[v].dtype = TFC_DTYPE_BF16;
}

/// "27.6 KB", "96 B": the --report units (1 KB = 1000 bytes, as tfrun --bench).
static std::string humanBytes(double b) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string Writer::arenaFormula(const std::vector<uint32_t> &order,
                                 const std::vector<format::ArenaItem> &items,
                                 int64_t steps) const {
  // The busiest instruction at the declared maxima.
  int64_t busiest = 0;
  format::peakLiveBytes(items, steps, busiest);
  // Its live values, term by term: bytes per product of symbols.
  std::map<std::vector<int64_t>, uint64_t> terms;
  for (size_t k = 0; k < order.size(); ++k) {
    const uint32_t v = order[k];
    if (items[k].from > busiest || busiest > items[k].to)
      continue;
    uint64_t elems = 1;
    std::vector<int64_t> syms;
    for (int64_t d : values[v].dims)
      if (d < 0)
        syms.push_back(-(d + 1));
      else
        elems *= (uint64_t)d;
    llvm::sort(syms);
    terms[syms] += tfc_dtype_bytes(values[v].dtype, elems);
  }
  std::vector<std::pair<std::vector<int64_t>, uint64_t>> sorted(terms.begin(), terms.end());
  llvm::stable_sort(sorted, [](const auto &a, const auto &b) {
    return a.first.size() != b.first.size() ? a.first.size() < b.first.size()
                                            : a.second > b.second;
  });
  std::string text;
  for (const auto &[syms, coef] : sorted) {
    text += (text.empty() ? "" : " + ") + humanBytes((double)coef);
    for (size_t i = 0; i < syms.size();) {
      size_t j = i;
      while (j < syms.size() && syms[j] == syms[i])
        ++j;
      text += " × " + symbolNames[syms[i]];
      if (j - i > 1)
        text += "^" + std::to_string(j - i);
      i = j;
    }
  }
  return text.empty() ? "0 B" : text;
}

LogicalResult Writer::planFunction(func::FuncOp f, PlanStats *stats) {
  constants.clear();
  ids.clear();
  values.clear();
  llvm::DenseMap<Value, std::vector<int64_t>> sym, maxShapes;
  if (failed(inferSymbolicShapes(f, sym, maxShapes)))
    return failure();

  // Inputs, and the state (KV cache) arguments.
  uint32_t numInputs = 0;
  for (auto [i, arg] : llvm::enumerate(f.getArguments())) {
    ValueInfo info;
    info.dtype = dtypeOf(arg.getType());
    info.dims = sym[arg];
    info.maxDims = maxShapes[arg];
    if (f.getArgAttr(i, "tfc.state")) {
      auto nm = f.getArgAttrOfType<StringAttr>(i, "tfc.name");
      uint64_t elems = 1;
      for (int64_t d : info.maxDims)
        elems *= (uint64_t)d;
      const uint64_t bytes = tfc_dtype_bytes(info.dtype, elems);
      info.storage = TFC_STORAGE_STATE;
      info.offset = stateSize;
      stateSize += (bytes + 63) / 64 * 64;
      // [rows, positions, width]: what one row and position take.
      if (info.maxDims.size() == 3)
        stateBytesPerRowPosition += tfc_dtype_bytes(info.dtype, (uint64_t)info.maxDims[2]);
      stateNames.push_back(nm ? nm.str() : "state");
    } else {
      info.storage = TFC_STORAGE_INPUT;
      info.offset = numInputs++;
    }
    ids[arg] = values.size();
    values.push_back(info);
  }

  // Constants first (they only depend on each other), then the plan.
  reducedWeights.clear();
  std::vector<Instr> plan;
  auto isConstSource = [](Operation *op) {
    return isa<td::WeightOp, td::ConstantOp, td::SinusoidTableOp>(op);
  };
  Block &body = f.getBody().front();
  for (Operation &op : body.without_terminator()) {
    bool allConst = op.getNumOperands() > 0 &&
                    llvm::all_of(op.getOperands(), [&](Value v) { return constants.count(v); });
    if (isConstSource(&op) || (allConst && isa<td::TransposeOp, td::SliceOp, td::ConcatOp>(op))) {
      if (failed(evaluateConstant(&op)))
        return failure();
    }
  }
  for (Operation &op : body.without_terminator()) {
    Value r = op.getResult(0);
    if (constants.count(r))
      continue;
    auto kernelOp = dyn_cast<td::KernelOpInterface>(op);
    if (!kernelOp)
      return op.emitError("no runtime kernel for '") << op.getName() << "'";
    Instr in;
    in.kernel = kernelOp.getKernelId();
    kernelOp.appendKernelAttributes(in.ints, in.floats);
    // Constants something non-constant reads become weights (in the precision
    // --precision asks for; an i8 weight's descriptor names its scales).
    for (auto [i, v] : llvm::enumerate(op.getOperands()))
      in.inputs.push_back(constants.count(v) ? weightOperand(&op, i, v) : ids.lookup(v));
    ValueInfo info;
    info.dtype = dtypeOf(r.getType());
    info.dims = sym[r];
    info.maxDims = maxShapes[r];
    bool view = isa<td::ReshapeOp, td::UnsqueezeOp>(op);
    info.storage = view ? TFC_STORAGE_VIEW : TFC_STORAGE_ARENA;
    info.offset = view ? in.inputs[0] : 0;
    in.output = values.size();
    ids[r] = in.output;
    values.push_back(info);
    plan.push_back(std::move(in));
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  std::vector<uint32_t> outputIds;
  for (Value result : ret.getOperands()) {
    if (!ids.count(result) || values[ids[result]].storage == TFC_STORAGE_WEIGHT)
      return f.emitError("an output of @") << f.getName() << " is a constant";
    outputIds.push_back(ids[result]);
  }
  assignActivations(plan, outputIds);

  // Liveness over instruction indices; a view keeps its source alive.
  std::vector<int64_t> def(values.size(), -1), last(values.size(), -1);
  auto rootOf = [&](uint32_t v) {
    while (values[v].storage == TFC_STORAGE_VIEW)
      v = (uint32_t)values[v].offset;
    return v;
  };
  for (size_t i = 0; i < plan.size(); ++i) {
    def[plan[i].output] = i;
    for (uint32_t v : plan[i].inputs) {
      uint32_t root = rootOf(v);
      last[root] = std::max<int64_t>(last[root], i);
    }
    last[rootOf(plan[i].output)] = std::max<int64_t>(last[rootOf(plan[i].output)], i);
  }
  for (Value result : ret.getOperands())
    last[rootOf(ids[result])] = plan.size(); // outputs live to the end
  // Arena offsets at the declared maxima (format/arena_plan.h, the runtime's
  // planner too).
  std::vector<uint32_t> order;
  std::vector<format::ArenaItem> items;
  for (uint32_t v = 0; v < values.size(); ++v)
    if (values[v].storage == TFC_STORAGE_ARENA) {
      uint64_t elems = 1, n = 0;
      bool tooLarge = false;
      for (int64_t d : values[v].maxDims)
        tooLarge |= __builtin_mul_overflow(elems, (uint64_t)d, &elems);
      if (tooLarge || !tfc_dtype_bytes_checked(values[v].dtype, elems, &n))
        return f.emitError("a value of @") << f.getName()
               << " is larger than 2^64 bytes at the declared maximum dims";
      order.push_back(v);
      items.push_back({n, def[v] < 0 ? 0 : def[v], std::max<int64_t>(last[v], def[v] < 0 ? 0 : def[v])});
    }
  std::vector<uint64_t> offsets;
  uint64_t arena = 0;
  if (!format::planArena(items, offsets, arena))
    return f.emitError("the arena of @") << f.getName()
           << " is larger than 2^64 bytes at the declared maximum dims";
  for (size_t k = 0; k < order.size(); ++k)
    values[order[k]].offset = offsets[k];

  if (stats && f.getName() == "forward")
    stats->arenaFormula = arenaFormula(order, items, (int64_t)plan.size());

  // This function's records (format/metadata.h).
  format::FunctionRecord &rec = meta.functions.emplace_back();
  rec.name = f.getName().str();
  for (const ValueInfo &v : values)
    rec.values.push_back({v.dtype, v.dims, v.storage, v.offset, v.quant});
  for (auto [i, arg] : llvm::enumerate(f.getArguments())) {
    if (values[ids[arg]].storage != TFC_STORAGE_INPUT)
      continue;
    auto nm = f.getArgAttrOfType<StringAttr>(i, "tfc.name");
    rec.inputs.push_back({nm ? nm.str() : "input" + std::to_string(i), ids[arg]});
  }
  (void)numInputs;
  for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
    auto outName = f.getResultAttrOfType<StringAttr>(i, "tfc.name");
    rec.outputs.push_back({outName ? outName.str() : "output" + std::to_string(i), ids[result]});
  }
  rec.plan = plan;
  rec.arenaSize = arena;

  if (stats) {
    stats->arenaBytes = std::max(stats->arenaBytes, arena);
    if (f.getName() == "forward") {
      for (const Instr &in : plan) {
        if (in.kernel == TFC_KERNEL_RESHAPE || in.kernel == TFC_KERNEL_UNSQUEEZE)
          continue;
        ++stats->kernels;
        char label[24];
        const size_t n = in.inputs.size();
        tfc_instr_precision(in.kernel, n > 0 ? values[in.inputs[0]].dtype : UINT32_MAX,
                            n > 1 ? values[in.inputs[1]].dtype : UINT32_MAX,
                            values[in.output].dtype, label, sizeof label);
        ++stats->precisionCounts[std::string(tfc_kernel_name(in.kernel)) + " " + label];
      }
      for (const ValueInfo &v : values)
        if (v.storage == TFC_STORAGE_ARENA &&
            (v.dtype == TFC_DTYPE_F32 || v.dtype == TFC_DTYPE_BF16)) {
          ++stats->floatActivations;
          stats->bf16Activations += v.dtype == TFC_DTYPE_BF16;
        }
    }
  }
  return success();
}

/// The generation record and the optional inputs of @forward (tfc/abi.h,
/// TFC_INPUT_DEFAULT_*), from the module's attributes.
LogicalResult Writer::writeGeneration(func::FuncOp fwd) {
  // Generation metadata: the target input and the special ids.
  auto gen = module->getAttrOfType<DictionaryAttr>("tfc.generation");
  auto params = module->getAttrOfType<DictionaryAttr>("tfc.params");
  auto param = [&](StringRef n, int64_t dflt) {
    auto a = params ? params.getAs<IntegerAttr>(n) : IntegerAttr();
    return a ? a.getInt() : dflt;
  };
  format::GenerationRecord &g = meta.gen;
  if (gen && module.lookupSymbol("decode_step")) {
    g.present = true;
    g.target = gen.getAs<StringAttr>("target").getValue().str();
    g.bos = param("bos_id", -1);
    g.eos = param("eos_id", -1);
    g.pad = param("pad_id", 0);
    g.maxLen = gen.getAs<IntegerAttr>("max_len").getInt();
    g.forcedBos = param("forced_bos_id", -1);
    g.forcedEos = param("forced_eos_id", -1);
    // The defaults of generation_config.json (docs/model-bin.md).
    g.numBeams = param("num_beams", 1);
    g.maxLength = param("max_length", 0);
    g.minLength = param("min_length", 0);
    g.noRepeatNgram = param("no_repeat_ngram_size", 0);
    // A description without early_stopping stops a beam item at K finished
    // hypotheses (docs/generation.md); the Hugging Face families say 0.
    g.earlyStopping = param("early_stopping", 1);
    g.suppress = param("suppress_id", -1);
    // eos_id_2 .. eos_id_8: more end-of-sequence ids (a list in
    // generation_config.json; -1: none).
    for (int i = 2; i <= 8; ++i)
      if (int64_t e = param(("eos_id_" + std::to_string(i)).c_str(), -1); e >= 0)
        g.moreEos.push_back(e);
    auto fparam = [&](StringRef n, double dflt) {
      if (params)
        if (auto a = params.get(n)) {
          if (auto f = a.dyn_cast<FloatAttr>())
            return f.getValueAsDouble();
          if (auto i = a.dyn_cast<IntegerAttr>())
            return (double)i.getInt();
        }
      return dflt;
    };
    g.lengthPenalty = fparam("length_penalty", 1.0);
    // Sampling defaults (generation_config.json's do_sample, temperature, top_k,
    // top_p; transformers' defaults otherwise).
    g.sample = param("do_sample", 0) != 0;
    g.topK = param("top_k", 0);
    g.temperature = fparam("temperature", 1.0);
    g.topP = fparam("top_p", 1.0);
  }
  // Version 4: the optional inputs of @forward and how each is made when the
  // caller leaves it out (tfc/abi.h, TFC_INPUT_DEFAULT_*).
  {
    std::vector<std::array<int64_t, 4>> defaults; // input, kind, source, value
    auto nameOf = [&](unsigned i) {
      auto n = fwd.getArgAttrOfType<StringAttr>(i, "tfc.name");
      return n ? n.getValue() : StringRef();
    };
    for (unsigned i = 0; i < fwd.getNumArguments(); ++i) {
      auto d = fwd.getArgAttrOfType<DictionaryAttr>(i, "tfc.default");
      if (!d)
        continue;
      StringRef kind = d.getAs<StringAttr>("kind").getValue();
      StringRef source = d.getAs<StringAttr>("source").getValue();
      int64_t src = -1;
      for (unsigned j = 0; j < fwd.getNumArguments(); ++j)
        if (j != i && nameOf(j) == source)
          src = j;
      if (src < 0)
        return fwd.emitError("optional input '") << nameOf(i) << "' is made from '" << source
                                                 << "', which is not an input",
               failure();
      auto pad = d.getAs<IntegerAttr>("pad");
      defaults.push_back({(int64_t)i,
                          kind == "zeros" ? TFC_INPUT_DEFAULT_ZEROS : TFC_INPUT_DEFAULT_NOT_EQUAL,
                          src, pad ? pad.getInt() : 0});
    }
    for (const auto &d : defaults)
      meta.inputDefaults.push_back({(uint32_t)d[0], (uint32_t)d[1], (uint32_t)d[2], d[3]});
  }

  return success();
}

FailureOr<std::string> Writer::run(PlanStats *stats) {
  auto fwd = module.lookupSymbol<func::FuncOp>("forward");
  if (!fwd)
    return module.emitError("the module has no @forward function"), failure();
  std::vector<func::FuncOp> funcs{fwd};
  for (const char *name : {"encode", "decode_step"})
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      funcs.push_back(f);
  if (stats)
    *stats = PlanStats();

  meta = format::Metadata();
  for (func::FuncOp f : funcs)
    if (failed(planFunction(f, stats)))
      return failure();
  meta.stateSize = stateSize;
  if (failed(writeGeneration(fwd)))
    return failure();
  meta.producer = format::producer();
  auto nameAttr = module->getAttrOfType<StringAttr>("tfc.model");
  meta.model = nameAttr ? nameAttr.getValue().str() : "";
  for (size_t s = 0; s < symbolNames.size(); ++s)
    meta.symbols.push_back({symbolNames[s], symbolMax[s]});
  const std::string metaBytes = format::encodeMetadata(meta);

  std::string file = format::assemble(metaBytes, weightsBlob);

  if (stats) {
    stats->weightBytes = weightsBlob.size();
    stats->stateBytes = stateSize;
    stats->stateBytesPerRowPosition = stateBytesPerRowPosition;
    if (stateSize)
      stats->cacheDescription = std::to_string(stateNames.size()) +
                                " buffers of [max_batch, max_len, width] f32";
  }
  return file;
}

} // namespace plan

FailureOr<std::string> writeModelBin(ModuleOp module, const WeightStore &weights,
                                     PlanStats *stats, const PlanOptions &options) {
  return plan::Writer(module, weights, options).run(stats);
}

} // namespace tfc
