//===- generate_beam.cc - beam search -------------------------------------===//
//
// docs/generation.md, "The decoding loop": beam search, per item, with all
// items' live hypotheses as the model's rows (contiguous per item, in item
// order). generate.cc has the entry points that validate and call it, greedy
// search and sampling, and the readings of the spec both follow.
//
//===----------------------------------------------------------------------===//
#include "runtime/generate_internal.h"

#include "backends/cpu/search_cpu.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace tfrun::rt::search_detail {
namespace {

// A hypothesis's tokens are a chain of nodes (parent, token); -1 is the empty one.
struct Node {
  int32_t parent;
  int64_t token;
};
struct Hyp {
  int32_t node;
  float score;
};
struct Finished {
  int32_t node;
  float norm;
};
struct Item {
  std::vector<Node> nodes;
  std::vector<Hyp> live, next;
  std::vector<Finished> finished;
};
struct Cand {
  float score;
  int64_t flat; // h * vocab + v
};

/// Item b's result: its best finished hypothesis (the first finished wins a tie).
void finish(const Item &it, size_t b, const SearchOptions &opt, SearchResult &out) {
  const Finished *best = nullptr;
  for (const Finished &f : it.finished)
    if (!best || f.norm > best->norm)
      best = &f;
  if (!best) {
    // No hypothesis finished above -inf (every candidate was -inf): the
    // item ends with no tokens and score -inf.
    out.scores[b] = -std::numeric_limits<float>::infinity();
    return;
  }
  std::vector<int64_t> &ids = out.ids[b];
  for (int32_t n = best->node; n >= 0; n = it.nodes[n].parent)
    ids.push_back(it.nodes[n].token);
  std::reverse(ids.begin(), ids.end());
  out.scores[b] = best->norm;
  if (opt.onToken)
    for (size_t i = 0; i < ids.size(); ++i)
      opt.onToken(b, static_cast<int64_t>(i), ids[i], std::numeric_limits<float>::quiet_NaN());
}

/// Whether item |it| stops after step t, with |it.next| its new live hypotheses.
bool stops(const Item &it, const SearchOptions &opt, int64_t t, bool last) {
  if (last || it.next.empty())
    return true;
  if (static_cast<int64_t>(it.finished.size()) < opt.beam)
    return false;
  if (opt.early_stopping == 1)
    return true;
  // Can the best live hypothesis still beat the worst finished one?
  const int64_t len =
      opt.early_stopping == 2 && opt.length_penalty > 0.0f ? opt.max_len : t + 1;
  return !(normalize(it.next.front().score, len, opt.length_penalty) >
           it.finished.back().norm);
}

/// NaN or +inf in the |n| rows of an item's hypotheses at step t: the error.
Status checkRows(const float *rows, int64_t n, int64_t vocab, int64_t t, size_t b) {
  RowCheck sum;
  for (int64_t h = 0; h < n; ++h) {
    const RowCheck c = checkRow(rows + h * vocab, vocab);
    sum.nan += c.nan;
    sum.posInf += c.posInf;
  }
  return sum.nan || sum.posInf ? nonFiniteLogits(t, b, sum) : Status();
}

/// Beam search's state across steps: the items, and the buffers each step reuses.
struct Search {
  Search(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
         const SearchOptions &opt, SearchResult &out)
      : model(model), prompts(prompts), opt(opt), out(out) {}

  StepModel &model;
  const std::vector<std::vector<int64_t>> &prompts;
  const SearchOptions &opt;
  SearchResult &out;
  const size_t batch = prompts.size();
  const int64_t vocab = model.vocabSize();
  const int64_t K = opt.beam;
  // As transformers: the best 2K candidates of all hypotheses; the first K
  // of them that end (eos, or max_len) may finish, and the first K that do
  // not become the live hypotheses, so an item keeps K live ones.
  const int64_t M = 2 * K;
  const int64_t perRow = std::min<int64_t>(M, vocab); // candidates kept per hypothesis
  const bool bans = bansTokens(opt);

  std::vector<Item> items;
  std::vector<int64_t> tokens, from;
  std::vector<float> top, rowLse, rowTop;
  std::vector<uint8_t> rowBad;
  std::vector<int32_t> topIdx, rowTopIdx;
  std::vector<int64_t> banned;
  std::vector<Cand> cands;
  std::vector<int64_t> seq;

