//===- KernelTest.cpp - every kernel, every backend, every dtype ----------===//
//
// Each test runs plan instructions (tfc_kernel_t) through a Backend
// (KernelBackend.h) and compares the outputs with a double-precision
// reference computed from the inputs as stored (after rounding to the dtype
// under test), so only the kernel's own error is measured. The references of
// the compound kernels (linear, matmul, softmax, layer norm, attention) are
// the shared ones of tests/reference/Reference.h, which the lit suite's oracle
// tfc-ref evaluates IR with too; the elementwise ones are written inline. Tolerances
// are per dtype: |got - ref| <= atol * scale + rtol * |ref|, with the reference
// rounded to the output dtype first (so -1e9 in f16 is -inf on both sides);
// NaN and infinities must match exactly.
//
// The suite is parameterized by (backend, float dtype): the CPU backend runs
// f32 (cpuFloatDtypes() is the hook for more), the CUDA backend f32, f16 and
// bf16. The CUDA instances skip with the reason when the build has no CUDA or
// the machine has no usable device. Kernels on ids and booleans run in every
// instance; they do not depend on the float dtype, but on CUDA each run also
// checks the Context's error state and guard bytes again.
//
// Operands of other dtypes than the one under test appear where the runtime
// produces them (it keeps f32 model inputs, f32 i8 scales and may keep f32
// biases or caches next to f16/bf16 values): an f32 lhs of a linear or matmul,
// f32 bias and residual, f32 gamma and beta, an f32 attention output, f32 KV
// caches. In the f32 instances these are the plain cases.
//
// Attention is covered per mask kind (none, key padding, causal, padding +
// causal, additive in four broadcast shapes), with Sq != Sk, rows whose keys
// are all masked (finite fill: the uniform average; -inf: NaN), q_len 1,
// head dims that cross the CUDA kernel's tiles (16 query rows, 32 keys, 64
// head_dim columns, 256 value columns), and cached attention at pos 0 and
// pos > 0 with the cache rows past pos + T poisoned with NaN.
//
//===----------------------------------------------------------------------===//

#include "tests/reference/Reference.h"
#include "tfc/relative_bucket.h"
#include "tests/unit/kernels/KernelBackend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tfc::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Param {
  Backend *backend;
  uint32_t dtype; ///< the float dtype under test
};

/// Float dtypes the CPU instances run. The CPU backend's kernels are f32 today;
/// add TFC_DTYPE_BF16 here once they all accept it.
std::vector<uint32_t> cpuFloatDtypes() { return {TFC_DTYPE_F32}; }
std::vector<uint32_t> cudaFloatDtypes() { return {TFC_DTYPE_F32, TFC_DTYPE_F16, TFC_DTYPE_BF16}; }

std::vector<Param> allParams() {
  std::vector<Param> ps;
  for (uint32_t dt : cpuFloatDtypes())
    ps.push_back({&cpuBackend(), dt});
  for (uint32_t dt : cudaFloatDtypes())
    ps.push_back({&cudaBackend(), dt});
  return ps;
}

std::string dtypeName(uint32_t dt) {
  switch (dt) {
  case TFC_DTYPE_F32:
    return "f32";
  case TFC_DTYPE_F16:
    return "f16";
  case TFC_DTYPE_BF16:
    return "bf16";
  default:
    return "dtype" + std::to_string(dt);
  }
}

std::string paramName(const ::testing::TestParamInfo<Param> &info) {
  return info.param.backend->name() + "_" + dtypeName(info.param.dtype);
}

/// How gtest prints a Param in failure messages.
void PrintTo(const Param &p, std::ostream *os) {
  *os << p.backend->name() << " " << dtypeName(p.dtype);
}

std::string shapeStr(const std::vector<int64_t> &s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i)
    os << (i ? "," : "") << s[i];
  os << "]";
  return os.str();
}

using ref::broadcastIndex;
using ref::broadcastShape;

class KernelTest : public ::testing::TestWithParam<Param> {
protected:
  void SetUp() override {
    const std::string why = GetParam().backend->unavailable();
    if (!why.empty())
      GTEST_SKIP() << why;
  }

  Backend &backend() { return *GetParam().backend; }
  /// The float dtype under test.
  uint32_t dt() const { return GetParam().dtype; }
  bool isF32() const { return dt() == TFC_DTYPE_F32; }

  /// A tensor of dtype |t| with |v| stored (rounded).
  static HostTensor tensor(uint32_t t, std::vector<int64_t> shape, const std::vector<double> &v) {
    HostTensor h(t, std::move(shape));
    for (int64_t i = 0; i < h.numel(); ++i)
      h.set(i, v[static_cast<size_t>(i)]);
    return h;
  }
  /// Uniform values in [lo, hi).
  HostTensor random(uint32_t t, std::vector<int64_t> shape, double lo = -1, double hi = 1) {
    HostTensor h(t, std::move(shape));
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < h.numel(); ++i)
      h.set(i, u(rng_));
    return h;
  }
  HostTensor randomBool(std::vector<int64_t> shape) {
    HostTensor h(TFC_DTYPE_BOOL, std::move(shape));
    std::bernoulli_distribution u(0.5);
    for (int64_t i = 0; i < h.numel(); ++i)
      h.set(i, u(rng_));
    return h;
  }
  /// LINEAR (act < 0) or FUSED_LINEAR of x and w with the operands that are
  /// not null.
  std::string runLinear(HostTensor &x, HostTensor &w, HostTensor *bias, HostTensor *residual,
                        HostTensor *multiplier, int act, HostTensor &out) {
    std::vector<HostTensor *> in = {&x, &w};
    for (HostTensor *t : {bias, residual, multiplier})
      if (t)
        in.push_back(t);
    const bool b = bias != nullptr, r = residual != nullptr;
    if (act < 0)
      return run(TFC_KERNEL_LINEAR, in, out, {b});
    if (multiplier)
      return run(TFC_KERNEL_FUSED_LINEAR, in, out, {b, r, act, 1});
    return run(TFC_KERNEL_FUSED_LINEAR, in, out, {b, r, act});
  }
  int64_t randomInt(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  std::string run(uint32_t kernel, const std::vector<HostTensor *> &in, HostTensor &out,
                  const std::vector<int64_t> &ints = {}, const std::vector<double> &floats = {}) {
    return backend().run(kernel, in, out, ints, floats);
  }

  /// Expects |got| to match |ref| (rounded to got's dtype) within the dtype's
  /// tolerance; |scale| multiplies the absolute part (for long sums).
  void expectNear(const HostTensor &got, const std::vector<double> &ref, const std::string &what,
                  double scale = 1.0) {
    ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
    const bool halves = got.dtype == TFC_DTYPE_F16 || got.dtype == TFC_DTYPE_BF16;
    const bool floats = got.dtype == TFC_DTYPE_F32 || halves;
    const double atol = (halves ? 2e-3 : floats ? 1e-5 : 0) * scale;
    const double rtol = halves ? 2e-2 : floats ? 1e-4 : 0;
    int bad = 0;
    std::ostringstream os;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double g = got.get(static_cast<int64_t>(i));
      const double r = roundTo(got.dtype, ref[i]);
      bool ok;
      if (std::isnan(r))
        ok = std::isnan(g);
      else if (std::isinf(r))
        ok = g == r;
      else
        ok = std::isfinite(g) && std::fabs(g - r) <= atol + rtol * std::fabs(r);
      if (!ok && bad++ < 6)
        os << "\n  [" << i << "] got " << g << ", expected " << r;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements differ"
                      << os.str();
  }

  /// Exact equality (ids, booleans, copies).
  void expectEqual(const HostTensor &got, const std::vector<double> &ref, const std::string &what) {
    ASSERT_EQ(static_cast<size_t>(got.numel()), ref.size()) << what;
    int bad = 0;
    std::ostringstream os;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double g = got.get(static_cast<int64_t>(i)), r = ref[i];
      const bool ok = (std::isnan(r) && std::isnan(g)) || g == r;
      if (!ok && bad++ < 6)
        os << "\n  [" << i << "] got " << g << ", expected " << r;
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.size() << " elements differ"
                      << os.str();
  }

  std::mt19937 rng_{20240611u};
};

// --- Embeddings -------------------------------------------------------------------

struct EmbCase {
  const char *name;
  int64_t B, S, V, D;
  bool positions = false;
  int axis = 1;
  int64_t posRows = 0;
  bool types = false;
  bool offset = false;
  int64_t offsetValue = 0;
  uint32_t idsType = TFC_DTYPE_I64;
  double scale = 1.0;
  bool i8Table = false;  ///< an i8 table with per-row f32 scales (last input)
  bool f32Tables = false; ///< positions and type table in f32
  int64_t group = 0;      ///< an i8 table's scales per group of a row (0: per row)
};

TEST_P(KernelTest, TokenEmbedding) {
  const EmbCase cases[] = {
      {"plain", 2, 5, 11, 24, false, 1, 0, false, false, 0, TFC_DTYPE_I64, 2.5},
      {"positions", 2, 5, 11, 24, true, 1, 8},
      {"positions by batch (axis 0)", 3, 4, 11, 24, true, 0, 3},
      {"types", 2, 5, 11, 24, true, 1, 8, true, false, 0, TFC_DTYPE_I64, 0.5},
      {"decode offset", 2, 2, 11, 24, true, 1, 8, false, true, 5},
      {"i32 ids", 2, 3, 11, 24, true, 1, 8, false, false, 0, TFC_DTYPE_I32, 3.0},
      {"wide rows", 1, 2, 5, 600, true, 1, 4, true, false, 0, TFC_DTYPE_I64, 1.5},
      {"i8 table", 2, 5, 11, 24, true, 1, 8, false, true, 2, TFC_DTYPE_I64, 2.0, true},
      {"f32 positions and types", 2, 5, 11, 24, true, 1, 8, true, false, 0, TFC_DTYPE_I64, 1.0,
       false, true},
      {"i8 table, a scale per group of 32 (a short last group)", 2, 5, 11, 40, false, 1, 0,
       false, false, 0, TFC_DTYPE_I64, 1.5, true, false, 32},
  };
  for (const EmbCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<double> idv(c.B * c.S), typev(c.B * c.S);
    for (auto &x : idv)
      x = static_cast<double>(randomInt(0, c.V - 1));
    for (auto &x : typev)
      x = static_cast<double>(randomInt(0, 2));
    HostTensor ids = tensor(c.idsType, {c.B, c.S}, idv);
    HostTensor table = c.i8Table ? random(TFC_DTYPE_I8, {c.V, c.D}, -127, 127)
                                 : random(dt(), {c.V, c.D});
    const int64_t groups = c.group ? (c.D + c.group - 1) / c.group : 1;
    HostTensor rowScales = random(TFC_DTYPE_F32, {c.V, groups}, 0.001, 0.02);
    const uint32_t tablesType = c.f32Tables ? uint32_t(TFC_DTYPE_F32) : dt();
    HostTensor pos = random(tablesType, {std::max<int64_t>(c.posRows, 1), c.D});
    HostTensor typeIds = tensor(TFC_DTYPE_I64, {c.B, c.S}, typev);
    HostTensor typeTable = random(tablesType, {3, c.D});
    HostTensor offset = tensor(TFC_DTYPE_I64, {}, {static_cast<double>(c.offsetValue)});
    HostTensor out(dt(), {c.B, c.S, c.D});
    std::vector<HostTensor *> in = {&ids, &table};
    if (c.positions)
      in.push_back(&pos);
    if (c.types) {
      in.push_back(&typeIds);
      in.push_back(&typeTable);
    }
    if (c.offset)
      in.push_back(&offset);
    if (c.i8Table) {
      table.scales = &rowScales; // the weight's descriptor, not an operand
      table.group = c.group;
    }
    ASSERT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, in, out,
                  {c.axis, c.positions, c.types, c.offset}, {c.scale}),
              "");
    std::vector<double> ref(c.B * c.S * c.D);
    for (int64_t i = 0; i < c.B; ++i)
      for (int64_t j = 0; j < c.S; ++j) {
        const int64_t r = i * c.S + j, id = static_cast<int64_t>(ids.get(r));
        const int64_t p = c.axis == 0 ? i : j + c.offsetValue;
        for (int64_t k = 0; k < c.D; ++k) {
          double v = table.get(id * c.D + k) * c.scale *
                     (c.i8Table ? rowScales.get(id * groups + (c.group ? k / c.group : 0)) : 1.0);
          if (c.types)
            v += typeTable.get(static_cast<int64_t>(typeIds.get(r)) * c.D + k);
          if (c.positions)
            v += pos.get(p * c.D + k);
          ref[r * c.D + k] = v;
        }
      }
    expectNear(out, ref, c.name);
  }
}

