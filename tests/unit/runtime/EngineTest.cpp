//===- EngineTest.cpp - the generation engine through the C API -----------===//
//
// Continuous batching (runtime/engine.h, docs/generation.md "The engine"):
// each request's tokens equal those of the same request on a session of its
// own, whatever shares its batch (greedy, beam and sampling, decoder-only and
// encoder-decoder); cancellation, a full queue and bad requests give one
// clear status each; a KV pool too small for every running row preempts and
// recomputes; and every KV block is back in the pool at the end.
// The stress test submits and cancels from several threads for a bounded time.
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if !defined(TFC_ENGINE_GPT2) || !defined(TFC_ENGINE_FLOYDHUB) || !defined(TFC_ENGINE_OLD_MODEL)
#error "the engine tests need their model.bin paths"
#endif

namespace {

struct StatusGuard {
  tfrun_status_t *s;
  ~StatusGuard() { tfrun_status_release(s); }
  std::string text() const { return s ? tfrun_status_message(s) : ""; }
};

struct ModelGuard {
  tfrun_model_t *m = nullptr;
  explicit ModelGuard(const char *path) {
    StatusGuard g{tfrun_model_load_file(path, &m)};
    EXPECT_EQ(g.s, nullptr) << g.text();
  }
  ~ModelGuard() { tfrun_model_release(m); }
};

/// TFC_ENGINE_TEST_DEVICE=cuda runs every session and engine on the GPU
/// (scripts/gpu-check/run.sh); the default is the CPU.
int32_t testDevice() {
  const char *d = std::getenv("TFC_ENGINE_TEST_DEVICE");
  return d && std::string(d) == "cuda" ? TFRUN_DEVICE_CUDA : TFRUN_DEVICE_CPU;
}

struct EngineGuard {
  tfrun_engine_t *e = nullptr;
  int64_t blocks = 0; ///< the KV pool's
  EngineGuard(const tfrun_model_t *m, int rows, int queue = 0, int blockSize = 0,
              int64_t kvBytes = 0, int32_t prefixCaching = 0) {
    tfrun_engine_options_t o;
    tfrun_engine_options_init(&o);
    o.kv_block_size = blockSize;
    o.prefix_caching = prefixCaching;
    o.kv_cache_bytes = kvBytes;
    // TFC_ENGINE_TEST_THREADS=1 under ThreadSanitizer (libgomp is not instrumented).
    const char *t = std::getenv("TFC_ENGINE_TEST_THREADS");
    o.session.num_threads = t && std::atoi(t) > 0 ? std::atoi(t) : 2;
    o.session.device = testDevice();
    o.max_rows = rows;
    o.max_queue = queue;
    StatusGuard g{tfrun_engine_create(m, &o, &e)};
    EXPECT_EQ(g.s, nullptr) << g.text();
    tfrun_engine_stats_t st;
    if (e && !tfrun_engine_stats(e, &st))
      blocks = st.kv_blocks_free;
  }
  ~EngineGuard() { tfrun_engine_destroy(e); }
};

/// A request: one input [1, n] (or [b, n]) and its options.
struct Request {
  std::string input;
  std::vector<int64_t> ids;
  int64_t batch = 1;
  tfrun_generate_options_t opt;
};

struct Outcome {
  std::vector<std::vector<int64_t>> ids;
  std::vector<float> scores;
};

Outcome alone(const tfrun_model_t *m, const Request &r) {
  tfrun_session_options_t so;
  tfrun_session_options_init(&so);
  so.num_threads = 1;
  so.device = testDevice();
  tfrun_session_t *s = nullptr;
  EXPECT_EQ(tfrun_session_create_with_options(m, &so, &s), nullptr);
  const int64_t shape[2] = {r.batch, static_cast<int64_t>(r.ids.size()) / r.batch};
  EXPECT_EQ(tfrun_session_set_input(s, r.input.c_str(), TFRUN_I64, shape, 2, r.ids.data()),
            nullptr);
  StatusGuard g{tfrun_session_generate(s, &r.opt)};
  EXPECT_EQ(g.s, nullptr) << g.text();
  Outcome out;
  for (size_t i = 0; i < tfrun_session_generated_count(s); ++i) {
    const int64_t *ids = nullptr;
    size_t len = 0;
    float score = 0;
    EXPECT_EQ(tfrun_session_get_generated(s, i, &ids, &len, &score), nullptr);
    out.ids.emplace_back(ids, ids + len);
    out.scores.push_back(score);
  }
  tfrun_session_release(s);
  return out;
}

/// Each request's outcome alone, in a session of its own.
std::vector<Outcome> aloneEach(const tfrun_model_t *m, const std::vector<Request> &rs) {
  std::vector<Outcome> want;
  for (const Request &r : rs)
    want.push_back(alone(m, r));
  return want;
}

tfrun_status_t *submit(tfrun_engine_t *e, const Request &r, uint64_t *id,
                       tfrun_token_callback_t cb = nullptr, void *user = nullptr) {
  const int64_t shape[2] = {r.batch, static_cast<int64_t>(r.ids.size()) / r.batch};
  tfrun_input_t in{r.input.c_str(), TFRUN_I64, shape, 2, r.ids.data()};
  return tfrun_engine_submit(e, &in, 1, &r.opt, cb, user, id);
}

Outcome collect(tfrun_engine_t *e, uint64_t id) {
  int done = 0;
  StatusGuard g{tfrun_engine_wait(e, id, 60000, &done)};
  EXPECT_EQ(done, 1);
  EXPECT_EQ(g.s, nullptr) << g.text();
  Outcome out;
  size_t n = 0;
  EXPECT_EQ(tfrun_engine_generated_count(e, id, &n), nullptr);
  for (size_t i = 0; i < n; ++i) {
    const int64_t *ids = nullptr;
    size_t len = 0;
    float score = 0;
    EXPECT_EQ(tfrun_engine_get_generated(e, id, i, &ids, &len, &score), nullptr);
    out.ids.emplace_back(ids, ids + len);
    out.scores.push_back(score);
  }
  EXPECT_EQ(tfrun_engine_release(e, id), nullptr);
  return out;
}

void expectSame(const Outcome &got, const Outcome &want, const std::string &what) {
  ASSERT_EQ(got.ids.size(), want.ids.size()) << what;
  for (size_t i = 0; i < want.ids.size(); ++i) {
    EXPECT_EQ(got.ids[i], want.ids[i]) << what << ", item " << i;
    EXPECT_NEAR(got.scores[i], want.scores[i], 1e-5) << what << ", item " << i;
  }
}

/// Nothing runs or waits, and every KV block is back in the pool.
void expectPoolFull(const EngineGuard &e) {
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  EXPECT_EQ(st.kv_blocks_used, 0);
  EXPECT_EQ(st.kv_blocks_free, e.blocks);
  EXPECT_EQ(st.memory_blocks_used, 0); // encoder memory too
  EXPECT_EQ(st.requests_running, 0);
  EXPECT_EQ(st.requests_queued, 0);
}

/// After |requests| requests on a pool too small for all their rows: every
/// one finished, some were preempted, and the pool is whole again.
void expectWholeAfterPreempting(const EngineGuard &e, size_t requests) {
  expectPoolFull(e);
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  EXPECT_EQ(st.requests_finished, requests);
  EXPECT_GT(st.requests_preempted, 0u);
}

/// Bytes per KV block of an engine of |rows| rows in blocks of |blockSize|
/// positions, to size a pool by blocks.
int64_t kvBlockBytes(const tfrun_model_t *m, int rows, int blockSize) {
  EngineGuard probe(m, rows, 0, blockSize);
  tfrun_engine_stats_t st;
  EXPECT_EQ(tfrun_engine_stats(probe.e, &st), nullptr);
  EXPECT_EQ(st.kv_block_positions, blockSize);
  EXPECT_GT(st.kv_block_bytes, 0);
  return st.kv_block_bytes;
}

/// Submits every request at once, then checks each one's result against |want|
/// (the same request alone).
/// Holds the engine at a request's first token until every request is queued.
///
/// The engine steps only when every running request has posted its step, so
/// while the first request's thread waits in its token callback no step runs,
/// and the others queue and are admitted as they fit. submitAndCompare
/// submits them once the first request's prefill has run (and published its
/// blocks), so the schedule is the same on every machine however fast the
/// submitting thread is. Without it a test of preemption depended on the
/// first requests' steps against the later submits, and on a loaded CI
/// machine failed to preempt.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool reached = false, open = false;
  static int wait(const tfrun_token_t *, void *user) {
    Gate &g = *static_cast<Gate *>(user);
    std::unique_lock<std::mutex> lk(g.mu);
    g.reached = true;
    g.cv.notify_all();
    g.cv.wait(lk, [&] { return g.open; });
    return 0;
  }
  bool awaitReached() {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(60), [&] { return reached; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu);
      open = true;
    }
    cv.notify_all();
  }
};

