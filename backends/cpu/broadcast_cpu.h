//===- broadcast_cpu.h - numpy broadcasting and scalar loads for CPU kernels ===//
//
// Shared by the pointwise kernels (pointwise_cpu.cc) and matmul's batch dims
// (linear_cpu.cc): per-input strides over the output's shape, and element
// loads and stores of any scalar dtype through double.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_BROADCAST_CPU_H
#define TFC_BACKENDS_CPU_BROADCAST_CPU_H

#include "backends/tensor.h"
#include "tfc/abi.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tfc::cpu {

/// Strides of |in| for iterating over |out|'s shape (0 on broadcast dims).
inline std::vector<int64_t> broadcastStrides(const Tensor &in, const std::vector<int64_t> &out) {
  size_t r = out.size();
  std::vector<int64_t> st(r, 0);
  int64_t s = 1;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    size_t d = in.shape.size() - 1 - i;
    size_t o = r - 1 - i;
    st[o] = in.shape[d] == 1 ? 0 : s;
    s *= in.shape[d];
  }
  return st;
}

/// Calls f(outIndex, offsets...) for every element of |out|, with each input's
/// broadcast offset.
template <size_t N, typename F>
void forEachBroadcast(const Tensor &out, const Tensor *const (&ins)[N], F f) {
  const std::vector<int64_t> &shape = out.shape;
  size_t r = shape.size();
  std::vector<int64_t> strides[N];
  for (size_t k = 0; k < N; ++k)
    strides[k] = broadcastStrides(*ins[k], shape);
  std::vector<int64_t> idx(r, 0);
  int64_t off[N] = {};
  int64_t n = out.numel();
  for (int64_t e = 0; e < n; ++e) {
    f(e, off);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k)
          off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k)
        off[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

inline double loadAsDouble(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case TFC_DTYPE_F32:
    return t.as<float>()[i];
  case TFC_DTYPE_I64:
    return (double)t.as<int64_t>()[i];
  case TFC_DTYPE_I32:
    return t.as<int32_t>()[i];
  case TFC_DTYPE_BOOL:
    return t.as<uint8_t>()[i];
  default:
    return 0;
  }
}

inline void storeFromDouble(Tensor &t, int64_t i, double v) {
  switch (t.dtype) {
  case TFC_DTYPE_F32:
    t.as<float>()[i] = (float)v;
    break;
  case TFC_DTYPE_I64:
    t.as<int64_t>()[i] = (int64_t)v;
    break;
  case TFC_DTYPE_I32:
    t.as<int32_t>()[i] = (int32_t)v;
    break;
  case TFC_DTYPE_BOOL:
    t.as<uint8_t>()[i] = v != 0;
    break;
  default:
    break;
  }
}

/// Splits |shape| around |axis| into outer x axis x inner.
inline void aroundAxis(const std::vector<int64_t> &shape, int64_t axis, int64_t &outer,
                       int64_t &len, int64_t &inner) {
  outer = 1;
  inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  len = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i)
    inner *= shape[i];
}

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_BROADCAST_CPU_H
