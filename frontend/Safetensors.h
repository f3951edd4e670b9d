//===- Safetensors.h - Reader and writer for .safetensors files -*- C++ -*-===//
//
// Model weights reach the compiler as safetensors files: an 8-byte
// little-endian header length, a JSON header describing every tensor, then
// one flat data section. This reader memory-maps the file and validates the
// whole header up front, so that everything downstream (the frontend, constant
// folding, the weight packer) can trust shapes, dtypes and byte ranges
// without re-checking them. It deliberately has no MLIR/LLVM dependency so
// that small tools and tests can use it on their own.
//
// The writer exists for tests and tools that need to produce fixtures; it is
// not meant to be fast.
//
// No function declared here throws: failures are reported through a
// `std::string *error` out-parameter.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_FRONTEND_SAFETENSORS_H
#define TFC_FRONTEND_SAFETENSORS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tfc {

/// Element types a safetensors file may declare. Only the types the compiler
/// can actually consume are listed; files using others (F8_*, U16, ...) are
/// rejected at open time rather than failing later in some lowering.
enum class StDType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool };

/// Maps the safetensors spelling ("F64", "F32", "F16", "BF16", "I64", "I32",
/// "I16", "I8", "U8", "BOOL") to a StDType. The match is case-sensitive, as
/// in the format itself. Returns false and leaves |out| untouched if |s| is
/// not one of those names.
bool parseStDType(std::string_view s, StDType &out);

/// The safetensors spelling of |t|, e.g. "F32" or "BOOL"; never null.
const char *stDTypeName(StDType t);

/// "[2, 3]": a shape as error messages (here and in the weight store) print it.
std::string formatShape(const std::vector<int64_t> &shape);

/// Size in bytes of one element of |t| (BOOL is stored as one byte).
size_t stDTypeSize(StDType t);

/// One tensor of an open SafetensorsFile. All fields have been validated:
/// dimensions are non-negative, the element count fits in int64_t and
/// |nbytes| == numElements() * stDTypeSize(dtype).
struct StTensor {
  /// Key of the tensor in the JSON header.
  std::string name;
  /// Element type.
  StDType dtype;
  /// Dimensions, outermost first; empty for a scalar.
  std::vector<int64_t> shape;
  /// First byte of the tensor's data inside the mapped file (or the buffer
  /// given to fromBuffer). Valid while the owning SafetensorsFile lives. The
  /// format does not guarantee any alignment, so callers must not assume
  /// that this is aligned for the element type (use memcpy).
  const uint8_t *data;
  /// Size of the data in bytes.
  size_t nbytes;

  /// Product of the dimensions; 1 for a scalar (shape []), 0 if any dimension
  /// is 0.
  int64_t numElements() const;
};

/// A validated, read-only safetensors file. Either owns a private read-only
/// mapping of a file (open) or borrows a caller-owned buffer (fromBuffer).
class SafetensorsFile {
public:
  /// Maps |path| read-only (mmap) and validates it fully. Returns nullptr and
  /// sets *error (if |error| is non-null) on failure. The message does not
  /// mention |path|; the caller is expected to add the location.
  static std::unique_ptr<SafetensorsFile> open(const std::string &path,
                                               std::string *error);

  /// Same as open, over a caller-owned buffer that must outlive the returned
  /// object (tensor data pointers point into it).
  static std::unique_ptr<SafetensorsFile>
  fromBuffer(const uint8_t *data, size_t size, std::string *error);

  /// The tensor called |name|, or nullptr if there is none.
  const StTensor *find(std::string_view name) const;

  /// All tensors, sorted by name so that iteration order (and therefore any
  /// output derived from it) does not depend on the header's key order.
  const std::vector<StTensor> &tensors() const;

  /// The string-to-string "__metadata__" map of the header; empty if the
  /// header has none.
  const std::map<std::string, std::string> &metadata() const;

  /// Unmaps the file if open() mapped it.
  ~SafetensorsFile();

  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

private:
  SafetensorsFile() = default;

  /// Parses and validates [data, data + size) into this object.
  bool parse(const uint8_t *data, size_t size, std::string *error);

  std::vector<StTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  /// The mapping made by open(); null when not mapped (fromBuffer, or an
  /// empty file, which cannot be mapped).
  void *mapping_ = nullptr;
  size_t mappingSize_ = 0;
};

/// Describes one tensor to write: |data| must hold exactly
/// numElements(shape) * stDTypeSize(dtype) bytes, given in |nbytes|.
struct StTensorView {
  /// Key in the JSON header; must be unique and not "__metadata__".
  std::string name;
  /// Element type.
  StDType dtype;
  /// Dimensions, outermost first; empty for a scalar.
  std::vector<int64_t> shape;
  /// The tensor's bytes, in the file's (little-endian, row-major) layout.
  /// May be null only if |nbytes| is 0.
  const void *data;
  /// Size of |data| in bytes.
  size_t nbytes;
};

/// Writes a safetensors file (used by tests and tools). Tensors are laid out
/// in the order given and the header is padded with spaces to a multiple of
/// 8 bytes. Writes to a temp file next to |path| then renames it over |path|,
/// so a failed write never leaves a half-written file. Returns false and sets
/// *error (if |error| is non-null) on failure, including when the inputs
/// are inconsistent (bad shape, size mismatch, duplicate names).
bool writeSafetensors(const std::string &path,
                      const std::vector<StTensorView> &tensors,
                      const std::map<std::string, std::string> &metadata,
                      std::string *error);

/// A sharded checkpoint's `model.safetensors.index.json` (Hugging Face): its
/// "weight_map" from tensor name to shard file name.
struct SafetensorsIndex {
  /// Shard file names as written in the index (relative to its directory), each
  /// once, in the order of first appearance.
  std::vector<std::string> shards;
  /// Tensor name -> shard file name.
  std::map<std::string, std::string> weightMap;
};

/// Reads and checks |path| as a safetensors index (a JSON object whose
/// "weight_map" maps names to plain file names, no '/' or ".."). Returns false
/// and sets *error on failure; the message does not mention |path|.
bool readSafetensorsIndex(const std::string &path, SafetensorsIndex &out,
                          std::string *error);

} // namespace tfc

#endif // TFC_FRONTEND_SAFETENSORS_H
