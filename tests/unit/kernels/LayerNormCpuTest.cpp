//===- LayerNormCpuTest.cpp - Tests for the CPU layer-norm kernel ---------===//
//
// tfc::cpu::layerNorm() against a double-precision reference of the two
// formulas (nn.LayerNorm: biased variance inside the sqrt; the tutorials'
// Norm: unbiased std, eps added outside). The cases that tell the formulas
// apart (tiny variances where eps matters, one-element rows) are here, as are
// the precision trap of a large mean with a small spread, strides with gaps
// (NaN in the unused input columns, sentinels around and between output
// rows), in-place use, and thread-count independence.
//
//===----------------------------------------------------------------------===//

#include "backends/cpu/layer_norm_cpu.h"
#include "tests/reference/Reference.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tfc::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -4321.0f;
constexpr int64_t kGuard = 32;

struct NormCase {
  NormVariant variant = TFC_NORM_LAYER;
  int64_t rows = 1, dim = 1;
  int64_t xExtra = 0, yExtra = 0; // unused floats at the end of each row
  float eps = 1e-5f;
  float center = 0.0f, spread = 1.0f; // x = center + U[-spread, spread]
  bool withGamma = true, withBeta = true;
  uint32_t seed = 1;

  std::string str() const {
    std::ostringstream os;
    os << "variant=" << static_cast<int>(variant) << " rows=" << rows << " dim=" << dim
       << " xExtra=" << xExtra << " yExtra=" << yExtra << " eps=" << eps << " center=" << center
       << " spread=" << spread << " gamma=" << withGamma << " beta=" << withBeta;
    return os.str();
  }
};

struct NormRun {
  NormCase c;
  int64_t xs = 0, ys = 0;
  std::vector<float> x, gamma, beta, yBuf;
  float *y() { return yBuf.data() + kGuard; }
};

NormRun makeNormRun(const NormCase &c) {
  NormRun r;
  r.c = c;
  r.xs = c.dim + c.xExtra;
  r.ys = c.dim + c.yExtra;
  std::mt19937 gen(c.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  r.x.assign(c.rows * r.xs, kNaN); // a kernel reading a gap produces NaN
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.dim; ++j)
      r.x[i * r.xs + j] = c.center + c.spread * uni(gen);
  if (c.withGamma)
    for (int64_t j = 0; j < c.dim; ++j)
      r.gamma.push_back(1.0f + 0.5f * uni(gen));
  if (c.withBeta)
    for (int64_t j = 0; j < c.dim; ++j)
      r.beta.push_back(uni(gen));
  r.yBuf.assign(2 * kGuard + c.rows * r.ys, kSentinel);
  return r;
}

void runKernel(NormRun &r, const float *x, int64_t xs, float *y, int64_t ys) {
  layerNorm(r.c.variant, r.c.rows, r.c.dim, x, xs, r.gamma.empty() ? nullptr : r.gamma.data(),
            r.beta.empty() ? nullptr : r.beta.data(), r.c.eps, y, ys);
}

/// The formula, in double, on the f32 inputs (the shared reference,
/// tests/reference/Reference.h).
std::vector<double> normReference(const NormRun &r) {
  const NormCase &c = r.c;
  // The gaps between the rows are NaN; the reference reads only the rows.
  const std::vector<double> x(r.x.begin(), r.x.end());
  const std::vector<double> gamma(r.gamma.begin(), r.gamma.end());
  const std::vector<double> beta(r.beta.begin(), r.beta.end());
  std::vector<double> out(c.rows * c.dim);
  ref::layerNorm(static_cast<ref::NormVariant>(c.variant), c.rows, c.dim, x.data(), r.xs,
                 gamma.empty() ? nullptr : gamma.data(), beta.empty() ? nullptr : beta.data(),
                 c.eps, out.data());
  return out;
}

/// Compares y (at stride ys) with the reference, relative to max(1, |want|).
void expectMatches(const NormRun &r, const float *y, int64_t ys, double tol = 1e-5) {
  const std::vector<double> ref = normReference(r);
  int reported = 0;
  for (int64_t i = 0; i < r.c.rows; ++i)
    for (int64_t j = 0; j < r.c.dim; ++j) {
      const double want = ref[i * r.c.dim + j];
      const float got = y[i * ys + j];
      if (std::isnan(want)) {
        if (!std::isnan(got) && reported++ < 5)
          ADD_FAILURE() << "expected NaN at " << i << "," << j << ", got " << got << "; "
                        << r.c.str();
        continue;
      }
      if (!(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want))) && reported++ < 5)
        ADD_FAILURE() << "at " << i << "," << j << ": got " << got << ", want " << want << "; "
                      << r.c.str();
    }
}

