//===- generate.cc - the decoding loop: greedy, beam search, sampling ------===//
//
// docs/generation.md, "The decoding loop". All batch items advance together, one
// position per StepModel::step(); an item whose prompt is longer keeps feeding
// prompt tokens while the others already generate (its logits are ignored until
// its last prompt token). The rows are the active items' hypotheses, contiguous
// per item and in item order; after every step select() drops the rows of the
// items that finished and (beam search) fans out and reorders the others. Nothing
// allocates per step in proportion to the vocabulary: the per-row buffers are
// sized once. Beam search is in generate_beam.cc; what both files share, in
// generate_internal.h.
//
// Readings of the spec where it leaves room:
//  - Beam search, t + 1 == max_len: the live hypotheses become finished even when
//    that step's eos candidates already fill `finished` (as scripts/generate_ref.py).
//  - `finished` is ordered by step, then by rank among the step's top K, the live
//    ones turned finished at max_len included ("finished first, then the better
//    rank"). generate_ref.py appends that step's eos ones first; the two differ only
//    on an exact tie of normalized scores.
//  - Sampling ranks tokens by logit / temperature (ties: lower id), the order of
//    their probabilities; top-p's "reaches" is cumulative mass >= top_p.
//  - top_k and top_p are validated whether or not sampling is on; temperature only
//    when sampling (as the brief lists it).
//  - Non-finite logits (issue 21; docs/generation.md, "Non-finite logits"): NaN or
//    +inf in a row a step chooses from is TFRUN_NON_FINITE; -inf is a banned
//    token; a row with nothing above -inf ends its item with score -inf.
//
//===----------------------------------------------------------------------===//
#include "runtime/generate.h"
#include "runtime/generate_internal.h"

#include "backends/cpu/search_cpu.h"

#include "tfrun/tfrun.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <string>

