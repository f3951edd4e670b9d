//===- PrecisionCpuTest.cpp - bf16 and int8 paths of the CPU backend ------===//
//
// The reduced-precision pieces of tfc compile --precision (docs/precision.md)
// against double-precision references:
// - f32 <-> bf16 conversion: the vector path equals the scalar rounding of
//   tfc/bf16.h (round to nearest even, NaN kept) on every tail length;
// - per-row u8 quantization: reconstruction error within half a step, zero
//   exact, all-zero rows, constant rows, and inf/NaN rows flagged;
// - linear layers with bf16 and int8 weights, every input/output dtype, bias,
//   activations and residual, against the reference on the dequantized
//   weights (int8: within the quantization error bound; bf16: within bf16
//   rounding of the inputs);
// - layer norm, attention and the token embedding reading and writing bf16
//   (the plan's dtypes) against their f32 results.
//
//===----------------------------------------------------------------------===//

#include "backends/cpu/convert_cpu.h"
#include "backends/cpu/kernels_cpu.h"
#include "backends/cpu/linear_dnnl.h"
#include "tests/reference/Reference.h"
#include "tfc/abi.h"
#include "tfc/bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tfc::cpu {
namespace {

std::vector<float> randomVec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(g);
  return v;
}

std::vector<uint16_t> toBf16(const std::vector<float> &x) {
  std::vector<uint16_t> y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = tfc_f32_to_bf16(x[i]);
  return y;
}

std::vector<float> fromBf16(const std::vector<uint16_t> &x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = tfc_bf16_to_f32(x[i]);
  return y;
}

