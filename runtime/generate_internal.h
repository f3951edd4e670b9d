//===- generate_internal.h - what the search algorithms share --------------===//
//
// Internal to generate.cc (greedy search, sampling, the entry points) and
// generate_beam.cc (beam search): the logits checks, forced and banned tokens,
// length normalization and the calls into the StepModel. Nothing here throws
// but std::bad_alloc, which generate.cc's entry points turn into a Status.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_GENERATE_INTERNAL_H
#define TFC_RUNTIME_GENERATE_INTERNAL_H

#include "runtime/generate.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tfrun::rt::search_detail {

/// NaN ranks below everything, so the orders below stay strict weak orders.
inline float key(float x) { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; }

/// The token step |t| (0-based new-token index) must be, or -1: forced_bos
/// first, eos at the last step when forced_eos is set.
inline int64_t forcedToken(const SearchOptions &opt, int64_t t) {
  if (t == 0 && opt.forced_bos >= 0)
    return opt.forced_bos;
  if (t + 1 == opt.max_len && opt.forced_eos >= 0)
    return opt.forced_eos;
  return -1;
}

/// Whether any logits processor of banTokens() is on.
inline bool bansTokens(const SearchOptions &opt) {
  return opt.suppress >= 0 || opt.min_length > 0 || opt.no_repeat_ngram > 0;
}

/// Whether greedy search and sampling choose from processed scores: a ban, or
/// the repetition penalty.
inline bool processesLogits(const SearchOptions &opt) {
  return bansTokens(opt) || opt.repetition_penalty != 1.0f;
}

/// The tokens transformers' logits processors ban after the decoder sequence
/// |seq| (its prompt or start token, then the new tokens): bad_words_ids'
/// single token, eos while seq is shorter than min_length
/// (MinLengthLogitsProcessor), and each token that would repeat an n-gram of
/// seq (NoRepeatNGramLogitsProcessor). banTokens sets their scores to -inf.
void bannedIds(const SearchOptions &opt, const std::vector<int64_t> &seq, int64_t vocab,
               std::vector<int64_t> &out);

/// The NaN and +inf entries of one row of logits, and whether any entry is
/// above -inf (something a search can choose).
struct RowCheck {
  int64_t nan = 0, posInf = 0;
  bool choosable = false;
};
inline RowCheck checkRow(const float *l, int64_t vocab) {
  RowCheck c;
  const float inf = std::numeric_limits<float>::infinity();
  int64_t nan = 0, posInf = 0, finite = 0;
  for (int64_t v = 0; v < vocab; ++v) { // branch-free: vectorizes
    nan += l[v] != l[v];
    posInf += l[v] == inf;
    finite += l[v] > -inf;
  }
  c.nan = nan;
  c.posInf = posInf;
  c.choosable = finite > posInf;
  return c;
}

/// docs/generation.md, "Non-finite logits": NaN or +inf in the logits a step
/// chooses from stops generation with TFRUN_NON_FINITE, naming the step (the
/// 0-based index of the new token) and the batch item.
Status nonFiniteLogits(int64_t t, size_t b, const RowCheck &c);

/// score / length^alpha (in f64, rounded to f32 as the reference does).
inline float normalize(float score, int64_t length, float alpha) {
  return static_cast<float>(static_cast<double>(score) /
                            std::pow(static_cast<double>(length), static_cast<double>(alpha)));
}

/// One StepModel::step over |tokens| (one per row) at |pos|; *logits is never null on success.
Status step(StepModel &model, const std::vector<int64_t> &tokens, int64_t pos,
            const float **logits);

/// Feeds every prompt but its last token to the rows, as far as all the prompts are that long,
/// in prefill() calls over all rows; *pos0 is the position the decoding loop starts at (0
/// when nothing was fed).
Status prefillPrompts(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                      int64_t *pos0);

/// Drops / fans out / reorders the rows; nothing to do when |from| is the identity.
Status select(StepModel &model, const std::vector<int64_t> &from, size_t rowsBefore);

/// Beam search (generate_beam.cc), after validateSearch, with at least one prompt.
Status beamSearchImpl(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                      const SearchOptions &opt, SearchResult &out);

} // namespace tfrun::rt::search_detail

#endif // TFC_RUNTIME_GENERATE_INTERNAL_H