void expectNormGuardsIntact(NormRun &r) {
  for (int64_t g = 0; g < kGuard; ++g) {
    ASSERT_EQ(r.yBuf[g], kSentinel) << "write before the output; " << r.c.str();
    ASSERT_EQ(r.yBuf[r.yBuf.size() - 1 - g], kSentinel) << "write after the output; "
                                                         << r.c.str();
  }
  for (int64_t i = 0; i < r.c.rows; ++i)
    for (int64_t j = r.c.dim; j < r.ys; ++j)
      ASSERT_EQ(r.y()[i * r.ys + j], kSentinel) << "write into a row gap; " << r.c.str();
}

void checkNorm(const NormCase &c, double tol = 1e-5) {
  NormRun r = makeNormRun(c);
  runKernel(r, r.x.data(), r.xs, r.y(), r.ys);
  expectNormGuardsIntact(r);
  expectMatches(r, r.y(), r.ys, tol);
}

const NormVariant kVariants[] = {TFC_NORM_LAYER, TFC_NORM_STD};

TEST(LayerNormCpu, Shapes) {
  uint32_t seed = 1;
  for (NormVariant v : kVariants)
    for (int64_t dim : {2, 3, 7, 16, 64, 100, 512, 768, 1000, 4096})
      for (int64_t rows : {1, 3, 17}) {
        NormCase c;
        c.variant = v;
        c.dim = dim;
        c.rows = rows;
        c.seed = seed++;
        checkNorm(c);
      }
}

TEST(LayerNormCpu, StridesWithGaps) {
  uint32_t seed = 100;
  for (NormVariant v : kVariants)
    for (int64_t dim : {5, 64, 513}) {
      NormCase c;
      c.variant = v;
      c.dim = dim;
      c.rows = 9;
      c.xExtra = 3;
      c.yExtra = 11;
      c.seed = seed++;
      checkNorm(c);
    }
}

TEST(LayerNormCpu, EpsPlacementDistinguishesTheVariants) {
  // Spread ~1e-3: the variance (~3e-7) and the std (~6e-4) are both
  // comparable to eps, so eps inside vs outside the sqrt, and biased vs
  // unbiased, all change the result visibly.
  uint32_t seed = 200;
  for (NormVariant v : kVariants)
    for (float eps : {1e-5f, 1e-6f, 1e-3f, 0.1f, 1e-12f}) {
      NormCase c;
      c.variant = v;
      c.dim = 48;
      c.rows = 4;
      c.spread = 1e-3f;
      c.eps = eps;
      c.seed = seed++;
      checkNorm(c);
    }
  // The two variants must differ on the same input (guards against a swap).
  NormCase c;
  c.dim = 10;
  c.rows = 2;
  c.spread = 1e-3f;
  c.eps = 1e-6f;
  NormRun a = makeNormRun(c);
  runKernel(a, a.x.data(), a.xs, a.y(), a.ys);
  c.variant = TFC_NORM_STD;
  NormRun b = makeNormRun(c);
  runKernel(b, b.x.data(), b.xs, b.y(), b.ys);
  EXPECT_GT(std::fabs(a.y()[0] - b.y()[0]), 1e-3);
}

TEST(LayerNormCpu, LargeMeanSmallSpreadKeepsPrecision) {
  // |mean| / std ~ 1e4: a one-pass E[x^2] - E[x]^2 in f32 would be garbage,
  // and even rounding the mean to f32 before centering would cost ~1e-4.
  uint32_t seed = 300;
  for (NormVariant v : kVariants)
    for (float center : {1000.0f, -3.0e4f}) {
      NormCase c;
      c.variant = v;
      c.dim = 768;
      c.rows = 5;
      c.center = center;
      c.spread = 0.5f;
      c.seed = seed++;
      checkNorm(c);
    }
}

