//===- model.h - the runtime's view of a loaded model.bin -----------------===//
//
// Internal to libtfrun. Parses and validates a model.bin (docs/model-bin.md) into
// plain structs the executor walks. Every index, offset and size is checked here,
// once, so the executor can trust them.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_MODEL_H
#define TFC_RUNTIME_MODEL_H

#include "format/metadata.h"
#include "format/model_bin.h"
#include "tfc/abi.h"
#include "tfc/status.h"

#include <cstdint>
#include <memory>
#include <sys/mman.h>
#include <unistd.h>
#include <string>
#include <vector>

namespace tfrun::rt {

using tfc::Code;
using tfc::Status;

enum class Storage : uint32_t { Input = 0, Weight = 1, Arena = 2, View = 3, State = 4 };

struct ValueDesc {
  uint32_t dtype;
  std::vector<int64_t> dims; ///< >= 0 constant, < 0 symbol -(d + 1)
  Storage storage;
  uint64_t offset;           ///< input index, weight/arena byte offset, or view source
  /// A quantized weight's descriptor (format/metadata.h): its scales (and
  /// zero points) as other weight values, and its group size.
  tfc::format::WeightQuant quant;
};

using Instr = tfc::format::Instr;

struct Binding {
  std::string name;
  uint32_t value;
};

/// One entry point: @forward, or the derived @encode / @decode_step.
struct Function {
  std::string name;
  std::vector<ValueDesc> values;
  std::vector<Binding> inputs, outputs;
  std::vector<Instr> plan;
  uint64_t arenaSize = 0;
  int findInput(const std::string &n) const {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].name == n)
        return (int)i;
    return -1;
  }
};

/// What generation needs to know (docs/generation.md); absent for models
/// without a decoder.
/// The generation record (format/metadata.h): the target input, the special
/// ids, the KV-cache positions (maxLen), transformers' forced ids (-1: none)
/// and generation_config.json's defaults (num_beams, max_length (total, decoder
/// start or prompt included; 0: none), min_length, no_repeat_ngram_size (0:
/// off), early_stopping (0 False, 1 True, 2 "never"), one suppressed token
/// (bad_words_ids; -1: none) and length_penalty).
using GenerationInfo = tfc::format::GenerationRecord;

/// How an optional @forward input is made when the caller leaves it out
/// (tfc_input_default_t); kind 0: required.
struct InputDefault {
  uint32_t kind = 0;
  uint32_t source = 0; ///< the @forward input it is made from (same shape)
  int64_t value = 0;   ///< NOT_EQUAL: the id compared with (pad_id)
};

/// An immutable, validated model. Shared by sessions on any thread.
struct Model {
  std::string producer, name;
  std::vector<std::string> symbolNames;
  std::vector<int64_t> symbolMax;
  /// A dim's largest value: itself when static, its symbol's declared maximum
  /// when symbolic (-(k + 1) for symbol k; the loader checked k).
  int64_t maxDim(int64_t d) const { return d >= 0 ? d : symbolMax[-(d + 1)]; }
  std::vector<Function> functions; ///< functions[0] is @forward
  uint64_t stateSize = 0;          ///< session state (KV caches), bytes
  GenerationInfo gen;
  std::vector<InputDefault> inputDefaults; ///< per @forward input
  std::vector<uint8_t> bytes;       ///< owned copy (buffer loads), 64-byte aligned base
  void *mapping = nullptr;          ///< read-only mmap of the file (file loads)
  size_t mappingSize = 0;
  ~Model();
  const uint8_t *weights = nullptr; ///< start of the weights section in |bytes|
  uint64_t weightsSize = 0;

  /// For a mapped file: drops the whole pages of weights bytes [offset,
  /// offset + bytes) from the process, once a device has its own copy (a
  /// packed or uploaded one). They stay in the page cache and fault back in
  /// if read again, so the weights are resident once. No-op for buffer loads,
  /// whose bytes are the only copy.
  /// Inline: the CUDA plugin (cuda_plugin.h) calls it too.
  void dropWeightPages(uint64_t offset, uint64_t bytes) const {
    if (!mapping || offset > weightsSize || bytes > weightsSize - offset)
      return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = reinterpret_cast<uintptr_t>(weights + offset), hi = lo + bytes;
    lo = (lo + page - 1) / page * page; // whole pages inside the range only
    hi = hi / page * page;
    if (hi > lo)
      madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_DONTNEED);
  }

  const Function &forward() const { return functions[0]; }
  const Function *find(const std::string &n) const {
    for (const Function &f : functions)
      if (f.name == n)
        return &f;
    return nullptr;
  }
};

/// Parses |data| (copied into the model). InvalidModel on any inconsistency.
Status loadModel(const uint8_t *data, size_t size, std::unique_ptr<Model> &out);

/// Maps |path| read-only and parses it in place: the weights are used straight
/// from the page cache, never copied.
Status loadModelFile(const char *path, std::unique_ptr<Model> &out);

/// Bytes per element of a tfc_dtype_t.

} // namespace tfrun::rt

#endif // TFC_RUNTIME_MODEL_H
