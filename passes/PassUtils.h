//===- PassUtils.h - helpers shared by the tfc passes ----------------------===//
//
// Small matchers and builders every fusion pass needs; kept here so each pass
// file holds only its own pattern.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_PASSUTILS_H
#define TFC_PASSES_PASSUTILS_H

#include "ir/TfcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <optional>

namespace mlir::tfc {

/// The value of |v| if it is a splat tfc.constant (float or integer).
inline std::optional<double> getScalarConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto attr = c.getValue().dyn_cast<DenseElementsAttr>();
  if (!attr || !attr.isSplat())
    return std::nullopt;
  if (attr.getElementType().isa<FloatType>())
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (attr.getElementType().isa<IntegerType>())
    return (double)attr.getSplatValue<APInt>().getSExtValue();
  return std::nullopt;
}

/// Builds OpT with its result type inferred; returns null if inference fails
/// (the passes only build ops whose operands they have already checked).
template <typename OpT>
Value buildInferred(OpBuilder &b, Location loc, ValueRange operands,
                    ArrayRef<NamedAttribute> attrs = {}) {
  SmallVector<Type> types;
  DictionaryAttr dict = DictionaryAttr::get(b.getContext(), attrs);
  if (failed(OpT::inferReturnTypes(b.getContext(), loc, operands, dict, {}, types)))
    return {};
  OperationState st(loc, OpT::getOperationName());
  st.addOperands(operands);
  st.addAttributes(attrs);
  st.addTypes(types);
  return b.create(st)->getResult(0);
}

/// How a fusion pass applies its patterns (applyPatternsAndFoldGreedily): ops
/// visited top-down (in program order) or bottom-up (outermost first), and no
/// region simplification, which is canonicalize's job. The driver erases the
/// ops a rewrite leaves dead.
inline GreedyRewriteConfig fusionRewriteConfig(bool topDown) {
  GreedyRewriteConfig config;
  config.useTopDownTraversal = topDown;
  config.enableRegionSimplification = false;
  return config;
}

} // namespace mlir::tfc

#endif // TFC_PASSES_PASSUTILS_H
