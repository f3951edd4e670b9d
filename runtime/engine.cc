//===- engine.cc - continuous batching over one session (engine.h) ---------===//
//
// Threads: the engine thread owns the Session (every run and KV copy happens
// on it); each running request has a thread that runs the search and blocks in
// its StepModel until the engine has run its rows. One mutex guards the queue,
// the running set, the free cache rows and every request's exchange fields.
//
// A step: admit what fits, wait until every running request has posted its
// rows (or ended), apply the KV copies beam fan-outs asked for, run one
// decode_step over all the one-token rows, then the prefills within the token
// budget, hand each request its logits and wake it.
//
//===----------------------------------------------------------------------===//
#include "runtime/engine.h"

#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <thread>

namespace tfrun::rt {

namespace {

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
};

struct Cache {
  uint64_t offset = 0; ///< state slot
  int64_t width = 0;
  uint32_t value = 0;
};

} // namespace

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

  std::vector<int64_t> slots;   ///< its cache rows, reserved at admission
  std::vector<int64_t> rowSlot; ///< the current rows' cache rows
  std::vector<int64_t> rowItem; ///< the current rows' batch items
  /// Per RowInputDesc, per batch item: the item's bytes and its shape (no batch dim).
  struct ItemData {
    std::vector<char> bytes;
    std::vector<int64_t> shape;
  };
  std::vector<std::vector<ItemData>> items;
  struct Copy {
    int64_t from, to, positions;
  };
  std::vector<Copy> copies; ///< KV rows to copy before its next step

  // The step exchange.
  bool posted = false, stepDone = false;
  int64_t rows = 0, steps = 1, pos = 0, lastPos = -1;
  std::vector<int64_t> tokens; ///< [rows, steps]
  std::vector<float> logits;   ///< [rows, vocab] after a one-token step
  Status stepStatus;
};

struct Engine::Impl {
  const Model &m;
  std::unique_ptr<Session> s;
  EngineOptions o;
  size_t decIdx = 0;
  int encIdx = -1;
  int tokensIdx = -1, posIdx = -1, blocksIdx = -1;
  int64_t vocab = 0, maxStep = 1, len = 0;
  std::vector<RowInputDesc> rowInputs;
  std::vector<Cache> caches;

  mutable std::mutex mu;
  std::condition_variable cvEngine; ///< the engine thread: posts, ends, submits, stop
  std::condition_variable cvStep;   ///< request threads: their step is done
  std::condition_variable cvEnded;  ///< waiters: a request ended
  std::deque<std::shared_ptr<Req>> queue;
  std::vector<std::shared_ptr<Req>> running;
  std::map<uint64_t, std::shared_ptr<Req>> reqs;
  std::vector<std::shared_ptr<Req>> toJoin;
  std::vector<int64_t> freeRows;
  uint64_t nextId = 1;
  bool stopping = false;
  EngineStats counters;
  double busySeconds = 0;
  std::mutex inputMu; ///< s->inputs, which submit() uses to check a request's inputs
  std::thread loop;

  Impl(const Model &model) : m(model) {}

  Status init();
  void run();
  Status startRequest(Req &r);
  void requestMain(const std::shared_ptr<Req> &r);
  void endLocked(const std::shared_ptr<Req> &r, Status st);
  Status applyCopies(Req &r);
  Status runRows(const std::vector<Req *> &reqs, int64_t steps, bool wantLogits);
  Status post(Req &r, const int64_t *tokens, int64_t rows, int64_t steps, int64_t pos);
};

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
    *logits = r.logits.data();
    return Status::ok();
  }
  Status prefill(const int64_t *tokens, int64_t rows, int64_t n, int64_t pos) override {
    return e.post(r, tokens, rows, n, pos);
  }
  Status select(const int64_t *from, int64_t n) override {
    const int64_t old = static_cast<int64_t>(r.rowSlot.size());
    if (n > r.needRows)
      return Status::internal("select of " + std::to_string(n) + " rows, the request holds " +
                              std::to_string(r.needRows));
    // The first new row that takes an old row keeps its cache row: a reorder
    // or a drop copies nothing. A row that repeats an old row (a beam fans
    // out) gets a cache row no new row keeps, and a copy of the prefix.
    std::vector<int64_t> slot(n, -1), item(n);
    std::vector<char> taken(old, 0), kept(r.slots.size(), 0);
    for (int64_t i = 0; i < n; ++i) {
      if (from[i] < 0 || from[i] >= old)
        return Status::internal("select from a missing row");
      item[i] = r.rowItem[from[i]];
      if (!taken[from[i]]) {
        taken[from[i]] = 1;
        slot[i] = r.rowSlot[from[i]];
      }
    }
    for (int64_t i = 0; i < n; ++i)
      if (slot[i] >= 0)
        for (size_t k = 0; k < r.slots.size(); ++k)
          if (r.slots[k] == slot[i])
            kept[k] = 1;
    size_t next = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (slot[i] >= 0)
        continue;
      while (next < r.slots.size() && kept[next])
        ++next;
      if (next == r.slots.size())
        return Status::internal("no free cache row for a beam");
      kept[next] = 1;
      slot[i] = r.slots[next];
      if (r.lastPos >= 0)
        r.copies.push_back({r.rowSlot[from[i]], slot[i], r.lastPos + 1});
    }
    r.rowSlot.swap(slot);
    r.rowItem.swap(item);
    return Status::ok();
  }

