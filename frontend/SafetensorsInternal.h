//===- SafetensorsInternal.h - helpers the reader and writer share --------===//
//
// Private to the safetensors library: the error helpers, limits and byte order
// that the reader (Safetensors.cpp, which defines them) and the writer
// (SafetensorsWriter.cpp) both use. None of them throws past its caller.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_SAFETENSORSINTERNAL_H
#define TFC_FRONTEND_SAFETENSORSINTERNAL_H

#include "frontend/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfc::st_detail {

/// Real headers are a few hundred bytes per tensor; anything this large is a
/// corrupt length prefix (or not a safetensors file at all), and refusing it
/// avoids trying to parse or allocate for gigabytes of garbage.
inline constexpr uint64_t kMaxHeaderSize = 100ull << 20;
inline constexpr size_t kPrefixSize = 8;

/// Stores |msg| into |error| if the caller asked for it; returns false so
/// that validation code can write `return fail(error, ...)`.
bool fail(std::string *error, std::string msg);

/// Last-resort error reporting from catch handlers, where a second exception
/// (bad_alloc while building the message) must not escape either.
void failNoThrow(std::string *error, const char *prefix, const char *what) noexcept;

std::string errnoMessage(int err);

std::string quoted(const std::string &name);

/// nlohmann's messages carry an "[json.exception.parse_error.101] " prefix
/// and a "last read: '...'" excerpt that can be arbitrarily long and contain
/// raw bytes from a binary file; drop both so the error stays one readable
/// line.
std::string shortJsonMessage(const std::string &what);

/// Multiplies the dimensions, failing on overflow of int64_t or of the byte
/// size. Overflow is checked on every partial product (even if a later
/// dimension is 0) so that StTensor::numElements can multiply naively.
bool checkedByteSize(const std::vector<int64_t> &shape, StDType dtype,
                     int64_t &numElements, uint64_t &nbytes);

/// Stores |v| little-endian in p[0..8).
void writeLE64(uint64_t v, char *p);

} // namespace tfc::st_detail

#endif // TFC_FRONTEND_SAFETENSORSINTERNAL_H
