// GoogleTest for libtfrun through its C API: loading from a file and a buffer, the
// signature, running, one model shared by many sessions on many threads, and bad
// model bytes and bad inputs (error statuses, never crashes). Built twice by
// tests/CMakeLists.txt: normally, and with AddressSanitizer + UBSan over the
// loader and input binding sources.
#include "tfrun/tfrun.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifndef TFC_TEST_MODEL
#error "TFC_TEST_MODEL must name a model.bin compiled at build time"
#endif

namespace {

std::vector<uint8_t> readFile(const char *path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

struct StatusGuard {
  tfrun_status_t *s;
  ~StatusGuard() { tfrun_status_release(s); }
};

/// Runs the model on a fixed padded batch and returns the output.
std::vector<float> runOnce(tfrun_session_t *s, int64_t seq = 6) {
  std::vector<int64_t> src(2 * seq), tgt(2 * seq);
  for (int64_t i = 0; i < 2 * seq; ++i) {
    src[i] = (i % seq) < (i < seq ? seq : seq - 2) ? 1 + (i * 5) % 30 : 0;
    tgt[i] = (i % seq) < (i < seq ? seq - 1 : seq) ? 1 + (i * 3) % 30 : 0;
  }
  int64_t shape[2] = {2, seq};
  EXPECT_EQ(tfrun_session_set_input(s, "src", TFRUN_I64, shape, 2, src.data()), nullptr);
  EXPECT_EQ(tfrun_session_set_input(s, "tgt", TFRUN_I64, shape, 2, tgt.data()), nullptr);
  tfrun_status_t *st = tfrun_session_run(s);
  EXPECT_EQ(st, nullptr) << tfrun_status_message(st);
  tfrun_status_release(st);
  const float *data;
  const int64_t *dims;
  size_t rank;
  st = tfrun_session_get_output(s, "logits", &data, &dims, &rank);
  EXPECT_EQ(st, nullptr) << tfrun_status_message(st);
  tfrun_status_release(st);
  if (!data)
    return {};
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i)
    n *= dims[i];
  return std::vector<float>(data, data + n);
}

class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    StatusGuard g{tfrun_model_load_file(TFC_TEST_MODEL, &model)};
    ASSERT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  }
  void TearDown() override { tfrun_model_release(model); }
  tfrun_model_t *model = nullptr;
};

TEST_F(RuntimeTest, Signature) {
  ASSERT_EQ(tfrun_model_input_count(model), 2u);
  EXPECT_STREQ(tfrun_model_input_name(model, 0), "src");
  EXPECT_STREQ(tfrun_model_input_name(model, 1), "tgt");
  EXPECT_EQ(tfrun_model_input_name(model, 2), nullptr);
  ASSERT_EQ(tfrun_model_output_count(model), 1u);
  EXPECT_STREQ(tfrun_model_output_name(model, 0), "logits");
  EXPECT_STREQ(tfrun_model_name(model), "tutorial-floydhub");
  // Shapes: symbolic dims named, with the declared maxima (max_batch 4, max_len 16).
  tfrun_tensor_info_t ti;
  ASSERT_EQ(tfrun_model_input_info(model, 1, &ti), nullptr);
  EXPECT_STREQ(ti.name, "tgt");
  EXPECT_EQ(ti.dtype, TFRUN_I64);
  ASSERT_EQ(ti.rank, 2u);
  EXPECT_EQ(std::vector<int64_t>(ti.dims, ti.dims + 2), (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(std::vector<int64_t>(ti.max_dims, ti.max_dims + 2), (std::vector<int64_t>{4, 16}));
  EXPECT_STREQ(ti.dim_names[0], "batch");
  EXPECT_STREQ(ti.dim_names[1], "tgt_len");
  ASSERT_EQ(tfrun_model_output_info(model, 0, &ti), nullptr);
  EXPECT_STREQ(ti.name, "logits");
  EXPECT_EQ(ti.dtype, TFRUN_F32);
  ASSERT_EQ(ti.rank, 3u);
  EXPECT_EQ(ti.dims[2], 40);
  EXPECT_STREQ(ti.dim_names[2], "");
  StatusGuard bad{tfrun_model_input_info(model, 2, &ti)};
  EXPECT_STREQ(tfrun_status_message(bad.s), "input 2 of 2");
}

TEST_F(RuntimeTest, RunsAndIsDeterministic) {
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  std::vector<float> a = runOnce(s), b = runOnce(s);
  ASSERT_EQ(a.size(), 2u * 6 * 40);
  EXPECT_EQ(a, b);
  for (float v : a)
    ASSERT_TRUE(std::isfinite(v));
  tfrun_session_release(s);
}

TEST_F(RuntimeTest, LoadFromBufferGivesTheSameResult) {
  std::vector<uint8_t> bytes = readFile(TFC_TEST_MODEL);
  tfrun_model_t *m2 = nullptr;
  ASSERT_EQ(tfrun_model_load_buffer(bytes.data(), bytes.size(), &m2), nullptr);
  tfrun_session_t *s1 = nullptr, *s2 = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s1), nullptr);
  ASSERT_EQ(tfrun_session_create(m2, 1, &s2), nullptr);
  EXPECT_EQ(runOnce(s1), runOnce(s2));
  tfrun_session_release(s1);
  tfrun_session_release(s2);
  tfrun_model_release(m2);
}

