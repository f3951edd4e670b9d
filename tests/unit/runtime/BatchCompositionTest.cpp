// docs/precision.md, "Batch composition", through the C API: a row's outputs inside
// padded batches of 2, 3, 17 and 64 against the same row alone, on a small BERT
// (models/bert.yaml, Xavier weights) compiled at build time in f32, bf16 and int8,
// at 1 and 2 threads. The promise is a bound, not bitwise equality: alone, a short
// row's linears have fewer than 16 rows (oneDNN on an AVX2-only CPU), inside a
// batch more (OpenBLAS), and a padded row's attention may take the tiled path where
// alone it took the row path (backends/cpu/attention_cpu.cc).
#include "tfrun/tfrun.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if !defined(TFC_BATCH_MODEL_F32) || !defined(TFC_BATCH_MODEL_BF16) || \
    !defined(TFC_BATCH_MODEL_INT8)
#error "TFC_BATCH_MODEL_{F32,BF16,INT8} must name model.bins compiled at build time"
#endif

namespace {

// The bound of docs/precision.md: |in batch - alone| <= tol * max|alone|, element by
// element over the row's real positions. Keep in step with tests/python/text_test.py.
struct Case {
  const char *precision;
  const char *path;
  double tol;
};
const Case kCases[] = {{"f32", TFC_BATCH_MODEL_F32, 1e-5},
                       {"bf16", TFC_BATCH_MODEL_BF16, 2e-2},
                       {"int8", TFC_BATCH_MODEL_INT8, 3e-2}};
constexpr int64_t kVocab = 100, kD = 32, kMaxSeq = 48;

/// hidden[b, :len, :] of a padded batch (pad id 0, token types 0).
std::vector<std::vector<float>> run(tfrun_session_t *s, const std::vector<std::vector<int64_t>> &rows) {
  int64_t seq = 0;
  for (const auto &r : rows)
    seq = std::max<int64_t>(seq, (int64_t)r.size());
  const int64_t n = (int64_t)rows.size();
  std::vector<int64_t> ids(n * seq, 0), types(n * seq, 0);
  for (int64_t b = 0; b < n; ++b)
    std::copy(rows[b].begin(), rows[b].end(), ids.begin() + b * seq);
  int64_t shape[2] = {n, seq};
  std::vector<std::vector<float>> out;
  tfrun_status_t *st = tfrun_session_set_input(s, "tokens", TFRUN_I64, shape, 2, ids.data());
  if (!st)
    st = tfrun_session_set_input(s, "token_types", TFRUN_I64, shape, 2, types.data());
  if (!st)
    st = tfrun_session_run(s);
  const float *y = nullptr;
  const int64_t *dims = nullptr;
  size_t rank = 0;
  if (!st)
    st = tfrun_session_get_output(s, "hidden", &y, &dims, &rank);
  EXPECT_EQ(st, nullptr) << tfrun_status_message(st);
  tfrun_status_release(st);
  if (!y || rank != 3 || dims[0] != n || dims[1] != seq || dims[2] != kD)
    return out;
  for (int64_t b = 0; b < n; ++b)
    out.emplace_back(y + b * seq * kD, y + (b * seq + (int64_t)rows[b].size()) * kD);
  return out;
}

TEST(BatchComposition, RowAloneAndInPaddedBatchesWithinTheBound) {
  std::mt19937_64 g(7);
  auto tokens = [&](int64_t len) {
    std::vector<int64_t> r(len);
    for (auto &t : r)
      t = 1 + (int64_t)(g() % (kVocab - 1)); // never the pad id
    return r;
  };
  int checked = 0;
  for (const Case &c : kCases) {
    tfrun_model_t *m = nullptr;
    tfrun_status_t *st = tfrun_model_load_file(c.path, &m);
    ASSERT_EQ(st, nullptr) << tfrun_status_message(st);
    double worst = 0;
    for (int threads : {1, 2}) {
      tfrun_session_t *s = nullptr;
      ASSERT_EQ(tfrun_session_create(m, threads, &s), nullptr);
      // 5 tokens: few rows alone; 33: on AVX2 the last query block alone is one row.
      for (int64_t len : {5, 33}) {
        const std::vector<int64_t> target = tokens(len);
        const std::vector<float> alone = run(s, {target}).at(0);
        float peak = 0;
        for (float v : alone)
          peak = std::max(peak, std::fabs(v));
        ASSERT_GT(peak, 0.1f);
        const double bound = c.tol * peak;
        for (int64_t n : {2, 3, 17, 64}) {
          std::vector<std::vector<int64_t>> rows;
          for (int64_t b = 0; b < n; ++b)
            rows.push_back(b == n / 2 ? target : tokens(b == 0 ? kMaxSeq : 1 + (int64_t)(g() % kMaxSeq)));
          const auto got = run(s, rows);
          ASSERT_EQ(got.size(), (size_t)n);
          const std::vector<float> &row = got[n / 2];
          ASSERT_EQ(row.size(), alone.size());
          double err = 0;
          for (size_t i = 0; i < row.size(); ++i)
            err = std::max(err, (double)std::fabs(row[i] - alone[i]));
          EXPECT_LE(err, bound) << c.precision << ", " << threads << " threads, " << len
                                << " tokens in a batch of " << n << " (peak " << peak << ")";
          worst = std::max(worst, err / peak);
          ++checked;
        }
      }
      tfrun_session_release(s);
    }
    tfrun_model_release(m);
    std::printf("%s: worst |in batch - alone| / max|alone| = %.3g (bound %g)\n", c.precision,
                worst, c.tol);
  }
  EXPECT_EQ(checked, 3 * 2 * 2 * 4);
}

} // namespace
