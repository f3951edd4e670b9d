// GoogleTest for the decoding loop's search algorithms (runtime/generate.h): greedy,
// beam search and sampling, as docs/generation.md ("The decoding loop") specifies.
//
// A fake StepModel gives logits that are a pure function of a row's token history
// (a fixed random table indexed by the last token, plus noise hashed from the whole
// history and position, optionally quantized so that ties are common). It tracks its
// rows exactly through select() and checks in step() everything it can: the row count,
// the position, that every row is fed its item's prompt and never an eos, that rows
// stay contiguous per item in item order. The expected results come from naive
// implementations of the spec below: every hypothesis recomputed from its full
// history, no select(), plain full sorts.
#include "runtime/generate.h"

#include "tfrun/tfrun.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <new>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using tfrun::rt::Status;

/// The code of |s| as the C API reports it.
tfrun_code_t codeOf(const Status &s) { return static_cast<tfrun_code_t>(s.code()); }
using tfrun::rt::SearchOptions;
using tfrun::rt::SearchResult;
using Prompts = std::vector<std::vector<int64_t>>;
using Tokens = std::vector<int64_t>;

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Logits for the next token after |hist| (the prompt and the generated tokens so far).
using LogitsFn = std::function<std::vector<float>(const Tokens &hist)>;

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A fixed random [vocab, vocab] table indexed by the last token, plus a perturbation hashed
/// from the whole history (so beams with the same last token still differ), plus an eos bias
/// that grows with the position. quantized: rounded to multiples of 0.5, so ties are common.
LogitsFn tableLogits(uint64_t seed, int64_t vocab, int64_t eos, float eosBias, float eosGrowth,
                     bool quantized) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  auto table = std::make_shared<std::vector<float>>(vocab * vocab);
  for (float &x : *table)
    x = dist(rng);
  return [=](const Tokens &hist) {
    uint64_t h = seed ^ (hist.size() * 0x632BE59BD9B4E019ull);
    for (int64_t t : hist)
      h = splitmix(h ^ static_cast<uint64_t>(t));
    std::vector<float> l(vocab);
    const int64_t last = hist.back();
    for (int64_t v = 0; v < vocab; ++v) {
      float noise = static_cast<float>(splitmix(h + static_cast<uint64_t>(v)) >> 40) / 16777216.0f;
      float x = (*table)[last * vocab + v] + 1.5f * (noise - 0.5f);
      if (v == eos)
        x += eosBias + eosGrowth * static_cast<float>(hist.size());
      l[v] = quantized ? std::round(x * 2.0f) / 2.0f : x;
    }
    return l;
  };
}

/// The same logits whatever the history.
LogitsFn fixedLogits(std::vector<float> l) {
  return [l](const Tokens &) { return l; };
}

/// The fake model: per row, its batch item and token history.
class FakeModel : public tfrun::rt::StepModel {
public:
  FakeModel(LogitsFn fn, int64_t vocab, int64_t maxRows, Prompts prompts, int64_t eos)
      : fn_(std::move(fn)), vocab_(vocab), maxRows_(maxRows), prompts_(std::move(prompts)),
        eos_(eos) {
    for (size_t b = 0; b < prompts_.size(); ++b)
      rows_.push_back({b, {}});
  }

  int64_t vocabSize() const override { return vocab_; }
  int64_t maxRows() const override { return maxRows_; }

  Status step(const int64_t *tokens, int64_t rows, int64_t pos, const float **logits) override {
    ++stepCalls;
    if (stepCalls == failStepAt)
      return Status::internal("fake step failure");
    if (stepCalls == throwStepAt)
      throw std::bad_alloc();
    EXPECT_EQ(rows, static_cast<int64_t>(rows_.size())) << "at pos " << pos;
    EXPECT_EQ(pos, static_cast<int64_t>(rowsPerStep.size()));
    EXPECT_LE(rows, maxRows_);
    EXPECT_GE(rows, 1);
    if (rows != static_cast<int64_t>(rows_.size()))
      return Status::internal("row count mismatch");
    rowsPerStep.push_back(rows);
    buf_.resize(rows * vocab_);
    checkContiguous();
    std::vector<int64_t> perItem(prompts_.size());
    for (int64_t r = 0; r < rows; ++r) {
      Row &row = rows_[r];
      const Tokens &p = prompts_[row.item];
      ++perItem[row.item];
      EXPECT_EQ(static_cast<int64_t>(row.hist.size()), pos) << "row " << r;
      if (pos < static_cast<int64_t>(p.size()))
        EXPECT_EQ(tokens[r], p[pos]) << "row " << r << " of item " << row.item << " at " << pos;
      else
        EXPECT_NE(tokens[r], eos_) << "a finished hypothesis is fed, row " << r;
      EXPECT_TRUE(tokens[r] >= 0 && tokens[r] < vocab_);
      row.hist.push_back(tokens[r]);
      std::vector<float> l = fn_(row.hist);
      std::copy(l.begin(), l.end(), buf_.begin() + r * vocab_);
    }
    for (size_t b = 0; b < prompts_.size(); ++b)
      EXPECT_LE(perItem[b], maxPerItem) << "item " << b << " at " << pos;
    *logits = buf_.data();
    return {};
  }

  Status select(const int64_t *from, int64_t rows) override {
    ++selectCalls;
    if (selectCalls == failSelectAt)
      return Status::invalidModel("fake select failure");
    EXPECT_GE(rows, 1);
    EXPECT_LE(rows, maxRows_);
    std::vector<Row> next;
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(from[r] >= 0 && from[r] < static_cast<int64_t>(rows_.size()));
      if (from[r] < 0 || from[r] >= static_cast<int64_t>(rows_.size()))
        return Status::internal("bad select index");
      next.push_back(rows_[from[r]]);
    }
    rows_ = std::move(next);
    checkContiguous();
    return {};
  }

  std::vector<int64_t> rowsPerStep; ///< rows fed at each position
  int stepCalls = 0, selectCalls = 0;
  int failStepAt = -1, throwStepAt = -1, failSelectAt = -1;
  int64_t maxPerItem = 1 << 30;

private:
  struct Row {
    size_t item;
    Tokens hist;
  };
  void checkContiguous() const {
    for (size_t r = 1; r < rows_.size(); ++r)
      EXPECT_LE(rows_[r - 1].item, rows_[r].item) << "rows not contiguous per item, in order";
  }

  LogitsFn fn_;
  int64_t vocab_, maxRows_;
  Prompts prompts_;
  int64_t eos_;
  std::vector<Row> rows_;
  std::vector<float> buf_;
};