// One model, many sessions on many threads: every run gives the same bits.
TEST_F(RuntimeTest, SharedModelAcrossThreads) {
  tfrun_session_t *ref = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &ref), nullptr);
  std::vector<float> expected = runOnce(ref);
  tfrun_session_release(ref);
  constexpr int kThreads = 4, kRuns = 5;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      tfrun_session_t *s = nullptr;
      if (tfrun_session_create(model, 1, &s)) {
        mismatches[t] = kRuns;
        return;
      }
      for (int r = 0; r < kRuns; ++r)
        if (runOnce(s) != expected)
          ++mismatches[t];
      tfrun_session_release(s);
    });
  for (auto &th : pool)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// Every truncation and many byte flips of the file are rejected cleanly.
TEST_F(RuntimeTest, CorruptBytesAreRejected) {
  std::vector<uint8_t> bytes = readFile(TFC_TEST_MODEL);
  ASSERT_GT(bytes.size(), 256u);
  for (size_t n : {size_t(0), size_t(8), size_t(63), size_t(64), size_t(100), bytes.size() / 2,
                   bytes.size() - 1}) {
    tfrun_model_t *m = nullptr;
    StatusGuard g{tfrun_model_load_buffer(bytes.data(), n, &m)};
    EXPECT_NE(g.s, nullptr) << "prefix " << n;
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_MODEL) << tfrun_status_message(g.s);
    EXPECT_EQ(m, nullptr);
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> c = bytes;
    c[rng() % c.size()] ^= (uint8_t)(1 + rng() % 255);
    tfrun_model_t *m = nullptr;
    StatusGuard g{tfrun_model_load_buffer(c.data(), c.size(), &m)};
    EXPECT_NE(g.s, nullptr);
    tfrun_model_release(m);
  }
}

