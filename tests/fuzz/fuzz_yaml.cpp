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
#include "frontend_fuzz.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {
struct Env {
  tfc::fuzz::FrontendContext frontend;
  std::string dir, path;
  Env() {
    dir = tfc::fuzz::makeTempDir("tfc-fuzz-yaml");
    path = dir + "/model.yaml";
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
  if (!tfc::fuzz::writeFile(env->path, data, size))
    std::abort();
  env->frontend.importAndCheck(env->path);
  return 0;
}