private:
  Engine::Impl &e;
  Req &r;
};

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
  maxStep = tok.dims[1] >= 0 ? tok.dims[1] : m.symbolMax[-(tok.dims[1] + 1)];
  const int64_t maxBatch =
      tok.dims[0] >= 0 ? tok.dims[0] : m.symbolMax[-(tok.dims[0] + 1)];
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
  for (size_t vi = 0; vi < dec->values.size(); ++vi) {
    const ValueDesc &v = dec->values[vi];
    if (v.storage != Storage::State)
      continue;
    bool seen = false;
    for (const Cache &c : caches)
      seen |= c.offset == v.offset;
    if (!seen)
      caches.push_back({v.offset, v.dims[2], (uint32_t)vi});
  }
  if (o.kvCacheBytes < 0)
    return Status::invalidArgument("the KV cache size must not be negative");
  if (o.kvCacheBytes > 0) {
    TFC_RETURN_IF_ERROR(prepareFunction(*s, decIdx)); // the caches' dtypes on the device
    uint64_t rowBytes = 0;
    for (const Cache &c : caches) {
      const auto &dts = s->fns[decIdx].dtypes;
      rowBytes += tfc_dtype_bytes(c.value < dts.size() ? dts[c.value] : TFC_DTYPE_F32,
                                  (uint64_t)len * (uint64_t)c.width);
    }
    const int64_t fit = rowBytes ? static_cast<int64_t>((uint64_t)o.kvCacheBytes / rowBytes)
                                 : o.rows;
    if (fit < 1)
      return Status::invalidArgument(
          "a KV cache of " + std::to_string(o.kvCacheBytes) + " bytes holds no row: one row (" +
          std::to_string(len) + " positions of every layer's K and V) takes " +
          std::to_string(rowBytes) + " bytes");
    o.rows = std::min(o.rows, fit);
  }
  TFC_RETURN_IF_ERROR(s->reserveState(o.rows, len));
  freeRows.resize(static_cast<size_t>(o.rows));
  for (int64_t r = 0; r < o.rows; ++r)
    freeRows[static_cast<size_t>(r)] = o.rows - 1 - r; // pop_back gives row 0 first
  counters.kvBlockPositions = len;
  return Status::ok();
}

Status Engine::Impl::startRequest(Req &r) {
  const int64_t batch = r.plan.batch;
  r.rowSlot.assign(r.slots.begin(), r.slots.begin() + batch);
  r.rowItem.resize(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i)
    r.rowItem[i] = i;
  const Function &fwd = m.forward();
  if (encIdx >= 0) {
    const Function &enc = m.functions[encIdx];
    std::vector<BoundInput> ins(enc.inputs.size());
    for (size_t i = 0; i < enc.inputs.size(); ++i) {
      const int fi = fwd.findInput(enc.inputs[i].name);
      if (fi < 0 || !r.inputs[fi].bound)
        return Status::invalidArgument("input '" + enc.inputs[i].name + "' is not bound");
      ins[i] = {r.inputs[fi].ids.data(), TFC_DTYPE_I64, r.inputs[fi].shape};
    }
    TFC_RETURN_IF_ERROR(runFunction(*s, encIdx, ins));
  }
  r.items.assign(rowInputs.size(), {});
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    const RowInputDesc &d = rowInputs[k];
    const char *src = nullptr;
    std::vector<int64_t> shape;
    uint32_t dtype = d.dtype;
    if (d.fwdInput >= 0) {
      if (!r.inputs[d.fwdInput].bound)
        return Status::invalidArgument("input '" + fwd.inputs[d.fwdInput].name +
                                       "' is not bound");
      src = reinterpret_cast<const char *>(r.inputs[d.fwdInput].ids.data());
      shape = r.inputs[d.fwdInput].shape;
      dtype = TFC_DTYPE_I64;
    } else {
      src = reinterpret_cast<const char *>(s->hostOutput(encIdx, d.encOutput));
      shape = s->fns[encIdx].tensors[d.encOutput].shape;
      dtype = TFC_DTYPE_F32; // hostOutput widens to f32
    }
    if (!src || shape.empty() || shape[0] != batch)
      return Status::invalidModel("decode_step input " + std::to_string(d.input) +
                                  " has no source of the batch's rows");
    uint64_t rowElems = 1;
    for (size_t j = 1; j < shape.size(); ++j)
      rowElems *= static_cast<uint64_t>(shape[j]);
    const uint64_t rowBytes = tfc_dtype_bytes(dtype, rowElems);
    r.items[k].resize(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) {
      r.items[k][i].bytes.assign(src + i * rowBytes, src + (i + 1) * rowBytes);
      r.items[k][i].shape.assign(shape.begin() + 1, shape.end());
    }
  }
  return Status::ok();
}

