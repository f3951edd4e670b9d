//===- WeightsTest.cpp - Tests for WeightStore ----------------------------===//
//
// WeightStore is where a model's declared weights meet the user's checkpoint.
// These tests write small safetensors fixtures with writeSafetensors() and pin
// what declare() says for each way a checkpoint can disagree with the model
// (missing tensor, wrong shape, non-float dtype, renamed names, tied weights
// used with two shapes), the exact error text included, since that is what a
// user reads. They also check the f16/bf16/f64 -> f32 conversion on known bit
// patterns, the bookkeeping behind unusedCheckpointTensors() and accept(), and
// the checkpoint-free initialisation: zeros/ones for biases and norms, and a
// seeded, deterministic Xavier-uniform fill within sqrt(6 / (fan_in + fan_out)).
//
//===----------------------------------------------------------------------===//

#include "frontend/Weights.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace tfc {
namespace {

namespace fs = std::filesystem;

/// A tensor to put in a fixture: owns its bytes.
struct Fixture {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
std::vector<uint8_t> toBytes(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty())
    std::memcpy(b.data(), v.data(), b.size());
  return b;
}

Fixture f32(const std::string &name, std::vector<int64_t> shape,
            const std::vector<float> &values) {
  return {name, StDType::F32, std::move(shape), toBytes(values)};
}

/// An F32 tensor filled with 0, 1, 2, ...
Fixture f32Iota(const std::string &name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = (float)i;
  return f32(name, std::move(shape), v);
}

/// Gives each test its own fresh directory under testing::TempDir().
class WeightStoreTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "weights-test-XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr);
    dir = buf.data();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string path(const std::string &name) const {
    return (fs::path(dir) / name).string();
  }

  /// Writes |tensors| (in that order) to a new checkpoint and returns its path.
  std::string writeCheckpoint(const std::vector<Fixture> &tensors,
                              const std::string &name = "model.safetensors") {
    std::vector<StTensorView> views;
    for (const Fixture &t : tensors)
      views.push_back({t.name, t.dtype, t.shape,
                       t.bytes.empty() ? nullptr : t.bytes.data(), t.bytes.size()});
    std::string p = path(name), error;
    EXPECT_TRUE(writeSafetensors(p, views, {}, &error)) << error;
    return p;
  }

  /// Opens a checkpoint made of |tensors| in |store|.
  void open(WeightStore &store, const std::vector<Fixture> &tensors) {
    ckptPath = writeCheckpoint(tensors);
    std::string error;
    ASSERT_TRUE(store.openCheckpoint(ckptPath, error)) << error;
    EXPECT_EQ(error, "");
  }

  std::string dir;
  std::string ckptPath;
};

