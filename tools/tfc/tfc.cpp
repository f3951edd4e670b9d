//===- tfc.cpp - the tfc compiler driver ----------------------------------===//
//
// `tfc compile model.yaml [-o OUT] [--emit=...]`: runs the frontend, then the pass
// pipeline selected by --emit, and writes the result. The driver is thin: the
// work lives in frontend/ and passes/. Diagnostics are printed one per line as
// `file:line:col: error: message`, pointing at the user's YAML.
//
//===----------------------------------------------------------------------------===//
#include "frontend/HfDir.h"
#include "frontend/Importer.h"
#include "ir/TfcDialect.h"
#include "passes/Passes.h"
#include "passes/PlanWriter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unistd.h>

using namespace mlir;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory tfcCategory("tfc compile options");


cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.yaml | model directory>"),
                               cl::Required, cl::cat(tfcCategory));
cl::opt<std::string> outputFile("o", cl::desc("Write the output to <file> (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(tfcCategory));

enum class Emit { MlirImport, Mlir, Bin };
cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"), cl::init(Emit::Mlir),
    cl::values(clEnumValN(Emit::MlirImport, "mlir-import",
                          "the tfc IR straight from the frontend, before any pass"),
               clEnumValN(Emit::Mlir, "mlir",
                          "the tfc IR after the pass pipeline (fusion, canonicalize, CSE)"),
               clEnumValN(Emit::Bin, "bin",
                          "model.bin: plan + weights for the runtime (the default when "
                          "-o ends in .bin)")),
    cl::cat(tfcCategory));

cl::list<std::string> setParams(
    "set", cl::desc("Override a model parameter (repeatable), e.g. --set d_model=64"),
    cl::value_desc("NAME=VALUE"), cl::cat(tfcCategory));
cl::opt<std::string> weightsFile(
    "weights", cl::desc("Read weights from this safetensors file (overrides 'weights:' "
                        "in the YAML)"),
    cl::value_desc("file.safetensors"), cl::cat(tfcCategory));
cl::opt<bool> noFusion(
    "no-fusion", cl::desc("Skip the fusion passes (an unfused model, for fused-vs-unfused checks)"),
    cl::cat(tfcCategory));
cl::opt<bool> noGeneration(
    "no-generation",
    cl::desc("Don't derive the generation entry points (@encode, @decode_step); "
             "--no-fusion implies it"),
    cl::cat(tfcCategory));
cl::opt<bool> report(
    "report", cl::desc("Print, layer by layer, what fused into what, and why any "
                       "attention-like softmax did not fuse"),
    cl::cat(tfcCategory));
cl::opt<bool> requireFusion(
    "require-fusion",
    cl::desc("Make any softmax left outside a tfc.attention an error (an output "
             "log_softmax is not a softmax)"),
    cl::cat(tfcCategory));
cl::opt<::tfc::Precision> precision(
    "precision", cl::desc("Precision of the plan's weights and activations (model.bin only)"),
    cl::init(::tfc::Precision::F32),
    cl::values(clEnumValN(::tfc::Precision::F32, "f32", "everything in f32 (the default)"),
               clEnumValN(::tfc::Precision::BF16, "bf16",
                          "bf16 linear weights, embedding tables and activations between "
                          "the linear, attention and norm kernels; f32 accumulation"),
               clEnumValN(::tfc::Precision::Int8, "int8",
                          "int8 linear weights and embedding tables (symmetric, per "
                          "output channel / row), activations as for bf16, linear "
                          "inputs quantized per row at run time"),
               clEnumValN(::tfc::Precision::Int4, "int4",
                          "int4 linear weights with a scale per group of --group-size "
                          "inputs; the lm_head and embedding tables int8 (docs/precision.md)")),
    cl::cat(tfcCategory));
cl::opt<int64_t> groupSize(
    "group-size",
    cl::desc("--precision int4 | int8: the inputs that share a scale along a weight's row, "
             "a multiple of 32 (default 32; 128 makes smaller files). int8: 0 is one scale per "
             "row, the default of models that are not decoder-only (docs/precision.md)"),
    cl::init(32), cl::cat(tfcCategory));
cl::opt<int64_t> activationBits(
    "activation-bits",
    cl::desc("--precision int8 with groups of scales (decoder-only models, or --group-size): "
             "the bits each block of 32 linear inputs is quantized to at run time, 16 (the "
             "default: closer to f32) or 8 (llama.cpp Q8_0's arithmetic: faster prefill on "
             "CPUs with AVX512_VNNI; docs/precision.md)"),
    cl::init(16), cl::cat(tfcCategory));
cl::opt<std::string> headOpt(
    "head",
    cl::desc("A Hugging Face directory's output head (docs/hf.md): for BERT "
             "last_hidden_state, pooler, classifier, mean_pooling, sentence_embedding or "
             "cls_pooling; default: picked from the directory"),
    cl::value_desc("name"), cl::init(""));

enum class NonFiniteWeights { Warn, Error };
cl::opt<NonFiniteWeights> nonFiniteWeights(
    "nonfinite-weights",
    cl::desc("What a weight holding NaN or infinite values is: warn or error (docs/generation.md, \"Non-finite logits\")"),
    cl::init(NonFiniteWeights::Warn),
    cl::values(clEnumValN(NonFiniteWeights::Warn, "warn",
                          "one warning per weight, and the compile goes on (the default)"),
               clEnumValN(NonFiniteWeights::Error, "error",
                          "an error at the weight's use; nothing is written")),
    cl::cat(tfcCategory));

cl::opt<long long> seedOpt(
    "seed", cl::desc("Seed for the Xavier-uniform initialisation used without weights"),
    cl::init(-1), cl::cat(tfcCategory));

/// Finds the YAML position inside a location (NameLoc / FusedLoc / CallSiteLoc).
std::optional<FileLineColLoc> findFileLoc(Location loc) {
  if (auto f = loc.dyn_cast<FileLineColLoc>())
    return f;
  if (auto n = loc.dyn_cast<NameLoc>())
    return findFileLoc(n.getChildLoc());
  if (auto c = loc.dyn_cast<CallSiteLoc>())
    return findFileLoc(c.getCallee());
  if (auto fu = loc.dyn_cast<FusedLoc>())
    for (Location l : fu.getLocations())
      if (auto r = findFileLoc(l))
        return r;
  return std::nullopt;
}

/// Prints `file:line:col: severity: message`, one line per diagnostic, as
/// compilers do; notes follow on their own lines.
LogicalResult printDiagnostic(Diagnostic &diag) {
  auto &os = llvm::errs();
  if (auto fl = findFileLoc(diag.getLocation()))
    os << fl->getFilename().getValue() << ":" << fl->getLine() << ":"
       << fl->getColumn() << ": ";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  }
  os << diag.str() << "\n";
  for (Diagnostic &note : diag.getNotes())
    (void)printDiagnostic(note);
  return success();
}

