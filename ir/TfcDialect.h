//===- TfcDialect.h - the tfc dialect --------------------------------------===//
//
// Public header of the tfc dialect: include this to use its ops and attributes.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_IR_TFCDIALECT_H
#define TFC_IR_TFCDIALECT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/TfcInterfaces.h"

#include "ir/TfcDialect.h.inc"
#include "ir/TfcEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/TfcAttrs.h.inc"

#define GET_OP_CLASSES
#include "ir/TfcOps.h.inc"

namespace mlir::tfc {
/// Broadcasts two shapes with numpy rules, treating dynamic dims symbolically:
/// 1 broadcasts to anything, two dynamic dims give a dynamic dim. Returns failure
/// (and emits at |loc| if given) when two static dims differ and neither is 1.
LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &out,
                              std::optional<Location> loc);

/// Normalizes a possibly negative |axis| for |rank|; returns -1 if out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank);
} // namespace mlir::tfc

#endif // TFC_IR_TFCDIALECT_H
