//===- generate.h - the decoding loop: greedy, beam search, sampling -------===//
//
// Internal to libtfrun. The search algorithms of docs/generation.md ("The
// decoding loop"), independent of the model: they drive a StepModel, a batch of
// decoder states (KV cache, encoder memory) that takes one token per row and
// position and returns the next token's logits. Rows are dropped as batch items
// finish, and fan out / reorder with beam search, through StepModel::select().
//
// Nothing here throws: every failure, std::bad_alloc included, is a Status.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_GENERATE_H
#define TFC_RUNTIME_GENERATE_H

#include "runtime/model.h" // tfrun::rt::Status

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

namespace tfrun::rt {

/// The model side of a search: a batch of `rows` decoder states (KV cache, encoder memory).
class StepModel {
public:
  virtual ~StepModel() = default;
  virtual int64_t vocabSize() const = 0;
  /// The most rows step() accepts (max_batch).
  virtual int64_t maxRows() const = 0;
  /// Feeds tokens[r] to row r, for r < rows, at absolute position `pos` (the same for all rows).
  /// On success, *logits points at [rows, vocab] f32 logits for the next token, valid until the
  /// next call.
  virtual Status step(const int64_t *tokens, int64_t rows, int64_t pos, const float **logits) = 0;
  /// The most new tokens per row one prefill() call takes: 1 where the model's decode step
  /// takes one token per row (model.bin files compiled before prefill).
  virtual int64_t maxStepTokens() const { return 1; }
  /// Feeds the prompt tokens [rows, n] (row-major) to the rows at positions pos..pos+n-1 (the
  /// same for all rows), n <= maxStepTokens(), in one decode step: a prefill. The logits are
  /// not returned: the search feeds each prompt's last token through step(). The default
  /// feeds the columns one step() at a time.
  virtual Status prefill(const int64_t *tokens, int64_t rows, int64_t n, int64_t pos);
  /// Rebuilds the rows: new row r takes the state of old row from[r], for r < rows. from may
  /// repeat indices (a beam fans out) and rows may be larger or smaller than before
  /// (<= maxRows()).
  virtual Status select(const int64_t *from, int64_t rows) = 0;
};

/// Tokens per row and call that a prefill takes at most when the model allows more; the
/// environment variable TFRUN_PREFILL_CHUNK overrides it (1: token by token, as before
/// prefill existed). Calls are also kept to about 4096 tokens over all rows.
int64_t prefillChunk();

struct SearchOptions {
  int beam = 1;     ///< >= 1
  int max_len = 0;  ///< new tokens, eos included; >= 1 (the caller checks it against the cache)
  float length_penalty = 1.0f; ///< beam search: score / length^alpha
  bool sample = false;         ///< sampling (beam must be 1)
  float temperature = 1.0f;    ///< > 0 when sampling
  int top_k = 0;               ///< >= 0; 0 = off
  float top_p = 1.0f;          ///< in (0, 1]; 1 = off
  float min_p = 0.0f;          ///< in [0, 1]; 0 = off (after top-k and top-p)
  /// transformers' RepetitionPenaltyLogitsProcessor (> 0; 1 = off): a token of the
  /// sequence so far has its logit divided by it, multiplied when negative.
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  int64_t bos = 1, eos = 2, pad = 0;
  /// More ids that end a sequence as eos does (Llama 3's eos_token_id list);
  /// a finished sequence's length counts the one that ended it, as eos.
  std::vector<int64_t> more_eos;
  bool isEos(int64_t tok) const {
    return tok == eos || std::find(more_eos.begin(), more_eos.end(), tok) != more_eos.end();
  }
  /// transformers' forced_bos_token_id / forced_eos_token_id (-1: none): the
  /// first new token is forced_bos, and the max_len-th is eos when forced_eos
  /// is set (it must equal eos). A forced token's log-probability counts as 0,
  /// as transformers' logits processors make it.
  int64_t forced_bos = -1, forced_eos = -1;
  /// transformers' logits processors that ban tokens (docs/generation.md):
  /// bad_words_ids of one token (suppress, -1: none), eos while the decoder's
  /// sequence (prompt or start token included) is shorter than min_length,
  /// and no_repeat_ngram_size (0: off).
  int64_t suppress = -1, min_length = 0, no_repeat_ngram = 0;
  /// Beam search's stopping, as transformers' early_stopping: 0 (False) stops
  /// an item once it has `beam` finished hypotheses and its best live one,
  /// normalized at the current length, cannot beat the worst of them; 1 (True)
  /// once it has `beam` finished; 2 ("never") as 0, but normalized at max_len
  /// when length_penalty > 0.
  int early_stopping = 1;
  /// Streaming (tfrun_session_generate_stream): called with (batch item, step
  /// among the item's new tokens, token, log-probability) for every new token
  /// but eos. Greedy and sampling call it as each token is chosen; returning
  /// true stops that item there (what it has so far is its result). Beam
  /// search calls it with the winner's tokens once the item is finished (the
  /// log-probability is NaN: a token's own is not kept) and ignores the return.
  std::function<bool(size_t, int64_t, int64_t, float)> onToken;
};

struct SearchResult {
  std::vector<std::vector<int64_t>> ids; ///< per batch item: new tokens, no bos/prompt, no eos
  /// Per batch item: greedy and sampling, the sum of the chosen tokens' log-probabilities (eos
  /// included); beam search, the winner's normalized score, score / length^alpha.
  std::vector<float> scores;
};

/// prompts[b] = the tokens forced for batch item b before generation starts. For
/// encoder-decoder models it is {bos}. For decoder-only models it is the prompt (>= 1 token).
/// The model starts with prompts.size() rows, row b = item b, at position 0.
///
/// Runs greedy search (beam 1, no sampling), beam search (beam > 1) or sampling (sample, beam
/// 1) as docs/generation.md specifies. Rows are kept contiguous per item, in item order; a
/// finished item's rows are dropped before the next step. Invalid options give
/// TFRUN_INVALID_ARGUMENT, step()/select() errors are returned unchanged, std::bad_alloc gives
/// TFRUN_OUT_OF_MEMORY. On error |out| is left empty. An empty batch succeeds with an empty
/// result and never calls the model.
Status search(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
             const SearchOptions &opt, SearchResult &out);

/// Beam search with opt.beam hypotheses per item, also for opt.beam == 1 (which search() runs
/// as greedy; the tokens agree, the score here is the normalized one). opt.sample must be off.
/// Same contract as search().
Status beamSearch(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                 const SearchOptions &opt, SearchResult &out);

/// The option checks search() makes, in its order: Status::ok(), or the first problem
/// (TFRUN_INVALID_ARGUMENT and a one-line message). forBeamSearch: also rejects sampling with
/// beam 1 (as beamSearch() does).
Status validateSearch(const StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                     const SearchOptions &opt, bool forBeamSearch = false);

} // namespace tfrun::rt

#endif // TFC_RUNTIME_GENERATE_H
