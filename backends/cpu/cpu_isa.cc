//===- cpu_isa.cc - CPU feature detection and kernel path choice ----------===//
#include "backends/cpu/cpu_isa.h"

#include <oneapi/dnnl/dnnl.h>

#include <cpuid.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#ifndef TFC_HAVE_OPENBLAS
#define TFC_HAVE_OPENBLAS 0
#endif

namespace tfc::cpu {

namespace {
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx)
    return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymmState = (xcr0 & 0x6) == 0x6;
  const bool zmmState = (xcr0 & 0xe6) == 0xe6;
  const bool tileState = (xcr0 & 0x60000) == 0x60000;
  if (!ymmState)
    return f;
  f.fma = c & (1u << 12);
  f.f16c = c & (1u << 29);
  unsigned maxLeaf = __get_cpuid_max(0, nullptr);
  if (maxLeaf < 7)
    return f;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned subleaves = a;
  f.avx2 = b & (1u << 5);
  if (zmmState) {
    f.avx512f = b & (1u << 16);
    f.avx512dq = b & (1u << 17);
    f.avx512bw = b & (1u << 30);
    f.avx512vl = b & (1u << 31);
    f.avx512vnni = c & (1u << 11);
  }
  if (tileState) {
    f.amxbf16 = d & (1u << 22);
    f.amxint8 = d & (1u << 25);
  }
  if (subleaves >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avxvnni = a & (1u << 4);
    f.avx512bf16 = zmmState && (a & (1u << 5));
  }
  return f;
}

struct IsaName {
  const char *name;
  dnnl_cpu_isa_t isa;
  /// What the CPU must have for the cap to mean what it says, or null.
  const char *(*lacks)(const CpuFeatures &);
};
const char *lacksAvx2(const CpuFeatures &f) {
  return f.avx2 && f.fma ? nullptr : "AVX2 and FMA";
}
const char *lacksAvx512(const CpuFeatures &f) {
  if (const char *l = lacksAvx2(f))
    return l;
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq ? nullptr
                                                              : "AVX-512 (F, BW, VL, DQ)";
}
const char *lacksVnni(const CpuFeatures &f) {
  if (const char *l = lacksAvx512(f))
    return l;
  return f.avx512vnni ? nullptr : "AVX512_VNNI";
}
const char *lacksBf16(const CpuFeatures &f) {
  if (const char *l = lacksVnni(f))
    return l;
  return f.avx512bf16 ? nullptr : "AVX512_BF16";
}
const char *lacksAmx(const CpuFeatures &f) {
  if (const char *l = lacksBf16(f))
    return l;
  return f.amxbf16 && f.amxint8 ? nullptr : "AMX";
}
const char *lacksNothing(const CpuFeatures &) { return nullptr; }
constexpr IsaName kIsas[] = {
    {"AVX2", dnnl_cpu_isa_avx2, lacksAvx2},
    {"AVX512_CORE", dnnl_cpu_isa_avx512_core, lacksAvx512},
    {"AVX512_CORE_VNNI", dnnl_cpu_isa_avx512_core_vnni, lacksVnni},
    {"AVX512_CORE_BF16", dnnl_cpu_isa_avx512_core_bf16, lacksBf16},
    {"AVX512_CORE_AMX", dnnl_cpu_isa_avx512_core_amx, lacksAmx},
    {"ALL", dnnl_cpu_isa_all, lacksNothing},
};

const char *onednnIsaName(dnnl_cpu_isa_t isa) {
  switch (isa) {
  case dnnl_cpu_isa_sse41:
    return "sse41";
  case dnnl_cpu_isa_avx:
    return "avx";
  case dnnl_cpu_isa_avx2:
    return "avx2";
  case dnnl_cpu_isa_avx2_vnni:
    return "avx2_vnni";
  case dnnl_cpu_isa_avx512_core:
    return "avx512_core";
  case dnnl_cpu_isa_avx512_core_vnni:
    return "avx512_core_vnni";
  case dnnl_cpu_isa_avx512_core_bf16:
    return "avx512_core_bf16";
  case dnnl_cpu_isa_avx512_core_amx:
    return "avx512_core_amx";
  default:
    return "unknown";
  }
}