// -------------------------------------------------------------------------------------
// The naive reference (docs/generation.md, per batch item, no KV cache).
// -------------------------------------------------------------------------------------
std::vector<float> logSoftmax(const std::vector<float> &l) {
  float mx = *std::max_element(l.begin(), l.end());
  double s = 0;
  for (float x : l)
    s += std::exp(x - mx);
  float lse = mx + static_cast<float>(std::log(s));
  std::vector<float> out(l.size());
  for (size_t v = 0; v < l.size(); ++v)
    out[v] = l[v] - lse;
  return out;
}

Tokens concat(const Tokens &a, const Tokens &b) {
  Tokens c = a;
  c.insert(c.end(), b.begin(), b.end());
  return c;
}

struct Ref {
  Tokens ids;
  float score = 0;
  int steps = 0;                ///< generation steps run (= tokens produced, eos included)
  std::vector<int64_t> liveAfter; ///< beam: live hypotheses after each step but the last
  enum Stop { Eos, MaxLen, FinishedK, NoLive } stop = MaxLen;
  bool winnerEndsWithEos = false;
};

Ref refGreedy(const LogitsFn &fn, const Tokens &prompt, int maxLen, int64_t eos) {
  Ref r;
  Tokens ids;
  for (int t = 0; t < maxLen; ++t) {
    std::vector<float> l = fn(concat(prompt, ids));
    std::vector<int64_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
    int64_t tok = order[0];
    r.score += logSoftmax(l)[tok];
    ++r.steps;
    if (tok == eos) {
      r.stop = Ref::Eos;
      r.winnerEndsWithEos = true;
      break;
    }
    ids.push_back(tok);
  }
  r.ids = ids;
  return r;
}

Ref refBeam(const LogitsFn &fn, const Tokens &prompt, int K, int maxLen, float alpha,
            int64_t eos) {
  struct Hyp {
    Tokens toks;
    float score;
  };
  struct Fin {
    Tokens toks;
    float norm;
    bool eos;
  };
  struct Cand {
    float score;
    int64_t flat;
  };
  auto norm = [&](float s, int len) {
    return static_cast<float>(double(s) / std::pow(double(len), double(alpha)));
  };
  Ref r;
  std::vector<Hyp> live{{{}, 0.0f}};
  std::vector<Fin> finished;
  for (int t = 0;; ++t) {
    ++r.steps;
    std::vector<Cand> cands;
    int64_t vocab = 0;
    for (size_t h = 0; h < live.size(); ++h) {
      std::vector<float> lp = logSoftmax(fn(concat(prompt, live[h].toks)));
      vocab = static_cast<int64_t>(lp.size());
      for (int64_t v = 0; v < vocab; ++v)
        cands.push_back({live[h].score + lp[v], static_cast<int64_t>(h) * vocab + v});
    }
    std::sort(cands.begin(), cands.end(), [](const Cand &a, const Cand &b) {
      return a.score > b.score || (a.score == b.score && a.flat < b.flat);
    });
    // transformers' beam search: of the best 2K candidates, the ones among the
    // first K that end finish, and the first K others stay live.
    std::vector<Hyp> next;
    bool last = t + 1 == maxLen;
    for (size_t i = 0; i < cands.size() && i < size_t(2 * K); ++i) {
      const Hyp &h = live[cands[i].flat / vocab];
      int64_t v = cands[i].flat % vocab;
      if (v == eos || last) {
        if (i < size_t(K))
          finished.push_back(v == eos ? Fin{h.toks, norm(cands[i].score, t + 1), true}
                                      : Fin{concat(h.toks, {v}), norm(cands[i].score, maxLen),
                                            false});
      } else if (next.size() < size_t(K)) {
        next.push_back({concat(h.toks, {v}), cands[i].score});
      }
    }
    // finished keeps its K best, the earlier first on a tie.
    std::stable_sort(finished.begin(), finished.end(),
                     [](const Fin &a, const Fin &b) { return a.norm > b.norm; });
    if (finished.size() > size_t(K))
      finished.resize(K);
    live = next;
    if (last)
      r.stop = Ref::MaxLen;
    else if (finished.size() >= size_t(K))
      r.stop = Ref::FinishedK;
    else if (live.empty())
      r.stop = Ref::NoLive;
    else {
      r.liveAfter.push_back(static_cast<int64_t>(live.size()));
      continue;
    }
    break;
  }
  size_t best = 0;
  for (size_t i = 1; i < finished.size(); ++i)
    if (finished[i].norm > finished[best].norm)
      best = i;
  r.ids = finished[best].toks;
  r.score = finished[best].norm;
  r.winnerEndsWithEos = finished[best].eos;
  return r;
}

/// The kept tokens and their renormalized probabilities, in sorted order, after
/// temperature, top-k, softmax and top-p.
std::vector<std::pair<int64_t, double>> refSampleDistribution(const std::vector<float> &logits,
                                                              const SearchOptions &opt) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  std::vector<float> x(vocab);
  for (int64_t v = 0; v < vocab; ++v)
    x[v] = logits[v] / opt.temperature;
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  if (opt.top_k > 0 && opt.top_k < vocab)
    order.resize(opt.top_k);
  double mx = x[order[0]], z = 0;
  std::vector<std::pair<int64_t, double>> p;
  for (int64_t v : order)
    z += std::exp(double(x[v]) - mx);
  for (int64_t v : order)
    p.push_back({v, std::exp(double(x[v]) - mx) / z});
  std::stable_sort(p.begin(), p.end(), [](auto &a, auto &b) { return a.second > b.second; });
  if (opt.top_p < 1.0f) {
    double mass = 0;
    size_t n = 0;
    while (n < p.size() && mass < opt.top_p)
      mass += p[n++].second;
    p.resize(n);
    for (auto &q : p)
      q.second /= mass;
  }
  if (opt.min_p > 0.0f) { // transformers' MinPLogitsWarper: p >= min_p * the best's
    const double floor = opt.min_p * p[0].second;
    size_t n = 1;
    while (n < p.size() && p[n].second >= floor)
      ++n;
    p.resize(n);
    double mass = 0;
    for (auto &q : p)
      mass += q.second;
    for (auto &q : p)
      q.second /= mass;
  }
  return p;
}

/// transformers' RepetitionPenaltyLogitsProcessor over |fn|: each distinct token
/// of the sequence so far divided by |penalty| (multiplied when negative).
LogitsFn penalized(const LogitsFn &fn, float penalty) {
  return [fn, penalty](const Tokens &hist) {
    std::vector<float> l = fn(hist);
    std::vector<bool> seen(l.size());
    for (int64_t v : hist)
      if (!seen[v]) {
        seen[v] = true;
        l[v] = l[v] < 0 ? l[v] * penalty : l[v] / penalty;
      }
    return l;
  };
}