//===----------------------------------------------------------------------===//
// declare() against a checkpoint
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, DeclarePresentTensorWithRightShape) {
  WeightStore store;
  EXPECT_FALSE(store.hasCheckpoint());
  open(store, {f32("enc.w", {2, 3}, {1, 2, 3, 4, 5, 6}), f32("enc.b", {3}, {7, 8, 9})});
  EXPECT_TRUE(store.hasCheckpoint());
  EXPECT_EQ(store.checkpointPath(), ckptPath);

  std::string error;
  ASSERT_TRUE(store.declare("enc.w", {2, 3}, WeightRole::Matrix, error)) << error;
  ASSERT_TRUE(store.declare("enc.b", {3}, WeightRole::Bias, error)) << error;
  EXPECT_EQ(error, "");

  ASSERT_EQ(store.weights().size(), 2u);
  const WeightInfo &w = store.weights()[0];
  EXPECT_EQ(w.name, "enc.w");
  EXPECT_EQ(w.checkpointName, "enc.w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w.role, WeightRole::Matrix);
  EXPECT_EQ(store.weights()[1].name, "enc.b");
  EXPECT_EQ(store.weights()[1].role, WeightRole::Bias);

  // With a checkpoint, the data comes from it whatever the role.
  EXPECT_EQ(store.materialize("enc.w"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(store.materialize("enc.b"), (std::vector<float>{7, 8, 9}));
  EXPECT_TRUE(store.materialize("not.declared").empty());
}

TEST_F(WeightStoreTest, ScalarWeight) {
  WeightStore store;
  open(store, {f32("scale", {}, {0.125f})});
  std::string error;
  ASSERT_TRUE(store.declare("scale", {}, WeightRole::Gain, error)) << error;
  EXPECT_EQ(store.materialize("scale"), (std::vector<float>{0.125f}));
}

TEST_F(WeightStoreTest, MissingTensor) {
  WeightStore store;
  open(store, {f32Iota("enc.w", {2, 3})});
  std::string error;
  EXPECT_FALSE(store.declare("dec.w", {4, 5}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "missing weight tensor 'dec.w' in '" + ckptPath +
                       "' (expected F32 [4, 5])");
  EXPECT_TRUE(store.weights().empty());
  EXPECT_TRUE(store.materialize("dec.w").empty());
  EXPECT_EQ(store.totalBytes(), 0u);
}

TEST_F(WeightStoreTest, WrongShape) {
  WeightStore store;
  open(store, {f32Iota("enc.w", {2, 3}), f32Iota("enc.b", {3})});
  std::string error;
  EXPECT_FALSE(store.declare("enc.w", {3, 2}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "weight 'enc.w' has shape [2, 3], expected [3, 2]");
  EXPECT_FALSE(store.declare("enc.b", {1, 3}, WeightRole::Bias, error));
  EXPECT_EQ(error, "weight 'enc.b' has shape [3], expected [1, 3]");
  EXPECT_FALSE(store.declare("enc.b", {}, WeightRole::Bias, error));
  EXPECT_EQ(error, "weight 'enc.b' has shape [3], expected []");
  EXPECT_TRUE(store.weights().empty());
  // A failed declare does not count as a use of the tensor.
  EXPECT_EQ(store.unusedCheckpointTensors(),
            (std::vector<std::string>{"enc.b", "enc.w"}));
}

TEST_F(WeightStoreTest, IntegerDtypeRejected) {
  WeightStore store;
  open(store,
       {{"ids", StDType::I32, {4}, toBytes(std::vector<int32_t>{1, 2, 3, 4})},
        {"mask", StDType::Bool, {2}, {1, 0}},
        {"big", StDType::I64, {2, 2}, toBytes(std::vector<int64_t>{1, 2, 3, 4})}});
  std::string error;
  EXPECT_FALSE(store.declare("ids", {4}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "weight 'ids' has dtype I32, expected a float type (F32, "
                   "F16, BF16 or F64) with shape [4]");
  EXPECT_FALSE(store.declare("mask", {2}, WeightRole::Bias, error));
  EXPECT_EQ(error, "weight 'mask' has dtype BOOL, expected a float type (F32, "
                   "F16, BF16 or F64) with shape [2]");
  // The dtype is reported even when the shape is also wrong.
  EXPECT_FALSE(store.declare("big", {3}, WeightRole::Bias, error));
  EXPECT_EQ(error, "weight 'big' has dtype I64, expected a float type (F32, "
                   "F16, BF16 or F64) with shape [3]");
  EXPECT_TRUE(store.weights().empty());
}

//===----------------------------------------------------------------------===//
// dtype conversion
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, Float16Converted) {
  // 1.0, -2.5, 0.5, 65504 (max), 2^-24 (smallest subnormal), 2^-15
  // (subnormal), -0.0, +inf.
  std::vector<uint16_t> bits = {0x3C00, 0xC100, 0x3800, 0x7BFF,
                                0x0001, 0x0200, 0x8000, 0x7C00};
  WeightStore store;
  open(store, {{"h", StDType::F16, {8}, toBytes(bits)}});
  std::string error;
  ASSERT_TRUE(store.declare("h", {8}, WeightRole::Matrix, error)) << error;
  std::vector<float> v = store.materialize("h");
  ASSERT_EQ(v.size(), 8u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 0.5f);
  EXPECT_EQ(v[3], 65504.0f);
  EXPECT_EQ(v[4], std::ldexp(1.0f, -24));
  EXPECT_EQ(v[5], std::ldexp(1.0f, -15));
  EXPECT_EQ(v[6], 0.0f);
  EXPECT_TRUE(std::signbit(v[6]));
  EXPECT_EQ(v[7], std::numeric_limits<float>::infinity());
}

TEST_F(WeightStoreTest, Float16NaNStaysNaN) {
  WeightStore store;
  open(store, {{"h", StDType::F16, {1}, toBytes(std::vector<uint16_t>{0x7E00})}});
  std::string error;
  ASSERT_TRUE(store.declare("h", {1}, WeightRole::Bias, error)) << error;
  std::vector<float> v = store.materialize("h");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_TRUE(std::isnan(v[0]));
}

TEST_F(WeightStoreTest, BFloat16Converted) {
  // 1.0, -2.5, 0.5, 3.140625, -0.0
  std::vector<uint16_t> bits = {0x3F80, 0xC020, 0x3F00, 0x4049, 0x8000};
  WeightStore store;
  open(store, {{"b", StDType::BF16, {5}, toBytes(bits)}});
  std::string error;
  ASSERT_TRUE(store.declare("b", {5}, WeightRole::Matrix, error)) << error;
  std::vector<float> v = store.materialize("b");
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 0.5f);
  EXPECT_EQ(v[3], 3.140625f);
  EXPECT_EQ(v[4], 0.0f);
  EXPECT_TRUE(std::signbit(v[4]));
}

TEST_F(WeightStoreTest, Float64Converted) {
  std::vector<double> values = {1.0, -2.5, 0.5, 1e-3, 1e300};
  WeightStore store;
  open(store, {{"d", StDType::F64, {5}, toBytes(values)}});
  std::string error;
  ASSERT_TRUE(store.declare("d", {5}, WeightRole::Matrix, error)) << error;
  std::vector<float> v = store.materialize("d");
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.5f);
  EXPECT_EQ(v[2], 0.5f);
  EXPECT_EQ(v[3], (float)1e-3);
  EXPECT_EQ(v[4], std::numeric_limits<float>::infinity()); // out of f32 range
  EXPECT_EQ(store.totalBytes(), 5u * 4); // counted in f32, not f64
}

//===----------------------------------------------------------------------===//
// renames, tied weights, accept(), unusedCheckpointTensors()
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, RenameLongestPrefixWins) {
  WeightStore store;
  open(store, {f32("model.blocks.0.w", {2}, {1, 2}),
               f32("model.enc.norm.w", {2}, {3, 4}),
               f32("other.w", {2}, {5, 6})});
  // Added shortest first and longest in the middle: order must not matter.
  store.addRename("encoder.", "model.enc.");
  store.addRename("encoder.layers.", "model.blocks.");
  store.addRename("enc", "unused.");
  std::string error;
  ASSERT_TRUE(store.declare("encoder.layers.0.w", {2}, WeightRole::Matrix, error))
      << error;
  ASSERT_TRUE(store.declare("encoder.norm.w", {2}, WeightRole::Gain, error))
      << error;
  // No rule matches: the name is used as is.
  ASSERT_TRUE(store.declare("other.w", {2}, WeightRole::Bias, error)) << error;

  ASSERT_EQ(store.weights().size(), 3u);
  EXPECT_EQ(store.weights()[0].name, "encoder.layers.0.w");
  EXPECT_EQ(store.weights()[0].checkpointName, "model.blocks.0.w");
  EXPECT_EQ(store.weights()[1].checkpointName, "model.enc.norm.w");
  EXPECT_EQ(store.weights()[2].checkpointName, "other.w");
  EXPECT_EQ(store.materialize("encoder.layers.0.w"), (std::vector<float>{1, 2}));
  EXPECT_EQ(store.materialize("encoder.norm.w"), (std::vector<float>{3, 4}));
  EXPECT_TRUE(store.unusedCheckpointTensors().empty());
}

TEST_F(WeightStoreTest, RenameIsNamedInErrors) {
  WeightStore store;
  open(store, {f32("model.blocks.0.w", {2}, {1, 2}),
               {"model.blocks.0.ids", StDType::I8, {2}, {1, 2}}});
  store.addRename("encoder.layers.", "model.blocks.");
  std::string error;
  EXPECT_FALSE(store.declare("encoder.layers.9.w", {2}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "missing weight tensor 'model.blocks.9.w' (renamed from "
                   "'encoder.layers.9.w') in '" +
                       ckptPath + "' (expected F32 [2])");
  EXPECT_FALSE(store.declare("encoder.layers.0.w", {3}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "weight 'model.blocks.0.w' (renamed from "
                   "'encoder.layers.0.w') has shape [2], expected [3]");
  EXPECT_FALSE(store.declare("encoder.layers.0.ids", {2}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "weight 'model.blocks.0.ids' (renamed from "
                   "'encoder.layers.0.ids') has dtype I8, expected a float type "
                   "(F32, F16, BF16 or F64) with shape [2]");
}

TEST_F(WeightStoreTest, TiedWeightsWithCheckpoint) {
  WeightStore store;
  open(store, {f32Iota("emb", {4, 2})});
  std::string error;
  ASSERT_TRUE(store.declare("emb", {4, 2}, WeightRole::Matrix, error)) << error;
  // Used again (e.g. as the output projection) with the same shape: fine.
  ASSERT_TRUE(store.declare("emb", {4, 2}, WeightRole::Matrix, error)) << error;
  EXPECT_EQ(store.weights().size(), 1u);
  EXPECT_EQ(store.totalBytes(), 4u * 8); // not counted twice

  EXPECT_FALSE(store.declare("emb", {2, 4}, WeightRole::Matrix, error));
  EXPECT_EQ(error,
            "weight 'emb' is used with shape [2, 4] here but with [4, 2] elsewhere");
  EXPECT_EQ(store.weights().size(), 1u);
  EXPECT_EQ(store.weights()[0].shape, (std::vector<int64_t>{4, 2}));
}

TEST_F(WeightStoreTest, TiedWeightsWithoutCheckpoint) {
  WeightStore store;
  std::string error;
  ASSERT_TRUE(store.declare("emb", {4, 2}, WeightRole::Matrix, error)) << error;
  ASSERT_TRUE(store.declare("emb", {4, 2}, WeightRole::Matrix, error)) << error;
  EXPECT_EQ(store.weights().size(), 1u);
  EXPECT_FALSE(store.declare("emb", {8}, WeightRole::Matrix, error));
  EXPECT_EQ(error, "weight 'emb' is used with shape [8] here but with [4, 2] elsewhere");
}

TEST_F(WeightStoreTest, AcceptMarksBuffers) {
  WeightStore store;
  open(store, {f32Iota("pe", {4, 2}), f32Iota("model.mask", {2}), f32Iota("w", {2})});
  store.addRename("enc.", "model.");
  EXPECT_TRUE(store.accept("pe"));
  EXPECT_TRUE(store.accept("enc.mask")); // renames apply
  EXPECT_FALSE(store.accept("nothing"));
  EXPECT_FALSE(store.accept("model.nothing"));
  // accept() does not declare anything.
  EXPECT_TRUE(store.weights().empty());
  EXPECT_TRUE(store.materialize("pe").empty());
  EXPECT_EQ(store.unusedCheckpointTensors(), (std::vector<std::string>{"w"}));
  // Accepting twice is harmless.
  EXPECT_TRUE(store.accept("pe"));
  EXPECT_EQ(store.unusedCheckpointTensors(), (std::vector<std::string>{"w"}));
}

TEST_F(WeightStoreTest, AcceptWithoutCheckpoint) {
  WeightStore store;
  EXPECT_FALSE(store.accept("pe"));
  EXPECT_TRUE(store.unusedCheckpointTensors().empty());
}

TEST_F(WeightStoreTest, UnusedCheckpointTensorsExactAndSorted) {
  WeightStore store;
  // Written out of order on purpose.
  open(store, {f32Iota("z.w", {1}), f32Iota("b.w", {1}), f32Iota("m.w", {1}),
               f32Iota("a.w", {1}), f32Iota("c.buf", {1}), f32Iota("B.w", {1})});
  EXPECT_EQ(store.unusedCheckpointTensors(),
            (std::vector<std::string>{"B.w", "a.w", "b.w", "c.buf", "m.w", "z.w"}));
  std::string error;
  ASSERT_TRUE(store.declare("m.w", {1}, WeightRole::Bias, error)) << error;
  EXPECT_TRUE(store.accept("c.buf"));
  EXPECT_FALSE(store.declare("z.w", {2}, WeightRole::Bias, error)); // wrong shape
  EXPECT_EQ(store.unusedCheckpointTensors(),
            (std::vector<std::string>{"B.w", "a.w", "b.w", "z.w"}));
}

//===----------------------------------------------------------------------===//
// openCheckpoint() failures
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, OpenCorruptFileFails) {
  std::string p = path("corrupt.safetensors");
  {
    std::ofstream f(p, std::ios::binary);
    f << "abcd";
  }
  WeightStore store;
  std::string error;
  EXPECT_FALSE(store.openCheckpoint(p, error));
  EXPECT_EQ(error, "file is truncated: 4 bytes, expected at least 8");
  EXPECT_FALSE(store.hasCheckpoint());

  // A plausible length prefix followed by a broken header.
  std::string header = "{\"w\": nope}";
  {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i)
      f.put((char)(n >> (8 * i)));
    f << header;
  }
  error.clear();
  EXPECT_FALSE(store.openCheckpoint(p, error));
  EXPECT_EQ(error.rfind("header is not valid JSON", 0), 0u) << error;
  EXPECT_FALSE(store.hasCheckpoint());

  // Without a checkpoint, declare() falls back to initialisation.
  ASSERT_TRUE(store.declare("w", {2}, WeightRole::Gain, error)) << error;
  EXPECT_EQ(store.materialize("w"), (std::vector<float>{1, 1}));
}

TEST_F(WeightStoreTest, OpenMissingFileFails) {
  WeightStore store;
  std::string error;
  EXPECT_FALSE(store.openCheckpoint(path("does-not-exist.safetensors"), error));
  EXPECT_EQ(error.rfind("cannot open file: ", 0), 0u) << error;
  EXPECT_FALSE(store.hasCheckpoint());
}

//===----------------------------------------------------------------------===//
// Initialisation without a checkpoint
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, BiasShiftZerosGainOnes) {
  WeightStore store;
  store.setSeed(42);
  std::string error;
  ASSERT_TRUE(store.declare("b", {5}, WeightRole::Bias, error)) << error;
  ASSERT_TRUE(store.declare("s", {2, 3}, WeightRole::Shift, error)) << error;
  ASSERT_TRUE(store.declare("g", {4}, WeightRole::Gain, error)) << error;
  ASSERT_TRUE(store.declare("empty", {0}, WeightRole::Bias, error)) << error;
  EXPECT_EQ(store.materialize("b"), std::vector<float>(5, 0.0f));
  EXPECT_EQ(store.materialize("s"), std::vector<float>(6, 0.0f));
  EXPECT_EQ(store.materialize("g"), std::vector<float>(4, 1.0f));
  EXPECT_TRUE(store.materialize("empty").empty());
  EXPECT_EQ(store.weights()[0].checkpointName, "b");
}

/// Checks |v| lies in [-bound, bound] and actually spreads over it.
void expectUniformWithin(const std::vector<float> &v, double bound) {
  ASSERT_FALSE(v.empty());
  float lo = *std::min_element(v.begin(), v.end());
  float hi = *std::max_element(v.begin(), v.end());
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.9 * bound);
  EXPECT_GT(hi, 0.9 * bound);
  double mean = 0;
  for (float x : v)
    mean += x;
  mean /= v.size();
  EXPECT_LT(std::fabs(mean), 0.1 * bound);
}

TEST_F(WeightStoreTest, MatrixXavierBound) {
  WeightStore store;
  store.setSeed(7);
  std::string error;
  ASSERT_TRUE(store.declare("lin.w", {64, 32}, WeightRole::Matrix, error)) << error;
  ASSERT_TRUE(store.declare("emb.w", {1000, 16}, WeightRole::Matrix, error)) << error;
  ASSERT_TRUE(store.declare("sq.w", {48, 48}, WeightRole::Matrix, error)) << error;

  std::vector<float> lin = store.materialize("lin.w");
  ASSERT_EQ(lin.size(), 64u * 32);
  expectUniformWithin(lin, std::sqrt(6.0 / (32 + 64)));

  std::vector<float> emb = store.materialize("emb.w");
  ASSERT_EQ(emb.size(), 1000u * 16);
  expectUniformWithin(emb, std::sqrt(6.0 / (16 + 1000)));

  expectUniformWithin(store.materialize("sq.w"), std::sqrt(6.0 / (48 + 48)));
}

TEST_F(WeightStoreTest, MatrixInitIsDeterministic) {
  auto make = [](uint64_t seed, const std::vector<std::string> &order) {
    WeightStore s;
    s.setSeed(seed);
    std::string error;
    for (const std::string &n : order)
      EXPECT_TRUE(s.declare(n, {16, 8}, WeightRole::Matrix, error)) << error;
    return s;
  };
  WeightStore a = make(1, {"x.w", "y.w"});
  WeightStore b = make(1, {"y.w", "x.w"}); // declaration order does not matter
  WeightStore c = make(2, {"x.w", "y.w"});

  std::vector<float> ax = a.materialize("x.w");
  EXPECT_EQ(ax, a.materialize("x.w")); // repeatable
  EXPECT_EQ(ax, b.materialize("x.w")); // same seed and name
  EXPECT_EQ(a.materialize("y.w"), b.materialize("y.w"));
  EXPECT_NE(ax, a.materialize("y.w")); // different name
  EXPECT_NE(ax, c.materialize("x.w")); // different seed
  EXPECT_NE(a.materialize("y.w"), c.materialize("y.w"));
}

TEST_F(WeightStoreTest, DefaultSeedIsDeterministic) {
  WeightStore a, b;
  std::string error;
  ASSERT_TRUE(a.declare("w", {8, 8}, WeightRole::Matrix, error)) << error;
  ASSERT_TRUE(b.declare("w", {8, 8}, WeightRole::Matrix, error)) << error;
  EXPECT_EQ(a.materialize("w"), b.materialize("w"));
}

// Disabled: a Matrix weight whose first dimension is 0 makes materialize()
// compute n / shape[0] = 0 / 0 (integer division by zero, SIGFPE). It should
// return an empty vector like any other zero-element weight.
TEST_F(WeightStoreTest, ZeroSizedMatrix) {
  WeightStore store;
  std::string error;
  ASSERT_TRUE(store.declare("w", {0, 5}, WeightRole::Matrix, error)) << error;
  EXPECT_TRUE(store.materialize("w").empty());
}

//===----------------------------------------------------------------------===//
// totalBytes()
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, TotalBytes) {
  WeightStore store;
  EXPECT_EQ(store.totalBytes(), 0u);
  std::string error;
  ASSERT_TRUE(store.declare("a", {2, 3}, WeightRole::Matrix, error)) << error;
  ASSERT_TRUE(store.declare("b", {4}, WeightRole::Bias, error)) << error;
  ASSERT_TRUE(store.declare("c", {}, WeightRole::Gain, error)) << error;
  ASSERT_TRUE(store.declare("d", {0, 7}, WeightRole::Bias, error)) << error;
  ASSERT_TRUE(store.declare("a", {2, 3}, WeightRole::Matrix, error)) << error;
  EXPECT_EQ(store.totalBytes(), 4u * (6 + 4 + 1 + 0));
}

