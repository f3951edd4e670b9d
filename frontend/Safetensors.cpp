//===- Safetensors.cpp - Reader and writer for .safetensors files ---------===//
//
// Implementation of the safetensors reader/writer declared in Safetensors.h.
// The reader treats the file as untrusted input: every size, offset and
// count read from it is checked (including for integer overflow) before it
// is used to form a pointer, so that a corrupt or truncated weights file
// yields a one-line error instead of an out-of-bounds read later on.
//
// The JSON header is parsed with nlohmann-json rather than a hand-written
// parser: it is a well-kept, widely fuzzed library, and JSON has enough
// corner cases (escapes, surrogate pairs, number forms) that a local parser
// would be a liability. nlohmann reports errors by throwing, while this
// module promises never to throw, so every public entry point below funnels
// its work through a try/catch. The writer is in SafetensorsWriter.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/Safetensors.h"
#include "frontend/SafetensorsInternal.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tfc {

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}


using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// Helpers the writer (SafetensorsWriter.cpp) shares: SafetensorsInternal.h
//===----------------------------------------------------------------------===//

namespace st_detail {

bool fail(std::string *error, std::string msg) {
  if (error)
    *error = std::move(msg);
  return false;
}

void failNoThrow(std::string *error, const char *prefix,
                 const char *what) noexcept {
  if (!error)
    return;
  try {
    *error = std::string(prefix) + what;
  } catch (...) {
    try {
      *error = prefix;
    } catch (...) {
    }
  }
}

std::string errnoMessage(int err) {
  return std::error_code(err, std::generic_category()).message();
}

std::string quoted(const std::string &name) { return "'" + name + "'"; }

std::string shortJsonMessage(const std::string &what) {
  std::string msg = what;
  if (msg.rfind("[json.exception.", 0) == 0) {
    size_t close = msg.find("] ");
    if (close != std::string::npos)
      msg.erase(0, close + 2);
  }
  size_t lastRead = msg.find("; last read: ");
  if (lastRead != std::string::npos) {
    size_t expected = msg.find("; expected ", lastRead + 1);
    msg.erase(lastRead, expected == std::string::npos
                            ? std::string::npos
                            : expected - lastRead);
  }
  constexpr size_t kMaxLen = 200;
  if (msg.size() > kMaxLen)
    msg = msg.substr(0, kMaxLen) + "...";
  for (char &c : msg)
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f)
      c = '?';
  return msg;
}

bool checkedByteSize(const std::vector<int64_t> &shape, StDType dtype,
                     int64_t &numElements, uint64_t &nbytes) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return false;
    n *= d;
  }
  uint64_t elemSize = stDTypeSize(dtype);
  if (static_cast<uint64_t>(n) >
      std::numeric_limits<size_t>::max() / elemSize)
    return false;
  numElements = n;
  nbytes = static_cast<uint64_t>(n) * elemSize;
  return true;
}

void writeLE64(uint64_t v, char *p) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

} // namespace st_detail

using namespace st_detail;

