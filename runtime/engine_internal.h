//===- engine_internal.h - the engine's shared state (engine.h) -----------===//
//
// Internal to runtime/engine*.cc: a request (Req) and the engine's state
// (Engine::Impl). engine.cc has the scheduling loop and the request threads,
// engine_rows.cc what a step runs on the session (encode, the batched
// decode_step, KV copies), engine_api.cc the public methods.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_ENGINE_INTERNAL_H
#define TFC_RUNTIME_ENGINE_INTERNAL_H

#include "runtime/engine.h"

#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/kv_blocks.h"
#include "runtime/session.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tfrun::rt {

namespace engine_detail {

using Clock = std::chrono::steady_clock;

/// A decode_step input that holds one row per batch row besides the step's
/// own (an encoder-decoder's source ids and encoder memory): where each
/// request's per-item data comes from, and how a shorter row is padded.
struct RowInputDesc {
  size_t input = 0;          ///< decode_step input index
  uint32_t dtype = TFC_DTYPE_F32;
  int fwdInput = -1;         ///< a @forward input, or
  int encOutput = -1;        ///< an @encode output value
  bool defaulted = false;    ///< an optional input made from its source (a mask): pad 0
  /// Encoder memory that the cross-attentions read through
  /// step.memory_blocks: it lives in the engine's memory pool, one sequence
  /// of blocks per batch item, which the item's rows (its beams) share.
  bool perItem = false;
  int64_t width = 0; ///< perItem: the memory's width (floats per position)
};

} // namespace engine_detail

using namespace engine_detail;

struct Req {
  uint64_t id = 0;
  GenerationPlan plan;
  std::vector<Session::Input> inputs; ///< by @forward input index
  int64_t needRows = 1;

  enum class State { Queued, Running, Ended } state = State::Queued;
  bool cancelRequested = false, released = false, joined = false;
  Status status;
  SearchResult result;
  std::thread thread;

  /// The current rows: each one's KV sequence (its blocks in the pool; 0
  /// while preempted), batch item, and tokens so far (what a recompute after
  /// preemption prefills again).
  std::vector<BlockAllocator::SeqId> rowSeq;
  std::vector<int64_t> rowItem;
  std::vector<std::vector<int64_t>> rowHist;
  /// Preempted: its blocks went back to the pool for requests admitted
  /// before it; its posted step waits until it is recomputed.
  bool preempted = false;
  /// Positions its rows started with from the prefix cache (their K and V
  /// are in shared blocks): the prompt's prefill skips them.
  int64_t cachedPos = 0;
  /// The first position its posted step runs: past those the prefix cache
  /// gave, for a prompt's prefill chunk (which may lie within them, wholly
  /// or in part).
  int64_t runFrom() const {
    return steps > 1 ? std::max(pos, std::min(cachedPos, pos + steps)) : pos;
  }
  /// Its prompt tokens that came from the prefix cache at admission (all rows).
  uint64_t cachedTokens = 0;
  uint64_t cacheSalt = 0; ///< its prefix-cache salt (tfrun_generate_options_t)
  /// Per RowInputDesc, per batch item: the item's bytes and its shape (no batch dim).
  struct ItemData {
    std::vector<char> bytes;
    std::vector<int64_t> shape;
  };
  std::vector<std::vector<ItemData>> items;
  std::vector<BlockCopy> copies; ///< KV blocks to copy before its next step (copy-on-write)
  /// Its batch items' encoder memory in the memory pool: each item's
  /// sequence and its blocks (fixed once written; copied here under mu).
  std::vector<BlockAllocator::SeqId> itemSeq;
  std::vector<std::vector<uint32_t>> itemBlocks;

  // The step exchange.
  bool posted = false, stepDone = false;
  bool begun = false; ///< has posted a step
  int64_t rows = 0, steps = 1, pos = 0;
  std::vector<int64_t> tokens; ///< [rows, steps]
  /// The step's block tables, [rows, tableWidth], and the positions the step
  /// runs from: set when the engine takes the step (a recompute runs the
  /// rows' whole history from position 0).
  std::vector<int64_t> tables;
  int64_t tableWidth = 1, runPos = 0, runSteps = 1;
  /// [rows, vocab] after a one-token step: in the session's output, valid
  /// until the engine's next step runs (after every request has posted), or
  /// in |logits| (a recompute's).
  const float *logitsAt = nullptr;
  std::vector<float> logits;
  Status stepStatus;
};

