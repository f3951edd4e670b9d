//===- TfcOpsInternal.h - helpers the tfc op definitions share ------------===//
//
// Private to ir/: the shape-inference helpers that TfcOps.cpp and
// TfcAttentionOps.cpp both use, and the TFC_INFER macro that spells an op's
// inferReturnTypes signature.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_IR_TFCOPSINTERNAL_H
#define TFC_IR_TFCOPSINTERNAL_H

#include "ir/TfcDialect.h"

#include "mlir/IR/Diagnostics.h"

namespace mlir::tfc::opdetail {

inline constexpr int64_t kDyn = ShapedType::kDynamic;

inline RankedTensorType rankedOf(Value v) {
  return v.getType().dyn_cast<RankedTensorType>();
}

/// Two dims agree if either is symbolic or they are equal.
inline bool dimsAgree(int64_t a, int64_t b) { return a == kDyn || b == kDyn || a == b; }

inline LogicalResult pushTensor(SmallVectorImpl<Type> &types, ArrayRef<int64_t> shape,
                                Type elem) {
  types.push_back(RankedTensorType::get(shape, elem));
  return success();
}

/// Inference runs before the ODS operand constraints are verified (the parser
/// infers result types first), so it must not assume ranked tensors.
inline LogicalResult checkRanked(std::optional<Location> loc, ValueRange operands) {
  for (Value v : operands)
    if (!v.getType().isa<RankedTensorType>())
      return emitOptionalError(loc, "expects ranked tensor operands, got ", v.getType());
  return success();
}

} // namespace mlir::tfc::opdetail

#define TFC_INFER(OpT)                                                         \
  LogicalResult OpT::inferReturnTypes(                                         \
      MLIRContext *ctx, std::optional<Location> loc, ValueRange operands,      \
      DictionaryAttr attrs, RegionRange regions,                               \
      SmallVectorImpl<Type> &types)

#endif // TFC_IR_TFCOPSINTERNAL_H
