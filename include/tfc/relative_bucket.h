/*===- tfc/relative_bucket.h - T5's relative position buckets -----*- C++ -*-===*
 *
 * The bucket of a relative position (key position - query position), exactly
 * as transformers' T5Attention._relative_position_bucket computes it, in the
 * same f32 arithmetic, so that tfc picks the same table row at every distance:
 *
 *   if bidirectional: num_buckets //= 2; bucket = (rel > 0) * num_buckets;
 *                     rel = |rel|
 *   else:             bucket = 0; rel = max(-rel, 0)
 *   max_exact = num_buckets // 2
 *   rel < max_exact:  bucket += rel
 *   else:             bucket += min(max_exact + (long)(log(rel / max_exact)
 *                       / log(max_distance / max_exact) * (num_buckets - max_exact)),
 *                       num_buckets - 1)
 *
 * Shared by the CPU and CUDA kernels and the test references (host and device
 * code: TFC_BUCKET_HD is __host__ __device__ under nvcc).
 *
 *===----------------------------------------------------------------------===*/
#ifndef TFC_RELATIVE_BUCKET_H
#define TFC_RELATIVE_BUCKET_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define TFC_BUCKET_HD __host__ __device__
#else
#define TFC_BUCKET_HD
#endif

/* The table row for relative position |rel| (key - query). num_buckets >= 2
 * (>= 4 when bidirectional) and max_distance > num_buckets / 2 (/ 4 when
 * bidirectional); the kernel rules check both. */
static inline TFC_BUCKET_HD int64_t tfc_relative_bucket(int64_t rel, int bidirectional,
                                                       int64_t num_buckets,
                                                       int64_t max_distance) {
  int64_t bucket = 0;
  if (bidirectional) {
    num_buckets /= 2;
    if (rel > 0)
      bucket += num_buckets;
    rel = rel < 0 ? -rel : rel;
  } else {
    rel = rel < 0 ? -rel : 0;
  }
  const int64_t max_exact = num_buckets / 2;
  if (rel < max_exact)
    return bucket + rel;
  /* torch: log(rel.float() / max_exact) / math.log(max_distance / max_exact)
   * * (num_buckets - max_exact), all f32 (the Python double is a f32 scalar). */
  const float lg = logf((float)rel / (float)max_exact);
  const float den = (float)log((double)max_distance / (double)max_exact);
  const float v = lg / den * (float)(num_buckets - max_exact);
  int64_t large = max_exact + (int64_t)v;
  if (large > num_buckets - 1)
    large = num_buckets - 1;
  return bucket + large;
}

#endif /* TFC_RELATIVE_BUCKET_H */