Status Engine::Impl::post(Req &r, const int64_t *tokens, int64_t rows, int64_t steps,
                          int64_t pos) {
  std::unique_lock<std::mutex> lk(mu);
  if (r.cancelRequested || stopping)
    return Status::cancelled("request " + std::to_string(r.id) + " was cancelled");
  if (rows != static_cast<int64_t>(r.rowSlot.size()))
    return Status::internal("a step of " + std::to_string(rows) + " rows, the request has " +
                            std::to_string(r.rowSlot.size()));
  r.tokens.assign(tokens, tokens + rows * steps);
  r.rows = rows;
  r.steps = steps;
  r.pos = pos;
  r.stepDone = false;
  r.posted = true;
  cvEngine.notify_all();
  cvStep.wait(lk, [&] { return r.stepDone; });
  r.posted = false;
  if (r.stepStatus.isOk())
    r.lastPos = pos + steps - 1;
  return r.stepStatus;
}

Status Engine::Impl::applyCopies(Req &r) {
  if (r.copies.empty())
    return Status::ok();
  Device &d = *s->dev;
  for (const Req::Copy &c : r.copies)
    for (const Cache &k : caches) {
      const uint64_t es = tfc_dtype_bytes(s->fns[decIdx].dtypes.size() > k.value
                                              ? s->fns[decIdx].dtypes[k.value]
                                              : TFC_DTYPE_F32,
                                          1);
      const uint64_t rowBytes = (uint64_t)s->stateLen * k.width * es;
      char *base = static_cast<char *>(s->state) + s->stateSlots.at(k.offset);
      const uint64_t bytes = (uint64_t)c.positions * k.width * es;
      if (d.hostMemory())
        std::memcpy(base + c.to * rowBytes, base + c.from * rowBytes, bytes);
      else
        TFC_RETURN_IF_ERROR(d.copy(base + c.to * rowBytes, base + c.from * rowBytes, bytes));
    }
  r.copies.clear();
  return d.hostMemory() ? Status::ok() : d.sync();
}