namespace tfrun::rt {
namespace {

Status invalidArg(std::string msg) { return Status::invalidArgument(std::move(msg)); }

template <typename... Args> std::string format(const char *fmt, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

} // namespace

namespace search_detail {

void bannedIds(const SearchOptions &opt, const std::vector<int64_t> &seq, int64_t vocab,
               std::vector<int64_t> &out) {
  out.clear();
  if (opt.suppress >= 0 && opt.suppress < vocab)
    out.push_back(opt.suppress);
  const int64_t L = static_cast<int64_t>(seq.size());
  if (L < opt.min_length) {
    if (opt.eos >= 0 && opt.eos < vocab)
      out.push_back(opt.eos);
    for (int64_t e : opt.more_eos)
      if (e >= 0 && e < vocab)
        out.push_back(e);
  }
  const int64_t n = opt.no_repeat_ngram;
  if (n > 0 && L + 1 >= n)
    for (int64_t i = 0; i + n <= L; ++i) {
      bool same = true;
      for (int64_t k = 0; k + 1 < n && same; ++k)
        same = seq[i + k] == seq[L - n + 1 + k];
      const int64_t v = seq[i + n - 1];
      if (same && v >= 0 && v < vocab)
        out.push_back(v);
    }
}

/// About the tokens one prefill call feeds over all rows: enough to make the
/// GEMMs efficient, few enough that the activations stay small.
constexpr int64_t kPrefillCallTokens = 4096;

Status nonFiniteLogits(int64_t t, size_t b, const RowCheck &c) {
  return Status::nonFinite(format("generate: step %" PRId64 ": the logits of batch item %zu "
                                  "hold %" PRId64 " NaN and %" PRId64 " +inf values",
                                  t, b, c.nan, c.posInf));
}

Status step(StepModel &model, const std::vector<int64_t> &tokens, int64_t pos,
            const float **logits) {
  *logits = nullptr;
  TFC_RETURN_IF_ERROR(model.step(tokens.data(), static_cast<int64_t>(tokens.size()), pos, logits));
  if (!*logits)
    return Status::internal("the model's decode step returned no logits");
  return {};
}

Status prefillPrompts(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                      int64_t *pos0) {
  *pos0 = 0;
  size_t common = prompts.front().size();
  for (const auto &p : prompts)
    common = std::min(common, p.size());
  const int64_t n = static_cast<int64_t>(common) - 1; // the last token goes through step()
  const int64_t rows = static_cast<int64_t>(prompts.size());
  const int64_t chunk = std::max<int64_t>(
      1, std::min({model.maxStepTokens(), prefillChunk(), kPrefillCallTokens / rows}));
  if (n < 1 || chunk < 2)
    return {};
  std::vector<int64_t> tokens;
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t t = std::min(chunk, n - at);
    tokens.resize(static_cast<size_t>(rows * t));
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(prompts[r].begin() + at, t, tokens.begin() + r * t);
    TFC_RETURN_IF_ERROR(model.prefill(tokens.data(), rows, t, at));
    *pos0 = at + t;
  }
  return {};
}

Status select(StepModel &model, const std::vector<int64_t> &from, size_t rowsBefore) {
  bool identity = from.size() == rowsBefore;
  for (size_t r = 0; identity && r < from.size(); ++r)
    identity = from[r] == static_cast<int64_t>(r);
  if (identity)
    return {};
  return model.select(from.data(), static_cast<int64_t>(from.size()));
}

} // namespace search_detail

using namespace search_detail;

namespace {

void banTokens(const SearchOptions &opt, const std::vector<int64_t> &seq, int64_t vocab,
               float *x) {
  thread_local std::vector<int64_t> ids;
  bannedIds(opt, seq, vocab, ids);
  for (int64_t v : ids)
    x[v] = -std::numeric_limits<float>::infinity();
}

/// transformers' RepetitionPenaltyLogitsProcessor: each distinct token of |seq|
/// has its score divided by the penalty, or multiplied when it is negative.
void penalizeRepeats(const SearchOptions &opt, const std::vector<int64_t> &seq, int64_t vocab,
                     float *x) {
  const float p = opt.repetition_penalty;
  if (p == 1.0f)
    return;
  thread_local std::vector<uint8_t> seen;
  seen.assign(static_cast<size_t>(vocab), 0);
  for (int64_t v : seq)
    if (v >= 0 && v < vocab && !seen[v]) {
      seen[v] = 1;
      x[v] = x[v] < 0 ? x[v] * p : x[v] / p;
    }
}

/// log(sum(exp(l))): log_softmax(l)[v] = l[v] - this (one vectorized pass;
/// backends/cpu/search_cpu.h).
float logSumExp(const float *l, int64_t vocab) { return tfc::cpu::rowLogSumExp(l, vocab); }

/// The first maximum (the lowest id wins a tie).
int64_t argmax(const float *l, int64_t vocab) {
  int64_t best = 0;
  float bestVal = key(l[0]);
  for (int64_t v = 1; v < vocab; ++v)
    if (key(l[v]) > bestVal) {
      bestVal = key(l[v]);
      best = v;
    }
  return best;
}

/// Draws the next token as docs/generation.md's sampling specifies. The tokens are ranked by
/// logit / temperature, highest first, the lower id first on a tie (the order of the
/// probabilities, which exp cannot reverse). Only the prefix of that order that the draw (and
/// top-k / top-p) needs is sorted: the prefix grows by partial sorts of the rest.
class Sampler {
public:
  explicit Sampler(int64_t vocab) : vocab_(vocab), x_(vocab), idx_(vocab) {}

