//===- SearchCpuTest.cpp - beam search's per-row reductions ---------------===//
//
// rowsLogSumExpTopK (backends/cpu/search_cpu.h), the threaded and filtered
// pass beam search runs over every row of logits, against rowTopK and
// rowLogSumExp row by row: the same indices and values in the same order
// (ties to the lower index, NaN below -inf), the same log-sum-exp, and the
// flag of rows holding NaN or +inf (what generation refuses), on
// rows with ties, NaN, +-inf, all -inf and all NaN, and on every tail of the
// vector width.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/search_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tfc::cpu {
namespace {

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

void expectSameAsRowByRow(const std::vector<float> &l, int64_t rows, int64_t n, int m) {
  std::vector<float> lse(rows), val(rows * m);
  std::vector<int32_t> idx(rows * m, -1);
  std::vector<uint8_t> bad(rows, 2);
  rowsLogSumExpTopK(l.data(), rows, n, m, lse.data(), idx.data(), val.data(), bad.data());
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = l.data() + r * n;
    std::vector<float> wantVal(m);
    std::vector<int32_t> wantIdx(m);
    const int got = rowTopK(row, n, m, wantIdx.data(), wantVal.data());
    ASSERT_EQ(got, std::min<int64_t>(m, n));
    for (int i = 0; i < got; ++i) {
      EXPECT_EQ(idx[r * m + i], wantIdx[i]) << "row " << r << " rank " << i << " n " << n;
      EXPECT_EQ(val[r * m + i], wantVal[i]) << "row " << r << " rank " << i << " n " << n;
    }
    bool nanOrPosInf = false;
    for (int64_t v = 0; v < n; ++v)
      nanOrPosInf |= std::isnan(row[v]) || row[v] == kInf;
    EXPECT_EQ(bad[r], nanOrPosInf ? 1 : 0) << "row " << r;
    const float want = rowLogSumExp(row, n);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(lse[r])) << "row " << r;
    else
      EXPECT_EQ(lse[r], want) << "row " << r << " n " << n;
  }
}

TEST(RowsLogSumExpTopK, RandomRowsEveryTail) {
  std::mt19937 g(3);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 100, 1000, 4099})
    for (int m : {1, 2, 8, 20}) {
      const int64_t rows = 5;
      std::vector<float> l(rows * n);
      for (float &x : l)
        x = d(g);
      expectSameAsRowByRow(l, rows, n, m);
    }
}

TEST(RowsLogSumExpTopK, TiesNanAndInfinities) {
  const int64_t n = 203, rows = 6;
  std::vector<float> l(rows * n);
  for (int64_t v = 0; v < n; ++v) {
    l[0 * n + v] = static_cast<float>(v % 5);            // ties: the lower index first
    l[1 * n + v] = v % 7 == 0 ? kNan : 0.25f * (v % 11); // NaN ranks below -inf
    l[2 * n + v] = v == 150 ? kInf : -1.0f;              // +inf: lse +inf
    l[3 * n + v] = -kInf;                                // all -inf
    l[4 * n + v] = kNan;                                 // all NaN
    l[5 * n + v] = v % 3 == 0 ? -kInf : (v == 190 ? 7.0f : 1.0f);
  }
  expectSameAsRowByRow(l, rows, n, 8);
}

// Many rows: the pass splits them across threads (when OpenMP has more than one).
TEST(RowsLogSumExpTopK, ManyRows) {
  std::mt19937 g(11);
  std::uniform_real_distribution<float> d(-20.0f, 20.0f);
  const int64_t rows = 64, n = 5003;
  std::vector<float> l(rows * n);
  for (float &x : l)
    x = d(g);
  expectSameAsRowByRow(l, rows, n, 8);
}

} // namespace
} // namespace tfc::cpu
