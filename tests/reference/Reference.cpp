//===- Reference.cpp - naive double-precision references of tfc's ops ---===//
//
// Straight loops over the formulas in Reference.h; see there.
//
//===----------------------------------------------------------------------===//
#include "tests/reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tfc::ref {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
} // namespace

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> broadcastShape(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> o(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    o[r - 1 - i] = x == 1 ? y : x;
  }
  return o;
}

int64_t broadcastIndex(const std::vector<int64_t> &out, const std::vector<int64_t> &in, int64_t e) {
  int64_t idx = 0, stride = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t od = out.size() - 1 - i;
    const int64_t c = e % out[od];
    e /= out[od];
    if (i < in.size()) {
      const int64_t n = in[in.size() - 1 - i];
      if (n != 1)
        idx += c * stride;
      stride *= n;
    }
  }
  return idx;
}

double gelu(double x, bool tanhApprox) {
  if (tanhApprox)
    return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

double activate(Activation act, double x) {
  switch (act) {
  case Activation::None:
    return x;
  case Activation::Relu:
    return x > 0 ? x : 0;
  case Activation::Gelu:
    return gelu(x, false);
  case Activation::GeluTanh:
    return gelu(x, true);
  case Activation::Silu:
    return silu(x);
  }
  return x;
}

void linear(int64_t rows, int64_t k, int64_t n, const double *x, const double *w,
            const double *bias, Activation act, const double *residual, double *y,
            const double *multiplier) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i)
        acc += x[r * k + i] * w[j * k + i];
      if (bias)
        acc += bias[j];
      acc = activate(act, acc);
      if (multiplier)
        acc *= multiplier[r * n + j];
      if (residual)
        acc += residual[r * n + j];
      y[r * n + j] = acc;
    }
}

std::vector<double> matmul(const std::vector<int64_t> &aShape, const double *a,
                           const std::vector<int64_t> &bShape, const double *b, bool transposeB,
                           std::vector<int64_t> &outShape) {
  const int64_t m = aShape[aShape.size() - 2], k = aShape.back();
  const int64_t n = transposeB ? bShape[bShape.size() - 2] : bShape.back();
  const std::vector<int64_t> ab(aShape.begin(), aShape.end() - 2);
  const std::vector<int64_t> bb(bShape.begin(), bShape.end() - 2);
  const std::vector<int64_t> ob = broadcastShape(ab, bb);
  outShape = ob;
  outShape.push_back(m);
  outShape.push_back(n);
  const int64_t batches = numElements(ob);
  std::vector<double> out(batches * m * n);
  for (int64_t e = 0; e < batches; ++e) {
    const double *ae = a + broadcastIndex(ob, ab, e) * m * k;
    const double *be = b + broadcastIndex(ob, bb, e) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t x = 0; x < k; ++x)
          acc += ae[i * k + x] * be[transposeB ? j * k + x : x * n + j];
        out[(e * m + i) * n + j] = acc;
      }
  }
  return out;
}

void softmax(const double *x, int64_t outer, int64_t len, int64_t inner, bool logSoftmax,
             double *out) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t l) { return (o * len + l) * inner + i; };
      double mx = -kInf;
      for (int64_t l = 0; l < len; ++l)
        mx = std::max(mx, x[at(l)]);
      double sum = 0;
      for (int64_t l = 0; l < len; ++l)
        sum += std::exp(x[at(l)] - mx);
      for (int64_t l = 0; l < len; ++l)
        out[at(l)] = mx == -kInf  ? kNaN
                     : logSoftmax ? x[at(l)] - mx - std::log(sum)
                                  : std::exp(x[at(l)] - mx) / sum;
    }
}

