//===- model_bin.cc - the model.bin container -----------------------------===//
#include "format/model_bin.h"

#include "tfc/abi.h"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>
// XXH3 from Debian's libxxhash (the reference implementation, used by zstd and
// LZ4): a non-cryptographic hash at memory speed. The checksum guards against
// corruption only; docs/model-bin.md says why it is no defence against a
// crafted file.
#include <xxhash.h>

namespace tfc::format {

const char *producer() { return "tfc " TFC_VERSION_STRING; }

void Writer::instr(const Instr &in) {
  u32(in.kernel);
  u32((uint32_t)in.inputs.size());
  for (uint32_t v : in.inputs)
    u32(v);
  u32(in.output);
  u32((uint32_t)in.ints.size());
  for (int64_t v : in.ints)
    i64(v);
  u32((uint32_t)in.floats.size());
  for (double v : in.floats)
    f64(v);
}

std::string Reader::str() {
  uint32_t len = u32();
  if (failed || len > n - pos) {
    failed = true;
    return {};
  }
  std::string s(reinterpret_cast<const char *>(p + pos), len);
  pos += len;
  return s;
}

uint32_t Reader::count(size_t minItemBytes) {
  uint32_t c = u32();
  if (!failed && minItemBytes && c > (n - pos) / minItemBytes)
    failed = true;
  return failed ? 0 : c;
}

Instr Reader::instr() {
  Instr in;
  in.kernel = u32();
  uint32_t ni = count(4);
  for (uint32_t k = 0; k < ni; ++k)
    in.inputs.push_back(u32());
  in.output = u32();
  uint32_t nint = count(8);
  for (uint32_t k = 0; k < nint; ++k)
    in.ints.push_back(i64());
  uint32_t nfl = count(8);
  for (uint32_t k = 0; k < nfl; ++k)
    in.floats.push_back(f64());
  return in;
}

std::string assemble(std::string_view meta, std::string_view weights) {
  Header h{};
  std::memcpy(h.magic, TFC_MAGIC, 8);
  h.version = TFC_FORMAT_VERSION;
  h.headerSize = kHeaderSize;
  h.metaOffset = kHeaderSize;
  h.metaSize = meta.size();
  h.weightsOffset =
      (h.metaOffset + h.metaSize + TFC_WEIGHT_ALIGN - 1) / TFC_WEIGHT_ALIGN * TFC_WEIGHT_ALIGN;
  h.weightsSize = weights.size();
  h.fileSize = h.weightsOffset + h.weightsSize;
  std::string file(h.fileSize, '\0');
  std::memcpy(&file[h.metaOffset], meta.data(), meta.size());
  if (!weights.empty())
    std::memcpy(&file[h.weightsOffset], weights.data(), weights.size());
  h.checksum = checksum(h.version, file.data() + kHeaderSize, h.fileSize - kHeaderSize);
  std::memcpy(&file[0], &h, sizeof h);
  return file;
}

uint64_t checksum(uint32_t version, const void *data, size_t n) {
  return version >= 4 ? XXH3_64bits(data, n) : tfc_fnv1a64(data, n);
}

void fixChecksum(uint8_t *buf, size_t size) {
  if (size < kHeaderSize)
    return;
  Header h;
  std::memcpy(&h, buf, sizeof h);
  h.fileSize = size;
  h.checksum = checksum(h.version, buf + kHeaderSize, size - kHeaderSize);
  std::memcpy(buf, &h, sizeof h);
}

namespace {
/// The checksum of a mapping, dropping each chunk's pages once hashed.
uint64_t checksumDropping(uint32_t version, const uint8_t *data, size_t size) {
  if (version < 4) // FNV-1a has no streaming state here: one pass, no dropping
    return checksum(version, data + kHeaderSize, size - kHeaderSize);
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  constexpr size_t kChunk = size_t(8) << 20;
  XXH3_state_t *st = XXH3_createState();
  if (!st)
    return checksum(version, data + kHeaderSize, size - kHeaderSize);
  XXH3_64bits_reset(st);
  for (size_t pos = kHeaderSize; pos < size;) {
    const size_t end = std::min(size, (pos / kChunk + 1) * kChunk);
    XXH3_64bits_update(st, data + pos, end - pos);
    // Whole pages only; |data| is page-aligned, so chunk starts are too.
    const size_t lo = pos / page * page, hi = end == size ? end : end / page * page;
    madvise(const_cast<uint8_t *>(data) + lo, hi - lo, MADV_DONTNEED);
    pos = end;
  }
  uint64_t sum = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return sum;
}
} // namespace

std::string readHeader(const uint8_t *data, size_t size, Header &h, bool &unsupported,
                       bool dropPages) {
  unsupported = false;
  if (!data || size < kHeaderSize)
    return "model.bin is truncated: " + std::to_string(size) + " bytes, the header alone is " +
           std::to_string(kHeaderSize);
  std::memcpy(&h, data, sizeof h);
  if (std::memcmp(h.magic, TFC_MAGIC, 8) != 0)
    return "not a model.bin: wrong magic (expected 'TFCMODEL')";
  if (h.version < TFC_FORMAT_MIN_VERSION || h.version > TFC_FORMAT_VERSION) {
    unsupported = true;
    return "model.bin format version " + std::to_string(h.version) +
           " is not supported (this runtime reads versions " +
           std::to_string(TFC_FORMAT_MIN_VERSION) + " to " + std::to_string(TFC_FORMAT_VERSION) +
           "); recompile it with tfc";
  }
  if (h.headerSize != kHeaderSize)
    return "model.bin header size " + std::to_string(h.headerSize) + " is not " +
           std::to_string(kHeaderSize);
  if (h.fileSize != size)
    return "model.bin is truncated or padded: header says " + std::to_string(h.fileSize) +
           " bytes, got " + std::to_string(size);
  if (h.metaOffset < kHeaderSize || h.metaOffset > size || h.metaSize > size - h.metaOffset ||
      h.weightsOffset > size || h.weightsSize > size - h.weightsOffset ||
      h.weightsOffset % TFC_WEIGHT_ALIGN != 0)
    return "model.bin sections lie outside the file";
  const uint64_t sum = dropPages ? checksumDropping(h.version, data, size)
                                 : checksum(h.version, data + kHeaderSize, size - kHeaderSize);
  if (sum != h.checksum)
    return "model.bin checksum mismatch: the file is corrupt";
  return "";
}

} // namespace tfc::format