/// Submits the first of |rs| (greedy or sampling: its callback runs at every
/// token), then the others while it holds the engine at its first token, and
/// checks each against |want|.
void submitAndCompare(const EngineGuard &e, const std::vector<Request> &rs,
                      const std::vector<Outcome> &want) {
  ASSERT_FALSE(rs.empty());
  ASSERT_EQ(rs[0].opt.beam_width, 1) << "the gate needs a first request that streams";
  Gate gate;
  std::vector<uint64_t> ids(rs.size());
  {
    StatusGuard g{submit(e.e, rs[0], &ids[0], &Gate::wait, &gate)};
    ASSERT_EQ(g.s, nullptr) << g.text();
  }
  const bool reached = gate.awaitReached();
  for (size_t i = 1; i < rs.size() && reached; ++i) {
    StatusGuard g{submit(e.e, rs[i], &ids[i])};
    if (g.s)
      gate.release();
    ASSERT_EQ(g.s, nullptr) << g.text();
  }
  gate.release();
  ASSERT_TRUE(reached) << "request 0 streamed no token in 60 s";
  for (size_t i = 0; i < rs.size(); ++i)
    expectSame(collect(e.e, ids[i]), want[i], "request " + std::to_string(i));
}

/// Decoder-only requests: prompts of 1 to 20 tokens, greedy, beam 3 and sampling.
std::vector<Request> gpt2Requests(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.input = "tokens";
    const int len = 1 + static_cast<int>(rng() % 20);
    for (int t = 0; t < len; ++t)
      r.ids.push_back(3 + static_cast<int64_t>(rng() % 47));
    tfrun_generate_options_init(&r.opt);
    r.opt.max_len = 4 + static_cast<int32_t>(rng() % 12);
    switch (i % 3) {
    case 0:
      r.opt.beam_width = 1;
      break;
    case 1:
      r.opt.beam_width = 3;
      r.opt.length_penalty = 0.8f;
      break;
    default:
      r.opt.beam_width = 1;
      r.opt.sample = 1;
      r.opt.top_k = 10;
      r.opt.seed = 100 + i;
      break;
    }
    rs.push_back(std::move(r));
  }
  return rs;
}

