//===- KernelTableTest.cpp - tfc/kernels.def and what is generated from it ===//
#include "tfc/abi.h"
#include "tfc/kernel_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

namespace {

namespace sc = tfc::schema;

// The ids are stored in model.bin: a row must never be renumbered or dropped.
static_assert(TFC_KERNEL_TOKEN_EMBEDDING == 0 && TFC_KERNEL_LINEAR == 2 &&
                  TFC_KERNEL_FUSED_LINEAR == 3 && TFC_KERNEL_LAYER_NORM == 26 &&
                  TFC_KERNEL_ATTENTION == 27 && TFC_KERNEL_CACHED_ATTENTION == 30,
              "kernel ids are append-only (include/tfc/kernels.def)");
static_assert(TFC_MASK_ADDITIVE == 4 && TFC_NORM_RMS == 2 && TFC_ACT_GELU_TANH == 3 &&
                  TFC_CMP_GE == 5,
              "enum values are append-only (include/tfc/enums.def)");

TEST(KernelTable, IdsAreDenseAndNamesUnique) {
  std::set<std::string> names;
  for (uint32_t k = 0; k < TFC_KERNEL_COUNT; ++k) {
    const std::string name = tfc_kernel_name(k);
    EXPECT_NE(name, "?") << "kernel " << k << " has no row";
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    const sc::KernelInfo *info = sc::kernelInfo(k);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->id, k);
    EXPECT_EQ(name, info->name);
    std::set<std::string> operands;
    for (uint32_t i = 0; i < info->numOperands; ++i) {
      EXPECT_TRUE(operands.insert(info->operands[i].name).second) << name;
      // Every plan dtype is one CUDA reads too.
      EXPECT_EQ(info->operands[i].cpu & ~info->operands[i].cuda, 0u)
          << name << "." << info->operands[i].name;
    }
  }
  EXPECT_STREQ(tfc_kernel_name(TFC_KERNEL_COUNT), "?");
  EXPECT_EQ(sc::kernelInfo(TFC_KERNEL_COUNT), nullptr);
}

TEST(KernelTable, AttributesRoundTrip) {
  sc::AttentionAttrs a;
  a.mask_kind = TFC_MASK_PADDING_CAUSAL;
  a.num_heads = 12;
  a.pad_id = 1;
  a.has_bias = true;
  a.bidirectional = true;
  a.max_distance = 128;
  a.scale = 0.125;
  a.mask_value = -INFINITY;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  a.encode(ints, floats);
  EXPECT_EQ(ints, (std::vector<int64_t>{3, 12, 1, 1, 1, 128}));
  ASSERT_EQ(floats.size(), 2u);
  sc::AttentionAttrs b;
  ASSERT_EQ(sc::AttentionAttrs::decode(ints, floats, b), "");
  EXPECT_EQ(b.mask_kind, TFC_MASK_PADDING_CAUSAL);
  EXPECT_EQ(b.num_heads, 12);
  EXPECT_TRUE(b.has_bias && b.bidirectional);
  EXPECT_EQ(b.max_distance, 128);
  EXPECT_EQ(b.scale, 0.125);
  EXPECT_TRUE(std::isinf(b.mask_value));
}

TEST(KernelTable, OlderFilesLeaveOutTrailingOptionalAttributes) {
  // Format versions before the schema wrote attention's bias ints only with a
  // bias, and positions' padding_idx only for RoBERTa.
  sc::AttentionAttrs a;
  ASSERT_EQ(sc::AttentionAttrs::decode({2, 4, 0}, {0.5, -1e9}, a), "");
  EXPECT_FALSE(a.has_bias);
  sc::PositionsAttrs p;
  // And the encoder leaves them out at their defaults.
  std::vector<int64_t> ints;
  std::vector<double> floats;
  a.encode(ints, floats);
  EXPECT_EQ(ints, (std::vector<int64_t>{2, 4, 0}));
  ints.clear();
  p.axis = 1;
  p.encode(ints, floats);
  EXPECT_EQ(ints, (std::vector<int64_t>{1}));
  ASSERT_EQ(sc::PositionsAttrs::decode({1}, {}, p), "");
  EXPECT_EQ(p.padding_idx, -1);
  ASSERT_EQ(sc::PositionsAttrs::decode({1, 1}, {}, p), "");
  EXPECT_EQ(p.padding_idx, 1);
  // A trailing optional float (attention's softcap): absent in older files and
  // left out at its default; written, and read back, when set.
  EXPECT_EQ(a.softcap, 0.0);
  floats.clear();
  a.encode(ints, floats);
  EXPECT_EQ(floats, (std::vector<double>{0.5, -1e9}));
  a.softcap = 50;
  ints.clear();
  floats.clear();
  a.encode(ints, floats);
  EXPECT_EQ(floats, (std::vector<double>{0.5, -1e9, 50}));
  sc::AttentionAttrs c;
  ASSERT_EQ(sc::AttentionAttrs::decode(ints, floats, c), "");
  EXPECT_EQ(c.softcap, 50);
  EXPECT_EQ(sc::AttentionAttrs::decode(ints, {0.5, -1e9, INFINITY}, c), "softcap is not finite");
  EXPECT_EQ(sc::AttentionAttrs::decode(ints, {0.5, -1e9, 1, 2}, c),
            "has 3 int and 4 float attributes, more than its 3 and 3");
}

