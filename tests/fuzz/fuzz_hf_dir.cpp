//===- fuzz_hf_dir.cpp - libFuzzer: a Hugging Face directory's config -------===//
//
// Any bytes as config.json (and, after a NUL byte, as generation_config.json)
// in a model directory, imported as `tfc compile DIR` imports it: a diagnostic
// or a module out, never a crash. The directory's model.safetensors holds one
// small tensor under each family's probe name (HfDir.cpp), so a config that
// describes a family gets past the weights' lookup into the importer, which
// then reports the first missing or misshapen weight. The frontend's config
// reading (HfDir.cpp, HfGeneration.cpp: model types, rope scaling, windows,
// Gemma 3's text_config, generation settings) and the description it writes
// both run on every input. A failed import must have emitted at least one
// error, and a module that comes out must verify.
//
//===----------------------------------------------------------------------===//
#include "frontend_fuzz.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {
using tfc::fuzz::writeFile;

struct Env {
  tfc::fuzz::FrontendContext frontend;
  std::string dir;
  Env() {
    dir = tfc::fuzz::makeTempDir("tfc-fuzz-hf");
    // The families' probe tensors (HfDir.cpp's table), 2 x 2 f32 each.
    const char *probes[] = {"model.embed_tokens.weight", "embeddings.word_embeddings.weight",
                            "model.shared.weight", "shared.weight", "wte.weight",
                            "language_model.model.embed_tokens.weight"};
    std::string header = "{";
    uint64_t off = 0;
    for (const char *p : probes) {
      header += std::string(off ? "," : "") + "\"" + p +
                "\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[" +
                std::to_string(off) + "," + std::to_string(off + 16) + "]}";
      off += 16;
    }
    header += "}";
    std::string file(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(&file[0], &n, 8); // little-endian on every target tfc builds for
    file += header;
    file.append(off, '\0');
    if (!writeFile(dir + "/model.safetensors", file.data(), file.size()))
      std::abort();
    std::atexit([] {
      const std::string &d = Env::get().dir;
      for (const char *f : {"/config.json", "/generation_config.json", "/model.safetensors"})
        std::remove((d + f).c_str());
      rmdir(d.c_str());
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
  const uint8_t *nul = static_cast<const uint8_t *>(std::memchr(data, 0, size));
  const size_t cfgSize = nul ? static_cast<size_t>(nul - data) : size;
  if (!writeFile(env->dir + "/config.json", data, cfgSize))
    std::abort();
  const std::string gen = env->dir + "/generation_config.json";
  std::remove(gen.c_str());
  if (nul && !writeFile(gen, nul + 1, size - cfgSize - 1))
    std::abort();
  env->frontend.importAndCheck(env->dir);
  return 0;
}
