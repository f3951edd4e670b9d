//===- fuzz_safetensors.cpp - libFuzzer: the safetensors reader on any bytes ---===//
//
// SafetensorsFile::fromBuffer validates the whole header up front and promises
// that every tensor it returns has a consistent shape, dtype and byte range
// inside the buffer. Any bytes in: an error or a file out; and when a file
// comes out, every tensor's bytes are read to prove that promise.
//
//===----------------------------------------------------------------------===//
#include "frontend/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  auto file = tfc::SafetensorsFile::fromBuffer(data, size, &error);
  if (!file) {
    if (error.empty())
      __builtin_trap(); // a failure must say why
    return 0;
  }
  volatile uint8_t sink = 0;
  for (const tfc::StTensor &t : file->tensors()) {
    if (t.data < data || t.nbytes > size || t.data + t.nbytes > data + size ||
        (size_t)t.numElements() * tfc::stDTypeSize(t.dtype) != t.nbytes ||
        file->find(t.name) != &t)
      __builtin_trap();
    for (size_t i = 0; i < t.nbytes; ++i)
      sink ^= t.data[i];
    (void)tfc::formatShape(t.shape);
  }
  (void)file->metadata();
  return 0;
}