TEST(Engine, DecoderOnlyEqualsAlone) {
  ModelGuard m(TFC_ENGINE_GPT2);
  const std::vector<Request> rs = gpt2Requests(24, 7);
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  // 10 rows: beam requests take 3, so the queue fills and drains as requests
  // end; later submits join a running batch.
  EngineGuard e(m.m, 10);
  std::vector<uint64_t> ids(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    StatusGuard g{submit(e.e, rs[i], &ids[i])};
    ASSERT_EQ(g.s, nullptr) << g.text();
    if (i == 12)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < rs.size(); ++i)
    expectSame(collect(e.e, ids[i]), want[i], "request " + std::to_string(i));
  expectPoolFull(e);
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  EXPECT_EQ(st.requests_finished, rs.size());
  // Requests shared steps: more rows were decoded than steps were run.
  EXPECT_GT(st.tokens_generated, st.steps);
}

TEST(Engine, EncoderDecoderEqualsAlone) {
  ModelGuard m(TFC_ENGINE_FLOYDHUB);
  std::mt19937 rng(3);
  std::vector<Request> rs;
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.input = "src";
    // A batch of 2 sources (padded) or one, of 2 to 15 tokens.
    r.batch = i % 4 == 0 ? 2 : 1;
    const int len = 2 + static_cast<int>(rng() % 14);
    for (int64_t b = 0; b < r.batch; ++b)
      for (int t = 0; t < len; ++t)
        r.ids.push_back(b == 1 && t == len - 1 ? 0 : 3 + static_cast<int64_t>(rng() % 37));
    tfrun_generate_options_init(&r.opt);
    r.opt.max_len = 3 + static_cast<int32_t>(rng() % 10);
    r.opt.beam_width = i % 2 ? 2 : 1;
    rs.push_back(std::move(r));
  }
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  EngineGuard e(m.m, 8);
  submitAndCompare(e, rs, want);
  expectPoolFull(e);
}

/// Requests that join and leave while others decode: a one-token step keeps
/// the rows of its encoder memory and source ids in place and rewrites only
/// the rows that changed (new requests in the places of those that left), and
/// all of them when the padded source length grows (a longer source joins) or
/// shrinks by a quarter (the longest leaves). Every request's tokens equal
/// its own alone.
TEST(Engine, EncoderDecoderRowsJoinAndLeaveMidStream) {
  ModelGuard m(TFC_ENGINE_FLOYDHUB);
  std::mt19937 rng(11);
  auto request = [&](int len, int maxLen, int beam) {
    Request r;
    r.input = "src";
    for (int t = 0; t < len; ++t)
      r.ids.push_back(3 + static_cast<int64_t>(rng() % 37));
    tfrun_generate_options_init(&r.opt);
    r.opt.max_len = maxLen;
    r.opt.beam_width = beam;
    return r;
  };
  // Waves: short sources, one long-running; then longer sources join it
  // (the padded length, a multiple of 16, grows from 16 to the model's
  // maximum of 24 positions); then short ones after the long have ended (it
  // shrinks back to 16).
  std::vector<std::vector<Request>> waves(3);
  waves[0] = {request(4, 22, 1), request(3, 6, 1), request(5, 8, 2), request(2, 5, 1)};
  waves[1] = {request(22, 7, 1), request(18, 9, 2), request(6, 4, 1)};
  waves[2] = {request(3, 6, 2), request(4, 5, 1), request(2, 7, 1)};
  EngineGuard e(m.m, 8);
  uint64_t first = 0; // the first wave's first request runs on through the later waves
  Outcome firstWant;
  for (size_t w = 0; w < waves.size(); ++w) {
    const std::vector<Outcome> want = aloneEach(m.m, waves[w]);
    std::vector<uint64_t> ids(waves[w].size());
    for (size_t i = 0; i < ids.size(); ++i) {
      StatusGuard g{submit(e.e, waves[w][i], &ids[i])};
      ASSERT_EQ(g.s, nullptr) << g.text();
    }
    if (w == 0) {
      first = ids[0];
      firstWant = want[0];
    }
    for (size_t i = w == 0 ? 1 : 0; i < ids.size(); ++i)
      expectSame(collect(e.e, ids[i]), want[i],
                 "wave " + std::to_string(w) + ", request " + std::to_string(i));
  }
  expectSame(collect(e.e, first), firstWant, "wave 0, request 0");
  expectPoolFull(e);
}

