//===- TfcDialect.cpp - tfc dialect registration --------------------------===//
//
// Registers the ops and the enum attributes of the tfc dialect.
//
//===----------------------------------------------------------------------------===//
#include "ir/TfcDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tfc;

#include "ir/TfcDialect.cpp.inc"
#include "ir/TfcEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/TfcAttrs.cpp.inc"

void TfcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/TfcOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/TfcAttrs.cpp.inc"
      >();
  checkKernelNames();
}
