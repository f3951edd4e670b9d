//===- cpu_isa.h - what this CPU can run, and which kernel paths we take --===//
//
// The CPU backend runs on any x86-64 CPU with AVX2 and FMA (x86-64-v3, the
// build's baseline, TFC_CPU_BASELINE). Everything past that is chosen at run
// time, once per process, from what the CPU has:
//
// - bf16 GEMMs: oneDNN's native bf16 matmul where it has one (AVX-512 BF16,
//   AMX); otherwise "emulated": the bf16 weights are widened to f32 once at
//   load and the GEMM runs in f32 on the (exactly representable) bf16 values,
//   which is the arithmetic of the native path (bf16 products, f32 sums).
// - int8 GEMMs: u8 x s8 -> s32. With VNNI (AVX512_VNNI, AMX) on oneDNN, which
//   sums the products exactly. Without it oneDNN multiplies with vpmaddubsw,
//   which adds pairs of u8 x s8 products in *saturating* s16 (2 * 255 * 127 >
//   32767), so there our own AVX2 GEMM runs instead (gemm_s8_avx2.h): exact,
//   the same sums as VNNI.
// - f32 GEMMs: oneDNN's brgemm with AVX-512; below it OpenBLAS's sgemm for
//   16 rows or more (oneDNN for fewer), with our epilogue.
// - our own vector kernels (bf16 conversion, int8 quantization): AVX-512
//   where the CPU has it, AVX2 otherwise.
//
// TFC_CPU_ISA (environment) caps what is used, with oneDNN's names for its
// ONEDNN_MAX_CPU_ISA: AVX2, AVX512_CORE, AVX512_CORE_VNNI, AVX512_CORE_BF16,
// AVX512_CORE_AMX or ALL (the default). It caps oneDNN too, so an AVX-512
// machine runs and tests the AVX2 paths of an AVX2-only CPU. A cap above what
// the CPU has changes nothing.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_CPU_ISA_H
#define TFC_BACKENDS_CPU_CPU_ISA_H

#include <string>

namespace tfc::cpu {

/// What cpuid (and XGETBV, for the OS's register state) says the CPU has.
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avxvnni = false;
  bool amxbf16 = false, amxint8 = false;
};
const CpuFeatures &hostCpuFeatures();

/// The kernel paths this process uses: decided once, on first use, from the
/// CPU, the TFC_CPU_ISA cap and what oneDNN reports.
struct CpuPaths {
  /// The CPU can run this build's kernels (AVX2 and FMA for the x86-64-v3
  /// baseline). When false, |error| says why and no kernel may run.
  bool supported = true;
  std::string error;
  /// Our own kernels' AVX-512 paths (AVX512F/BW/VL/DQ, within the cap).
  bool avx512 = false;
  /// oneDNN has a bf16 matmul here; otherwise bf16 weights are widened.
  bool bf16Native = false;
  /// oneDNN sums u8 x s8 products exactly (VNNI or AMX); otherwise the int8
  /// GEMMs run on gemm_s8_avx2.h.
  bool int8Vnni = false;
  /// The group-wise int8 and int4 kernels' VNNI forms (gemm_q_avx512.h):
  /// |avx512| and AVX512_VNNI, within the cap.
  bool avx512Vnni = false;
  /// Without VNNI: false (the default) keeps 8-bit activations and the exact
  /// gemmU8S8; true (TFC_INT8_AVX2=u7) quantizes the activations to 7 bits
  /// (0..127) for gemmU7S8, 1.2-1.45x faster GEMMs on a Zen 3 but outside
  /// int8's accuracy bounds on two bundled models (docs/precision.md).
  bool int8Avx2U7 = false;
  /// f32 GEMMs (of 16 rows or more) on OpenBLAS rather than oneDNN: where
  /// oneDNN 2.6 has no brgemm f32 kernel (below AVX-512) its gemm:jit reaches
  /// about 77 GFLOP/s per core at M 128, K 512, N 2048, OpenBLAS's Haswell/Zen
  /// sgemm about 120 (docs/performance.md). Only in builds with OpenBLAS.
  bool f32Blas = false;
  /// The ISA oneDNN dispatches to, in its own words ("avx2", "avx512_core_vnni").
  std::string onednnIsa;
  /// The cap in force ("" when none).
  std::string cap;
  /// Why the CPU cannot run what the cap names ("" when it can, or when there
  /// is no cap): the cap then tests nothing new, and the tests skip.
  std::string capUnavailable;
};
const CpuPaths &cpuPaths();

/// One line naming the chosen paths, the session's device string, e.g.
/// "cpu (avx2, fma; bf16 emulated; int8 without vnni)".
std::string describeCpuPaths();

} // namespace tfc::cpu

#endif
