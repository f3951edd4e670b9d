//===- GemmQ4Test.cpp - int4 linear layers on the CPU ---------------------===//
//
// The int4 path of a linear layer (backends/cpu/gemm_q4_avx2.h through
// packLinear / runPackedLinear) against a double-precision reference that
// takes the same two documented quantization steps: the weights as stored
// (scale[n, k / g] * q, q in -8..7) and the activations per block of 32
// (scale amax / 127, round half to even). What is left is f32 summation, so
// the bound is tight: 2e-5 of the sum of |terms|.
// - shapes over the tiles' edges: rows 1..9 (decode pairs, tiles of 4), n
//   odd, k not a multiple of 32, groups of 32, 64 and 128 (and one wider than
//   k); and 32 and 45 rows (prefill's row blocks and tiles of 4);
// - extreme codes: every weight -8 or 7 against activations at +-amax, where
//   a saturating vpmaddubsw form would be wrong;
// - f32 and bf16 inputs and outputs, bias, activation and residual;
// - NaN and inf inputs give NaN rows, and only those;
// - bad packs: no scales, a group not a multiple of 32.
// The group-wise int8 path (gemm_s8_avx2.h's gemmQ8S16, `--precision int8` on
// decoder-only models) takes the same checks with codes -128..127 (extremes
// -128 and 127) and activations quantized to s16 (scale amax / 32767), and
// again at 8 activation bits (`--activation-bits 8`: s8, amax / 127). All run
// their integer kernels at every row count.
// Where the CPU has AVX512_VNNI both run their VNNI forms (gemm_q_avx512.h),
// which promise the AVX2 forms' bits: checked directly, shape by shape.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/cpu_isa.h"
#include "backends/cpu/gemm_q4_avx2.h"
#include "backends/cpu/gemm_q_avx512.h"
#include "backends/cpu/gemm_s8_avx2.h"
#include "backends/cpu/linear_dnnl.h"
#include "tfc/abi.h"
#include "tfc/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace tfc::cpu {
namespace {

struct Q4Weight {
  std::vector<uint8_t> packed; // tfc's i4 layout, or the i8 codes
  std::vector<int8_t> q;       // the codes, for the reference
  std::vector<float> scales;   // [n, groups]
};

Q4Weight randomQ4(int64_t n, int64_t k, int64_t group, uint32_t seed, bool extreme = false,
                   bool int8 = false) {
  std::mt19937 g(seed);
  const int64_t groups = (k + group - 1) / group;
  Q4Weight w;
  w.packed.assign(int8 ? n * k : (n * k + 1) / 2, 0);
  w.q.resize(n * k);
  w.scales.resize(n * groups);
  for (auto &s : w.scales)
    s = std::uniform_real_distribution<float>(0.001f, 0.1f)(g);
  for (int64_t e = 0; e < n * k; ++e) {
    if (int8) {
      const int8_t q = extreme ? (e % 3 ? 127 : -128) : (int8_t)((int)(g() % 256) - 128);
      w.q[e] = q;
      w.packed[e] = (uint8_t)q;
      continue;
    }
    const int8_t q = extreme ? (e % 3 ? 7 : -8) : (int8_t)((int)(g() % 16) - 8);
    w.q[e] = q;
    w.packed[e / 2] |= (uint8_t)((q & 0xF) << (e % 2 ? 4 : 0));
  }
  return w;
}

/// The activations as the kernel quantizes them: per row, per block of 32,
/// to +-|levels| (127 for int4's s8, 32767 for group-wise int8's s16).
std::vector<double> quantizedX(const std::vector<float> &x, int64_t rows, int64_t k,
                               float levels) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < k; c0 += 32) {
      const int64_t c1 = std::min(k, c0 + 32);
      float amax = 0;
      for (int64_t c = c0; c < c1; ++c)
        amax = std::max(amax, std::fabs(x[r * k + c]));
      const float inv = amax > 0 ? levels / amax : 0.0f, d = amax / levels;
      for (int64_t c = c0; c < c1; ++c)
        out[r * k + c] = (double)d * std::nearbyint(x[r * k + c] * inv);
    }
  return out;
}