TEST(WeightsShapeToStringTest, Formats) {
  EXPECT_EQ(formatShape({}), "[]");
  EXPECT_EQ(formatShape({7}), "[7]");
  EXPECT_EQ(formatShape({512, 64}), "[512, 64]");
  EXPECT_EQ(formatShape({2, 0, 3}), "[2, 0, 3]");
}

//===----------------------------------------------------------------------===//
// Sharded checkpoints (model.safetensors.index.json)
//===----------------------------------------------------------------------===//

TEST_F(WeightStoreTest, ShardedCheckpointReadsEachTensorFromItsShard) {
  writeCheckpoint({f32("a.w", {2}, {1, 2}), f32("unlisted", {1}, {0})}, "s1.safetensors");
  writeCheckpoint({f32("b.w", {3}, {3, 4, 5})}, "s2.safetensors");
  std::ofstream(path("model.safetensors.index.json"))
      << R"({"metadata": {"total_size": 20}, "weight_map": {"a.w": "s1.safetensors", "b.w": "s2.safetensors"}})";
  WeightStore store;
  std::string error;
  ASSERT_TRUE(store.openCheckpoint(path("model.safetensors.index.json"), error)) << error;
  ASSERT_TRUE(store.declare("b.w", {3}, WeightRole::Bias, error)) << error;
  EXPECT_EQ(store.materialize("b.w"), (std::vector<float>{3, 4, 5}));
  // Only what the index lists is the checkpoint.
  EXPECT_EQ(store.unusedCheckpointTensors(), (std::vector<std::string>{"a.w"}));
  EXPECT_FALSE(store.declare("unlisted", {1}, WeightRole::Bias, error));
}