Status Engine::Impl::runRows(const std::vector<Req *> &group, int64_t steps, bool wantLogits) {
  const Function &dec = m.functions[decIdx];
  int64_t rows = 0;
  for (const Req *r : group)
    rows += r->rows;
  std::vector<int64_t> tokens, pos, blocks;
  tokens.reserve(static_cast<size_t>(rows * steps));
  for (const Req *r : group) {
    tokens.insert(tokens.end(), r->tokens.begin(), r->tokens.end());
    for (int64_t i = 0; i < r->rows; ++i) {
      pos.push_back(r->pos);
      blocks.push_back(r->rowSlot[i]);
    }
  }
  std::vector<BoundInput> ins(dec.inputs.size());
  ins[tokensIdx] = {tokens.data(), TFC_DTYPE_I64, {rows, steps}};
  ins[posIdx] = {pos.data(), TFC_DTYPE_I64, {rows}};
  ins[blocksIdx] = {blocks.data(), TFC_DTYPE_I64, {rows, 1}};
  // The row inputs, padded along their first dim to the longest row's: ids
  // with the row's pad_id (a mask with 0), encoder memory with zeros, which
  // the cross-attention's key padding mask leaves out.
  std::vector<std::vector<char>> rowData(rowInputs.size());
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    const RowInputDesc &d = rowInputs[k];
    std::vector<int64_t> shape;
    for (const Req *r : group)
      for (int64_t i = 0; i < r->rows; ++i) {
        const std::vector<int64_t> &sh = r->items[k][r->rowItem[i]].shape;
        if (shape.empty())
          shape = sh;
        else if (!sh.empty())
          shape[0] = std::max(shape[0], sh[0]);
      }
    const uint32_t dtype = d.fwdInput >= 0 ? TFC_DTYPE_I64 : TFC_DTYPE_F32;
    uint64_t inner = 1; // elements per position (dims after the first)
    for (size_t j = 1; j < shape.size(); ++j)
      inner *= static_cast<uint64_t>(shape[j]);
    const int64_t n = shape.empty() ? 1 : shape[0];
    const uint64_t es = tfc_dtype_bytes(dtype, 1);
    const uint64_t rowBytes = es * inner * static_cast<uint64_t>(n);
    std::vector<char> &buf = rowData[k];
    buf.assign(rowBytes * static_cast<uint64_t>(rows), 0);
    int64_t row = 0;
    for (const Req *r : group)
      for (int64_t i = 0; i < r->rows; ++i, ++row) {
        const Req::ItemData &it = r->items[k][r->rowItem[i]];
        char *dst = buf.data() + row * rowBytes;
        std::memcpy(dst, it.bytes.data(), it.bytes.size());
        if (dtype == TFC_DTYPE_I64 && !d.defaulted && r->plan.opt.pad != 0) {
          const int64_t pad = r->plan.opt.pad;
          int64_t *ids = reinterpret_cast<int64_t *>(dst);
          for (uint64_t e = it.bytes.size() / 8; e < inner * (uint64_t)n; ++e)
            ids[e] = pad;
        }
      }
    std::vector<int64_t> full{rows};
    full.insert(full.end(), shape.begin(), shape.end());
    ins[d.input] = {buf.data(), dtype, std::move(full)};
  }
  TFC_RETURN_IF_ERROR(runFunction(*s, decIdx, ins));
  if (!wantLogits)
    return Status::ok();
  const float *logits = s->hostOutput(decIdx, dec.outputs[0].value);
  if (!logits)
    return Status::internal("decode_step returned no logits");
  int64_t row = 0;
  for (Req *r : group) {
    r->logits.assign(logits + row * vocab, logits + (row + r->rows) * vocab);
    row += r->rows;
  }
  return Status::ok();
}