struct Case {
  int64_t rows, n, k, group;
  bool bias = false, residual = false, bf16In = false, bf16Out = false, extreme = false;
  int act = TFC_ACT_NONE;
  bool int8 = false;
  bool multiplier = false; ///< a gated FFN's product in the epilogue
  int actBits = 0;         ///< int8: 8-bit activation blocks (--activation-bits 8)
};

void check(const Case &c, uint32_t seed) {
  SCOPED_TRACE("rows " + std::to_string(c.rows) + " n " + std::to_string(c.n) + " k " +
               std::to_string(c.k) + " group " + std::to_string(c.group));
  const Q4Weight w = randomQ4(c.n, c.k, c.group, seed, c.extreme, c.int8);
  std::string err;
  auto p = packLinear(w.packed.data(), c.int8 ? TFC_DTYPE_I8 : TFC_DTYPE_I4, c.n, c.k,
                      w.scales.data(), c.group, err);
  ASSERT_TRUE(p) << err;
  std::mt19937 g(seed + 1);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(c.rows * c.k), b(c.n), res(c.rows * c.n), mul(c.rows * c.n);
  for (auto *v : {&x, &b, &res, &mul})
    for (float &f : *v)
      f = u(g);
  if (c.extreme) // +-amax in every block: the largest codes meet the largest weights
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = i % 2 ? 2.0f : -2.0f;
  std::vector<uint16_t> xb(x.size());
  if (c.bf16In)
    for (size_t i = 0; i < x.size(); ++i) {
      xb[i] = tfc_f32_to_bf16(x[i]);
      x[i] = tfc_bf16_to_f32(xb[i]);
    }
  const std::vector<double> xq =
      quantizedX(x, c.rows, c.k, c.int8 && c.actBits != 8 ? 32767.0f : 127.0f);
  std::vector<float> y(c.rows * c.n, -1.0f);
  std::vector<uint16_t> yb(c.rows * c.n);
  GemmCall call;
  call.x = c.bf16In ? (const void *)xb.data() : x.data();
  call.xDtype = c.bf16In ? TFC_DTYPE_BF16 : TFC_DTYPE_F32;
  call.rows = c.rows;
  call.bias = c.bias ? b.data() : nullptr;
  call.residual = c.residual ? res.data() : nullptr;
  call.multiplier = c.multiplier ? mul.data() : nullptr;
  call.act = c.act;
  call.actBits = c.actBits;
  call.y = c.bf16Out ? (void *)yb.data() : y.data();
  call.yDtype = c.bf16Out ? TFC_DTYPE_BF16 : TFC_DTYPE_F32;
  ASSERT_EQ(runPackedLinear(*p, call), "");
  const int64_t groups = (c.k + c.group - 1) / c.group;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t i = 0; i < c.k; ++i) {
        const double t = (double)w.scales[j * groups + i / c.group] * w.q[j * c.k + i] *
                         xq[r * c.k + i];
        sum += t;
        mag += std::fabs(t);
      }
      if (c.bias)
        sum += b[j];
      if (c.act == TFC_ACT_RELU)
        sum = std::max(sum, 0.0);
      if (c.multiplier)
        sum *= mul[r * c.n + j];
      if (c.residual)
        sum += res[r * c.n + j];
      const double got = c.bf16Out ? tfc_bf16_to_f32(yb[r * c.n + j]) : y[r * c.n + j];
      const double tol = 2e-5 * (mag + 1.0) + (c.bf16Out ? std::fabs(sum) / 128.0 : 0.0);
      ASSERT_NEAR(got, sum, tol) << "r " << r << " j " << j;
    }
}

TEST(GemmQ4, ShapesOverTheTileEdges) {
  uint32_t seed = 1;
  for (int64_t rows : {1, 2, 3, 4, 5, 8, 9})
    for (int64_t group : {32, 64, 128})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {33, 200}, {16, 256}})
        check({rows, n, k, group}, seed++);
  check({3, 5, 40, 128}, 99); // one group, wider than k
  for (int64_t rows : {32, 45, 130}) // prefill: tiles of 4 over row blocks of 64
    check({rows, 300, 96, 32, true, true}, 100 + rows);
}

TEST(GemmQ4, ExtremeCodesAreExact) {
  for (int64_t rows : {1, 6})
    check({rows, 9, 128, 32, false, false, false, false, /*extreme=*/true}, 7);
}

