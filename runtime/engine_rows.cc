//===- engine_rows.cc - what an engine step runs on the session ------------===//
//
// The engine's work on its Session (engine_internal.h): a request's start
// (encode, its per-item decode_step inputs), the KV copies of beam fan-outs,
// and one decode_step over the rows of several requests.
//
//===----------------------------------------------------------------------===//
#include "runtime/engine_internal.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace tfrun::rt {

//===----------------------------------------------------------------------===//
// The KV pool's rows (mu held)
//===----------------------------------------------------------------------===//

template <class Limit>
uint64_t Engine::Impl::cachedForAll(const Req &r, const std::vector<std::vector<int64_t>> &rows,
                                    Limit limit) const {
  if (!prefixOn || rows.empty())
    return 0;
  uint64_t cached = UINT64_MAX;
  for (const std::vector<int64_t> &t : rows)
    cached = std::min(cached, kv->cachedPrefix(t.data(), limit(t), r.cacheSalt));
  return cached;
}

bool Engine::Impl::startsFromCache(const Req &r) const {
  // Only where the search prefills the prompts in chunks (prefillPrompts):
  // fed token by token, each step would want the logits of a cached position.
  return prefixOn && static_cast<int64_t>(r.plan.prompts.size()) == r.plan.batch &&
         maxStep > 1 && prefillChunk() > 1 && r.plan.batch <= 1024;
}

uint64_t Engine::Impl::cachedAtStart(const Req &r) const {
  // Whole blocks of every row's prompt short of its last token (whose step
  // gives the first logits), as many as all rows have cached, since the
  // search prefills the rows' common prefix together.
  return !startsFromCache(r) ? 0 : cachedForAll(r, r.plan.prompts, [](const auto &p) {
    return p.empty() ? uint64_t{0} : static_cast<uint64_t>(p.size() - 1);
  });
}

int64_t Engine::Impl::blocksToStart(const Req &r) const {
  int64_t prompt = 1;
  for (const auto &p : r.plan.prompts)
    prompt = std::max<int64_t>(prompt, static_cast<int64_t>(p.size()));
  int64_t need = r.plan.batch * blocksFor(prompt);
  // A shared system prompt's blocks, which the running requests hold, are
  // taken from no one: counting them would admit fewer requests than fit.
  // (vLLM's scheduler counts a request's new blocks after its prefix-cache
  // lookup the same way.)
  if (const uint64_t cached = cachedAtStart(r))
    for (const auto &p : r.plan.prompts)
      need -= kv->heldPrefixBlocks(p.data(), cached, r.cacheSalt);
  return need;
}

void Engine::Impl::startRows(Req &r) {
  const int64_t batch = r.plan.batch;
  const std::vector<std::vector<int64_t>> &prompts = r.plan.prompts;
  r.rowSeq.clear();
  r.rowHist.assign(static_cast<size_t>(batch), {});
  const bool cache = startsFromCache(r);
  const uint64_t cached = cachedAtStart(r);
  for (int64_t i = 0; i < batch; ++i) {
    uint64_t got = 0;
    r.rowSeq.push_back(cached ? kv->createFromPrefix(prompts[i].data(), cached, got, r.cacheSalt)
                              : kv->create(r.cacheSalt));
    r.rowHist[i].assign(prompts[i].begin(), prompts[i].begin() + static_cast<int64_t>(got));
    counters.prefixQueryTokens += cache ? prompts[i].size() : 0;
    counters.prefixHitTokens += got;
    r.cachedTokens += got;
  }
  r.cachedPos = static_cast<int64_t>(cached);
  r.rowItem.resize(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i)
    r.rowItem[i] = i;
}

void Engine::Impl::extendHistory(Req &r) {
  for (int64_t i = 0; i < r.rows; ++i) {
    std::vector<int64_t> &h = r.rowHist[i];
    const int64_t have = static_cast<int64_t>(h.size()) - r.pos; // of the step's tokens
    const int64_t skip = std::min(std::max<int64_t>(have, 0), r.steps);
    h.insert(h.end(), r.tokens.begin() + i * r.steps + skip, r.tokens.begin() + (i + 1) * r.steps);
  }
}

void Engine::Impl::publishRows(Req &r) {
  const uint64_t written = static_cast<uint64_t>(r.runPos + r.runSteps);
  for (size_t i = 0; i < r.rowSeq.size() && i < r.rowHist.size(); ++i)
    if (r.rowSeq[i] != 0 && r.rowHist[i].size() >= written)
      kv->publish(r.rowSeq[i], r.rowHist[i].data(), written);
}

