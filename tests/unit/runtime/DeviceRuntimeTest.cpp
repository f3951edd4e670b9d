//===- DeviceRuntimeTest.cpp - the same model.bin on the CPU and on CUDA --===//
//
// Through the C API only. Where a CUDA device is present, a CUDA session runs
// the test model (a small tutorial-floydhub compiled at build time) in f32,
// f16 and bf16 and must match the CPU session, whose numbers the lit tests
// hold to PyTorch's: f32 within 1e-4, f16/bf16 within 2e-2 of the largest
// |logit|, and greedy generation with the same tokens in f32. Without a device
// (or in a build without CUDA) those tests skip with the reason, and the tests
// here check the clean failure instead: one status, no crash.
//
//===----------------------------------------------------------------------===//
#include "tfrun/tfrun.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#ifndef TFC_TEST_MODEL
#error "TFC_TEST_MODEL must name a model.bin compiled at build time"
#endif

namespace {

struct StatusGuard {
  tfrun_status_t *s;
  ~StatusGuard() { tfrun_status_release(s); }
};

tfrun_model_t *loadModel() {
  tfrun_model_t *m = nullptr;
  StatusGuard g{tfrun_model_load_file(TFC_TEST_MODEL, &m)};
  EXPECT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  return m;
}

/// A padded batch of 3 rows, like the goldens.
void bindInputs(tfrun_session_t *s) {
  const int64_t shape[2] = {3, 6};
  std::vector<int64_t> src = {5, 6, 7, 8, 9, 10, 11, 12, 13, 0, 0, 0, 14, 15, 0, 0, 0, 0};
  std::vector<int64_t> tgt = {1, 6, 7, 8, 9, 10, 1, 12, 13, 14, 0, 0, 1, 15, 16, 17, 18, 0};
  ASSERT_EQ(tfrun_session_set_input(s, "src", TFRUN_I64, shape, 2, src.data()), nullptr);
  ASSERT_EQ(tfrun_session_set_input(s, "tgt", TFRUN_I64, shape, 2, tgt.data()), nullptr);
}

std::vector<float> runLogits(tfrun_session_t *s) {
  bindInputs(s);
  StatusGuard g{tfrun_session_run(s)};
  EXPECT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  if (g.s)
    return {};
  const float *data = nullptr;
  const int64_t *shape = nullptr;
  size_t rank = 0;
  EXPECT_EQ(tfrun_session_get_output(s, "logits", &data, &shape, &rank), nullptr);
  size_t n = 1;
  for (size_t i = 0; i < rank; ++i)
    n *= (size_t)shape[i];
  return std::vector<float>(data, data + n);
}

std::vector<std::vector<int64_t>> greedy(tfrun_session_t *s) {
  bindInputs(s);
  tfrun_generate_options_t o;
  tfrun_generate_options_init(&o);
  o.max_len = 8;
  StatusGuard g{tfrun_session_generate(s, &o)};
  EXPECT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < tfrun_session_generated_count(s); ++i) {
    const int64_t *ids = nullptr;
    size_t len = 0;
    EXPECT_EQ(tfrun_session_get_generated(s, i, &ids, &len, nullptr), nullptr);
    out.emplace_back(ids, ids + len);
  }
  return out;
}

tfrun_session_t *cudaSession(tfrun_model_t *m, tfrun_dtype_t dtype) {
  tfrun_session_options_t o;
  tfrun_session_options_init(&o);
  o.device = TFRUN_DEVICE_CUDA;
  o.compute_dtype = dtype;
  tfrun_session_t *s = nullptr;
  StatusGuard g{tfrun_session_create_with_options(m, &o, &s)};
  EXPECT_EQ(g.s, nullptr) << tfrun_status_message(g.s);
  return s;
}

#define REQUIRE_CUDA_DEVICE()                                                              \
  do {                                                                                     \
    if (tfrun_cuda_device_count() == 0)                                                    \
      GTEST_SKIP() << "no CUDA device here (tfrun_cuda_device_count() == 0): the CUDA "    \
                      "tests run on a machine with an NVIDIA GPU";                         \
  } while (0)

TEST(DeviceRuntime, CpuIsTheDefaultAndNamesItself) {
  tfrun_model_t *m = loadModel();
  tfrun_session_options_t o;
  tfrun_session_options_init(&o);
  EXPECT_EQ(o.device, TFRUN_DEVICE_CPU);
  EXPECT_EQ(o.compute_dtype, TFRUN_F32);
  tfrun_session_t *s = nullptr;
  ASSERT_EQ(tfrun_session_create_with_options(m, &o, &s), nullptr);
  // "cpu (<vector ISA>, fma; f32 onednn|openblas; bf16 native|emulated; int8
  // with|without vnni; onednn <isa>)": the paths backends/cpu/cpu_isa.h chose.
  const std::string d = tfrun_session_device(s);
  EXPECT_EQ(d.rfind("cpu (", 0), 0u) << d;
  EXPECT_NE(d.find(", fma; f32 "), std::string::npos) << d;
  EXPECT_NE(d.find("; bf16 "), std::string::npos) << d;
  EXPECT_NE(d.find("; int8 with"), std::string::npos) << d;
  EXPECT_NE(d.find("; onednn "), std::string::npos) << d;
  tfrun_session_release(s);
  tfrun_model_release(m);
}

