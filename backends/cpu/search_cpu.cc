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

namespace {
/// The rank of a logit: itself, or -inf for NaN.
inline float rankOf(float x) { return x == x ? x : -std::numeric_limits<float>::infinity(); }

/// Inserts rank x of entry v into the k (of at most m) best kept, in order:
/// the first m entries, then every later one that beats the worst kept. Ties
/// keep the earlier index: a later equal value never displaces it.
inline void insertRanked(float x, int64_t v, int m, int &k, int32_t *idx, float *val) {
  if (k == m && !(x > val[m - 1]))
    return;
  int at = k < m ? k++ : m - 1;
  while (at > 0 && x > val[at - 1]) {
    val[at] = val[at - 1];
    idx[at] = idx[at - 1];
    --at;
  }
  val[at] = x;
  idx[at] = static_cast<int32_t>(v);
}
} // namespace

int rowTopK(const float *l, int64_t n, int m, int32_t *idx, float *val) {
  if (m <= 0 || n <= 0)
    return 0;
  int k = 0;
  for (int64_t v = 0; v < n; ++v)
    insertRanked(rankOf(l[v]), v, m, k, idx, val);
  return k;
}

namespace {
/// rowTopK with a vector filter: past the first m entries, a vector of
/// entries is looked at one by one only when one of them beats the worst kept
/// (NaN compares false, which is its rank below -inf), so a row of a 58k
/// vocabulary costs about one vector compare per 8 or 16 entries. The same
/// result as rowTopK: the same insertions in the same order.
int rowTopKFiltered(const float *l, int64_t n, int m, int32_t *idx, float *val) {
  if (m <= 0 || n <= 0)
    return 0;
  int k = 0;
  int64_t v = 0;
  for (; v < n && k < m; ++v)
    insertRanked(rankOf(l[v]), v, m, k, idx, val);
  for (; v + kVec <= n; v += kVec) {
    const VF x = vload(l + v);
    const VI beats = x > vsplat(val[m - 1]);
    bool any = false;
    for (int c = 0; c < kVec; ++c)
      any |= beats[c] != 0;
    if (!any)
      continue;
    for (int c = 0; c < kVec; ++c)
      insertRanked(rankOf(x[c]), v + c, m, k, idx, val);
  }
  for (; v < n; ++v)
    insertRanked(rankOf(l[v]), v, m, k, idx, val);
  return k;
}

/// rowLogSumExp's second pass, given the row's maximum |m| (NaN ignored);
/// |nan| is set when the row holds a NaN.
float logSumExpWithMax(const float *l, int64_t n, float m, bool &nan) {
  if (!std::isfinite(m)) { // all -inf or NaN, or a +inf: only the NaN scan is left
    nan = false;
    for (int64_t v = 0; v < n; ++v)
      nan |= l[v] != l[v];
    return m;
  }
  const VF mv = vsplat(m);
  VF acc{};
  VI isNan{};
  int64_t v = 0;
  for (; v + kVec <= n; v += kVec) {
    const VF x = vload(l + v);
    const VF e = vexp(x - mv);
    acc += x == x ? e : VF{};
    isNan |= x != x;
  }
  double s = 0;
  nan = false;
  for (int c = 0; c < kVec; ++c) {
    s += acc[c];
    nan |= isNan[c] != 0;
  }
  for (; v < n; ++v) {
    if (l[v] == l[v])
      s += std::exp(static_cast<double>(l[v]) - m);
    else
      nan = true;
  }
  return m + static_cast<float>(std::log(s));
}
} // namespace

void rowsLogSumExpTopK(const float *l, int64_t rows, int64_t n, int m, float *lse,
                       int32_t *idx, float *val, uint8_t *nonFinite) {
  // One row is about 20 us at n 58k: worth a thread from a few rows up.
#pragma omp parallel for schedule(static) if (rows * n >= (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = l + r * n;
    const int got = rowTopKFiltered(row, n, m, idx + r * m, val + r * m);
    // The best kept entry is the row's maximum (NaN ranks below -inf, so it is
    // the largest non-NaN value, or -inf): the log-sum-exp needs one pass more.
    // (With m 0 there is no kept entry: rowLogSumExp finds the maximum itself,
    // and +inf is its result.)
    bool nan = false;
    const float mx = got > 0 ? val[r * m] : rowLogSumExp(row, n);
    lse[r] = got > 0 ? logSumExpWithMax(row, n, mx, nan) : mx;
    if (got == 0)
      for (int64_t v = 0; v < n; ++v)
        nan |= row[v] != row[v];
    if (nonFinite)
      nonFinite[r] = nan || mx == std::numeric_limits<float>::infinity();
  }
}

} // namespace tfc::cpu