/// The stats at a greedy request's first token, taken from its callback.
struct StatsAtFirstToken {
  tfrun_engine_t *e = nullptr;
  bool taken = false;
  tfrun_engine_stats_t st{};
};

int statsAtFirstToken(const tfrun_token_t *, void *user) {
  auto *s = static_cast<StatsAtFirstToken *>(user);
  if (!s->taken)
    s->taken = tfrun_engine_stats(s->e, &s->st) == nullptr;
  return 0;
}

/// Encoder memory lives in the engine's memory pool, one sequence of blocks
/// per batch item: a beam-2 request over a source of 22 positions holds
/// ceil(22 / P) blocks (its two beams share them, not twice as many) beside
/// a greedy one's ceil(5 / P), with P = 16 the positions per block (on every
/// device); all return to the pool at the end. The
/// tokens are those of each request alone.
TEST(Engine, EncoderMemoryIsPagedPerItem) {
  ModelGuard m(TFC_ENGINE_FLOYDHUB);
  Request beam, greedy;
  for (Request *r : {&beam, &greedy}) {
    r->input = "src";
    tfrun_generate_options_init(&r->opt);
  }
  for (int t = 0; t < 22; ++t)
    beam.ids.push_back(3 + (t * 7) % 37);
  beam.opt.beam_width = 2;
  beam.opt.max_len = 20;
  greedy.ids = {5, 9, 4, 7, 3};
  greedy.opt.max_len = 4;
  const std::vector<Outcome> want = aloneEach(m.m, {beam, greedy});
  // The beam request runs on past the greedy one's first step.
  ASSERT_GE(want[0].ids.at(0).size(), 6u);
  EngineGuard e(m.m, 8);
  StatsAtFirstToken at;
  at.e = e.e;
  uint64_t ids[2] = {0, 0};
  StatusGuard g0{submit(e.e, beam, &ids[0])};
  ASSERT_EQ(g0.s, nullptr) << g0.text();
  StatusGuard g1{submit(e.e, greedy, &ids[1], statsAtFirstToken, &at)};
  ASSERT_EQ(g1.s, nullptr) << g1.text();
  expectSame(collect(e.e, ids[1]), want[1], "greedy request");
  expectSame(collect(e.e, ids[0]), want[0], "beam request");
  ASSERT_TRUE(at.taken);
  const int64_t P = at.st.memory_block_positions;
  ASSERT_EQ(P, 16);
  EXPECT_EQ(at.st.requests_running, 2);
  EXPECT_EQ(at.st.memory_blocks_used, (22 + P - 1) / P + (5 + P - 1) / P);
  // Every layer's cross-attention K and V, d_model floats per position each.
  EXPECT_GT(at.st.memory_block_bytes, 0);
  EXPECT_EQ(at.st.memory_block_bytes % (P * 4), 0);
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  EXPECT_EQ(st.memory_blocks_used, 0);
  EXPECT_EQ(st.memory_blocks_free, at.st.memory_blocks_used + at.st.memory_blocks_free);
  expectPoolFull(e);
}

/// The KV pool in blocks of 4 positions, too small for every running row's
/// whole length: rows take blocks as they grow, the most recently admitted
/// request is preempted when none is free, and recomputed later. Every
/// request's tokens still equal those it gets alone.
TEST(Engine, ASmallPoolPreemptsAndRecomputes) {
  ModelGuard m(TFC_ENGINE_GPT2);
  const std::vector<Request> rs = gpt2Requests(24, 17);
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  const int64_t blockBytes = kvBlockBytes(m.m, 10, 4);
  // 30 blocks: a beam-3 request may take 27 (3 rows x 9 blocks of 4).
  EngineGuard e(m.m, 10, 0, 4, 30 * blockBytes + blockBytes / 2);
  ASSERT_EQ(e.blocks, 30);
  submitAndCompare(e, rs, want);
  expectWholeAfterPreempting(e, rs.size());

  // A request that alone could outgrow the pool is refused at submit.
  Request big = rs[1]; // beam 3
  big.ids.assign(20, 5);
  big.opt.max_len = 25;
  uint64_t id = 0;
  StatusGuard g{submit(e.e, big, &id)};
  ASSERT_NE(g.s, nullptr);
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
  EXPECT_EQ(g.text(), "the request may take 33 KV blocks (3 rows x 44 positions, 4 per block); "
                      "the engine's KV cache holds 30 (raise kv_cache_bytes)");
}

/// |n| floydhub requests: one source of 2 to 15 tokens each, new tokens up to
/// 8..15, greedy and beam 2 alternating.
std::vector<Request> floydhubRequests(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Request> rs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.input = "src";
    const int len = 2 + static_cast<int>(rng() % 14);
    for (int t = 0; t < len; ++t)
      r.ids.push_back(3 + static_cast<int64_t>(rng() % 37));
    tfrun_generate_options_init(&r.opt);
    r.opt.max_len = 8 + static_cast<int32_t>(rng() % 8);
    r.opt.beam_width = i % 2 ? 2 : 1;
    rs.push_back(std::move(r));
  }
  return rs;
}

