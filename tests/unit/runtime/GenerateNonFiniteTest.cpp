// GoogleTest for the decoding loop on non-finite logits (docs/generation.md,
// "Non-finite logits"; issue 21): NaN or +inf in the logits a step chooses from
// stops generation with TFRUN_NON_FINITE and a message naming the step and the
// batch item; a row with nothing above -inf ends its item with score -inf. Greedy,
// beam search (2 and 4) and sampling, against a small fake StepModel whose logits
// are a function of a row's batch item and token history.
#include "runtime/generate.h"

#include "tfrun/tfrun.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using tfrun::rt::SearchOptions;
using tfrun::rt::SearchResult;
using tfrun::rt::Status;
using Tokens = std::vector<int64_t>;
using Prompts = std::vector<Tokens>;

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kVocab = 8, kBos = 1, kEos = 2;

/// Logits for batch item |item| after |hist| (its prompt, then its new tokens).
using LogitsFn = std::function<std::vector<float>(size_t item, const Tokens &hist)>;

/// Tracks each row's item and history through select(), as the real step model does.
class Model : public tfrun::rt::StepModel {
public:
  Model(LogitsFn fn, const Prompts &prompts) : fn_(std::move(fn)) {
    for (size_t b = 0; b < prompts.size(); ++b)
      rows_.push_back({b, {}});
  }
  int64_t vocabSize() const override { return kVocab; }
  int64_t maxRows() const override { return 16; }
  Status step(const int64_t *tokens, int64_t rows, int64_t, const float **logits) override {
    if (rows != static_cast<int64_t>(rows_.size()))
      return Status::internal("row count mismatch");
    buf_.clear();
    for (int64_t r = 0; r < rows; ++r) {
      rows_[r].hist.push_back(tokens[r]);
      std::vector<float> l = fn_(rows_[r].item, rows_[r].hist);
      buf_.insert(buf_.end(), l.begin(), l.end());
    }
    *logits = buf_.data();
    return {};
  }
  Status select(const int64_t *from, int64_t rows) override {
    std::vector<Row> next;
    for (int64_t r = 0; r < rows; ++r)
      next.push_back(rows_.at(from[r]));
    rows_.swap(next);
    return {};
  }

private:
  struct Row {
    size_t item;
    Tokens hist;
  };
  LogitsFn fn_;
  std::vector<Row> rows_;
  std::vector<float> buf_;
};

/// Token 3 best, eos worst but finite: a run that reaches max_len.
std::vector<float> plain() { return {0.0f, 0.5f, -4.0f, 2.0f, 1.0f, 0.25f, -1.0f, 0.75f}; }

SearchOptions options(int beam, bool sample, int maxLen = 5) {
  SearchOptions o;
  o.beam = beam;
  o.sample = sample;
  o.max_len = maxLen;
  o.bos = kBos;
  o.eos = kEos;
  o.seed = 7;
  return o;
}

struct Mode {
  const char *name;
  int beam;
  bool sample;
};
const Mode kModes[] = {{"greedy", 1, false}, {"beam 2", 2, false}, {"beam 4", 4, false},
                       {"sampling", 1, true}};

/// Item 1's logits at step |at| (hist holds the prompt [bos] and |at| new tokens) get
/// |bad| at tokens 4 and 6; everything else is plain().
LogitsFn badAt(int64_t at, float bad, size_t item = 1) {
  return [=](size_t b, const Tokens &hist) {
    std::vector<float> l = plain();
    if (b == item && static_cast<int64_t>(hist.size()) == at + 1)
      l[4] = l[6] = bad;
    return l;
  };
}

TEST(GenerateNonFinite, NaNLogitsStopWithTheStepAndItem) {
  for (const Mode &m : kModes) {
    Prompts prompts{{kBos}, {kBos}};
    Model model(badAt(3, kNaN), prompts);
    SearchResult out;
    Status e = tfrun::rt::search(model, prompts, options(m.beam, m.sample), out);
    EXPECT_EQ(static_cast<int>(e.code()), TFRUN_NON_FINITE) << m.name;
    // Beam search counts over the item's live hypotheses (each its own row).
    const int rows = m.beam == 1 ? 1 : m.beam;
    EXPECT_EQ(e.message(), "generate: step 3: the logits of batch item 1 hold " +
                               std::to_string(2 * rows) + " NaN and 0 +inf values")
        << m.name;
    EXPECT_TRUE(out.ids.empty() && out.scores.empty()) << m.name;
  }
}

TEST(GenerateNonFinite, PositiveInfinityStopsToo) {
  for (const Mode &m : kModes) {
    Prompts prompts{{kBos}};
    Model model(badAt(0, kInf, 0), prompts);
    SearchResult out;
    Status e = tfrun::rt::search(model, prompts, options(m.beam, m.sample), out);
    EXPECT_EQ(static_cast<int>(e.code()), TFRUN_NON_FINITE) << m.name;
    EXPECT_EQ(e.message(), "generate: step 0: the logits of batch item 0 hold 0 NaN and 2 +inf "
                           "values")
        << m.name;
  }
}

