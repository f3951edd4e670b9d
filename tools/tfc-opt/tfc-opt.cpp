//===- tfc-opt.cpp - run tfc and MLIR passes on .mlir files ---------------===//
//
// The `opt` driver for lit tests: parses a module, runs the requested passes, and
// prints it. Only the dialects and passes tfc uses are registered, which keeps this
// translation unit cheap to build (InitAllDialects costs 18 s and 1.5 GB).
//
//===----------------------------------------------------------------------------===//
#include "ir/TfcDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::tfc::TfcDialect, mlir::func::FuncDialect>();
  mlir::tfc::registerTfcPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tfc optimizer driver\n", registry));
}
