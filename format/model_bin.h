//===- model_bin.h - the model.bin container, for writer and loader -*- C++ -*-===//
//
// What the compiler's PlanWriter writes and the runtime's loader reads, in one
// place: the 64-byte header, the plan instruction, the little-endian record
// writer and its bounds-checked reader, the checksum and the producer string.
// No MLIR: the runtime links it too. The layout is docs/model-bin.md; the
// shared constants (magic, version, alignment, kernel ids) are tfc/abi.h.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_FORMAT_MODEL_BIN_H
#define TFC_FORMAT_MODEL_BIN_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tfc::format {

/// The header at offset 0 of every model.bin, little-endian.
struct Header {
  char magic[8];          ///< TFC_MAGIC
  uint32_t version;       ///< TFC_FORMAT_VERSION
  uint32_t headerSize;    ///< sizeof(Header)
  uint64_t fileSize;      ///< the whole file
  uint64_t checksum;      ///< of every byte after the header (checksum())
  uint64_t metaOffset, metaSize;
  uint64_t weightsOffset; ///< a multiple of TFC_WEIGHT_ALIGN
  uint64_t weightsSize;
};
static_assert(sizeof(Header) == 64 && offsetof(Header, version) == 8 &&
                  offsetof(Header, fileSize) == 16 && offsetof(Header, checksum) == 24 &&
                  offsetof(Header, metaOffset) == 32 && offsetof(Header, weightsSize) == 56,
              "the header layout of docs/model-bin.md");
constexpr uint64_t kHeaderSize = sizeof(Header);

/// One plan instruction: a kernel (tfc/kernels.def) reading value ids and
/// writing one, with its int and float attributes.
struct Instr {
  uint32_t kernel = 0;
  std::vector<uint32_t> inputs;
  uint32_t output = 0;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

/// "tfc <version>", the version being CMake's project version.
const char *producer();

/// Little-endian record writer for the metadata section.
struct Writer {
  std::string buf;
  void u32(uint32_t v) { buf.append(reinterpret_cast<const char *>(&v), 4); }
  void u64(uint64_t v) { buf.append(reinterpret_cast<const char *>(&v), 8); }
  void i64(int64_t v) { u64((uint64_t)v); }
  void f64(double v) { buf.append(reinterpret_cast<const char *>(&v), 8); }
  void str(std::string_view s) {
    u32((uint32_t)s.size());
    buf.append(s.data(), s.size());
  }
  void instr(const Instr &in);
};

/// Bounds-checked little-endian reader: past the end, every read returns 0
/// and ok() turns false for good.
class Reader {
public:
  Reader(const uint8_t *p, size_t n) : p(p), n(n) {}
  bool ok() const { return !failed; }
  uint32_t u32() { return take<uint32_t>(); }
  uint64_t u64() { return take<uint64_t>(); }
  int64_t i64() { return take<int64_t>(); }
  double f64() { return take<double>(); }
  std::string str();
  /// A count that cannot exceed what the remaining bytes could hold.
  uint32_t count(size_t minItemBytes);
  Instr instr();
  bool atEnd() const { return pos == n; }

private:
  template <typename T> T take() {
    T v{};
    if (failed || sizeof(T) > n - pos) {
      failed = true;
      return v;
    }
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  const uint8_t *p;
  size_t n, pos = 0;
  bool failed = false;
};

/// The whole file: header, the metadata at kHeaderSize, the weights at the
/// next multiple of TFC_WEIGHT_ALIGN, and the checksum over all after the
/// header.
std::string assemble(std::string_view meta, std::string_view weights);

/// The checksum of format |version| over |n| bytes: XXH3 64 (seed 0) from
/// version 4 on, FNV-1a 64 before.
uint64_t checksum(uint32_t version, const void *data, size_t n);

/// Writes the right checksum (and file size) into the header of a whole file
/// in |buf|, for tools and tests that edit a model.bin on purpose.
void fixChecksum(uint8_t *buf, size_t size);

/// Reads and checks the header of a |size|-byte file against it: sizes,
/// sections inside the file, and the checksum. Returns "" or what is wrong;
/// |unsupported| is set when the only fault is the format version.
///
/// With |dropPages|, |data| is a read-only private file mapping (page-aligned)
/// and the pages are dropped from the process (madvise MADV_DONTNEED) as they
/// are hashed: they stay in the page cache and fault back in from it when
/// used, so checking a model does not make all of it resident.
std::string readHeader(const uint8_t *data, size_t size, Header &h, bool &unsupported,
                       bool dropPages = false);

} // namespace tfc::format

#endif