TEST(KernelTable, DecodeNamesTheBadAttribute) {
  sc::FusedLinearAttrs f;
  EXPECT_EQ(sc::FusedLinearAttrs::decode({1, 0, TFC_ACT_COUNT}, {}, f),
            "activation is " + std::to_string(TFC_ACT_COUNT) + ", outside [0, " +
                std::to_string(TFC_ACT_COUNT - 1) + "]");
  EXPECT_EQ(sc::FusedLinearAttrs::decode({2, 0, 0}, {}, f), "has_bias is 2, not 0 or 1");
  EXPECT_EQ(sc::FusedLinearAttrs::decode({1, 0}, {}, f), "lacks its int attribute activation");
  // has_multiplier is a trailing optional flag (files before it leave it out).
  EXPECT_EQ(sc::FusedLinearAttrs::decode({1, 0, 0, 7}, {}, f), "has_multiplier is 7, not 0 or 1");
  EXPECT_EQ(sc::FusedLinearAttrs::decode({1, 0, 0}, {}, f), "");
  EXPECT_FALSE(f.has_multiplier);
  EXPECT_EQ(sc::FusedLinearAttrs::decode({1, 0, 0, 1, 3}, {}, f),
            "has 5 int and 0 float attributes, more than its 4 and 0");
  sc::LayerNormAttrs n;
  EXPECT_EQ(sc::LayerNormAttrs::decode({0}, {NAN}, n), "eps is not finite");
  sc::AttentionAttrs a;
  EXPECT_EQ(sc::AttentionAttrs::decode({0, 4, 0}, {0.5, NAN}, a), "mask_value is not a number");
}

/// checkOperands on the CPU's (the plan's) dtype sets.
std::string check(uint32_t kernel, std::vector<int64_t> ints, std::vector<double> floats,
                  std::vector<uint32_t> in, uint32_t out, std::vector<uint8_t> weight = {}) {
  sc::OperandDtypes d{in.data(), in.size(), out, weight.empty() ? nullptr : weight.data()};
  return sc::checkOperands(sc::Backend::Cpu, kernel, ints, floats, d);
}