TEST_P(KernelTest, TokenEmbeddingErrors) {
  HostTensor table = random(dt(), {11, 8}), pos = random(dt(), {8, 8});
  HostTensor out(dt(), {2, 2, 8});
  {
    SCOPED_TRACE("id out of range");
    HostTensor ids = tensor(TFC_DTYPE_I64, {2, 2}, {1, 2, 11, 3});
    EXPECT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table}, out, {1, 0, 0, 0}, {1.0}),
              "token id 11 is out of range [0, 11)");
  }
  {
    SCOPED_TRACE("negative id");
    HostTensor ids = tensor(TFC_DTYPE_I64, {2, 2}, {1, -4, 0, 3});
    EXPECT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table}, out, {1, 0, 0, 0}, {1.0}),
              "token id -4 is out of range [0, 11)");
  }
  HostTensor ids = tensor(TFC_DTYPE_I64, {2, 2}, {1, 2, 3, 4});
  {
    SCOPED_TRACE("position beyond the table");
    HostTensor offset = tensor(TFC_DTYPE_I64, {}, {7});
    EXPECT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table, &pos, &offset}, out, {1, 1, 0, 1},
                  {1.0}),
              "position 8 is beyond the 8-row positional table");
  }
  {
    SCOPED_TRACE("negative offset");
    HostTensor offset = tensor(TFC_DTYPE_I64, {}, {-1});
    EXPECT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table, &pos, &offset}, out, {1, 1, 0, 1},
                  {1.0}),
              "negative position offset -1");
  }
  {
    SCOPED_TRACE("the error does not stick to the next run");
    HostTensor offset = tensor(TFC_DTYPE_I64, {}, {2});
    EXPECT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table, &pos, &offset}, out, {1, 1, 0, 1},
                  {1.0}),
              "");
  }
}

TEST_P(KernelTest, Embedding) {
  for (uint32_t idsType : {TFC_DTYPE_I64, TFC_DTYPE_I32}) {
    SCOPED_TRACE(idsType == TFC_DTYPE_I64 ? "i64 ids" : "i32 ids");
    HostTensor table = random(dt(), {7, 10});
    std::vector<double> idv(12);
    for (auto &x : idv)
      x = static_cast<double>(randomInt(0, 6));
    HostTensor ids = tensor(idsType, {3, 4}, idv);
    HostTensor out(dt(), {3, 4, 10});
    ASSERT_EQ(run(TFC_KERNEL_EMBEDDING, {&table, &ids}, out), "");
    std::vector<double> ref;
    for (double id : idv)
      for (int64_t k = 0; k < 10; ++k)
        ref.push_back(table.get(static_cast<int64_t>(id) * 10 + k));
    expectNear(out, ref, "embedding");
  }
  HostTensor table = random(dt(), {7, 10});
  HostTensor ids = tensor(TFC_DTYPE_I64, {1, 2}, {3, 7});
  HostTensor out(dt(), {1, 2, 10});
  EXPECT_EQ(run(TFC_KERNEL_EMBEDDING, {&table, &ids}, out), "token id 7 is out of range [0, 7)");
}

// --- Linear layers and matmul ----------------------------------------------------------

struct LinearCase {
  std::vector<int64_t> xShape; // [..., K]
  int64_t n;
  bool bias, residual;
  int act; // FUSED_LINEAR's activation; -1: the LINEAR kernel
  bool f32X = false;        ///< x in f32 (a model input)
  bool f32BiasRes = false;  ///< bias and residual in f32
  bool f32Out = false;      ///< the output in f32
  bool multiplier = false;  ///< FUSED_LINEAR's multiplier (f32, a gated FFN's product)
};

TEST_P(KernelTest, LinearAndFusedLinear) {
  std::vector<LinearCase> cases = {
      {{1, 8}, 8, false, false, -1},     {{5, 33}, 17, true, false, -1},
      {{130, 64}, 96, true, false, -1},  {{2, 65, 40}, 72, false, false, -1},
      {{200, 256}, 300, true, true, 2},  {{3, 7, 128}, 520, true, true, 3},
  };
  for (int act = 0; act < TFC_ACT_COUNT; ++act)
    for (int bias = 0; bias <= 1; ++bias)
      for (int res = 0; res <= 1; ++res)
        cases.push_back({{37, 48}, 40, bias != 0, res != 0, act});
  cases.push_back({{9, 32}, 24, true, false, -1, true});
  cases.push_back({{9, 32}, 24, true, true, 0, false, true});
  cases.push_back({{9, 32}, 24, true, true, 1, true, true, true});
  cases.push_back({{9, 32}, 24, true, false, 3, false, false, true});
  // The multiplier: SwiGLU's and GeGLU's gate (silu 4, gelu_tanh 3), a plain
  // one with a bias, one with a residual, over the GEMM paths' row counts.
  for (int act : {TFC_ACT_NONE, TFC_ACT_GELU_TANH, TFC_ACT_SILU})
    for (auto shape : {std::vector<int64_t>{1, 40}, {37, 48}, {130, 64}})
      cases.push_back({shape, 72, act == TFC_ACT_NONE, act == TFC_ACT_GELU_TANH, act, false,
                       act == TFC_ACT_NONE, false, true});
  for (const LinearCase &c : cases) {
    std::ostringstream name;
    name << "x " << shapeStr(c.xShape) << " N " << c.n << " bias " << c.bias << " residual "
         << c.residual << " multiplier " << c.multiplier << " act " << c.act << " f32 x/bias+res/out " << c.f32X << c.f32BiasRes
         << c.f32Out;
    SCOPED_TRACE(name.str());
    const int64_t k = c.xShape.back();
    const double ws = 1.0 / std::sqrt(static_cast<double>(k));
    const uint32_t f32 = TFC_DTYPE_F32;
    HostTensor x = random(c.f32X ? f32 : dt(), c.xShape);
    HostTensor w = random(dt(), {c.n, k}, -ws, ws);
    HostTensor b = random(c.f32BiasRes ? f32 : dt(), {c.n});
    std::vector<int64_t> oShape = c.xShape;
    oShape.back() = c.n;
    HostTensor res = random(c.f32BiasRes ? f32 : dt(), oShape);
    HostTensor mul = random(f32, oShape);
    HostTensor out(c.f32Out ? f32 : dt(), oShape);
    const std::string err = runLinear(x, w, c.bias ? &b : nullptr, c.residual ? &res : nullptr,
                                      c.multiplier ? &mul : nullptr, c.act, out);
    ASSERT_EQ(err, "");
    const int64_t rows = x.numel() / k;
    // An f32 x meets a reduced-precision weight in the weight's dtype.
    std::vector<double> xv = x.values();
    for (double &e : xv)
      e = roundTo(w.dtype, e);
    const std::vector<double> wv = w.values(), bv = b.values(), rv = res.values(),
                              mv = mul.values();
    std::vector<double> ref(rows * c.n);
    ref::linear(rows, k, c.n, xv.data(), wv.data(), c.bias ? bv.data() : nullptr,
                static_cast<ref::Activation>(c.act < 0 ? 0 : c.act),
                c.residual ? rv.data() : nullptr, ref.data(),
                c.multiplier ? mv.data() : nullptr);
    expectNear(out, ref, name.str());
  }
}

/// int8 and int4 weights with their scales per row or per group (model.bin's
/// layout), on CUDA (weight-only: x stays in its dtype): the decoding GEMV
/// (up to 8 rows) and the dequantized GEMM beyond, against the reference on
/// the dequantized weight. The CPU runs them from the packed copy its device
/// makes at load (GemmQ4Test, GemmS8Test).
TEST_P(KernelTest, QuantizedLinear) {
  if (backend().name() != "cuda")
    GTEST_SKIP() << "the CPU runs quantized weights from its device's packed copy (GemmQ4Test)";
  struct Case {
    const char *name;
    uint32_t wType;
    int64_t group; ///< 0: a scale per row
    int64_t rows, k, n;
    bool bias = false, residual = false;
    int act = -1; ///< FUSED_LINEAR's activation; -1: LINEAR
    bool multiplier = false;
  };
  const Case cases[] = {
      {"int8, a scale per row, one row", TFC_DTYPE_I8, 0, 1, 48, 40},
      {"int8, groups of 32, 3 rows, bias", TFC_DTYPE_I8, 32, 3, 96, 70, true},
      {"int8, groups of 32 over k 80 (a short last group), 8 rows", TFC_DTYPE_I8, 32, 8, 80, 33},
      {"int8, groups of 32, 20 rows (dequantized), residual", TFC_DTYPE_I8, 32, 20, 64, 24, false,
       true, TFC_ACT_NONE},
      {"int8, a scale per row, 40 rows, gelu", TFC_DTYPE_I8, 0, 40, 48, 40, true, false,
       TFC_ACT_GELU},
      {"int4, groups of 32, one row", TFC_DTYPE_I4, 32, 1, 64, 40},
      {"int4, odd k 45 (rows share bytes), 2 rows", TFC_DTYPE_I4, 32, 2, 45, 7},
      {"int4, groups of 64, 5 rows, SwiGLU's multiplier", TFC_DTYPE_I4, 64, 5, 128, 50, false,
       false, TFC_ACT_SILU, true},
      {"int4, groups of 32, 17 rows (dequantized), bias and residual", TFC_DTYPE_I4, 32, 17, 45,
       30, true, true, TFC_ACT_NONE},
      {"int4, groups of 32, 24 rows (dequantized 4 weights a thread), gelu_tanh", TFC_DTYPE_I4,
       32, 24, 96, 36, true, false, TFC_ACT_GELU_TANH},
      // Wide layers: 2 and 4 columns per warp, the last warp's partly past n.
      {"int8, 4099 columns, 2 rows", TFC_DTYPE_I8, 32, 2, 64, 4099},
      {"int4, 16389 columns, 3 rows, bias", TFC_DTYPE_I4, 32, 3, 64, 16389, true},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t groups = c.group ? (c.k + c.group - 1) / c.group : 1;
    const int64_t qmax = c.wType == TFC_DTYPE_I8 ? 127 : 7;
    HostTensor x = random(dt(), {c.rows, c.k});
    HostTensor w(c.wType, {c.n, c.k});
    for (int64_t i = 0; i < w.numel(); ++i)
      w.set(i, static_cast<double>(randomInt(-qmax - 1, qmax)));
    HostTensor scales =
        random(TFC_DTYPE_F32, {c.n, groups}, 0.2 / qmax / std::sqrt((double)c.k), 2.0 / qmax / std::sqrt((double)c.k));
    w.scales = &scales;
    w.group = c.group;
    HostTensor b = random(dt(), {c.n}), res = random(dt(), {c.rows, c.n});
    HostTensor mul = random(TFC_DTYPE_F32, {c.rows, c.n});
    HostTensor out(dt(), {c.rows, c.n});
    const std::string err = runLinear(x, w, c.bias ? &b : nullptr, c.residual ? &res : nullptr,
                                      c.multiplier ? &mul : nullptr, c.act, out);
    ASSERT_EQ(err, "");
    std::vector<double> wv(c.n * c.k);
    for (int64_t r = 0; r < c.n; ++r)
      for (int64_t j = 0; j < c.k; ++j)
        wv[r * c.k + j] = static_cast<double>(static_cast<float>(
            w.get(r * c.k + j) * scales.get(r * groups + (c.group ? j / c.group : 0))));
    const std::vector<double> xv = x.values(), bv = b.values(), rv = res.values(),
                              mv = mul.values();
    std::vector<double> ref(c.rows * c.n);
    ref::linear(c.rows, c.k, c.n, xv.data(), wv.data(), c.bias ? bv.data() : nullptr,
                static_cast<ref::Activation>(c.act < 0 ? 0 : c.act),
                c.residual ? rv.data() : nullptr, ref.data(),
                c.multiplier ? mv.data() : nullptr);
    // Beyond the GEMV's 8 rows the dequantized GEMM runs in TF32, which
    // keeps 11 significant bits of x and of the weight (truncated, at worst):
    // each product may move by 2^-9 of itself, and so each sum by 2^-9 of its
    // sum of |x w| (the activations' slopes are at most about 1.1).
    double scale = 1.0;
    if (c.rows > 8 && dt() == TFC_DTYPE_F32) {
      std::vector<double> ax(xv.size()), aw(wv.size()), asum(c.rows * c.n);
      for (size_t i = 0; i < xv.size(); ++i)
        ax[i] = std::fabs(xv[i]);
      for (size_t i = 0; i < wv.size(); ++i)
        aw[i] = std::fabs(wv[i]);
      ref::linear(c.rows, c.k, c.n, ax.data(), aw.data(), nullptr, ref::Activation(0), nullptr,
                  asum.data(), nullptr);
      for (double a : asum)
        scale = std::max(scale, 1.2 * a * std::ldexp(1.0, -9) / 1e-5);
    }
    expectNear(out, ref, c.name, scale);
  }
  // A weight without its scales is a malformed model.
  HostTensor x = random(dt(), {1, 32}), w(TFC_DTYPE_I8, {4, 32}), out(dt(), {1, 4});
  EXPECT_EQ(run(TFC_KERNEL_LINEAR, {&x, &w}, out, {0}), "linear: the i8 weight has no scales");
}