TEST(GemmQ4, DtypesAndEpilogue) {
  check({5, 24, 96, 32, true, true, false, false}, 11);
  check({2, 24, 96, 64, true, false, true, false, false, TFC_ACT_RELU}, 12);
  check({6, 24, 96, 32, false, true, true, true}, 13);
  check({1, 24, 96, 32, true, true, false, true}, 14);
  Case gated{5, 24, 96, 32, true, false, false, false, false, TFC_ACT_RELU};
  gated.multiplier = true;
  check(gated, 15);
  gated.rows = 70; // prefill's tiles
  gated.residual = true;
  check(gated, 16);
}

/// Rows 0-2 hold NaN, inf and -inf: their outputs are NaN, row 3's are not.
void expectNanRows(bool int8, int actBits = 0) {
  const int64_t rows = 4, n = 6, k = 64;
  const Q4Weight w = randomQ4(n, k, 32, 5, false, int8);
  std::string err;
  auto p = packLinear(w.packed.data(), int8 ? TFC_DTYPE_I8 : TFC_DTYPE_I4, n, k,
                      w.scales.data(), 32, err);
  ASSERT_TRUE(p) << err;
  std::vector<float> x(rows * k, 0.5f), y(rows * n);
  x[0 * k + 3] = std::numeric_limits<float>::quiet_NaN();
  x[1 * k + 40] = INFINITY;
  x[2 * k + 63] = -INFINITY;
  GemmCall call;
  call.x = x.data();
  call.xDtype = TFC_DTYPE_F32;
  call.rows = rows;
  call.actBits = actBits;
  call.y = y.data();
  call.yDtype = TFC_DTYPE_F32;
  ASSERT_EQ(runPackedLinear(*p, call), "");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      EXPECT_EQ(std::isnan(y[r * n + j]), r < 3) << "r " << r << " j " << j;
}

TEST(GemmQ4, NonFiniteInputsGiveNanRows) { expectNanRows(false); }

TEST(GemmQ8, ShapesOverTheTileEdges) {
  uint32_t seed = 200;
  for (int64_t rows : {1, 2, 3, 4, 5, 8, 9, 33})
    for (int64_t group : {32, 64, 128})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {33, 200}, {16, 256}})
        check({rows, n, k, group, false, false, false, false, false, TFC_ACT_NONE, true},
              seed++);
  check({3, 5, 40, 128, false, false, false, false, false, TFC_ACT_NONE, true}, 299);
  // Prefill: 130 rows of 1,056 s16 inputs (268 KB) take the row blocks of 48.
  check({130, 40, 1056, 32, true, false, false, false, false, TFC_ACT_NONE, true}, 300);
}

TEST(GemmQ8, ExtremeCodesAreExact) {
  for (int64_t rows : {1, 6})
    check({rows, 9, 128, 32, false, false, false, false, true, TFC_ACT_NONE, true}, 8);
}

TEST(GemmQ8, DtypesAndEpilogue) {
  check({5, 24, 96, 32, true, true, false, false, false, TFC_ACT_NONE, true}, 21);
  check({2, 24, 96, 64, true, false, true, false, false, TFC_ACT_RELU, true}, 22);
  check({6, 24, 96, 32, false, true, true, true, false, TFC_ACT_NONE, true}, 23);
  Case gated{1, 24, 96, 32, false, false, false, false, false, TFC_ACT_RELU, true};
  gated.multiplier = true;
  check(gated, 24);
  gated.rows = 70;
  gated.bf16Out = true;
  check(gated, 25);
}

TEST(GemmQ8, NonFiniteInputsGiveNanRows) {
  expectNanRows(true);
  const Q4Weight w = randomQ4(6, 64, 32, 5, false, true);
  std::string err;
  EXPECT_FALSE(packLinear(w.packed.data(), TFC_DTYPE_I8, 6, 64, w.scales.data(), 48, err));
  EXPECT_EQ(err, "an int8 linear weight's group of 48 is not a multiple of 32");
}

/// Group-wise int8 weights with 8-bit activation blocks (`tfc compile
/// --activation-bits 8`): the same checks against activations quantized to
/// +-127 per block. On VNNI this runs vpdpbusd on the weights made unsigned
/// (q + 128), where -128 and 127 are the extremes of u = 0 and 255.
Case a8(Case c) {
  c.int8 = true;
  c.actBits = 8;
  return c;
}