namespace {

/// Formats a JSON array of integers like formatShape, for error messages
/// about shapes that could not be converted to int64_t.
std::string formatJsonShape(const json &shape) {
  std::string s = "[";
  bool first = true;
  for (const json &d : shape) {
    if (!first)
      s += ", ";
    first = false;
    s += d.dump();
  }
  return s + "]";
}

/// A tensor entry as read from the header, before it is bound to the data.
struct Entry {
  StTensor tensor;
  uint64_t begin;
  uint64_t end;
};

bool parseShape(const std::string &name, const json &value,
                std::vector<int64_t> &shape, std::string *error) {
  if (!value.is_array())
    return fail(error, "tensor " + quoted(name) +
                           " has a shape that is not an array of integers");
  for (const json &d : value)
    if (!d.is_number_integer())
      return fail(error, "tensor " + quoted(name) +
                             " has a shape that is not an array of integers");
  shape.clear();
  for (const json &d : value) {
    if (d.is_number_unsigned()) {
      uint64_t u = d.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return fail(error, "tensor " + quoted(name) + " has shape " +
                               formatJsonShape(value) +
                               " whose element count overflows");
      shape.push_back(static_cast<int64_t>(u));
    } else {
      int64_t v = d.get<int64_t>();
      if (v < 0)
        return fail(error, "tensor " + quoted(name) +
                               " has negative dimension " + std::to_string(v) +
                               " in shape " + formatJsonShape(value));
      shape.push_back(v);
    }
  }
  return true;
}

/// Reads a non-negative JSON integer; nlohmann stores "5" as unsigned but
/// "-0" as signed, so both representations have to be accepted.
bool getOffset(const json &v, uint64_t &out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

bool parseEntry(const std::string &name, const json &value, Entry &entry,
                std::string *error) {
  StTensor &t = entry.tensor;
  t.name = name;
  if (!value.is_object())
    return fail(error, "tensor " + quoted(name) + " is not a JSON object");

  auto dtype = value.find("dtype");
  if (dtype == value.end())
    return fail(error, "tensor " + quoted(name) + " has no \"dtype\"");
  if (!dtype->is_string())
    return fail(error,
                "tensor " + quoted(name) + " has a dtype that is not a string");
  const std::string &dtypeName = dtype->get_ref<const std::string &>();
  if (!parseStDType(dtypeName, t.dtype))
    return fail(error, "tensor " + quoted(name) + " has unknown dtype " +
                           quoted(dtypeName));

  auto shape = value.find("shape");
  if (shape == value.end())
    return fail(error, "tensor " + quoted(name) + " has no \"shape\"");
  if (!parseShape(name, *shape, t.shape, error))
    return false;

  auto offsets = value.find("data_offsets");
  if (offsets == value.end())
    return fail(error, "tensor " + quoted(name) + " has no \"data_offsets\"");
  if (!offsets->is_array() || offsets->size() != 2 ||
      !getOffset((*offsets)[0], entry.begin) ||
      !getOffset((*offsets)[1], entry.end))
    return fail(error, "tensor " + quoted(name) +
                           " has data_offsets that are not two non-negative "
                           "integers");
  if (entry.begin > entry.end)
    return fail(error, "tensor " + quoted(name) + " has data_offsets [" +
                           std::to_string(entry.begin) + ", " +
                           std::to_string(entry.end) + "] with begin > end");
  return true;
}

uint64_t readLE64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

} // namespace

bool parseStDType(std::string_view s, StDType &out) {
  static constexpr std::pair<std::string_view, StDType> kNames[] = {
      {"F64", StDType::F64}, {"F32", StDType::F32}, {"F16", StDType::F16},
      {"BF16", StDType::BF16}, {"I64", StDType::I64}, {"I32", StDType::I32},
      {"I16", StDType::I16}, {"I8", StDType::I8},   {"U8", StDType::U8},
      {"BOOL", StDType::Bool}};
  for (const auto &[name, dtype] : kNames) {
    if (name == s) {
      out = dtype;
      return true;
    }
  }
  return false;
}

const char *stDTypeName(StDType t) {
  switch (t) {
  case StDType::F64:
    return "F64";
  case StDType::F32:
    return "F32";
  case StDType::F16:
    return "F16";
  case StDType::BF16:
    return "BF16";
  case StDType::I64:
    return "I64";
  case StDType::I32:
    return "I32";
  case StDType::I16:
    return "I16";
  case StDType::I8:
    return "I8";
  case StDType::U8:
    return "U8";
  case StDType::Bool:
    return "BOOL";
  }
  // Only reachable through a value cast from an out-of-range integer.
  return "?";
}

size_t stDTypeSize(StDType t) {
  switch (t) {
  case StDType::F64:
  case StDType::I64:
    return 8;
  case StDType::F32:
  case StDType::I32:
    return 4;
  case StDType::F16:
  case StDType::BF16:
  case StDType::I16:
    return 2;
  case StDType::I8:
  case StDType::U8:
  case StDType::Bool:
    return 1;
  }
  // A non-zero size keeps divisions by the element size safe even for a
  // bogus enum value.
  return 1;
}

int64_t StTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool SafetensorsFile::parse(const uint8_t *data, size_t size,
                            std::string *error) {
  if (size < kPrefixSize)
    return fail(error, "file is truncated: " + std::to_string(size) +
                           " bytes, expected at least 8");
  uint64_t headerSize = readLE64(data);
  if (headerSize > kMaxHeaderSize)
    return fail(error, "header size " + std::to_string(headerSize) +
                           " is larger than the 100 MiB limit: not a "
                           "safetensors file, or the file is corrupt");
  if (headerSize > size - kPrefixSize)
    return fail(error, "header size " + std::to_string(headerSize) +
                           " exceeds the " +
                           std::to_string(size - kPrefixSize) +
                           " bytes after the 8-byte length: file is "
                           "truncated");

  const char *headerBegin = reinterpret_cast<const char *>(data + kPrefixSize);
  json header;
  // JSON allows a key twice and nlohmann::json keeps the last; a tensor named
  // twice is ambiguous, so the parser callback notes any repeated key.
  std::vector<std::set<std::string>> keys; // per open object
  std::string duplicate;
  auto noteKeys = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() && parsed.is_string() &&
             !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    header = json::parse(headerBegin, headerBegin + headerSize, noteKeys);
  } catch (const json::exception &e) {
    return fail(error, "header is not valid JSON: " + shortJsonMessage(e.what()));
  }
  if (!duplicate.empty())
    return fail(error, "header names '" + duplicate + "' twice");
  if (!header.is_object())
    return fail(error, "header is not a JSON object");

  const uint8_t *dataSection = data + kPrefixSize + headerSize;
  uint64_t dataSize = size - kPrefixSize - headerSize;

