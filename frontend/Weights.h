//===- Weights.h - the model's named weights: checkpoint or seeded init ---===//
//
// The IR names weights (`tfc.weight "encoder.layers.0.attn.q_linear.weight"`); the
// data lives here. A WeightStore is told every weight the model uses, with the
// shape the model expects. With a checkpoint it checks presence, dtype and shape
// at that moment, so the error can point at the YAML line that asked for the
// weight. Without one it generates a deterministic Xavier-uniform initialisation.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_FRONTEND_WEIGHTS_H
#define TFC_FRONTEND_WEIGHTS_H

#include "frontend/Safetensors.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tfc {

/// What a weight is for; decides its initialisation when there is no checkpoint.
enum class WeightRole {
  Matrix,    ///< linear weights and embedding tables: Xavier uniform
  Bias,      ///< zeros
  Gain,      ///< ones
  Shift,     ///< zeros
};

/// One weight the model uses.
struct WeightInfo {
  std::string name;           ///< the model's name (as in the IR)
  std::string checkpointName; ///< after the rename map
  std::vector<int64_t> shape;
  WeightRole role;
};

class WeightStore {
public:
  /// Opens |path| as the checkpoint: one safetensors file, or a sharded
  /// checkpoint's `*.safetensors.index.json` (its shards are read from the index's
  /// directory). Returns false and sets |error| on failure.
  bool openCheckpoint(const std::string &path, std::string &error);
  bool hasCheckpoint() const { return !files.empty(); }
  const std::string &checkpointPath() const { return path; }

  /// Seed for the initialisation used when there is no checkpoint.
  void setSeed(uint64_t s) { seed = s; }

  /// Adds a rename rule: a model name starting with |from| is looked up in the
  /// checkpoint with |from| replaced by |to|. The longest matching rule wins.
  void addRename(const std::string &from, const std::string &to);

  /// Declares that the model uses weight |name| with |shape|. Checks it against
  /// the checkpoint if one is open. Declaring the same name twice (tied weights)
  /// requires the same shape. Returns false and sets |error| otherwise.
  bool declare(const std::string &name, const std::vector<int64_t> &shape,
               WeightRole role, std::string &error);

  /// Marks checkpoint tensors whose names match as known though unused (buffers
  /// such as a registered positional-encoding table). Returns true if present.
  bool accept(const std::string &name);

  /// Checkpoint tensors that no declare() or accept() touched, sorted.
  std::vector<std::string> unusedCheckpointTensors() const;

  /// The weights declared so far, in declaration order.
  const std::vector<WeightInfo> &weights() const { return declared; }

  /// The f32 data of a declared weight: converted from the checkpoint, or
  /// generated from the seed. Empty if |name| was not declared.
  std::vector<float> materialize(const std::string &name) const;
  /// How many elements of declared weight |name|'s checkpoint tensor are NaN or
  /// infinite (0 without a checkpoint), and the flat index of the first.
  uint64_t countNonFinite(const std::string &name, uint64_t &first) const;

  /// Total bytes of the declared weights in f32.
  uint64_t totalBytes() const;

private:
  std::string rename(const std::string &name) const;
  /// The checkpoint tensor |name| (in whichever shard holds it), or nullptr.
  const StTensor *find(const std::string &name) const;

  std::string path;
  std::vector<std::unique_ptr<SafetensorsFile>> files; // one, or the shards
  std::map<std::string, const StTensor *> tensors;    // into |files|
  uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> renames;
  std::vector<WeightInfo> declared;
  std::map<std::string, size_t> index;
  std::map<std::string, bool> used; // checkpoint names touched
};


} // namespace tfc

#endif // TFC_FRONTEND_WEIGHTS_H