Ref refSample(const LogitsFn &fn, const Tokens &prompt, const SearchOptions &opt, size_t item) {
  std::mt19937_64 rng(opt.seed + 0x9E3779B97F4A7C15ull * (item + 1));
  Ref r;
  Tokens ids;
  for (int t = 0; t < opt.max_len; ++t) {
    std::vector<float> l = fn(concat(prompt, ids));
    auto p = refSampleDistribution(l, opt);
    double u = double(rng() >> 11) * std::ldexp(1.0, -53);
    double c = 0;
    int64_t tok = p.back().first;
    for (auto &q : p)
      if ((c += q.second) > u) {
        tok = q.first;
        break;
      }
    r.score += logSoftmax(l)[tok];
    ++r.steps;
    if (tok == opt.eos) {
      r.stop = Ref::Eos;
      r.winnerEndsWithEos = true;
      break;
    }
    ids.push_back(tok);
  }
  r.ids = ids;
  return r;
}

/// Rows the search must feed at each position: an item's one row through its prompt, then
/// (beam) its live hypotheses, until its last step.
std::vector<int64_t> expectedRows(const Prompts &prompts, const std::vector<Ref> &refs) {
  std::vector<int64_t> rows;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const int64_t plen = static_cast<int64_t>(prompts[b].size());
    const int64_t lastPos = plen - 1 + refs[b].steps - 1;
    if (static_cast<int64_t>(rows.size()) <= lastPos)
      rows.resize(lastPos + 1, 0);
    for (int64_t p = 0; p <= lastPos; ++p)
      rows[p] += p < plen ? 1 : (refs[b].liveAfter.empty() ? 1 : refs[b].liveAfter[p - plen]);
  }
  return rows;
}

Prompts raggedPrompts(uint64_t seed, size_t batch, int64_t vocab, int64_t bos, int maxLen) {
  std::mt19937_64 rng(seed * 7919 + 17);
  Prompts prompts(batch);
  for (auto &p : prompts) {
    int len = 1 + static_cast<int>(rng() % maxLen);
    p.push_back(bos);
    for (int i = 1; i < len; ++i)
      p.push_back(static_cast<int64_t>(rng() % vocab));
  }
  return prompts;
}

void expectMatches(const SearchResult &got, const std::vector<Ref> &want, const char *what) {
  ASSERT_EQ(got.ids.size(), want.size()) << what;
  ASSERT_EQ(got.scores.size(), want.size()) << what;
  for (size_t b = 0; b < want.size(); ++b) {
    EXPECT_EQ(got.ids[b], want[b].ids) << what << ", item " << b;
    EXPECT_NEAR(got.scores[b], want[b].score, 1e-5) << what << ", item " << b;
  }
}

constexpr int64_t kBos = 1, kEos = 2;

SearchOptions options(int maxLen) {
  SearchOptions o;
  o.max_len = maxLen;
  o.bos = kBos;
  o.eos = kEos;
  return o;
}

// -------------------------------------------------------------------------------------
// Greedy.
// -------------------------------------------------------------------------------------
TEST(Generate, GreedyStopsAtEosBeforeMaxLen) {
  const int64_t vocab = 10;
  // eos becomes the arg-max after a few positions.
  LogitsFn fn = tableLogits(5, vocab, kEos, -3.0f, 1.2f, false);
  Prompts prompts{{kBos}};
  FakeModel m(fn, vocab, 1, prompts, kEos);
  SearchResult out;
  Status e = tfrun::rt::search(m, prompts, options(20), out);
  ASSERT_TRUE(e.isOk()) << e.message();
  Ref ref = refGreedy(fn, prompts[0], 20, kEos);
  ASSERT_EQ(ref.stop, Ref::Eos);
  ASSERT_LT(ref.ids.size(), 19u);
  expectMatches(out, {ref}, "greedy");
  EXPECT_EQ(m.rowsPerStep, expectedRows(prompts, {ref}));
  EXPECT_EQ(m.stepCalls, ref.steps); // no step after the eos
}

TEST(Generate, GreedyStopsAtMaxLen) {
  const int64_t vocab = 10;
  LogitsFn fn = tableLogits(6, vocab, kEos, -50.0f, 0.0f, false); // eos never wins
  Prompts prompts{{kBos}};
  FakeModel m(fn, vocab, 1, prompts, kEos);
  SearchResult out;
  ASSERT_TRUE(tfrun::rt::search(m, prompts, options(9), out).isOk());
  Ref ref = refGreedy(fn, prompts[0], 9, kEos);
  ASSERT_EQ(ref.stop, Ref::MaxLen);
  ASSERT_EQ(out.ids.size(), 1u);
  EXPECT_EQ(out.ids[0].size(), 9u);
  expectMatches(out, {ref}, "greedy");
  EXPECT_EQ(m.stepCalls, 9); // the last token is never fed
}

TEST(Generate, GreedyEosFirst) {
  const int64_t vocab = 6;
  Prompts prompts{{kBos}, {kBos}};
  LogitsFn fn = fixedLogits({0, 0, 3, 0, 1, 0});
  FakeModel m(fn, vocab, 2, prompts, kEos);
  SearchResult out;
  ASSERT_TRUE(tfrun::rt::search(m, prompts, options(5), out).isOk());
  EXPECT_TRUE(out.ids[0].empty());
  EXPECT_NEAR(out.scores[0], logSoftmax({0, 0, 3, 0, 1, 0})[2], 1e-6);
  EXPECT_EQ(m.stepCalls, 1);
  EXPECT_EQ(m.selectCalls, 0);
}

TEST(Generate, GreedyTieGoesToLowestId) {
  const int64_t vocab = 6;
  Prompts prompts{{kBos}};
  std::vector<float> l{0, 1, -1, 2, 2, 2};
  FakeModel m(fixedLogits(l), vocab, 1, prompts, kEos);
  SearchResult out;
  ASSERT_TRUE(tfrun::rt::search(m, prompts, options(3), out).isOk());
  EXPECT_EQ(out.ids[0], (Tokens{3, 3, 3}));
  EXPECT_NEAR(out.scores[0], 3 * logSoftmax(l)[3], 1e-5);
}

TEST(Generate, GreedyRaggedBatchMatchesNaive) {
  bool sawEos = false, sawMaxLen = false;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const int64_t vocab = 12 + seed % 5;
    const size_t batch = 1 + seed % 6;
    const int maxLen = 1 + static_cast<int>(seed % 9);
    LogitsFn fn = tableLogits(seed, vocab, kEos, -1.0f, 0.3f, seed % 2 == 0);
    Prompts prompts = raggedPrompts(seed, batch, vocab, kBos, 6);
    FakeModel m(fn, vocab, static_cast<int64_t>(batch), prompts, kEos);
    SearchResult out;
    Status e = tfrun::rt::search(m, prompts, options(maxLen), out);
    ASSERT_TRUE(e.isOk()) << e.message();
    std::vector<Ref> refs;
    for (auto &p : prompts) {
      refs.push_back(refGreedy(fn, p, maxLen, kEos));
      sawEos |= refs.back().stop == Ref::Eos && refs.back().steps < maxLen;
      sawMaxLen |= refs.back().stop == Ref::MaxLen;
    }
    expectMatches(out, refs, ("greedy seed " + std::to_string(seed)).c_str());
    EXPECT_EQ(m.rowsPerStep, expectedRows(prompts, refs)) << "seed " << seed;
  }
  EXPECT_TRUE(sawEos);
  EXPECT_TRUE(sawMaxLen);
}