TEST_F(RuntimeTest, BadInputs) {
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  int64_t ok[2] = {2, 4}, tooLong[2] = {2, 999}, empty[2] = {2, 0};
  std::vector<int64_t> ids(8, 1), big(2 * 999, 1);
  {
    StatusGuard g{tfrun_session_set_input(s, "nope", TFRUN_I64, ok, 2, ids.data())};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(tfrun_status_message(g.s), "unknown input 'nope' (inputs: src, tgt)");
  }
  {
    StatusGuard g{tfrun_session_set_input(s, "src", TFRUN_F32, ok, 2, ids.data())};
    EXPECT_STREQ(tfrun_status_message(g.s),
                 "input 'src' takes token ids (i64 or i32), got f32");
  }
  {
    StatusGuard g{tfrun_session_set_input(s, "src", TFRUN_I64, ok, 1, ids.data())};
    EXPECT_STREQ(tfrun_status_message(g.s), "input 'src' must have rank 2, got 1");
  }
  {
    StatusGuard g{tfrun_session_set_input(s, "src", TFRUN_I64, tooLong, 2, big.data())};
    EXPECT_STREQ(tfrun_status_message(g.s),
                 "input 'src' dim 1 is 999, beyond the declared maximum src_len = 16");
  }
  {
    StatusGuard g{tfrun_session_set_input(s, "src", TFRUN_I64, empty, 2, ids.data())};
    EXPECT_STREQ(tfrun_status_message(g.s), "input 'src' has an empty dim 1 (0)");
  }
  {
    StatusGuard g{tfrun_session_run(s)};
    EXPECT_STREQ(tfrun_status_message(g.s), "input 'src' is not bound");
  }
  {
    std::vector<int32_t> bad(8, 40);
    ASSERT_EQ(tfrun_session_set_input(s, "src", TFRUN_I32, ok, 2, bad.data()), nullptr);
    ASSERT_EQ(tfrun_session_set_input(s, "tgt", TFRUN_I64, ok, 2, ids.data()), nullptr);
    StatusGuard g{tfrun_session_run(s)};
    EXPECT_STREQ(tfrun_status_message(g.s), "input 'src': token id 40 is out of range [0, 40)");
    const float *d;
    const int64_t *sh;
    size_t r;
    StatusGuard g2{tfrun_session_get_output(s, "logits", &d, &sh, &r)};
    EXPECT_STREQ(tfrun_status_message(g2.s), "no successful run yet");
  }
  {
    // An enum value no tfrun_dtype_t has is a bad argument, not undefined behaviour.
    int32_t raw = 77;
    tfrun_dtype_t bogus;
    std::memcpy(&bogus, &raw, sizeof bogus);
    StatusGuard g{tfrun_session_set_input(s, "src", bogus, ok, 2, ids.data())};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(tfrun_status_message(g.s), "input 'src' takes token ids (i64 or i32), got dtype 77");
  }
  {
    tfrun_model_t *m = nullptr;
    StatusGuard g{tfrun_model_load_buffer(nullptr, 100, &m)};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(tfrun_status_message(g.s), "data is null but size is 100");
  }
  EXPECT_EQ(tfrun_status_code(nullptr), TFRUN_OK);
  tfrun_session_release(s);
  tfrun_session_release(nullptr);
  tfrun_model_release(nullptr);
}

TEST(RuntimeLoad, MissingFile) {
  tfrun_model_t *m = nullptr;
  StatusGuard g{tfrun_model_load_file("/nonexistent/model.bin", &m)};
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_IO_ERROR);
  EXPECT_EQ(m, nullptr);
}

} // namespace

#include "tfrun/tfrun.hpp"

namespace {

TEST(RuntimeCpp, WrapperRunsAndThrowsOnBadInput) {
  tfrun::Model model(TFC_TEST_MODEL);
  EXPECT_EQ(model.inputNames(), (std::vector<std::string>{"src", "tgt"}));
  tfrun::Session s(model, 1);
  std::vector<int64_t> ids = {5, 6, 7, 0, 8, 9, 0, 0};
  s.setInput("src", ids, 2, 4);
  s.setInput("tgt", ids, 2, 4);
  s.run();
  tfrun::Tensor out = s.output("logits");
  EXPECT_EQ(out.shape, (std::vector<int64_t>{2, 4, 40}));
  try {
    s.setInput("nope", ids, 2, 4);
    FAIL() << "expected tfrun::Error";
  } catch (const tfrun::Error &e) {
    EXPECT_EQ(e.code(), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "unknown input 'nope' (inputs: src, tgt)");
  }
  EXPECT_THROW(tfrun::Model("/nonexistent.bin"), tfrun::Error);
}

} // namespace

// Generation: greedy decoding with the derived decode_step and its KV cache
// gives the tokens of the plain loop that re-runs @forward over the whole
// prefix at every step (the tutorial's translate loop), per source.
/// The arena follows the input sizes (docs/c-api.md, "Memory"): a short run
/// plans a small arena, a longer one grows it, and a short run after that
/// reuses the grown arena and gives the same numbers as before.
TEST_F(RuntimeTest, ArenaFollowsTheInputSizes) {
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  tfrun_memory_info_t mi{};
  ASSERT_EQ(tfrun_session_memory_info(s, &mi), nullptr);
  EXPECT_EQ(mi.arena_bytes, 0u); // nothing before the first run
  EXPECT_GT(mi.weights_bytes, 0u);
  const uint64_t declared = mi.declared_arena_bytes;
  const std::vector<float> small = runOnce(s, 3);
  ASSERT_EQ(tfrun_session_memory_info(s, &mi), nullptr);
  const uint64_t a1 = mi.arena_bytes;
  EXPECT_GT(a1, 0u);
  EXPECT_LT(a1 * 4, declared) << "a 2 x 3 run planned for the declared 4 x 16";
  runOnce(s, 16);
  ASSERT_EQ(tfrun_session_memory_info(s, &mi), nullptr);
  const uint64_t a2 = mi.arena_bytes;
  EXPECT_GT(a2, a1);
  EXPECT_EQ(runOnce(s, 3), small);
  ASSERT_EQ(tfrun_session_memory_info(s, &mi), nullptr);
  EXPECT_EQ(mi.arena_bytes, a2); // the largest so far
  tfrun_session_release(s);
  StatusGuard g{tfrun_session_memory_info(nullptr, &mi)};
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
}