TEST(KernelTable, OperandsFollowTheirGates) {
  const uint32_t f = TFC_DTYPE_F32, b = TFC_DTYPE_BF16, i8 = TFC_DTYPE_I8;
  // linear: x, weight (, bias); an i8 weight's scales are its descriptor's.
  EXPECT_EQ(check(TFC_KERNEL_LINEAR, {1}, {}, {f, f, f}, f), "");
  EXPECT_EQ(check(TFC_KERNEL_LINEAR, {1}, {}, {f, f}, f),
            "linear: takes 3 inputs, the plan gives 2");
  EXPECT_EQ(check(TFC_KERNEL_LINEAR, {0}, {}, {b, i8}, b, {0, 1}), "");
  EXPECT_EQ(check(TFC_KERNEL_LINEAR, {0}, {}, {f, i8, f}, f),
            "linear: takes 2 inputs, the plan gives 3");
  EXPECT_EQ(check(TFC_KERNEL_LINEAR, {0}, {}, {f, i8}, f, {0, 0}),
            "linear: the i8 weight is not a weight");
  EXPECT_EQ(check(TFC_KERNEL_LINEAR, {1}, {}, {f, f, b}, f),
            "linear: the bias is bf16, not f32");
  // attention: the mask kind gates the key tokens; k and v have q's dtype.
  EXPECT_EQ(check(TFC_KERNEL_ATTENTION, {1, 2, 0}, {0.5, -1e9},
                  {f, f, f, TFC_DTYPE_I64}, f),
            "");
  EXPECT_EQ(check(TFC_KERNEL_ATTENTION, {2, 2, 0}, {0.5, -1e9}, {f, f, f, TFC_DTYPE_I64}, f),
            "attention: takes 3 inputs, the plan gives 4");
  EXPECT_EQ(check(TFC_KERNEL_ATTENTION, {2, 2, 0}, {0.5, -1e9}, {b, f, b}, b),
            "attention: the k is f32, not the q's bf16");
  // An output outside its set; an unknown dtype.
  EXPECT_EQ(check(TFC_KERNEL_SOFTMAX, {0}, {}, {f}, b), "softmax: the output is bf16, not f32");
  EXPECT_EQ(check(TFC_KERNEL_SOFTMAX, {0}, {}, {77}, f),
            "softmax: the input has an unknown dtype 77");
  EXPECT_EQ(check(TFC_KERNEL_COUNT, {}, {}, {}, f),
            "kernel " + std::to_string(TFC_KERNEL_COUNT) + " is unknown");
  // The view keeps its input's dtype.
  EXPECT_EQ(check(TFC_KERNEL_RESHAPE, {}, {}, {TFC_DTYPE_I64}, f),
            "reshape: the output is f32, not the input's i64");
}

TEST(KernelTable, OperandsByName) {
  const uint32_t dts[] = {TFC_DTYPE_F32, TFC_DTYPE_I8, TFC_DTYPE_F32, TFC_DTYPE_F32};
  sc::InputDtypes dt{dts, 4};
  EXPECT_EQ(sc::operandIndex(TFC_KERNEL_FUSED_LINEAR, "residual", {1, 1, 0}, {}, dt), 3);
  EXPECT_EQ(sc::operandIndex(TFC_KERNEL_FUSED_LINEAR, "scales", {1, 1, 0}, {}, dt), -1);
  EXPECT_EQ(sc::operandIndex(TFC_KERNEL_FUSED_LINEAR, "bias", {0, 1, 0}, {}, dt), -1);
  EXPECT_STREQ(sc::operandName(TFC_KERNEL_FUSED_LINEAR, 2, {0, 1, 0}, {}, dt), "residual");
}

TEST(KernelTable, ActivationsApplyUnaryRows) {
  uint32_t kernel = 0;
  int64_t mode = -1;
  EXPECT_FALSE(sc::activationUnary(TFC_ACT_NONE, &kernel, &mode));
  ASSERT_TRUE(sc::activationUnary(TFC_ACT_GELU_TANH, &kernel, &mode));
  EXPECT_EQ(kernel, (uint32_t)TFC_KERNEL_GELU);
  EXPECT_EQ(mode, TFC_GELU_TANH);
  EXPECT_FALSE(sc::activationUnary(TFC_ACT_COUNT, &kernel, &mode));
  // Each flag the passes ask about.
  EXPECT_TRUE(sc::kernelInfo(TFC_KERNEL_RESHAPE)->flags & TFC_KF_VIEW);
  EXPECT_TRUE(sc::kernelInfo(TFC_KERNEL_LAYER_NORM)->flags & TFC_KF_POSITION_WISE);
  EXPECT_FALSE(sc::kernelInfo(TFC_KERNEL_SOFTMAX)->flags & TFC_KF_POSITION_WISE);
}

TEST(KernelTable, DtypeBytes) {
  EXPECT_EQ(tfc_dtype_bytes(TFC_DTYPE_F32, 3), 12u);
  EXPECT_EQ(tfc_dtype_bytes(TFC_DTYPE_BF16, 3), 6u);
  EXPECT_EQ(tfc_dtype_bytes(TFC_DTYPE_I8, 3), 3u);
  EXPECT_EQ(tfc_dtype_bytes(99, 3), 0u);
  uint64_t b = 0;
  EXPECT_EQ(tfc_dtype_bytes_checked(TFC_DTYPE_I64, UINT64_MAX / 8, &b), 0);
}

} // namespace
