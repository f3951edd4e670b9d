// GoogleTest: the CPU attention kernel on non-finite inputs (issue 21;
// backends/cpu/attention_cpu.h, "Edge cases"). A NaN or +inf score makes its
// row's output NaN, on the row path (a decoding step) and the tiled path (a
// longer query), for a NaN in the query and for a NaN in a key; the other
// heads and rows stay finite. Before the fix, vexp() turned a NaN score into
// exp(-87), so the NaN weighed nothing and the output looked finite.
#include "backends/cpu/attention_cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace tfc::cpu {
namespace {

void runCase(int64_t qLen, float bad, bool inKey) {
  const int64_t heads = 2, dk = 8, kvLen = 6, width = heads * dk;
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> q(qLen * width), k(kvLen * width), v(kvLen * width);
  for (float *x : {q.data(), k.data(), v.data()})
    for (int64_t i = 0; i < (x == q.data() ? qLen : kvLen) * width; ++i)
      x[i] = u(g);
  // Head 0 only: query row 0's first element, or key 2's first element.
  (inKey ? k[2 * width] : q[0]) = bad;
  AttentionParams p;
  p.batch = 1;
  p.q_len = qLen;
  p.kv_len = kvLen;
  p.heads = heads;
  p.head_dim = dk;
  p.q_row_stride = p.k_row_stride = p.v_row_stride = p.out_row_stride = width;
  p.scale = 0.35f;
  std::vector<float> out(qLen * width, 0.0f);
  attention(p, q.data(), k.data(), v.data(), out.data());
  for (int64_t i = 0; i < qLen; ++i)
    for (int64_t c = 0; c < width; ++c) {
      // A bad key spoils head 0 of every row; a bad query head 0 of row 0.
      const bool spoiled = c < dk && (inKey || i == 0);
      EXPECT_EQ(std::isnan(out[i * width + c]), spoiled)
          << "q_len " << qLen << (inKey ? " key" : " query") << " value " << bad << ": row "
          << i << " col " << c << " = " << out[i * width + c];
    }
}

TEST(AttentionNonFinite, NaNOrInfScoreMakesTheRowNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t qLen : {1, 2, 64}) // the row path, and the tiled path
    for (bool inKey : {false, true}) {
      runCase(qLen, nan, inKey);
      // +inf in the query: every score of the row is +-inf, so +inf - +inf or an
      // all -inf row, NaN either way. (In a key it gives -inf, a weight of 0,
      // for the rows whose query element is negative: not a case of NaN.)
      if (!inKey)
        runCase(qLen, inf, inKey);
    }
}

} // namespace
} // namespace tfc::cpu
