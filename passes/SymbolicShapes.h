//===- SymbolicShapes.h - re-infer a function with concrete input dims ----===//
//
// PlanWriter (symbolic shapes and the maximums the arena is planned for) and
// tfc-derive-generation (the symbolic dims of the values encode hands to
// decode_step) both need every value's shape with each named input dim replaced
// by a chosen number: a distinct large prime per symbol, or its declared
// maximum. This re-infers a clone of the function that way.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_SYMBOLICSHAPES_H
#define TFC_PASSES_SYMBOLICSHAPES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include <string>

namespace mlir::tfc {

/// Sentinels standing for symbolic dims: larger than any real dim, and prime so
/// a product of two would be recognizable.
inline constexpr int64_t kDimSentinels[] = {1000003, 1000033, 1000037, 1000039, 1000081,
                                            1000099, 1000117, 1000121, 1000133};

/// Clones |f|, gives each dynamic input dim the value |dimValue| returns for its
/// name (the input's `tfc.dims` entry, or "dim<i>"), re-infers every op's result
/// types, and calls |record| with each original value (inputs, then op results)
/// and its clone. The clone is erased before returning. Fails if |dimValue| or
/// |record| fails (they emit their own errors) or if inference fails.
inline LogicalResult
reinferWithDims(func::FuncOp f, function_ref<FailureOr<int64_t>(StringRef name)> dimValue,
                function_ref<LogicalResult(Value orig, Value clone)> record) {
  IRMapping map;
  OpBuilder b(f);
  auto clone = cast<func::FuncOp>(b.clone(*f, map));
  auto run = [&]() -> LogicalResult {
    for (auto [i, arg] : llvm::enumerate(clone.getArguments())) {
      auto t = arg.getType().cast<RankedTensorType>();
      auto names = f.getArgAttrOfType<ArrayAttr>(i, "tfc.dims");
      SmallVector<int64_t> shape(t.getShape());
      for (int64_t d = 0; d < t.getRank(); ++d) {
        if (!t.isDynamicDim(d))
          continue;
        std::string name = names && d < (int64_t)names.size()
                               ? names[d].cast<StringAttr>().str()
                               : "dim" + std::to_string(d);
        FailureOr<int64_t> v = dimValue(name);
        if (failed(v))
          return failure();
        shape[d] = *v;
      }
      arg.setType(RankedTensorType::get(shape, t.getElementType()));
    }
    LogicalResult result = success();
    clone.walk([&](InferTypeOpInterface iface) {
      Operation *op = iface.getOperation();
      SmallVector<Type> types;
      if (failed(iface.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                        op->getAttrDictionary(), op->getRegions(),
                                        types))) {
        result = failure();
        return WalkResult::interrupt();
      }
      for (auto [r, t] : llvm::zip(op->getResults(), types))
        r.setType(t);
      return WalkResult::advance();
    });
    if (failed(result))
      return failure();
    for (auto [a, c] : llvm::zip(f.getArguments(), clone.getArguments()))
      if (failed(record(a, c)))
        return failure();
    for (auto [o, c] : llvm::zip(f.getBody().front().without_terminator(),
                                 clone.getBody().front().without_terminator()))
      for (auto [ro, rc] : llvm::zip(o.getResults(), c.getResults()))
        if (failed(record(ro, rc)))
          return failure();
    return success();
  };
  LogicalResult r = run();
  clone.erase();
  return r;
}

} // namespace mlir::tfc

#endif // TFC_PASSES_SYMBOLICSHAPES_H