  int64_t draw(const float *logits, const SearchOptions &opt, std::mt19937_64 &rng) {
    const float t = opt.temperature;
    for (int64_t v = 0; v < vocab_; ++v)
      x_[v] = key(logits[v] / t);
    std::iota(idx_.begin(), idx_.end(), 0);
    sorted_ = 0;
    // top-k: the kept tokens are the first n of the order.
    n_ = vocab_;
    if (opt.top_k > 0 && opt.top_k < vocab_) {
      n_ = opt.top_k;
      std::partial_sort(idx_.begin(), idx_.begin() + n_, idx_.end(), Order{x_.data()});
      sorted_ = n_;
    }
    // softmax over the kept tokens: e(v) / z.
    double z = 0;
    if (sorted_) {
      mx_ = x_[idx_[0]];
      for (int64_t i = 0; i < n_; ++i)
        z += e(idx_[i]);
    } else {
      mx_ = *std::max_element(x_.begin(), x_.end());
      for (int64_t v = 0; v < vocab_; ++v)
        z += e(v);
    }
    if (!(z > 0)) // every kept logit -inf (or worse): the first of the order
      return sortedAt(0);
    // top-p: the shortest prefix whose mass reaches top_p; m = its (unnormalized) mass.
    int64_t prefix = n_;
    double m = z;
    if (opt.top_p < 1.0f) {
      const double target = static_cast<double>(opt.top_p) * z;
      double c = 0;
      for (int64_t i = 0; i < n_; ++i) {
        c += e(sortedAt(i));
        if (c >= target) {
          prefix = i + 1;
          break;
        }
      }
      m = c;
    }
    // min-p: of that prefix, the tokens at least min_p times as likely as the
    // first (e(first) is 1), the first always; m = their mass.
    if (opt.min_p > 0.0f) {
      double c = 0;
      int64_t keep = 0;
      for (int64_t i = 0; i < prefix; ++i) {
        const double p = e(sortedAt(i));
        if (i > 0 && p < static_cast<double>(opt.min_p))
          break;
        c += p;
        keep = i + 1;
      }
      prefix = keep;
      m = c;
    }
    // The first token whose renormalized cumulative probability exceeds u.
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    const double target = u * m;
    double c = 0;
    int64_t lastPositive = sortedAt(0);
    for (int64_t i = 0; i < prefix; ++i) {
      int64_t v = sortedAt(i);
      double p = e(v);
      c += p;
      if (p > 0)
        lastPositive = v;
      if (c > target)
        return v;
    }
    return lastPositive; // rounding left the total at or below u * m
  }

private:
  struct Order {
    const float *x;
    bool operator()(int32_t a, int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
  };
  double e(int64_t v) const { return std::exp(static_cast<double>(x_[v]) - mx_); }
  /// The i-th token of the order (i < n_), sorting more of it when needed.
  int64_t sortedAt(int64_t i) {
    while (i >= sorted_) {
      int64_t end = std::min<int64_t>(n_, std::max<int64_t>(64, 2 * sorted_));
      std::partial_sort(idx_.begin() + sorted_, idx_.begin() + end, idx_.end(), Order{x_.data()});
      sorted_ = end;
    }
    return idx_[i];
  }

