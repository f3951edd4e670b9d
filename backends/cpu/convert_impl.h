//===- convert_impl.h - bulk conversions, written once per vector width ---===//
//
// Included by convert_avx2.cc and convert_avx512.cc, each compiled with its
// ISA's flags and TFC_CONVERT_NS / TFC_CONVERT_WIDTH set, so one source gives
// both paths; convert_cpu.cc picks one at run time (cpu_isa.h). GCC vector
// extensions rather than intrinsics, and no std templates, so nothing here is
// an inline function that the linker could merge across the two ISAs.
//
//===----------------------------------------------------------------------===//
#include "tfc/bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tfc::cpu::TFC_CONVERT_NS {
namespace {
constexpr int W = TFC_CONVERT_WIDTH; // f32 lanes per vector
typedef float VF __attribute__((vector_size(W * 4)));
typedef int32_t VI __attribute__((vector_size(W * 4)));
typedef uint32_t VU __attribute__((vector_size(W * 4)));
typedef uint16_t VH __attribute__((vector_size(W * 2)));
typedef uint8_t VB __attribute__((vector_size(W)));

inline VF splat(float v) { return v - VF{}; }

/// W values of a row (f32, or bf16 widened) as f32.
inline VF loadRow(const void *x, bool isBf16, int64_t i) {
  if (isBf16) {
    VH h;
    std::memcpy(&h, static_cast<const uint16_t *>(x) + i, sizeof h);
    VU u = __builtin_convertvector(h, VU) << 16;
    VF f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  VF f;
  std::memcpy(&f, static_cast<const float *>(x) + i, sizeof f);
  return f;
}
inline float load1(const void *x, bool isBf16, int64_t i) {
  return isBf16 ? tfc_bf16_to_f32(static_cast<const uint16_t *>(x)[i])
                : static_cast<const float *>(x)[i];
}
} // namespace

void f32ToBf16(const float *x, uint16_t *y, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    VU u;
    std::memcpy(&u, x + i, sizeof u);
    // tfc_f32_to_bf16, lane-wise: ties to even; a NaN stays a quiet NaN.
    const VI nan = (u & 0x7fffffffu) > 0x7f800000u;
    VU r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = nan ? (u >> 16) | 0x40u : r;
    VH h = __builtin_convertvector(r, VH);
    std::memcpy(y + i, &h, sizeof h);
  }
  for (; i < n; ++i)
    y[i] = tfc_f32_to_bf16(x[i]);
}

void bf16ToF32(const uint16_t *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    VF f = loadRow(x, true, i);
    std::memcpy(y + i, &f, sizeof f);
  }
  for (; i < n; ++i)
    y[i] = tfc_bf16_to_f32(x[i]);
}

void quantizeRows(const void *x, bool isBf16, int64_t rows, int64_t k, uint8_t *q,
                  float *scale, int32_t *zero, int levels) {
  const size_t es = isBf16 ? 2 : 4;
  const float fl = static_cast<float>(levels);
#pragma omp parallel for schedule(static) if (rows * k > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const void *xr = static_cast<const char *>(x) + r * k * es;
    VF vlo = VF{}, vhi = VF{};
    VI vnan = VI{}; // min/max drop NaNs: track them apart
    int64_t i = 0;
    for (; i + W <= k; i += W) {
      VF v = loadRow(xr, isBf16, i);
      vlo = v < vlo ? v : vlo;
      vhi = v > vhi ? v : vhi;
      vnan |= v != v;
    }
    float lo = 0.0f, hi = 0.0f;
    bool nan = false;
    for (int l = 0; l < W; ++l) {
      lo = vlo[l] < lo ? vlo[l] : lo;
      hi = vhi[l] > hi ? vhi[l] : hi;
      nan |= vnan[l] != 0;
    }
    for (; i < k; ++i) {
      float v = load1(xr, isBf16, i);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      nan |= std::isnan(v);
    }
    uint8_t *qr = q + r * k;
    // docs/precision.md, "Non-finite values": a NaN or an infinity anywhere in
    // the row makes the whole output row NaN (scale NaN, q and zero 0). The
    // range is taken in double, where hi - lo of finite floats cannot
    // overflow; a range so small that its step is below FLT_MIN (subnormal
    // inputs) quantizes as all zeros, as an all-zero row does: its output is
    // the bias, off by at most range * sum |w|.
    const bool finite = !nan && std::isfinite(lo) && std::isfinite(hi);
    const double range = finite ? (double)hi - (double)lo : 0.0;
    const float s = (float)(range / fl);
    if (!finite || !(s >= 1.17549435e-38f)) {
      scale[r] = finite ? 0.0f : NAN;
      zero[r] = 0;
      std::memset(qr, 0, (size_t)k);
      continue;
    }
    // s >= FLT_MIN bounds inv below 1 / FLT_MIN, so x * inv is finite, and
    // -lo * inv lies in [0, 255]; the clamp only guards the last rounding.
    const float inv = (float)(fl / range);
    float zp = std::nearbyint(std::fmin(std::fmax(-lo * inv, 0.0f), fl));
    scale[r] = s;
    zero[r] = (int32_t)zp;
    // Round to nearest even as nearbyint does: |x * inv| <= 255 < 2^22,
    // where adding and taking away 1.5 * 2^23 rounds exactly.
    const VF magic = splat(12582912.0f), vinv = splat(inv), vzp = splat(zp);
    const VF v0 = VF{}, vmax = splat(fl);
    i = 0;
    for (; i + W <= k; i += W) {
      VF v = ((loadRow(xr, isBf16, i) * vinv + magic) - magic) + vzp;
      v = v < v0 ? v0 : v;
      v = v > vmax ? vmax : v;
      VB b = __builtin_convertvector(__builtin_convertvector(v, VI), VB);
      std::memcpy(qr + i, &b, sizeof b);
    }
    for (; i < k; ++i) {
      float v = std::nearbyint(load1(xr, isBf16, i) * inv) + zp;
      v = v < 0.0f ? 0.0f : v;
      qr[i] = (uint8_t)(v > fl ? fl : v);
    }
  }
}

} // namespace tfc::cpu::TFC_CONVERT_NS
