//===- step_model.cc - generation over a session: @encode, @decode_step ----===//
//
// The StepModel (generate.h) of a session: @encode once, then @decode_step per
// position through the executor, with per-row copies of everything
// batch-major that decode_step reads (encoder memory, source ids) and the KV
// cache in the session state, so rows can be dropped, fanned out and
// reordered (select). Session::generate checks the options against the model
// and runs the search.
//
//===----------------------------------------------------------------------===//
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "runtime/kv_blocks.h"
#include "runtime/session.h"
#include "tfrun/tfrun.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tfrun::rt {
namespace {

/// The decoder side of generation over a session: @encode once, then
/// @decode_step per position, with per-row copies of everything batch-major
/// that decode_step reads (encoder memory, source ids) and the KV cache in the
/// session state, so rows can be dropped, fanned out and reordered (select).
class SessionStepModel : public StepModel {
public:
  explicit SessionStepModel(Session *s) : s(s), m(*s->m) {}
  ~SessionStepModel() override {
    if (scratch)
      s->dev->release(scratch);
  }
  SessionStepModel(const SessionStepModel &) = delete;
  SessionStepModel &operator=(const SessionStepModel &) = delete;

  /// Runs @encode (if any) and sets up the per-row inputs of decode_step.
  Status start(int64_t batch) {
    decIdx = index("decode_step");
    const Function &dec = m.functions[decIdx];
    // What this step model reads of decode_step, which the loader does not
    // know about: logits out, and [rows, 1] tokens in.
    if (dec.outputs.empty())
      return Status::invalidModel("decode_step has no outputs (it must return the logits)");
    const Function &fwd = m.forward();
    rows = batch;
    items = batch;
    rowItem.resize(batch);
    for (int64_t r = 0; r < batch; ++r)
      rowItem[r] = r;
    int encIdx = m.find("encode") ? (int)index("encode") : -1;
    if (encIdx >= 0) {
      const Function &enc = m.functions[encIdx];
      std::vector<BoundInput> ins(enc.inputs.size());
      for (size_t i = 0; i < enc.inputs.size(); ++i) {
        int fi = fwd.findInput(enc.inputs[i].name);
        if (fi < 0 || !s->inputs[fi].bound)
          return Status::invalidArgument("input '" + enc.inputs[i].name + "' is not bound");
        ins[i] = {s->inputs[fi].ids.data(), TFC_DTYPE_I64, s->inputs[fi].shape};
      }
      TFC_RETURN_IF_ERROR(runFunction(*s, encIdx, ins));
    }
    // Per-row copies of decode_step's batch-major inputs.
    for (size_t i = 0; i < dec.inputs.size(); ++i) {
      const std::string &name = dec.inputs[i].name;
      if (name == "step.tokens") {
        tokensIdx = i;
        continue;
      }
      if (name == "step.pos") {
        posIdx = i;
        posPerRow = dec.values[dec.inputs[i].value].dims.size() == 1;
        continue;
      }
      if (name == "step.blocks") {
        blocksIdx = i;
        continue;
      }
      if (name == "step.memory_blocks") {
        memBlocksIdx = i;
        continue;
      }
      RowInput r;
      r.input = i;
      const void *src = nullptr;
      std::vector<int64_t> shape;
      r.dtype = dec.values[dec.inputs[i].value].dtype;
      int fi = fwd.findInput(name);
      if (fi >= 0 && s->inputs[fi].bound) {
        src = s->inputs[fi].ids.data();
        shape = s->inputs[fi].shape;
      } else if (encIdx >= 0) {
        const Function &enc = m.functions[encIdx];
        for (const Binding &b : enc.outputs)
          if (b.name == name) {
            src = s->hostOutput(encIdx, b.value);
            shape = s->fns[encIdx].tensors[b.value].shape;
          }
      }
      if (!src || shape.empty() || shape[0] != batch)
        return Status::invalidModel("decode_step input '" + name + "' has no source");
      r.rowShape.assign(shape.begin() + 1, shape.end());
      uint64_t rowElems = 1;
      for (int64_t d : r.rowShape)
        rowElems *= (uint64_t)d;
      r.rowBytes = tfc_dtype_bytes(r.dtype, rowElems);
      r.data.assign(static_cast<const char *>(src),
                    static_cast<const char *>(src) + r.rowBytes * batch);
      rowInputs.push_back(std::move(r));
    }
    if (tokensIdx < 0 || posIdx < 0)
      return Status::invalidModel("decode_step lacks step.tokens or step.pos");
    const std::vector<int64_t> &tokDims = dec.values[dec.inputs[tokensIdx].value].dims;
    if (tokDims.size() != 2)
      return Status::invalidModel("decode_step's step.tokens is not [rows, 1] token ids");
    // Encoder memory whose first dim is not the rows': one row per batch item
    // (as @encode made it), which the rows read through step.memory_blocks,
    // so beams share it and select() never gathers it.
    for (RowInput &r : rowInputs) {
      r.perItem = dec.values[dec.inputs[r.input].value].dims[0] != tokDims[0];
      if (r.perItem && memBlocksIdx < 0)
        return Status::invalidModel("decode_step input '" + dec.inputs[r.input].name +
                                    "' has other rows than step.tokens, and no "
                                    "step.memory_blocks to read them through");
      if (r.perItem)
        TFC_RETURN_IF_ERROR(pageMemory(r));
    }
    const ValueDesc &logits = dec.values[dec.outputs.at(0).value];
    vocab = logits.dims.empty() ? 0 : logits.dims.back();
    if (vocab <= 0)
      return Status::invalidModel("decode_step's logits have no static vocabulary");
    caches = stateCaches(dec);
    return Status::ok();
  }