TEST(Generate, RowsShrinkAsItemsFinish) {
  // Four items of different prompt lengths; eos is fixed after a per-item number of tokens.
  const int64_t vocab = 8;
  // Token 3 leads to 4, 4 to 5, 5 to 6, 6 to eos; a prompt's last token picks the start.
  LogitsFn fn = [](const Tokens &hist) {
    std::vector<float> l(8, 0.0f);
    int64_t last = hist.back();
    l[last == 1 ? 3 : last == 6 || last == 7 ? kEos : last + 1] = 5.0f;
    return l;
  };
  Prompts prompts{{kBos, 6}, {kBos}, {kBos, 0, 0, 4}, {kBos, 5}};
  // Item 0: eos at once (pos 1). Item 1: 3 4 5 6 eos (pos 0..4). Item 2: 5 6 eos (pos 3..5).
  // Item 3: 6 eos (pos 1..2).
  FakeModel m(fn, vocab, 4, prompts, kEos);
  SearchResult out;
  ASSERT_TRUE(tfrun::rt::search(m, prompts, options(10), out).isOk());
  EXPECT_EQ(out.ids, (std::vector<Tokens>{{}, {3, 4, 5, 6}, {5, 6}, {6}}));
  EXPECT_EQ(m.rowsPerStep, (std::vector<int64_t>{4, 4, 3, 2, 2, 1}));
  for (size_t i = 1; i < m.rowsPerStep.size(); ++i)
    EXPECT_LE(m.rowsPerStep[i], m.rowsPerStep[i - 1]);
  EXPECT_EQ(m.selectCalls, 3); // after pos 1, 2 and 4; not after the last step

  // Beam search drops a finished item's rows too.
  FakeModel mb(fn, vocab, 8, prompts, kEos);
  SearchOptions o = options(10);
  o.beam = 2;
  ASSERT_TRUE(tfrun::rt::search(mb, prompts, o, out).isOk());
  std::vector<Ref> refs;
  for (auto &p : prompts)
    refs.push_back(refBeam(fn, p, 2, 10, 1.0f, kEos));
  expectMatches(out, refs, "beam");
  EXPECT_EQ(mb.rowsPerStep, expectedRows(prompts, refs));
}

// -------------------------------------------------------------------------------------
// Beam search.
// -------------------------------------------------------------------------------------
TEST(Generate, BeamWidthOneEqualsGreedy) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const int64_t vocab = 14;
    LogitsFn fn = tableLogits(100 + seed, vocab, kEos, -1.0f, 0.4f, seed % 2 == 1);
    Prompts prompts = raggedPrompts(seed, 4, vocab, kBos, 4);
    SearchOptions o = options(8);
    FakeModel mg(fn, vocab, 4, prompts, kEos);
    SearchResult greedy, beam;
    ASSERT_TRUE(tfrun::rt::search(mg, prompts, o, greedy).isOk());
    FakeModel mb(fn, vocab, 4, prompts, kEos);
    mb.maxPerItem = 1;
    ASSERT_TRUE(tfrun::rt::beamSearch(mb, prompts, o, beam).isOk());
    EXPECT_EQ(beam.ids, greedy.ids) << "seed " << seed;
    EXPECT_EQ(mb.rowsPerStep, mg.rowsPerStep) << "seed " << seed;
    for (size_t b = 0; b < prompts.size(); ++b) {
      Ref g = refGreedy(fn, prompts[b], 8, kEos), k1 = refBeam(fn, prompts[b], 1, 8, 1.0f, kEos);
      EXPECT_EQ(k1.ids, g.ids);
      // alpha = 1: the normalized score is the greedy score over the length (eos included).
      EXPECT_NEAR(beam.scores[b], greedy.scores[b] / g.steps, 1e-5);
    }
  }
}

TEST(Generate, BeamMatchesNaive) {
  int stops[4] = {0, 0, 0, 0};
  int eosWinners = 0, maxLenWinners = 0;
  for (int K : {3, 4})
    for (float alpha : {0.0f, 1.0f, 0.6f})
      for (uint64_t seed = 0; seed < 16; ++seed) {
        const int64_t vocab = 9 + seed % 6;
        const size_t batch = 1 + seed % 4;
        const int maxLen = 2 + static_cast<int>(seed % 7);
        LogitsFn fn = tableLogits(1000 + seed, vocab, kEos, -0.5f, 0.25f, seed % 3 == 0);
        Prompts prompts = raggedPrompts(seed + 50, batch, vocab, kBos, 5);
        FakeModel m(fn, vocab, static_cast<int64_t>(batch) * K, prompts, kEos);
        m.maxPerItem = K;
        SearchOptions o = options(maxLen);
        o.beam = K;
        o.length_penalty = alpha;
        SearchResult out;
        Status e = tfrun::rt::search(m, prompts, o, out);
        ASSERT_TRUE(e.isOk()) << e.message();
        std::vector<Ref> refs;
        for (auto &p : prompts) {
          refs.push_back(refBeam(fn, p, K, maxLen, alpha, kEos));
          ++stops[refs.back().stop];
          (refs.back().winnerEndsWithEos ? eosWinners : maxLenWinners)++;
        }
        std::string what = "K " + std::to_string(K) + " alpha " + std::to_string(alpha) +
                           " seed " + std::to_string(seed);
        expectMatches(out, refs, what.c_str());
        EXPECT_EQ(m.rowsPerStep, expectedRows(prompts, refs)) << what;
      }
  EXPECT_GT(stops[Ref::MaxLen], 0);
  EXPECT_GT(stops[Ref::FinishedK], 0);
  EXPECT_GT(eosWinners, 0);
  EXPECT_GT(maxLenWinners, 0);
}

TEST(Generate, BeamLengthPenaltyChangesTheWinner) {
  // Some item must pick a different hypothesis under alpha 0 and alpha 1; both match naive.
  bool differs = false;
  for (uint64_t seed = 0; seed < 30 && !differs; ++seed) {
    const int64_t vocab = 10;
    LogitsFn fn = tableLogits(2000 + seed, vocab, kEos, 0.0f, 0.2f, false);
    Prompts prompts{{kBos}};
    Tokens ids[2];
    for (int a = 0; a < 2; ++a) {
      FakeModel m(fn, vocab, 4, prompts, kEos);
      SearchOptions o = options(8);
      o.beam = 4;
      o.length_penalty = a == 0 ? 0.0f : 1.0f;
      SearchResult out;
      ASSERT_TRUE(tfrun::rt::search(m, prompts, o, out).isOk());
      expectMatches(out, {refBeam(fn, prompts[0], 4, 8, o.length_penalty, kEos)}, "alpha");
      ids[a] = out.ids[0];
    }
    differs = ids[0] != ids[1];
  }
  EXPECT_TRUE(differs);
}