TEST(LayerNormCpu, LargeMagnitudes) {
  uint32_t seed = 400;
  for (NormVariant v : kVariants) {
    NormCase c;
    c.variant = v;
    c.dim = 1024;
    c.rows = 3;
    c.spread = 1e4f;
    c.seed = seed++;
    checkNorm(c);
  }
}

TEST(LayerNormCpu, ConstantRowGivesBeta) {
  for (NormVariant v : kVariants) {
    NormCase c;
    c.variant = v;
    c.dim = 37;
    c.rows = 2;
    NormRun r = makeNormRun(c);
    for (int64_t i = 0; i < c.rows; ++i)
      std::fill(r.x.begin() + i * r.xs, r.x.begin() + i * r.xs + c.dim, 2.5f - i);
    runKernel(r, r.x.data(), r.xs, r.y(), r.ys);
    for (int64_t i = 0; i < c.rows; ++i)
      for (int64_t j = 0; j < c.dim; ++j)
        EXPECT_NEAR(r.y()[i * r.ys + j], r.beta[j], 1e-6) << i << "," << j;
  }
}

TEST(LayerNormCpu, OneElementRows) {
  // LayerNorm: x - mean = 0, so beta. StdNorm: the unbiased std of one value
  // is 0/0 in PyTorch, NaN.
  NormCase c;
  c.dim = 1;
  c.rows = 4;
  NormRun r = makeNormRun(c);
  runKernel(r, r.x.data(), r.xs, r.y(), r.ys);
  for (int64_t i = 0; i < c.rows; ++i)
    EXPECT_NEAR(r.y()[i], r.beta[0], 1e-6);
  c.variant = TFC_NORM_STD;
  NormRun s = makeNormRun(c);
  runKernel(s, s.x.data(), s.xs, s.y(), s.ys);
  for (int64_t i = 0; i < c.rows; ++i)
    EXPECT_TRUE(std::isnan(s.y()[i])) << i;
  expectNormGuardsIntact(s);
}

TEST(LayerNormCpu, NullGammaBetaMeanIdentity) {
  uint32_t seed = 500;
  for (NormVariant v : kVariants)
    for (int which = 0; which < 3; ++which) {
      NormCase c;
      c.variant = v;
      c.dim = 100;
      c.rows = 3;
      c.withGamma = which != 0;
      c.withBeta = which != 1;
      if (which == 2)
        c.withGamma = c.withBeta = false;
      c.seed = seed++;
      checkNorm(c);
    }
}

TEST(LayerNormCpu, InPlace) {
  for (NormVariant v : kVariants) {
    NormCase c;
    c.variant = v;
    c.dim = 300;
    c.rows = 7;
    c.xExtra = 4;
    NormRun r = makeNormRun(c);
    std::vector<float> inout = r.x;
    runKernel(r, inout.data(), r.xs, inout.data(), r.xs);
    expectMatches(r, inout.data(), r.xs);
  }
}

TEST(LayerNormCpu, EmptyInputsWriteNothing) {
  NormCase c;
  c.dim = 8;
  c.rows = 2;
  NormRun r = makeNormRun(c);
  layerNorm(TFC_NORM_LAYER, 0, c.dim, r.x.data(), r.xs, r.gamma.data(), r.beta.data(),
            c.eps, r.y(), r.ys);
  layerNorm(TFC_NORM_STD, c.rows, 0, r.x.data(), r.xs, r.gamma.data(), r.beta.data(),
            c.eps, r.y(), r.ys);
  for (float y : r.yBuf)
    ASSERT_EQ(y, kSentinel);
}

TEST(LayerNormCpu, DeterministicAndThreadCountIndependent) {
  const int saved = omp_get_max_threads();
  for (NormVariant v : kVariants) {
    NormCase c;
    c.variant = v;
    c.dim = 1000; // rows * dim is past the kernel's threading threshold
    c.rows = 301;
    NormRun r = makeNormRun(c);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3, 1}) {
      omp_set_num_threads(threads);
      std::fill(r.yBuf.begin(), r.yBuf.end(), kSentinel);
      runKernel(r, r.x.data(), r.xs, r.y(), r.ys);
      results.push_back(r.yBuf);
    }
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(),
                               results[0].size() * sizeof(float)))
          << "run " << i << " differs; " << c.str();
  }
  omp_set_num_threads(saved);
}

} // namespace
} // namespace tfc::cpu