TEST(DeviceRuntime, BadOptionsAreOneStatus) {
  tfrun_model_t *m = loadModel();
  tfrun_session_options_t o;
  tfrun_session_options_init(&o);
  tfrun_session_t *s = nullptr;
  o.compute_dtype = TFRUN_BF16; // the CPU's precision is a compile-time choice
  {
    StatusGuard g{tfrun_session_create_with_options(m, &o, &s)};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_UNSUPPORTED);
    EXPECT_STREQ(tfrun_status_message(g.s),
                 "on the CPU the precision is chosen at compile time (tfc compile --precision "
                 "bf16 | int8); compute_dtype must be f32");
    EXPECT_EQ(s, nullptr);
  }
  o.compute_dtype = TFRUN_I64;
  {
    StatusGuard g{tfrun_session_create_with_options(m, &o, &s)};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(tfrun_status_message(g.s), "compute dtype 1 is not f32, f16 or bf16");
  }
  o.compute_dtype = TFRUN_F32;
  o.device = 7;
  {
    StatusGuard g{tfrun_session_create_with_options(m, &o, &s)};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
    EXPECT_STREQ(tfrun_status_message(g.s), "unknown device 7");
  }
  {
    StatusGuard g{tfrun_session_create_with_options(m, nullptr, &s)};
    EXPECT_EQ(tfrun_status_code(g.s), TFRUN_INVALID_ARGUMENT);
  }
  tfrun_model_release(m);
}

TEST(DeviceRuntime, CudaWithoutADeviceIsUnsupported) {
  if (tfrun_cuda_device_count() > 0)
    GTEST_SKIP() << "a CUDA device is present: the numerics tests below cover it";
  tfrun_model_t *m = loadModel();
  tfrun_session_options_t o;
  tfrun_session_options_init(&o);
  o.device = TFRUN_DEVICE_CUDA;
  tfrun_session_t *s = nullptr;
  StatusGuard g{tfrun_session_create_with_options(m, &o, &s)};
  EXPECT_EQ(tfrun_status_code(g.s), TFRUN_UNSUPPORTED);
  std::string msg = tfrun_status_message(g.s);
  EXPECT_TRUE(msg.rfind("no CUDA device: ", 0) == 0 ||
              msg.rfind("this libtfrun was built without CUDA", 0) == 0)
      << msg;
  EXPECT_EQ(s, nullptr);
  tfrun_model_release(m);
}

class CudaMatchesCpu : public ::testing::TestWithParam<tfrun_dtype_t> {};

TEST_P(CudaMatchesCpu, Logits) {
  REQUIRE_CUDA_DEVICE();
  tfrun_model_t *m = loadModel();
  tfrun_session_t *cpu = nullptr;
  ASSERT_EQ(tfrun_session_create(m, 1, &cpu), nullptr);
  tfrun_session_t *gpu = cudaSession(m, GetParam());
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(std::string(tfrun_session_device(gpu)).rfind("cuda:0", 0), 0u);
  std::vector<float> want = runLogits(cpu), got = runLogits(gpu);
  ASSERT_EQ(want.size(), got.size());
  ASSERT_FALSE(want.empty());
  float scale = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::fabs(want[i]));
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  if (GetParam() == TFRUN_F32)
    EXPECT_LE(err, 1e-4f);
  else
    EXPECT_LE(err, 2e-2f * scale);
  // A second run on the same session reuses the device arena and weights.
  std::vector<float> again = runLogits(gpu);
  EXPECT_EQ(again, got);
  tfrun_session_release(gpu);
  tfrun_session_release(cpu);
  tfrun_model_release(m);
}

TEST_P(CudaMatchesCpu, GreedyGeneration) {
  REQUIRE_CUDA_DEVICE();
  tfrun_model_t *m = loadModel();
  tfrun_session_t *cpu = nullptr;
  ASSERT_EQ(tfrun_session_create(m, 1, &cpu), nullptr);
  tfrun_session_t *gpu = cudaSession(m, GetParam());
  ASSERT_NE(gpu, nullptr);
  auto want = greedy(cpu), got = greedy(gpu);
  ASSERT_EQ(want.size(), got.size());
  if (GetParam() == TFRUN_F32)
    EXPECT_EQ(got, want); // the same tokens in f32
  tfrun_session_release(gpu);
  tfrun_session_release(cpu);
  tfrun_model_release(m);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaMatchesCpu,
                         ::testing::Values(TFRUN_F32, TFRUN_F16, TFRUN_BF16),
                         [](const ::testing::TestParamInfo<tfrun_dtype_t> &i) {
                           return i.param == TFRUN_F32   ? std::string("f32")
                                  : i.param == TFRUN_F16 ? std::string("f16")
                                                         : std::string("bf16");
                         });

} // namespace
