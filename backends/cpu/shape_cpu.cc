//===- shape_cpu.cc - data movement kernels on the CPU --------------------===//
//
// reshape and unsqueeze (views: the executor aliases them, so these copy only
// when called on separate buffers), transpose and slice.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/broadcast_cpu.h"
#include "backends/cpu/kernels_cpu.h"
#include "backends/kernel_rules.h"

#include <cstring>

namespace tfc::cpu {
namespace {

Status view(const Tensor &in, Tensor &out) {
  if (out.data != in.data)
    std::memcpy(out.data, in.data, tfc_dtype_bytes(out.dtype, (uint64_t)out.numel()));
  return Status();
}

} // namespace

Status run(const ReshapeCall &c) { return view(*c.input, *c.out); }
Status run(const UnsqueezeCall &c) { return view(*c.input, *c.out); }

Status run(const TransposeCall &c) {
  const Tensor &x = *c.input;
  Tensor &out = *c.out;
  const size_t r = x.shape.size();
  const size_t es = tfc_dtype_bytes(x.dtype, 1);
  // Input strides permuted into output order.
  std::vector<int64_t> inStride(r), st(r);
  int64_t s = 1;
  for (size_t i = r; i-- > 0;) {
    inStride[i] = s;
    s *= x.shape[i];
  }
  for (size_t i = 0; i < r; ++i)
    st[i] = inStride[c.attrs.perm[i]];
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(out.data);
  for (int64_t e = 0, n = out.numel(); e < n; ++e) {
    std::memcpy(dst + e * es, src + off * es, es);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < out.shape[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (out.shape[d] - 1);
      idx[d] = 0;
    }
  }
  return Status();
}

Status run(const SliceCall &c) {
  const Tensor &x = *c.input;
  const int64_t size = c.attrs.size;
  int64_t outer, len, inner;
  aroundAxis(x.shape, c.attrs.axis, outer, len, inner);
  const int64_t start = sliceStart(c.attrs.start, len);
  const size_t es = tfc_dtype_bytes(x.dtype, 1);
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(c.out->data);
  // A packed QKV projection's slices are 2 MB each at 1280 rows: worth both threads.
#pragma omp parallel for schedule(static) if (outer * size * inner * (int64_t)es >= (1 << 18))
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * size * inner * es, src + (o * len + start) * inner * es,
                size * inner * es);
  return Status();
}

} // namespace tfc::cpu