Status Engine::Impl::selectRows(Req &r, const int64_t *from, int64_t n) {
  const int64_t old = static_cast<int64_t>(r.rowSeq.size());
  if (n > r.needRows)
    return Status::internal("select of " + std::to_string(n) + " rows, the request holds " +
                            std::to_string(r.needRows));
  // The first new row that takes an old row keeps its sequence: a reorder or
  // a drop copies nothing. A row that repeats an old row (a beam fans out)
  // forks it: the fork shares every block, copied only when written.
  std::vector<BlockAllocator::SeqId> seq(static_cast<size_t>(n));
  std::vector<int64_t> item(static_cast<size_t>(n));
  std::vector<std::vector<int64_t>> hist(static_cast<size_t>(n));
  std::vector<char> taken(static_cast<size_t>(old), 0);
  for (int64_t i = 0; i < n; ++i)
    if (from[i] < 0 || from[i] >= old || r.rowSeq[from[i]] == 0)
      return Status::internal("select from a missing row");
  for (int64_t i = 0; i < n; ++i) {
    item[i] = r.rowItem[from[i]];
    hist[i] = r.rowHist[from[i]];
    if (!taken[from[i]]) {
      taken[from[i]] = 1;
      seq[i] = r.rowSeq[from[i]];
    } else {
      TFC_RETURN_IF_ERROR(kv->fork(r.rowSeq[from[i]], seq[i]));
    }
  }
  for (int64_t j = 0; j < old; ++j)
    if (!taken[j])
      (void)kv->release(r.rowSeq[j]);
  r.rowSeq.swap(seq);
  r.rowItem.swap(item);
  r.rowHist.swap(hist);
  return Status::ok();
}

void Engine::Impl::releaseRows(Req &r) {
  for (BlockAllocator::SeqId &q : r.rowSeq)
    if (q != 0) {
      (void)kv->release(q);
      q = 0;
    }
  r.copies.clear();
}

namespace {

/// The rows' block tables, [rows, widest] (a shorter table padded with block
/// 0, which no row reads past its own length).
void tablesOf(const BlockAllocator &kv, const Req &r, std::vector<int64_t> &out,
              int64_t &width) {
  width = 1;
  for (BlockAllocator::SeqId q : r.rowSeq)
    width = std::max<int64_t>(width, static_cast<int64_t>(kv.table(q)->size()));
  out.assign(r.rowSeq.size() * static_cast<size_t>(width), 0);
  for (size_t i = 0; i < r.rowSeq.size(); ++i) {
    const std::vector<uint32_t> &t = *kv.table(r.rowSeq[i]);
    std::copy(t.begin(), t.end(), out.begin() + static_cast<int64_t>(i) * width);
  }
}

} // namespace

int Engine::Impl::reserveStep(Req &r) {
  // The positions to run: past those the prefix cache gave (a prompt's
  // prefill chunk may lie within them, wholly or in part).
  const int64_t end = r.pos + r.steps;
  const int64_t from = r.runFrom();
  for (size_t i = 0; i < r.rowSeq.size() && from < end; ++i) {
    const uint64_t have = kv->length(r.rowSeq[i]);
    if (have == static_cast<uint64_t>(end))
      continue; // reserved before a preemption made room
    if (have != static_cast<uint64_t>(from)) {
      r.stepStatus = Status::internal("a step at position " + std::to_string(from) +
                                      " of a row that holds " + std::to_string(have));
      return -1;
    }
    if (!kv->append(r.rowSeq[i], static_cast<uint64_t>(end - from), r.copies).isOk())
      return 0;
  }
  extendHistory(r);
  r.runPos = from;
  r.runSteps = end - from;
  if (r.runSteps == 0)
    return 1; // nothing to run: every position came from the cache
  tablesOf(*kv, r, r.tables, r.tableWidth);
  if (from > r.pos) { // the step's tokens past the cached ones
    std::vector<int64_t> rest;
    rest.reserve(static_cast<size_t>(r.rows * r.runSteps));
    for (int64_t i = 0; i < r.rows; ++i)
      rest.insert(rest.end(), r.tokens.begin() + i * r.steps + (from - r.pos),
                  r.tokens.begin() + (i + 1) * r.steps);
    r.tokens.swap(rest);
  }
  return 1;
}