/// The same with an encoder-decoder: a recompute prefills the decoder's
/// tokens again beside the encoder memory the request keeps.
TEST(Engine, ASmallPoolPreemptsEncoderDecoders) {
  ModelGuard m(TFC_ENGINE_FLOYDHUB);
  const std::vector<Request> rs = floydhubRequests(12, 9);
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  EngineGuard e(m.m, 8, 0, 2, 16 * kvBlockBytes(m.m, 8, 2));
  ASSERT_EQ(e.blocks, 16);
  submitAndCompare(e, rs, want);
  expectWholeAfterPreempting(e, rs.size());
}

/// A pool of one block of max_len per row (the layout of a model.bin compiled
/// before paged caches, and kv_block_size = max_len), smaller than the rows: a beam's fan-out
/// copies its shared block when a row first writes to it, and the pool runs
/// out. An engine of one row and one block still admits its requests.
TEST(Engine, ASmallPoolOfWholeRowsPreempts) {
  struct Case {
    const char *model;
    int maxLen; // tests/CMakeLists.txt's --set max_len
    int rows, blocks;
  };
  for (const Case &c : {Case{TFC_ENGINE_GPT2, 48, 10, 5}, Case{TFC_ENGINE_FLOYDHUB, 24, 8, 3}}) {
    SCOPED_TRACE(c.model);
    ModelGuard m(c.model);
    const std::vector<Request> rs =
        c.maxLen == 48 ? gpt2Requests(16, 23) : floydhubRequests(10, 29);
    const std::vector<Outcome> want = aloneEach(m.m, rs);
    const int64_t blockBytes = kvBlockBytes(m.m, c.rows, c.maxLen);
    EngineGuard e(m.m, c.rows, 0, c.maxLen, c.blocks * blockBytes);
    ASSERT_EQ(e.blocks, c.blocks);
    submitAndCompare(e, rs, want);
    expectWholeAfterPreempting(e, rs.size());

    EngineGuard one(m.m, 1, 0, c.maxLen, blockBytes);
    ASSERT_EQ(one.blocks, 1);
    Request r = rs[0];
    r.opt.beam_width = 1;
    uint64_t id = 0;
    ASSERT_EQ(submit(one.e, r, &id), nullptr);
    expectSame(collect(one.e, id), alone(m.m, r), "the one-block engine's request");
  }
}

struct Streamed {
  std::vector<int64_t> tokens;
};

int onToken(const tfrun_token_t *t, void *user) {
  static_cast<Streamed *>(user)->tokens.push_back(t->token_id);
  return 0;
}

TEST(Engine, StreamsTheTokens) {
  ModelGuard m(TFC_ENGINE_GPT2);
  Request r = gpt2Requests(1, 11)[0];
  r.opt.max_len = 9;
  const Outcome want = alone(m.m, r);
  EngineGuard e(m.m, 4);
  Streamed got;
  uint64_t id = 0;
  StatusGuard g{submit(e.e, r, &id, onToken, &got)};
  ASSERT_EQ(g.s, nullptr) << g.text();
  expectSame(collect(e.e, id), want, "streamed request");
  EXPECT_EQ(got.tokens, want.ids[0]);
}

TEST(Engine, CancelQueuedAndRunning) {
  ModelGuard m(TFC_ENGINE_GPT2);
  EngineGuard e(m.m, 2);
  std::vector<Request> rs = gpt2Requests(6, 5);
  std::vector<uint64_t> ids(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    rs[i].opt.beam_width = 1;
    rs[i].opt.sample = 0;
    rs[i].opt.max_len = 25;
    StatusGuard g{submit(e.e, rs[i], &ids[i])};
    ASSERT_EQ(g.s, nullptr) << g.text();
  }
  for (size_t i = 0; i < rs.size(); i += 2)
    EXPECT_EQ(tfrun_engine_cancel(e.e, ids[i]), nullptr);
  for (size_t i = 0; i < rs.size(); ++i) {
    int done = 0;
    StatusGuard g{tfrun_engine_wait(e.e, ids[i], 60000, &done)};
    EXPECT_EQ(done, 1);
    if (i % 2 == 0) {
      ASSERT_NE(g.s, nullptr) << "request " << i << " was cancelled";
      EXPECT_EQ(tfrun_status_code(g.s), TFRUN_CANCELLED);
      EXPECT_EQ(g.text(), "request " + std::to_string(ids[i]) + " was cancelled");
    } else {
      EXPECT_EQ(g.s, nullptr) << g.text();
    }
    EXPECT_EQ(tfrun_engine_release(e.e, ids[i]), nullptr);
  }
  expectPoolFull(e);
  int done = 0;
  StatusGuard g{tfrun_engine_wait(e.e, ids[0], 0, &done)};
  EXPECT_EQ(g.text(), "no request " + std::to_string(ids[0]) + " in this engine");
}