/// Whether oneDNN can create a bf16 x bf16 -> f32 matmul here: it has none on
/// CPUs without AVX-512 ("could not create a primitive descriptor iterator").
bool onednnHasBf16Matmul() {
  dnnl_engine_t eng = nullptr;
  if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success)
    return false;
  dnnl_memory_desc_t src, wei, dst;
  dnnl_dims_t sd = {16, 64}, wd = {64, 16}, dd = {16, 16};
  dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab);
  dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_bf16, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
  dnnl_matmul_desc_t md;
  bool ok = false;
  if (dnnl_matmul_desc_init(&md, &src, &wei, nullptr, &dst) == dnnl_success) {
    dnnl_primitive_desc_t pd = nullptr;
    ok = dnnl_primitive_desc_create(&pd, &md, nullptr, eng, nullptr) == dnnl_success;
    if (pd)
      dnnl_primitive_desc_destroy(pd);
  }
  dnnl_engine_destroy(eng);
  return ok;
}

CpuPaths choose() {
  CpuPaths p;
  const CpuFeatures &f = hostCpuFeatures();
  if (!f.avx2 || !f.fma) {
    p.supported = false;
    p.error = std::string("this CPU lacks ") + (!f.avx2 ? "AVX2" : "FMA") +
              ", which tfc's CPU kernels need (x86-64-v3: AVX2, FMA, F16C)";
  }
  if (const char *cap = std::getenv("TFC_CPU_ISA"); cap && *cap) {
    p.cap = cap;
    bool known = false;
    for (const IsaName &n : kIsas)
      if (strcasecmp(cap, n.name) == 0) {
        known = true;
        if (const char *l = n.lacks(f))
          p.capUnavailable = std::string("TFC_CPU_ISA=") + cap + " needs " + l +
                             ", which this CPU lacks";
        // Fails only when oneDNN already ran (or ONEDNN_MAX_CPU_ISA set a
        // lower cap); the effective ISA below is what counts either way.
        dnnl_set_max_cpu_isa(n.isa);
      }
    if (!known) {
      p.capUnavailable = std::string("TFC_CPU_ISA=") + cap +
                         " is not AVX2, AVX512_CORE, AVX512_CORE_VNNI, AVX512_CORE_BF16, "
                         "AVX512_CORE_AMX or ALL";
      p.cap += " (unknown, ignored)";
    }
  }
  const dnnl_cpu_isa_t eff = dnnl_get_effective_cpu_isa();
  p.onednnIsa = onednnIsaName(eff);
  const bool capAvx512 = (eff & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  p.avx512 = capAvx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  // oneDNN's u8 x s8 kernels sum exactly with AVX512_VNNI or AMX. Its AVX2
  // int8 GEMM (even on AVX-VNNI CPUs, in 2.6) uses vpmaddubsw, so anything
  // below avx512_core_vnni takes our exact AVX2 GEMM.
  p.int8Vnni = (eff & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni &&
               (f.avx512vnni || f.amxint8);
  p.avx512Vnni = p.avx512 && f.avx512vnni &&
                 (eff & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni;
  // Without VNNI: the exact 8-bit GEMM by default, or on request the 7-bit
  // activations (faster, but outside int8's accuracy bounds on the bundled
  // models: docs/precision.md).
  if (const char *v = std::getenv("TFC_INT8_AVX2"); v && std::string(v) == "u7")
    p.int8Avx2U7 = true;
  p.bf16Native = p.supported && onednnHasBf16Matmul();
  p.f32Blas = TFC_HAVE_OPENBLAS && !capAvx512;
  return p;
}
} // namespace

const CpuFeatures &hostCpuFeatures() {
  static const CpuFeatures f = detect();
  return f;
}

const CpuPaths &cpuPaths() {
  static const CpuPaths p = choose();
  return p;
}

std::string describeCpuPaths() {
  const CpuPaths &p = cpuPaths();
  const CpuFeatures &f = hostCpuFeatures();
  std::string s = "cpu (";
  if (p.avx512) {
    s += "avx512";
  } else {
    s += f.avx2 ? "avx2" : "no avx2";
  }
  s += f.fma ? ", fma" : ", no fma";
  s += p.f32Blas ? "; f32 openblas" : "; f32 onednn";
  s += p.bf16Native ? "; bf16 native" : "; bf16 emulated";
  s += p.int8Vnni ? "; int8 with vnni"
       : p.int8Avx2U7 ? "; int8 without vnni, u7 activations (TFC_INT8_AVX2=u7)"
                      : "; int8 without vnni";
  s += "; onednn " + p.onednnIsa;
  if (!p.cap.empty())
    s += "; TFC_CPU_ISA=" + p.cap;
  s += ")";
  return s;
}

} // namespace tfc::cpu
