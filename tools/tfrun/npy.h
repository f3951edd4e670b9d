//===- npy.h - minimal .npy reader/writer for tfrun -------------------------===//
//
// NumPy's .npy format (versions 1.0-3.0): a magic, a little header dict with
// 'descr', 'fortran_order' and 'shape', then raw C-order data. Only what tfrun
// exchanges is supported: <i8, <i4 and <f4, C order. Every malformed file is an
// error message, never a crash.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_TOOLS_TFRUN_NPY_H
#define TFC_TOOLS_TFRUN_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace tfc::npy {

struct Array {
  std::string descr; ///< "<i8", "<i4" or "<f4"
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Reads |path|. Returns "" on success, else a one-line error.
std::string read(const std::string &path, Array &out);
/// Parses the bytes of a .npy file; |path| only names it in the error. What
/// read() runs after reading the file (and what tests/fuzz/fuzz_npy.cpp calls).
std::string parse(const std::string &bytes, const std::string &path, Array &out);
/// Writes a float32 array. Returns "" on success, else a one-line error.
std::string writeF32(const std::string &path, const float *data,
                     const std::vector<int64_t> &shape);
/// The same for int64 data.
std::string writeI64(const std::string &path, const int64_t *data,
                     const std::vector<int64_t> &shape);

} // namespace tfc::npy

#endif