void layerNorm(NormVariant variant, int64_t rows, int64_t dim, const double *x, int64_t xStride,
               const double *gamma, const double *beta, double eps, double *out) {
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = x + r * xStride;
    double mean = 0;
    for (int64_t j = 0; j < dim; ++j)
      mean += xr[j];
    mean /= dim;
    if (variant == NormVariant::RmsNorm)
      mean = 0; // no centering: ss is the sum of squares
    double ss = 0;
    for (int64_t j = 0; j < dim; ++j)
      ss += (xr[j] - mean) * (xr[j] - mean);
    const double denom = variant != NormVariant::StdNorm
                             ? std::sqrt(ss / dim + eps)
                             : (dim > 1 ? std::sqrt(ss / (dim - 1)) : kNaN) + eps;
    for (int64_t j = 0; j < dim; ++j) {
      const double g = gamma ? gamma[j] : 1.0;
      const double b = beta ? beta[j] : 0.0;
      out[r * dim + j] = g * (xr[j] - mean) / denom + b;
    }
  }
}

std::vector<double> attention(const Attention &a) {
  const int64_t dv = a.vHeadDim ? a.vHeadDim : a.headDim;
  const int64_t D = a.heads * a.headDim, Dv = a.heads * dv;
  const int64_t kvHeads = a.kvHeads ? a.kvHeads : a.heads, group = a.heads / kvHeads;
  const int64_t qs = a.qRowStride ? a.qRowStride : D;
  const int64_t ks = a.kRowStride ? a.kRowStride : kvHeads * a.headDim;
  const int64_t vs = a.vRowStride ? a.vRowStride : kvHeads * dv;
  const int64_t qbs = a.qBatchStride ? a.qBatchStride : a.qLen * qs;
  const int64_t kbs = a.kBatchStride ? a.kBatchStride : a.kvLen * ks;
  const int64_t vbs = a.vBatchStride ? a.vBatchStride : a.kvLen * vs;
  const bool padding = a.mask == Mask::KeyPadding || a.mask == Mask::PaddingCausal;
  const bool causal = a.mask == Mask::Causal || a.mask == Mask::PaddingCausal;
  std::vector<double> out(a.batch * a.qLen * Dv);
  std::vector<double> s(a.kvLen), w(a.kvLen);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < a.qLen; ++i) {
        const double *qi = a.q + b * qbs + i * qs + h * a.headDim;
        double mx = -kInf;
        for (int64_t j = 0; j < a.kvLen; ++j) {
          const double *kj = a.k + b * kbs + j * ks + h / group * a.headDim;
          double dot = 0;
          for (int64_t d = 0; d < a.headDim; ++d)
            dot += qi[d] * kj[d];
          double sc = a.scale * dot;
          if (a.softcap > 0)
            sc = a.softcap * std::tanh(sc / a.softcap);
          if (a.f32Scores)
            sc = static_cast<float>(sc);
          if (a.bias) { // T5's relative position bias, before the mask
            sc += a.bias(b, h, i, j);
            if (a.f32Scores)
              sc = static_cast<float>(sc);
          }
          if (a.mask == Mask::Additive) {
            sc += a.additive(b, h, i, j);
            if (a.f32Scores) // the sum of two floats, rounded once: f32 addition
              sc = static_cast<float>(sc);
          }
          if ((padding && a.keyToken(b, j) == a.padId) || (causal && j > i + a.qPosOffset) ||
              (causal && a.window > 0 && j <= i + a.qPosOffset - a.window))
            sc = a.maskValue;
          s[j] = sc;
          mx = std::max(mx, sc);
        }
        double *o = out.data() + (b * a.qLen + i) * Dv + h * dv;
        if (mx == -kInf) { // exp(-inf - -inf): PyTorch's softmax gives NaN
          std::fill(o, o + dv, kNaN);
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < a.kvLen; ++j)
          sum += w[j] = std::exp(s[j] - mx);
        for (int64_t d = 0; d < dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < a.kvLen; ++j)
            acc += w[j] * a.v[b * vbs + j * vs + h / group * dv + d];
          o[d] = acc / sum;
        }
      }
  return out;
}

} // namespace tfc::ref
