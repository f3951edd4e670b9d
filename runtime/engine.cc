//===- engine.cc - continuous batching over one session (engine.h) ---------===//
//
// Threads: the engine thread owns the Session (every run and KV copy happens
// on it); each running request has a thread that runs the search and blocks in
// its StepModel until the engine has run its rows. One mutex guards the queue,
// the running set, the free cache rows and every request's exchange fields.
//
// A step: admit what fits, wait until every running request has posted its
// rows (or ended), apply the KV copies beam fan-outs asked for, run the
// prefills within the token budget, then one decode_step over all the
// one-token rows, whose logits each request reads in place, and wake them.
//
//===----------------------------------------------------------------------===//
#include "runtime/engine_internal.h"

#include <algorithm>
#include <new>

#include <omp.h>

namespace tfrun::rt {

namespace {

/// The search's view of one request: step() hands its rows to the engine and
/// waits; select() remaps its rows onto its own cache rows.
class EngineStepModel : public StepModel {
public:
  EngineStepModel(Engine::Impl &e, Req &r) : e(e), r(r) {}
  int64_t vocabSize() const override { return e.vocab; }
  int64_t maxRows() const override { return r.needRows; }
  int64_t maxStepTokens() const override { return e.maxStep; }
  Status step(const int64_t *tokens, int64_t rows, int64_t pos, const float **logits) override {
    TFC_RETURN_IF_ERROR(e.post(r, tokens, rows, 1, pos));
    *logits = r.logitsAt;
    return Status::ok();
  }
  Status prefill(const int64_t *tokens, int64_t rows, int64_t n, int64_t pos) override {
    return e.post(r, tokens, rows, n, pos);
  }
  Status select(const int64_t *from, int64_t n) override {
    std::lock_guard<std::mutex> lk(e.mu);
    return e.selectRows(r, from, n);
  }

private:
  Engine::Impl &e;
  Req &r;
};

} // namespace

Status Engine::Impl::init() {
  const Function *dec = m.find("decode_step");
  if (!m.gen.present || !dec)
    return Status::invalidArgument("model '" + m.name +
                                   "' cannot generate: it has no decoder "
                                   "(no causal self-attention; see tfc compile --report)");
  for (size_t i = 0; i < m.functions.size(); ++i) {
    if (m.functions[i].name == "decode_step")
      decIdx = i;
    if (m.functions[i].name == "encode")
      encIdx = static_cast<int>(i);
  }
  const Function &fwd = m.forward();
  for (size_t i = 0; i < dec->inputs.size(); ++i) {
    const std::string &name = dec->inputs[i].name;
    const ValueDesc &v = dec->values[dec->inputs[i].value];
    if (name == "step.tokens") {
      tokensIdx = static_cast<int>(i);
      continue;
    }
    if (name == "step.pos") {
      posIdx = v.dims.size() == 1 ? static_cast<int>(i) : -2;
      continue;
    }
    if (name == "step.blocks") {
      blocksIdx = static_cast<int>(i);
      continue;
    }
    if (name == "step.memory_blocks") {
      memBlocksIdx = static_cast<int>(i);
      continue;
    }
    RowInputDesc d;
    d.input = i;
    d.dtype = v.dtype;
    d.fwdInput = fwd.findInput(name);
    if (d.fwdInput >= 0 && (size_t)d.fwdInput < m.inputDefaults.size())
      d.defaulted = m.inputDefaults[d.fwdInput].kind != 0;
    if (d.fwdInput < 0 && encIdx >= 0)
      for (const Binding &b : m.functions[encIdx].outputs)
        if (b.name == name)
          d.encOutput = static_cast<int>(b.value);
    if (d.fwdInput < 0 && d.encOutput < 0)
      return Status::invalidModel("decode_step input '" + name + "' has no source");
    rowInputs.push_back(d);
  }
  if (tokensIdx < 0 || posIdx == -1)
    return Status::invalidModel("decode_step lacks step.tokens or step.pos");
  if (posIdx < 0 || blocksIdx < 0)
    return Status::unsupported(
        "model '" + m.name +
        "' was compiled before continuous batching (its decode_step takes one position for "
        "all rows); recompile it with this tfc to serve it with an engine");
  const ValueDesc &logits = dec->values[dec->outputs.at(0).value];
  vocab = logits.dims.empty() ? 0 : logits.dims.back();
  if (vocab <= 0)
    return Status::invalidModel("decode_step's logits have no static vocabulary");
  const ValueDesc &tok = dec->values[dec->inputs[tokensIdx].value];
  // Encoder memory whose first dim is not the rows': one row per batch item,
  // read through step.memory_blocks.
  for (RowInputDesc &d : rowInputs) {
    const ValueDesc &v = dec->values[dec->inputs[d.input].value];
    d.perItem = !v.dims.empty() && !tok.dims.empty() && v.dims[0] != tok.dims[0];
    if (d.perItem && (memBlocksIdx < 0 || d.encOutput < 0))
      return Status::invalidModel("decode_step input '" + dec->inputs[d.input].name +
                                  "' has other rows than step.tokens, and no "
                                  "step.memory_blocks to read them through");
  }
  maxStep = m.maxDim(tok.dims[1]);
  const int64_t maxBatch = m.maxDim(tok.dims[0]);
  if (o.rows <= 0)
    o.rows = maxBatch;
  if (o.rows > maxBatch)
    return Status::invalidArgument("an engine of " + std::to_string(o.rows) +
                                   " rows exceeds the model's max_batch " +
                                   std::to_string(maxBatch) +
                                   " (recompile with a larger --set max_batch)");
  if (o.maxQueue < 0 || o.maxBatchTokens < 0)
    return Status::invalidArgument("the engine's queue and token budget must not be negative");
  if (o.maxQueue == 0)
    o.maxQueue = 256;
  if (o.maxBatchTokens == 0)
    o.maxBatchTokens = 2048;
  len = m.gen.maxLen;
  caches = stateCaches(*dec);
  // The KV pool. Blocks of kvBlockSize positions (16 by default) where the
  // model takes more than one block per row (every backend reads block
  // tables); else one block of max_len per row, as a session's cache.
  const ValueDesc &blocksV = dec->values[dec->inputs[blocksIdx].value];
  const bool paging = blocksV.dims.size() == 2 && m.maxDim(blocksV.dims[1]) > 1;
  if (o.kvBlockSize < 0 || o.kvBlockSize > len)
    return Status::invalidArgument("a KV block of " + std::to_string(o.kvBlockSize) +
                                   " positions is outside 1 .. max_len " + std::to_string(len));
  if (o.kvBlockSize > 0 && o.kvBlockSize != len && !paging)
    return Status::unsupported("KV blocks of " + std::to_string(o.kvBlockSize) +
                               " positions: model '" + m.name +
                               "' was compiled before paged KV caches; recompile it");
  blockLen = o.kvBlockSize > 0 ? o.kvBlockSize : paging ? std::min<int64_t>(16, len) : len;
  TFC_RETURN_IF_ERROR(prepareFunction(*s, decIdx)); // the caches' dtypes on the device
  uint64_t blockBytes = 0;
  for (const StateCache &c : caches)
    blockBytes += c.elemSize(*s, decIdx) * (uint64_t)blockLen * (uint64_t)c.width;
  if (o.kvCacheBytes < 0)
    return Status::invalidArgument("the KV cache size must not be negative");
  // The default pool: every row at max_len, at most kDefaultKvBytes (a
  // long-context model, Llama 3.1's 131072 positions, would otherwise ask for
  // hundreds of GB); at least one block. kv_cache_bytes sets it.
  constexpr uint64_t kDefaultKvBytes = 1ull << 30;
  int64_t numBlocks = o.rows * blocksFor(len);
  if (blockBytes && (uint64_t)numBlocks > kDefaultKvBytes / blockBytes)
    numBlocks = std::max<int64_t>(1, static_cast<int64_t>(kDefaultKvBytes / blockBytes));
  if (o.kvCacheBytes > 0) {
    numBlocks = blockBytes ? static_cast<int64_t>((uint64_t)o.kvCacheBytes / blockBytes)
                           : numBlocks;
    if (numBlocks < 1)
      return Status::invalidArgument(
          "a KV cache of " + std::to_string(o.kvCacheBytes) + " bytes holds no block: one (" +
          std::to_string(blockLen) + " positions of every layer's K and V) takes " +
          std::to_string(blockBytes) + " bytes");
  }
  if (numBlocks > INT32_MAX)
    return Status::invalidArgument("a KV cache of " + std::to_string(numBlocks) +
                                   " blocks is too large");
  TFC_RETURN_IF_ERROR(s->reserveState(numBlocks, blockLen, /*blocks=*/true));
  kv = std::make_unique<BlockAllocator>(static_cast<uint32_t>(numBlocks),
                                        static_cast<uint32_t>(blockLen));
  TFC_RETURN_IF_ERROR(initMemory());
  // A decoder-only model's K and V at a position depend on the tokens up to
  // it only, so blocks of the same leading tokens hold the same K and V
  // whichever request wrote them. An encoder-decoder's depend on its source
  // too (and its decoder prompt is one token).
  prefixOn = o.prefixCaching && encIdx < 0 && rowInputs.empty() && blockLen < len;
  rowsFree = o.rows;
  counters.kvBlockPositions = blockLen;
  counters.kvBlockBytes = static_cast<int64_t>(blockBytes);
  return Status::ok();
}

Status Engine::Impl::post(Req &r, const int64_t *tokens, int64_t rows, int64_t steps,
                          int64_t pos) {
  std::unique_lock<std::mutex> lk(mu);
  if (r.cancelRequested || stopping)
    return Status::cancelled("request " + std::to_string(r.id) + " was cancelled");
  if (rows != static_cast<int64_t>(r.rowSeq.size()))
    return Status::internal("a step of " + std::to_string(rows) + " rows, the request has " +
                            std::to_string(r.rowSeq.size()));
  r.tokens.assign(tokens, tokens + rows * steps);
  r.rows = rows;
  r.steps = steps;
  r.pos = pos;
  r.stepDone = false;
  r.posted = true;
  r.begun = true;
  cvEngine.notify_all();
  cvStep.wait(lk, [&] { return r.stepDone; });
  r.posted = false;
  return r.stepStatus;
}

void Engine::Impl::endLocked(const std::shared_ptr<Req> &r, Status st) {
  r->status = std::move(st);
  r->state = Req::State::Ended;
  releaseRows(*r);
  releaseMemory(*r);
  rowsFree += r->needRows;
  running.erase(std::remove(running.begin(), running.end(), r), running.end());
  if (r->status.isOk())
    ++counters.requestsFinished;
  else if (r->status.code() == tfc::Code::Cancelled)
    ++counters.requestsCancelled;
  else
    ++counters.requestsFailed;
  if (r->released)
    reqs.erase(r->id);
  cvEngine.notify_all();
  cvEnded.notify_all();
}

void Engine::Impl::requestMain(const std::shared_ptr<Req> &r) {
  // The search's own parallel loops (beam search's top-k) stay on this
  // thread: a second OpenMP team beside the engine's would leave libgomp more
  // threads than cores (see Engine::create).
  omp_set_num_threads(1);
  EngineStepModel model(*this, *r);
  SearchResult res;
  Status st = search(model, r->plan.prompts, r->plan.opt, res);
  std::lock_guard<std::mutex> lk(mu);
  if (!st.isOk() && (r->cancelRequested || stopping))
    st = Status::cancelled("request " + std::to_string(r->id) + " was cancelled");
  if (st.isOk())
    r->result = std::move(res);
  toJoin.push_back(r);
  endLocked(r, std::move(st));
}

/// cvEngine.wait(lk, ready), with the engine's OpenMP workers asleep.
///
/// After a parallel region libgomp's workers spin for the next one (300000
/// rounds, milliseconds), and the next one comes only when every request has
/// posted its step: the spinning worker takes a core from the request threads'
/// searches. So the wait runs inside a parallel region of the team, where
/// the workers sleep on a condition variable until the engine thread is
/// woken. 48 greedy Marian requests at once (OPUS-MT shape, 2 threads, Zen 4
/// class EPYC): 1.06x the tokens/s, 6 of 6 interleaved pairs faster; the
/// engine's wait for its requests' searches 0.26 -> 0.22 s of 1.9 s.
template <class Ready>
void Engine::Impl::waitQuietly(std::unique_lock<std::mutex> &lk, Ready ready) {
  const int team = omp_get_max_threads();
  if (ready() || team <= 1 || omp_in_parallel()) {
    cvEngine.wait(lk, ready);
    return;
  }
  std::mutex wm;
  std::condition_variable wcv;
  bool woken = false;
#pragma omp parallel num_threads(team)
  {
    if (omp_get_thread_num() == 0) {
      cvEngine.wait(lk, ready);
      {
        std::lock_guard<std::mutex> g(wm);
        woken = true;
      }
      wcv.notify_all();
    } else {
      std::unique_lock<std::mutex> g(wm);
      wcv.wait(g, [&] { return woken; });
    }
  }
}

void Engine::Impl::run() {
  std::unique_lock<std::mutex> lk(mu);
  for (;;) {
    // Threads of ended requests.
    while (!toJoin.empty()) {
      std::vector<std::shared_ptr<Req>> done;
      done.swap(toJoin);
      lk.unlock();
      for (auto &r : done)
        if (r->thread.joinable())
          r->thread.join();
      lk.lock();
    }
    // Admission: first come, first served, while the rows fit in a step and
    // the prompts in the free blocks, less a watermark of 1% of the pool
    // (vLLM's default) for the running rows' next blocks. Nothing is admitted
    // while a preempted request waits for blocks.
    //
    // Only between steps: when every running request has posted its next
    // step (or not yet its first), so the requests that the last step ended
    // have ended and let go of their rows and blocks. Admission then depends
    // only on when requests were submitted against the steps, never on the
    // order in which the request threads' searches finish, and a schedule
    // (its preemptions included) can be reproduced.
    auto settled = [&] {
      for (const auto &r : running)
        if (r->begun && (!r->posted || r->stepDone))
          return false;
      return true;
    };
    auto admissible = [&] {
      if (stopping || queue.empty() || rowsFree < queue.front()->needRows)
        return false;
      for (const auto &r : running)
        if (r->preempted)
          return false;
      // The watermark is vLLM's int(0.01 * blocks): none below 100 blocks.
      // An idle engine admits without it: a request the pool holds (submit
      // refuses the others) must not wait forever for blocks nobody holds,
      // as in a small pool of whole rows.
      const int64_t watermark = running.empty() ? 0 : kv->numBlocks() / 100;
      return static_cast<int64_t>(kv->freeBlocks()) >= blocksToStart(*queue.front()) + watermark;
    };
    while (settled() && admissible()) {
      std::shared_ptr<Req> r = queue.front();
      queue.pop_front();
      rowsFree -= r->needRows;
      r->state = Req::State::Running;
      running.push_back(r);
      startRows(*r);
      lk.unlock();
      Status st;
      try {
        st = startRequest(*r);
      } catch (const std::bad_alloc &) {
        st = Status::outOfMemory("out of memory starting request " + std::to_string(r->id));
      }
      lk.lock();
      if (st.isOk() && r->cancelRequested)
        st = Status::cancelled("request " + std::to_string(r->id) + " was cancelled");
      if (!st.isOk()) {
        endLocked(r, std::move(st));
        continue;
      }
      try {
        r->thread = std::thread([this, r] { requestMain(r); });
      } catch (...) {
        endLocked(r, Status::internal("cannot start a thread for request " +
                                      std::to_string(r->id)));
      }
    }
    if (stopping && running.empty() && toJoin.empty())
      return;
    auto allPosted = [&] {
      for (const auto &r : running)
        if (!r->posted || r->stepDone)
          return false;
      return !running.empty();
    };
    waitQuietly(lk, [&] {
      return allPosted() || !toJoin.empty() || (stopping && running.empty()) ||
             (settled() && admissible());
    });
    if (!allPosted() || admissible())
      continue; // admits first: the new requests' prompts join this step
    // One step over every posted request, in admission order: cancelled ones
    // are answered at once; each other takes the KV blocks its step writes,
    // preempting the most recently admitted requests when the pool runs out;
    // its one-token rows go in one call, prompts (and the recomputes of
    // resumed requests) within the token budget.
    std::vector<Req *> decode, prefill;
    int64_t budget = o.maxBatchTokens;
    for (size_t i = 0; i < running.size(); ++i) {
      Req *r = running[i].get();
      if (r->cancelRequested || stopping) {
        r->stepStatus = Status::cancelled("request " + std::to_string(r->id) + " was cancelled");
        r->stepDone = true;
        continue;
      }
      if (r->preempted) {
        if (!prefill.empty() && r->rows * (r->pos + r->steps) > budget)
          continue;
        if (resume(*r)) {
          prefill.push_back(r);
          budget -= r->rows * r->runSteps;
        }
        continue;
      }
      const bool isPrefill = r->steps > 1;
      // The positions the prefix cache gave are not run again.
      const int64_t fresh = r->pos + r->steps - r->runFrom();
      if (isPrefill && !prefill.empty() && fresh > 0 && r->rows * fresh > budget)
        continue; // next step
      int got = reserveStep(*r);
      // Out of blocks: preempt from the most recently admitted on, down to
      // this request itself.
      for (size_t v = running.size(); got == 0 && v-- > i;) {
        Req &victim = *running[v];
        if (victim.preempted || victim.cancelRequested)
          continue;
        preempt(victim);
        if (&victim == r)
          break;
        got = reserveStep(*r);
      }
      if (got < 0)
        r->stepDone = true; // its error
      if (got <= 0)
        continue;
      if (isPrefill) {
        prefill.push_back(r);
        budget -= r->rows * r->runSteps;
      } else {
        decode.push_back(r);
      }
    }
    lk.unlock();
    const auto t0 = Clock::now();
    for (Req *r : decode) {
      r->stepStatus = applyCopies(*r);
    }
    for (Req *r : prefill)
      r->stepStatus = applyCopies(*r);
    // The prefills first: the one-token rows' logits are then read in place
    // (runRows), and stay there until the next step's first run.
    for (Req *r : prefill) {
      if (!r->stepStatus.isOk() || r->runSteps == 0) // all of it from the prefix cache
        continue;
      try {
        // A recompute ending in a one-token step returns that step's logits.
        r->stepStatus = runRows({r}, r->runSteps, r->steps == 1);
      } catch (const std::bad_alloc &) {
        r->stepStatus = Status::outOfMemory("out of memory in a prefill");
      }
    }
    std::vector<Req *> ok;
    for (Req *r : decode)
      if (r->stepStatus.isOk())
        ok.push_back(r);
    if (!ok.empty()) {
      Status st;
      try {
        orderLikeLastStep(ok);
        st = runRows(ok, 1, true, /*lastRun=*/true);
      } catch (const std::bad_alloc &) {
        st = Status::outOfMemory("out of memory in an engine step");
      }
      for (Req *r : ok)
        r->stepStatus = st;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    lk.lock();
    busySeconds += secs;
    ++counters.steps;
    if (prefixOn) {
      for (Req *r : prefill)
        if (r->stepStatus.isOk() && r->runSteps > 0)
          publishRows(*r);
      for (Req *r : ok)
        if (r->stepStatus.isOk())
          publishRows(*r);
    }
    for (Req *r : ok)
      counters.tokensGenerated += r->stepStatus.isOk() ? (uint64_t)r->rows : 0;
    for (Req *r : decode)
      r->stepDone = true;
    for (Req *r : prefill)
      r->stepDone = true;
    cvStep.notify_all();
  }
}

} // namespace tfrun::rt