/// Writes |text| to |path| through a temporary file and a rename, so a failure
/// never leaves a half-written output behind.
LogicalResult writeAtomically(StringRef path, StringRef text) {
  if (path == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    return success();
  }
  llvm::SmallString<256> tmp;
  int fd;
  std::string model = (path + ".tmp-%%%%%%").str();
  if (auto ec = llvm::sys::fs::createUniqueFile(model, fd, tmp)) {
    llvm::errs() << "error: cannot write '" << path << "': " << ec.message() << "\n";
    return failure();
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
    os.close();
    if (os.has_error()) {
      llvm::errs() << "error: cannot write '" << path << "': " << os.error().message()
                   << "\n";
      llvm::sys::fs::remove(tmp);
      return failure();
    }
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::errs() << "error: cannot write '" << path << "': " << ec.message() << "\n";
    llvm::sys::fs::remove(tmp);
    return failure();
  }
  return success();
}

/// The layer an op belongs to: the NameLoc the frontend put on it.
std::string layerOf(Operation *op) {
  if (auto n = op->getLoc().dyn_cast<NameLoc>())
    return n.getName().str();
  return "(model)";
}

std::string where(Operation *op) {
  if (auto fl = findFileLoc(op->getLoc()))
    return (fl->getFilename().getValue() + ":" + Twine(fl->getLine()) + ":" +
            Twine(fl->getColumn()))
        .str();
  return "?";
}