/// The KV cache holds the request (rows x (prompt + new tokens - 1)
/// positions), not the declared maxima, and a session whose cache was sized
/// for a smaller request gives the same tokens as a fresh one.
TEST_F(RuntimeTest, KvCacheIsSizedToTheRequest) {
  // floydhub-small: 1 decoder layer (a K and a V cache), d_model 32, f32;
  // max_batch 4, max_len 16.
  auto generate = [&](tfrun_session_t *s, int64_t batch, int beam, int maxLen) {
    std::vector<int64_t> src = {3, 14, 15, 9, 26, /**/ 5, 35, 8, 0, 0};
    int64_t shape[2] = {batch, 5};
    EXPECT_EQ(tfrun_session_set_input(s, "src", TFRUN_I64, shape, 2, src.data()), nullptr);
    tfrun_generate_options_t o;
    tfrun_generate_options_init(&o);
    o.max_len = maxLen;
    o.beam_width = beam;
    StatusGuard g{tfrun_session_generate(s, &o)};
    EXPECT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
    std::vector<std::vector<int64_t>> out;
    for (size_t b = 0; b < tfrun_session_generated_count(s); ++b) {
      const int64_t *ids;
      size_t len;
      float score;
      EXPECT_EQ(tfrun_session_get_generated(s, b, &ids, &len, &score), nullptr);
      out.emplace_back(ids, ids + len);
    }
    tfrun_memory_info_t mi{};
    EXPECT_EQ(tfrun_session_memory_info(s, &mi), nullptr);
    EXPECT_EQ(mi.declared_kv_cache_bytes, 2u * 4 * 16 * 32 * 4);
    return std::make_pair(out, mi.kv_cache_bytes);
  };
  tfrun_session_t *s = nullptr, *fresh = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  ASSERT_EQ(tfrun_session_create(model, 1, &fresh), nullptr);
  // 1 row, 1 + 3 - 1 positions: 2 caches x 1 x 3 x 32 floats.
  EXPECT_EQ(generate(s, 1, 1, 3).second, 2u * 1 * 3 * 32 * 4);
  // 2 sources x 2 beams, 5 positions.
  auto grown = generate(s, 2, 2, 5);
  EXPECT_EQ(grown.second, 2u * 4 * 5 * 32 * 4);
  EXPECT_EQ(grown.first, generate(fresh, 2, 2, 5).first);
  tfrun_session_release(s);
  tfrun_session_release(fresh);
}