  int64_t vocabSize() const override { return vocab; }
  int64_t maxRows() const override {
    const ValueDesc &v = m.functions[decIdx].values[m.functions[decIdx].inputs[tokensIdx].value];
    return m.maxDim(v.dims[0]);
  }

  Status step(const int64_t *tokens, int64_t n, int64_t p, const float **logits) override {
    if (n != rows)
      return Status::internal("decode step with " + std::to_string(n) + " rows, the state has " +
                              std::to_string(rows));
    TFC_RETURN_IF_ERROR(run(tokens, n, 1, p));
    lastPos = p;
    const Function &dec = m.functions[decIdx];
    *logits = s->hostOutput(decIdx, dec.outputs[0].value);
    return Status::ok();
  }

  int64_t maxStepTokens() const override {
    const Function &dec = m.functions[decIdx];
    const ValueDesc &v = dec.values[dec.inputs[tokensIdx].value];
    return m.maxDim(v.dims[1]);
  }

  Status prefill(const int64_t *tokens, int64_t n, int64_t t, int64_t p) override {
    if (n != rows)
      return Status::internal("prefill with " + std::to_string(n) + " rows, the state has " +
                              std::to_string(rows));
    TFC_RETURN_IF_ERROR(run(tokens, n, t, p));
    lastPos = p + t - 1;
    return Status::ok();
  }