/// Why a softmax is still a softmax: the failed match step, or, when the chain
/// would fuse, that fusion was switched off.
std::string whyNotFused(mlir::tfc::SoftmaxOp sm) {
  std::string why = mlir::tfc::explainAttentionMismatch(sm);
  return why.empty() ? "it would fuse, but fusion is disabled (--no-fusion)" : why;
}

/// `--report`: fused ops per layer, and every softmax that is still a softmax.
void printReport(ModuleOp module) {
  auto &os = llvm::outs();
  os << "== tfc fusion report ==\n";
  std::vector<std::pair<std::string, std::map<std::string, int>>> layers;
  auto bump = [&](const std::string &layer, const std::string &what) {
    if (layers.empty() || layers.back().first != layer)
      layers.push_back({layer, {}});
    layers.back().second[what]++;
  };
  int attention = 0, norms = 0, leftover = 0, causal = 0;
  // The fusion report describes @forward; the derived entry points reuse its ops.
  Operation *scope = module;
  if (auto fwd = module.lookupSymbol<func::FuncOp>("forward"))
    scope = fwd;
  scope->walk([&](Operation *op) {
    if (auto a = dyn_cast<mlir::tfc::AttentionOp>(op)) {
      ++attention;
      causal += a.getMaskKind() == mlir::tfc::MaskKind::causal ||
                a.getMaskKind() == mlir::tfc::MaskKind::padding_causal;
      bump(layerOf(op), ("attention(" + mlir::tfc::stringifyMaskKind(a.getMaskKind()) +
                         ", heads=" + Twine((int64_t)a.getNumHeads()) +
                         (a.getPositionBias() ? ", relative bias" : "") + ")")
                            .str());
    } else if (auto n = dyn_cast<mlir::tfc::LayerNormOp>(op)) {
      ++norms;
      bump(layerOf(op), ("layer_norm(" + mlir::tfc::stringifyNormVariant(n.getVariant()) + ")")
                            .str());
    }
  });
  for (auto &[layer, counts] : layers) {
    os << "  " << layer << ":";
    for (auto &[what, n] : counts)
      os << " " << what << (n > 1 ? " x" + std::to_string(n) : "");
    os << "\n";
  }
  scope->walk([&](mlir::tfc::SoftmaxOp sm) {
    ++leftover;
    os << "  not fused: softmax at " << where(sm) << " (" << layerOf(sm)
       << "): " << whyNotFused(sm) << "\n";
  });
  os << "  total: " << attention << " tfc.attention, " << norms
     << " tfc.layer_norm, " << leftover << " softmax left\n";
  if (auto dec = module.lookupSymbol<func::FuncOp>("decode_step")) {
    int cached = 0;
    dec.walk([&](mlir::tfc::CachedAttentionOp) { ++cached; });
    os << "  generation: " << (module.lookupSymbol("encode") ? "encode + " : "")
       << "decode_step, " << cached << " self-attention KV caches\n";
  } else if (noFusion || noGeneration) {
    os << "  generation: off (" << (noFusion ? "--no-fusion" : "--no-generation") << ")\n";
  } else if (causal > 0) {
    os << "  generation: none (see the warning)\n";
  }
  // An encoder-only model (no causal self-attention) has nothing to generate
  // with, and the report does not bring generation up.
}

/// `--require-fusion`: any remaining softmax over [batch, heads, q, k] scores is
/// an attention that did not fuse.
LogicalResult checkFusion(ModuleOp module) {
  LogicalResult result = success();
  module.walk([&](mlir::tfc::SoftmaxOp sm) {
    sm.emitError() << "attention did not fuse: " << whyNotFused(sm);
    result = failure();
  });
  return result;
}