struct MatmulCase {
  std::vector<int64_t> a, b;
  bool transB;
  bool f32Lhs = false; ///< the lhs in f32 (converted to the rhs's dtype)
};

TEST_P(KernelTest, Matmul) {
  const MatmulCase cases[] = {
      {{4, 5}, {5, 6}, false},
      {{2, 3, 4, 5}, {2, 3, 5, 6}, false},
      {{2, 3, 4, 5}, {2, 3, 6, 5}, true},        // Q K^T
      {{2, 3, 4, 5}, {3, 5, 6}, false},          // rhs broadcast over the batch
      {{2, 1, 4, 5}, {1, 3, 5, 6}, false},       // crossed broadcast
      {{1, 4, 5}, {3, 5, 6}, false},             // lhs broadcast
      {{2, 70, 130}, {2, 90, 130}, true},
      {{2, 70, 130}, {2, 130, 90}, false},
      {{3, 4, 5}, {3, 6, 5}, true, true},
  };
  for (const MatmulCase &c : cases) {
    const std::string name = shapeStr(c.a) + " x " + shapeStr(c.b) + (c.transB ? " T" : "");
    SCOPED_TRACE(name);
    const int64_t k = c.a.back();
    HostTensor a = random(c.f32Lhs ? uint32_t(TFC_DTYPE_F32) : dt(), c.a);
    HostTensor b = random(dt(), c.b, -1.0 / std::sqrt(double(k)), 1.0 / std::sqrt(double(k)));
    // An f32 lhs meets the rhs in the rhs's dtype.
    std::vector<double> av = a.values();
    for (double &e : av)
      e = roundTo(b.dtype, e);
    const std::vector<double> bv = b.values();
    std::vector<int64_t> oShape;
    const std::vector<double> ref = ref::matmul(c.a, av.data(), c.b, bv.data(), c.transB, oShape);
    HostTensor out(dt(), oShape);
    ASSERT_EQ(run(TFC_KERNEL_MATMUL, {&a, &b}, out, {c.transB}), "");
    expectNear(out, ref, name);
  }
}

// --- Elementwise ----------------------------------------------------------------------

const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> kBroadcastPairs = {
    {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},       {{2, 1, 4}, {3, 1}},
    {{3, 1, 5}, {1, 4, 1}}, {{}, {2, 3}},           {{2, 3, 1, 70}, {2, 1, 5, 70}},
    {{1000}, {1}},
};

TEST_P(KernelTest, Arithmetic) {
  const uint32_t kernels[] = {TFC_KERNEL_ADD, TFC_KERNEL_SUB, TFC_KERNEL_MUL, TFC_KERNEL_DIV};
  for (uint32_t kernel : kernels)
    for (const auto &[sa, sb] : kBroadcastPairs) {
      const std::string name = std::string(kernel == TFC_KERNEL_ADD   ? "add"
                                           : kernel == TFC_KERNEL_SUB ? "sub"
                                           : kernel == TFC_KERNEL_MUL ? "mul"
                                                                      : "div") +
                               " " + shapeStr(sa) + " " + shapeStr(sb);
      SCOPED_TRACE(name);
      HostTensor a = random(dt(), sa, -2, 2);
      HostTensor b = random(dt(), sb, 0.5, 1.5);
      const std::vector<int64_t> os = broadcastShape(sa, sb);
      HostTensor out(dt(), os);
      ASSERT_EQ(run(kernel, {&a, &b}, out), "");
      std::vector<double> ref(out.numel());
      for (int64_t e = 0; e < out.numel(); ++e) {
        const double x = a.get(broadcastIndex(os, sa, e)), y = b.get(broadcastIndex(os, sb, e));
        ref[e] = kernel == TFC_KERNEL_ADD   ? x + y
                 : kernel == TFC_KERNEL_SUB ? x - y
                 : kernel == TFC_KERNEL_MUL ? x * y
                                            : x / y;
      }
      expectNear(out, ref, name);
    }
}

TEST_P(KernelTest, IntegerArithmetic) {
  // Integers are computed in double and truncated, as kernels_cpu.cc does.
  HostTensor a = tensor(TFC_DTYPE_I64, {2, 3}, {7, -7, 12, 0, 5, -9});
  HostTensor b = tensor(TFC_DTYPE_I64, {3}, {2, 2, -5});
  const uint32_t kernels[] = {TFC_KERNEL_ADD, TFC_KERNEL_SUB, TFC_KERNEL_MUL, TFC_KERNEL_DIV};
  const std::vector<double> refs[] = {{9, -5, 7, 2, 7, -14},
                                      {5, -9, 17, -2, 3, -4},
                                      {14, -14, -60, 0, 10, 45},
                                      {3, -3, -2, 0, 2, 1}};
  for (int i = 0; i < 4; ++i) {
    HostTensor out(TFC_DTYPE_I64, {2, 3});
    ASSERT_EQ(run(kernels[i], {&a, &b}, out), "");
    expectEqual(out, refs[i], "i64 kernel " + std::to_string(kernels[i]));
  }
  HostTensor c = tensor(TFC_DTYPE_I32, {4}, {1, 2, 3, 4}), d = tensor(TFC_DTYPE_I32, {1}, {10});
  HostTensor out(TFC_DTYPE_I32, {4});
  ASSERT_EQ(run(TFC_KERNEL_SUB, {&c, &d}, out), "");
  expectEqual(out, {-9, -8, -7, -6}, "i32 sub");
}

TEST_P(KernelTest, AndNot) {
  HostTensor a = randomBool({2, 3, 4}), b = randomBool({3, 1});
  HostTensor out(TFC_DTYPE_BOOL, {2, 3, 4});
  ASSERT_EQ(run(TFC_KERNEL_AND, {&a, &b}, out), "");
  std::vector<double> ref(24);
  for (int64_t e = 0; e < 24; ++e)
    ref[e] = a.get(e) != 0 && b.get(broadcastIndex({2, 3, 4}, {3, 1}, e)) != 0;
  expectEqual(out, ref, "and");
  HostTensor c = randomBool({5, 77}), notOut(TFC_DTYPE_BOOL, {5, 77});
  ASSERT_EQ(run(TFC_KERNEL_NOT, {&c}, notOut), "");
  std::vector<double> nref(c.numel());
  for (int64_t e = 0; e < c.numel(); ++e)
    nref[e] = c.get(e) == 0;
  expectEqual(notOut, nref, "not");
}

TEST_P(KernelTest, Compare) {
  // Values from a small exactly representable set, so that equality happens.
  auto grid = [&](uint32_t t, std::vector<int64_t> shape) {
    HostTensor h(t, std::move(shape));
    for (int64_t i = 0; i < h.numel(); ++i)
      h.set(i, 0.5 * static_cast<double>(randomInt(-2, 2)));
    return h;
  };
  const char *names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  for (uint32_t t : {dt(), uint32_t(TFC_DTYPE_I64)})
    for (int pred = 0; pred < 6; ++pred) {
      SCOPED_TRACE(std::string(names[pred]) + (t == TFC_DTYPE_I64 ? " i64" : " float"));
      HostTensor a = t == TFC_DTYPE_I64 ? tensor(t, {2, 3, 4}, std::vector<double>(24, 0)) : grid(t, {2, 3, 4});
      HostTensor b = t == TFC_DTYPE_I64 ? tensor(t, {4}, {0, 0, 0, 0}) : grid(t, {4});
      if (t == TFC_DTYPE_I64) {
        for (int64_t i = 0; i < 24; ++i)
          a.set(i, static_cast<double>(randomInt(-2, 2)));
        for (int64_t i = 0; i < 4; ++i)
          b.set(i, static_cast<double>(randomInt(-2, 2)));
      }
      HostTensor out(TFC_DTYPE_BOOL, {2, 3, 4});
      ASSERT_EQ(run(TFC_KERNEL_COMPARE, {&a, &b}, out, {pred}), "");
      std::vector<double> ref(24);
      for (int64_t e = 0; e < 24; ++e) {
        const double x = a.get(e), y = b.get(e % 4);
        ref[e] = pred == 0 ? x == y : pred == 1 ? x != y : pred == 2 ? x < y
                 : pred == 3 ? x <= y : pred == 4 ? x > y : x >= y;
      }
      expectEqual(out, ref, names[pred]);
    }
}

TEST_P(KernelTest, Cast) {
  struct CastCase {
    uint32_t from, to;
    std::vector<double> in;
  };
  const std::vector<double> mixed = {2.75, -2.75, 0.0, 1.0, -0.5, 100.0, 0.25, -7.0};
  const CastCase cases[] = {
      {dt(), TFC_DTYPE_I64, mixed},   {dt(), TFC_DTYPE_I32, mixed},
      {dt(), TFC_DTYPE_BOOL, mixed},  {dt(), TFC_DTYPE_F32, mixed},
      {TFC_DTYPE_BOOL, dt(), {1, 0, 1, 1, 0, 0, 1, 0}},
      {TFC_DTYPE_I64, dt(), {3, -4, 0, 100, 7, -1, 2, 9}},
      {TFC_DTYPE_I64, TFC_DTYPE_I32, {3, -4, 0, 100, 7, -1, 2, 9}},
      {TFC_DTYPE_I32, TFC_DTYPE_I64, {3, -4, 0, 100, 7, -1, 2, 9}},
      {TFC_DTYPE_BOOL, TFC_DTYPE_I64, {1, 0, 1, 1, 0, 0, 1, 0}},
  };
  for (const CastCase &c : cases) {
    SCOPED_TRACE("cast " + std::to_string(c.from) + " -> " + std::to_string(c.to));
    HostTensor x = tensor(c.from, {2, 4}, c.in);
    HostTensor out(c.to, {2, 4});
    ASSERT_EQ(run(TFC_KERNEL_CAST, {&x}, out), "");
    std::vector<double> ref;
    for (double v : x.values())
      ref.push_back(roundTo(c.to, v)); // truncation toward zero for ints, != 0 for bool
    expectEqual(out, ref, "cast");
  }
}

TEST_P(KernelTest, MaskedFill) {
  for (double value : {-1e9, -kInf, 0.5}) {
    SCOPED_TRACE("value " + std::to_string(value));
    HostTensor x = random(dt(), {2, 3, 4, 5});
    HostTensor mask = randomBool({2, 1, 1, 5});
    HostTensor out(dt(), {2, 3, 4, 5});
    ASSERT_EQ(run(TFC_KERNEL_MASKED_FILL, {&x, &mask}, out, {}, {value}), "");
    std::vector<double> ref(out.numel());
    for (int64_t e = 0; e < out.numel(); ++e)
      ref[e] = mask.get(broadcastIndex({2, 3, 4, 5}, {2, 1, 1, 5}, e)) != 0 ? value : x.get(e);
    expectNear(out, ref, "masked_fill");
  }
}

