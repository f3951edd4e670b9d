//===- SafetensorsWriter.cpp - Writer for .safetensors files --------------===//
//
// writeSafetensors, declared in Safetensors.h: it validates every tensor
// before touching the file system, then writes a temporary file next to the
// destination and renames it into place, so that a reader never sees a
// half-written file. nlohmann-json throws (a name that is not UTF-8); the
// public entry point funnels its work through a try/catch, as the reader's do.
//
//===----------------------------------------------------------------------===//

#include "frontend/Safetensors.h"
#include "frontend/SafetensorsInternal.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cerrno>
#include <set>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

namespace tfc {

using json = nlohmann::json;
using namespace st_detail;

namespace {

/// Owns the temporary file of writeSafetensors, removing it on every path
/// that does not end in a successful rename.
struct TempFile {
  std::string path;
  int fd = -1;
  bool committed = false;

  ~TempFile() {
    if (fd >= 0)
      ::close(fd);
    if (!committed && !path.empty())
      ::unlink(path.c_str());
  }
};

bool writeAll(int fd, const char *p, size_t n, std::string *error) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return fail(error, "cannot write temporary file: " + errnoMessage(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool writeSafetensorsImpl(const std::string &path,
                          const std::vector<StTensorView> &tensors,
                          const std::map<std::string, std::string> &metadata,
                          std::string *error) {
  // Validate everything before touching the file system, so that bad input
  // cannot even leave a temporary file behind.
  json header = json::object();
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const StTensorView &t : tensors) {
    if (t.name == "__metadata__")
      return fail(error, "tensor name \"__metadata__\" is reserved");
    if (!names.insert(t.name).second)
      return fail(error, "duplicate tensor name " + quoted(t.name));
    for (int64_t d : t.shape)
      if (d < 0)
        return fail(error, "tensor " + quoted(t.name) +
                               " has negative dimension " + std::to_string(d) +
                               " in shape " + formatShape(t.shape));
    int64_t numElements;
    uint64_t expectedBytes;
    if (!checkedByteSize(t.shape, t.dtype, numElements, expectedBytes))
      return fail(error, "tensor " + quoted(t.name) + " has shape " +
                             formatShape(t.shape) +
                             " whose element count overflows");
    if (t.nbytes != expectedBytes)
      return fail(error, "tensor " + quoted(t.name) + " has " +
                             std::to_string(t.nbytes) + " bytes, but shape " +
                             formatShape(t.shape) + " of " +
                             stDTypeName(t.dtype) + " needs " +
                             std::to_string(expectedBytes));
    if (!t.data && t.nbytes != 0)
      return fail(error, "tensor " + quoted(t.name) + " has no data");
    header[t.name] = {{"dtype", stDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  if (!metadata.empty())
    header["__metadata__"] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception &e) {
    // Thrown for names or metadata that are not valid UTF-8.
    return fail(error,
                "cannot encode header as JSON: " + shortJsonMessage(e.what()));
  }
  // Padding keeps the data section 8-byte aligned relative to the file
  // start, as the reference writer does; readers ignore trailing spaces.
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxHeaderSize)
    return fail(error, "header would be " + std::to_string(text.size()) +
                           " bytes, above the 100 MiB limit readers accept");

  // The temp file lives next to |path| so that rename() stays within one
  // file system and is therefore atomic. O_EXCL plus a per-process counter
  // keeps concurrent writers (threads or processes) from sharing one.
  static std::atomic<unsigned> counter{0};
  TempFile tmp;
  for (int attempt = 0;; ++attempt) {
    tmp.path = path + ".tmp." + std::to_string(::getpid()) + "." +
               std::to_string(counter++);
    tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                    0666);
    if (tmp.fd >= 0)
      break;
    int err = errno;
    if (err != EEXIST || attempt >= 100) {
      tmp.path.clear(); // Nothing was created, so nothing to unlink.
      return fail(error, "cannot create temporary file: " + errnoMessage(err));
    }
  }

  char prefix[kPrefixSize];
  writeLE64(text.size(), prefix);
  if (!writeAll(tmp.fd, prefix, sizeof(prefix), error) ||
      !writeAll(tmp.fd, text.data(), text.size(), error))
    return false;
  for (const StTensorView &t : tensors)
    if (t.nbytes != 0 &&
        !writeAll(tmp.fd, static_cast<const char *>(t.data), t.nbytes, error))
      return false;

  // Without fsync a crash shortly after the rename could leave a complete
  // name pointing at incomplete contents, defeating the point of renaming.
  if (::fsync(tmp.fd) != 0)
    return fail(error, "cannot sync temporary file: " + errnoMessage(errno));
  int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0)
    return fail(error, "cannot close temporary file: " + errnoMessage(errno));
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    return fail(error, "cannot rename temporary file into place: " +
                           errnoMessage(errno));
  tmp.committed = true;
  return true;
}

} // namespace

bool writeSafetensors(const std::string &path,
                      const std::vector<StTensorView> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string *error) {
  try {
    return writeSafetensorsImpl(path, tensors, metadata, error);
  } catch (const std::exception &e) {
    failNoThrow(error, "internal error while writing safetensors: ", e.what());
  } catch (...) {
    failNoThrow(error, "internal error while writing safetensors", "");
  }
  return false;
}

} // namespace tfc