  Status select(const int64_t *from, int64_t n) override {
    if (n > maxRows())
      return Status::invalidArgument(std::to_string(n) + " rows exceed max_batch " +
                                     std::to_string(maxRows()));
    for (int64_t r = 0; r < n; ++r)
      if (from[r] < 0 || from[r] >= rows)
        return Status::internal("select from a missing row");
    // The per-row inputs (encoder memory, source ids) depend only on the batch
    // item a row belongs to: a reorder among an item's own rows (what beam
    // search does at almost every step) leaves them as they are. They are
    // gathered only when rows are fanned out or dropped.
    newItem.resize(n);
    for (int64_t r = 0; r < n; ++r)
      newItem[r] = rowItem[from[r]];
    if (newItem != rowItem) {
      for (RowInput &ri : rowInputs) {
        if (ri.perItem)
          continue;
        // A fresh buffer each time: the old rows go back at once (encoder
        // memory: 31 MB for 32 rows of a Marian batch) rather than stay
        // allocated as the next gather's buffer.
        std::vector<char> gathered(ri.rowBytes * n);
        for (int64_t r = 0; r < n; ++r)
          std::memcpy(gathered.data() + r * ri.rowBytes,
                      ri.data.data() + from[r] * ri.rowBytes, ri.rowBytes);
        ri.data.swap(gathered);
      }
      rowItem.swap(newItem);
    }
    // The caches: only positions [0, lastPos] hold data. A row that changes
    // (from[r] != r) takes its source row's data, in place, in an order where
    // no row is overwritten before every row that reads it has read it
    // (RowMoves, kv_blocks.h): one copy per changed row, and scratch memory
    // for one row per cycle of rows that read each other (two beams that
    // swap), which beam search seldom makes. (Saving every overwritten source first, as
    // this did before, held up to a whole cache's used rows as scratch: 100
    // MB at beam 4 over 128 rows, a sixth of the process's peak RSS.)
    int64_t used = lastPos + 1;
    if (n > s->stateRows && s->state)
      return Status::internal(std::to_string(n) + " rows exceed the KV cache's " +
                              std::to_string(s->stateRows));
    if (used > 0 && s->state && moves.plan(from, n, rows)) {
      for (const StateCache &c : caches)
        TFC_RETURN_IF_ERROR(moveCacheRows(c, from, used));
    }
    rows = n;
    return Status::ok();
  }

private:
  /// decode_step over tokens [n, t] at positions p..p+t-1.
  Status run(const int64_t *tokens, int64_t n, int64_t t, int64_t p) {
    const Function &dec = m.functions[decIdx];
    std::vector<BoundInput> ins(dec.inputs.size());
    pos = p;
    ins[tokensIdx] = {tokens, TFC_DTYPE_I64, {n, t}};
    if (posPerRow) {
      // All rows at one position, each in its own cache row.
      rowPos.assign(static_cast<size_t>(n), p);
      ins[posIdx] = {rowPos.data(), TFC_DTYPE_I64, {n}};
    } else {
      ins[posIdx] = {&pos, TFC_DTYPE_I64, {}};
    }
    if (blocksIdx >= 0) {
      rowBlocks.resize(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r)
        rowBlocks[r] = r;
      ins[blocksIdx] = {rowBlocks.data(), TFC_DTYPE_I64, {n, 1}};
    }
    if (memBlocksIdx >= 0) {
      memTables.resize(static_cast<size_t>(n * memBlocks));
      for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < memBlocks; ++j)
          memTables[r * memBlocks + j] = rowItem[r] * memBlocks + j;
      ins[memBlocksIdx] = {memTables.data(), TFC_DTYPE_I64, {n, memBlocks}};
    }
    for (const RowInput &r : rowInputs) {
      std::vector<int64_t> shape{r.perItem ? items * memBlocks : n};
      shape.insert(shape.end(), r.rowShape.begin(), r.rowShape.end());
      ins[r.input] = {r.data.data(), r.dtype, std::move(shape)};
    }
    return runFunction(*s, decIdx, ins);
  }