TEST(Engine, AFullQueueIsBusy) {
  ModelGuard m(TFC_ENGINE_GPT2);
  EngineGuard e(m.m, 1, 2);
  Request r = gpt2Requests(1, 1)[0];
  r.opt.beam_width = 1;
  r.opt.sample = 0;
  r.opt.max_len = 25;
  // One request runs (1 row), two wait; the fourth finds the queue full, at
  // least until the first ends.
  std::vector<uint64_t> ids;
  int busy = 0;
  for (int i = 0; i < 4; ++i) {
    uint64_t id = 0;
    StatusGuard g{submit(e.e, r, &id)};
    if (g.s) {
      EXPECT_EQ(tfrun_status_code(g.s), TFRUN_BUSY);
      EXPECT_EQ(g.text(), "the engine's queue is full (2 requests waiting); try again later");
      ++busy;
    } else {
      ids.push_back(id);
    }
  }
  EXPECT_GE(busy, 1);
  for (uint64_t id : ids)
    collect(e.e, id);
  expectPoolFull(e);
}

TEST(Engine, BadRequestsAndModels) {
  ModelGuard m(TFC_ENGINE_GPT2);
  EngineGuard e(m.m, 4);
  Request r = gpt2Requests(1, 2)[0];
  uint64_t id = 0;
  {
    Request bad = r;
    bad.input = "nope";
    StatusGuard g{submit(e.e, bad, &id)};
    ASSERT_NE(g.s, nullptr);
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
    EXPECT_EQ(g.text(), "unknown input 'nope' (inputs: tokens)");
  }
  {
    Request wide = r;
    wide.opt.beam_width = 5;
    StatusGuard g{submit(e.e, wide, &id)};
    ASSERT_NE(g.s, nullptr);
    EXPECT_EQ(g.text(), "the request needs 5 rows (batch 1 x beam width 5), more than the "
                        "engine's 4");
  }
  {
    Request big = r;
    big.opt.max_len = 1000;
    StatusGuard g{submit(e.e, big, &id)};
    ASSERT_NE(g.s, nullptr);
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
  }
  {
    Request oov = r;
    oov.ids[0] = 50;
    StatusGuard g{submit(e.e, oov, &id)};
    ASSERT_NE(g.s, nullptr);
    EXPECT_EQ(g.text(), "token id 50 at position 0 of batch item 0's prompt is outside the "
                        "vocabulary [0, 50)");
  }
  expectPoolFull(e);
  // A model.bin compiled before the engine: one position for all rows.
  ModelGuard old(TFC_ENGINE_OLD_MODEL);
  tfrun_engine_options_t o;
  tfrun_engine_options_init(&o);
  tfrun_engine_t *oe = nullptr;
  StatusGuard g{tfrun_engine_create(old.m, &o, &oe)};
  ASSERT_NE(g.s, nullptr);
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_UNSUPPORTED);
  EXPECT_NE(g.text().find("was compiled before continuous batching"), std::string::npos)
      << g.text();
  EXPECT_EQ(oe, nullptr);
}

/// 8 threads submit, cancel and release random requests against one engine for a
/// bounded time, with more requests than rows (requests queue), a KV pool of
/// 27 blocks of 4 positions (it runs out: requests are preempted and
/// recomputed) and a small queue (some submits are busy). Every request ends
/// finished or cancelled, and the pool is whole at the end.
/// Decoder-only requests whose prompts start with the same |prefixLen| tokens
/// (a system prompt), then 1 to 6 of their own; greedy, beam 3 and sampling.
std::vector<Request> sharedPrefixRequests(int n, uint32_t seed, int prefixLen = 32,
                                          int32_t maxLen = 8) {
  std::mt19937 rng(seed);
  std::vector<int64_t> prefix;
  for (int t = 0; t < prefixLen; ++t)
    prefix.push_back(3 + static_cast<int64_t>(rng() % 47));
  std::vector<Request> rs = gpt2Requests(n, seed + 1);
  for (Request &r : rs) {
    r.ids.resize(1 + rng() % 6);
    r.ids.insert(r.ids.begin(), prefix.begin(), prefix.end());
    // prefixLen + 6 + maxLen positions: at most 48, tests/CMakeLists.txt's max_len.
    r.opt.max_len = std::min<int32_t>(r.opt.max_len, maxLen);
  }
  return rs;
}

/// The prompt tokens |rs| hold.
uint64_t promptTokens(const std::vector<Request> &rs) {
  uint64_t n = 0;
  for (const Request &r : rs)
    n += r.ids.size();
  return n;
}

