/*===- tfc/bf16.h - bfloat16 <-> float, shared by compiler and runtime ----===*
 *
 * Scalar conversions with the same rounding oneDNN and PyTorch use
 * (round to nearest, ties to even; NaN stays a quiet NaN), so a weight the
 * compiler converts and an activation the runtime converts round alike. The
 * CPU backend has vectorized bulk versions (backends/cpu/convert_cpu.h).
 *
 *===----------------------------------------------------------------------===*/
#ifndef TFC_BF16_H
#define TFC_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t tfc_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
    return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float tfc_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#endif /* TFC_BF16_H */
