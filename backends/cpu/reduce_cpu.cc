//===- reduce_cpu.cc - reductions and softmaxes over one axis on the CPU --===//
#include "backends/cpu/broadcast_cpu.h"
#include "backends/cpu/kernels_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tfc::cpu {
namespace {

Status reduce(const Tensor &x, int64_t axis, bool mean, Tensor &out) {
  int64_t outer, len, inner;
  aroundAxis(x.shape, axis, outer, len, inner);
  const float *a = x.as<float>();
  float *o = out.as<float>();
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      float acc = 0;
      for (int64_t l = 0; l < len; ++l)
        acc += a[(i * len + l) * inner + j];
      o[i * inner + j] = mean ? acc / (float)len : acc;
    }
  return Status();
}

/// softmax or log_softmax along |axis|, the sums in double.
Status softmax(const Tensor &x, int64_t axis, bool logp, Tensor &out) {
  int64_t outer, len, inner;
  aroundAxis(x.shape, axis, outer, len, inner);
  const float *a = x.as<float>();
  float *o = out.as<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      const float *row = a + i * len * inner + j;
      float *orow = o + i * len * inner + j;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t l = 0; l < len; ++l)
        mx = std::max(mx, row[l * inner]);
      double sum = 0;
      for (int64_t l = 0; l < len; ++l)
        sum += std::exp((double)row[l * inner] - mx);
      for (int64_t l = 0; l < len; ++l)
        orow[l * inner] = logp ? (float)((double)row[l * inner] - mx - std::log(sum))
                               : (float)(std::exp((double)row[l * inner] - mx) / sum);
    }
  return Status();
}

} // namespace

Status run(const ReduceMeanCall &c) { return reduce(*c.input, c.attrs.axis, true, *c.out); }
Status run(const ReduceSumCall &c) { return reduce(*c.input, c.attrs.axis, false, *c.out); }
Status run(const SoftmaxCall &c) { return softmax(*c.input, c.attrs.axis, false, *c.out); }
Status run(const LogSoftmaxCall &c) { return softmax(*c.input, c.attrs.axis, true, *c.out); }

} // namespace tfc::cpu
