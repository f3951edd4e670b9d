//===- KernelTableTest.cpp - tfc/kernels.def and what abi.h derives -------===//
#include "tfc/abi.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace {

// The ids are stored in model.bin: a row must never be renumbered or dropped.
static_assert(TFC_KERNEL_TOKEN_EMBEDDING == 0 && TFC_KERNEL_LINEAR == 2 &&
                  TFC_KERNEL_FUSED_LINEAR == 3 && TFC_KERNEL_LAYER_NORM == 26 &&
                  TFC_KERNEL_ATTENTION == 27 && TFC_KERNEL_CACHED_ATTENTION == 30,
              "kernel ids are append-only (include/tfc/kernels.def)");

TEST(KernelTable, IdsAreDenseAndNamesUnique) {
  std::set<std::string> names;
  for (uint32_t k = 0; k < TFC_KERNEL_COUNT; ++k) {
    const std::string name = tfc_kernel_name(k);
    EXPECT_NE(name, "?") << "kernel " << k << " has no row";
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    uint32_t in = 99, ints = 99, floats = 99;
    EXPECT_EQ(tfc_kernel_min_arity(k, &in, &ints, &floats), 1) << name;
    EXPECT_LE(in, 6u) << name;
  }
  EXPECT_STREQ(tfc_kernel_name(TFC_KERNEL_COUNT), "?");
  uint32_t in, ints, floats;
  EXPECT_EQ(tfc_kernel_min_arity(TFC_KERNEL_COUNT, &in, &ints, &floats), 0);
}

TEST(KernelTable, RowsSayWhatTheKernelsRead) {
  uint32_t in, ints, floats;
  ASSERT_EQ(tfc_kernel_min_arity(TFC_KERNEL_ATTENTION, &in, &ints, &floats), 1);
  EXPECT_EQ(in, 3u);     // q, k, v
  EXPECT_EQ(ints, 3u);   // mask_kind, num_heads, pad_id
  EXPECT_EQ(floats, 2u); // scale, mask_value
  ASSERT_EQ(tfc_kernel_min_arity(TFC_KERNEL_CACHED_ATTENTION, &in, &ints, &floats), 1);
  EXPECT_EQ(in, 6u); // q, k, v, k_cache, v_cache, pos
  EXPECT_STREQ(tfc_kernel_name(TFC_KERNEL_AND), "and");
  EXPECT_STREQ(tfc_kernel_name(TFC_KERNEL_LOG_SOFTMAX), "log_softmax");
}

} // namespace
