//===- search_cpu.h - per-row reductions the decoding loop needs -*- C++ -*-===//
//
// Beam search looks at every row of logits once per step: its log-sum-exp
// (for log_softmax) and its best few entries. Over a 58k vocabulary and 128
// rows a step, writing log-probabilities for every id and selecting with
// nth_element, or summing with scalar expf, cost more than the model's own
// kernels (docs/performance.md). These are single passes, vectorized (the
// attention kernel's vexp), in the CPU kernels' library so that they build
// with its ISA flags. Plain C++17: the runtime links them.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_SEARCH_CPU_H
#define TFC_BACKENDS_CPU_SEARCH_CPU_H

#include <cstdint>

namespace tfc::cpu {

/// log(sum_v exp(l[v])) of one row (n >= 1), the maximum factored out; NaN
/// entries count as -inf. -inf when every entry is -inf (or NaN); +inf when
/// one is +inf.
float rowLogSumExp(const float *l, int64_t n);

/// The |m| largest entries of l[0 .. n) in order, largest first, the lower
/// index first on a tie (NaN ranks below -inf, -inf entries are kept, so the
/// result has min(m, n) entries): their indices in idx[] and values in val[].
/// Returns how many it wrote. One pass, an insertion into the m best.
int rowTopK(const float *l, int64_t n, int m, int32_t *idx, float *val);

/// rowLogSumExp and rowTopK of each of |rows| rows of |n| (row stride n):
/// lse[r], and min(m, n) entries per row at idx/val + r * m. The rows are
/// split across the OpenMP threads: at a 58k vocabulary and 128 rows a step
/// this pass is what beam search's bookkeeping costs, and on one thread it
/// did not shrink with a second (docs/performance.md).
/// When |nonFinite| is not null, nonFinite[r] is 1 where row r holds a NaN
/// or a +inf (what generation refuses: docs/generation.md), else 0.
void rowsLogSumExpTopK(const float *l, int64_t rows, int64_t n, int m, float *lse,
                       int32_t *idx, float *val, uint8_t *nonFinite = nullptr);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_SEARCH_CPU_H