TEST_F(WeightStoreTest, ShardedCheckpointErrors) {
  writeCheckpoint({f32("a.w", {2}, {1, 2})}, "s1.safetensors");
  auto openWith = [&](const std::string &json) {
    std::ofstream(path("i.index.json")) << json;
    WeightStore store;
    std::string error;
    EXPECT_FALSE(store.openCheckpoint(path("i.index.json"), error));
    EXPECT_FALSE(store.hasCheckpoint());
    return error;
  };
  EXPECT_EQ(openWith(R"({"weight_map": {"b.w": "s1.safetensors"}})"),
            "the index puts 'b.w' in shard 's1.safetensors', which has no such tensor");
  EXPECT_EQ(openWith(R"({"weight_map": {"a.w": "../s1.safetensors"}})"),
            "\"weight_map\" entry 'a.w' names '../s1.safetensors', not a file beside the index");
  EXPECT_EQ(openWith(R"({"weights": {}})"),
            "not a safetensors index: expected a JSON object with a \"weight_map\" object");
  EXPECT_EQ(openWith(R"({"weight_map": {}})"), "\"weight_map\" is empty");
  EXPECT_NE(openWith(R"({"weight_map": {"a.w": "missing.safetensors"}})").find(
                "shard '" + path("missing.safetensors") + "': "),
            std::string::npos);
}

} // namespace
} // namespace tfc