TEST(Bf16, ScalarRoundingIsNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 1.0 and 1 + 2^-7: ties go to even (1.0).
  EXPECT_EQ(tfc_f32_to_bf16(1.0f + 0x1p-8f), tfc_f32_to_bf16(1.0f));
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: goes up.
  EXPECT_EQ(tfc_bf16_to_f32(tfc_f32_to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(tfc_bf16_to_f32(tfc_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(tfc_bf16_to_f32(tfc_f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(tfc_bf16_to_f32(tfc_f32_to_bf16(INFINITY)), INFINITY);
  EXPECT_EQ(tfc_bf16_to_f32(tfc_f32_to_bf16(-0.0f)), -0.0f);
  // The largest finite float rounds up to infinity, as in PyTorch.
  EXPECT_EQ(tfc_bf16_to_f32(tfc_f32_to_bf16(std::numeric_limits<float>::max())), INFINITY);
}

TEST(Bf16, BulkConversionMatchesScalarOnEveryTail) {
  for (int64_t n : {0, 1, 15, 16, 17, 31, 32, 33, 100, 1000}) {
    std::vector<float> x = randomVec(n, 7 + n, -1e4f, 1e4f);
    if (n > 3) {
      x[1] = std::nanf("");
      x[2] = -INFINITY;
      x[3] = 1.0f + 0x1p-8f; // a tie
    }
    std::vector<uint16_t> y(n), want = toBf16(x);
    f32ToBf16(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(x[i]))
        EXPECT_TRUE(std::isnan(tfc_bf16_to_f32(y[i]))) << i;
      else
        EXPECT_EQ(y[i], want[i]) << "n=" << n << " i=" << i;
    }
    std::vector<float> back(n);
    bf16ToF32(y.data(), back.data(), n);
    for (int64_t i = 0; i < n; ++i)
      if (!std::isnan(x[i]))
        EXPECT_EQ(back[i], tfc_bf16_to_f32(want[i])) << i;
  }
}

TEST(QuantizeRows, ReconstructsWithinHalfAStep) {
  const int64_t rows = 5, k = 77; // not a multiple of 16: the scalar tail too
  std::vector<float> x = randomVec(rows * k, 3, -2.0f, 3.0f);
  for (int64_t i = 0; i < k; ++i)
    x[2 * k + i] = std::max(0.0f, x[2 * k + i]); // a ReLU row: only >= 0
  x[1 * k + 5] = 0.0f;
  std::vector<uint8_t> q(rows * k);
  std::vector<float> s(rows);
  std::vector<int32_t> z(rows);
  for (bool bf : {false, true}) {
    std::vector<uint16_t> xb = toBf16(x);
    std::vector<float> ref = bf ? fromBf16(xb) : x;
    quantizeRows(bf ? (const void *)xb.data() : (const void *)x.data(), bf, rows, k, q.data(),
                 s.data(), z.data());
    for (int64_t r = 0; r < rows; ++r) {
      float lo = 0, hi = 0;
      for (int64_t i = 0; i < k; ++i) {
        lo = std::min(lo, ref[r * k + i]);
        hi = std::max(hi, ref[r * k + i]);
      }
      EXPECT_NEAR(s[r], (hi - lo) / 255.0f, 1e-6f * (hi - lo));
      for (int64_t i = 0; i < k; ++i) {
        float back = s[r] * ((float)q[r * k + i] - (float)z[r]);
        EXPECT_LE(std::fabs(back - ref[r * k + i]), 0.5f * s[r] * 1.001f)
            << "bf16=" << bf << " r=" << r << " i=" << i;
      }
    }
    // Zero is exact (a ReLU's zeros, padding).
    EXPECT_EQ(s[1] * ((float)q[1 * k + 5] - (float)z[1]), 0.0f);
    EXPECT_EQ(z[2], 0); // a non-negative row uses the whole 0..255 range
  }
}

TEST(QuantizeRows, ZeroConstantAndNonFiniteRows) {
  const int64_t k = 40;
  std::vector<float> x(4 * k, 0.0f);
  std::fill(x.begin() + k, x.begin() + 2 * k, -2.5f);
  x[2 * k + 7] = std::nanf("");
  x[3 * k + 39] = INFINITY;
  std::vector<uint8_t> q(4 * k, 99);
  std::vector<float> s(4);
  std::vector<int32_t> z(4);
  quantizeRows(x.data(), false, 4, k, q.data(), s.data(), z.data());
  EXPECT_EQ(s[0], 0.0f); // all zeros: scale 0, output = bias
  for (int64_t i = 0; i < k; ++i)
    EXPECT_EQ(q[i], 0);
  // A constant row is exact: its range is [c, 0].
  for (int64_t i = 0; i < k; ++i)
    EXPECT_FLOAT_EQ(s[1] * ((float)q[k + i] - (float)z[1]), -2.5f);
  EXPECT_TRUE(std::isnan(s[2])); // NaN in the row: the output row is NaN
  EXPECT_TRUE(std::isnan(s[3])); // inf too
}

// Issue 21: every row quantizes to defined values (docs/precision.md, "Non-finite
// values"): NaN or +-inf anywhere -> scale NaN, zero point and q 0; huge finite
// values quantize as any other; a range below 255 * FLT_MIN -> all zeros.
TEST(QuantizeRows, NonFiniteHugeAndSubnormalRows) {
  const int64_t k = 37, rows = 9; // 37: the vector loop and the scalar tail
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  const float big = 0.99f * std::numeric_limits<float>::max(); // bf16 too: no overflow
  std::vector<float> x = randomVec(rows * k, 5, -1.0f, 1.0f);
  x[0 * k + 5] = nan;             // NaN in the vector part
  x[1 * k + 36] = inf;            // +inf in the tail
  x[2 * k + 0] = -inf;            // -inf
  for (int64_t i = 0; i < k; ++i) {
    x[3 * k + i] = nan;                                    // all NaN
    x[4 * k + i] = (i % 2 ? big : -big) * (1.0f - i / 64.0f); // huge, both signs
    x[5 * k + i] = (i % 2 ? 1e-40f : -1e-40f);               // subnormal
    x[6 * k + i] = big * (i / 36.0f);                        // [0, FLT_MAX]
    x[7 * k + i] = (i % 2 ? 1e-37f : -1e-37f);               // step below FLT_MIN
    x[8 * k + i] = (i % 3 - 1) * 1e-30f;                     // tiny but fine
  }
  std::vector<uint8_t> q(rows * k, 77);
  std::vector<float> s(rows);
  std::vector<int32_t> z(rows);
  for (bool bf : {false, true}) {
    std::vector<uint16_t> xb = toBf16(x);
    std::vector<float> ref = bf ? fromBf16(xb) : x;
    quantizeRows(bf ? (const void *)xb.data() : (const void *)x.data(), bf, rows, k, q.data(),
                 s.data(), z.data());
    for (int r : {0, 1, 2, 3}) {
      EXPECT_TRUE(std::isnan(s[r])) << "bf16=" << bf << " row " << r;
      EXPECT_EQ(z[r], 0) << "row " << r;
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(q[r * k + i], 0) << "row " << r << " i " << i;
    }
    for (int r : {5, 7}) { // a step below FLT_MIN: zeros, exactly as an all-zero row
      EXPECT_EQ(s[r], 0.0f) << "bf16=" << bf << " row " << r;
      EXPECT_EQ(z[r], 0);
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(q[r * k + i], 0) << "row " << r << " i " << i;
    }
    EXPECT_EQ(z[6], 0); // non-negative: the whole 0..255 range
    for (int r : {4, 6, 8}) {
      ASSERT_TRUE(std::isfinite(s[r]) && s[r] > 0.0f) << "bf16=" << bf << " row " << r;
      EXPECT_GE(z[r], 0);
      EXPECT_LE(z[r], 255);
      for (int64_t i = 0; i < k; ++i) {
        const double back = (double)s[r] * ((double)q[r * k + i] - z[r]);
        EXPECT_LE(std::fabs(back - ref[r * k + i]), 0.5 * s[r] * 1.001)
            << "bf16=" << bf << " row " << r << " i " << i;
      }
    }
  }
}

// The int8 linear layer on those rows: all-NaN output rows for NaN and +-inf
// inputs, finite ones for huge finite inputs, the rest unaffected.
TEST(QuantizeRows, Int8LinearOutputOnNonFiniteRows) {
  const int64_t rows = 5, k = 64, n = 24;
  std::vector<float> w = randomVec(n * k, 21, -0.5f, 0.5f), b = randomVec(n, 22);
  std::vector<int8_t> wq(n * k);
  std::vector<float> scales(n, 0.5f / 127.0f);
  for (size_t i = 0; i < w.size(); ++i)
    wq[i] = (int8_t)std::nearbyint(w[i] / scales[0]);
  std::string err;
  auto packed = packLinear(wq.data(), TFC_DTYPE_I8, n, k, scales.data(), 0, err);
  ASSERT_TRUE(packed) << err;
  std::vector<float> x = randomVec(rows * k, 23, -2.0f, 2.0f);
  x[0 * k + 3] = std::numeric_limits<float>::quiet_NaN();
  x[1 * k + 60] = INFINITY;
  x[2 * k + 9] = -INFINITY;
  for (int64_t i = 0; i < k; ++i)
    x[3 * k + i] = (i % 2 ? 1e30f : -1e30f);
  std::vector<float> y(rows * n, 0.0f);
  GemmCall call;
  call.x = x.data();
  call.xDtype = TFC_DTYPE_F32;
  call.rows = rows;
  call.bias = b.data();
  call.y = y.data();
  call.yDtype = TFC_DTYPE_F32;
  ASSERT_EQ(runPackedLinear(*packed, call), "");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      if (r < 3)
        ASSERT_TRUE(std::isnan(y[r * n + j])) << "r=" << r << " j=" << j;
      else
        ASSERT_TRUE(std::isfinite(y[r * n + j])) << "r=" << r << " j=" << j;
    }
}

/// y = act(x W^T + b) + res in double, on the weights as stored (dequantized):
/// the shared reference, tests/reference/Reference.h.
std::vector<double> referenceLinear(const std::vector<float> &x, const std::vector<float> &w,
                                    const float *b, const float *res, int64_t rows, int64_t k,
                                    int64_t n, int act) {
  const std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
  const std::vector<double> bd = b ? std::vector<double>(b, b + n) : std::vector<double>();
  const std::vector<double> rd = res ? std::vector<double>(res, res + rows * n)
                                     : std::vector<double>();
  std::vector<double> y(rows * n);
  ref::linear(rows, k, n, xd.data(), wd.data(), b ? bd.data() : nullptr,
              static_cast<ref::Activation>(act), res ? rd.data() : nullptr, y.data());
  return y;
}

struct LinearCase {
  uint32_t wdtype;
  uint32_t xdtype, ydtype;
  int64_t rows, k, n;
  bool bias, residual;
  int act;
};

class LinearPrecision : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearPrecision, MatchesReferenceOnStoredWeights) {
  const LinearCase c = GetParam();
  std::vector<float> w = randomVec(c.n * c.k, 11, -0.5f, 0.5f);
  std::vector<float> x = randomVec(c.rows * c.k, 12, -2.0f, 2.0f);
  std::vector<float> b = randomVec(c.n, 13), res = randomVec(c.rows * c.n, 14);
  // Store the weight as the compiler would, and keep its exact dequantized value.
  std::vector<uint16_t> wb;
  std::vector<int8_t> wq;
  std::vector<float> scales, wEff = w;
  const void *wdata = w.data();
  if (c.wdtype == TFC_DTYPE_BF16) {
    wb = toBf16(w);
    wEff = fromBf16(wb);
    wdata = wb.data();
  } else if (c.wdtype == TFC_DTYPE_I8) {
    wq.resize(w.size());
    scales.resize(c.n);
    for (int64_t j = 0; j < c.n; ++j) {
      float amax = 0;
      for (int64_t i = 0; i < c.k; ++i)
        amax = std::max(amax, std::fabs(w[j * c.k + i]));
      scales[j] = amax / 127.0f;
      for (int64_t i = 0; i < c.k; ++i) {
        wq[j * c.k + i] = (int8_t)std::nearbyint(w[j * c.k + i] / scales[j]);
        wEff[j * c.k + i] = scales[j] * wq[j * c.k + i];
      }
    }
    wdata = wq.data();
  }
  std::string err;
  auto packed = packLinear(wdata, c.wdtype, c.n, c.k, scales.empty() ? nullptr : scales.data(),
                           0, err);
  ASSERT_TRUE(packed) << err;
  // The input as the kernel sees it (bf16 inputs are rounded first).
  std::vector<uint16_t> xb = toBf16(x);
  std::vector<float> xEff = c.xdtype == TFC_DTYPE_BF16 || c.wdtype == TFC_DTYPE_BF16
                                ? fromBf16(xb)
                                : x;
  std::vector<float> y(c.rows * c.n, NAN);
  std::vector<uint16_t> yb(c.rows * c.n, 0xffff);
  GemmCall call;
  call.x = c.xdtype == TFC_DTYPE_BF16 ? (const void *)xb.data() : (const void *)x.data();
  call.xDtype = c.xdtype;
  call.rows = c.rows;
  call.bias = c.bias ? b.data() : nullptr;
  call.residual = c.residual ? res.data() : nullptr;
  call.act = c.act;
  call.y = c.ydtype == TFC_DTYPE_BF16 ? (void *)yb.data() : (void *)y.data();
  call.yDtype = c.ydtype;
  ASSERT_EQ(runPackedLinear(*packed, call), "");
  if (c.ydtype == TFC_DTYPE_BF16)
    y = fromBf16(yb);
  std::vector<double> want = referenceLinear(xEff, wEff, call.bias, call.residual, c.rows, c.k,
                                             c.n, c.act);
  // Error budget: int8 quantizes x per row to half a step (range / 510) per
  // element, so |dy| <= sum_i |w_i| * step / 2; bf16 output rounds to 2^-8
  // relative. f32 accumulation-order noise is far below both.
  for (int64_t r = 0; r < c.rows; ++r) {
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < c.k; ++i) {
      lo = std::min(lo, xEff[r * c.k + i]);
      hi = std::max(hi, xEff[r * c.k + i]);
    }
    for (int64_t j = 0; j < c.n; ++j) {
      double bound = 1e-4 * (1 + std::fabs(want[r * c.n + j]));
      if (c.wdtype == TFC_DTYPE_I8) {
        double l1 = 0;
        for (int64_t i = 0; i < c.k; ++i)
          l1 += std::fabs(wEff[j * c.k + i]);
        bound += l1 * (hi - lo) / 510.0 * 1.01;
      }
      if (c.ydtype == TFC_DTYPE_BF16)
        bound += std::fabs(want[r * c.n + j]) * 0x1p-8;
      ASSERT_NEAR(y[r * c.n + j], want[r * c.n + j], bound) << "r=" << r << " j=" << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, LinearPrecision,
    ::testing::Values(
        LinearCase{TFC_DTYPE_BF16, TFC_DTYPE_F32, TFC_DTYPE_F32, 7, 64, 48, true, false, 0},
        LinearCase{TFC_DTYPE_BF16, TFC_DTYPE_BF16, TFC_DTYPE_BF16, 33, 96, 80, true, false, 1},
        LinearCase{TFC_DTYPE_BF16, TFC_DTYPE_BF16, TFC_DTYPE_F32, 16, 64, 64, true, true, 0},
        LinearCase{TFC_DTYPE_BF16, TFC_DTYPE_BF16, TFC_DTYPE_BF16, 5, 40, 24, false, false, 2},
        // More rows than one oneDNN primitive takes (128): slices.
        LinearCase{TFC_DTYPE_BF16, TFC_DTYPE_BF16, TFC_DTYPE_BF16, 300, 64, 40, true, false, 1},
        LinearCase{TFC_DTYPE_BF16, TFC_DTYPE_BF16, TFC_DTYPE_F32, 260, 64, 48, true, true, 0},
        LinearCase{TFC_DTYPE_I8, TFC_DTYPE_F32, TFC_DTYPE_F32, 7, 64, 48, true, false, 0},
        LinearCase{TFC_DTYPE_I8, TFC_DTYPE_BF16, TFC_DTYPE_BF16, 33, 96, 80, true, false, 1},
        LinearCase{TFC_DTYPE_I8, TFC_DTYPE_BF16, TFC_DTYPE_F32, 16, 64, 64, true, true, 3},
        LinearCase{TFC_DTYPE_I8, TFC_DTYPE_F32, TFC_DTYPE_BF16, 1, 40, 24, false, true, 2},
        LinearCase{TFC_DTYPE_I8, TFC_DTYPE_BF16, TFC_DTYPE_F32, 130, 512, 96, true, false, 0},
        // f32: oneDNN below 16 rows; from 16 rows on, OpenBLAS with our
        // epilogue where cpu_isa.h picks it (no AVX-512), every epilogue.
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 3, 64, 48, true, true, 2},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 16, 64, 40, false, false, 0},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 20, 96, 80, true, true, 1},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 33, 64, 72, true, true, 2},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 130, 256, 96, false, true, 3},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 64, 128, 64, true, false, 0},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 600, 64, 48, true, false, 2},
        LinearCase{TFC_DTYPE_F32, TFC_DTYPE_F32, TFC_DTYPE_F32, 700, 64, 48, true, true, 1}));