void Engine::Impl::endLocked(const std::shared_ptr<Req> &r, Status st) {
  r->status = std::move(st);
  r->state = Req::State::Ended;
  for (int64_t slot : r->slots)
    freeRows.push_back(slot);
  r->slots.clear();
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
    // Admission: first come, first served, while the rows fit.
    while (!stopping && !queue.empty() &&
           static_cast<int64_t>(freeRows.size()) >= queue.front()->needRows) {
      std::shared_ptr<Req> r = queue.front();
      queue.pop_front();
      for (int64_t i = 0; i < r->needRows; ++i) {
        r->slots.push_back(freeRows.back());
        freeRows.pop_back();
      }
      r->state = Req::State::Running;
      running.push_back(r);
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
    cvEngine.wait(lk, [&] {
      return allPosted() || !toJoin.empty() || (stopping && running.empty()) ||
             (!stopping && !queue.empty() &&
              static_cast<int64_t>(freeRows.size()) >= queue.front()->needRows);
    });
    if (!allPosted())
      continue;
    // One step over every posted request: cancelled ones are answered at once;
    // the one-token rows go in one call; prompts within the token budget.
    std::vector<Req *> decode, prefill, answered;
    int64_t budget = o.maxBatchTokens;
    for (const auto &r : running) {
      if (r->cancelRequested || stopping) {
        r->stepStatus = Status::cancelled("request " + std::to_string(r->id) + " was cancelled");
        r->stepDone = true;
        continue;
      }
      if (r->steps == 1) {
        decode.push_back(r.get());
      } else if (prefill.empty() || r->rows * r->steps <= budget) {
        prefill.push_back(r.get());
        budget -= r->rows * r->steps;
      }
    }
    lk.unlock();
    const auto t0 = Clock::now();
    for (Req *r : decode) {
      r->stepStatus = applyCopies(*r);
    }
    for (Req *r : prefill)
      r->stepStatus = applyCopies(*r);
    std::vector<Req *> ok;
    for (Req *r : decode)
      if (r->stepStatus.isOk())
        ok.push_back(r);
    if (!ok.empty()) {
      Status st;
      try {
        st = runRows(ok, 1, true);
      } catch (const std::bad_alloc &) {
        st = Status::outOfMemory("out of memory in an engine step");
      }
      for (Req *r : ok)
        r->stepStatus = st;
    }
    for (Req *r : prefill) {
      if (!r->stepStatus.isOk())
        continue;
      try {
        r->stepStatus = runRows({r}, r->steps, false);
      } catch (const std::bad_alloc &) {
        r->stepStatus = Status::outOfMemory("out of memory in a prefill");
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    lk.lock();
    busySeconds += secs;
    ++counters.steps;
    for (Req *r : ok)
      counters.tokensGenerated += r->stepStatus.isOk() ? (uint64_t)r->rows : 0;
    for (Req *r : decode)
      r->stepDone = true;
    for (Req *r : prefill)
      r->stepDone = true;
    cvStep.notify_all();
  }
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Status Engine::create(const Model &model, std::unique_ptr<Device> dev, const EngineOptions &o,
                      std::unique_ptr<Engine> &out) {
  out.reset();
  std::unique_ptr<Impl> impl(new (std::nothrow) Impl(model));
  if (!impl)
    return Status::outOfMemory("out of memory creating the engine");
  impl->o = o;
  TFC_RETURN_IF_ERROR(Session::create(model, std::move(dev), impl->s));
  TFC_RETURN_IF_ERROR(impl->init());
  Impl *p = impl.get();
  std::unique_ptr<Engine> e(new (std::nothrow) Engine(std::move(impl)));
  if (!e)
    return Status::outOfMemory("out of memory creating the engine");
  try {
    p->loop = std::thread([p] { p->run(); });
  } catch (...) {
    return Status::internal("cannot start the engine's thread");
  }
  out = std::move(e);
  return Status::ok();
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
    for (auto &r : impl_->queue) {
      r->cancelRequested = true;
      r->status = Status::cancelled("request " + std::to_string(r->id) +
                                    " was cancelled: the engine stopped");
      r->state = Req::State::Ended;
      ++impl_->counters.requestsCancelled;
    }
    impl_->queue.clear();
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
  auto it = e.reqs.find(id);
  if (it == e.reqs.end())
    return Status::invalidArgument("no request " + std::to_string(id) + " in this engine");
  std::shared_ptr<Req> r = it->second;
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
  auto it = e.reqs.find(id);
  if (it == e.reqs.end())
    return Status::invalidArgument("no request " + std::to_string(id) + " in this engine");
  const Req &r = *it->second;
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
  auto it = e.reqs.find(id);
  if (it == e.reqs.end())
    return Status::invalidArgument("no request " + std::to_string(id) + " in this engine");
  std::shared_ptr<Req> r = it->second;
  if (r->state == Req::State::Ended) {
    e.reqs.erase(it);
    return Status::ok();
  }
  r->released = true;
  r->cancelRequested = true;
  if (r->state == Req::State::Queued) {
    e.queue.erase(std::remove(e.queue.begin(), e.queue.end(), r), e.queue.end());
    r->state = Req::State::Ended;
    ++e.counters.requestsCancelled;
    e.reqs.erase(it);
  }
  e.cvEngine.notify_all();
  e.cvEnded.notify_all();
  return Status::ok();
}

Status Engine::cancel(uint64_t id) {
  Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  auto it = e.reqs.find(id);
  if (it == e.reqs.end())
    return Status::invalidArgument("no request " + std::to_string(id) + " in this engine");
  std::shared_ptr<Req> r = it->second;
  if (r->state == Req::State::Ended)
    return Status::ok();
  r->cancelRequested = true;
  if (r->state == Req::State::Queued) {
    e.queue.erase(std::remove(e.queue.begin(), e.queue.end(), r), e.queue.end());
    r->status = Status::cancelled("request " + std::to_string(id) + " was cancelled");
    r->state = Req::State::Ended;
    ++e.counters.requestsCancelled;
    e.cvEnded.notify_all();
  }
  e.cvEngine.notify_all();
  return Status::ok();
}

EngineStats Engine::stats() const {
  const Impl &e = *impl_;
  std::lock_guard<std::mutex> lk(e.mu);
  EngineStats st = e.counters;
  st.queued = static_cast<int64_t>(e.queue.size());
  st.running = static_cast<int64_t>(e.running.size());
  st.kvBlocksFree = static_cast<int64_t>(e.freeRows.size());
  st.kvBlocksUsed = e.o.rows - st.kvBlocksFree;
  st.tokensPerSecond = e.busySeconds > 0 ? (double)st.tokensGenerated / e.busySeconds : 0.0;
  return st;
}

} // namespace tfrun::rt