void Engine::Impl::preempt(Req &r) {
  releaseRows(r);
  r.preempted = true;
  // Its recompute runs every position from 0 to its posted step's end; the
  // history keeps the positions run before that step (prompt tokens the
  // cache gave past them come again in the search's next prefill chunks).
  r.cachedPos = 0;
  for (std::vector<int64_t> &h : r.rowHist)
    if (static_cast<int64_t>(h.size()) > r.pos)
      h.resize(static_cast<size_t>(r.pos));
  ++counters.preemptions;
}

bool Engine::Impl::resume(Req &r) {
  const int64_t n = r.pos + r.steps;
  if (static_cast<int64_t>(kv->freeBlocks()) < r.rows * blocksFor(n))
    return false;
  extendHistory(r);
  // The rows' history from the longest prefix the cache still holds for all
  // of them (often the request's own blocks, published before the
  // preemption let them go), short of the last position, whose logits the
  // posted step may want. Every row takes its cached blocks before any row
  // takes new ones, which could be those cached blocks.
  const uint64_t cached =
      cachedForAll(r, r.rowHist, [&](const auto &) { return static_cast<uint64_t>(n - 1); });
  for (int64_t i = 0; i < r.rows; ++i) {
    uint64_t got = 0;
    r.rowSeq[i] = cached ? kv->createFromPrefix(r.rowHist[i].data(), cached, got, r.cacheSalt)
                         : kv->create(r.cacheSalt);
  }
  std::vector<int64_t> tokens;
  tokens.reserve(static_cast<size_t>(r.rows * (n - static_cast<int64_t>(cached))));
  for (int64_t i = 0; i < r.rows; ++i) {
    // Fits: the check above counted every row's blocks as new.
    (void)kv->append(r.rowSeq[i], static_cast<uint64_t>(n) - cached, r.copies);
    tokens.insert(tokens.end(), r.rowHist[i].begin() + static_cast<int64_t>(cached),
                  r.rowHist[i].end());
  }
  // What the preemption dropped and the cache does not hold, and the posted
  // step's tokens at its end.
  r.tokens.swap(tokens);
  tablesOf(*kv, r, r.tables, r.tableWidth);
  r.runPos = static_cast<int64_t>(cached);
  r.runSteps = n - r.runPos;
  r.preempted = false;
  return true;
}

//===----------------------------------------------------------------------===//
// Session work (the engine thread, mu not held)
//===----------------------------------------------------------------------===//

Status Engine::Impl::startRequest(Req &r) {
  const int64_t batch = r.plan.batch;
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
    TFC_RETURN_IF_ERROR(storeMemory(r));
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
      if (!d.perItem) // encoder memory is in the pool (storeMemory): its shape only
        r.items[k][i].bytes.assign(src + i * rowBytes, src + (i + 1) * rowBytes);
      r.items[k][i].shape.assign(shape.begin() + 1, shape.end());
    }
  }
  return Status::ok();
}

Status Engine::Impl::applyCopies(Req &r) {
  if (r.copies.empty())
    return Status::ok();
  Device &d = *s->dev;
  for (const BlockCopy &c : r.copies)
    for (const StateCache &k : caches) {
      const uint64_t es = k.elemSize(*s, decIdx);
      const uint64_t bytes = (uint64_t)s->stateLen * k.width * es; // one block
      char *base = static_cast<char *>(s->state) + s->stateSlots.at(k.offset);
      if (d.hostMemory())
        std::memcpy(base + c.to * bytes, base + c.from * bytes, bytes);
      else
        TFC_RETURN_IF_ERROR(d.copy(base + c.to * bytes, base + c.from * bytes, bytes));
    }
  r.copies.clear();
  return d.hostMemory() ? Status::ok() : d.sync();
}