TEST_P(KernelTest, Select) {
  for (uint32_t t : {dt(), uint32_t(TFC_DTYPE_I64)}) {
    SCOPED_TRACE(t == TFC_DTYPE_I64 ? "i64 branches" : "float branches");
    HostTensor cond = randomBool({3, 1});
    HostTensor a = random(t == TFC_DTYPE_I64 ? TFC_DTYPE_F32 : t, {3, 4}, -50, 50);
    HostTensor b = random(t == TFC_DTYPE_I64 ? TFC_DTYPE_F32 : t, {4}, -50, 50);
    if (t == TFC_DTYPE_I64) {
      a = tensor(t, {3, 4}, a.values());
      b = tensor(t, {4}, b.values());
    }
    HostTensor out(t, {3, 4});
    ASSERT_EQ(run(TFC_KERNEL_SELECT, {&cond, &a, &b}, out), "");
    std::vector<double> ref(12);
    for (int64_t e = 0; e < 12; ++e)
      ref[e] = cond.get(e / 4) != 0 ? a.get(e) : b.get(e % 4);
    expectEqual(out, ref, "select");
  }
}

// --- Data movement -------------------------------------------------------------------

TEST_P(KernelTest, Views) {
  HostTensor x = random(dt(), {2, 3, 4});
  HostTensor r(dt(), {6, 4}), u(dt(), {2, 1, 3, 4});
  // The executors resolve reshape and unsqueeze as views and never call a
  // kernel for them; called on separate buffers, each backend copies.
  ASSERT_EQ(run(TFC_KERNEL_RESHAPE, {&x}, r), "");
  ASSERT_EQ(run(TFC_KERNEL_UNSQUEEZE, {&x}, u), "");
  // Its schema has no attributes: one more is an error, not ignored.
  EXPECT_EQ(run(TFC_KERNEL_UNSQUEEZE, {&x}, u, {1}),
            "unsqueeze: has 1 int and 0 float attributes, more than its 0 and 0");
  expectEqual(r, x.values(), "reshape");
  expectEqual(u, x.values(), "unsqueeze");
}

TEST_P(KernelTest, Transpose) {
  struct TCase {
    std::vector<int64_t> shape, perm;
  };
  const TCase cases[] = {{{2, 3, 4}, {0, 2, 1}},
                         {{2, 3, 4}, {2, 0, 1}},
                         {{2, 5, 3, 4}, {0, 2, 1, 3}}, // the attention head split
                         {{33, 65}, {1, 0}},
                         {{3, 1, 4}, {1, 2, 0}}};
  for (uint32_t t : {dt(), uint32_t(TFC_DTYPE_I64), uint32_t(TFC_DTYPE_BOOL)})
    for (const TCase &c : cases) {
      SCOPED_TRACE(shapeStr(c.shape) + " perm " + shapeStr(c.perm) + " dtype " +
                   std::to_string(t));
      HostTensor x = t == TFC_DTYPE_BOOL ? randomBool(c.shape) : random(t == TFC_DTYPE_I64 ? TFC_DTYPE_F32 : t, c.shape, -100, 100);
      if (t == TFC_DTYPE_I64)
        x = tensor(t, c.shape, x.values());
      const size_t r = c.shape.size();
      std::vector<int64_t> os(r);
      for (size_t i = 0; i < r; ++i)
        os[i] = c.shape[c.perm[i]];
      HostTensor out(t, os);
      ASSERT_EQ(run(TFC_KERNEL_TRANSPOSE, {&x}, out, c.perm), "");
      std::vector<int64_t> inStride(r);
      int64_t s = 1;
      for (size_t i = r; i-- > 0;) {
        inStride[i] = s;
        s *= c.shape[i];
      }
      std::vector<double> ref(out.numel());
      for (int64_t e = 0; e < out.numel(); ++e) {
        int64_t rem = e, off = 0;
        for (size_t d = r; d-- > 0;) {
          off += (rem % os[d]) * inStride[c.perm[d]];
          rem /= os[d];
        }
        ref[e] = x.get(off);
      }
      expectEqual(out, ref, "transpose");
    }
}

TEST_P(KernelTest, Slice) {
  struct SCase {
    int64_t axis, start, size;
  };
  const std::vector<int64_t> shape = {4, 6, 5};
  // A negative start counts from the end (decode_step's cut to the last position).
  const SCase cases[] = {{1, 2, 3}, {0, 1, 2}, {2, 4, 1}, {2, 0, 5}, {0, 0, 4},
                         {1, -1, 1}, {1, -6, 6}, {2, -3, 2}};
  for (uint32_t t : {dt(), uint32_t(TFC_DTYPE_I64)})
    for (const SCase &c : cases) {
      SCOPED_TRACE("axis " + std::to_string(c.axis) + " start " + std::to_string(c.start) +
                   " size " + std::to_string(c.size));
      HostTensor x = random(t == TFC_DTYPE_I64 ? TFC_DTYPE_F32 : t, shape, -100, 100);
      if (t == TFC_DTYPE_I64)
        x = tensor(t, shape, x.values());
      std::vector<int64_t> os = shape;
      os[c.axis] = c.size;
      HostTensor out(t, os);
      ASSERT_EQ(run(TFC_KERNEL_SLICE, {&x}, out, {c.axis, c.start, c.size}), "");
      std::vector<double> ref;
      for (int64_t i = 0; i < os[0]; ++i)
        for (int64_t j = 0; j < os[1]; ++j)
          for (int64_t k = 0; k < os[2]; ++k) {
            int64_t idx[3] = {i, j, k};
            idx[c.axis] += c.start < 0 ? c.start + shape[c.axis] : c.start;
            ref.push_back(x.get((idx[0] * shape[1] + idx[1]) * shape[2] + idx[2]));
          }
      expectEqual(out, ref, "slice");
    }
}

// --- Reductions and activations ------------------------------------------------------

TEST_P(KernelTest, Reduce) {
  struct RCase {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  const RCase cases[] = {{{3, 4, 5}, 0}, {{3, 4, 5}, 1}, {{3, 4, 5}, 2},
                         {{3, 1000}, 1}, {{2, 300, 3}, 1}, {{7, 1}, 1}};
  for (uint32_t kernel : {uint32_t(TFC_KERNEL_REDUCE_MEAN), uint32_t(TFC_KERNEL_REDUCE_SUM)})
    for (const RCase &c : cases)
      for (int keep = 0; keep <= 1; ++keep) {
        SCOPED_TRACE(std::string(kernel == TFC_KERNEL_REDUCE_MEAN ? "mean " : "sum ") +
                     shapeStr(c.shape) + " axis " + std::to_string(c.axis) + " keepdim " +
                     std::to_string(keep));
        HostTensor x = random(dt(), c.shape);
        std::vector<int64_t> os;
        for (size_t d = 0; d < c.shape.size(); ++d)
          if (static_cast<int64_t>(d) != c.axis)
            os.push_back(c.shape[d]);
          else if (keep)
            os.push_back(1);
        HostTensor out(dt(), os);
        ASSERT_EQ(run(kernel, {&x}, out, {c.axis, keep}), "");
        int64_t outer = 1, inner = 1;
        for (int64_t d = 0; d < c.axis; ++d)
          outer *= c.shape[d];
        for (size_t d = c.axis + 1; d < c.shape.size(); ++d)
          inner *= c.shape[d];
        const int64_t len = c.shape[c.axis];
        std::vector<double> ref(outer * inner);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            double acc = 0;
            for (int64_t l = 0; l < len; ++l)
              acc += x.get((o * len + l) * inner + i);
            ref[o * inner + i] = kernel == TFC_KERNEL_REDUCE_MEAN ? acc / len : acc;
          }
        // A sum's rounding error grows with the number of terms.
        expectNear(out, ref, "reduce",
                   kernel == TFC_KERNEL_REDUCE_SUM ? std::sqrt(double(len)) : 1.0);
      }
}

TEST_P(KernelTest, Unary) {
  HostTensor x = random(dt(), {3, 257}, -4, 4);
  x.set(0, 0.0);
  HostTensor pos = random(dt(), {3, 257}, 0, 9);
  pos.set(0, 0.0);
  struct UCase {
    const char *name;
    uint32_t kernel;
    std::vector<int64_t> ints;
    HostTensor *in;
    std::function<double(double)> f;
  };
  const UCase cases[] = {
      {"sqrt", TFC_KERNEL_SQRT, {}, &pos, [](double v) { return std::sqrt(v); }},
      {"relu", TFC_KERNEL_RELU, {}, &x, [](double v) { return v > 0 ? v : 0; }},
      {"gelu erf", TFC_KERNEL_GELU, {0}, &x, [](double v) { return ref::gelu(v, false); }},
      {"gelu tanh", TFC_KERNEL_GELU, {1}, &x, [](double v) { return ref::gelu(v, true); }},
      {"silu", TFC_KERNEL_SILU, {}, &x, [](double v) { return ref::silu(v); }},
      {"tanh", TFC_KERNEL_TANH, {}, &x, [](double v) { return std::tanh(v); }},
  };
  for (const UCase &c : cases) {
    SCOPED_TRACE(c.name);
    HostTensor out(dt(), {3, 257});
    ASSERT_EQ(run(c.kernel, {c.in}, out, c.ints), "");
    std::vector<double> ref;
    for (double v : c.in->values())
      ref.push_back(c.f(v));
    expectNear(out, ref, c.name);
  }
}

TEST_P(KernelTest, Softmax) {
  struct SCase {
    std::vector<int64_t> shape;
    int64_t axis;
    bool withInf; // some -inf entries, and one row all -inf (NaN)
  };
  const SCase cases[] = {{{3, 7}, 1, false},   {{2, 1000}, 1, false}, {{4, 5, 6}, 1, false},
                         {{4, 5, 6}, 0, false}, {{5, 40}, 1, true},   {{3, 6, 2}, 1, true},
                         {{2, 1}, 1, false}};
  for (uint32_t kernel : {uint32_t(TFC_KERNEL_SOFTMAX), uint32_t(TFC_KERNEL_LOG_SOFTMAX)})
    for (const SCase &c : cases) {
      const bool logp = kernel == TFC_KERNEL_LOG_SOFTMAX;
      SCOPED_TRACE(std::string(logp ? "log_softmax " : "softmax ") + shapeStr(c.shape) +
                   " axis " + std::to_string(c.axis) + (c.withInf ? " with -inf" : ""));
      HostTensor x = random(dt(), c.shape, -3, 3);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < c.axis; ++d)
        outer *= c.shape[d];
      for (size_t d = c.axis + 1; d < c.shape.size(); ++d)
        inner *= c.shape[d];
      const int64_t len = c.shape[c.axis];
      if (c.withInf) {
        for (int64_t e = 0; e < x.numel(); e += 3)
          x.set(e, -kInf);
        for (int64_t l = 0; l < len; ++l) // row (outer 1, inner 0): all -inf
          x.set((1 * len + l) * inner, -kInf);
      }
      HostTensor out(dt(), c.shape);
      ASSERT_EQ(run(kernel, {&x}, out, {c.axis}), "");
      const std::vector<double> xv = x.values();
      std::vector<double> ref(x.numel());
      ref::softmax(xv.data(), outer, len, inner, logp, ref.data());
      expectNear(out, ref, logp ? "log_softmax" : "softmax");
    }
}