// Prefix caching: a request whose prompt starts with blocks another request
// wrote starts from them, prefills only the rest, and gets the tokens it gets
// alone. Run also with TFRUN_PREFILL_CHUNK=5 (ctest engine-prefix-chunks),
// where whole prefill calls come from the cache.
TEST(Engine, PrefixCacheSkipsASharedPromptAndKeepsTheTokens) {
  ModelGuard m(TFC_ENGINE_GPT2);
  const std::vector<Request> rs = sharedPrefixRequests(12, 21);
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  for (int blockSize : {16, 4}) {
    SCOPED_TRACE("blocks of " + std::to_string(blockSize));
    EngineGuard e(m.m, 10, 0, blockSize);
    // The first request alone publishes the prefix; the others share it.
    uint64_t id = 0, cached = 7;
    {
      StatusGuard g{submit(e.e, rs[0], &id)};
      ASSERT_EQ(g.s, nullptr) << g.text();
      expectSame(collect(e.e, id), want[0], "request 0");
    }
    ASSERT_EQ(StatusGuard{submit(e.e, rs[1], &id)}.s, nullptr);
    int done = 0;
    ASSERT_EQ(StatusGuard{tfrun_engine_wait(e.e, id, 60000, &done)}.s, nullptr);
    ASSERT_EQ(StatusGuard{tfrun_engine_cached_tokens(e.e, id, &cached)}.s, nullptr);
    EXPECT_EQ(cached, 32u); // its first two blocks of 16, or eight of 4
    expectSame(collect(e.e, id), want[1], "request 1");
    StatusGuard gone{tfrun_engine_cached_tokens(e.e, id, &cached)}; // released
    EXPECT_EQ(tfrun_status_code(gone.s), TFRUN_INVALID_ARGUMENT);
    // A salted request shares nothing with the unsalted ones; the same request
    // again with the same salt shares every whole block of its prompt but the
    // last token.
    const uint64_t whole = (rs[1].ids.size() - 1) / blockSize * blockSize;
    for (uint64_t want_cached : {uint64_t{0}, whole}) {
      Request salted = rs[1];
      salted.opt.cache_salt = 0x5a17;
      ASSERT_EQ(StatusGuard{submit(e.e, salted, &id)}.s, nullptr);
      ASSERT_EQ(StatusGuard{tfrun_engine_wait(e.e, id, 60000, &done)}.s, nullptr);
      ASSERT_EQ(StatusGuard{tfrun_engine_cached_tokens(e.e, id, &cached)}.s, nullptr);
      EXPECT_EQ(cached, want_cached);
      expectSame(collect(e.e, id), want[1], "salted request 1");
    }
    submitAndCompare(e, std::vector<Request>(rs.begin() + 2, rs.end()),
                     std::vector<Outcome>(want.begin() + 2, want.end()));
    tfrun_engine_stats_t st;
    ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
    EXPECT_EQ(st.prefix_cache_queries, promptTokens(rs) + 2 * rs[1].ids.size());
    // Each later request (one row at admission) starts with the prefix's
    // whole blocks, 32 tokens, or more with blocks of 4 where another request
    // already filled a block of its tail.
    EXPECT_GE(st.prefix_cache_hits, 32u * rs.size()); // the salted pair's second too
    EXPECT_LT(st.prefix_cache_hits, st.prefix_cache_queries);
    EXPECT_GT(st.kv_blocks_cached, 0);
    expectPoolFull(e); // the cached blocks count as free
  }
}

TEST(Engine, PrefixCacheOffPrefillsEveryPrompt) {
  ModelGuard m(TFC_ENGINE_GPT2);
  const std::vector<Request> rs = sharedPrefixRequests(4, 22);
  EngineGuard e(m.m, 10, 0, 0, 0, /*prefixCaching=*/-1);
  submitAndCompare(e, rs, aloneEach(m.m, rs));
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  EXPECT_EQ(st.prefix_cache_queries, 0u);
  EXPECT_EQ(st.prefix_cache_hits, 0u);
  EXPECT_EQ(st.kv_blocks_cached, 0);
  // A bad value is one clear error.
  tfrun_engine_options_t o;
  tfrun_engine_options_init(&o);
  o.prefix_caching = 2;
  tfrun_engine_t *bad = nullptr;
  StatusGuard g{tfrun_engine_create(m.m, &o, &bad)};
  ASSERT_NE(g.s, nullptr);
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
  EXPECT_EQ(g.text(), "prefix_caching is 2; it takes 1 or 0 (on) or -1 (off)");
  EXPECT_EQ(bad, nullptr);
}

// A pool too small for every request: cached prefix blocks are taken back
// for new ones, requests that share blocks are preempted and recomputed, and
// every request still gets its tokens.
TEST(Engine, PrefixCacheUnderASmallPool) {
  ModelGuard m(TFC_ENGINE_GPT2);
  const std::vector<Request> rs = sharedPrefixRequests(16, 23, 8, 16);
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  // The pool holds the largest request alone, unshared (submit refuses
  // less): its rows x its positions, in blocks of 4.
  int64_t largest = 0;
  for (const Request &r : rs)
    largest = std::max<int64_t>(
        largest, r.opt.beam_width * ((static_cast<int64_t>(r.ids.size()) + r.opt.max_len + 3) / 4));
  EngineGuard e(m.m, 10, 0, 4, largest * kvBlockBytes(m.m, 10, 4));
  submitAndCompare(e, rs, want);
  expectWholeAfterPreempting(e, rs.size());
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  EXPECT_GT(st.prefix_cache_hits, 0u);
}