void Engine::Impl::orderLikeLastStep(std::vector<Req *> &group) const {
  // Where each request's rows were in the last one-token step.
  std::map<uint64_t, std::pair<int64_t, int64_t>> was; // id -> (first row, rows)
  for (size_t i = 0; i < decodeInputs.rows.size(); ++i) {
    auto it = was.try_emplace(decodeInputs.rows[i].first, static_cast<int64_t>(i), 0).first;
    ++it->second.second;
  }
  int64_t total = 0;
  for (const Req *r : group)
    total += r->rows;
  // A request stays at its rows when it has as many and they end within the
  // step's; the others fill the gaps, largest first, each in the first gap it
  // fits. They fill them exactly (the gaps' rows are the rows left), unless the
  // gaps are too fragmented: then the requests close up in order.
  std::vector<std::pair<int64_t, Req *>> placed; // (first row, request)
  std::vector<Req *> rest;
  std::vector<char> used(static_cast<size_t>(total), 0);
  for (Req *r : group) {
    auto it = was.find(r->id);
    if (it != was.end() && it->second.second == r->rows && it->second.first + r->rows <= total) {
      placed.emplace_back(it->second.first, r);
      std::fill(used.begin() + it->second.first, used.begin() + it->second.first + r->rows, 1);
    } else {
      rest.push_back(r);
    }
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const Req *a, const Req *b) { return a->rows > b->rows; });
  for (Req *r : rest) {
    int64_t at = -1;
    for (int64_t i = 0, run = 0; i < total && at < 0; ++i) {
      run = used[i] ? 0 : run + 1;
      if (run == r->rows)
        at = i + 1 - run;
    }
    if (at < 0)
      return; // fragmented: as they came
    std::fill(used.begin() + at, used.begin() + at + r->rows, 1);
    placed.emplace_back(at, r);
  }
  std::sort(placed.begin(), placed.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  group.clear();
  for (const auto &p : placed)
    group.push_back(p.second);
}

void Engine::Impl::updateRowInputs(const std::vector<Req *> &group, RowInputBatch &batch) {
  std::vector<std::pair<uint64_t, int64_t>> rows;
  for (const Req *r : group)
    for (int64_t i = 0; i < r->rows; ++i)
      rows.emplace_back(r->id, r->rowItem[i]);
  // Each input's item shape: the longest row's first dim.
  std::vector<std::vector<int64_t>> shapes(rowInputs.size());
  for (size_t k = 0; k < rowInputs.size(); ++k)
    for (const Req *r : group)
      for (int64_t i = 0; i < r->rows; ++i) {
        const std::vector<int64_t> &sh = r->items[k][r->rowItem[i]].shape;
        if (shapes[k].empty())
          shapes[k] = sh;
        else if (!sh.empty())
          shapes[k][0] = std::max(shapes[k][0], sh[0]);
      }
  // The padded length: a multiple of 16 positions (within the model's
  // maximum), so that a slightly longer source joining does not rewrite
  // every row. The rows already in place stay while they fit it and it is
  // not far longer than needed (a longer one costs the cross-attention keys
  // that are padding).
  const Function &dec = m.functions[decIdx];
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    const std::vector<int64_t> &dims = dec.values[dec.inputs[rowInputs[k].input].value].dims;
    if (!shapes[k].empty() && dims.size() >= 2)
      shapes[k][0] = std::min((shapes[k][0] + 15) / 16 * 16, m.maxDim(dims[1]));
  }
  const bool decoding = &batch == &decodeInputs;
  bool keep = decoding && batch.data.size() == rowInputs.size() &&
              batch.shapes.size() == shapes.size();
  for (size_t k = 0; keep && k < rowInputs.size(); ++k) {
    const std::vector<int64_t> &was = batch.shapes[k], &now = shapes[k];
    keep = was.size() == now.size() &&
           (now.empty() || (std::equal(now.begin() + 1, now.end(), was.begin() + 1) &&
                            (now[0] == was[0] || (now[0] < was[0] && now[0] * 4 > was[0] * 3))));
  }
  if (!keep) { // every row anew (the inputs share the source's length: all change)
    batch.rows.clear();
    batch.data.resize(rowInputs.size());
    batch.shapes = std::move(shapes);
  }
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    const RowInputDesc &d = rowInputs[k];
    if (d.perItem)
      continue; // in the memory pool
    const std::vector<int64_t> &shape = batch.shapes[k];
    const uint32_t dtype = d.fwdInput >= 0 ? TFC_DTYPE_I64 : TFC_DTYPE_F32;
    uint64_t elems = 1;
    for (int64_t e : shape)
      elems *= static_cast<uint64_t>(e);
    const uint64_t rowBytes = tfc_dtype_bytes(dtype, elems);
    std::vector<char> &buf = batch.data[k];
    if (!keep && decoding) // room for the engine's rows: growing by reallocation copied them all
      buf.reserve(rowBytes * static_cast<uint64_t>(std::max<int64_t>(o.rows, rows.size())));
    buf.resize(rowBytes * rows.size()); // keeps the rows in place
    int64_t row = 0;
    for (const Req *r : group)
      for (int64_t i = 0; i < r->rows; ++i, ++row) {
        if (static_cast<size_t>(row) < batch.rows.size() && batch.rows[row] == rows[row])
          continue;
        const Req::ItemData &it = r->items[k][r->rowItem[i]];
        char *dst = buf.data() + row * rowBytes;
        std::memcpy(dst, it.bytes.data(), it.bytes.size());
        if (dtype == TFC_DTYPE_I64 && !d.defaulted && r->plan.opt.pad != 0)
          std::fill(reinterpret_cast<int64_t *>(dst) + it.bytes.size() / 8,
                    reinterpret_cast<int64_t *>(dst + rowBytes), r->plan.opt.pad);
        else
          std::memset(dst + it.bytes.size(), 0, rowBytes - it.bytes.size());
      }
  }
  batch.rows = std::move(rows);
}