TEST_P(KernelTest, LayerNorm) {
  struct NCase {
    std::vector<int64_t> shape;
    int variant;
    double eps, center, spread;
  };
  const NCase cases[] = {
      {{3, 8}, 0, 1e-5, 0, 1},        {{3, 8}, 1, 1e-6, 0, 1},
      {{2, 3, 512}, 0, 1e-5, 0, 1},   {{2, 3, 512}, 1, 1e-6, 0.5, 2},
      {{5, 1000}, 0, 1e-12, 0, 1},    {{2, 3000}, 1, 1e-5, 0, 1},
      {{4, 1}, 0, 1e-5, 0, 1},        {{4, 1}, 1, 1e-5, 0, 1}, // std_norm of one value: NaN
      {{3, 64}, 0, 1e-5, 1000, 0.01}, // a large mean over a small spread
      {{3, 64}, 1, 1e-3, 0, 1e-4},    // eps dominates
      {{3, 8}, 2, 1e-6, 0, 1},        {{2, 3, 512}, 2, 1e-6, 0.5, 2}, // rms_norm (T5)
      {{4, 1}, 2, 1e-6, 0, 1},        {{3, 64}, 2, 1e-3, 0, 1e-4},
  };
  for (const NCase &c : cases) {
    SCOPED_TRACE(shapeStr(c.shape) + " variant " + std::to_string(c.variant) + " center " +
                 std::to_string(c.center));
    HostTensor x = random(dt(), c.shape, c.center - c.spread, c.center + c.spread);
    const int64_t d = c.shape.back(), rows = x.numel() / d;
    // Half of the cases keep gamma and beta in f32, as reduced-precision plans do.
    const uint32_t gt = (&c - cases) % 2 ? uint32_t(TFC_DTYPE_F32) : dt();
    HostTensor gamma = random(gt, {d}, 0.5, 1.5), beta = random(gt, {d});
    HostTensor out(dt(), c.shape);
    // rms_norm (variant 2) takes no beta.
    std::vector<HostTensor *> in = {&x, &gamma};
    if (c.variant != 2)
      in.push_back(&beta);
    ASSERT_EQ(run(TFC_KERNEL_LAYER_NORM, in, out, {c.variant}, {c.eps}), "");
    // eps as the plan stores it, in f32.
    const std::vector<double> xv = x.values(), gv = gamma.values(), bv = beta.values();
    std::vector<double> ref(x.numel());
    ref::layerNorm(static_cast<ref::NormVariant>(c.variant), rows, d, xv.data(), d, gv.data(),
                   c.variant != 2 ? bv.data() : nullptr, static_cast<float>(c.eps), ref.data());
    expectNear(out, ref, "layer_norm");
  }
}

// --- Attention -------------------------------------------------------------------------

enum Mask { kNone = 0, kKeyPadding = 1, kCausal = 2, kPaddingCausal = 3, kAdditive = 4 };

struct AttnCase {
  std::string name;
  int64_t B, Sq, Sk, H, dk, dv;
  int mask = kNone;
  double maskValue = -1e9;
  /// Key tokens per batch (pad id 0) for the padding masks; empty: random
  /// with trailing padding in every other batch.
  std::vector<std::vector<int64_t>> tokens;
  /// The additive mask's shape (broadcast to [B, H, Sq, Sk]).
  std::vector<int64_t> addShape;
  /// Additive: make the row (b 0, h 0, i 1) all -inf (when the shape has it).
  bool addInfRow = false;
  /// The output (and an additive mask) in f32 whatever the dtype under test.
  bool f32Out = false;
  /// T5's relative position bias: a [biasBuckets, H] f32 table (0: none).
  int64_t biasBuckets = 0;
  bool biasBidirectional = false;
  int64_t biasMaxDistance = 128;
};

/// The shared reference (tests/reference/Reference.h) on the inputs as stored:
/// scores in double, masked_fill semantics, softmax, weighted sum.
std::vector<double> attentionRef(const AttnCase &c, const HostTensor &q, const HostTensor &k,
                                 const HostTensor &v, const HostTensor &tokens,
                                 const HostTensor &add, double scale,
                                 const HostTensor &table) {
  const std::vector<double> qv = q.values(), kv = k.values(), vv = v.values();
  const std::vector<int64_t> full = {c.B, c.H, c.Sq, c.Sk};
  ref::Attention a;
  a.batch = c.B;
  a.qLen = c.Sq;
  a.kvLen = c.Sk;
  a.heads = c.H;
  a.headDim = c.dk;
  a.vHeadDim = c.dv;
  a.q = qv.data();
  a.k = kv.data();
  a.v = vv.data();
  a.scale = scale;
  a.mask = static_cast<ref::Mask>(c.mask);
  a.maskValue = c.maskValue;
  a.keyToken = [&](int64_t b, int64_t j) { return static_cast<int64_t>(tokens.get(b * c.Sk + j)); };
  a.additive = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    return add.get(broadcastIndex(full, c.addShape, ((b * c.H + h) * c.Sq + i) * c.Sk + j));
  };
  if (c.biasBuckets > 0)
    a.bias = [&](int64_t, int64_t h, int64_t i, int64_t j) {
      return table.get(tfc_relative_bucket(j - i, c.biasBidirectional, c.biasBuckets,
                                           c.biasMaxDistance) *
                           c.H +
                       h);
    };
  return ref::attention(a);
}

class AttentionTest : public KernelTest {
protected:
  void check(const AttnCase &c) {
    SCOPED_TRACE(c.name);
    const int64_t D = c.H * c.dk, Dv = c.H * c.dv;
    HostTensor q = random(dt(), {c.B, c.Sq, D}), k = random(dt(), {c.B, c.Sk, D});
    HostTensor v = random(dt(), {c.B, c.Sk, Dv});
    HostTensor tokens(TFC_DTYPE_I64, {c.B, c.Sk});
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < c.Sk; ++j) {
        int64_t t;
        if (!c.tokens.empty())
          t = c.tokens[b][j];
        else // every other batch has its last b+1 keys padded
          t = (b % 2 == 1 && j >= c.Sk - (b + 1)) ? 0 : randomInt(1, 9);
        tokens.set(b * c.Sk + j, static_cast<double>(t));
      }
    HostTensor add = random(c.f32Out ? uint32_t(TFC_DTYPE_F32) : dt(),
                            c.addShape.empty() ? std::vector<int64_t>{1} : c.addShape, -2, 2);
    if (c.mask == kAdditive) {
      for (int64_t e = 0; e < add.numel(); e += 5)
        add.set(e, -kInf);
      if (c.addInfRow) {
        // Row (b 0, h 0, i 1): a shape with a query dim of Sq puts it at
        // offset Sk, given leading dims of 1 or b = h = 0.
        for (int64_t j = 0; j < c.Sk; ++j)
          add.set(c.Sk + j, -kInf);
      }
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
    HostTensor out(c.f32Out ? uint32_t(TFC_DTYPE_F32) : dt(), {c.B, c.Sq, Dv});
    std::vector<HostTensor *> in = {&q, &k, &v};
    if (c.mask == kKeyPadding || c.mask == kPaddingCausal)
      in.push_back(&tokens);
    if (c.mask == kAdditive)
      in.push_back(&add);
    std::vector<int64_t> ints = {c.mask, c.H, 0};
    HostTensor table = random(TFC_DTYPE_F32, {std::max<int64_t>(c.biasBuckets, 1), c.H}, -3, 3);
    if (c.biasBuckets > 0) {
      in.push_back(&table);
      ints.insert(ints.end(), {1, c.biasBidirectional ? 1 : 0, c.biasMaxDistance});
    }
    ASSERT_EQ(run(TFC_KERNEL_ATTENTION, in, out, ints, {scale, c.maskValue}), "");
    expectNear(out, attentionRef(c, q, k, v, tokens, add, static_cast<float>(scale), table),
               c.name);
  }
};

TEST_P(AttentionTest, MaskKinds) {
  for (int mask = kNone; mask <= kPaddingCausal; ++mask) {
    const std::string m = "mask " + std::to_string(mask);
    check({m + " small", 2, 5, 7, 2, 8, 8, mask});
    check({m + " square", 3, 9, 9, 2, 8, 8, mask});
    check({m + " Sq > Sk", 2, 12, 5, 1, 16, 16, mask});
    check({m + " q_len 1", 3, 1, 40, 4, 16, 16, mask});
    check({m + " -inf fill", 2, 6, 6, 2, 8, 8, mask, -kInf});
  }
}

TEST_P(AttentionTest, AllKeysMasked) {
  // A batch whose keys are all padding: every row of it is the uniform average
  // of all values with a finite fill, NaN with -inf.
  const std::vector<std::vector<int64_t>> allPad = {{3, 4, 5, 0, 0, 6}, {0, 0, 0, 0, 0, 0}};
  check({"key padding, all padded, finite", 2, 4, 6, 2, 8, 8, kKeyPadding, -1e9, allPad});
  check({"key padding, all padded, -inf", 2, 4, 6, 2, 8, 8, kKeyPadding, -kInf, allPad});
  // Leading padding under padding + causal: query 0 only sees key 0, a pad.
  const std::vector<std::vector<int64_t>> lead = {{0, 4, 5, 7, 0, 6, 2, 1}, {0, 0, 3, 3, 3, 3, 3, 3}};
  check({"padding causal, leading pad, finite", 2, 8, 8, 2, 8, 8, kPaddingCausal, -1e9, lead});
  check({"padding causal, leading pad, -inf", 2, 8, 8, 2, 8, 8, kPaddingCausal, -kInf, lead});
  // A fill close to the real scores: masked keys count.
  check({"key padding, fill 0", 2, 5, 9, 2, 8, 8, kKeyPadding, 0.0});
  check({"causal, fill 0.5", 2, 40, 40, 1, 8, 8, kCausal, 0.5});
  // Many keys all padded across several key tiles.
  std::vector<std::vector<int64_t>> longPad(2, std::vector<int64_t>(100, 0));
  for (int64_t j = 0; j < 3; ++j)
    longPad[0][j] = 5;
  check({"key padding, 97 of 100 padded", 2, 20, 100, 2, 16, 16, kKeyPadding, -1e9, longPad});
  check({"key padding, all 100 padded, finite", 2, 20, 100, 2, 16, 16, kKeyPadding, -1e4,
         std::vector<std::vector<int64_t>>(2, std::vector<int64_t>(100, 0))});
}

TEST_P(AttentionTest, Additive) {
  const std::vector<std::vector<int64_t>> shapes = {{2, 1, 1, 7}, {2, 3, 5, 7}, {5, 7}, {7}};
  for (const auto &s : shapes) {
    AttnCase c{"additive " + shapeStr(s), 2, 5, 7, 3, 8, 8, kAdditive};
    c.addShape = s;
    c.addInfRow = s.size() >= 2 && s[s.size() - 2] == 5;
    check(c);
  }
  AttnCase big{"additive large", 2, 40, 70, 2, 32, 32, kAdditive};
  big.addShape = {2, 1, 40, 70};
  check(big);
  AttnCase f32{"additive, f32 mask and output", 2, 20, 33, 2, 16, 16, kAdditive};
  f32.addShape = {2, 1, 1, 33};
  f32.f32Out = true;
  check(f32);
}

TEST_P(AttentionTest, TilesAndHeadDims) {
  check({"many tiles, causal", 2, 70, 130, 3, 64, 64, kCausal});
  check({"many tiles, padding causal", 2, 100, 100, 4, 64, 64, kPaddingCausal});
  check({"many tiles, key padding", 2, 33, 129, 2, 64, 64, kKeyPadding});
  check({"head_dim 100 (two chunks)", 2, 17, 45, 2, 100, 100, kCausal});
  check({"dk 8, dv 40", 2, 9, 33, 2, 8, 40, kNone});
  check({"dv 72", 1, 20, 50, 2, 32, 72, kKeyPadding});
  check({"dv 300 (two slices)", 1, 20, 40, 1, 24, 300, kCausal});
  check({"head_dim 1", 2, 5, 6, 3, 1, 1, kNone});
  check({"q_len 1, long cache", 2, 1, 300, 4, 64, 64, kNone});
}

