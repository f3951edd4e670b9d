//===- elementwise_cpu.cc - the unary kernels, vectorized and threaded ----===//
//
// See elementwise_cpu.h.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/elementwise_cpu.h"

#include "backends/cpu/kernels_cpu.h"
#include "tfc/kernel_schema.h"

#include "backends/cpu/attention_impl.h"
#include "tfc/abi.h"

#include <algorithm>
#include <cmath>

namespace tfc::cpu {

using namespace attention_detail;

namespace {

// Below this many elements a call stays on the calling thread: starting and
// joining an OpenMP region costs 1-4 us on 2 busy cores, about what 16K
// elements of SiLU take on one.
constexpr int64_t kParallelMin = 1 << 14;
// Elements per task: a multiple of every vector width, 16 KB of f32.
constexpr int64_t kChunk = 4096;

/// x * sigmoid(x) = x / (1 + e^-x). For x above 87, e^-x is 0 and the result
/// x; below -88, e^-x saturates at e^88 and the result is x * 6e-39 (the true
/// value rounds to the same tiny number or 0). NaN stays NaN through x.
TFC_INLINE VF vsilu(VF x) { return x / (vsplat(1.0f) + vexp(-x)); }

/// 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), with
/// 1 + tanh(u) = 2 - 2 / (1 + e^(2u)) = 2 e^(2u) / (1 + e^(2u)), which stays
/// exact in both tails: e^(2u) = 0 gives 0, and a large e^(2u) gives 2.
TFC_INLINE VF vgeluTanh(VF x) {
  const VF u = vsplat(0.7978845608028654f) * (x + vsplat(0.044715f) * x * x * x);
  const VF e = vexp(u + u);
  const VF onePlusTanh = vsplat(2.0f) - vsplat(2.0f) / (vsplat(1.0f) + e);
  return vsplat(0.5f) * x * onePlusTanh;
}

/// The formula of unary.def for one element (the scalar tails, and the kernels
/// that have no vector form).
float scalarUnary(int kernel, int64_t mode, float x) {
  switch (kernel) {
#define TFC_UNARY(ENUM, EXPR)                                                              \
  case TFC_KERNEL_##ENUM:                                                                  \
    return (EXPR);
#include "tfc/unary.def"
#undef TFC_UNARY
  default:
    return x;
  }
}

bool hasUnaryRow(int kernel) {
  switch (kernel) {
#define TFC_UNARY(ENUM, EXPR) case TFC_KERNEL_##ENUM:
#include "tfc/unary.def"
#undef TFC_UNARY
    return true;
  default:
    return false;
  }
}

/// One chunk [b, e): whole vectors where a vector form exists, then scalars.
void unaryChunk(int kernel, int64_t mode, const float *a, float *o, int64_t b, int64_t e) {
  int64_t i = b;
  if (kernel == TFC_KERNEL_SILU) {
    for (; i + kVec <= e; i += kVec)
      vstore(o + i, vsilu(vload(a + i)));
  } else if (kernel == TFC_KERNEL_GELU && mode == 1) {
    for (; i + kVec <= e; i += kVec)
      vstore(o + i, vgeluTanh(vload(a + i)));
  } else if (kernel == TFC_KERNEL_RELU) {
    for (; i + kVec <= e; i += kVec) {
      const VF x = vload(a + i);
      vstore(o + i, x > vsplat(0.0f) ? x : vsplat(0.0f));
    }
  }
  for (; i < e; ++i)
    o[i] = scalarUnary(kernel, mode, a[i]);
}

} // namespace

bool runUnary(int kernel, int64_t mode, const float *a, float *o, int64_t n) {
  if (!hasUnaryRow(kernel))
    return false;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < chunks; ++c)
    unaryChunk(kernel, mode, a, o, c * kChunk, std::min(n, (c + 1) * kChunk));
  return true;
}

void applyActivation(int64_t act, float *y, int64_t n) {
  uint32_t kernel = 0;
  int64_t mode = 0;
  if (schema::activationUnary(act, &kernel, &mode))
    runUnary((int)kernel, mode, y, y, n);
}

void applyActivationRow(int64_t act, float *y, int64_t n) {
  uint32_t kernel = 0;
  int64_t mode = 0;
  if (schema::activationUnary(act, &kernel, &mode) && hasUnaryRow((int)kernel))
    unaryChunk((int)kernel, mode, y, y, 0, n);
}

namespace {
template <typename CallT> Status unary(const CallT &c, int64_t mode) {
  runUnary((int)CallT::kKernel, mode, c.input->template as<float>(), c.out->template as<float>(),
           c.out->numel());
  return Status();
}
} // namespace

Status run(const SqrtCall &c) { return unary(c, 0); }
Status run(const ReluCall &c) { return unary(c, 0); }
Status run(const GeluCall &c) { return unary(c, c.attrs.approximate); }
Status run(const SiluCall &c) { return unary(c, 0); }
Status run(const TanhCall &c) { return unary(c, 0); }

} // namespace tfc::cpu