Status Engine::Impl::runRows(const std::vector<Req *> &group, int64_t steps, bool wantLogits,
                             bool lastRun) {
  const Function &dec = m.functions[decIdx];
  int64_t rows = 0;
  for (const Req *r : group)
    rows += r->rows;
  int64_t width = 1;
  for (const Req *r : group)
    width = std::max(width, r->tableWidth);
  std::vector<int64_t> tokens, pos, blocks(static_cast<size_t>(rows * width), 0);
  tokens.reserve(static_cast<size_t>(rows * steps));
  int64_t row = 0;
  for (const Req *r : group) {
    tokens.insert(tokens.end(), r->tokens.begin(), r->tokens.end());
    for (int64_t i = 0; i < r->rows; ++i, ++row) {
      pos.push_back(r->runPos);
      std::copy(r->tables.begin() + i * r->tableWidth,
                r->tables.begin() + (i + 1) * r->tableWidth, blocks.begin() + row * width);
    }
  }
  std::vector<BoundInput> ins(dec.inputs.size());
  ins[tokensIdx] = {tokens.data(), TFC_DTYPE_I64, {rows, steps}};
  ins[posIdx] = {pos.data(), TFC_DTYPE_I64, {rows}};
  ins[blocksIdx] = {blocks.data(), TFC_DTYPE_I64, {rows, width}};
  // The row inputs, padded along their first dim to the longest row's: ids
  // with the row's pad_id (a mask with 0), encoder memory with zeros, which
  // the cross-attention's key padding mask leaves out. A step's decode run
  // keeps them from step to step (a recompute's run has its own) and writes
  // only the rows that changed: the rows of requests that joined, or moved
  // into the places of those that left (orderLikeLastStep). Rewriting every
  // row of encoder memory whenever a request joined or left took 14% of a
  // Marian engine's time under Poisson arrivals (beam 4: 15%).
  RowInputBatch fresh;
  RowInputBatch &batch = lastRun ? decodeInputs : fresh;
  updateRowInputs(group, batch);
  for (size_t k = 0; k < rowInputs.size(); ++k) {
    const RowInputDesc &d = rowInputs[k];
    if (d.perItem) {
      // The memory pool's blocks in use, which each row reads through its
      // item's table, padded to the step's source length.
      int64_t nb = 1;
      TFC_RETURN_IF_ERROR(
          memoryTables(group, batch.shapes[k].empty() ? 0 : batch.shapes[k][0], nb));
      ins[memBlocksIdx] = {memTables.data(), TFC_DTYPE_I64, {rows, nb}};
      ins[d.input] = {memBuf[k].get(), TFC_DTYPE_F32, {memHigh, memLen, d.width}};
      continue;
    }
    std::vector<int64_t> full{rows};
    full.insert(full.end(), batch.shapes[k].begin(), batch.shapes[k].end());
    ins[rowInputs[k].input] = {batch.data[k].data(),
                               rowInputs[k].fwdInput >= 0 ? TFC_DTYPE_I64 : TFC_DTYPE_F32,
                               std::move(full)};
  }
  TFC_RETURN_IF_ERROR(runFunction(*s, decIdx, ins));
  if (!wantLogits)
    return Status::ok();
  const float *logits = s->hostOutput(decIdx, dec.outputs[0].value);
  if (!logits)
    return Status::internal("decode_step returned no logits");
  // A step's last run leaves its logits where the requests read them: a copy
  // of [rows, vocab] took the engine thread 1 to 3 ms a step (11 MB at 48
  // Marian rows, 30 MB at 128).
  row = 0;
  for (Req *r : group) {
    if (lastRun) {
      r->logitsAt = logits + row * vocab;
    } else {
      r->logits.assign(logits + row * vocab, logits + (row + r->rows) * vocab);
      r->logitsAt = r->logits.data();
    }
    row += r->rows;
  }
  return Status::ok();
}

} // namespace tfrun::rt