TEST_P(AttentionTest, RelativePositionBias) {
  // T5's bias (a [buckets, H] table), with every mask kind but additive; the
  // distances reach the logarithmic buckets and beyond max_distance.
  auto biased = [](AttnCase c, int64_t nb, bool bidir, int64_t maxDist) {
    c.biasBuckets = nb;
    c.biasBidirectional = bidir;
    c.biasMaxDistance = maxDist;
    return c;
  };
  for (int mask = kNone; mask <= kPaddingCausal; ++mask) {
    const std::string m = "bias, mask " + std::to_string(mask);
    check(biased({m + " bidirectional", 2, 9, 11, 2, 8, 8, mask}, 8, true, 10));
    check(biased({m + " causal buckets", 2, 12, 12, 2, 8, 8, mask}, 6, false, 9));
  }
  check(biased({"bias, many tiles", 2, 70, 130, 3, 64, 64, kKeyPadding}, 32, true, 128));
  check(biased({"bias, Sq > Sk, far", 1, 40, 6, 2, 16, 16, kNone}, 8, true, 12));
  check(biased({"bias, q_len 1", 3, 1, 40, 4, 16, 16, kNone}, 32, false, 20));
}

TEST_P(KernelTest, RelativePositionBias) {
  // The unfused [1, H, Sq, Sk] bias of a [buckets, H] table.
  for (bool bidir : {true, false}) {
    HostTensor table = random(TFC_DTYPE_F32, {8, 3}, -2, 2);
    HostTensor qids(TFC_DTYPE_I64, {2, 5}), kids(TFC_DTYPE_I64, {2, 30});
    HostTensor out(TFC_DTYPE_F32, {1, 3, 5, 30});
    ASSERT_EQ(run(TFC_KERNEL_RELATIVE_POSITION_BIAS, {&table, &qids, &kids}, out,
                  {bidir ? 1 : 0, 16}, {}),
              "");
    std::vector<double> want;
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 30; ++j)
          want.push_back(table.get(tfc_relative_bucket(j - i, bidir, 8, 16) * 3 + h));
    expectEqual(out, want, bidir ? "bidirectional" : "causal");
  }
}

TEST_P(KernelTest, AttentionNoKeys) {
  HostTensor q = random(dt(), {2, 3, 8}), k(dt(), {2, 0, 8}), v(dt(), {2, 0, 8});
  HostTensor out = random(dt(), {2, 3, 8});
  ASSERT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v}, out, {kNone, 2, 0}, {0.5, -1e9}), "");
  expectEqual(out, std::vector<double>(48, 0.0), "attention over no keys");
}

// --- Cached attention -------------------------------------------------------------------

struct CachedCase {
  const char *name;
  int64_t B, T, pos, L, H, dk, dv;
  int64_t cacheBatch = 0; ///< 0: B
  bool f32Cache = false;  ///< f32 caches behind q, k, v of the dtype under test
};

TEST_P(KernelTest, CachedAttention) {
  const CachedCase cases[] = {
      {"prompt at pos 0", 2, 3, 0, 8, 2, 4, 4},
      {"one token at pos 5", 2, 1, 5, 8, 2, 4, 4},
      {"fills the cache", 1, 2, 6, 8, 2, 4, 4},
      {"several key tiles, cache batch > B", 3, 1, 37, 64, 4, 16, 16, 4},
      {"several query and key tiles", 2, 20, 45, 70, 2, 64, 32},
      {"f32 caches", 2, 2, 33, 40, 2, 16, 16, 0, true},
  };
  for (const CachedCase &c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t D = c.H * c.dk, Dv = c.H * c.dv, CB = c.cacheBatch ? c.cacheBatch : c.B;
    HostTensor q = random(dt(), {c.B, c.T, D}), k = random(dt(), {c.B, c.T, D});
    HostTensor v = random(dt(), {c.B, c.T, Dv});
    const uint32_t ct = c.f32Cache ? uint32_t(TFC_DTYPE_F32) : dt();
    HostTensor kc = random(ct, {CB, c.L, D}), vc = random(ct, {CB, c.L, Dv});
    // Rows past pos + T are not part of the sequence: poison them.
    for (int64_t b = 0; b < CB; ++b)
      for (int64_t r = c.pos + c.T; r < c.L; ++r) {
        for (int64_t d = 0; d < D; ++d)
          kc.set((b * c.L + r) * D + d, kNaN);
        for (int64_t d = 0; d < Dv; ++d)
          vc.set((b * c.L + r) * Dv + d, kNaN);
      }
    const HostTensor kc0 = kc, vc0 = vc;
    HostTensor pos = tensor(TFC_DTYPE_I64, {}, {static_cast<double>(c.pos)});
    HostTensor out(dt(), {c.B, c.T, Dv});
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
    ASSERT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &pos}, out, {c.H},
                  {scale}),
              "");
    // The caches: the new rows written at pos, everything else untouched.
    std::vector<double> kref = kc0.values(), vref = vc0.values();
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t d = 0; d < D; ++d)
          kref[(b * c.L + c.pos + t) * D + d] = k.get((b * c.T + t) * D + d);
        for (int64_t d = 0; d < Dv; ++d)
          vref[(b * c.L + c.pos + t) * Dv + d] = v.get((b * c.T + t) * Dv + d);
      }
    expectEqual(kc, kref, "key cache");
    expectEqual(vc, vref, "value cache");
    // The output: query t at position pos + t attends over cache rows 0 .. pos + t,
    // a causal attention with a query offset over the first pos + T cache rows.
    const std::vector<double> qv = q.values();
    ref::Attention a;
    a.batch = c.B;
    a.qLen = c.T;
    a.kvLen = c.pos + c.T;
    a.heads = c.H;
    a.headDim = c.dk;
    a.vHeadDim = c.dv;
    a.q = qv.data();
    a.k = kref.data();
    a.v = vref.data();
    a.kBatchStride = c.L * D;
    a.vBatchStride = c.L * Dv;
    a.scale = static_cast<float>(scale);
    a.mask = ref::Mask::Causal;
    a.maskValue = -kInf;
    a.qPosOffset = c.pos;
    expectNear(out, ref::attention(a), "cached attention output");
  }
}

TEST_P(KernelTest, CachedAttentionBeyondCache) {
  HostTensor q = random(dt(), {1, 2, 8}), k = random(dt(), {1, 2, 8}), v = random(dt(), {1, 2, 8});
  HostTensor kc = random(dt(), {1, 8, 8}), vc = random(dt(), {1, 8, 8});
  HostTensor out(dt(), {1, 2, 8});
  HostTensor pos = tensor(TFC_DTYPE_I64, {}, {7});
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &pos}, out, {2}, {0.5}),
            "decode position 9 is beyond the KV cache's 8 positions");
  pos.set(0, 6);
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &pos}, out, {2}, {0.5}), "");
}

/// Continuous batching (docs/generation.md): rows at their own positions, their
/// K and V in cache rows a block table names: one block per row, and blocks of
/// L positions spanning several cache rows (every backend).
TEST_P(KernelTest, CachedAttentionPerRow) {
  struct Case {
    const char *name;
    int64_t L, N;                          ///< block (cache row) length, cache rows
    std::vector<int64_t> pos;              ///< per row
    std::vector<std::vector<int64_t>> table; ///< per row: its blocks
    int64_t T = 2;                         ///< new tokens per row
    int64_t H = 2, Hkv = 0;                ///< query heads, key/value heads (0: H)
    int64_t window = 0;                    ///< a sliding window (0: none)
    double softcap = 0;                    ///< the scores' soft-cap (0: none)
  };
  // Rows longer than the kernel's key block (64) over blocks of 16 and 64
  // positions (read in place), 6 (gathered), and a prefill of 20 tokens (the
  // tiled path) beside them.
  auto blocks = [](int64_t first, int64_t n) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < n; ++i)
      v.push_back(first + 3 * (n - 1 - i)); // rows' blocks disjoint, in no order
    return v;
  };
  const Case cases[] = {
      {"one block per row", 8, 4, {0, 5, 2}, {{2}, {0}, {3}}},
      {"one position for all, permuted rows", 8, 3, {3, 3, 3}, {{1}, {2}, {0}}},
      {"blocks of 4 positions", 4, 6, {5, 9}, {{4, 1, 0}, {3, 5, 2}}},
      {"blocks of 16, long rows", 16, 40, {150, 3, 77}, {blocks(0, 10), blocks(1, 10),
                                                          blocks(2, 10)}},
      {"blocks of 64, long rows", 64, 40, {130, 64}, {blocks(5, 3), blocks(9, 3)}},
      {"blocks of 6, gathered", 6, 40, {31, 12}, {blocks(3, 6), blocks(4, 6)}},
      {"a prefill over blocks of 16", 16, 40, {70, 0}, {blocks(6, 6), blocks(8, 6)}, 20},
      {"4 heads over 2 (grouped-query), blocks of 16", 16, 12, {20, 5},
       {{7, 2, 9}, {4, 0, 11}}, 3, 4, 2},
      {"a sliding window of 5, one block per row", 96, 3, {80, 2}, {{2}, {0}}, 2, 2, 0, 5},
      {"a sliding window of 70 over a prefill, one block per row", 128, 2, {100, 0}, {{1}, {0}},
       20, 4, 2, 70},
      {"a soft-cap of 0.5, 4 heads over 2, blocks of 16", 16, 12, {20, 5},
       {{7, 2, 9}, {4, 0, 11}}, 3, 4, 2, 0, 0.5},
      {"a soft-cap of 0.3 over a prefill and a window of 9", 128, 2, {100, 0}, {{1}, {0}}, 20, 2,
       0, 9, 0.3},
  };
  const int64_t dk = 8, dv = 4;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t T = c.T, H = c.H, Hkv = c.Hkv ? c.Hkv : c.H;
    // q and the output have H heads; k, v and the caches Hkv.
    const int64_t D = Hkv * dk, Dv = Hkv * dv;
    const int64_t B = static_cast<int64_t>(c.pos.size());
    const int64_t nb = static_cast<int64_t>(c.table[0].size());
    HostTensor q = random(dt(), {B, T, H * dk}), k = random(dt(), {B, T, D});
    HostTensor v = random(dt(), {B, T, Dv});
    HostTensor kc = random(dt(), {c.N, c.L, D}), vc = random(dt(), {c.N, c.L, Dv});
    std::vector<double> pv, tv;
    for (int64_t b = 0; b < B; ++b) {
      pv.push_back(static_cast<double>(c.pos[b]));
      for (int64_t j : c.table[b])
        tv.push_back(static_cast<double>(j));
    }
    HostTensor pos = tensor(TFC_DTYPE_I64, {B}, pv);
    HostTensor table = tensor(TFC_DTYPE_I64, {B, nb}, tv);
    const HostTensor kc0 = kc, vc0 = vc;
    HostTensor out(dt(), {B, T, H * dv});
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
    const std::string got = run(TFC_KERNEL_CACHED_ATTENTION,
                                {&q, &k, &v, &kc, &vc, &pos, &table}, out,
                                {H, 0, 0, 0, 1, c.Hkv, c.window}, {scale, c.softcap});
    ASSERT_EQ(got, "");
    // Each row on its own: its positions gathered from its blocks.
    std::vector<double> kref = kc0.values(), vref = vc0.values();
    auto slot = [&](int64_t b, int64_t p) { return c.table[b][p / c.L] * c.L + p % c.L; };
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t at = slot(b, c.pos[b] + t);
        for (int64_t d = 0; d < D; ++d)
          kref[at * D + d] = k.get((b * T + t) * D + d);
        for (int64_t d = 0; d < Dv; ++d)
          vref[at * Dv + d] = v.get((b * T + t) * Dv + d);
      }
    expectEqual(kc, kref, "key cache");
    expectEqual(vc, vref, "value cache");
    const std::vector<double> qv = q.values();
    std::vector<double> want;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = c.pos[b] + T;
      std::vector<double> kr, vr;
      for (int64_t p = 0; p < n; ++p) {
        kr.insert(kr.end(), kref.begin() + slot(b, p) * D, kref.begin() + (slot(b, p) + 1) * D);
        vr.insert(vr.end(), vref.begin() + slot(b, p) * Dv,
                  vref.begin() + (slot(b, p) + 1) * Dv);
      }
      ref::Attention a;
      a.batch = 1;
      a.qLen = T;
      a.kvLen = n;
      a.heads = H;
      a.kvHeads = Hkv;
      a.headDim = dk;
      a.vHeadDim = dv;
      a.q = qv.data() + b * T * H * dk;
      a.k = kr.data();
      a.v = vr.data();
      a.scale = static_cast<float>(scale);
      a.mask = ref::Mask::Causal;
      a.maskValue = -kInf;
      a.qPosOffset = c.pos[b];
      a.window = c.window;
      a.softcap = c.softcap;
      const std::vector<double> o = ref::attention(a);
      want.insert(want.end(), o.begin(), o.end());
    }
    expectNear(out, want, "cached attention output");
  }
}

