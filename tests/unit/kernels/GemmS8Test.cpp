//===- GemmS8Test.cpp - the exact AVX2 u8 x s8 GEMM ----------------------===//
//
// gemmU8S8 (backends/cpu/gemm_s8_avx2.h) against an integer reference: every
// sum must be exact, including the inputs where a vpmaddubsw GEMM saturates
// (q = 255 against w = 127 in both products of a pair), on every row tail of
// the 4-row tiles and the 64-row blocks, k not a multiple of 4 and n not a multiple of 16.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/gemm_s8_avx2.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace tfc::cpu {
namespace {

void expectExact(const std::vector<uint8_t> &a, const std::vector<int8_t> &w, int64_t m,
                 int64_t n, int64_t k, bool u7 = false) {
  auto p = packS8(w.data(), n, k);
  ASSERT_TRUE(p);
  std::vector<int32_t> c(m * n, 12345);
  std::vector<int8_t> scratch(2 * m * p->kPad);
  if (u7)
    gemmU7S8(*p, a.data(), m, c.data(), reinterpret_cast<uint8_t *>(scratch.data()));
  else
    gemmU8S8(*p, a.data(), m, c.data(), scratch.data());
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t want = 0;
      for (int64_t i = 0; i < k; ++i) {
        const int w8 = w[j * k + i] == -128 ? -127 : w[j * k + i];
        want += (int64_t)a[r * k + i] * w8;
      }
      ASSERT_EQ(c[r * n + j], want) << "m=" << m << " n=" << n << " k=" << k << " r=" << r
                                    << " j=" << j;
    }
}

TEST(GemmU8S8, ExactOnRandomInputsAndEveryTail) {
  std::mt19937 g(5);
  std::uniform_int_distribution<int> u8(0, 255), s8(-127, 127);
  for (int64_t m : {1, 2, 3, 4, 5, 7, 9, 64, 67, 130})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{16, 64}, {17, 61}, {40, 130}, {5, 3}}) {
      std::vector<uint8_t> a(m * k);
      std::vector<int8_t> w(n * k);
      for (auto &v : a)
        v = (uint8_t)u8(g);
      for (auto &v : w)
        v = (int8_t)s8(g);
      expectExact(a, w, m, n, k);
    }
}

TEST(GemmU8S8, ExactWhereSaturatingPairSumsOverflow) {
  // 255 * 127 + 255 * 127 = 64770 > 32767 in every pair: a vpmaddubsw GEMM
  // returns 32767 per pair here. Also the other extremes and -128 (clamped
  // to -127, as the packing documents).
  const int64_t m = 6, n = 33, k = 2048;
  std::vector<uint8_t> a(m * k);
  std::vector<int8_t> w(n * k);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i)
      a[r * k + i] = r == 0 ? 255 : r == 1 ? 0 : r == 2 ? 128 : (uint8_t)((i * 37 + r) % 256);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i)
      w[j * k + i] = j % 3 == 0 ? 127 : j % 3 == 1 ? -128 : (int8_t)((i % 2) ? 127 : -127);
  expectExact(a, w, m, n, k);
}

// gemmU7S8: the same sums for activations in 0..127 (quantizeRows with 127
// levels), on the same tails, and at the extremes where a pair is largest:
// 127 * 127 + 127 * 127 = 32258, just below vpmaddubsw's saturation.
TEST(GemmU7S8, ExactOnRandomInputsAndEveryTail) {
  std::mt19937 g(7);
  std::uniform_int_distribution<int> u7(0, 127), s8(-128, 127);
  for (int64_t m : {1, 2, 3, 4, 5, 7, 9, 64, 67, 130})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{16, 64}, {17, 61}, {40, 130}, {5, 3}}) {
      std::vector<uint8_t> a(m * k);
      std::vector<int8_t> w(n * k);
      for (auto &v : a)
        v = (uint8_t)u7(g);
      for (auto &v : w)
        v = (int8_t)s8(g);
      expectExact(a, w, m, n, k, true);
    }
}

TEST(GemmU7S8, ExactAtThePairExtremes) {
  const int64_t m = 5, n = 33, k = 2051;
  std::vector<uint8_t> a(m * k);
  std::vector<int8_t> w(n * k);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < k; ++i)
      a[r * k + i] = r == 0 ? 127 : r == 1 ? 0 : (uint8_t)((i * 37 + r) % 128);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i)
      w[j * k + i] = j % 3 == 0 ? 127 : j % 3 == 1 ? -128 : (int8_t)((i % 2) ? 127 : -127);
  expectExact(a, w, m, n, k, true);
}

} // namespace
} // namespace tfc::cpu
