//===- attention_row.cc - the CPU attention's row path --------------------===//
//
// Query blocks of at most kRowPathMaxQ rows (a decoding step) run one query
// row at a time, vectorized over head_dim: see attention_cpu.cc's overview.
//
//===----------------------------------------------------------------------===//
#include "backends/cpu/attention_impl.h"

namespace tfc::cpu::attention_detail {
namespace {

// --- Row path: one query row at a time, vectorized over head_dim ----------

/// Lane i of the result is lane (i / W) * 2W + i % W of the concatenation
/// (x, y) plus the lane W further on. If x and y each hold kVec / (2W) keys
/// as consecutive chunks of 2W partial sums, the result holds their kVec / W
/// keys, in order, as chunks of W partial sums: each chunk folded in half.
template <int W, size_t... I>
TFC_INLINE VF foldChunks(VF x, VF y, std::index_sequence<I...>) {
  const VF lo = __builtin_shufflevector(x, y, static_cast<int>(I / W * 2 * W + I % W)...);
  const VF hi = __builtin_shufflevector(x, y, static_cast<int>(I / W * 2 * W + W + I % W)...);
  return lo + hi;
}

/// Folds a[0 .. 2W) into a[0 .. W), and so on down to one vector. Called with
/// W = kVec / 2 on kVec vectors, it returns the vector whose lane g is the sum
/// of the lanes of a[g]: kVec - 1 adds and 2 (kVec - 1) shuffles for kVec
/// horizontal sums.
template <int W>
TFC_INLINE VF reduceAcross(VF *a) {
#pragma GCC unroll 16
  for (int i = 0; i < W; ++i)
    a[i] = foldChunks<W>(a[2 * i], a[2 * i + 1], std::make_index_sequence<kVec>{});
  if constexpr (W == 1)
    return a[0];
  else
    return reduceAcross<W / 2>(a);
}

/// The partial sums, lane by lane, of the dot product of the key row at K
/// with the query row Q (dk floats, zero-padded to whole vectors; qv holds
/// its vectors when NQ > 0). NQ is dk / kVec when dk is a multiple of kVec
/// known at compile time (the query then stays in registers), 0 otherwise.
template <int NQ>
TFC_INLINE VF rowDot(const float *K, const VF *qv, const float *Q, int64_t dk) {
  VF a{};
  if constexpr (NQ > 0) {
#pragma GCC unroll 16
    for (int c = 0; c < NQ; ++c)
      a += vload(K + c * kVec) * qv[c];
  } else {
    const int64_t whole = dk / kVec * kVec;
    for (int64_t d = 0; d < whole; d += kVec)
      a += vload(K + d) * vload(Q + d);
    if (whole < dk) {
      // The row's last dk % kVec floats only: what follows may be another
      // head's columns, or not ours to read.
      VF kt{};
      std::memcpy(&kt, K + whole, (dk - whole) * sizeof(float));
      a += kt * vload(Q + whole);
    }
  }
  return a;
}

/// s[0 .. nk) = the scores of the nk key rows at K (row stride ks) against
/// the query row Q, kVec keys at a time: kVec dot products as vectors over
/// head_dim, then one transpose-and-add tree. s has room for nk rounded up to
/// whole vectors; the lanes past nk are garbage.
template <int NQ>
void rowScoresBlock(const float *K, int64_t ks, int64_t nk, const float *Q, int64_t dk,
                    float *s) {
  VF qv[NQ > 0 ? NQ : 1];
  if constexpr (NQ > 0) {
#pragma GCC unroll 16
    for (int c = 0; c < NQ; ++c)
      qv[c] = vload(Q + c * kVec);
  }
  int64_t j = 0;
  for (; j + kVec <= nk; j += kVec) {
    const float *rows = K + j * ks;
    VF acc[kVec];
#pragma GCC unroll 16
    for (int g = 0; g < kVec; ++g)
      acc[g] = rowDot<NQ>(rows + g * ks, qv, Q, dk);
    vstore(s + j, reduceAcross<kVec / 2>(acc));
  }
  if (j < nk) {
    VF acc[kVec];
    for (int g = 0; g < kVec; ++g)
      acc[g] = j + g < nk ? rowDot<NQ>(K + (j + g) * ks, qv, Q, dk) : VF{};
    vstore(s + j, reduceAcross<kVec / 2>(acc));
  }
}

void rowScoresBlock(const float *K, int64_t ks, int64_t nk, const float *Q, int64_t dk,
                    float *s) {
  switch (dk % kVec == 0 ? dk / kVec : 0) {
  case 1:
    return rowScoresBlock<1>(K, ks, nk, Q, dk, s);
  case 2:
    return rowScoresBlock<2>(K, ks, nk, Q, dk, s);
  case 3:
    return rowScoresBlock<3>(K, ks, nk, Q, dk, s);
  case 4:
    return rowScoresBlock<4>(K, ks, nk, Q, dk, s);
  case 6:
    return rowScoresBlock<6>(K, ks, nk, Q, dk, s);
  case 8:
    return rowScoresBlock<8>(K, ks, nk, Q, dk, s);
  default:
    return rowScoresBlock<0>(K, ks, nk, Q, dk, s);
  }
}

/// acc[0 .. N*kVec) = alpha * acc + sum_{j < nk} P[j] V[j][0 .. N*kVec), V
/// read in place (row stride vs). Two sets of accumulators (even and odd j)
/// keep enough FMAs in flight for one output row.
template <int N>
TFC_INLINE void rowPvTile(const float *P, const float *V, int64_t vs, int64_t nk, float *acc,
                          float alpha) {
  VF a[N], e[N];
#pragma GCC unroll 16
  for (int c = 0; c < N; ++c) {
    a[c] = vload(acc + c * kVec) * vsplat(alpha);
    e[c] = VF{};
  }
  int64_t j = 0;
  for (; j + 2 <= nk; j += 2) {
    const VF p0 = vsplat(P[j]), p1 = vsplat(P[j + 1]);
#pragma GCC unroll 16
    for (int c = 0; c < N; ++c) {
      a[c] += p0 * vload(V + j * vs + c * kVec);
      e[c] += p1 * vload(V + (j + 1) * vs + c * kVec);
    }
  }
  if (j < nk) {
    const VF p0 = vsplat(P[j]);
#pragma GCC unroll 16
    for (int c = 0; c < N; ++c)
      a[c] += p0 * vload(V + j * vs + c * kVec);
  }
#pragma GCC unroll 16
  for (int c = 0; c < N; ++c)
    vstore(acc + c * kVec, a[c] + e[c]);
}

/// acc[0 .. dv) = alpha * acc + sum_{j < nk} P[j] V[j][0 .. dv) for one
/// query row; the V rows (stride vs) are read in place, and only their dv
/// floats.
void rowPv(const float *P, const float *V, int64_t vs, int64_t nk, float *acc, int64_t dv,
           float alpha) {
  const int64_t nv = dv / kVec;
  int64_t c = 0;
  for (; c + kDVecs <= nv; c += kDVecs)
    rowPvTile<kDVecs>(P, V + c * kVec, vs, nk, acc + c * kVec, alpha);
  for (; c < nv; ++c)
    rowPvTile<1>(P, V + c * kVec, vs, nk, acc + c * kVec, alpha);
  for (int64_t d = nv * kVec; d < dv; ++d) {
    float a = acc[d] * alpha;
    for (int64_t j = 0; j < nk; ++j)
      a += P[j] * V[j * vs + d];
    acc[d] = a;
  }
}

/// One key block of one query row (batch b, head h, row i of the call):
/// scores, masks, online-softmax update (m and l are the row's running max and
/// sum), P V into sc.racc. `forced` as in processBlock.
void rowBlock(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t i, int64_t k0,
              int64_t nk, bool forced, float &m, float &l) {
  const AttentionParams &p = pr.p;
  const float mv = p.mask_value;
  float *s = sc.rs;
  const int64_t nkp = (nk + kVec - 1) / kVec * kVec;

  if (forced) {
    std::fill(s, s + nk, mv);
  } else {
    rowScoresBlock(pr.kRow(b, k0, h), p.k_row_stride, nk, sc.rq, pr.dk, s);
    if (p.softcap > 0) // the lanes past nk are overwritten below
      for (int64_t j = 0; j < nk; j += kVec)
        vstore(s + j, vsoftcap(vload(s + j), p.softcap));
    if (pr.additive) {
      const float *a =
          p.additive + b * p.add_stride_b + h * p.add_stride_h + i * p.add_stride_q + k0;
      for (int64_t j = 0; j < nk; ++j)
        s[j] += a[j];
    }
    if (pr.keyPad) {
      const int64_t *tok = pr.tokens(b, k0);
      for (int64_t j = 0; j < nk; ++j)
        if (tok[j] == p.pad_id)
          s[j] = mv;
    }
    if (pr.causal) {
      // Keys k0 + j > i + q_pos_offset are masked: a suffix of the block.
      const int64_t first = std::max<int64_t>(0, i + pr.qOffset(b) + 1 - k0);
      if (first < nk)
        std::fill(s + first, s + nk, mv);
      // And, with a sliding window, keys k0 + j <= i + q_pos_offset - window:
      // a prefix.
      if (p.window > 0) {
        const int64_t end = std::min<int64_t>(nk, i + pr.qOffset(b) - p.window + 1 - k0);
        if (end > 0)
          std::fill(s, s + end, mv);
      }
    }
  }
  // Lanes past the block weigh exactly 0 (and do not raise the maximum).
  std::fill(s + nk, s + nkp, -kInf);

  VF mx = vsplat(-kInf);
  for (int64_t j = 0; j < nkp; j += kVec)
    mx = vmax(mx, vload(s + j));
  float blockMax = -kInf;
  for (int c = 0; c < kVec; ++c)
    blockMax = mx[c] > blockMax ? mx[c] : blockMax;
  const float mNew = std::max(m, blockMax);
  // As in processBlock: a row with no finite score so far subtracts 0.
  const float mUse = mNew == -kInf ? 0.0f : mNew;
  const float alpha = vexp(vsplat(m - mUse))[0]; // 0 when m = -inf
  const VF mu = vsplat(mUse);
  VF sum{};
  for (int64_t j = 0; j < nkp; j += kVec) {
    const VF e = vexp(vload(s + j) - mu);
    vstore(s + j, e);
    sum += e;
  }
  float blockSum = 0.0f;
  for (int c = 0; c < kVec; ++c)
    blockSum += sum[c];
  l = l * alpha + blockSum;
  m = mNew;

  rowPv(s, pr.vRow(b, k0, h), p.v_row_stride, nk, sc.racc, pr.dv, alpha);
}

} // namespace

/// Query row i of batch b, head h, on the row path: the same key blocks,
/// skipping and second pass as runTask.
void rowTask(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t i) {
  const AttentionParams &p = pr.p;
  const float *src = pr.qRow(b, i, h);
  const int64_t dkp = (pr.dk + kVec - 1) / kVec * kVec;
  for (int64_t d = 0; d < pr.dk; ++d)
    sc.rq[d] = p.scale * src[d];
  std::fill(sc.rq + pr.dk, sc.rq + dkp, 0.0f);
  std::fill(sc.racc, sc.racc + pr.dv, 0.0f);
  float m = -kInf, l = 0.0f;

  const int64_t kvLen = pr.kvLen(b), kbl = pr.keyBlock();
  const int64_t nkb = (kvLen + kbl - 1) / kbl;
  bool skipped = false;
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t k0 = kb * kbl, nk = std::min(kbl, kvLen - k0);
    if (blockAllMasked(pr, b, i, 1, k0, nk)) {
      skipped = true;
      continue;
    }
    rowBlock(pr, sc, b, h, i, k0, nk, /*forced=*/false, m, l);
  }
  if (skipped && p.mask_value > -kInf && !(p.mask_value - m < kExpCutoff)) {
    for (int64_t kb = 0; kb < nkb; ++kb) {
      const int64_t k0 = kb * kbl, nk = std::min(kbl, kvLen - k0);
      if (blockAllMasked(pr, b, i, 1, k0, nk))
        rowBlock(pr, sc, b, h, i, k0, nk, /*forced=*/true, m, l);
    }
  }

  float *dst = pr.outRow(b, i, h);
  if (l == 0.0f) {
    std::fill(dst, dst + pr.dv, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  for (int64_t d = 0; d < pr.dv; ++d)
    dst[d] = sc.racc[d] / l;
}

} // namespace tfc::cpu::attention_detail