/// An attention whose rows share key blocks (decode_step's cross-attention
/// over one copy of each batch item's encoder memory): row b's keys are the
/// blocks table[b], with key padding over them. Against the reference on each
/// row's keys gathered.
TEST_P(KernelTest, AttentionOverSharedBlocks) {
  struct Case {
    const char *name;
    int64_t L, N, Sq;                          ///< block length, blocks, queries per row
    std::vector<std::vector<int64_t>> table;   ///< per row: its blocks
    int mask = kKeyPadding;
    int64_t keys = 0; ///< each row's keys (the key tokens' count; 0: nb * L)
  };
  const Case cases[] = {
      // Beams of 3 items, each item's source one block of 7 (no power of two).
      {"beams share their item's block", 7, 3, 1, {{0}, {0}, {1}, {2}, {2}}},
      {"no mask, a prefill of 3 queries", 7, 3, 3, {{2}, {0}, {2}}, kNone},
      {"rows over 3 blocks of 16", 16, 6, 1, {{4, 1, 0}, {3, 5, 2}, {4, 1, 0}}},
      {"a prefill of 20 over 2 blocks of 64", 64, 3, 20, {{2, 0}, {1, 2}}},
      // The engine's rows: sources padded to 27 keys over 2 blocks of 16, the
      // second block of the first row the zero block (0).
      {"27 keys over 2 blocks of 16", 16, 5, 1, {{3, 0}, {1, 4}, {2, 0}}, kKeyPadding, 27},
      {"one block of 7, 5 keys (a session's source)", 7, 2, 2, {{1}, {0}}, kKeyPadding, 5},
  };
  const int64_t H = 2, dk = 8, dv = 4, D = H * dk, Dv = H * dv;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t B = static_cast<int64_t>(c.table.size());
    const int64_t nb = static_cast<int64_t>(c.table[0].size());
    const int64_t Sk = c.keys ? c.keys : nb * c.L;
    HostTensor q = random(dt(), {B, c.Sq, D}), k = random(dt(), {c.N, c.L, D});
    HostTensor v = random(dt(), {c.N, c.L, Dv});
    std::vector<double> tv, tokv;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t j : c.table[b])
        tv.push_back(static_cast<double>(j));
      for (int64_t j = 0; j < Sk; ++j) // row b's last b keys are padding
        tokv.push_back(j >= Sk - b ? 0.0 : static_cast<double>(randomInt(1, 9)));
    }
    HostTensor table = tensor(TFC_DTYPE_I64, {B, nb}, tv);
    HostTensor tokens = tensor(TFC_DTYPE_I64, {B, Sk}, tokv);
    HostTensor out(dt(), {B, c.Sq, Dv});
    const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
    std::vector<HostTensor *> in = {&q, &k, &v};
    if (c.mask == kKeyPadding)
      in.push_back(&tokens);
    in.push_back(&table);
    // mask, heads, pad id, no bias (3), no grouping or window, a block table.
    const std::string got =
        run(TFC_KERNEL_ATTENTION, in, out, {c.mask, H, 0, 0, 0, 0, 0, 0, 1}, {scale, -1e9});
    ASSERT_EQ(got, "");
    // The same rows with their keys gathered: the plain attention's reference.
    HostTensor kg(dt(), {B, Sk, D}), vg(dt(), {B, Sk, Dv});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < Sk; ++j) {
        const int64_t at = c.table[b][j / c.L] * c.L + j % c.L;
        for (int64_t d = 0; d < D; ++d)
          kg.set((b * Sk + j) * D + d, k.get(at * D + d));
        for (int64_t d = 0; d < Dv; ++d)
          vg.set((b * Sk + j) * Dv + d, v.get(at * Dv + d));
      }
    AttnCase ac{c.name, B, c.Sq, Sk, H, dk, dv, c.mask};
    HostTensor none = random(dt(), {1});
    expectNear(out, attentionRef(ac, q, kg, vg, tokens, none, scale, none), c.name);
  }
}

TEST_P(KernelTest, AttentionOverSharedBlocksErrors) {
  HostTensor q = random(dt(), {2, 1, 8}), k = random(dt(), {3, 6, 8}), v = random(dt(), {3, 6, 8});
  HostTensor out(dt(), {2, 1, 8});
  HostTensor table = tensor(TFC_DTYPE_I64, {3, 1}, {0, 1, 2});
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v, &table}, out, {kNone, 2, 0, 0, 0, 0, 0, 0, 1},
                {0.5, -1e9}),
            "attention: the block table [3, 1] is not [2, blocks]");
  HostTensor tokens = tensor(TFC_DTYPE_I64, {2, 7}, std::vector<double>(14, 1.0));
  HostTensor two = tensor(TFC_DTYPE_I64, {2, 1}, {0, 2});
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v, &tokens, &two}, out,
                {kKeyPadding, 2, 0, 0, 0, 0, 0, 0, 1}, {0.5, -1e9}),
            "attention: the key tokens [2, 7] outnumber the 6 keys of 1 blocks of 6");
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v, &two}, out, {kCausal, 2, 0, 0, 0, 0, 0, 0, 1},
                {0.5, -1e9}),
            "attention: a block table takes no causal or additive mask");
  if (backend().name() == "cuda")
    return; // the table is in device memory: CUDA leaves such a row zero
  HostTensor far = tensor(TFC_DTYPE_I64, {2, 1}, {0, 3});
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v, &far}, out, {kNone, 2, 0, 0, 0, 0, 0, 0, 1},
                {0.5, -1e9}),
            "attention block 3 is outside the 3 key blocks");
}

/// Grouped-query attention: H query heads over Hkv key/value heads; query
/// head h reads key/value head h / (H / Hkv). Against the reference.
TEST_P(KernelTest, GroupedQueryAttention) {
  struct Case {
    const char *name;
    int64_t B, Sq, Sk, H, Hkv, dk;
    int mask; ///< tfc_mask_t: none or causal
    int64_t window = 0; ///< a sliding window (causal only; 0: none)
    double softcap = 0; ///< the scores' soft-cap (0: none)
  };
  const Case cases[] = {
      {"4 heads over 2, no mask", 2, 5, 7, 4, 2, 8, TFC_MASK_NONE},
      {"8 heads over 1 (multi-query), causal", 1, 9, 9, 8, 1, 16, TFC_MASK_CAUSAL},
      {"6 heads over 3, one query", 3, 1, 70, 6, 3, 16, TFC_MASK_NONE},
      {"a prefill of 40, 4 over 2, causal", 1, 40, 40, 4, 2, 32, TFC_MASK_CAUSAL},
      {"a sliding window of 3, 8 over 1", 1, 9, 9, 8, 1, 16, TFC_MASK_CAUSAL, 3},
      {"a sliding window of 20 over 150 keys, 4 over 2", 2, 150, 150, 4, 2, 16, TFC_MASK_CAUSAL,
       20},
      {"a soft-cap of 0.5, one query, 6 over 3", 3, 1, 70, 6, 3, 16, TFC_MASK_NONE, 0, 0.5},
      {"a soft-cap of 0.4 and a window of 7 over a prefill of 90", 2, 90, 90, 4, 2, 32,
       TFC_MASK_CAUSAL, 7, 0.4},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    HostTensor q = random(dt(), {c.B, c.Sq, c.H * c.dk});
    HostTensor k = random(dt(), {c.B, c.Sk, c.Hkv * c.dk});
    HostTensor v = random(dt(), {c.B, c.Sk, c.Hkv * c.dk});
    HostTensor out(dt(), {c.B, c.Sq, c.H * c.dk});
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
    ASSERT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v}, out,
                  {c.mask, c.H, 0, 0, 0, 0, c.Hkv, c.window}, {scale, -kInf, c.softcap}),
              "");
    const std::vector<double> qv = q.values(), kv = k.values(), vv = v.values();
    ref::Attention a;
    a.batch = c.B;
    a.qLen = c.Sq;
    a.kvLen = c.Sk;
    a.heads = c.H;
    a.kvHeads = c.Hkv;
    a.headDim = c.dk;
    a.q = qv.data();
    a.k = kv.data();
    a.v = vv.data();
    a.scale = static_cast<float>(scale);
    a.mask = c.mask == TFC_MASK_CAUSAL ? ref::Mask::Causal : ref::Mask::None;
    a.maskValue = -kInf;
    a.window = c.window;
    a.softcap = c.softcap;
    expectNear(out, ref::attention(a), "grouped-query attention");
  }
  // A key/value head count that does not divide the heads.
  HostTensor q = random(dt(), {1, 2, 24}), k = random(dt(), {1, 2, 16}), v = k;
  HostTensor out(dt(), {1, 2, 24});
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &k, &v}, out, {TFC_MASK_NONE, 3, 0, 0, 0, 0, 2},
                {0.5, -1e9}),
            "attention: 2 key/value heads do not divide 3 heads");
  // A sliding window without a causal mask.
  HostTensor kq = random(dt(), {1, 2, 24});
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &kq, &kq}, out, {TFC_MASK_NONE, 3, 0, 0, 0, 0, 0, 4},
                {0.5, -1e9}),
            "attention: a sliding window of 4 must be positive and needs a causal mask");
  // A negative soft-cap.
  EXPECT_EQ(run(TFC_KERNEL_ATTENTION, {&q, &kq, &kq}, out, {TFC_MASK_NONE, 3, 0},
                {0.5, -1e9, -2.5}),
            "attention: the score soft-cap -2.5 is negative");
}

/// Rotary embeddings against a double reference (the angle a product in f32,
/// as transformers forms it): rotate_half and interleaved pairs, a partial
/// rotary dim, no offset, one offset and one per row.
TEST_P(KernelTest, Rotary) {
  struct Case {
    const char *name;
    int64_t B, S, H, hd, half;
    bool interleaved;
    std::vector<double> offset; ///< empty: none
  };
  const Case cases[] = {
      {"rotate_half, positions 0..S-1", 2, 5, 3, 8, 4, false, {}},
      {"interleaved, partial rotary dim", 1, 4, 2, 16, 4, true, {}},
      {"one offset (a decode step)", 3, 1, 4, 32, 16, false, {4000}},
      {"an offset per row", 2, 3, 2, 8, 4, false, {7, 130}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    HostTensor x = random(dt(), {c.B, c.S, c.H * c.hd});
    std::vector<double> fv;
    for (int64_t i = 0; i < c.half; ++i)
      fv.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / (2.0 * c.half))));
    HostTensor freq = tensor(TFC_DTYPE_F32, {c.half}, fv);
    HostTensor offset = tensor(TFC_DTYPE_I64, {static_cast<int64_t>(c.offset.size())},
                               c.offset.empty() ? std::vector<double>{0} : c.offset);
    if (c.offset.size() == 1)
      offset = tensor(TFC_DTYPE_I64, {}, c.offset);
    HostTensor out(dt(), {c.B, c.S, c.H * c.hd});
    std::vector<HostTensor *> in = {&x, &freq};
    if (!c.offset.empty())
      in.push_back(&offset);
    ASSERT_EQ(run(TFC_KERNEL_ROTARY, in, out, {c.hd, c.interleaved, !c.offset.empty()}, {}), "");
    const std::vector<double> xv = x.values();
    std::vector<double> want(xv);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t s = 0; s < c.S; ++s) {
        const double off = c.offset.empty() ? 0 : c.offset[c.offset.size() > 1 ? b : 0];
        const float p = static_cast<float>(s + off);
        for (int64_t h = 0; h < c.H; ++h)
          for (int64_t i = 0; i < c.half; ++i) {
            const double angle = static_cast<float>(p * static_cast<float>(fv[i]));
            const int64_t base = (b * c.S + s) * c.H * c.hd + h * c.hd;
            const int64_t ia = base + (c.interleaved ? 2 * i : i);
            const int64_t ib = base + (c.interleaved ? 2 * i + 1 : i + c.half);
            want[ia] = xv[ia] * std::cos(angle) - xv[ib] * std::sin(angle);
            want[ib] = xv[ib] * std::cos(angle) + xv[ia] * std::sin(angle);
          }
      }
    expectNear(out, want, "rotary");
  }
  HostTensor x = random(dt(), {1, 2, 8}), out(dt(), {1, 2, 8});
  HostTensor freq = tensor(TFC_DTYPE_F32, {2}, {1, 0.1});
  HostTensor neg = tensor(TFC_DTYPE_I64, {}, {-3});
  EXPECT_EQ(run(TFC_KERNEL_ROTARY, {&x, &freq, &neg}, out, {4, 0, 1}, {}),
            "negative position offset -3");
  HostTensor wide = tensor(TFC_DTYPE_F32, {3}, {1, 0.5, 0.1});
  EXPECT_EQ(run(TFC_KERNEL_ROTARY, {&x, &wide}, out, {4, 0, 0}, {}),
            "rotary: inv_freq [3] rotates more than head_dim 4");
}