  Status run();
  /// Item b at position pos, its rows from |row0| on (row0 moves past them). Inside its
  /// prompt it has one row, whose logits are ignored; after it, its hypotheses' candidates
  /// become its next live hypotheses (their rows appended to |from|) or finish. |keep|:
  /// whether the item stays active.
  Status stepItem(size_t b, int64_t pos, const float *logits, int64_t &row0, bool &keep);
  /// Appends hypothesis h's best perRow candidates (row |row| of |logits|) to |cands|.
  void addCandidates(const Item &it, size_t b, int64_t h, int64_t row, int64_t forced,
                     const float *logits);
  /// Ranks |cands| into it.next (their rows, from |row0| on, appended to |from|) and
  /// it.finished.
  void rankCandidates(Item &it, int64_t t, int64_t row0, bool last);
};

Status Search::run() {
  items.resize(batch);
  for (Item &it : items) {
    it.live.reserve(K);
    it.next.reserve(K);
    it.live.push_back({-1, 0.0f});
  }
  out.ids.assign(batch, {});
  out.scores.assign(batch, 0.0f);
  std::vector<size_t> active(batch), stillActive;
  std::iota(active.begin(), active.end(), size_t{0});
  tokens.reserve(batch * K);
  from.reserve(batch * K);
  stillActive.reserve(batch);
  cands.reserve(K * perRow);

  int64_t pos0 = 0;
  TFC_RETURN_IF_ERROR(prefillPrompts(model, prompts, &pos0));
  for (int64_t pos = pos0; !active.empty(); ++pos) {
    tokens.clear();
    for (size_t b : active) {
      const auto &p = prompts[b];
      if (pos < static_cast<int64_t>(p.size()))
        tokens.push_back(p[pos]);
      else
        for (const Hyp &h : items[b].live)
          tokens.push_back(items[b].nodes[h.node].token);
    }
    const float *logits;
    TFC_RETURN_IF_ERROR(step(model, tokens, pos, &logits));
    // Every row's log-sum-exp and best perRow logits, in one pass split across
    // threads (a row with banned tokens asks for more below, on its own).
    const int64_t rows = static_cast<int64_t>(tokens.size());
    rowLse.resize(rows);
    rowTop.resize(rows * perRow);
    rowTopIdx.resize(rows * perRow);
    rowBad.resize(rows);
    tfc::cpu::rowsLogSumExpTopK(logits, rows, vocab, static_cast<int>(perRow), rowLse.data(),
                                rowTopIdx.data(), rowTop.data(), rowBad.data());
    from.clear();
    stillActive.clear();
    int64_t row0 = 0; // the item's first row
    for (size_t b : active) {
      bool keep;
      TFC_RETURN_IF_ERROR(stepItem(b, pos, logits, row0, keep));
      if (keep)
        stillActive.push_back(b);
    }
    if (!stillActive.empty())
      TFC_RETURN_IF_ERROR(select(model, from, tokens.size()));
    active.swap(stillActive);
  }
  return {};
}

Status Search::stepItem(size_t b, int64_t pos, const float *logits, int64_t &row0, bool &keep) {
  Item &it = items[b];
  const int64_t plen = static_cast<int64_t>(prompts[b].size());
  keep = true;
  if (pos + 1 < plen) { // still inside its prompt: one row, logits ignored
    from.push_back(row0);
    row0 += 1;
    return {};
  }
  const int64_t t = pos + 1 - plen; // this item's step
  const int64_t n = static_cast<int64_t>(it.live.size());
  // Each hypothesis's best min(K, vocab) candidates contain the item's best K.
  cands.clear();
  const int64_t forced = forcedToken(opt, t);
  // A forced token ignores the logits; the threaded pass flagged the rows
  // that hold NaN or +inf, and checkRows counts them for the error.
  if (forced < 0 && std::any_of(rowBad.begin() + row0, rowBad.begin() + row0 + n,
                                [](uint8_t bad) { return bad != 0; }))
    TFC_RETURN_IF_ERROR(checkRows(logits + row0 * vocab, n, vocab, t, b));
  for (int64_t h = 0; h < n; ++h)
    addCandidates(it, b, h, row0 + h, forced, logits);
  const bool last = t + 1 == opt.max_len;
  const size_t fromBefore = from.size();
  rankCandidates(it, t, row0, last);
  row0 += n;
  if (stops(it, opt, t, last)) {
    from.resize(fromBefore); // the item is done: its rows go
    finish(it, b, opt, out);
    keep = false;
    return {};
  }
  it.live.swap(it.next);
  return {};
}

void Search::addCandidates(const Item &it, size_t b, int64_t h, int64_t row, int64_t forced,
                           const float *logits) {
  const float *l = logits + row * vocab;
  const float s = it.live[h].score;
  const float ninf = -std::numeric_limits<float>::infinity();
  if (forced >= 0) {
    // Every other token is -inf; the forced one keeps the score.
    for (int64_t v = 0; v < perRow; ++v) {
      const int64_t tok = v == 0 ? forced : (v <= forced ? v - 1 : v);
      cands.push_back({v == 0 ? s : ninf, h * vocab + tok});
    }
    return;
  }
  banned.clear();
  if (bans) {
    // transformers' processors run on the log-probabilities: the
    // banned tokens become -inf.
    seq.assign(prompts[b].begin(), prompts[b].end());
    const size_t at = seq.size();
    for (int32_t nd = it.live[h].node; nd >= 0; nd = it.nodes[nd].parent)
      seq.push_back(it.nodes[nd].token);
    std::reverse(seq.begin() + at, seq.end());
    bannedIds(opt, seq, vocab, banned);
    std::sort(banned.begin(), banned.end());
    banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
  }
  // log_softmax keeps the row's order: the best raw logits are the best
  // candidates, and only they need l - lse. A banned token is skipped
  // (and refilled from the ones after it), then added back at -inf
  // where the row has too few others.
  const float lse = rowLse[row];
  const float *topV = rowTop.data() + row * perRow;
  const int32_t *topI = rowTopIdx.data() + row * perRow;
  int got = static_cast<int>(std::min<int64_t>(perRow, vocab));
  if (!banned.empty()) {
    const int want = static_cast<int>(std::min<int64_t>(perRow + banned.size(), vocab));
    top.resize(want);
    topIdx.resize(want);
    got = tfc::cpu::rowTopK(l, vocab, want, topIdx.data(), top.data());
    topV = top.data();
    topI = topIdx.data();
  }
  int64_t taken = 0;
  for (int i = 0; i < got && taken < perRow; ++i) {
    if (!banned.empty() && std::binary_search(banned.begin(), banned.end(), topI[i]))
      continue;
    cands.push_back({key(s + (topV[i] - lse)), h * vocab + topI[i]});
    ++taken;
  }
  for (size_t i = 0; taken < perRow && i < banned.size(); ++i, ++taken)
    cands.push_back({ninf, h * vocab + banned[i]});
}

void Search::rankCandidates(Item &it, int64_t t, int64_t row0, bool last) {
  const int64_t take = std::min<int64_t>(M, static_cast<int64_t>(cands.size()));
  std::partial_sort(cands.begin(), cands.begin() + take, cands.end(),
                    [](const Cand &a, const Cand &c) {
                      return a.score > c.score || (a.score == c.score && a.flat < c.flat);
                    });
  it.next.clear();
  bool added = false;
  for (int64_t i = 0; i < take; ++i) {
    const int64_t h = cands[i].flat / vocab, v = cands[i].flat % vocab;
    const float score = cands[i].score;
    const int32_t parent = it.live[h].node;
    const bool isEos = opt.isEos(v);
    const bool ends = isEos || last;
    if (ends) {
      // Only the first K ranks may finish (transformers' top_num_beam_mask).
      if (i < K && score > -std::numeric_limits<float>::infinity()) {
        int32_t node = parent;
        if (!isEos) {
          it.nodes.push_back({parent, v});
          node = static_cast<int32_t>(it.nodes.size() - 1);
        }
        it.finished.push_back({node, normalize(score, t + 1, opt.length_penalty)});
        added = true;
      }
      continue;
    }
    if (static_cast<int64_t>(it.next.size()) == K)
      continue;
    it.nodes.push_back({parent, v});
    it.next.push_back({static_cast<int32_t>(it.nodes.size() - 1), score});
    from.push_back(row0 + h);
  }
  if (added) {
    // The K best finished (the earlier first on a tie), as transformers keeps them.
    std::stable_sort(it.finished.begin(), it.finished.end(),
                     [](const Finished &a, const Finished &c) { return a.norm > c.norm; });
    if (static_cast<int64_t>(it.finished.size()) > K)
      it.finished.resize(K);
  }
}

} // namespace

/// Beam search, per item as docs/generation.md specifies, with all items' live hypotheses as
/// the model's rows.
Status beamSearchImpl(StepModel &model, const std::vector<std::vector<int64_t>> &prompts,
                      const SearchOptions &opt, SearchResult &out) {
  Search search(model, prompts, opt, out);
  return search.run();
}

} // namespace tfrun::rt::search_detail