TEST(GenerateNonFinite, NegativeInfinityIsABannedToken) {
  // -inf at tokens 3 (the best) and 5: never chosen, and the scores stay finite.
  for (const Mode &m : kModes) {
    Prompts prompts{{kBos}, {kBos}};
    Model model(
        [](size_t, const Tokens &) {
          std::vector<float> l = plain();
          l[3] = l[5] = -kInf;
          return l;
        },
        prompts);
    SearchResult out;
    Status e = tfrun::rt::search(model, prompts, options(m.beam, m.sample), out);
    ASSERT_TRUE(e.isOk()) << m.name << ": " << e.message();
    for (size_t b = 0; b < 2; ++b) {
      EXPECT_TRUE(std::isfinite(out.scores[b])) << m.name;
      for (int64_t t : out.ids[b])
        EXPECT_TRUE(t != 3 && t != 5) << m.name;
    }
  }
}

TEST(GenerateNonFinite, AllNegativeInfinityEndsTheItem) {
  // Item 1 has nothing to choose from step 2 on (greedy, sampling: at step 2; beam
  // search: no candidate above -inf ever finishes). Item 0 is unaffected.
  for (const Mode &m : kModes) {
    for (int64_t at : {0, 2}) {
      Prompts prompts{{kBos}, {kBos}};
      Model model(
          [at](size_t b, const Tokens &hist) {
            std::vector<float> l = plain();
            if (b == 1 && static_cast<int64_t>(hist.size()) >= at + 1)
              l.assign(kVocab, -kInf);
            return l;
          },
          prompts);
      SearchResult out;
      Status e = tfrun::rt::search(model, prompts, options(m.beam, m.sample), out);
      ASSERT_TRUE(e.isOk()) << m.name << ": " << e.message();
      ASSERT_EQ(out.ids.size(), 2u);
      EXPECT_EQ(out.ids[0].size(), 5u) << m.name; // max_len
      EXPECT_TRUE(std::isfinite(out.scores[0])) << m.name;
      EXPECT_EQ(out.scores[1], -kInf) << m.name << " at " << at;
      // Greedy and sampling keep the tokens before the step; beam search has no
      // finished hypothesis, so none.
      const size_t want = m.beam == 1 ? static_cast<size_t>(at) : 0;
      EXPECT_EQ(out.ids[1].size(), want) << m.name << " at " << at;
    }
  }
}

TEST(GenerateNonFinite, AllNegativeInfinityAtMaxLenOne) {
  // The crash of issue 21: beam search's last step with no finished hypothesis.
  for (const Mode &m : kModes) {
    Prompts prompts{{kBos}};
    Model model([](size_t, const Tokens &) { return std::vector<float>(kVocab, -kInf); },
                prompts);
    SearchResult out;
    Status e = tfrun::rt::search(model, prompts, options(m.beam, m.sample, 1), out);
    ASSERT_TRUE(e.isOk()) << m.name << ": " << e.message();
    EXPECT_TRUE(out.ids[0].empty()) << m.name;
    EXPECT_EQ(out.scores[0], -kInf) << m.name;
  }
}

TEST(GenerateNonFinite, LogitsNotChosenFromAreNotChecked) {
  // Inside a longer prompt the logits are ignored, and a forced token ignores them.
  for (const Mode &m : kModes) {
    Prompts prompts{{kBos}, {kBos, 4, 5, 6}};
    Model model(
        [](size_t b, const Tokens &hist) {
          std::vector<float> l = plain();
          if (b == 1 && hist.size() < 4)
            l.assign(kVocab, kNaN);
          return l;
        },
        prompts);
    SearchResult out;
    Status e = tfrun::rt::search(model, prompts, options(m.beam, m.sample), out);
    EXPECT_TRUE(e.isOk()) << m.name << ": " << e.message();

    Prompts one{{kBos}};
    Model forced(badAt(0, kNaN, 0), one);
    SearchOptions o = options(m.beam, m.sample);
    o.forced_bos = 5;
    e = tfrun::rt::search(forced, one, o, out);
    ASSERT_TRUE(e.isOk()) << m.name << ": " << e.message();
    EXPECT_EQ(out.ids[0].at(0), 5) << m.name;
  }
}

TEST(GenerateNonFinite, HugeLogitsOverTinyTemperature) {
  // Finite logits whose quotient by the temperature overflows to +-inf: a defined
  // draw (the largest logit), no error.
  Prompts prompts{{kBos}};
  Model model(
      [](size_t, const Tokens &) {
        std::vector<float> l(kVocab, -3e38f);
        l[6] = 3e38f;
        return l;
      },
      prompts);
  SearchOptions o = options(1, true);
  o.temperature = 1e-3f;
  SearchResult out;
  Status e = tfrun::rt::search(model, prompts, o, out);
  ASSERT_TRUE(e.isOk()) << e.message();
  EXPECT_EQ(out.ids[0], (Tokens{6, 6, 6, 6, 6}));
}

} // namespace