  int64_t vocab_;
  std::vector<float> x_;     ///< logits / temperature
  std::vector<int32_t> idx_; ///< token ids; [0, sorted_) in order
  int64_t sorted_ = 0, n_ = 0;
  double mx_ = 0;
};

/// Greedy search and sampling: one row per active item.
Status singleRowSearch(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                       const SearchOptions &opt, SearchResult &out) {
  const size_t batch = prompts.size();
  const int64_t vocab = model.vocabSize();
  out.ids.assign(batch, {});
  out.scores.assign(batch, 0.0f);
  std::vector<size_t> active(batch), stillActive; // row r = item active[r]
  std::iota(active.begin(), active.end(), size_t{0});
  std::vector<int64_t> tokens, from;
  tokens.reserve(batch);
  from.reserve(batch);
  stillActive.reserve(batch);
  std::vector<std::mt19937_64> rngs;
  std::unique_ptr<Sampler> sampler;
  if (opt.sample) {
    for (size_t b = 0; b < batch; ++b)
      rngs.emplace_back(opt.seed + 0x9E3779B97F4A7C15ull * (b + 1));
    sampler = std::make_unique<Sampler>(vocab);
  }
  const bool bans = processesLogits(opt);
  std::vector<float> processed(bans ? vocab : 0);
  std::vector<int64_t> seq;
  int64_t pos0 = 0;
  TFC_RETURN_IF_ERROR(prefillPrompts(model, prompts, &pos0));
  for (int64_t pos = pos0; !active.empty(); ++pos) {
    tokens.clear();
    for (size_t b : active) {
      const auto &p = prompts[b];
      tokens.push_back(pos < static_cast<int64_t>(p.size()) ? p[pos] : out.ids[b].back());
    }
    const float *logits;
    TFC_RETURN_IF_ERROR(step(model, tokens, pos, &logits));
    from.clear();
    stillActive.clear();
    for (size_t r = 0; r < active.size(); ++r) {
      const size_t b = active[r];
      if (pos + 1 < static_cast<int64_t>(prompts[b].size())) { // still inside its prompt
        from.push_back(static_cast<int64_t>(r));
        stillActive.push_back(b);
        continue;
      }
      const float *l = logits + static_cast<int64_t>(r) * vocab;
      const int64_t t = static_cast<int64_t>(out.ids[b].size());
      const int64_t forced = forcedToken(opt, t);
      RowCheck check;
      if (forced < 0) { // a forced token ignores the logits
        check = checkRow(l, vocab);
        if (check.nan || check.posInf)
          return nonFiniteLogits(t, b, check);
      }
      if (bans) {
        // The processed scores: chosen from, and normalized over, as
        // transformers' greedy search and compute_transition_scores do.
        seq.assign(prompts[b].begin(), prompts[b].end());
        seq.insert(seq.end(), out.ids[b].begin(), out.ids[b].end());
        std::copy(l, l + vocab, processed.begin());
        penalizeRepeats(opt, seq, vocab, processed.data());
        banTokens(opt, seq, vocab, processed.data());
        l = processed.data();
      }
      if (forced < 0 && bans)
        check.choosable = checkRow(l, vocab).choosable;
      if (forced < 0 && !check.choosable) {
        // Every logit -inf (or banned): nothing to choose, the item ends
        // here as at eos, with score -inf.
        out.scores[b] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const int64_t tok = forced >= 0 ? forced
                          : opt.sample ? sampler->draw(l, opt, rngs[b])
                                       : argmax(l, vocab);
      const float logp = forced < 0 ? l[tok] - logSumExp(l, vocab) : 0.0f;
      out.scores[b] += logp;
      bool done = opt.isEos(tok);
      if (!done) {
        out.ids[b].push_back(tok);
        done = static_cast<int64_t>(out.ids[b].size()) == opt.max_len;
        if (opt.onToken && opt.onToken(b, static_cast<int64_t>(out.ids[b].size()) - 1, tok, logp))
          done = true; // the caller stops this item
      }
      if (!done) {
        from.push_back(static_cast<int64_t>(r));
        stillActive.push_back(b);
      }
    }
    if (!stillActive.empty())
      TFC_RETURN_IF_ERROR(select(model, from, active.size()));
    active.swap(stillActive);
  }
  return {};
}

Status guarded(Status (*body)(StepModel &, const std::vector<std::vector<int64_t>> &,
                              const SearchOptions &, SearchResult &),
               StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
               const SearchOptions &opt, SearchResult &out, bool forBeamSearch) {
  Status e;
  try {
    out.ids.clear();
    out.scores.clear();
    e = validateSearch(model, prompts, opt, forBeamSearch);
    if (e.isOk() && !prompts.empty())
      e = body(model, prompts, opt, out);
  } catch (const std::bad_alloc &) {
    e = Status::outOfMemory("out of memory during generation");
  } catch (const std::exception &x) {
    e = Status::internal(std::string("generation failed: ") + x.what());
  } catch (...) {
    e = Status::internal("generation failed: unknown exception");
  }
  if (!e.isOk()) {
    out.ids.clear();
    out.scores.clear();
  }
  return e;
}

} // namespace

Status validateSearch(const StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                      const SearchOptions &opt, bool forBeamSearch) {
  if (opt.beam < 1)
    return invalidArg(format("beam width must be at least 1, got %d", opt.beam));
  if (opt.max_len < 1)
    return invalidArg(format("max_len must be at least 1, got %d", opt.max_len));
  if (opt.sample && !(opt.temperature > 0.0f))
    return invalidArg(
        format("temperature must be positive when sampling, got %g", double(opt.temperature)));
  if (!std::isfinite(opt.length_penalty))
    return invalidArg(format("length_penalty must be finite, got %g", double(opt.length_penalty)));
  if (!(opt.top_p > 0.0f && opt.top_p <= 1.0f))
    return invalidArg(format("top_p must be in (0, 1], got %g", double(opt.top_p)));
  if (opt.top_k < 0)
    return invalidArg(format("top_k must be at least 0 (0 = off), got %d", opt.top_k));
  if (!(opt.min_p >= 0.0f && opt.min_p <= 1.0f))
    return invalidArg(format("min_p must be in [0, 1], got %g", double(opt.min_p)));
  if (!(opt.repetition_penalty > 0.0f) || !std::isfinite(opt.repetition_penalty))
    return invalidArg(format("repetition_penalty must be positive, got %g",
                             double(opt.repetition_penalty)));
  if (opt.repetition_penalty != 1.0f && (opt.beam > 1 || forBeamSearch))
    return invalidArg(format("repetition_penalty %g cannot be combined with beam search "
                             "(beam width %d); greedy search and sampling take it",
                             double(opt.repetition_penalty), opt.beam));
  if (opt.sample && (opt.beam > 1 || forBeamSearch))
    return invalidArg(
        format("beam search (beam width %d) cannot be combined with sampling", opt.beam));
  for (size_t b = 0; b < prompts.size(); ++b)
    if (prompts[b].empty())
      return invalidArg(format("the prompt of batch item %zu is empty", b));
  const int64_t maxRows = model.maxRows();
  const uint64_t batch = prompts.size();
  if (batch > static_cast<uint64_t>(std::max<int64_t>(maxRows, 0)) / uint64_t(opt.beam))
    return invalidArg(format("batch %" PRIu64 " x beam width %d needs %" PRIu64
                             " rows, more than the model's maximum batch %" PRId64,
                             batch, opt.beam, batch * uint64_t(opt.beam), maxRows));
  const int64_t vocab = model.vocabSize();
  if (vocab > std::numeric_limits<int32_t>::max())
    return invalidArg(format("a vocabulary of %" PRId64 " tokens is too large", vocab));
  for (size_t b = 0; b < prompts.size(); ++b)
    for (size_t i = 0; i < prompts[b].size(); ++i)
      if (prompts[b][i] < 0 || prompts[b][i] >= vocab)
        return invalidArg(format("token id %" PRId64 " at position %zu of batch item %zu's "
                                 "prompt is outside the vocabulary [0, %" PRId64 ")",
                                 prompts[b][i], i, b, vocab));
  if (opt.bos < 0 || opt.bos >= vocab)
    return invalidArg(
        format("bos id %" PRId64 " is outside the vocabulary [0, %" PRId64 ")", opt.bos, vocab));
  if (opt.eos < 0 || opt.eos >= vocab)
    return invalidArg(
        format("eos id %" PRId64 " is outside the vocabulary [0, %" PRId64 ")", opt.eos, vocab));
  for (int64_t e : opt.more_eos)
    if (e < 0 || e >= vocab)
      return invalidArg(
          format("eos id %" PRId64 " is outside the vocabulary [0, %" PRId64 ")", e, vocab));
  if (opt.forced_bos >= vocab || opt.forced_bos < -1)
    return invalidArg(format("forced bos id %" PRId64 " is outside the vocabulary [0, %" PRId64
                             ")", opt.forced_bos, vocab));
  if (opt.forced_eos != -1 && opt.forced_eos != opt.eos)
    return invalidArg(format("forced eos id %" PRId64 " is not the eos id %" PRId64,
                             opt.forced_eos, opt.eos));
  return {};
}

Status search(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
              const SearchOptions &opt, SearchResult &out) {
  return guarded(opt.beam > 1 ? beamSearchImpl : singleRowSearch, model, prompts, opt, out, false);
}

Status beamSearch(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                  const SearchOptions &opt, SearchResult &out) {
  return guarded(beamSearchImpl, model, prompts, opt, out, true);
}

Status StepModel::prefill(const int64_t *tokens, int64_t rows, int64_t n, int64_t pos) {
  std::vector<int64_t> column(static_cast<size_t>(rows));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < rows; ++r)
      column[r] = tokens[r * n + i];
    const float *logits = nullptr;
    TFC_RETURN_IF_ERROR(step(column.data(), rows, pos + i, &logits));
  }
  return {};
}

int64_t prefillChunk() {
  // Read once: a benchmark compares prefill with token-by-token feeding
  // through it (bench/bench_prefill.py).
  static const int64_t chunk = [] {
    const char *e = std::getenv("TFRUN_PREFILL_CHUNK");
    if (!e || !*e)
      return int64_t{512};
    char *end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    return *end == '\0' && v >= 1 ? static_cast<int64_t>(std::min<long long>(v, 1 << 20))
                                   : int64_t{512};
  }();
  return chunk;
}

} // namespace tfrun::rt
