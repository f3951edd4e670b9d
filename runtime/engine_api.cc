//===- engine_api.cc - the Engine's public methods (engine.h) ---------------===//
#include "runtime/engine_internal.h"

#include <algorithm>
#include <deque>
#include <future>
#include <new>

namespace tfrun::rt {

namespace {

/// The sizes validateSearch checks a request against, at submit.
class LimitsModel final : public StepModel {
public:
  LimitsModel(int64_t vocab, int64_t rows) : vocab(vocab), rows(rows) {}
  int64_t vocabSize() const override { return vocab; }
  int64_t maxRows() const override { return rows; }
  Status step(const int64_t *, int64_t, int64_t, const float **) override {
    return Status::internal("LimitsModel::step");
  }
  Status select(const int64_t *, int64_t) override {
    return Status::internal("LimitsModel::select");
  }

private:
  int64_t vocab, rows;
};

} // namespace

std::shared_ptr<Req> Engine::Impl::findLocked(uint64_t id, Status &st) {
  auto it = reqs.find(id);
  if (it == reqs.end()) {
    st = Status::invalidArgument("no request " + std::to_string(id) + " in this engine");
    return nullptr;
  }
  return it->second;
}

void Engine::Impl::cancelLocked(const std::shared_ptr<Req> &r, const char *why) {
  r->cancelRequested = true;
  if (r->state == Req::State::Queued) {
    // Never admitted: it ends here. A running request ends at its next step.
    queue.erase(std::remove(queue.begin(), queue.end(), r), queue.end());
    r->status = Status::cancelled("request " + std::to_string(r->id) + " was cancelled" + why);
    r->state = Req::State::Ended;
    ++counters.requestsCancelled;
    cvEnded.notify_all();
  }
  cvEngine.notify_all();
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Engine::create(const Model &model, std::unique_ptr<Device> dev, const EngineOptions &o,
                      std::unique_ptr<Engine> &out) {
  out.reset();
  std::unique_ptr<Impl> impl(new (std::nothrow) Impl(model));
  if (!impl)
    return Status::outOfMemory("out of memory creating the engine");
  impl->o = o;
  Impl *p = impl.get();
  std::unique_ptr<Engine> e(new (std::nothrow) Engine(std::move(impl)));
  if (!e)
    return Status::outOfMemory("out of memory creating the engine");
  // The session is made, and every kernel runs, on the engine's thread: an
  // OpenMP team on the creating thread too would leave libgomp more threads
  // than cores, and it then stops its workers from spinning between parallel
  // regions (measured: a decode step at 2 threads took 2-3x as long).
  std::promise<Status> started;
  std::future<Status> ready = started.get_future();
  try {
    p->loop = std::thread([p, &model, &started, d = std::move(dev)]() mutable {
      Status st;
      try {
        st = Session::create(model, std::move(d), p->s);
        if (st.isOk())
          st = p->init();
      } catch (const std::bad_alloc &) {
        st = Status::outOfMemory("out of memory creating the engine");
      }
      const bool ok = st.isOk();
      started.set_value(std::move(st));
      if (ok)
        p->run();
    });
  } catch (...) {
    return Status::internal("cannot start the engine's thread");
  }
  TFC_RETURN_IF_ERROR(ready.get());
  out = std::move(e);
  return Status::ok();
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
    for (const std::shared_ptr<Req> &r : std::deque<std::shared_ptr<Req>>(impl_->queue))
      impl_->cancelLocked(r, ": the engine stopped");
    for (auto &r : impl_->running)
      r->cancelRequested = true;
    impl_->cvEngine.notify_all();
    impl_->cvStep.notify_all();
    impl_->cvEnded.notify_all();
  }
  if (impl_->loop.joinable())
    impl_->loop.join();
}

Status Engine::submit(const std::vector<EngineInput> &inputs, const tfrun_generate_options_t &o,
                      EngineTokenFn onToken, uint64_t &id) {
  Impl &e = *impl_;
  auto r = std::make_shared<Req>();
  r->cacheSalt = o.cache_salt;
  {
    // The inputs, checked as a session checks them.
    std::lock_guard<std::mutex> lk(e.inputMu);
    for (Session::Input &in : e.s->inputs)
      in = Session::Input();
    for (const EngineInput &in : inputs)
      TFC_RETURN_IF_ERROR(
          e.s->setInput(in.name.c_str(), in.dtype, in.shape.data(), in.shape.size(), in.data));
    e.s->fillDefaults();
    r->inputs = e.s->inputs;
  }
  TFC_RETURN_IF_ERROR(planGeneration(e.m, r->inputs, o, std::move(onToken), r->plan));
  r->needRows = r->plan.batch * std::max(1, r->plan.opt.beam);
  if (r->needRows > e.o.rows)
    return Status::invalidArgument("the request needs " + std::to_string(r->needRows) +
                                   " rows (batch " + std::to_string(r->plan.batch) +
                                   " x beam width " + std::to_string(r->plan.opt.beam) +
                                   "), more than the engine's " + std::to_string(e.o.rows));
  // Every row at its last position, with no block shared: what the request
  // may take at most. One that alone could run out of blocks is refused here,
  // so a preempted request always fits once the others have ended.
  const int64_t worst = r->needRows * e.blocksFor(r->plan.positions);
  if (worst > static_cast<int64_t>(e.kv->numBlocks()))
    return Status::invalidArgument(
        "the request may take " + std::to_string(worst) + " KV blocks (" +
        std::to_string(r->needRows) + " rows x " + std::to_string(r->plan.positions) +
        " positions, " + std::to_string(e.blockLen) + " per block); the engine's KV cache holds " +
        std::to_string(e.kv->numBlocks()) + " (raise kv_cache_bytes)");
  const LimitsModel limits(e.vocab, r->needRows);
  TFC_RETURN_IF_ERROR(validateSearch(limits, r->plan.prompts, r->plan.opt));
  std::lock_guard<std::mutex> lk(e.mu);
  if (e.stopping)
    return Status::cancelled("the engine is stopping");
  if (static_cast<int64_t>(e.queue.size()) >= e.o.maxQueue)
    return Status::busy("the engine's queue is full (" + std::to_string(e.o.maxQueue) +
                        " requests waiting); try again later");
  r->id = e.nextId++;
  id = r->id;
  e.reqs[r->id] = r;
  e.queue.push_back(r);
  e.cvEngine.notify_all();
  return Status::ok();
}

Status Engine::wait(uint64_t id, int64_t timeoutMs, bool &done) {
  Impl &e = *impl_;
  std::unique_lock<std::mutex> lk(e.mu);
  Status st;
  std::shared_ptr<Req> r = e.findLocked(id, st);
  if (!r)
    return st;
  auto ended = [&] { return r->state == Req::State::Ended; };
  if (timeoutMs < 0)
    e.cvEnded.wait(lk, ended);
  else
    e.cvEnded.wait_for(lk, std::chrono::milliseconds(timeoutMs), ended);
  done = ended();
  return Status::ok();
}

Status Engine::result(uint64_t id, Status &status, const std::vector<std::vector<int64_t>> *&ids,
                      const std::vector<float> *&scores) {
  Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  Status st;
  std::shared_ptr<Req> found = e.findLocked(id, st);
  if (!found)
    return st;
  const Req &r = *found;
  if (r.state != Req::State::Ended)
    return Status::invalidArgument("request " + std::to_string(id) + " has not ended");
  status = r.status;
  ids = &r.result.ids;
  scores = &r.result.scores;
  return Status::ok();
}

Status Engine::release(uint64_t id) {
  Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  Status st;
  std::shared_ptr<Req> r = e.findLocked(id, st);
  if (!r)
    return st;
  if (r->state != Req::State::Ended) {
    r->released = true; // forgotten when it ends (endLocked)
    e.cancelLocked(r, "");
  }
  if (r->state == Req::State::Ended)
    e.reqs.erase(id);
  return Status::ok();
}

Status Engine::cancel(uint64_t id) {
  Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  Status st;
  std::shared_ptr<Req> r = e.findLocked(id, st);
  if (!r)
    return st;
  if (r->state != Req::State::Ended)
    e.cancelLocked(r, "");
  return Status::ok();
}

Status Engine::cachedTokens(uint64_t id, uint64_t &tokens) const {
  Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  Status st;
  std::shared_ptr<Req> r = e.findLocked(id, st);
  if (!r)
    return st;
  tokens = r->cachedTokens;
  return Status::ok();
}

EngineStats Engine::stats() const {
  const Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  EngineStats st = e.counters;
  st.queued = static_cast<int64_t>(e.queue.size());
  st.running = static_cast<int64_t>(e.running.size());
  st.kvBlocksFree = e.kv->freeBlocks();
  st.kvBlocksUsed = e.kv->usedBlocks();
  st.kvBlocksCached = e.kv->cachedBlocks();
  if (e.memPool) {
    st.memBlocksFree = e.memPool->freeBlocks();
    st.memBlocksUsed = e.memPool->usedBlocks() - 1; // not the zero block
  }
  st.tokensPerSecond = e.busySeconds > 0 ? (double)st.tokensGenerated / e.busySeconds : 0.0;
  return st;
}

} // namespace tfrun::rt