/// `tfc import DIR`: only write the description (set by main).
bool importOnly = false;

/// Declared maxima whose arena or KV cache this machine could never hold: a
/// warning at compile time. The runtime plans each run for its actual sizes,
/// so smaller runs are unaffected, and a run that large fails with
/// TFRUN_OUT_OF_MEMORY rather than a crash.
void warnUnallocatable(ModuleOp module, const ::tfc::PlanStats &stats) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0)
    return;
  const uint64_t memory = (uint64_t)pages * (uint64_t)page;
  if (stats.arenaBytes <= memory && stats.stateBytes <= memory)
    return;
  auto d = emitWarning(module.getLoc(), "at the declared maxima, the arena takes ")
           << stats.arenaBytes << " bytes";
  if (stats.stateBytes)
    d << " and the KV cache " << stats.stateBytes << " bytes";
  d << ", more than this machine's " << memory
    << " bytes of memory: runs that large will fail with 'cannot allocate' (smaller runs "
       "take what their sizes need; lower max_batch or max_len to bound it)";
}

int runCompile() {
  DialectRegistry registry;
  registry.insert<mlir::tfc::TfcDialect, func::FuncDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // One diagnostic, one line: don't append the failing op's text as a note.
  ctx.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&ctx, printDiagnostic);

  ::tfc::ImportOptions opts;
  opts.yamlPath = inputFile;
  for (const std::string &s : setParams) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
      llvm::errs() << "error: --set expects NAME=VALUE, got '" << s << "'\n";
      return 1;
    }
    opts.overrides.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  opts.weightsPath = weightsFile;
  opts.hfHead = headOpt;
  opts.nonFiniteWeightsError = nonFiniteWeights == NonFiniteWeights::Error;
  if (headOpt.getNumOccurrences() && !llvm::sys::fs::is_directory(inputFile)) {
    llvm::errs() << "error: --head picks the output of a Hugging Face model directory; '"
                 << inputFile << "' is a model description (edit its output: section)\n";
    return 1;
  }
  if (seedOpt >= 0)
    opts.seed = (uint64_t)seedOpt;

  auto model = ::tfc::importModel(ctx, opts);
  if (failed(model))
    return 1;
  ModuleOp module = model->module.get();
  if (importOnly) {
    // The description it compiled (so it is known good), with --set written in.
    std::string yaml = model->generatedYaml;
    if (yaml.empty()) {
      llvm::errs() << "error: 'tfc import' reads a Hugging Face model directory (one with "
                      "a config.json); '" << inputFile << "' is a model description "
                      "already: compile it with 'tfc compile'\n";
      return 1;
    }
    for (auto &[name, value] : opts.overrides)
      ::tfc::hf::setParamText(yaml, name, value);
    return failed(writeAtomically(outputFile, yaml)) ? 1 : 0;
  }

  Emit what = emit;
  if (!emit.getNumOccurrences() && StringRef(outputFile).endswith(".bin"))
    what = Emit::Bin;
  if (what != Emit::MlirImport) {
    PassManager pm(&ctx);
    applyPassManagerCLOptions(pm);
    mlir::tfc::PipelineOptions popts;
    popts.fusion = !noFusion;
    popts.generation = !noGeneration;
    mlir::tfc::buildCompilePipeline(pm, popts);
    if (failed(pm.run(module)))
      return 1;
  }
  if (report)
    printReport(module);
  if (requireFusion && failed(checkFusion(module)))
    return 1;

  std::string text;
  if (what == Emit::Bin) {
    if (outputFile == "-") {
      llvm::errs() << "error: --emit=bin needs an output file (-o model.bin)\n";
      return 1;
    }
    ::tfc::PlanStats stats;
    ::tfc::PlanOptions planOpts;
    planOpts.precision = precision;
    const bool int8 = precision == ::tfc::Precision::Int8;
    if (groupSize.getNumOccurrences() && precision != ::tfc::Precision::Int4 && !int8) {
      llvm::errs() << "error: --group-size applies to --precision int4 and int8\n";
      return 1;
    }
    if ((groupSize != 0 || !int8) &&
        (groupSize < 32 || groupSize % 32 != 0 || groupSize > (1 << 20))) {
      llvm::errs() << "error: --group-size " << groupSize.getValue()
                   << " is not a multiple of 32 (32, 64, 128, ...)"
                   << (int8 ? " or 0 (one scale per row)" : "") << "\n";
      return 1;
    }
    planOpts.groupSize = groupSize;
    // int8 weights: a scale per group on decoder-only models (a decode_step
    // and no encode: LLMs, where Q8_0 is the peer's format; half the KL
    // divergence of per-row scales at the same decode speed), per row
    // elsewhere (encoders and encoder-decoders: the exact per-row kernels),
    // unless --group-size says (docs/precision.md). int4's 8-bit lm_head and
    // token table stay per row: groups measured no closer to f32 there, and
    // slower.
    const bool decoderOnly =
        module.lookupSymbol("decode_step") && !module.lookupSymbol("encode");
    if (int8 && (groupSize.getNumOccurrences() || decoderOnly))
      planOpts.int8Group = groupSize;
    if (activationBits.getNumOccurrences()) {
      if (!int8 || planOpts.int8Group <= 0) {
        llvm::errs() << "error: --activation-bits applies to --precision int8 with groups of "
                        "scales (a decoder-only model, or --group-size 32, 64, ...)\n";
        return 1;
      }
      if (activationBits != 8 && activationBits != 16) {
        llvm::errs() << "error: --activation-bits " << activationBits.getValue()
                     << " is not 8 or 16\n";
        return 1;
      }
      planOpts.int8ActBits = activationBits == 8 ? 8 : 0;
    }
    auto bin = ::tfc::writeModelBin(module, *model->weights, &stats, planOpts);
    if (failed(bin))
      return 1;
    text = std::move(*bin);
    warnUnallocatable(module, stats);
    if (report)
      llvm::outs() << "  plan: " << stats.kernels << " kernels, weights "
                   << stats.weightBytes << " bytes, peak arena " << stats.arenaBytes
                   << " bytes (at the declared maximum dims)\n";
    if (report) {
      static const char *names[] = {"f32", "bf16", "int8", "int4"};
      llvm::outs() << "  precision: " << names[(int)precision.getValue()] << ", "
                   << stats.bf16Activations << " of " << stats.floatActivations
                   << " float activations in bf16";
      // Group-wise int8: its scale groups and the activation blocks' bits.
      if (planOpts.int8Group > 0)
        llvm::outs() << "; int8 weights with a scale per " << planOpts.int8Group
                     << " inputs, linear inputs in " << (planOpts.int8ActBits == 8 ? 8 : 16)
                     << "-bit blocks of 32";
      llvm::outs() << "\n  kernels by dtype:";
      for (auto &[what, count] : stats.precisionCounts)
        llvm::outs() << " " << what << " x" << count << ";";
      llvm::outs() << "\n";
    }
    if (report && stats.stateBytes)
      llvm::outs() << "  kv cache: " << stats.stateBytes << " bytes ("
                   << stats.cacheDescription << ")\n";
    if (report) {
      // What a run takes, as a formula: the runtime plans each run's arena for
      // its actual dims and sizes each generate's KV cache to the request.
      llvm::outs() << "  memory: weights " << stats.weightBytes << " bytes; arena ~ "
                   << stats.arenaFormula << " (forward's busiest instruction)";
      if (stats.stateBytes)
        llvm::outs() << "; kv cache = " << stats.stateBytesPerRowPosition
                     << " B × rows × positions (rows: batch × beams; positions: prompt + new "
                        "tokens - 1)";
      llvm::outs() << "\n";
    }
  } else {
    if (precision.getNumOccurrences() && precision != ::tfc::Precision::F32) {
      llvm::errs() << "error: --precision applies to model.bin (-o model.bin or "
                      "--emit=bin); the IR stays f32\n";
      return 1;
    }
    llvm::raw_string_ostream os(text);
    OpPrintingFlags flags;
    flags.enableDebugInfo(false);
    module.print(os, flags);
    os.flush();
  }
  return failed(writeAtomically(outputFile, text)) ? 1 : 0;
}

