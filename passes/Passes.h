//===- Passes.h - tfc passes and the compile pipeline ---------------------===//
//
// Declares the tfc passes (generated from Passes.td), their registration for
// tfc-opt, the pipeline `tfc compile` runs, and the attention matcher the fusion
// report shares with the pass.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_PASSES_H
#define TFC_PASSES_PASSES_H

#include "ir/TfcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

namespace mlir {
class PassManager;
namespace tfc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Why a softmax did not become part of a tfc.attention: the failed step, or
/// empty if it would fuse.
std::string explainAttentionMismatch(SoftmaxOp softmax);

/// Options of the compile pipeline.
struct PipelineOptions {
  bool fusion = true;
  /// Derive @encode/@decode_step for generation (needs the fused attention).
  bool generation = true;
};

/// Adds the passes `tfc compile --emit=mlir` runs: fusion (unless disabled),
/// then canonicalize and CSE.
void buildCompilePipeline(PassManager &pm, const PipelineOptions &opts);

} // namespace tfc
} // namespace mlir

#endif // TFC_PASSES_PASSES_H
