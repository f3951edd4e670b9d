//===- PassUtils.h - helpers shared by the tfc passes ----------------------===//
//
// Small matchers and the rewrite-driver settings every fusion pass needs; kept
// here so each pass file holds only its own patterns.
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