TEST(Generate, BeamTiesGoToLowerFlatIndexAndFirstFinished) {
  // Uniform logits over 5 tokens: every candidate ties. K = 3, eos = 2.
  // t = 0: ranks 0, 1, 2, 3 = tokens 0, 1, eos, 3 -> finished [] (norm log 1/5), live
  // [0], [1], [3] (the first K that do not end, from the best 2K).
  // t = 1: flat 0, 1, 2 = [0 0], [0 1], [0] eos -> finished [0] (2 log 1/5 / 2^alpha): 2 done;
  // live [0 0], [0 1], [0 3].
  // t = 2: [0 0 0], [0 0 1], [0 0] eos -> 3 finished, stop. alpha = 1: all three tie, the
  // first finished wins.
  const int64_t vocab = 5;
  Prompts prompts{{kBos}};
  LogitsFn fn = fixedLogits(std::vector<float>(vocab, 0.25f));
  for (float alpha : {1.0f, 0.0f, 2.0f}) {
    FakeModel m(fn, vocab, 3, prompts, kEos);
    SearchOptions o = options(10);
    o.beam = 3;
    o.length_penalty = alpha;
    SearchResult out;
    ASSERT_TRUE(tfrun::rt::search(m, prompts, o, out).isOk());
    const float lp = logSoftmax(std::vector<float>(vocab, 0.25f))[0];
    if (alpha == 0.0f) { // the highest raw score: the shortest
      EXPECT_EQ(out.ids[0], Tokens{});
      EXPECT_NEAR(out.scores[0], lp, 1e-6);
    } else if (alpha == 1.0f) {
      EXPECT_EQ(out.ids[0], Tokens{});
      EXPECT_NEAR(out.scores[0], lp, 1e-6);
    } else { // alpha 2 favours the longest: [0 0] with 3 lp / 9
      EXPECT_EQ(out.ids[0], (Tokens{0, 0}));
      EXPECT_NEAR(out.scores[0], 3 * lp / 9, 1e-6);
    }
    EXPECT_EQ(m.rowsPerStep, (std::vector<int64_t>{1, 3, 3}));
    expectMatches(out, {refBeam(fn, prompts[0], 3, 10, alpha, kEos)}, "uniform");
  }
}

TEST(Generate, BeamLastStepFinishesLiveEvenWhenFull) {
  // K = 2, max_len = 2, alpha = 1. t = 0: [3] live, [] + eos finished (-0.744).
  // t = 1: [3 4] (-1.288) ranks before [3] + eos (-1.388), which fills `finished`; t + 1 ==
  // max_len still makes [3 4] finished (-0.644 normalized), and it wins.
  const int64_t vocab = 6;
  LogitsFn fn = [](const Tokens &hist) {
    std::vector<float> l(6, -30.0f);
    if (hist.back() == 3) {
      l[4] = 10.0f;
      l[kEos] = 9.9f;
    } else {
      l[3] = 0.0f;
      l[kEos] = -0.1f;
    }
    return l;
  };
  Prompts prompts{{kBos}};
  FakeModel m(fn, vocab, 2, prompts, kEos);
  SearchOptions o = options(2);
  o.beam = 2;
  SearchResult out;
  ASSERT_TRUE(tfrun::rt::search(m, prompts, o, out).isOk());
  Ref ref = refBeam(fn, prompts[0], 2, 2, 1.0f, kEos);
  EXPECT_EQ(out.ids[0], (Tokens{3, 4}));
  EXPECT_NEAR(out.scores[0], -std::log1p(std::exp(-0.1)), 1e-5);
  expectMatches(out, {ref}, "full at the last step");
}

TEST(Generate, BeamWiderThanVocab) {
  // vocab 3 < K = 4: fewer candidates than K at the first step.
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const int64_t vocab = 3;
    LogitsFn fn = tableLogits(3000 + seed, vocab, kEos, -1.0f, 0.3f, seed % 2 == 0);
    Prompts prompts = raggedPrompts(seed, 2, vocab, kBos, 3);
    FakeModel m(fn, vocab, 8, prompts, kEos);
    SearchOptions o = options(6);
    o.beam = 4;
    o.length_penalty = 0.6f;
    SearchResult out;
    ASSERT_TRUE(tfrun::rt::search(m, prompts, o, out).isOk());
    std::vector<Ref> refs;
    for (auto &p : prompts)
      refs.push_back(refBeam(fn, p, 4, 6, 0.6f, kEos));
    expectMatches(out, refs, "narrow vocab");
    EXPECT_EQ(m.rowsPerStep, expectedRows(prompts, refs));
  }
}

TEST(Generate, BeamMaxLenOne) {
  const int64_t vocab = 7;
  LogitsFn fn = tableLogits(77, vocab, kEos, 0.0f, 0.0f, false);
  Prompts prompts = raggedPrompts(3, 3, vocab, kBos, 4);
  FakeModel m(fn, vocab, 9, prompts, kEos);
  SearchOptions o = options(1);
  o.beam = 3;
  o.length_penalty = 0.6f;
  SearchResult out;
  ASSERT_TRUE(tfrun::rt::search(m, prompts, o, out).isOk());
  std::vector<Ref> refs;
  for (auto &p : prompts)
    refs.push_back(refBeam(fn, p, 3, 1, 0.6f, kEos));
  expectMatches(out, refs, "max_len 1");
  EXPECT_EQ(m.rowsPerStep, expectedRows(prompts, refs));
}

// -------------------------------------------------------------------------------------
// Sampling.
// -------------------------------------------------------------------------------------
SearchResult sampleRun(const LogitsFn &fn, int64_t vocab, const Prompts &prompts,
                       const SearchOptions &o, std::vector<int64_t> *rows = nullptr) {
  FakeModel m(fn, vocab, static_cast<int64_t>(prompts.size()), prompts, o.eos);
  SearchResult out;
  Status e = tfrun::rt::search(m, prompts, o, out);
  EXPECT_TRUE(e.isOk()) << e.message();
  if (rows)
    *rows = m.rowsPerStep;
  return out;
}