struct Engine::Impl {
  const Model &m;
  std::unique_ptr<Session> s;
  EngineOptions o;
  size_t decIdx = 0;
  int encIdx = -1;
  int tokensIdx = -1, posIdx = -1, blocksIdx = -1;
  int memBlocksIdx = -1; ///< step.memory_blocks: each row's memory block table
  int64_t vocab = 0, maxStep = 1, len = 0;
  /// Prefix caching is on (the option, a decoder-only model whose
  /// decode_step reads nothing per row but its tokens and positions).
  bool prefixOn = false;
  std::vector<RowInputDesc> rowInputs;
  std::vector<StateCache> caches;
  /// The one-token steps' row inputs (encoder memory, source ids) as last
  /// assembled, and the rows they were assembled for (request id, batch item):
  /// rebuilt only when requests join or leave, not every step.
  /// The per-item inputs (encoder memory) are not here: they are the memory
  /// pool's blocks (memBuf), which each row reads through its item's table.
  struct RowInputBatch {
    std::vector<std::pair<uint64_t, int64_t>> rows;
    std::vector<std::vector<char>> data;
    std::vector<std::vector<int64_t>> shapes;
  };
  RowInputBatch decodeInputs;

  mutable std::mutex mu;
  std::condition_variable cvEngine; ///< the engine thread: posts, ends, submits, stop
  std::condition_variable cvStep;   ///< request threads: their step is done
  std::condition_variable cvEnded;  ///< waiters: a request ended
  std::deque<std::shared_ptr<Req>> queue;
  std::vector<std::shared_ptr<Req>> running;
  std::map<uint64_t, std::shared_ptr<Req>> reqs;
  std::vector<std::shared_ptr<Req>> toJoin;
  /// The paged KV cache: blocks of blockLen positions of every layer's K and
  /// V, one sequence per row. Guarded by mu.
  std::unique_ptr<BlockAllocator> kv;
  int64_t blockLen = 0;
  /// The encoder memory (cross-attention K/V) of encoder-decoder requests: a
  /// pool of blocks of memLen source positions, one buffer per per-item
  /// input (calloc'ed: pages are touched as blocks are used), one sequence of
  /// blocks per batch item. Block zeroBlock stays zeros: the table entries
  /// of a row past its own blocks. Sized so that it never runs out (every
  /// row an item at the model's longest source). The allocator is guarded
  /// by mu; the buffers and memHigh (one past the highest block ever used:
  /// the blocks a step binds) belong to the engine thread.
  struct FreeDeleter {
    void operator()(float *p) const { std::free(p); }
  };
  std::unique_ptr<BlockAllocator> memPool;
  std::vector<std::unique_ptr<float, FreeDeleter>> memBuf; ///< per RowInputDesc (perItem)
  int64_t memLen = 0;
  uint32_t zeroBlock = 0, memHigh = 1;
  std::vector<int64_t> memTables; ///< the step's [rows, memory blocks] tables
  int64_t rowsFree = 0; ///< rows per step not held by a running request
  uint64_t nextId = 1;
  bool stopping = false;
  EngineStats counters;
  double busySeconds = 0;
  std::mutex inputMu; ///< s->inputs, which submit() uses to check a request's inputs
  std::thread loop;

  Impl(const Model &model) : m(model) {}