TEST(GemmQ8A8, ShapesOverTheTileEdges) {
  uint32_t seed = 500;
  for (int64_t rows : {1, 2, 3, 4, 5, 8, 9, 33})
    for (int64_t group : {32, 64, 128})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {33, 200}, {16, 256}})
        check(a8({rows, n, k, group}), seed++);
  check(a8({130, 40, 1056, 32, true}), 600); // prefill's row blocks
}

TEST(GemmQ8A8, ExtremeCodesAreExact) {
  for (int64_t rows : {1, 6, 70})
    check(a8({rows, 9, 128, 32, false, false, false, false, /*extreme=*/true}), 9);
}

TEST(GemmQ8A8, DtypesAndEpilogue) {
  check(a8({5, 24, 96, 32, true, true, false, false}), 31);
  check(a8({2, 24, 96, 64, true, false, true, false, false, TFC_ACT_RELU}), 32);
  Case gated = a8({70, 24, 96, 32, false, true, true, true, false, TFC_ACT_RELU});
  gated.multiplier = true;
  check(gated, 33);
}

TEST(GemmQ8A8, NonFiniteInputsGiveNanRows) { expectNanRows(true, 8); }

/// A token table tied to a group-wise int8 lm_head reads the packed rows: the
/// same values as model.bin's (q * scale * mul).
TEST(GemmQ8, PackedRowsAreTheStoredRows) {
  const int64_t n = 19, k = 200, group = 64, groups = (k + group - 1) / group;
  const Q4Weight w = randomQ4(n, k, group, 9, false, true);
  std::string err;
  auto p = packLinear(w.packed.data(), TFC_DTYPE_I8, n, k, w.scales.data(), group, err);
  ASSERT_TRUE(p) << err;
  std::vector<float> row(k, 1.0f);
  for (int64_t j : {0, 5, 16, 18}) {
    ASSERT_TRUE(packedRowTimes(*p, j, 0.5f, row.data(), false));
    for (int64_t i = 0; i < k; ++i)
      ASSERT_EQ(row[i], (float)w.q[j * k + i] * (0.5f * w.scales[j * groups + i / group]))
          << "j " << j << " i " << i;
  }
  EXPECT_FALSE(packedRowTimes(*p, n, 1.0f, row.data(), false));
}

/// Every dense layout a linear weight is packed in (OpenBLAS's plain [K, N],
/// oneDNN's blocked formats for f32, bf16 and int8 with VNNI, our AVX2 int8
/// panels) gives back a row's stored values, so that a tied token table reads
/// its rows from the packed copy on every CPU path (the file's pages of the
/// weight are dropped after packing: runtime/device_cpu.cc).
TEST(PackedRows, EveryDenseLayoutGivesTheStoredRows) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{70, 40}, {130, 96}, {3, 600}}) {
    std::mt19937 g(n * 1000 + k);
    std::vector<float> f32(n * k), scales(n);
    std::vector<uint16_t> bf16(n * k);
    std::vector<int8_t> i8(n * k);
    for (int64_t e = 0; e < n * k; ++e) {
      f32[e] = std::uniform_real_distribution<float>(-1.0f, 1.0f)(g);
      bf16[e] = tfc_f32_to_bf16(f32[e]);
      i8[e] = (int8_t)((int)(g() % 255) - 127); // -128 is clipped by the AVX2 panels
    }
    for (float &s : scales)
      s = std::uniform_real_distribution<float>(0.001f, 0.1f)(g);
    for (uint32_t dtype : {TFC_DTYPE_F32, TFC_DTYPE_BF16, TFC_DTYPE_I8}) {
      SCOPED_TRACE(std::string(tfc_dtype_name(dtype)) + " n " + std::to_string(n) + " k " +
                   std::to_string(k));
      const void *data = dtype == TFC_DTYPE_F32    ? (const void *)f32.data()
                         : dtype == TFC_DTYPE_BF16 ? (const void *)bf16.data()
                                                   : (const void *)i8.data();
      std::string err;
      auto p = packLinear(data, dtype, n, k, dtype == TFC_DTYPE_I8 ? scales.data() : nullptr, 0,
                          err);
      ASSERT_TRUE(p) << err;
      std::vector<float> row(k);
      for (int64_t j : {int64_t{0}, n / 2, n - 1}) {
        ASSERT_TRUE(packedRowTimes(*p, j, 0.5f, row.data(), false)) << describeCpuPaths();
        for (int64_t i = 0; i < k; ++i) {
          const float want = dtype == TFC_DTYPE_F32    ? f32[j * k + i] * 0.5f
                             : dtype == TFC_DTYPE_BF16 ? tfc_bf16_to_f32(bf16[j * k + i]) * 0.5f
                                                       : (float)i8[j * k + i] * (0.5f * scales[j]);
          ASSERT_EQ(row[i], want) << "j " << j << " i " << i;
        }
        // accumulate: (+)= the same values (the compiler may fuse the
        // product and the sum into one rounding)
        std::vector<float> acc(k, 1.0f);
        ASSERT_TRUE(packedRowTimes(*p, j, 0.5f, acc.data(), true));
        for (int64_t i = 0; i < k; ++i)
          ASSERT_NEAR(acc[i], 1.0f + row[i], 1e-6f * std::max(1.0f, std::fabs(row[i])))
              << "j " << j << " i " << i;
      }
      EXPECT_FALSE(packedRowTimes(*p, n, 1.0f, row.data(), false));
    }
  }
}