  /// select()'s copies for one cache (see there), in |moves|' order. On a
  /// host device the copies of a wave (and the cycles) are split across the
  /// OpenMP threads: at beam 4 over 128 rows they move about 100 MB a step,
  /// which one thread took 0.3 s a batch to do.
  Status moveCacheRows(const StateCache &c, const int64_t *from, int64_t used) {
    Device &d = *s->dev;
    const uint64_t es = c.elemSize(*s, decIdx);
    const uint64_t rowBytes = (uint64_t)s->stateLen * c.width * es;
    const uint64_t usedBytes = (uint64_t)used * c.width * es;
    const std::vector<int64_t> &waves = moves.waves, &cycles = moves.cycles;
    const std::vector<size_t> &waveEnd = moves.waveEnd, &cycleEnd = moves.cycleEnd;
    const int64_t nCycles = static_cast<int64_t>(cycleEnd.size());
    const uint64_t need = usedBytes * static_cast<uint64_t>(nCycles);
    if (need > scratchBytes) {
      if (scratch)
        d.release(scratch);
      scratch = nullptr;
      scratchBytes = 0;
      TFC_RETURN_IF_ERROR(d.alloc(need, &scratch));
      scratchBytes = need;
    }
    char *base = static_cast<char *>(s->state) + s->stateSlots.at(c.offset);
    char *tmpRows = static_cast<char *>(scratch);
    // Cycle i's rows: cycles[cycleBegin(i), cycleEnd[i]); its first row is
    // saved, each row takes the next's data, and the last the saved copy.
    auto cycleBegin = [&](int64_t i) { return i == 0 ? size_t{0} : cycleEnd[i - 1]; };
    if (d.hostMemory()) {
      const bool par = static_cast<uint64_t>(waves.size() + cycles.size()) * usedBytes >=
                       (1u << 20);
      for (size_t w = 0, begin = 0; w < waveEnd.size(); begin = waveEnd[w++]) {
        const int64_t b = static_cast<int64_t>(begin), e = static_cast<int64_t>(waveEnd[w]);
#pragma omp parallel for schedule(static) if (par && e - b > 1)
        for (int64_t i = b; i < e; ++i)
          std::memcpy(base + waves[i] * rowBytes, base + from[waves[i]] * rowBytes, usedBytes);
      }
#pragma omp parallel for schedule(static) if (par && nCycles > 1)
      for (int64_t i = 0; i < nCycles; ++i) {
        const size_t b = cycleBegin(i), e = cycleEnd[i];
        char *keep = tmpRows + i * usedBytes;
        std::memcpy(keep, base + cycles[b] * rowBytes, usedBytes);
        for (size_t j = b; j + 1 < e; ++j)
          std::memcpy(base + cycles[j] * rowBytes, base + cycles[j + 1] * rowBytes, usedBytes);
        std::memcpy(base + cycles[e - 1] * rowBytes, keep, usedBytes);
      }
      return Status::ok();
    }
    // A device copies in stream order: the same order, one copy at a time.
    Status st;
    for (size_t i = 0; i < waves.size() && st.isOk(); ++i)
      st = d.copy(base + waves[i] * rowBytes, base + from[waves[i]] * rowBytes, usedBytes);
    for (int64_t i = 0; i < nCycles && st.isOk(); ++i) {
      const size_t b = cycleBegin(i), e = cycleEnd[i];
      char *keep = tmpRows + i * usedBytes;
      st = d.copy(keep, base + cycles[b] * rowBytes, usedBytes);
      for (size_t j = b; j + 1 < e && st.isOk(); ++j)
        st = d.copy(base + cycles[j] * rowBytes, base + cycles[j + 1] * rowBytes, usedBytes);
      if (st.isOk())
        st = d.copy(base + cycles[e - 1] * rowBytes, keep, usedBytes);
    }
    if (st.isOk())
      st = d.sync();
    return st;
  }
  struct RowInput {
    size_t input = 0;
    uint32_t dtype = TFC_DTYPE_F32;
    std::vector<int64_t> rowShape;
    uint64_t rowBytes = 0;
    std::vector<char> data;
    bool perItem = false; ///< one row per batch item (step.memory_blocks)
  };
  /// Lays per-item input |r| ([items, S, width], as @encode made it) out as
  /// blocks of memLen positions, |memBlocks| per item, the last one padded
  /// with zeros: the engine's layout (engine_memory.cc), so that a request's
  /// cross-attention adds up its keys in the same blocks on a session and on
  /// an engine, and its tokens are the same on both.
  Status pageMemory(RowInput &r) {
    if (r.rowShape.size() != 2)
      return Status::invalidModel("decode_step's encoder memory input " +
                                  std::to_string(r.input) + " is not [rows, length, width]");
    const int64_t S = r.rowShape[0];
    const uint64_t posBytes = S > 0 ? r.rowBytes / static_cast<uint64_t>(S) : 0;
    if (memLen == 0) {
      memLen = std::max<int64_t>(1, memoryBlockLen(S));
      memBlocks = std::max<int64_t>(1, (S + memLen - 1) / memLen);
    } else if ((S + memLen - 1) / memLen > memBlocks) {
      return Status::invalidModel("decode_step's encoder memory inputs differ in length");
    }
    const uint64_t itemBytes = posBytes * static_cast<uint64_t>(memBlocks * memLen);
    std::vector<char> blocks(itemBytes * static_cast<uint64_t>(items), 0);
    for (int64_t i = 0; i < items; ++i)
      std::memcpy(blocks.data() + i * itemBytes, r.data.data() + i * r.rowBytes, r.rowBytes);
    r.data.swap(blocks);
    r.rowShape[0] = memLen;
    r.rowBytes = posBytes * static_cast<uint64_t>(memLen);
    return Status::ok();
  }