/// The running requests when a request streams its first token.
struct RunningAtFirstToken {
  tfrun_engine_t *e = nullptr;
  int64_t running = -1;
  static int record(const tfrun_token_t *t, void *user) {
    auto &self = *static_cast<RunningAtFirstToken *>(user);
    tfrun_engine_stats_t st;
    if (t->step == 0 && !tfrun_engine_stats(self.e, &st))
      self.running = st.requests_running;
    return 0;
  }
};

// Admission counts a prompt's blocks less the cached ones a running request
// holds: a request sharing a running request's 32-token prefix starts beside
// it in a pool with room for its own tail only.
TEST(Engine, PrefixCacheAdmitsBesideTheRequestHoldingThePrefix) {
  ModelGuard m(TFC_ENGINE_GPT2);
  std::vector<Request> rs = sharedPrefixRequests(3, 25);
  rs.erase(rs.begin() + 1); // greedy and sampling: both stream
  for (Request &r : rs) {
    r.ids.resize(33); // 9 blocks of 4
    r.opt.max_len = 12;
  }
  rs[1].ids.back() = rs[0].ids.back() == 3 ? 4 : 3;
  const std::vector<Outcome> want = aloneEach(m.m, rs);
  // 14 blocks: each request's 45 positions alone; after the first one's
  // prefill 5 are free, short of the second one's whole prompt (9).
  EngineGuard e(m.m, 10, 0, 4, 14 * kvBlockBytes(m.m, 10, 4));
  ASSERT_EQ(e.blocks, 14);
  Gate gate;
  RunningAtFirstToken second{e.e};
  uint64_t ids[2];
  ASSERT_EQ(StatusGuard{submit(e.e, rs[0], &ids[0], &Gate::wait, &gate)}.s, nullptr);
  ASSERT_TRUE(gate.awaitReached());
  ASSERT_EQ(StatusGuard{submit(e.e, rs[1], &ids[1], &RunningAtFirstToken::record, &second)}.s,
            nullptr);
  gate.release();
  for (int i = 0; i < 2; ++i)
    expectSame(collect(e.e, ids[i]), want[i], "request " + std::to_string(i));
  EXPECT_EQ(second.running, 2); // it did not wait for the first one to end
  expectPoolFull(e);
}

TEST(Engine, StressSubmitAndCancelFromThreads) {
  ModelGuard m(TFC_ENGINE_GPT2);
  // The largest request may take 33 blocks (3 beams x 43 positions).
  EngineGuard e(m.m, 10, 8, 4, 33 * kvBlockBytes(m.m, 10, 4));
  // Half the prompts start with the same 8 tokens: prefix caching shares
  // their blocks between threads' requests, preemptions and cancellations.
  const std::vector<int64_t> shared{5, 9, 14, 3, 30, 41, 7, 22};
  // 4 s in the suite; TFC_ENGINE_STRESS_SECONDS=60 for the long run.
  const char *env = std::getenv("TFC_ENGINE_STRESS_SECONDS");
  const int seconds = env && std::atoi(env) > 0 ? std::min(std::atoi(env), 600) : 4;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> finished{0}, cancelled{0}, busy{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(1000 + t);
      for (int iter = 0; iter < 100000 && std::chrono::steady_clock::now() < until; ++iter) {
        // Up to 5 requests at once: 8 threads outrun 10 rows and a queue of 8.
        std::vector<uint64_t> ids;
        const int k = 1 + static_cast<int>(rng() % 5);
        for (int j = 0; j < k; ++j) {
          Request r = gpt2Requests(1, rng())[0];
          if (rng() % 2)
            r.ids.insert(r.ids.begin(), shared.begin(), shared.end());
          r.opt.beam_width = 1 + static_cast<int>(rng() % 3);
          r.opt.sample = r.opt.beam_width == 1 && rng() % 2;
          uint64_t id = 0;
          StatusGuard g{submit(e.e, r, &id)};
          if (g.s) {
            (tfrun_status_code(g.s) == TFRUN_BUSY ? busy : other)++;
            continue;
          }
          ids.push_back(id);
          if (rng() % 3 == 0)
            tfrun_engine_cancel(e.e, id);
        }
        for (uint64_t id : ids) {
          int done = 0;
          StatusGuard w{tfrun_engine_wait(e.e, id, 30000, &done)};
          if (!done)
            other++;
          else if (!w.s)
            finished++;
          else if (tfrun_status_code(w.s) == TFRUN_CANCELLED)
            cancelled++;
          else
            other++;
          tfrun_engine_release(e.e, id);
        }
      }
    });
  for (std::thread &t : threads)
    t.join();
  tfrun_engine_stats_t st;
  ASSERT_EQ(tfrun_engine_stats(e.e, &st), nullptr);
  std::printf("stress: %d finished, %d cancelled, %d busy; %llu preemptions\n", finished.load(),
              cancelled.load(), busy.load(), (unsigned long long)st.requests_preempted);
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(finished.load(), 0);
  EXPECT_GT(st.requests_preempted, 0u); // the pool ran out
  EXPECT_GT(st.prefix_cache_hits, 0u);
  expectPoolFull(e);
}

} // namespace
