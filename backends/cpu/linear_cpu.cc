//===- linear_cpu.cc - linear, fused_linear and matmul on the CPU ---------===//
//
// The linear kernels run on the weight's packed copy (linear_dnnl.cc: oneDNN,
// OpenBLAS or our int8 GEMM) that the CPU device made at load; an unpacked
// f32 weight (kernel tests) takes the reference loop below. matmul (attention
// scores of unfused models) is a plain batched loop.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/broadcast_cpu.h"
#include "backends/cpu/elementwise_cpu.h"
#include "backends/cpu/kernels_cpu.h"
#include "backends/cpu/linear_dnnl.h"

namespace tfc::cpu {
namespace {

/// y[r, n] = act(sum_k x[r, k] w[n, k] + b[n]) * mul[r, n] + res[r, n]. W is
/// [N, K] row-major, so every dot product reads two contiguous rows.
void referenceLinear(const float *x, const float *w, const float *b, const float *res,
                     const float *mul, float *y, int64_t rows, int64_t k, int64_t n, int act) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * k;
    float *yr = y + r * n;
    for (int64_t j = 0; j < n; ++j) {
      const float *wj = w + j * k;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < k; ++i)
        acc += xr[i] * wj[i];
      yr[j] = b ? acc + b[j] : acc;
    }
    applyActivationRow(act, yr, n);
    if (mul)
      for (int64_t j = 0; j < n; ++j)
        yr[j] *= mul[r * n + j];
    if (res)
      for (int64_t j = 0; j < n; ++j)
        yr[j] += res[r * n + j];
  }
}

Status runLinear(const Tensor &x, const Tensor &w, const Tensor *bias, const Tensor *residual,
                 const Tensor *multiplier, int act, Tensor &out) {
  const int64_t k = w.shape[1], n = w.shape[0];
  const int64_t rows = x.numel() / k;
  const float *b = bias ? bias->as<float>() : nullptr;
  const float *res = residual ? residual->as<float>() : nullptr;
  const float *mul = multiplier ? multiplier->as<float>() : nullptr;
  if (w.dtype == TFC_DTYPE_F32 && (x.dtype != TFC_DTYPE_F32 || out.dtype != TFC_DTYPE_F32))
    return Status::invalidModel("linear: reads or writes bf16 with f32 weights");
  if (w.packed) {
    GemmCall g;
    g.x = x.data;
    g.xDtype = x.dtype;
    g.rows = rows;
    g.bias = b;
    g.residual = res;
    g.multiplier = mul;
    g.act = act;
    g.actBits = w.actBits;
    g.y = out.data;
    g.yDtype = out.dtype;
    return Status::fromMessage(runPackedLinear(*static_cast<const PackedLinear *>(w.packed), g));
  }
  if (w.dtype != TFC_DTYPE_F32)
    return Status::invalidArgument("an unpacked linear layer must be f32");
  referenceLinear(x.as<float>(), w.as<float>(), b, res, mul, out.as<float>(), rows, k, n, act);
  return Status();
}

} // namespace

Status run(const LinearCall &c) {
  return runLinear(*c.x, *c.weight, c.bias, nullptr, nullptr, TFC_ACT_NONE, *c.out);
}

Status run(const FusedLinearCall &c) {
  return runLinear(*c.x, *c.weight, c.bias, c.residual, c.multiplier, c.attrs.activation,
                   *c.out);
}

Status run(const MatmulCall &c) {
  const Tensor &a = *c.a, &b = *c.b, &out = *c.out;
  const bool tb = c.attrs.transpose_b;
  const size_t ra = a.shape.size(), ro = out.shape.size();
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1];
  const int64_t n = out.shape[ro - 1];
  // Batch dims of the output, and each operand's batch strides (broadcast 0).
  Tensor ab{nullptr, 0, std::vector<int64_t>(a.shape.begin(), a.shape.end() - 2)};
  Tensor bb{nullptr, 0, std::vector<int64_t>(b.shape.begin(), b.shape.end() - 2)};
  Tensor ob{nullptr, 0, std::vector<int64_t>(out.shape.begin(), out.shape.end() - 2)};
  std::vector<int64_t> offA, offB;
  const Tensor *pair[2] = {&ab, &bb};
  forEachBroadcast<2>(ob, pair, [&](int64_t, const int64_t *o) {
    offA.push_back(o[0]);
    offB.push_back(o[1]);
  });
  if (ob.shape.empty()) {
    offA = {0};
    offB = {0};
  }
  const float *A = a.as<float>(), *B = b.as<float>();
  float *C = out.as<float>();
  const int64_t batches = offA.size();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t i = 0; i < m; ++i) {
      const float *ar = A + offA[bi] * m * k + i * k;
      const float *bm = B + offB[bi] * k * n;
      float *cr = C + bi * m * n + i * n;
      for (int64_t j = 0; j < n; ++j) {
        float acc = 0;
        if (tb) {
          const float *br = bm + j * k;
          for (int64_t x = 0; x < k; ++x)
            acc += ar[x] * br[x];
        } else {
          for (int64_t x = 0; x < k; ++x)
            acc += ar[x] * bm[x * n + j];
        }
        cr[j] = acc;
      }
    }
  return Status();
}

} // namespace tfc::cpu
