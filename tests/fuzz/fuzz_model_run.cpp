//===- fuzz_model_run.cpp - libFuzzer: load a checksum-fixed model.bin and run it -===//
//
// The checksum (XXH3 64, or FNV-1a 64 before format version 4; docs/model-bin.md) is no defence: anyone can
// recompute it. So this target writes the right checksum (and file size) into
// the header of every mutated input before loading it, and when the load
// succeeds it creates a one-thread CPU session, binds every input to tiny
// valid token ids ([1, 2] of I64, then F32 if the input is not I64) and runs
// once. When the model can generate, it then generates from those inputs
// (max_len 4): greedy (through the streaming call), beam 2, beam 4 and
// sampling with top-k and top-p, so that non-finite logits (a seed has NaN
// weights) reach the search code (issue 21). Any sanitizer report here is a
// loader, kernel or search check that is missing.
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

int onToken(const tfrun_token_t *token, void *) { return token->step >= 3; }

/// Greedy, beam 2, beam 4 and sampling over the bound inputs; reads every result.
void generate(tfrun_session_t *session) {
  for (int mode = 0; mode < 4; ++mode) {
    tfrun_generate_options_t opt;
    tfrun_generate_options_init(&opt);
    opt.max_len = 4;
    opt.beam_width = mode == 1 ? 2 : mode == 2 ? 4 : 1;
    if (mode == 3) {
      opt.sample = 1;
      opt.top_k = 3;
      opt.top_p = 0.9f;
      opt.temperature = 0.7f;
      opt.seed = 5;
    }
    tfrun_status_t *st = mode == 0 ? tfrun_session_generate_stream(session, &opt, onToken, nullptr)
                                   : tfrun_session_generate(session, &opt);
    if (!ok(st))
      continue;
    for (size_t b = 0; b < tfrun_session_generated_count(session); ++b) {
      const int64_t *ids;
      size_t len;
      float score;
      if (ok(tfrun_session_get_generated(session, b, &ids, &len, &score)))
        for (size_t i = 0; i < len; ++i)
          (void)*(volatile const int64_t *)(ids + i);
    }
  }
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
    if (bound && tfrun_model_can_generate(model))
      generate(session);
    tfrun_session_release(session);
  }
  tfrun_model_release(model);
  return 0;
}