TEST(Generate, SamplingMatchesNaiveAndIsReproducible) {
  struct Config {
    float temperature;
    int top_k;
    float top_p;
  };
  for (Config c : {Config{1.0f, 0, 1.0f}, Config{0.7f, 5, 1.0f}, Config{1.3f, 0, 0.8f},
                   Config{0.5f, 4, 0.9f}, Config{2.0f, 200, 0.95f}})
    for (uint64_t seed = 0; seed < 8; ++seed) {
      const int64_t vocab = 20;
      LogitsFn fn = tableLogits(4000 + seed, vocab, kEos, -1.5f, 0.15f, seed % 2 == 0);
      Prompts prompts = raggedPrompts(seed, 5, vocab, kBos, 5);
      SearchOptions o = options(12);
      o.sample = true;
      o.temperature = c.temperature;
      o.top_k = c.top_k;
      o.top_p = c.top_p;
      o.seed = 12345 + seed;
      std::vector<int64_t> rows;
      SearchResult a = sampleRun(fn, vocab, prompts, o, &rows);
      std::vector<Ref> refs;
      for (size_t b = 0; b < prompts.size(); ++b)
        refs.push_back(refSample(fn, prompts[b], o, b));
      std::string what = "T " + std::to_string(c.temperature) + " k " + std::to_string(c.top_k) +
                         " p " + std::to_string(c.top_p) + " seed " + std::to_string(seed);
      expectMatches(a, refs, what.c_str());
      EXPECT_EQ(rows, expectedRows(prompts, refs)) << what;
      SearchResult again = sampleRun(fn, vocab, prompts, o);
      EXPECT_EQ(again.ids, a.ids) << what;
      EXPECT_EQ(again.scores, a.scores) << what;
    }
}

TEST(Generate, SamplingMinPMatchesNaive) {
  struct Config {
    float temperature;
    int top_k;
    float top_p, min_p;
  };
  for (Config c : {Config{1.0f, 0, 1.0f, 0.05f}, Config{0.7f, 0, 1.0f, 0.3f},
                   Config{1.3f, 6, 0.9f, 0.1f}, Config{2.0f, 0, 0.95f, 0.6f}})
    for (uint64_t seed = 0; seed < 6; ++seed) {
      const int64_t vocab = 20;
      LogitsFn fn = tableLogits(7000 + seed, vocab, kEos, -1.5f, 0.15f, false);
      Prompts prompts = raggedPrompts(seed, 4, vocab, kBos, 5);
      SearchOptions o = options(12);
      o.sample = true;
      o.temperature = c.temperature;
      o.top_k = c.top_k;
      o.top_p = c.top_p;
      o.min_p = c.min_p;
      o.seed = 999 + seed;
      SearchResult a = sampleRun(fn, vocab, prompts, o);
      std::vector<Ref> refs;
      for (size_t b = 0; b < prompts.size(); ++b)
        refs.push_back(refSample(fn, prompts[b], o, b));
      std::string what = "min_p " + std::to_string(c.min_p) + " seed " + std::to_string(seed);
      expectMatches(a, refs, what.c_str());
    }
  // min_p 1 keeps only the most likely token (no ties here): greedy search.
  for (uint64_t seed = 0; seed < 6; ++seed) {
    const int64_t vocab = 16;
    LogitsFn fn = tableLogits(7100 + seed, vocab, kEos, -1.0f, 0.3f, false);
    Prompts prompts = raggedPrompts(seed, 3, vocab, kBos, 4);
    SearchResult greedy = sampleRun(fn, vocab, prompts, options(10));
    SearchOptions o = options(10);
    o.sample = true;
    o.min_p = 1.0f;
    o.seed = seed;
    EXPECT_EQ(sampleRun(fn, vocab, prompts, o).ids, greedy.ids) << "seed " << seed;
  }
}

TEST(Generate, RepetitionPenaltyMatchesNaive) {
  // Greedy search and sampling choose from the penalized logits, and score with
  // them (as transformers' compute_transition_scores does); a penalty below 1
  // favours repeats.
  for (float penalty : {1.5f, 0.7f})
    for (uint64_t seed = 0; seed < 6; ++seed) {
      const int64_t vocab = 20;
      LogitsFn fn = tableLogits(8000 + seed, vocab, kEos, -2.0f, 0.1f, false);
      Prompts prompts = raggedPrompts(seed, 4, vocab, kBos, 5);
      for (bool sample : {false, true}) {
        SearchOptions o = options(12);
        o.repetition_penalty = penalty;
        o.sample = sample;
        o.seed = 31 + seed;
        SearchResult a = sampleRun(fn, vocab, prompts, o);
        std::vector<Ref> refs;
        for (size_t b = 0; b < prompts.size(); ++b)
          refs.push_back(sample ? refSample(penalized(fn, penalty), prompts[b], o, b)
                                : refGreedy(penalized(fn, penalty), prompts[b], 12, kEos));
        std::string what = "penalty " + std::to_string(penalty) + (sample ? " sample" : " greedy") +
                           " seed " + std::to_string(seed);
        expectMatches(a, refs, what.c_str());
      }
    }
  // It changes the tokens: a penalty of 3 on a model that repeats.
  const int64_t vocab = 16;
  LogitsFn rep = tableLogits(8100, vocab, kEos, -50.0f, 0.0f, false);
  Prompts prompts{{kBos}};
  SearchOptions o = options(12);
  SearchResult plain = sampleRun(rep, vocab, prompts, o);
  o.repetition_penalty = 3.0f;
  SearchResult pen = sampleRun(rep, vocab, prompts, o);
  EXPECT_EQ(pen.ids[0], refGreedy(penalized(rep, 3.0f), prompts[0], 12, kEos).ids);
  EXPECT_NE(pen.ids, plain.ids);
}

TEST(Generate, SamplingDependsOnTheSeed) {
  const int64_t vocab = 20;
  LogitsFn fn = tableLogits(4242, vocab, kEos, -50.0f, 0.0f, false);
  Prompts prompts = raggedPrompts(1, 4, vocab, kBos, 3);
  SearchOptions o = options(30);
  o.sample = true;
  o.seed = 1;
  SearchResult a = sampleRun(fn, vocab, prompts, o);
  o.seed = 2;
  SearchResult b = sampleRun(fn, vocab, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_NE(a.ids[i], b.ids[i]) << "item " << i;
  // Items draw from their own streams: two items with the same prompt differ.
  Prompts same{{kBos}, {kBos}};
  SearchResult c = sampleRun(fn, vocab, same, o);
  EXPECT_NE(c.ids[0], c.ids[1]);
}

TEST(Generate, SamplingTopKOneAndTinyTopPAreGreedy) {
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const int64_t vocab = 16;
    LogitsFn fn = tableLogits(5000 + seed, vocab, kEos, -1.0f, 0.3f, true); // ties included
    Prompts prompts = raggedPrompts(seed, 4, vocab, kBos, 4);
    SearchOptions g = options(10);
    SearchResult greedy = sampleRun(fn, vocab, prompts, g);
    for (int variant = 0; variant < 2; ++variant) {
      SearchOptions o = g;
      o.sample = true;
      o.seed = seed * 31;
      o.temperature = 0.3f + 0.5f * static_cast<float>(seed % 4);
      if (variant == 0)
        o.top_k = 1;
      else
        o.top_p = 1e-6f;
      SearchResult s = sampleRun(fn, vocab, prompts, o);
      EXPECT_EQ(s.ids, greedy.ids) << "seed " << seed << " variant " << variant;
      for (size_t b = 0; b < prompts.size(); ++b)
        EXPECT_NEAR(s.scores[b], greedy.scores[b], 1e-5); // the unmodified model's log-probs
    }
  }
}

