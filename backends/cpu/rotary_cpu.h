//===- rotary_cpu.h - Rotary position embeddings (RoPE) on the CPU -*- C++ -*-===//
//
// The arithmetic of tfc.rotary, shared by the ROTARY kernel and by
// CACHED_ATTENTION with a folded-in rotary (tfc-fuse-rotary), so that the two
// give the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_ROTARY_CPU_H
#define TFC_BACKENDS_CPU_ROTARY_CPU_H

#include <cmath>
#include <cstdint>

namespace tfc::cpu {

/// cs[k] = cos and cs[half + k] = sin of position |pos| times inv_freq[k]. The
/// angle is an f32 product, as transformers computes it; cos and sin are
/// computed in double and rounded to f32 (transformers' f32 ones are within an
/// ulp).
inline void rotaryAngles(int64_t pos, const float *freq, int64_t half, float *cs) {
  for (int64_t k = 0; k < half; ++k) {
    const float angle = static_cast<float>(pos) * freq[k];
    cs[k] = static_cast<float>(std::cos(static_cast<double>(angle)));
    cs[half + k] = static_cast<float>(std::sin(static_cast<double>(angle)));
  }
}

/// Each of |heads| heads of width |hd| of one token's x, rotated into y (which
/// may be x): pairs (k, k + half), or (2k, 2k + 1) when |interleaved|, by the
/// angles of rotaryAngles; the features past 2 * half are copied.
inline void rotateHeads(const float *x, float *y, int64_t heads, int64_t hd, const float *cs,
                        int64_t half, bool interleaved) {
  for (int64_t h = 0; h < heads; ++h) {
    const float *xh = x + h * hd;
    float *yh = y + h * hd;
    for (int64_t k = 0; k < half; ++k) {
      const int64_t ia = interleaved ? 2 * k : k, ib = interleaved ? 2 * k + 1 : k + half;
      const float xa = xh[ia], xb = xh[ib], co = cs[k], si = cs[half + k];
      yh[ia] = xa * co - xb * si;
      yh[ib] = xb * co + xa * si;
    }
    for (int64_t k = 2 * half; k < hd; ++k)
      yh[k] = xh[k];
  }
}

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_ROTARY_CPU_H
