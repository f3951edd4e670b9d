//===- format/metadata.h - model.bin's metadata records, described once ---===//
//
// The metadata section of model.bin (docs/model-bin.md) as plain structs, and
// its layout described once: metadata.cc's describe() names every record with
// its key and type, in file order, with the format version that added it (as
// GGUF describes its key-value records). The compiler's PlanWriter fills a
// Metadata and encodes it; the runtime's loader decodes one and validates the
// cross-references. Both go through that one description, so the writer and
// the reader cannot disagree on a field, and a version's additions are one
// `if (io.version() >= N)` in one place.
//
// No MLIR: the runtime links this.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_FORMAT_METADATA_H
#define TFC_FORMAT_METADATA_H

#include "format/model_bin.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tfc::format {

/// "No value" in a value-index field.
constexpr uint32_t kNoValue = UINT32_MAX;

/// How a weight's stored elements become real numbers (format version 6):
/// real[r, j] = scales[r, j / group] * stored[r, j] (minus the zero point, where
/// there is one). A weight of a float dtype has none of this.
struct WeightQuant {
  uint32_t scales = kNoValue; ///< the f32 weight [rows] or [rows, K / group]
  uint32_t zeros = kNoValue;  ///< its zero points, like scales; kNoValue: symmetric
  uint32_t group = 0;         ///< elements per scale along a row; 0: the whole row
  /// The bits a group-wise weight's activation blocks are quantized to at
  /// run time (version 9): 0 the default (int8 16, int4 8), or 8.
  uint32_t actBits = 0;
  bool quantized() const { return scales != kNoValue; }
};

struct ValueRecord {
  uint32_t dtype = 0;        ///< tfc_dtype_t
  std::vector<int64_t> dims; ///< >= 0 constant, < 0 symbol -(d + 1)
  uint32_t storage = 0;      ///< tfc_storage_t
  uint64_t offset = 0;       ///< input index, weight/arena/state byte offset, view source
  WeightQuant quant;         ///< weights only
};

struct BindingRecord {
  std::string name;
  uint32_t value = 0;
};

struct FunctionRecord {
  std::string name;
  std::vector<ValueRecord> values;
  std::vector<BindingRecord> inputs, outputs;
  std::vector<Instr> plan;
  uint64_t arenaSize = 0;
};

struct SymbolRecord {
  std::string name;
  int64_t max = 0;
};

/// The generation record: the target input and the special ids (version 2),
/// the forced ids (4), generation_config.json's defaults (5). The defaults
/// here are what a file of an older version means.
struct GenerationRecord {
  bool present = false;
  std::string target;
  int64_t bos = -1, eos = -1, pad = 0;
  int64_t maxLen = 0;
  int64_t forcedBos = -1, forcedEos = -1;
  int64_t numBeams = 1, maxLength = 0, minLength = 0, noRepeatNgram = 0, earlyStopping = 1,
          suppress = -1;
  double lengthPenalty = 1.0;
  /// More end-of-sequence ids besides eos (version 7): generation_config.json's
  /// eos_token_id list (Llama 3's); any of them ends a sequence.
  std::vector<int64_t> moreEos;
  /// Sampling defaults (version 7): generation_config.json's do_sample,
  /// temperature, top_k and top_p (off, 1, 0 and 1 unless the description says;
  /// the Hugging Face descriptions default top_k to transformers' 50).
  int64_t sample = 0, topK = 0;
  double temperature = 1.0, topP = 1.0;
};

/// An optional @forward input and how it is made when left out (version 4).
struct InputDefaultRecord {
  uint32_t input = 0, kind = 0, source = 0; ///< kind: tfc_input_default_t
  int64_t value = 0;
};

struct Metadata {
  std::string producer, model;
  std::vector<SymbolRecord> symbols;
  std::vector<FunctionRecord> functions;
  uint64_t stateSize = 0;
  GenerationRecord gen;
  std::vector<InputDefaultRecord> inputDefaults;
};

/// The metadata section at TFC_FORMAT_VERSION.
std::string encodeMetadata(const Metadata &m);

/// Reads a metadata section of format |version|: "" or what is malformed,
/// naming the record ("functions[1].values[7].dims"). Only the layout is
/// checked here; the loader checks what the records say.
std::string decodeMetadata(const uint8_t *data, size_t size, uint32_t version, Metadata &m);

} // namespace tfc::format

#endif // TFC_FORMAT_METADATA_H
