//===- PlanWriter.h - fused tfc IR to model.bin ----------------------------===//
//
// The last compiler stage: evaluates compile-time weight expressions, infers every
// value's shape in terms of the symbolic dims, plans the arena by liveness at the
// declared maximums, and serializes signature, plan and weights as model.bin
// (docs/model-bin.md, constants in include/tfc/abi.h).
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_PLANWRITER_H
#define TFC_PASSES_PLANWRITER_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>

namespace tfc {
class WeightStore;

/// Figures `tfc compile --report` prints about the plan.
struct PlanStats {
  uint64_t weightBytes = 0;
  uint64_t arenaBytes = 0;
  uint64_t kernels = 0;
  /// Session state (the KV caches of decode_step) at the declared maximums.
  uint64_t stateBytes = 0;
  std::string cacheDescription;
  std::map<std::string, uint64_t> kernelCounts;
};

/// Lowers |module| (after the pass pipeline) to the bytes of a model.bin. Emits a
/// located error and fails on anything the plan cannot express.
mlir::FailureOr<std::string> writeModelBin(mlir::ModuleOp module,
                                           const WeightStore &weights,
                                           PlanStats *stats = nullptr);

} // namespace tfc

#endif // TFC_PASSES_PLANWRITER_H
