//===- fuzz_model_load.cpp - libFuzzer: tfrun_model_load_buffer on any bytes ---===//
//
// Any bytes in, a status out, never a crash. The checksum stays as mutated, so
// almost every input stops at the header checks; fuzz_model_run fixes the
// checksum up to reach the metadata and the kernels.
//
//===----------------------------------------------------------------------===//
#include <tfrun/tfrun.h>

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tfrun_model_t *model = nullptr;
  tfrun_status_t *st = tfrun_model_load_buffer(data, size, &model);
  if (st) {
    // A failed load must still say why.
    if (!tfrun_status_message(st))
      __builtin_trap();
    tfrun_status_release(st);
  }
  if (model)
    tfrun_model_release(model);
  return 0;
}