TEST(Generate, SamplingFrequencies) {
  // A fixed distribution; eos (7) has logit -inf so the 2000 draws are one sequence.
  const int64_t vocab = 8, eos = 7, bos = 6;
  std::vector<float> logits{2.0f, 1.5f, 1.5f, 0.3f, -0.5f, 1.0f, -1.0f, -kInf};
  struct Config {
    float temperature;
    int top_k;
    float top_p;
  };
  const int draws = 2000;
  for (Config c : {Config{1.0f, 0, 1.0f}, Config{0.7f, 4, 1.0f}, Config{1.3f, 0, 0.8f},
                   Config{0.5f, 3, 0.9f}, Config{1.0f, 2, 1.0f}, Config{3.0f, 0, 1.0f}}) {
    SearchOptions o;
    o.max_len = draws;
    o.bos = bos;
    o.eos = eos;
    o.sample = true;
    o.temperature = c.temperature;
    o.top_k = c.top_k;
    o.top_p = c.top_p;
    o.seed = 99;
    SearchResult out = sampleRun(fixedLogits(logits), vocab, {{bos}}, o);
    ASSERT_EQ(out.ids[0].size(), size_t(draws));
    std::vector<double> freq(vocab, 0.0), want(vocab, 0.0);
    for (int64_t t : out.ids[0])
      freq[t] += 1.0 / draws;
    for (auto &[v, p] : refSampleDistribution(logits, o))
      want[v] = p;
    std::string what = "T " + std::to_string(c.temperature) + " k " + std::to_string(c.top_k) +
                       " p " + std::to_string(c.top_p);
    for (int64_t v = 0; v < vocab; ++v) {
      if (want[v] == 0.0)
        EXPECT_EQ(freq[v], 0.0) << what << ": token " << v << " is not kept";
      else
        EXPECT_NEAR(freq[v], want[v], 0.035) << what << ": token " << v;
    }
  }
  // The hand-computed case: top_k 2 at T 1 keeps tokens 0 and 1 (1 beats 2 on the tie),
  // with probabilities 1 / (1 + e^-0.5) and e^-0.5 / (1 + e^-0.5).
  SearchOptions o;
  o.max_len = 1;
  o.eos = eos;
  o.bos = bos;
  o.sample = true;
  o.top_k = 2;
  auto p = refSampleDistribution(logits, o);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].first, 0);
  EXPECT_EQ(p[1].first, 1);
  EXPECT_NEAR(p[0].second, 1.0 / (1.0 + std::exp(-0.5)), 1e-9);
}

TEST(Generate, SamplingTopPMassReachedExactly) {
  // Tokens 0 and 1 have probability 1/2 each: top_p 0.5 is reached by token 0 alone (the
  // lower id first on the tie), so every draw is 0.
  const int64_t vocab = 4;
  std::vector<float> l{3.0f, 3.0f, -kInf, -kInf};
  SearchOptions o;
  o.max_len = 200;
  o.bos = 0;
  o.eos = 2;
  o.sample = true;
  o.top_p = 0.5f;
  o.seed = 3;
  SearchResult out = sampleRun(fixedLogits(l), vocab, {{0}}, o);
  EXPECT_EQ(out.ids[0], Tokens(200, 0));
  o.top_p = 0.5001f; // now both
  out = sampleRun(fixedLogits(l), vocab, {{0}}, o);
  EXPECT_GT(std::count(out.ids[0].begin(), out.ids[0].end(), 1), 60);
  EXPECT_GT(std::count(out.ids[0].begin(), out.ids[0].end(), 0), 60);
}

TEST(Generate, SamplingLargeVocab) {
  // Enough tokens that the sampler's incremental sort has to extend its sorted prefix.
  const int64_t vocab = 3000;
  std::vector<float> l(vocab);
  for (int64_t v = 0; v < vocab; ++v)
    l[v] = static_cast<float>(splitmix(v) >> 40) / 16777216.0f * 0.01f; // nearly flat
  l[kEos] = -kInf;
  SearchOptions o = options(200);
  o.sample = true;
  o.seed = 7;
  for (float top_p : {1.0f, 0.5f}) {
    o.top_p = top_p;
    SearchResult out = sampleRun(fixedLogits(l), vocab, {{kBos}}, o);
    Ref ref = refSample(fixedLogits(l), {kBos}, o, 0);
    expectMatches(out, {ref}, "large vocab");
  }
}

// -------------------------------------------------------------------------------------
// Options and errors.
// -------------------------------------------------------------------------------------
void expectInvalid(const SearchOptions &o, const Prompts &prompts, const std::string &message,
                   int64_t maxRows = 8, bool beamSearch = false) {
  const int64_t vocab = 16;
  FakeModel m(tableLogits(1, vocab, kEos, 0, 0, false), vocab, maxRows, prompts, o.eos);
  SearchResult out;
  out.ids = {{1, 2}};
  out.scores = {1.0f};
  Status e = beamSearch ? tfrun::rt::beamSearch(m, prompts, o, out) : tfrun::rt::search(m, prompts, o, out);
  EXPECT_EQ(codeOf(e), TFRUN_INVALID_ARGUMENT) << message;
  EXPECT_EQ(e.message(), message);
  EXPECT_EQ(m.stepCalls, 0);
  EXPECT_TRUE(out.ids.empty());
  EXPECT_TRUE(out.scores.empty());
}