TEST_F(RuntimeTest, GreedyGenerateEqualsForwardLoop) {
  ASSERT_EQ(tfrun_model_can_generate(model), 1);
  int64_t bos, eos, pad, cache;
  tfrun_model_generation_info(model, &bos, &eos, &pad, &cache);
  EXPECT_EQ(bos, 1);
  EXPECT_EQ(eos, 2);
  EXPECT_EQ(pad, 0);
  EXPECT_EQ(cache, 16);
  const int64_t S = 5;
  std::vector<int64_t> src = {3, 14, 15, 9, 26, /**/ 5, 35, 8, 0, 0};
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  int64_t shape[2] = {2, S};
  ASSERT_EQ(tfrun_session_set_input(s, "src", TFRUN_I64, shape, 2, src.data()), nullptr);
  tfrun_generate_options_t o;
  tfrun_generate_options_init(&o);
  o.max_len = 10;
  StatusGuard g{tfrun_session_generate(s, &o)};
  ASSERT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  ASSERT_EQ(tfrun_session_generated_count(s), 2u);
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t *ids;
    size_t len;
    float score;
    ASSERT_EQ(tfrun_session_get_generated(s, b, &ids, &len, &score), nullptr);
    std::vector<int64_t> got(ids, ids + len), want;
    // The recompute loop, on this source alone.
    tfrun_session_t *r = nullptr;
    ASSERT_EQ(tfrun_session_create(model, 1, &r), nullptr);
    int64_t one[2] = {1, S};
    ASSERT_EQ(tfrun_session_set_input(r, "src", TFRUN_I64, one, 2, src.data() + b * S), nullptr);
    std::vector<int64_t> tgt = {bos};
    double logp = 0, minMargin = INFINITY;
    for (int step = 0; step < o.max_len; ++step) {
      int64_t ts[2] = {1, (int64_t)tgt.size()};
      ASSERT_EQ(tfrun_session_set_input(r, "tgt", TFRUN_I64, ts, 2, tgt.data()), nullptr);
      ASSERT_EQ(tfrun_session_run(r), nullptr);
      const float *logits;
      const int64_t *dims;
      size_t rank;
      ASSERT_EQ(tfrun_session_get_output(r, "logits", &logits, &dims, &rank), nullptr);
      const float *last = logits + (tgt.size() - 1) * 40;
      int64_t best = std::max_element(last, last + 40) - last;
      // Alone vs in a batch of 2 the tokens are equal only away from near-ties
      // (docs/precision.md, "Batch composition"): this input has none.
      float second = -INFINITY;
      for (int v = 0; v < 40; ++v)
        if (v != best)
          second = std::max(second, last[v]);
      minMargin = std::min(minMargin, (double)(last[best] - second));
      double mx = *std::max_element(last, last + 40), sum = 0;
      for (int v = 0; v < 40; ++v)
        sum += std::exp((double)last[v] - mx);
      logp += last[best] - mx - std::log(sum);
      if (best == eos)
        break;
      want.push_back(best);
      tgt.push_back(best);
      // @forward masks pad keys of the target (padding_causal); decode_step, like
      // the tutorial's loop, never does. Past a generated pad the two differ by design.
      if (best == pad)
        break;
    }
    tfrun_session_release(r);
    bool full = want.empty() || want.back() != pad;
    if (!full)
      got.resize(std::min(got.size(), want.size()));
    ASSERT_GT(minMargin, 1e-3) << "source " << b << ": a near-tie, tokens may differ";
    EXPECT_EQ(got, want) << "source " << b;
    EXPECT_GE(want.size(), 3u) << "source " << b << ": too few tokens compared";
    if (full)
      EXPECT_NEAR(score, logp, 1e-4) << "source " << b;
  }
  tfrun_session_release(s);
}

// tfrun_session_clear_inputs: a bound input stays bound across runs until it.
TEST_F(RuntimeTest, ClearInputsUnbinds) {
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  std::vector<float> first = runOnce(s);
  {
    StatusGuard again{tfrun_session_run(s)}; // the same inputs, still bound
    EXPECT_EQ(again.s, nullptr);
  }
  tfrun_session_clear_inputs(s);
  StatusGuard g{tfrun_session_run(s)};
  ASSERT_NE(g.s, nullptr);
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
  EXPECT_STREQ(tfrun_status_message(g.s), "input 'src' is not bound");
  EXPECT_EQ(runOnce(s), first);
  tfrun_session_clear_inputs(nullptr);
  tfrun_session_release(s);
}

