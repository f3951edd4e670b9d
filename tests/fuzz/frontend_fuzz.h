//===- frontend_fuzz.h - what the frontend's fuzzers share -----------------===//
//
// fuzz_yaml and fuzz_hf_dir run importModel in process on each input: one
// MLIRContext made once, whose error diagnostics are counted (printed only with
// TFC_FUZZ_VERBOSE), and one check of the result: a failed import must have
// emitted at least one error, and a module that comes out must verify.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_TESTS_FUZZ_FRONTEND_FUZZ_H
#define TFC_TESTS_FUZZ_FRONTEND_FUZZ_H

#include "frontend/Importer.h"
#include "ir/TfcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace tfc::fuzz {

struct FrontendContext {
  mlir::MLIRContext ctx;
  int errors = 0;
  FrontendContext() {
    mlir::DialectRegistry registry;
    registry.insert<mlir::tfc::TfcDialect, mlir::func::FuncDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    ctx.printOpOnDiagnostic(false);
    ctx.getDiagEngine().registerHandler([this](mlir::Diagnostic &d) {
      if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
        ++errors;
      if (std::getenv("TFC_FUZZ_VERBOSE"))
        std::fprintf(stderr, "%s\n", d.str().c_str());
      return mlir::success();
    });
  }

  /// importModel on |path| (a description or a model directory), checked.
  void importAndCheck(const std::string &path) {
    errors = 0;
    tfc::ImportOptions opts;
    opts.yamlPath = path;
    auto model = tfc::importModel(ctx, opts);
    if (mlir::failed(model)) {
      if (errors == 0)
        __builtin_trap(); // failed without saying why
      return;
    }
    if (mlir::failed(mlir::verify(model->module.get())))
      __builtin_trap(); // the importer built an invalid module
  }
};

/// A private temporary directory named from |prefix| (/tmp/PREFIX-XXXXXX).
inline std::string makeTempDir(const std::string &prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    std::abort();
  return tmpl;
}

/// Writes |size| bytes to |path|; false on any failure.
inline bool writeFile(const std::string &path, const void *data, size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

} // namespace tfc::fuzz

#endif // TFC_TESTS_FUZZ_FRONTEND_FUZZ_H