  std::vector<Entry> entries;
  entries.reserve(header.size());
  for (const auto &[key, value] : header.items()) {
    if (key == "__metadata__") {
      // The reference implementation models this as an optional map, so an
      // explicit null means "no metadata".
      if (value.is_null())
        continue;
      if (!value.is_object())
        return fail(error, "\"__metadata__\" is not a JSON object");
      for (const auto &[mkey, mvalue] : value.items()) {
        if (!mvalue.is_string())
          return fail(error, "\"__metadata__\" entry " + quoted(mkey) +
                                 " is not a string");
        metadata_[mkey] = mvalue.get<std::string>();
      }
      continue;
    }

    Entry entry;
    if (!parseEntry(key, value, entry, error))
      return false;
    StTensor &t = entry.tensor;
    if (entry.end > dataSize)
      return fail(error, "tensor " + quoted(key) + " data [" +
                             std::to_string(entry.begin) + ", " +
                             std::to_string(entry.end) +
                             ") lies beyond the end of the data section (" +
                             std::to_string(dataSize) +
                             " bytes): file is truncated");
    int64_t numElements;
    uint64_t expectedBytes;
    if (!checkedByteSize(t.shape, t.dtype, numElements, expectedBytes))
      return fail(error, "tensor " + quoted(key) + " has shape " +
                             formatShape(t.shape) +
                             " whose element count overflows");
    uint64_t actualBytes = entry.end - entry.begin;
    if (actualBytes != expectedBytes)
      return fail(error, "tensor " + quoted(key) + " has " +
                             std::to_string(actualBytes) +
                             " bytes, but shape " + formatShape(t.shape) +
                             " of " + stDTypeName(t.dtype) + " needs " +
                             std::to_string(expectedBytes));
    t.data = dataSection + entry.begin;
    t.nbytes = static_cast<size_t>(actualBytes);
    entries.push_back(std::move(entry));
  }

  // Overlap check: sort by start and compare each non-empty range with the
  // furthest-reaching range before it. Empty tensors occupy no bytes, so
  // they cannot overlap anything, whatever their offset.
  std::vector<const Entry *> byOffset;
  for (const Entry &e : entries)
    if (e.begin != e.end)
      byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const Entry *a, const Entry *b) {
              return a->begin != b->begin ? a->begin < b->begin
                                          : a->end < b->end;
            });
  const Entry *reach = nullptr;
  for (const Entry *e : byOffset) {
    if (reach && e->begin < reach->end)
      return fail(error, "tensors " + quoted(reach->tensor.name) + " [" +
                             std::to_string(reach->begin) + ", " +
                             std::to_string(reach->end) + ") and " +
                             quoted(e->tensor.name) + " [" +
                             std::to_string(e->begin) + ", " +
                             std::to_string(e->end) + ") overlap");
    if (!reach || e->end > reach->end)
      reach = e;
  }

  tensors_.reserve(entries.size());
  for (Entry &e : entries)
    tensors_.push_back(std::move(e.tensor));
  std::sort(tensors_.begin(), tensors_.end(),
            [](const StTensor &a, const StTensor &b) { return a.name < b.name; });
  return true;
}

std::unique_ptr<SafetensorsFile>
SafetensorsFile::fromBuffer(const uint8_t *data, size_t size,
                            std::string *error) {
  try {
    if (!data && size != 0) {
      fail(error, "null buffer of non-zero size");
      return nullptr;
    }
    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    if (!file->parse(data, size, error))
      return nullptr;
    return file;
  } catch (const std::exception &e) {
    failNoThrow(error, "internal error while reading safetensors: ", e.what());
  } catch (...) {
    failNoThrow(error, "internal error while reading safetensors", "");
  }
  return nullptr;
}

std::unique_ptr<SafetensorsFile>
SafetensorsFile::open(const std::string &path, std::string *error) {
  try {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      fail(error, "cannot open file: " + errnoMessage(errno));
      return nullptr;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      fail(error, "cannot stat file: " + errnoMessage(err));
      return nullptr;
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(error, "not a regular file");
      return nullptr;
    }

    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    size_t size = static_cast<size_t>(st.st_size);
    // mmap rejects a zero length, so an empty file is left unmapped and
    // parse() reports it as truncated like any other short file.
    if (size != 0) {
      void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        fail(error, "cannot map file: " + errnoMessage(err));
        return nullptr;
      }
      file->mapping_ = p;
      file->mappingSize_ = size;
    }
    // The mapping keeps its own reference to the file, so the descriptor is
    // not needed past this point and holding it would only use up fds when
    // many weight files are open.
    ::close(fd);

    if (!file->parse(static_cast<const uint8_t *>(file->mapping_), size,
                     error))
      return nullptr; // ~SafetensorsFile unmaps.
    return file;
  } catch (const std::exception &e) {
    failNoThrow(error, "internal error while reading safetensors: ", e.what());
  } catch (...) {
    failNoThrow(error, "internal error while reading safetensors", "");
  }
  return nullptr;
}

const StTensor *SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const StTensor &t, std::string_view n) {
                               return std::string_view(t.name) < n;
                             });
  if (it == tensors_.end() || it->name != name)
    return nullptr;
  return &*it;
}

const std::vector<StTensor> &SafetensorsFile::tensors() const {
  return tensors_;
}

const std::map<std::string, std::string> &SafetensorsFile::metadata() const {
  return metadata_;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_)
    ::munmap(mapping_, mappingSize_);
}

} // namespace tfc