  size_t index(const char *name) const {
    for (size_t i = 0; i < m.functions.size(); ++i)
      if (m.functions[i].name == name)
        return i;
    return 0;
  }
  Session *s;
  const Model &m;
  size_t decIdx = 0;
  int tokensIdx = -1, posIdx = -1, blocksIdx = -1, memBlocksIdx = -1;
  int64_t items = 0; ///< the batch items (rows of the per-item inputs)
  /// The per-item inputs' blocks: memLen positions each, memBlocks per item.
  int64_t memLen = 0, memBlocks = 1;
  std::vector<int64_t> memTables;
  bool posPerRow = false; ///< step.pos is [rows] (model.bin files since continuous batching)
  std::vector<int64_t> rowPos, rowBlocks;
  std::vector<RowInput> rowInputs;
  std::vector<StateCache> caches;
  /// The batch item of each row; buffers select() reuses across steps.
  std::vector<int64_t> rowItem, newItem;
  RowMoves moves; ///< the order of select()'s cache copies
  void *scratch = nullptr;
  uint64_t scratchBytes = 0;
  int64_t rows = 0, vocab = 0, pos = 0, lastPos = -1;
};

} // namespace

Status planGeneration(const Model &m, const std::vector<Session::Input> &inputs,
                      const tfrun_generate_options_t &o,
                      std::function<bool(size_t, int64_t, int64_t, float)> onToken,
                      GenerationPlan &plan) {
  if (!m.gen.present)
    return Status::invalidArgument("model '" + m.name +
                                   "' cannot generate: it has no decoder "
                                   "(no causal self-attention; see tfc compile --report)");
  const Function &fwd = m.forward();
  const bool encDec = m.find("encode") != nullptr;
  plan.encDec = encDec;
  SearchOptions &opt = plan.opt;
  opt.bos = o.bos_id >= 0 ? o.bos_id : m.gen.bos;
  opt.eos = o.eos_id >= 0 ? o.eos_id : m.gen.eos;
  if (o.eos_id < 0) // the caller's eos id replaces the model's set
    opt.more_eos = m.gen.moreEos;
  opt.pad = o.pad_id >= 0 ? o.pad_id : m.gen.pad;
  opt.forced_bos = m.gen.forcedBos;
  opt.forced_eos = m.gen.forcedEos >= 0 ? opt.eos : -1; // the eos in use (--eos-id too)
  // 0 / NaN: the model's defaults (generation_config.json's, format 5).
  opt.beam = o.beam_width == 0 ? (int)m.gen.numBeams : o.beam_width;
  opt.length_penalty =
      std::isnan(o.length_penalty) ? (float)m.gen.lengthPenalty : o.length_penalty;
  opt.suppress = m.gen.suppress;
  opt.min_length = m.gen.minLength;
  opt.no_repeat_ngram = m.gen.noRepeatNgram;
  opt.early_stopping = (int)m.gen.earlyStopping;
  // Sampling: -1 / NaN take the model's defaults (generation_config.json's
  // do_sample, temperature, top_k, top_p; format 7).
  opt.sample = o.sample < 0 ? m.gen.sample != 0 : o.sample != 0;
  opt.temperature = std::isnan(o.temperature) ? (float)m.gen.temperature : o.temperature;
  opt.top_k = o.top_k < 0 ? (int)m.gen.topK : o.top_k;
  opt.top_p = std::isnan(o.top_p) ? (float)m.gen.topP : o.top_p;
  opt.min_p = o.min_p;
  opt.repetition_penalty = o.repetition_penalty;
  opt.seed = o.seed;
  opt.onToken = std::move(onToken);
  if (opt.sample && encDec)
    return Status::invalidArgument(
        "sampling is for decoder-only models; use greedy or beam search");
  if (opt.sample && o.sample < 0 && opt.beam > 1)
    opt.sample = false; // the model's beam search wins over its do_sample
  // The batch and the prompts.
  std::vector<std::vector<int64_t>> &prompts = plan.prompts;
  prompts.clear();
  int64_t batch = -1;
  for (size_t i = 0; i < fwd.inputs.size(); ++i) {
    bool isTarget = fwd.inputs[i].name == m.gen.target;
    if (isTarget == encDec)
      continue; // enc-dec: the sources; decoder-only: the prompt
    // An optional input (an attention_mask, token types) is no source of
    // tokens: its 1s may equal pad_id (BART's is 1).
    if (i < m.inputDefaults.size() && m.inputDefaults[i].kind)
      continue;
    if (!inputs[i].bound)
      return Status::invalidArgument("input '" + fwd.inputs[i].name + "' is not bound");
    const auto &in = inputs[i];
    int64_t b = in.shape[0], len = in.shape.size() > 1 ? in.shape[1] : 1;
    batch = b;
    for (int64_t r = 0; r < b; ++r) {
      const int64_t *row = in.ids.data() + r * len;
      int64_t n = len;
      while (n > 0 && row[n - 1] == opt.pad)
        --n;
      if (n == 0)
        return Status::invalidArgument((encDec ? "source " : "prompt ") + std::to_string(r) +
                                       " of input '" + fwd.inputs[i].name +
                                       "' is empty (only pad_id " + std::to_string(opt.pad) + ")");
      // A decoder-only prompt may be left-padded too, as transformers pads
      // them (padding_side="left"): its leading pad_id tokens go as well,
      // unless pad_id is the model's bos (GPT-2's), which a prompt may start with.
      int64_t first = 0;
      if (!encDec && opt.pad != opt.bos)
        while (row[first] == opt.pad)
          ++first;
      if (!encDec)
        prompts.emplace_back(row + first, row + n);
    }
  }
  if (batch < 0)
    return Status::invalidArgument("no input to generate from is bound");
  if (encDec)
    prompts.assign(batch, std::vector<int64_t>{opt.bos});
  plan.batch = batch;
  size_t longest = 0;
  for (const auto &p : prompts)
    longest = std::max(longest, p.size());
  int64_t cache = m.gen.maxLen;
  // Positions fed: the prompt and every new token but the last.
  int64_t room = cache - (int64_t)longest + 1;
  if (o.max_len < 0)
    return Status::invalidArgument("max_len must be positive, got " + std::to_string(o.max_len));
  // Without max_len: generation_config's max_length (which counts the
  // decoder's start token or the prompt), else as many as the cache holds.
  int64_t dflt = room;
  if (m.gen.maxLength > 0)
    dflt = std::min<int64_t>(room, std::max<int64_t>(m.gen.maxLength - (int64_t)longest, 1));
  opt.max_len = o.max_len ? o.max_len : (int)std::max<int64_t>(dflt, 0);
  if (opt.max_len > room)
    return Status::invalidArgument("max_len " + std::to_string(opt.max_len) + " needs " +
                                   std::to_string((int64_t)longest + opt.max_len - 1) +
                                   " cache positions, but the model's KV cache holds " +
                                   std::to_string(cache) +
                                   " (recompile with a larger --set max_len)");
  plan.positions = std::max<int64_t>((int64_t)longest + std::max(opt.max_len, 1) - 1, 1);
  return Status::ok();
}

