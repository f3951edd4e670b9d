//===- session.h - one session's state, whatever its device ---------------===//
//
// Internal to libtfrun. A session is a model, a Device (device.h), the inputs
// the user bound, and per function its arena and the tensor views of its last
// run. One layout serves the CPU and CUDA: the device decides where memory
// lives. The executor (executor.h) runs functions over it; generation
// (step_model.cc) drives @encode / @decode_step through the executor; the C
// API (capi.cc) wraps it as tfrun_session_t.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_SESSION_H
#define TFC_RUNTIME_SESSION_H

#include "runtime/device.h"
#include "runtime/generate.h"
#include "runtime/model.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct tfrun_generate_options_t;

namespace tfrun::rt {

struct Session {
  const Model *m = nullptr;
  std::unique_ptr<Device> dev;
  std::string deviceText;

  /// The inputs the user bound (by @forward's input names), token ids widened to i64.
  struct Input {
    bool bound = false;
    bool defaulted = false; ///< made from its source by fillDefaults, not set by the caller
    std::vector<int64_t> shape;
    std::vector<int64_t> ids;
  };
  std::vector<Input> inputs;

  /// Per function: its arena and weights on the device (set up on its first
  /// run, @forward's at creation), the tensors of its last run, and the
  /// outputs of the last run where the host cannot read them in place.
  struct FnState {
    bool prepared = false;
    void *arena = nullptr;
    uint64_t arenaBytes = 0; ///< allocated; grows to the largest run's plan
    /// Per value: the first and last instruction that touch its storage (an
    /// arena value's, through its views too); -1 for other storage.
    std::vector<std::pair<int32_t, int32_t>> live;
    /// Arena plans for the actual dims (executor.cc's planArena), the most
    /// recent first: the symbol values, each arena value's offset, the size.
    struct Plan {
      std::vector<int64_t> sym;
      std::vector<uint64_t> offsets;
      uint64_t size = 0;
    };
    std::vector<Plan> plans;
    std::vector<uint32_t> dtypes; ///< each value's dtype on the device
    std::vector<void *> weightPtrs;
    std::vector<const void *> weightPacks;
    std::vector<std::pair<void *, size_t>> devInputs; ///< device copies of the inputs
    std::vector<tfc::Tensor> tensors;
    std::map<uint32_t, std::vector<float>> hostOutputs; ///< downloaded, widened to f32
  };
  std::vector<FnState> fns;
  /// The KV caches: one slot per decode_step state value, each [stateRows,
  /// stateLen, width], sized to the request by reserveState (generate), not
  /// to the declared maxima. stateSlots maps a slot's model.bin offset to its
  /// byte offset in |state|.
  void *state = nullptr;
  uint64_t stateBytes = 0; ///< allocated
  int64_t stateRows = 0, stateLen = 0;
  std::map<uint64_t, uint64_t> stateSlots;
  /// The largest arena and KV cache of any run so far, bytes.
  uint64_t peakArena = 0, peakState = 0;
  int lastRun = -1;      ///< the function whose outputs get_output reads

  bool profiling = false;
  /// Per (kernel, precision label): total milliseconds and calls.
  struct KernelTime {
    double ms = 0;
    uint64_t calls = 0;
  };
  std::map<std::pair<uint32_t, std::string>, KernelTime> kernelTimes;
  std::string profileText;

  /// The last generate's results.
  std::vector<std::vector<int64_t>> generated;
  std::vector<float> scores;

  Session() = default;
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  ~Session();

  /// A session of |model| on |dev|: binds the model to the device and
  /// prepares @forward, so a model too large for the device fails here.
  static Status create(const Model &model, std::unique_ptr<Device> dev,
                       std::unique_ptr<Session> &out);
  /// Binds @forward's input |name|: token ids of |dtype| (TFC_DTYPE_I64 or
  /// _I32), checked against the declared shape and maxima.
  Status setInput(const char *name, uint32_t dtype, const int64_t *shape, size_t rank,
                  const void *data);
  /// @forward on the bound inputs.
  Status run();
  /// Makes every optional input the caller left out from its source input
  /// (Model::inputDefaults), again before each run, as the source may change.
  void fillDefaults();
  /// KV caches for |rows| rows of |len| positions: the layout of every cache
  /// slot of decode_step, and memory for it (grown, zeroed, when it is larger
  /// than what the session has). At most the declared maxima; with |blocks|
  /// the rows are an engine's KV blocks (read through step.blocks), which the
  /// batch's maximum does not bound.
  Status reserveState(int64_t rows, int64_t len, bool blocks = false);
  /// Runs the decoding loop (docs/generation.md) on the bound inputs;
  /// |onToken|, when set, streams the new tokens (SearchOptions::onToken).
  Status generate(const tfrun_generate_options_t &o,
                  std::function<bool(size_t, int64_t, int64_t, float)> onToken = {});
  /// Output |value| of function |fn|'s last run, as f32 in host memory.
  const float *hostOutput(size_t fn, uint32_t value) const;
  /// The profile table of the kernel times so far.
  const std::string &profile();
};

/// One KV cache of decode_step: a state slot, its width (its positions are
/// the session's stateLen) and a decode_step value stored in it.
struct StateCache {
  uint64_t offset = 0;
  int64_t width = 0;
  uint32_t value = 0;
  /// Bytes per element where the cache lives (a device session's compute
  /// dtype may differ from model.bin's f32).
  uint64_t elemSize(const Session &s, size_t fn) const {
    const auto &dts = s.fns[fn].dtypes;
    return tfc_dtype_bytes(value < dts.size() ? dts[value] : TFC_DTYPE_F32, 1);
  }
};
/// decode_step's KV caches, one per state slot, in value order.
std::vector<StateCache> stateCaches(const Function &dec);

/// What a generate call decodes (step_model.cc): the search options from the C
/// options and the model's defaults, the prompts (decoder-only: each row's
/// prompt without its trailing pad_id; encoder-decoder: {bos} per source), the
/// batch, and the KV positions it needs (the longest prompt and every new token
/// but the last). Session::generate and the Engine share it.
struct GenerationPlan {
  SearchOptions opt;
  std::vector<std::vector<int64_t>> prompts;
  int64_t batch = 0;
  int64_t positions = 1;
  bool encDec = false;
};
/// |inputs| by @forward input index, defaults filled; the first problem as
/// InvalidArgument.
Status planGeneration(const Model &m, const std::vector<Session::Input> &inputs,
                      const tfrun_generate_options_t &o,
                      std::function<bool(size_t, int64_t, int64_t, float)> onToken,
                      GenerationPlan &plan);

} // namespace tfrun::rt

#endif // TFC_RUNTIME_SESSION_H
