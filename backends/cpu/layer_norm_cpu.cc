//===- layer_norm_cpu.cc - Row normalization on the CPU --------------------===//
//
// Three passes over each row, which is small enough (a model dimension) to
// stay in L1 between them: the mean, the centered sum of squares, then the
// affine output. Both sums are in double: f32 sums over a few thousand
// elements lose digits, and the single-pass E[x^2] - E[x]^2 formula cancels
// catastrophically when |mean| >> std. `omp simd` lets the compiler vectorize
// those reductions (it may reorder them, but in an order fixed at compile
// time, so the result stays deterministic).
//
//===----------------------------------------------------------------------===//

#include "backends/cpu/layer_norm_cpu.h"

#include "backends/cpu/kernels_cpu.h"

#include <cmath>
#include <limits>

namespace tfc::cpu {
namespace {

void normalizeRow(NormVariant v, int64_t dim, const float *x, const float *gamma,
                  const float *beta, float eps, float *y) {
  double sum = 0.0;
  if (v != TFC_NORM_RMS) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < dim; ++j)
      sum += x[j];
  }
  // rms_norm does not center: its "mean" is 0 and ss is the sum of squares.
  const double mean = sum / static_cast<double>(dim);

  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < dim; ++j) {
    const double c = static_cast<double>(x[j]) - mean;
    ss += c * c;
  }

  double inv;
  if (v == TFC_NORM_LAYER || v == TFC_NORM_RMS) {
    inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + static_cast<double>(eps));
  } else {
    // Unbiased: dim == 1 divides 0 by 0, NaN, like torch.std.
    const double sd = dim > 1 ? std::sqrt(ss / static_cast<double>(dim - 1))
                              : std::numeric_limits<double>::quiet_NaN();
    inv = 1.0 / (sd + static_cast<double>(eps));
  }
  const float invf = static_cast<float>(inv);

  // Center in double: x - mean rounded once, even when |mean| >> std (a mean
  // rounded to f32 first would shift every output by up to ulp(mean) / std).
  // x and y may be the same row; each element is read before it is written.
  if (gamma && beta) {
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j)
      y[j] = static_cast<float>(static_cast<double>(x[j]) - mean) * invf * gamma[j] + beta[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < dim; ++j) {
      const float n = static_cast<float>(static_cast<double>(x[j]) - mean) * invf;
      y[j] = (gamma ? n * gamma[j] : n) + (beta ? beta[j] : 0.0f);
    }
  }
}

} // namespace

void layerNorm(NormVariant v, int64_t rows, int64_t dim, const float *x, int64_t x_stride,
               const float *gamma, const float *beta, float eps, float *y, int64_t y_stride) {
  if (rows <= 0 || dim <= 0)
    return;
  // Threads only pay off past a few rows of work; a decode step (one row of
  // a few hundred floats) stays on the calling thread.
#pragma omp parallel for schedule(static) if (rows > 1 && rows * dim >= 16384)
  for (int64_t r = 0; r < rows; ++r)
    normalizeRow(v, dim, x + r * x_stride, gamma, beta, eps, y + r * y_stride);
}

Status run(const LayerNormCall &c) {
  const Tensor &x = *c.x;
  const int64_t d = x.shape.back(), rows = x.numel() / d;
  thread_local std::vector<float> xbuf, ybuf;
  layerNorm(c.attrs.variant, rows, d, asF32(x, xbuf), d, c.gamma->as<float>(),
            c.beta ? c.beta->as<float>() : nullptr, (float)c.attrs.eps, outF32(*c.out, ybuf), d);
  finishOut(*c.out, ybuf);
  return Status();
}

} // namespace tfc::cpu
