//===- search_cpu.cc - per-row reductions the decoding loop needs ---------===//
//
// See search_cpu.h.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/search_cpu.h"

#include "backends/cpu/attention_impl.h"

#include <cmath>
#include <limits>

namespace tfc::cpu {

using namespace attention_detail;

float rowLogSumExp(const float *l, int64_t n) {
  // The maximum (NaN is not > anything, so it never becomes the maximum).
  VF mx = vsplat(-kInf);
  int64_t v = 0;
  for (; v + kVec <= n; v += kVec) {
    const VF x = vload(l + v);
    mx = x > mx ? x : mx;
  }
  float m = -kInf;
  for (int c = 0; c < kVec; ++c)
    m = mx[c] > m ? mx[c] : m;
  for (; v < n; ++v)
    m = l[v] > m ? l[v] : m;
  if (!std::isfinite(m))
    return m; // all -inf (or NaN): -inf; an +inf entry: +inf
  // sum exp(l - m) in f32 vectors, lanes added in double; vexp gives 0 for NaN
  // inputs below the cutoff only, so NaN lanes are dropped explicitly.
  const VF mv = vsplat(m);
  VF acc{};
  for (v = 0; v + kVec <= n; v += kVec) {
    const VF x = vload(l + v);
    const VF e = vexp(x - mv);
    acc += x == x ? e : VF{};
  }
  double s = 0;
  for (int c = 0; c < kVec; ++c)
    s += acc[c];
  for (; v < n; ++v)
    if (l[v] == l[v])
      s += std::exp(static_cast<double>(l[v]) - m);
  return m + static_cast<float>(std::log(s));
}

int rowTopK(const float *l, int64_t n, int m, int32_t *idx, float *val) {
  if (m <= 0 || n <= 0)
    return 0;
  const float nanRank = -std::numeric_limits<float>::infinity();
  int k = 0;
  auto rank = [&](float x) { return x == x ? x : nanRank; };
  // The first m entries, then every later one that beats the worst kept.
  // Ties keep the earlier index: a later equal value never displaces it.
  for (int64_t v = 0; v < n; ++v) {
    const float x = rank(l[v]);
    if (k == m && !(x > val[m - 1]))
      continue;
    int at = k < m ? k++ : m - 1;
    while (at > 0 && x > val[at - 1]) {
      val[at] = val[at - 1];
      idx[at] = idx[at - 1];
      --at;
    }
    val[at] = x;
    idx[at] = static_cast<int32_t>(v);
  }
  return k;
}

} // namespace tfc::cpu