// tfrun_session_generate_stream: greedy streams each item's tokens in order
// with their log-probabilities, summing to the score; a nonzero return stops
// that item only; beam search streams the final tokens of each item.
TEST_F(RuntimeTest, GenerateStreamsTokens) {
  std::vector<int64_t> src = {3, 14, 15, 9, 26, /**/ 5, 35, 8, 0, 0};
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create(model, 1, &s), nullptr);
  int64_t shape[2] = {2, 5};
  ASSERT_EQ(tfrun_session_set_input(s, "src", TFRUN_I64, shape, 2, src.data()), nullptr);
  struct Seen {
    std::vector<std::vector<int64_t>> ids{2};
    std::vector<double> logp = std::vector<double>(2, 0.0);
    int64_t stopItemAfter = -1; // stop item 0 after this many tokens
    bool inOrder = true;
  };
  auto cb = [](const tfrun_token_t *t, void *user) -> int {
    Seen &seen = *static_cast<Seen *>(user);
    auto &ids = seen.ids.at(t->batch_index);
    seen.inOrder &= t->step == ids.size();
    ids.push_back(t->token_id);
    seen.logp[t->batch_index] += t->log_prob;
    return t->batch_index == 0 && (int64_t)ids.size() == seen.stopItemAfter;
  };
  auto generated = [&](size_t b, float *score) {
    const int64_t *ids;
    size_t len;
    EXPECT_EQ(tfrun_session_get_generated(s, b, &ids, &len, score), nullptr);
    return std::vector<int64_t>(ids, ids + len);
  };
  tfrun_generate_options_t o;
  tfrun_generate_options_init(&o);
  o.max_len = 10;
  Seen greedy;
  {
    StatusGuard g{tfrun_session_generate_stream(s, &o, cb, &greedy)};
    ASSERT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  }
  EXPECT_TRUE(greedy.inOrder);
  for (size_t b = 0; b < 2; ++b) {
    float score;
    EXPECT_EQ(greedy.ids[b], generated(b, &score)) << "item " << b;
    EXPECT_GE(greedy.ids[b].size(), 3u);
    // The streamed log-probabilities leave out eos's, which the score has.
    EXPECT_GE(greedy.logp[b], score - 1e-5) << "item " << b;
  }
  // Stopping item 0 after 2 tokens leaves item 1 as it was.
  Seen stopped;
  stopped.stopItemAfter = 2;
  {
    StatusGuard g{tfrun_session_generate_stream(s, &o, cb, &stopped)};
    ASSERT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  }
  float score;
  EXPECT_EQ(generated(0, &score),
            std::vector<int64_t>(greedy.ids[0].begin(), greedy.ids[0].begin() + 2));
  EXPECT_EQ(stopped.ids[0].size(), 2u);
  EXPECT_EQ(generated(1, &score), greedy.ids[1]);
  // Beam search: each item's final tokens, NaN log-probabilities.
  o.beam_width = 2;
  Seen beam;
  {
    StatusGuard g{tfrun_session_generate_stream(s, &o, cb, &beam)};
    ASSERT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  }
  EXPECT_TRUE(beam.inOrder);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_EQ(beam.ids[b], generated(b, &score)) << "item " << b;
    EXPECT_TRUE(std::isnan(beam.logp[b]));
  }
  // A null callback is tfrun_session_generate; a null session or options is an error.
  {
    StatusGuard g{tfrun_session_generate_stream(s, &o, nullptr, nullptr)};
    EXPECT_EQ(g.s, nullptr);
  }
  StatusGuard bad{tfrun_session_generate_stream(nullptr, &o, cb, &beam)};
  ASSERT_NE(bad.s, nullptr);
  EXPECT_STREQ(tfrun_status_message(bad.s), "null argument to tfrun_session_generate_stream");
  tfrun_session_release(s);
}

// Generation through the C++ wrapper, on several threads sharing one model:
// the same tokens everywhere; bad options throw with the runtime's message.
TEST(RuntimeCpp, GenerateOnThreadsAndErrors) {
  tfrun::Model m(TFC_TEST_MODEL);
  std::vector<int64_t> src = {3, 14, 15, 9, 26, 5, 35, 8, 0, 0};
  auto run = [&](int beam) {
    tfrun::Session s(m, 1);
    s.setInput("src", src, 2, 5);
    return s.generate(beam, 8, 0.6f);
  };
  tfrun::Session::Generated ref = run(2); // 2 sources x 2 beams = max_batch 4
  ASSERT_EQ(ref.ids.size(), 2u);
  std::vector<int> mismatches(3, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < 3; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) {
        tfrun::Session::Generated g = run(2);
        mismatches[t] += g.ids != ref.ids || g.scores != ref.scores;
      }
    });
  for (auto &th : pool)
    th.join();
  for (int t = 0; t < 3; ++t)
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  tfrun::Session s(m, 1);
  try {
    s.generate();
    FAIL() << "generate without a source did not throw";
  } catch (const tfrun::Error &e) {
    EXPECT_STREQ(e.what(), "input 'src' is not bound");
  }
  s.setInput("src", src, 2, 5);
  try {
    s.generate(-1); // 0 is the model's num_beams
    FAIL() << "beam -1 did not throw";
  } catch (const tfrun::Error &e) {
    EXPECT_EQ(e.code(), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "beam width must be at least 1, got -1");
  }
}
