//===- fuzz_yaml.cpp - libFuzzer: the YAML frontend in process ----------------===//
//
// Any bytes in, a diagnostic or a module out, never a crash. importModel reads a
// path, so each input is written to a file in a private temporary directory
// first (a `weights:` key then names files relative to it, which do not exist:
// a located error). The MLIRContext is made once; diagnostics are counted, not
// printed. A failed import must have emitted at least one error, and a module
// that comes out must verify.
//
//===----------------------------------------------------------------------===//
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

namespace {
struct Env {
  mlir::MLIRContext ctx;
  std::string dir, path;
  int errors = 0;
  Env() {
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
    char dir[] = "/tmp/tfc-fuzz-yaml-XXXXXX";
    if (!mkdtemp(dir))
      std::abort();
    this->dir = dir;
    path = this->dir + "/model.yaml";
    std::atexit([] {
      std::remove(Env::get().path.c_str());
      rmdir(Env::get().dir.c_str());
    });
  }
  static Env &get() {
    static Env *env = new Env;
    return *env;
  }
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Env *env = &Env::get();
  FILE *f = std::fopen(env->path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0)
    std::abort();
  env->errors = 0;
  tfc::ImportOptions opts;
  opts.yamlPath = env->path;
  auto model = tfc::importModel(env->ctx, opts);
  if (mlir::failed(model)) {
    if (env->errors == 0)
      __builtin_trap(); // failed without saying why
    return 0;
  }
  if (mlir::failed(mlir::verify(model->module.get())))
    __builtin_trap(); // the importer built an invalid module
  return 0;
}