/// A rotary folded into the cached attention (tfc-fuse-rotary) against the
/// unfused kernels, ROTARY of q and k at the new positions and then
/// CACHED_ATTENTION: the caches and the outputs agree (every backend).
TEST_P(KernelTest, CachedAttentionRotary) {
  struct Case {
    const char *name;
    std::vector<double> pos; ///< one: a rank-0 position for every row
    bool table;              ///< paged in blocks of 8 (per-row positions)
    int64_t T, H, Hkv, half;
    bool interleaved;
  };
  const Case cases[] = {
      {"one position for all rows, rotate_half", {5}, false, 3, 2, 2, 8, false},
      {"rows at their own positions, blocks of 8", {0, 13, 130}, true, 2, 2, 2, 8, false},
      {"interleaved pairs, grouped-query (4 heads over 2)", {9, 40}, true, 1, 4, 2, 8, true},
      {"a partial rotary (8 of 16 features), a prefill of 20", {0, 3}, true, 20, 2, 1, 4,
       false},
      // 600 new rows of 8 + 2 heads: the CPU rotates them on several threads.
      {"a prefill of 300 over 8 heads", {0, 3}, true, 300, 8, 2, 8, false},
  };
  const int64_t hd = 16, dv = 8, L = 8;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    const int64_t B = c.pos.size() > 1 ? static_cast<int64_t>(c.pos.size()) : 2;
    const int64_t maxPos = static_cast<int64_t>(*std::max_element(c.pos.begin(), c.pos.end()));
    const int64_t nb = (maxPos + c.T + L - 1) / L;
    const int64_t rowLen = c.table ? L : maxPos + c.T, rows = c.table ? B * nb : B;
    HostTensor q = random(dt(), {B, c.T, c.H * hd}), k = random(dt(), {B, c.T, c.Hkv * hd});
    HostTensor v = random(dt(), {B, c.T, c.Hkv * dv});
    HostTensor kc = random(dt(), {rows, rowLen, c.Hkv * hd});
    HostTensor vc = random(dt(), {rows, rowLen, c.Hkv * dv});
    HostTensor kc2 = kc, vc2 = vc;
    std::vector<double> fv, tv;
    for (int64_t i = 0; i < c.half; ++i)
      fv.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / (2.0 * c.half))));
    for (int64_t i = 0; i < B * nb; ++i)
      tv.push_back(static_cast<double>(B * nb - 1 - i)); // rows' blocks, in reverse
    HostTensor freq = tensor(TFC_DTYPE_F32, {c.half}, fv);
    HostTensor pos = c.pos.size() > 1 ? tensor(TFC_DTYPE_I64, {B}, c.pos)
                                      : tensor(TFC_DTYPE_I64, {}, c.pos);
    HostTensor table = tensor(TFC_DTYPE_I64, {B, nb}, tv);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const std::vector<int64_t> ints = {c.H, 0, 0, 0, c.table, c.Hkv, 0};
    std::vector<int64_t> fusedInts = ints;
    fusedInts.insert(fusedInts.end(), {1, c.interleaved});
    std::vector<HostTensor *> fusedIn = {&q, &k, &v, &kc, &vc, &pos};
    if (c.table)
      fusedIn.push_back(&table);
    fusedIn.push_back(&freq);
    HostTensor fused(dt(), {B, c.T, c.H * dv}), unfused(dt(), {B, c.T, c.H * dv});
    ASSERT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, fusedIn, fused, fusedInts, {scale}), "");
    HostTensor qr(dt(), q.shape), kr(dt(), k.shape);
    ASSERT_EQ(run(TFC_KERNEL_ROTARY, {&q, &freq, &pos}, qr, {hd, c.interleaved, 1}), "");
    ASSERT_EQ(run(TFC_KERNEL_ROTARY, {&k, &freq, &pos}, kr, {hd, c.interleaved, 1}), "");
    std::vector<HostTensor *> in = {&qr, &kr, &v, &kc2, &vc2, &pos};
    if (c.table)
      in.push_back(&table);
    ASSERT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, in, unfused, ints, {scale}), "");
    expectNear(kc, kc2.values(), "key cache");
    expectEqual(vc, vc2.values(), "value cache");
    expectNear(fused, unfused.values(), "output");
  }
  // inv_freq must fit the head.
  HostTensor q = random(dt(), {1, 1, 8}), k = random(dt(), {1, 1, 8}), v = random(dt(), {1, 1, 8});
  HostTensor kc = random(dt(), {1, 4, 8}), vc = random(dt(), {1, 4, 8}), out(dt(), {1, 1, 8});
  HostTensor pos = tensor(TFC_DTYPE_I64, {}, {1});
  HostTensor freq = tensor(TFC_DTYPE_F32, {3}, {1, 0.5, 0.25});
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &pos, &freq}, out,
                {2, 0, 0, 0, 0, 0, 0, 1, 0}, {0.5}),
            "cached_attention: inv_freq [3] rotates more than head_dim 4");
}

TEST_P(KernelTest, CachedAttentionPerRowErrors) {
  HostTensor q = random(dt(), {2, 1, 8}), k = random(dt(), {2, 1, 8}), v = random(dt(), {2, 1, 8});
  HostTensor kc = random(dt(), {3, 8, 8}), vc = random(dt(), {3, 8, 8});
  HostTensor out(dt(), {2, 1, 8});
  HostTensor pos = tensor(TFC_DTYPE_I64, {2}, {3, 8});
  HostTensor table = tensor(TFC_DTYPE_I64, {2, 1}, {0, 1});
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &pos, &table}, out,
                {2, 0, 0, 0, 1}, {0.5}),
            "decode position 9 is beyond the KV cache's 8 positions");
  pos.set(1, 2);
  table.set(1, 3);
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &pos, &table}, out,
                {2, 0, 0, 0, 1}, {0.5}),
            "KV block 3 is outside the cache's 3 blocks");
  // Two blocks of 4 per row: 8 positions a row, and every block up to the
  // row's last position is checked, the ones written before too.
  HostTensor kc4 = random(dt(), {3, 4, 8}), vc4 = random(dt(), {3, 4, 8});
  HostTensor pos2 = tensor(TFC_DTYPE_I64, {2}, {5, 8});
  HostTensor two = tensor(TFC_DTYPE_I64, {2, 2}, {0, 1, 2, 0});
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc4, &vc4, &pos2, &two}, out,
                {2, 0, 0, 0, 1}, {0.5}),
            "decode position 9 is beyond the KV cache's 8 positions");
  pos2.set(1, 4);
  two.set(2, -1); // row 1's first block, behind its position 4
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc4, &vc4, &pos2, &two}, out,
                {2, 0, 0, 0, 1}, {0.5}),
            "KV block -1 is outside the cache's 3 blocks");
  HostTensor three = tensor(TFC_DTYPE_I64, {3}, {1, 2, 3});
  EXPECT_EQ(run(TFC_KERNEL_CACHED_ATTENTION, {&q, &k, &v, &kc, &vc, &three}, out, {2}, {0.5}),
            "cached_attention: the positions [3] are neither one value nor one per row of the "
            "batch 2");
}

/// decode_step's token embedding with one position offset per row.
TEST_P(KernelTest, TokenEmbeddingPerRowOffset) {
  HostTensor table = random(dt(), {11, 8}), pos = random(dt(), {12, 8});
  HostTensor ids = tensor(TFC_DTYPE_I64, {3, 2}, {1, 2, 3, 4, 5, 6});
  HostTensor offset = tensor(TFC_DTYPE_I64, {3}, {0, 7, 4});
  HostTensor out(dt(), {3, 2, 8});
  ASSERT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table, &pos, &offset}, out, {1, 1, 0, 1},
                {1.0}),
            "");
  std::vector<double> want;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t d = 0; d < 8; ++d)
        want.push_back(table.get(static_cast<int64_t>(ids.get(i * 2 + j)) * 8 + d) +
                       pos.get((j + static_cast<int64_t>(offset.get(i))) * 8 + d));
  expectNear(out, want, "per-row offsets");
  offset.set(1, 11);
  EXPECT_EQ(run(TFC_KERNEL_TOKEN_EMBEDDING, {&ids, &table, &pos, &offset}, out, {1, 1, 0, 1},
                {1.0}),
            "position 12 is beyond the 12-row positional table");
}

// --- Positions and masks ------------------------------------------------------------------

TEST_P(KernelTest, Positions) {
  HostTensor x = random(dt(), {4, 5});
  HostTensor byCol(TFC_DTYPE_I64, {1, 5}), byRow(TFC_DTYPE_I64, {4, 1});
  ASSERT_EQ(run(TFC_KERNEL_POSITIONS, {&x}, byCol, {1}), "");
  ASSERT_EQ(run(TFC_KERNEL_POSITIONS, {&x}, byRow, {0}), "");
  expectEqual(byCol, {0, 1, 2, 3, 4}, "positions along axis 1");
  expectEqual(byRow, {0, 1, 2, 3}, "positions along axis 0");
}

/// RoBERTa's positions (a second int, padding_idx 1): the real tokens of each row
/// numbered from 2 in order, padding at 1, also padding in the middle; i32 ids too.
TEST_P(KernelTest, PaddedPositions) {
  for (uint32_t idType : {TFC_DTYPE_I64, TFC_DTYPE_I32}) {
    HostTensor ids = tensor(idType, {3, 5}, {0, 7, 9, 1, 1, /**/ 1, 4, 1, 5, 6, /**/ 8, 8, 8, 8, 8});
    HostTensor out(TFC_DTYPE_I64, {3, 5});
    ASSERT_EQ(run(TFC_KERNEL_POSITIONS, {&ids}, out, {1, 1}), "");
    expectEqual(out, {2, 3, 4, 1, 1, /**/ 1, 2, 1, 3, 4, /**/ 2, 3, 4, 5, 6}, "padded positions");
  }
  HostTensor ids = tensor(TFC_DTYPE_I64, {3, 5}, std::vector<double>(15, 1));
  HostTensor wrong(TFC_DTYPE_I64, {1, 5});
  EXPECT_NE(run(TFC_KERNEL_POSITIONS, {&ids}, wrong, {1, 1}), "");
}

TEST_P(KernelTest, NopeakMask) {
  HostTensor ids = tensor(TFC_DTYPE_I64, {2, 6}, std::vector<double>(12, 1));
  HostTensor out(TFC_DTYPE_BOOL, {1, 6, 6});
  ASSERT_EQ(run(TFC_KERNEL_NOPEAK_MASK, {&ids}, out), "");
  std::vector<double> ref;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j)
      ref.push_back(j <= i);
  expectEqual(out, ref, "nopeak_mask");
}

INSTANTIATE_TEST_SUITE_P(Backends, KernelTest, ::testing::ValuesIn(allParams()), paramName);
INSTANTIATE_TEST_SUITE_P(Backends, AttentionTest, ::testing::ValuesIn(allParams()), paramName);

} // namespace
} // namespace tfc::test
