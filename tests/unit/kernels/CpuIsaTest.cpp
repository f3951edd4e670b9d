//===- CpuIsaTest.cpp - the CPU paths this process runs -------------------===//
//
// Linked into every CPU kernel test. ctest runs those tests once per path
// cap (TFC_CPU_ISA=AVX2, AVX512_CORE, and no cap): this file skips a whole
// run whose cap the CPU cannot execute, with the reason, and checks that the
// paths chosen are the ones the cap and the CPU imply.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/cpu_isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace tfc::cpu {
namespace {

class CpuIsaEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    const CpuPaths &p = cpuPaths();
    if (!p.supported)
      GTEST_SKIP() << p.error;
    if (!p.capUnavailable.empty())
      GTEST_SKIP() << p.capUnavailable;
    std::printf("[ CPU paths ] %s\n", describeCpuPaths().c_str());
  }
};
const auto *const kEnv = ::testing::AddGlobalTestEnvironment(new CpuIsaEnvironment);

std::string cap() {
  const char *c = std::getenv("TFC_CPU_ISA");
  return c ? c : "";
}

TEST(CpuIsa, PathsFollowTheCapAndTheCpu) {
  const CpuPaths &p = cpuPaths();
  const CpuFeatures &f = hostCpuFeatures();
  const std::string d = describeCpuPaths();
  if (cap() == "AVX2") {
    EXPECT_FALSE(p.avx512);
    EXPECT_FALSE(p.int8Vnni);
    EXPECT_FALSE(p.bf16Native); // oneDNN 2.6 has no bf16 matmul below AVX-512
    EXPECT_EQ(p.onednnIsa, "avx2");
    EXPECT_EQ(p.f32Blas, TFC_HAVE_OPENBLAS != 0);
    EXPECT_EQ(d, std::string("cpu (avx2, fma; f32 ") + (p.f32Blas ? "openblas" : "onednn") +
                     "; bf16 emulated; int8 without vnni; onednn avx2; TFC_CPU_ISA=AVX2)");
  } else if (cap() == "AVX512_CORE") {
    EXPECT_TRUE(p.avx512);
    EXPECT_FALSE(p.f32Blas);
    EXPECT_FALSE(p.int8Vnni);
    EXPECT_EQ(p.onednnIsa, "avx512_core");
  } else if (cap().empty()) {
    EXPECT_EQ(p.avx512, f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
    EXPECT_EQ(p.int8Vnni, f.avx512vnni || f.amxint8);
  }
}

} // namespace
} // namespace tfc::cpu