/// The row-tile layout that the VNNI forms read (gemm_s8_avx2.h) holds the
/// row layout's codes |q| (as |qt|: s8 or s16) and each per-block value
/// (pairs of the row layout's [rows, blocks] and the tiled one's), bit for bit.
template <typename Q, typename QT>
void expectTiled(int64_t rows, int64_t kPad, int64_t blocks, const std::vector<Q> &q,
                 const std::vector<QT> &qt,
                 std::initializer_list<std::pair<const float *, const float *>> perBlock) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < kPad; ++i) {
      const int64_t at = sizeof(QT) == 2 ? s16TileIndex(r, i, blocks, rows)
                                         : s8TileIndex(r, i, blocks, rows);
      ASSERT_EQ(qt[at], q[r * kPad + i]) << "row " << r << " input " << i;
    }
    for (int64_t b = 0; b < blocks; ++b)
      for (auto [rowv, tiledv] : perBlock)
        ASSERT_EQ(std::memcmp(&tiledv[tileScaleIndex(r, b, blocks, rows)], &rowv[r * blocks + b],
                              sizeof(float)),
                  0)
            << "row " << r << " block " << b;
  }
}

/// The VNNI forms give the AVX2 forms' bits, at decoding's row counts, over
/// the 8-row tiles' edges and over prefill's row blocks.
TEST(GemmVnni, SameBitsAsAvx2) {
  if (!cpuPaths().avx512Vnni)
    GTEST_SKIP() << "no AVX512_VNNI within the cap: " << describeCpuPaths();
  uint32_t seed = 400;
  for (int64_t rows : {1, 2, 3, 7, 8, 9, 16, 63, 64, 65, 300})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5, 32}, {33, 200}, {48, 1056}}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " n " + std::to_string(n) + " k " +
                   std::to_string(k));
      std::mt19937 g(seed);
      std::uniform_real_distribution<float> u(-2.0f, 2.0f);
      std::vector<float> x(rows * k);
      for (float &f : x)
        f = u(g);
      for (int form : {0, 1, 2}) { // int4, int8, int8 with 8-bit activations
        const bool int8 = form != 0;
        const Q4Weight w = randomQ4(n, k, 64, seed++, false, int8);
        std::vector<float> a(rows * n), b(rows * n);
        if (form == 2) {
          // The AVX2 form is the s16 kernel on the same codes (127 levels).
          auto p = packQ8(reinterpret_cast<const int8_t *>(w.packed.data()), w.scales.data(), n,
                          k, 64);
          ASSERT_TRUE(p);
          const int64_t tiled = tiledRows(rows);
          std::vector<int16_t> q16(rows * p->kPad);
          std::vector<int8_t> q8(tiled * p->kPad);
          std::vector<float> d16(rows * p->blocks), d8(tiled * p->blocks);
          std::vector<int32_t> qsum(tiled * p->blocks);
          quantizeS16Blocks(x.data(), false, rows, k, p->blocks, q16.data(), d16.data(), 127.0f);
          quantizeS8Blocks(x.data(), false, rows, k, p->blocks, q8.data(), d8.data(),
                           qsum.data());
          // The same codes and scales, in the row-tile layout, and the sums.
          ASSERT_NO_FATAL_FAILURE(
              expectTiled(rows, p->kPad, p->blocks, q16, q8, {{d16.data(), d8.data()}}));
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t b = 0; b < p->blocks; ++b) {
              int32_t sum = 0;
              for (int64_t i = b * 32; i < b * 32 + 32; ++i)
                sum += q16[r * p->kPad + i];
              ASSERT_EQ(qsum[tileScaleIndex(r, b, p->blocks, rows)], sum)
                  << "row " << r << " block " << b;
            }
          gemmQ8S16Avx2(*p, q16.data(), d16.data(), rows, a.data());
          avx512::gemmQ8S8(*p, q8.data(), d8.data(), qsum.data(), rows, b.data());
        } else if (int8) {
          auto p = packQ8(reinterpret_cast<const int8_t *>(w.packed.data()), w.scales.data(), n,
                          k, 64);
          ASSERT_TRUE(p);
          // The VNNI form reads the row-tile layout: the same codes.
          const int64_t tiled = tiledRows(rows);
          std::vector<int16_t> q(rows * p->kPad), qt(tiled * p->kPad);
          std::vector<float> d(rows * p->blocks), dt(tiled * p->blocks);
          quantizeS16Blocks(x.data(), false, rows, k, p->blocks, q.data(), d.data());
          quantizeS16Blocks(x.data(), false, rows, k, p->blocks, qt.data(), dt.data(), 32767.0f,
                            true);
          ASSERT_NO_FATAL_FAILURE(
              expectTiled(rows, p->kPad, p->blocks, q, qt, {{d.data(), dt.data()}}));
          gemmQ8S16Avx2(*p, q.data(), d.data(), rows, a.data());
          avx512::gemmQ8S16(*p, qt.data(), dt.data(), rows, b.data());
        } else {
          auto p = packQ4(w.packed.data(), w.scales.data(), n, k, 64);
          ASSERT_TRUE(p);
          // The VNNI form reads the row-tile layout: the same codes.
          const int64_t tiled = tiledRows(rows);
          std::vector<int8_t> q(rows * p->kPad), qt(tiled * p->kPad);
          std::vector<float> d(rows * p->blocks), ds(rows * p->blocks), dt(tiled * p->blocks),
              dst(tiled * p->blocks);
          quantizeQ8Blocks(x.data(), false, rows, k, p->blocks, q.data(), d.data(), ds.data());
          quantizeQ8Blocks(x.data(), false, rows, k, p->blocks, qt.data(), dt.data(), dst.data(),
                           true);
          ASSERT_NO_FATAL_FAILURE(expectTiled(rows, p->kPad, p->blocks, q, qt,
                                              {{d.data(), dt.data()}, {ds.data(), dst.data()}}));
          gemmQ4Avx2(*p, q.data(), d.data(), ds.data(), rows, a.data());
          avx512::gemmQ4(*p, qt.data(), dt.data(), dst.data(), rows, b.data());
        }
        for (int64_t i = 0; i < rows * n; ++i)
          ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
              << (form == 2 ? "int8, 8-bit activations" : int8 ? "int8" : "int4")
              << " element " << i << ": " << a[i] << " vs " << b[i];
      }
    }
}

TEST(GemmQ4, BadPacks) {
  const Q4Weight w = randomQ4(4, 64, 32, 3);
  std::string err;
  EXPECT_FALSE(packLinear(w.packed.data(), TFC_DTYPE_I4, 4, 64, nullptr, 32, err));
  EXPECT_EQ(err, "an int4 linear weight has no scales");
  EXPECT_FALSE(packLinear(w.packed.data(), TFC_DTYPE_I4, 4, 64, w.scales.data(), 48, err));
  EXPECT_EQ(err, "an int4 linear weight's group of 48 is not a multiple of 32");
}

} // namespace
} // namespace tfc::cpu