/// A server sees every row count (each prompt length, each step's rows): the
/// primitives a weight's GEMMs make stay bounded (at most one per row count
/// up to 128, matmul and eltwise), and a GEMM of any rows equals the
/// reference (the slices' offsets).
TEST(LinearPrecision, PrimitivesStayBoundedOverRowCounts) {
  const int64_t k = 48, n = 40, maxRows = 400;
  std::vector<float> w = randomVec(n * k, 21, -0.5f, 0.5f), b = randomVec(n, 22);
  std::vector<float> x = randomVec(maxRows * k, 23, -2.0f, 2.0f);
  std::string err;
  auto packed = packLinear(w.data(), TFC_DTYPE_F32, n, k, nullptr, 0, err);
  ASSERT_TRUE(packed) << err;
  const size_t before = dnnlPrimitivesMade();
  std::vector<float> y(maxRows * n);
  for (int64_t rows = 1; rows <= maxRows; ++rows) {
    GemmCall call;
    call.x = x.data();
    call.xDtype = TFC_DTYPE_F32;
    call.rows = rows;
    call.bias = b.data();
    call.act = TFC_ACT_GELU; // a oneDNN post-op, or OpenBLAS's eltwise epilogue
    call.y = y.data();
    call.yDtype = TFC_DTYPE_F32;
    ASSERT_EQ(runPackedLinear(*packed, call), "") << rows << " rows";
  }
  EXPECT_LE(dnnlPrimitivesMade() - before, 2u * 128u);
  const std::vector<double> want = referenceLinear(x, w, b.data(), nullptr, maxRows, k, n,
                                                   TFC_ACT_GELU);
  for (int64_t i = 0; i < maxRows * n; ++i)
    ASSERT_NEAR(y[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "element " << i;
}

TEST(LinearPrecision, RejectsDtypesTheWeightCannotServe) {
  std::vector<float> w = randomVec(8 * 8, 1);
  std::string err;
  auto packed = packLinear(w.data(), TFC_DTYPE_F32, 8, 8, nullptr, 0, err);
  ASSERT_TRUE(packed) << err;
  std::vector<uint16_t> x(8);
  std::vector<float> y(8);
  GemmCall c;
  c.x = x.data();
  c.xDtype = TFC_DTYPE_BF16;
  c.rows = 1;
  c.y = y.data();
  c.yDtype = TFC_DTYPE_F32;
  EXPECT_EQ(runPackedLinear(*packed, c),
            "a linear layer with f32 weights cannot read bf16 or write f32");
  EXPECT_FALSE(packLinear(w.data(), TFC_DTYPE_I8, 8, 8, nullptr, 0, err));
  EXPECT_EQ(err, "an int8 linear weight has no scales");
  EXPECT_FALSE(packLinear(w.data(), TFC_DTYPE_I64, 8, 8, nullptr, 0, err));
  EXPECT_EQ(err, "a linear weight of dtype i64 is not supported on the CPU");
}

/// Runs |kernel| once with f32 tensors and once with the listed inputs and
/// the output in bf16; the bf16 result must equal the f32 kernel on the
/// bf16-rounded inputs, to the output's bf16 rounding.
struct Arg {
  std::vector<float> data;
  std::vector<int64_t> shape;
  uint32_t dtype = TFC_DTYPE_F32;
  std::vector<int64_t> ids;
};

void expectBf16MatchesF32(uint32_t kernel, std::vector<Arg> args, std::vector<size_t> bf16Inputs,
                          std::vector<int64_t> outShape, bool bf16Out,
                          const std::vector<int64_t> &ints, const std::vector<double> &floats) {
  // f32 reference on the rounded inputs.
  for (size_t i : bf16Inputs)
    args[i].data = fromBf16(toBf16(args[i].data));
  auto run = [&](bool reduced, std::vector<float> &out) {
    std::vector<std::vector<uint16_t>> store(args.size());
    std::vector<Tensor> ts(args.size());
    std::vector<const Tensor *> in;
    for (size_t i = 0; i < args.size(); ++i) {
      Tensor &t = ts[i];
      t.shape = args[i].shape;
      t.dtype = args[i].dtype;
      if (t.dtype == TFC_DTYPE_I64) {
        t.data = args[i].ids.data();
      } else if (reduced && std::count(bf16Inputs.begin(), bf16Inputs.end(), i)) {
        store[i] = toBf16(args[i].data);
        t.data = store[i].data();
        t.dtype = TFC_DTYPE_BF16;
      } else {
        t.data = args[i].data.data();
      }
      in.push_back(&t);
    }
    Tensor o;
    o.shape = outShape;
    std::vector<uint16_t> ob(o.numel());
    out.assign(o.numel(), NAN);
    o.dtype = reduced && bf16Out ? TFC_DTYPE_BF16 : TFC_DTYPE_F32;
    o.data = reduced && bf16Out ? (void *)ob.data() : (void *)out.data();
    ASSERT_EQ(runKernel(kernel, in, o, ints, floats).message(), "");
    if (reduced && bf16Out)
      out = fromBf16(ob);
  };
  std::vector<float> want, got;
  run(false, want);
  run(true, got);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], (bf16Out ? 0x1p-8 : 1e-6) * std::fabs(want[i]) + 1e-6)
        << tfc_kernel_name(kernel) << " element " << i;
}