/// `tfc serve ...`: the OpenAI-compatible server lives in the Python package
/// (tfc.serve, docs/serving.md), not in the compiler, so the command line is
/// handed to `python3 -m tfc.serve` ($TFC_PYTHON picks another interpreter).
int runServe(int argc, char **argv) {
  const char *python = getenv("TFC_PYTHON");
  if (!python || !*python)
    python = "python3";
  std::vector<char *> args{const_cast<char *>(python), const_cast<char *>("-m"),
                           const_cast<char *>("tfc.serve")};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp(python, args.data());
  llvm::errs() << "tfc: 'tfc serve' runs '" << python
               << " -m tfc.serve' (the Python package, pip install '.[serve]'), and "
               << python << " could not be started: " << strerror(errno)
               << " (set TFC_PYTHON to the interpreter that has tfc installed)\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && StringRef(argv[1]) == "serve")
    return runServe(argc, argv);
  llvm::InitLLVM init(argc, argv);
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerAsmPrinterCLOptions();
  // libLLVM registers hundreds of codegen options; show only ours in --help.
  // MLIR's own flags stay usable (and listed by --help-hidden).
  cl::HideUnrelatedOptions(tfcCategory);
  const char *overview =
      "tfc: a compiler for Transformer inference\n\n"
      "USAGE: tfc compile <model.yaml | DIR> [options]\n"
      "       tfc import DIR [-o model.yaml] [--set NAME=VALUE ...]\n"
      "       tfc serve MODEL [--host 127.0.0.1] [--port 8000] ...  (the Python\n"
      "                 package's OpenAI-compatible server: docs/serving.md)\n\n"
      "  tfc compile model.yaml --emit=mlir-import    print the IR from the frontend\n"
      "  tfc compile DIR -o model.bin                 a Hugging Face model directory\n"
      "                                               (config.json + model.safetensors)\n"
      "  tfc import DIR -o model.yaml                 the description tfc compiles for DIR\n"
      "  tfc compile model.yaml --set d_model=64 ...  override parameters\n"
      "  tfc compile model.yaml --report              what fused into what\n\n"
      "MLIR's debugging flags also apply (see --help-hidden), e.g.\n"
      "--mlir-print-ir-after-all, --mlir-print-ir-before-all, --mlir-disable-threading.\n";
  // `compile` and `import` are plain words in front of the options, so the same
  // flags serve `tfc --help`, `tfc compile --help` and `tfc import --help`.
  std::vector<const char *> args{argv[0]};
  importOnly = argc > 1 && StringRef(argv[1]) == "import";
  bool sawCompile = argc > 1 && (StringRef(argv[1]) == "compile" || importOnly);
  for (int i = sawCompile ? 2 : 1; i < argc; ++i)
    args.push_back(argv[i]);
  bool wantsHelp = llvm::any_of(args, [](const char *a) {
    return StringRef(a).startswith("--help") || StringRef(a) == "-h";
  });
  if (!sawCompile && !wantsHelp) {
    llvm::errs() << "tfc: expected a command: 'tfc compile <model.yaml | DIR> [options]', "
                    "'tfc import DIR' or 'tfc serve MODEL' (see 'tfc --help')\n";
    return 1;
  }
  inputFile.setNumOccurrencesFlag(wantsHelp ? cl::Optional : cl::Required);
  cl::ParseCommandLineOptions((int)args.size(), args.data(), overview);
  return runCompile();
}