Status Session::generate(const tfrun_generate_options_t &o,
                         std::function<bool(size_t, int64_t, int64_t, float)> onToken) {
  Session *s = this;
  const Model &m = *s->m;
  fillDefaults();
  s->generated.clear();
  s->scores.clear();
  GenerationPlan plan;
  TFC_RETURN_IF_ERROR(planGeneration(m, inputs, o, std::move(onToken), plan));
  const bool encDec = plan.encDec;
  SearchOptions &opt = plan.opt;
  const int64_t batch = plan.batch;
  const std::vector<std::vector<int64_t>> &prompts = plan.prompts;
  SessionStepModel model(s);
  TFC_RETURN_IF_ERROR(model.start(batch));
  // The KV caches for this request only: every row the search may hold
  // (batch x beams) and the positions it feeds (the longest prompt and every
  // new token but the last), not the declared maxima.
  const int64_t cacheRows =
      std::min<int64_t>(model.maxRows(), batch * std::max(1, (int)opt.beam));
  TFC_RETURN_IF_ERROR(s->reserveState(std::max<int64_t>(cacheRows, 1), plan.positions));
  if (encDec && (opt.bos < 0 || opt.bos >= model.vocabSize()))
    return Status::invalidArgument("bos_id " + std::to_string(opt.bos) +
                                   " is outside the vocabulary [0, " +
                                   std::to_string(model.vocabSize()) + ")");
  if (opt.eos < 0 || opt.eos >= model.vocabSize())
    return Status::invalidArgument("eos_id " + std::to_string(opt.eos) +
                                   " is outside the vocabulary [0, " +
                                   std::to_string(model.vocabSize()) + ")");
  SearchResult res;
  TFC_RETURN_IF_ERROR(search(model, prompts, opt, res));
  s->generated = std::move(res.ids);
  s->scores = std::move(res.scores);
  s->lastRun = -1;
  return Status::ok();
}

} // namespace tfrun::rt
