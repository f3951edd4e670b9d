//===- Importer.h - YAML model description to the tfc dialect -------------===//
//
// The frontend's entry point: reads a model description (docs/model-format.md),
// evaluates its parameters, binds its weights, and expands its components into
// primitive tfc ops. Every op's location is the YAML file:line:col of the node that
// produced it, wrapped in a NameLoc with the module path (for example
// "encoder.layers.0.attn") so later reports can name the layer.
//
// Errors are reported through the MLIRContext's diagnostic engine at the user's
// line; the importer stops at the first one.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_IMPORTER_H
#define TFC_FRONTEND_IMPORTER_H

#include "frontend/Weights.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfc {

/// What the user asked for on the command line.
struct ImportOptions {
  /// The model description, or a Hugging Face model directory (one with a
  /// config.json; frontend/HfDir.h).
  std::string yamlPath;
  /// `--set NAME=VALUE`, in command-line order.
  std::vector<std::pair<std::string, std::string>> overrides;
  /// `--weights FILE`; overrides the description's `weights:`.
  std::string weightsPath;
  /// `--seed N`; overrides the description's `seed:`.
  std::optional<uint64_t> seed;
  /// `--head NAME`: a Hugging Face directory's output head (docs/hf.md); empty
  /// picks one from the directory.
  std::string hfHead;
  /// `--nonfinite-weights=error`: a weight holding NaN or infinite values is an
  /// error rather than a warning.
  bool nonFiniteWeightsError = false;
};

/// The imported model: the module plus the data of every weight it names.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<WeightStore> weights;
  /// Evaluated parameters (after --set).
  std::map<std::string, double> params;
  /// For a model directory: the description tfc generated and compiled
  /// (`tfc import` writes it). Empty for a YAML input.
  std::string generatedYaml;
};

/// Imports |opts.yamlPath|. On failure an error has been emitted through |ctx|'s
/// diagnostic engine and the result is a failure. Unused checkpoint tensors are
/// reported as a warning. |ctx| must have the tfc and func dialects loaded.
mlir::FailureOr<ImportedModel> importModel(mlir::MLIRContext &ctx,
                                           const ImportOptions &opts);

} // namespace tfc

#endif // TFC_FRONTEND_IMPORTER_H