TEST(Bf16Kernels, LayerNormReadsAndWritesBf16) {
  const int64_t rows = 6, d = 48;
  Arg x{randomVec(rows * d, 21, -3, 3), {2, 3, d}};
  Arg g{randomVec(d, 22), {d}}, b{randomVec(d, 23), {d}};
  for (int64_t variant : {0, 1}) {
    expectBf16MatchesF32(TFC_KERNEL_LAYER_NORM, {x, g, b}, {}, {2, 3, d}, true, {variant},
                         {1e-6});
    expectBf16MatchesF32(TFC_KERNEL_LAYER_NORM, {x, g, b}, {0}, {2, 3, d}, true, {variant},
                         {1e-6});
    expectBf16MatchesF32(TFC_KERNEL_LAYER_NORM, {x, g, b}, {0}, {2, 3, d}, false, {variant},
                         {1e-6});
  }
}

TEST(Bf16Kernels, AttentionReadsAndWritesBf16) {
  const int64_t B = 2, S = 19, D = 32, H = 4;
  Arg q{randomVec(B * S * D, 31, -2, 2), {B, S, D}};
  Arg k{randomVec(B * S * D, 32, -2, 2), {B, S, D}};
  Arg v{randomVec(B * S * D, 33, -2, 2), {B, S, D}};
  Arg ids{{}, {B, S}, TFC_DTYPE_I64, std::vector<int64_t>(B * S, 5)};
  ids.ids[S - 1] = ids.ids[S - 2] = 0; // padding keys in batch 0
  // mask kinds: key_padding (ids), causal, padding_causal
  expectBf16MatchesF32(TFC_KERNEL_ATTENTION, {q, k, v, ids}, {0, 1, 2}, {B, S, D}, true,
                       {1, H, 0}, {0.25, -1e9});
  expectBf16MatchesF32(TFC_KERNEL_ATTENTION, {q, k, v}, {0, 1, 2}, {B, S, D}, true, {2, H, 0},
                       {0.25, -1e9});
  expectBf16MatchesF32(TFC_KERNEL_ATTENTION, {q, k, v, ids}, {0, 1, 2}, {B, S, D}, false,
                       {3, H, 0}, {0.25, -1e9});
}