  Status init();
  void run();
  template <class Ready> void waitQuietly(std::unique_lock<std::mutex> &lk, Ready ready);
  Status startRequest(Req &r);
  void requestMain(const std::shared_ptr<Req> &r);
  void endLocked(const std::shared_ptr<Req> &r, Status st);
  /// Request |id|, or null with |st| saying there is none (mu held).
  std::shared_ptr<Req> findLocked(uint64_t id, Status &st);
  /// Cancels |r|: a queued request ends at once ("... was cancelled" + |why|),
  /// a running one at its next step (mu held).
  void cancelLocked(const std::shared_ptr<Req> &r, const char *why);
  Status applyCopies(Req &r);
  /// KV blocks for |r|'s posted step (mu held): appends each row's new
  /// positions, collects its copy-on-write copies and block tables. 1: done;
  /// 0: the pool has too few free blocks (what was appended stays); -1: the
  /// step cannot run (stepStatus says why).
  int reserveStep(Req &r);
  /// The sequences of a new request's batch rows (mu held): with prefix
  /// caching, each starts from the cached blocks of the prompts' longest
  /// common cached prefix.
  void startRows(Req &r);
  /// Whether |r|'s rows start from the prefix cache (mu held).
  bool startsFromCache(const Req &r) const;
  /// The tokens of each of |r|'s prompts that startRows() starts from the
  /// prefix cache: whole blocks short of the last token that every row has
  /// cached; 0 where the request does not use the cache (mu held).
  uint64_t cachedAtStart(const Req &r) const;
  /// The free blocks |r|'s prompts take when admitted now: their blocks less
  /// the cached ones running sequences already hold (mu held).
  int64_t blocksToStart(const Req &r) const;
  /// Appends the tokens of |r|'s posted step that its rows' histories lack
  /// (those at positions the prefix cache gave).
  void extendHistory(Req &r);
  /// Publishes the full blocks of |r|'s rows that its last run wrote (mu held).
  void publishRows(Req &r);
  /// Whole blocks that the prefix cache holds for every one of |rows| (its
  /// first |limit(row)| tokens), in tokens; 0 with prefix caching off (mu held).
  template <class Limit>
  uint64_t cachedForAll(const Req &r, const std::vector<std::vector<int64_t>> &rows,
                        Limit limit) const;
  /// The search's select (StepModel::select) on |r|'s rows (mu held).
  Status selectRows(Req &r, const int64_t *from, int64_t n);
  /// Returns |r|'s blocks to the pool; it is recomputed when it resumes
  /// (mu held).
  void preempt(Req &r);
  /// Resumes preempted |r| when the pool holds its rows' whole history and
  /// step: fresh sequences, and a step that prefills the history (mu held).
  bool resume(Req &r);
  /// Drops |r|'s rows' sequences (mu held).
  void releaseRows(Req &r);
  /// Blocks |positions| positions take.
  int64_t blocksFor(int64_t positions) const { return (positions + blockLen - 1) / blockLen; }
  /// One decode_step over |reqs|' rows, |steps| tokens each. With
  /// |wantLogits| each request gets its rows' logits (logitsAt): in place
  /// when it is the step's |lastRun| (nothing runs decode_step again before
  /// every request has posted its next step), else copied.
  Status runRows(const std::vector<Req *> &reqs, int64_t steps, bool wantLogits,
                 bool lastRun = false);
  /// |batch| for the rows of |group|, in order: rewrites the rows that differ
  /// from the ones it holds (all of them when the padded lengths change).
  void updateRowInputs(const std::vector<Req *> &group, RowInputBatch &batch);
  /// Sets up the memory pool (init).
  Status initMemory();
  /// Puts |r|'s encoder memory (@encode's outputs, just run) in the memory
  /// pool: a sequence of blocks per batch item.
  Status storeMemory(Req &r);
  /// Returns |r|'s memory blocks to the pool (mu held).
  void releaseMemory(Req &r);
  /// The rows' memory block tables (memTables) for a step whose sources are
  /// padded to |padded| positions: [rows, nb], past a row's own blocks the
  /// zeros.
  Status memoryTables(const std::vector<Req *> &group, int64_t padded, int64_t &nb);
  /// Orders a one-token step's requests so that those of the last one keep
  /// their rows (new ones fill the rows of those that left), and their row
  /// inputs stay where they are.
  void orderLikeLastStep(std::vector<Req *> &group) const;
  Status post(Req &r, const int64_t *tokens, int64_t rows, int64_t steps, int64_t pos);
};

} // namespace tfrun::rt

#endif // TFC_RUNTIME_ENGINE_INTERNAL_H
