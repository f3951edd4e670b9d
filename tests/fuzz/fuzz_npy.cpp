//===- fuzz_npy.cpp - libFuzzer: tfrun's .npy reader on any bytes --------------===//
//
// npy::parse is what npy::read runs on a file's bytes. Any bytes in: an error
// or an array out; an array's data must be exactly what its shape and dtype
// need.
//
//===----------------------------------------------------------------------===//
#include "tools/tfrun/npy.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tfc::npy::Array a;
  std::string err = tfc::npy::parse(std::string((const char *)data, size), "fuzz.npy", a);
  if (!err.empty())
    return 0;
  size_t es = a.descr == "<i8" ? 8 : (a.descr == "<i4" || a.descr == "<f4") ? 4 : 1;
  unsigned __int128 n = es;
  bool zero = false;
  for (int64_t d : a.shape) {
    if (d < 0)
      __builtin_trap();
    zero |= d == 0;
  }
  for (int64_t d : a.shape) {
    if (zero) {
      n = 0;
      break;
    }
    n *= (uint64_t)d;
    if (n > size)
      __builtin_trap(); // the element count wrapped
  }
  if (n != a.data.size())
    __builtin_trap();
  return 0;
}
