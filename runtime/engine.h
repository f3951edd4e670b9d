//===- engine.h - many generation requests on one model: continuous batching ===//
//
// Internal to libtfrun; the C API wraps it as tfrun_engine_t (docs/c-api.md,
// "Engine"), and docs/generation.md ("The engine") describes its scheduling.
//
// An Engine owns one Session on one device: the model's weights, the arenas,
// and a paged KV cache: a pool of blocks of a few positions of every layer's
// K and V (runtime/kv_blocks.h), one block table per row. Requests are
// queued; each step, the scheduler admits waiting requests while their rows
// fit in the step and their prompts in the free blocks, and runs one
// decode_step over the rows of every running request, each row at its own
// position, through its own block table (step.pos, step.blocks). A request's
// prompt is prefilled in calls of several tokens beside the decoding rows,
// within a token budget per step. A row takes a block when its positions
// reach a new one, so the memory follows the live tokens to the block. A
// beam's reorder only remaps block tables, and a fan-out shares its parent's
// blocks (copy-on-write: a shared block is copied when a row writes into
// it). When the pool runs out, the most recently admitted request is
// preempted: its blocks return to the pool, and it is recomputed (its rows'
// tokens prefilled again) when blocks free up. No request is dropped. With
// prefix caching (decoder-only models), every full block is published under
// the hash of its tokens and all before them, and a new prompt starts from
// the published blocks of its longest cached prefix (vLLM's automatic prefix
// caching): a shared system prompt is prefilled once.
//
// Each running request runs the unchanged search (generate.h: greedy, beam,
// sampling, banned and forced tokens, streaming) on a thread of its own,
// against a StepModel whose step() hands the rows to the engine and waits for
// the batched step. So a request's tokens are those it gets alone, whatever
// shares its batch: the rows of a step do not interact.
//
// Thread-safe: submit, wait, cancel, stats and release may be called from any
// thread while the engine runs. Nothing throws; every failure is a Status.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_ENGINE_H
#define TFC_RUNTIME_ENGINE_H

#include "runtime/device.h"
#include "runtime/model.h"
#include "tfrun/tfrun.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tfrun::rt {

struct EngineOptions {
  /// Rows per step: a greedy or sampling request of batch B holds B of them,
  /// a beam-K request B x K. 0: the model's max_batch.
  int64_t rows = 0;
  /// Requests waiting for rows; a submit beyond it is refused with Busy.
  int64_t maxQueue = 256;
  /// Prompt tokens prefilled per engine step, over all requests (at least
  /// one request's chunk is always taken).
  int64_t maxBatchTokens = 2048;
  /// > 0: the KV pool's size in bytes. 0: enough for every row at max_len, at
  /// most 1 GiB (at least one block).
  int64_t kvCacheBytes = 0;
  /// Positions per KV block. 0: 16 on the CPU; a device backend without
  /// block tables, or a model compiled before them, takes max_len (one
  /// block per row).
  int64_t kvBlockSize = 0;
  /// Prefix caching (decoder-only models): a prompt starts from the KV blocks
  /// that earlier requests computed for the same leading tokens (whole
  /// blocks), and prefills only the rest. Published blocks that no request
  /// holds stay in the pool as free blocks until it needs them.
  bool prefixCaching = true;
};

struct EngineStats {
  int64_t queued = 0, running = 0;
  int64_t kvBlocksUsed = 0, kvBlocksFree = 0; ///< the KV pool's blocks
  int64_t kvBlockPositions = 0;               ///< positions per block
  int64_t kvBlockBytes = 0;                   ///< bytes per block (every layer's K and V)
  /// The encoder memory pool (tfrun_engine_stats_t): blocks used (not the
  /// zero block) and free, positions and bytes per block; 0 without one.
  int64_t memBlocksUsed = 0, memBlocksFree = 0, memBlockPositions = 0, memBlockBytes = 0;
  uint64_t requestsFinished = 0, requestsCancelled = 0, requestsFailed = 0;
  uint64_t preemptions = 0; ///< requests preempted (and later recomputed)
  uint64_t tokensGenerated = 0, steps = 0;
  double tokensPerSecond = 0; ///< over the engine's busy time (steps run)
  /// Prefix caching: the free KV blocks that hold a published prefix, the
  /// prompt tokens of the requests admitted, and those of them that started
  /// from cached blocks rather than being prefilled.
  int64_t kvBlocksCached = 0;
  uint64_t prefixQueryTokens = 0, prefixHitTokens = 0;
};

/// One generation request's input, as tfrun_session_set_input takes it.
struct EngineInput {
  std::string name;
  uint32_t dtype = TFC_DTYPE_I64;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// (batch item, step among its new tokens, token, log-probability), as
/// SearchOptions::onToken; called on the request's engine thread.
using EngineTokenFn = std::function<bool(size_t, int64_t, int64_t, float)>;

class Engine {
public:
  /// An engine for |model| (which must outlive it) on |dev|. Fails when the
  /// model cannot generate, or was compiled before continuous batching
  /// (decode_step without step.pos per row and step.blocks).
  static Status create(const Model &model, std::unique_ptr<Device> dev, const EngineOptions &o,
                       std::unique_ptr<Engine> &out);
  /// Cancels what is queued and running, and joins the engine's threads.
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  /// Queues a request: |inputs| as for a session's generate, |o| its options.
  /// Invalid inputs or options fail here, with the session's messages. A full
  /// queue gives Busy, and the request is not queued.
  Status submit(const std::vector<EngineInput> &inputs, const tfrun_generate_options_t &o,
                EngineTokenFn onToken, uint64_t &id);
  /// Waits until request |id| ends (finished, failed or cancelled), at most
  /// |timeoutMs| milliseconds (< 0: no limit). |done| says whether it ended.
  Status wait(uint64_t id, int64_t timeoutMs, bool &done);
  /// The ended request's outcome: its status (Ok, Cancelled, or the search's
  /// error), and its results on Ok. Valid until release(id).
  Status result(uint64_t id, Status &status, const std::vector<std::vector<int64_t>> *&ids,
                const std::vector<float> *&scores);
  /// Forgets an ended request. A request that is still running is cancelled
  /// first, and forgotten once it ends.
  Status release(uint64_t id);
  /// Cancels a queued or running request: it ends with Cancelled at its next
  /// step, and its KV blocks return to the pool. Ended requests are left as
  /// they are.
  Status cancel(uint64_t id);
  EngineStats stats() const;
  /// Request |id|'s prompt tokens that came from the prefix cache at its
  /// admission (0 before it).
  Status cachedTokens(uint64_t id, uint64_t &tokens) const;

  struct Impl;

private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace tfrun::rt

#endif // TFC_RUNTIME_ENGINE_H
