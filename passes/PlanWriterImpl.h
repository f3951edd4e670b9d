//===- PlanWriterImpl.h - the plan writer's state, shared by its files ----===//
//
// Internal to passes/: the Writer behind writeModelBin (PlanWriter.h), split
// over PlanWriter.cpp (shapes, plan, arena, serialization) and
// PlanConstants.cpp (compile-time constants and the weights section).
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_PLANWRITERIMPL_H
#define TFC_PASSES_PLANWRITERIMPL_H

#include "passes/PlanWriter.h"

#include "format/arena_plan.h"
#include "format/metadata.h"
#include "format/model_bin.h"
#include "tfc/abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tfc::plan {

using mlir::FailureOr;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::Value;

/// A compile-time constant (weights and what is computed from them).
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data; // f32; integer constants are stored as their f32 value
  bool isInt = false;
  std::vector<int64_t> ints;
};

int64_t numElements(llvm::ArrayRef<int64_t> shape);

using Out = format::Writer;
using format::Instr;

/// Lowers one module to model.bin: writeModelBin's state across functions.
class Writer {
public:
  Writer(mlir::ModuleOp module, const WeightStore &ws, const PlanOptions &opts)
      : module(module), ws(ws), opts(opts) {}
  FailureOr<std::string> run(PlanStats *stats);

private:
  mlir::ModuleOp module;
  const WeightStore &ws;
  PlanOptions opts;

  struct ValueInfo {
    uint32_t dtype = TFC_DTYPE_F32;
    std::vector<int64_t> dims;    // >= 0 constant, < 0 symbol -(d+1)
    std::vector<int64_t> maxDims; // at the declared maximums
    uint32_t storage = 2;         // 0 input, 1 weight, 2 arena, 3 view
    uint64_t offset = 0;
    format::WeightQuant quant;    // an i8 weight's descriptor
  };
  std::vector<std::string> symbolNames;
  std::vector<int64_t> symbolMax;
  // Per function (cleared between functions).
  llvm::DenseMap<Value, HostTensor> constants;
  llvm::DenseMap<Value, uint32_t> ids;
  std::vector<ValueInfo> values;
  // Shared by all functions.
  std::string weightsBlob;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint64_t>> weightIndex;
  uint64_t stateSize = 0;
  uint64_t stateBytesPerRowPosition = 0; ///< the KV caches' bytes per row and position
  std::vector<std::string> stateNames;

  /// The metadata records being written (format/metadata.h).
  format::Metadata meta;

  LogicalResult planFunction(mlir::func::FuncOp f, PlanStats *stats);
  LogicalResult writeGeneration(mlir::func::FuncOp fwd);

  LogicalResult inferSymbolicShapes(mlir::func::FuncOp f,
                                    llvm::DenseMap<Value, std::vector<int64_t>> &sym,
                                    llvm::DenseMap<Value, std::vector<int64_t>> &max);
  LogicalResult evaluateConstant(Operation *op);
  uint32_t addWeight(Value v, const HostTensor &t);
  uint32_t addWeightBytes(const std::vector<int64_t> &shape, uint32_t dtype,
                          const char *bytes, uint64_t n);
  /// The weight value operand |i| of |op| reads: f32 (or i64), or the reduced
  /// form --precision asks for (an i8 weight's descriptor names its scales).
  /// Whether linear |op| reading |weight| is the model's lm_head.
  static bool isLmHead(Operation *op, Value weight);
  uint32_t weightOperand(Operation *op, unsigned i, Value v);
  llvm::DenseMap<std::pair<Value, unsigned>, std::pair<uint32_t, uint32_t>> reducedWeights;
  void assignActivations(const std::vector<Instr> &plan, const std::vector<uint32_t> &outputs);
  /// The arena of the function just planned as a polynomial in the symbolic
  /// dims: the values live at its busiest instruction (PlanStats::arenaFormula).
  std::string arenaFormula(const std::vector<uint32_t> &order,
                           const std::vector<format::ArenaItem> &items, int64_t steps) const;
};

} // namespace tfc::plan

#endif // TFC_PASSES_PLANWRITERIMPL_H
