//===- fuzz_model_run.cpp - libFuzzer: load a checksum-fixed model.bin and run it -===//
//
// The checksum (XXH3 64, or FNV-1a 64 before format version 4; docs/model-bin.md) is no defence: anyone can
// recompute it. So this target writes the right checksum (and file size) into
// the header of every mutated input before loading it, and when the load
// succeeds it creates a one-thread CPU session, binds every input to tiny
// valid token ids ([1, 2] of I64, then F32 if the input is not I64) and runs
// once. Any sanitizer report here is a loader or kernel check that is missing.
//
//===----------------------------------------------------------------------===//
#include "format/model_bin.h"
#include <tfc/abi.h>
#include <tfrun/tfrun.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {
bool ok(tfrun_status_t *st) {
  if (!st)
    return true;
  tfrun_status_release(st);
  return false;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The header's file size and checksum, made right for the mutated bytes.
  std::vector<uint8_t> buf(data, data + size);
  tfc::format::fixChecksum(buf.data(), buf.size());
  tfrun_model_t *model = nullptr;
  if (!ok(tfrun_model_load_buffer(buf.data(), buf.size(), &model)))
    return 0;
  tfrun_session_t *session = nullptr;
  if (ok(tfrun_session_create(model, 1, &session))) {
    int64_t ids[2] = {1, 2}, shape[2] = {1, 2};
    float fl[2] = {0.5f, -0.25f};
    bool bound = true;
    for (size_t i = 0; i < tfrun_model_input_count(model); ++i) {
      const char *name = tfrun_model_input_name(model, i);
      if (!ok(tfrun_session_set_input(session, name, TFRUN_I64, shape, 2, ids)) &&
          !ok(tfrun_session_set_input(session, name, TFRUN_F32, shape, 2, fl)))
        bound = false;
    }
    if (bound && ok(tfrun_session_run(session))) {
      for (size_t i = 0; i < tfrun_model_output_count(model); ++i) {
        const float *out;
        const int64_t *dims;
        size_t rank;
        ok(tfrun_session_get_output(session, tfrun_model_output_name(model, i), &out, &dims,
                                    &rank));
      }
    }
    tfrun_session_release(session);
  }
  tfrun_model_release(model);
  return 0;
}