TEST(Bf16Kernels, TokenEmbeddingFromBf16AndInt8Tables) {
  const int64_t V = 10, D = 20, B = 2, S = 3;
  std::vector<float> table = randomVec(V * D, 41);
  std::vector<float> pe = randomVec(8 * D, 42);
  std::vector<int64_t> ids = {1, 4, 9, 0, 3, 3};
  // Reference: f32 table rounded / dequantized as stored.
  std::vector<uint16_t> tb = toBf16(table);
  std::vector<int8_t> tq(V * D);
  std::vector<float> sc(V), tdeq(V * D);
  for (int64_t r = 0; r < V; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < D; ++c)
      amax = std::max(amax, std::fabs(table[r * D + c]));
    sc[r] = amax / 127.0f;
    for (int64_t c = 0; c < D; ++c) {
      tq[r * D + c] = (int8_t)std::nearbyint(table[r * D + c] / sc[r]);
      tdeq[r * D + c] = sc[r] * tq[r * D + c];
    }
  }
  for (uint32_t dt : {TFC_DTYPE_BF16, TFC_DTYPE_I8}) {
    std::vector<float> eff = dt == TFC_DTYPE_BF16 ? fromBf16(tb) : tdeq;
    Tensor tid{ids.data(), TFC_DTYPE_I64, {B, S}};
    Tensor ttab{dt == TFC_DTYPE_BF16 ? (void *)tb.data() : (void *)tq.data(), dt, {V, D}};
    Tensor tpe{pe.data(), TFC_DTYPE_F32, {8, D}};
    if (dt == TFC_DTYPE_I8)
      ttab.scales = sc.data(); // the weight's descriptor, not an operand
    std::vector<const Tensor *> in{&tid, &ttab, &tpe};
    std::vector<float> out(B * S * D, NAN);
    Tensor o{out.data(), TFC_DTYPE_F32, {B, S, D}};
    ASSERT_EQ(runKernel(TFC_KERNEL_TOKEN_EMBEDDING, in, o, {1, 1, 0, 0}, {2.0}).message(), "");
    for (int64_t i = 0; i < B * S; ++i)
      for (int64_t c = 0; c < D; ++c)
        ASSERT_NEAR(out[i * D + c], eff[ids[i] * D + c] * 2.0f + pe[(i % S) * D + c], 1e-6)
            << tfc_dtype_name(dt) << " token " << i;
    ids[2] = V; // out of range: an error, not a read past the table
    EXPECT_EQ(runKernel(TFC_KERNEL_TOKEN_EMBEDDING, in, o, {1, 1, 0, 0}, {2.0}).message(),
              "token id 10 is out of range [0, 10)");
    ids[2] = 9;
  }
}

} // namespace
} // namespace tfc::cpu