TEST(Generate, InvalidOptions) {
  const Prompts one{{kBos}};
  SearchOptions o = options(4);
  o.beam = 0;
  expectInvalid(o, one, "beam width must be at least 1, got 0");
  o.beam = -3;
  expectInvalid(o, one, "beam width must be at least 1, got -3");

  o = options(0);
  expectInvalid(o, one, "max_len must be at least 1, got 0");
  o = options(-1);
  expectInvalid(o, one, "max_len must be at least 1, got -1");

  o = options(4);
  o.sample = true;
  o.temperature = 0.0f;
  expectInvalid(o, one, "temperature must be positive when sampling, got 0");
  o.temperature = -0.5f;
  expectInvalid(o, one, "temperature must be positive when sampling, got -0.5");
  o.temperature = std::nanf("");
  expectInvalid(o, one, "temperature must be positive when sampling, got nan");

  o = options(4);
  o.length_penalty = std::numeric_limits<float>::quiet_NaN();
  expectInvalid(o, one, "length_penalty must be finite, got nan");
  o.length_penalty = std::numeric_limits<float>::infinity();
  expectInvalid(o, one, "length_penalty must be finite, got inf");

  o = options(4);
  o.top_p = 0.0f;
  expectInvalid(o, one, "top_p must be in (0, 1], got 0");
  o.top_p = 1.5f;
  expectInvalid(o, one, "top_p must be in (0, 1], got 1.5");
  o.top_p = -0.25f;
  expectInvalid(o, one, "top_p must be in (0, 1], got -0.25");

  o = options(4);
  o.top_k = -1;
  expectInvalid(o, one, "top_k must be at least 0 (0 = off), got -1");

  o = options(4);
  o.min_p = 1.5f;
  expectInvalid(o, one, "min_p must be in [0, 1], got 1.5");
  o.min_p = -0.1f;
  expectInvalid(o, one, "min_p must be in [0, 1], got -0.1");
  o.min_p = std::nanf("");
  expectInvalid(o, one, "min_p must be in [0, 1], got nan");
  o = options(4);
  o.repetition_penalty = 0.0f;
  expectInvalid(o, one, "repetition_penalty must be positive, got 0");
  o.repetition_penalty = std::numeric_limits<float>::infinity();
  expectInvalid(o, one, "repetition_penalty must be positive, got inf");
  o.repetition_penalty = 1.2f;
  o.beam = 2;
  expectInvalid(o, one, "repetition_penalty 1.2 cannot be combined with beam search (beam "
                        "width 2); greedy search and sampling take it");

  o = options(4);
  o.beam = 2;
  o.sample = true;
  expectInvalid(o, one, "beam search (beam width 2) cannot be combined with sampling");
  o.beam = 1;
  expectInvalid(o, one, "beam search (beam width 1) cannot be combined with sampling", 8, true);

  o = options(4);
  expectInvalid(o, {{kBos}, {}}, "the prompt of batch item 1 is empty");

  o.beam = 3;
  expectInvalid(o, {{kBos}, {kBos}, {kBos}},
                "batch 3 x beam width 3 needs 9 rows, more than the model's maximum batch 8");
  o.beam = 1;
  expectInvalid(o, {{kBos}, {kBos}, {kBos}},
                "batch 3 x beam width 1 needs 3 rows, more than the model's maximum batch 2", 2);

  o = options(4);
  expectInvalid(o, {{kBos}, {kBos, 3, 16}},
                "token id 16 at position 2 of batch item 1's prompt is outside the vocabulary "
                "[0, 16)");
  expectInvalid(o, {{-1}}, "token id -1 at position 0 of batch item 0's prompt is outside the "
                           "vocabulary [0, 16)");
  o.bos = 16;
  expectInvalid(o, one, "bos id 16 is outside the vocabulary [0, 16)");
  o = options(4);
  o.eos = -1;
  expectInvalid(o, one, "eos id -1 is outside the vocabulary [0, 16)");
}

TEST(Generate, ValidOptionsAreAccepted) {
  // Temperature is only checked when sampling; top_k beyond the vocabulary is off.
  const int64_t vocab = 16;
  Prompts prompts{{kBos}};
  SearchOptions o = options(3);
  o.temperature = 0.0f;
  FakeModel m(tableLogits(1, vocab, kEos, 0, 0, false), vocab, 1, prompts, kEos);
  SearchResult out;
  EXPECT_TRUE(tfrun::rt::search(m, prompts, o, out).isOk());
  o = options(3);
  o.sample = true;
  o.top_k = 1000;
  o.top_p = 1.0f;
  FakeModel m2(tableLogits(1, vocab, kEos, 0, 0, false), vocab, 1, prompts, kEos);
  EXPECT_TRUE(tfrun::rt::search(m2, prompts, o, out).isOk());
}

TEST(Generate, EmptyBatch) {
  const int64_t vocab = 16;
  FakeModel m(tableLogits(1, vocab, kEos, 0, 0, false), vocab, 4, {}, kEos);
  SearchResult out;
  SearchOptions o = options(4);
  o.beam = 2;
  EXPECT_TRUE(tfrun::rt::search(m, {}, o, out).isOk());
  EXPECT_TRUE(out.ids.empty());
  EXPECT_EQ(m.stepCalls, 0);
}

TEST(Generate, ModelErrorsPropagateUnchanged) {
  const int64_t vocab = 16;
  LogitsFn fn = tableLogits(8, vocab, kEos, -50.0f, 0.0f, false);
  Prompts prompts{{kBos}, {kBos, 3, 4}};
  for (int beam : {1, 3}) {
    SearchOptions o = options(6);
    o.beam = beam;
    {
      FakeModel m(fn, vocab, 6, prompts, kEos);
      m.failStepAt = 3;
      SearchResult out;
      Status e = tfrun::rt::search(m, prompts, o, out);
      EXPECT_EQ(codeOf(e), TFRUN_INTERNAL);
      EXPECT_EQ(e.message(), "fake step failure");
      EXPECT_EQ(m.stepCalls, 3);
      EXPECT_TRUE(out.ids.empty());
    }
    {
      FakeModel m(fn, vocab, 6, prompts, kEos);
      m.failSelectAt = 1;
      SearchResult out;
      Status e = tfrun::rt::search(m, prompts, o, out);
      EXPECT_EQ(codeOf(e), TFRUN_INVALID_MODEL);
      EXPECT_EQ(e.message(), "fake select failure");
      EXPECT_TRUE(out.ids.empty());
    }
    {
      FakeModel m(fn, vocab, 6, prompts, kEos);
      m.throwStepAt = 2;
      SearchResult out;
      Status e = tfrun::rt::search(m, prompts, o, out);
      EXPECT_EQ(codeOf(e), TFRUN_OUT_OF_MEMORY);
      EXPECT_FALSE(e.message().empty());
      EXPECT_TRUE(out.ids.empty());
    }
  }
}

TEST(Generate, NullLogitsIsAnError) {
  struct NullModel : tfrun::rt::StepModel {
    int64_t vocabSize() const override { return 4; }
    int64_t maxRows() const override { return 1; }
    Status step(const int64_t *, int64_t, int64_t, const float **logits) override {
      *logits = nullptr;
      return {};
    }
    Status select(const int64_t *, int64_t) override { return {}; }
  } m;
  SearchResult out;
  Status e = tfrun::rt::search(m, {{kBos}}, options(2), out);
  EXPECT_EQ(codeOf(e), TFRUN_INTERNAL);
}

} // namespace
