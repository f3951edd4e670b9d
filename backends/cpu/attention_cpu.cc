//===- attention_cpu.cc - Fused multi-head attention on the CPU -----------===//
//
// FlashAttention-style fused attention in f32. Work is split into tasks of one
// (batch, head, block of up to kBlockQ query rows); each task streams the key
// and value rows in blocks of kBlockK and keeps, per query row, the running
// maximum m, the running sum l of exp(s - m) and an accumulator of the
// exp-weighted value rows, rescaling l and the accumulator whenever m grows
// (the online softmax). Memory is O(block) per thread whatever the sequence
// length, and the [B, H, Sq, Sk] score matrix never exists.
//
// Layout. A task packs its query block transposed and pre-scaled, Qt[d][i],
// once; the score block is then computed transposed, St[j][i] = K[j] . Qt[:, i],
// by broadcasting elements of K straight from the caller's rows (no K
// packing) against vectors of query lanes. With query rows in the vector
// lanes, the softmax statistics (max and sum over keys) are plain
// element-wise operations across the rows of St, with no horizontal
// reductions, and key padding and the causal rule mask whole rows or row
// prefixes of St.
//
// Inner loops use GCC/Clang vector extensions (not intrinsics): the width is
// picked from the target (16 floats with AVX-512, 8 with AVX, 4 otherwise) and
// the compiler maps the operations onto whatever the target has. They are used
// rather than plain loops because the register tiles must stay in registers
// across the reduction loop, which the auto-vectorizer does not guarantee, and
// because exp() must vectorize without -ffast-math.
//
// A query block of at most kRowPathMaxQ rows (a decoding step, q_len == 1,
// or the short last block of a longer query) would leave most query lanes
// empty: with one row, 15 of the 16 lanes of every score FMA and 3 of the 4
// rows of every P V tile would be wasted. Such a block takes the row path
// instead, one query row at a time: the scores of kVec keys at once are
// vectors over head_dim, reduced across lanes by a transpose-and-add tree
// into one vector of kVec scores, so the softmax runs with keys in the lanes,
// and P V accumulates one output row in registers, reading V in place. It
// applies the same masks and the same online softmax over the same key
// blocks; only the order of the additions in the dot products and in the
// softmax sum differs, so its results agree with the tiled path's to float
// rounding, not bitwise.
//
// Each task runs on one thread in a fixed order, and which path a block takes
// depends only on the shapes, so the result is bitwise independent of the
// thread count and of OpenMP's scheduling.
//
//===----------------------------------------------------------------------===//

#include "backends/cpu/attention_cpu.h"
#include "backends/cpu/attention_impl.h"
#include "backends/cpu/kernels_cpu.h"
#include "backends/cpu/rotary_cpu.h"
#include "backends/kernel_rules.h"
#include "tfc/relative_bucket.h"

#include <algorithm>
#include <cmath>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace tfc::cpu {
namespace {

using namespace attention_detail;

/// St[r][:QV*kVec] = sum_d K[r][d] * Qt[d][:QV*kVec] for the R key rows at K
/// (row stride ks).
template <int R, int QV>
TFC_INLINE void scoreTile(const float *K, int64_t ks, const float *Qt, int64_t dk, float *St) {
  VF acc[R][QV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < QV; ++c)
      acc[r][c] = VF{};
  for (int64_t d = 0; d < dk; ++d) {
    VF qv[QV];
#pragma GCC unroll 16
    for (int c = 0; c < QV; ++c) {
      qv[c] = vload(Qt + d * kBlockQ + c * kVec);
      pinInRegister(qv[c]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const VF kb = vsplat(K[r * ks + d]);
#pragma GCC unroll 16
      for (int c = 0; c < QV; ++c)
        acc[r][c] += kb * qv[c];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < QV; ++c)
      vstore(St + r * kBlockQ + c * kVec, acc[r][c]);
}

/// Scores of nk key rows (K, row stride ks) against the first QV query
/// vectors of Qt, into St.
template <int QV>
void scoresBlock(const float *K, int64_t ks, int64_t nk, const float *Qt, int64_t dk,
                 float *St) {
  int64_t j = 0;
  for (; j + kKeyRows <= nk; j += kKeyRows)
    scoreTile<kKeyRows, QV>(K + j * ks, ks, Qt, dk, St + j * kBlockQ);
  for (; j < nk; ++j)
    scoreTile<1, QV>(K + j * ks, ks, Qt, dk, St + j * kBlockQ);
}

void scoresBlock(int qv, const float *K, int64_t ks, int64_t nk, const float *Qt, int64_t dk,
                 float *St) {
  static_assert(kQVecs == 4, "dispatch below");
  switch (qv) {
  case 1:
    return scoresBlock<1>(K, ks, nk, Qt, dk, St);
  case 2:
    return scoresBlock<2>(K, ks, nk, Qt, dk, St);
  case 3:
    return scoresBlock<3>(K, ks, nk, Qt, dk, St);
  default:
    return scoresBlock<4>(K, ks, nk, Qt, dk, St);
  }
}

/// acc[r][d0 : d0 + N*kVec] = alpha[r] * acc[r][...] + sum_{j < nk} Pt[j][r] V[j][...]
/// for the kRows query rows starting at Pt (a column offset), acc and alpha.
template <int N>
TFC_INLINE void pvTile(const float *Pt, const float *V, int64_t vs, int64_t nk, float *acc,
                       int64_t dvp, const float *alpha, int64_t d0) {
  VF a[kRows][N];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    const VF al = vsplat(alpha[r]);
#pragma GCC unroll 16
    for (int c = 0; c < N; ++c)
      a[r][c] = vload(acc + r * dvp + d0 + c * kVec) * al;
  }
  for (int64_t j = 0; j < nk; ++j) {
    VF vv[N];
#pragma GCC unroll 16
    for (int c = 0; c < N; ++c) {
      vv[c] = vload(V + j * vs + d0 + c * kVec);
      pinInRegister(vv[c]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const VF pr = vsplat(Pt[j * kBlockQ + r]);
#pragma GCC unroll 16
      for (int c = 0; c < N; ++c)
        a[r][c] += pr * vv[c];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < N; ++c)
      vstore(acc + r * dvp + d0 + c * kVec, a[r][c]);
}

/// acc = alpha * acc + P V for query rows < rows (a multiple of kRows). Pt is
/// [nk][kBlockQ]; V is [nk] rows of dvp floats (a multiple of kVec) at stride vs.
void pvBlock(const float *Pt, const float *V, int64_t vs, int64_t nk, float *acc, int64_t dvp,
             const float *alpha, int64_t rows) {
  const int64_t nv = dvp / kVec;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const float *pr = Pt + r0;
    float *ar = acc + r0 * dvp;
    const float *al = alpha + r0;
    int64_t c = 0;
    for (; c + kDVecs <= nv; c += kDVecs)
      pvTile<kDVecs>(pr, V, vs, nk, ar, dvp, al, c * kVec);
    for (; c < nv; ++c)
      pvTile<1>(pr, V, vs, nk, ar, dvp, al, c * kVec);
  }
}

/// One key block of one task: scores, masks, online-softmax update, P V. With
/// `forced` every score of the block is mask_value (the block is entirely
/// masked and was skipped in the main pass), so K is not even read.
void processBlock(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t q0, int64_t nq,
                  int qv, int64_t k0, int64_t nk, bool forced) {
  const AttentionParams &p = pr.p;
  const float mv = p.mask_value;
  const int64_t lanes = qv * kVec;
  float *st = sc.st;

  if (forced) {
    for (int64_t j = 0; j < nk; ++j)
      std::fill(st + j * kBlockQ, st + j * kBlockQ + lanes, mv);
  } else {
    const float *K = pr.kRow(b, k0, h);
    scoresBlock(qv, K, p.k_row_stride, nk, sc.qt, pr.dk, st);
    if (p.softcap > 0)
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t c = 0; c < lanes; c += kVec)
          vstore(st + j * kBlockQ + c, vsoftcap(vload(st + j * kBlockQ + c), p.softcap));

    if (pr.additive) {
      const float *a = p.additive + b * p.add_stride_b + h * p.add_stride_h + k0;
      if (p.add_stride_q == 0) {
        // One mask row for all queries ([B|1, H|1, 1, Sk], BERT-style): a
        // whole row of St gets the same value.
        for (int64_t j = 0; j < nk; ++j) {
          const VF aj = vsplat(a[j]);
          for (int64_t c = 0; c < lanes; c += kVec)
            vstore(st + j * kBlockQ + c, vload(st + j * kBlockQ + c) + aj);
        }
      } else {
        for (int64_t r = 0; r < nq; ++r) {
          const float *ar = a + (q0 + r) * p.add_stride_q;
          for (int64_t j = 0; j < nk; ++j)
            st[j * kBlockQ + r] += ar[j];
        }
      }
    }
    if (pr.keyPad) {
      const int64_t *tok = pr.tokens(b, k0);
      for (int64_t j = 0; j < nk; ++j)
        if (tok[j] == p.pad_id)
          std::fill(st + j * kBlockQ, st + j * kBlockQ + lanes, mv);
    }
    if (pr.causal) {
      // Key k0 + j is masked for query rows r with q0 + r + q_pos_offset <
      // k0 + j: a row prefix.
      for (int64_t j = 0; j < nk; ++j) {
        const int64_t n = std::min(k0 + j - q0 - pr.qOffset(b), lanes);
        if (n > 0)
          std::fill(st + j * kBlockQ, st + j * kBlockQ + n, mv);
      }
      // A sliding window masks key k0 + j for the rows r with
      // q0 + r + q_pos_offset >= k0 + j + window: a row suffix.
      if (p.window > 0)
        for (int64_t j = 0; j < nk; ++j) {
          const int64_t r0 = std::max<int64_t>(0, k0 + j + p.window - q0 - pr.qOffset(b));
          if (r0 < lanes)
            std::fill(st + j * kBlockQ + r0, st + j * kBlockQ + lanes, mv);
        }
    }
  }

  // Online softmax, one vector of query rows at a time.
  for (int64_t c = 0; c < lanes; c += kVec) {
    VF mx = vsplat(-kInf);
    for (int64_t j = 0; j < nk; ++j)
      mx = vmax(mx, vload(st + j * kBlockQ + c));
    const VF mOld = vload(sc.m + c);
    const VF mNew = vmax(mOld, mx);
    // A row whose scores are all -inf so far would compute exp(-inf - -inf)
    // = NaN; subtracting 0 instead keeps its terms at exp(-inf) = 0, so it
    // stays at l = 0 and ends as NaN only if it never sees a finite score,
    // as with PyTorch's softmax.
    const VF mUse = mNew == vsplat(-kInf) ? vsplat(0.0f) : mNew;
    const VF alpha = vexp(mOld - mUse); // 0 when mOld = -inf
    VF sum{};
    for (int64_t j = 0; j < nk; ++j) {
      const VF e = vexp(vload(st + j * kBlockQ + c) - mUse);
      vstore(st + j * kBlockQ + c, e);
      sum += e;
    }
    vstore(sc.l + c, vload(sc.l + c) * alpha + sum);
    vstore(sc.m + c, mNew);
    vstore(sc.alpha + c, alpha);
  }

  // Copy the block's V rows into contiguous scratch, zero-padded to whole
  // vectors. Besides removing the scalar tail, this matters for speed: the
  // rows of a [B, S, D] tensor are D floats apart, often a multiple of 2 KB,
  // and in place they would compete for a few L1 sets while P V re-reads the
  // block once per tile of query rows (measured 25% slower at D = 512).
  const float *Vsrc = pr.vRow(b, k0, h);
  const int64_t whole = pr.dv / kVec * kVec;
  for (int64_t j = 0; j < nk; ++j) {
    const float *src = Vsrc + j * p.v_row_stride;
    float *dst = sc.v + j * pr.dvp;
    for (int64_t d = 0; d < whole; d += kVec)
      vstore(dst + d, vload(src + d));
    for (int64_t d = whole; d < pr.dvp; ++d)
      dst[d] = d < pr.dv ? src[d] : 0.0f;
  }
  pvBlock(st, sc.v, pr.dvp, nk, sc.acc, pr.dvp, sc.alpha, (nq + kRows - 1) / kRows * kRows);
}

// --- Tiled path ------------------------------------------------------------

void runTask(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t qb) {
  const AttentionParams &p = pr.p;
  const int64_t q0 = qb * kBlockQ;
  const int64_t nq = std::min(kBlockQ, p.q_len - q0);
  if (nq <= kRowPathMaxQ) {
    for (int64_t r = 0; r < nq; ++r)
      rowTask(pr, sc, b, h, q0 + r);
    return;
  }
  // Query vectors actually used: a short last block (or a one-token query)
  // does not pay for kBlockQ lanes.
  const int qv = static_cast<int>((nq + kVec - 1) / kVec);
  const int64_t lanes = qv * kVec;

  // Pack the query block transposed, pre-multiplied by scale (one multiply
  // per element instead of one per score). Unused lanes are 0: finite scores
  // that are computed and never written out.
  for (int64_t d = 0; d < pr.dk; ++d)
    std::fill(sc.qt + d * kBlockQ + nq, sc.qt + d * kBlockQ + lanes, 0.0f);
  for (int64_t r = 0; r < nq; ++r) {
    const float *src = pr.qRow(b, q0 + r, h);
    for (int64_t d = 0; d < pr.dk; ++d)
      sc.qt[d * kBlockQ + r] = p.scale * src[d];
  }
  std::fill(sc.acc, sc.acc + lanes * pr.dvp, 0.0f);
  std::fill(sc.m, sc.m + lanes, -kInf);
  std::fill(sc.l, sc.l + lanes, 0.0f);

  // Main pass over the key blocks that hold at least one unmasked key for this
  // query block. Entirely masked blocks (above the causal diagonal, or all
  // padding) are skipped: each of their scores is mask_value, so they add
  // exp(mask_value - m) per key, which vexp() makes exactly 0 (and the rescale
  // exactly 1) whenever mask_value - m < kExpCutoff.
  const int64_t kvLen = pr.kvLen(b), kbl = pr.keyBlock();
  const int64_t nkb = (kvLen + kbl - 1) / kbl;
  bool skipped = false;
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t k0 = kb * kbl, nk = std::min(kbl, kvLen - k0);
    if (blockAllMasked(pr, b, q0, nq, k0, nk)) {
      skipped = true;
      continue;
    }
    processBlock(pr, sc, b, h, q0, nq, qv, k0, nk, /*forced=*/false);
  }

  // Otherwise (a row whose keys are all masked with a finite fill, or a fill
  // close to the real scores, say 0) the skipped blocks do count: process them
  // now. The online softmax does not depend on block order, so the result is
  // the same as processing them in place; skipping is bit-exact either way.
  if (skipped && p.mask_value > -kInf) {
    bool needed = false;
    for (int64_t r = 0; r < nq; ++r)
      needed |= !(p.mask_value - sc.m[r] < kExpCutoff);
    for (int64_t kb = 0; needed && kb < nkb; ++kb) {
      const int64_t k0 = kb * kbl, nk = std::min(kbl, kvLen - k0);
      if (blockAllMasked(pr, b, q0, nq, k0, nk))
        processBlock(pr, sc, b, h, q0, nq, qv, k0, nk, /*forced=*/true);
    }
  }

  for (int64_t r = 0; r < nq; ++r) {
    float *dst = pr.outRow(b, q0 + r, h);
    const float *a = sc.acc + r * pr.dvp;
    const float l = sc.l[r];
    if (l == 0.0f) {
      // l is 0 only when every score of the row is -inf (the row maximum
      // contributes exp(0) = 1 otherwise): softmax gives NaN.
      std::fill(dst, dst + pr.dv, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (int64_t d = 0; d < pr.dv; ++d)
      dst[d] = a[d] / l;
  }
}

} // namespace

bool pagedBlockLenOk(int64_t len) {
  return len > 0 && (len < kBlockK ? kBlockK % len == 0 && (len & (len - 1)) == 0
                                   : len % kBlockK == 0);
}

void attention(const AttentionParams &params, const float *q, const float *k,
               const float *v, float *out) {
  assert(!params.kv_lens || !params.rel_bias);
  const AttentionParams *pp = &params;
  AttentionParams biased;
  std::vector<float> distances;
  if (params.rel_bias && params.q_len > 0 && params.kv_len > 0 &&
      params.mask != TFC_MASK_ADDITIVE) {
    // The relative position bias depends on j - i only: one row per head of
    // the q_len + kv_len - 1 distances, read as an additive mask whose query
    // stride is -1 (element (h, i, j) at h * n + (q_len - 1) - i + j).
    biased = params;
    const int64_t n = params.q_len + params.kv_len - 1, H = params.heads;
    distances.resize(static_cast<size_t>(H * n));
    for (int64_t d = 0; d < n; ++d) {
      const int64_t rel = d - (params.q_len - 1) - params.q_pos_offset;
      const int64_t row = tfc_relative_bucket(rel, params.rel_bidirectional ? 1 : 0,
                                              params.rel_buckets, params.rel_max_distance);
      for (int64_t h = 0; h < H; ++h)
        distances[h * n + d] = params.rel_bias[row * H + h];
    }
    biased.additive = distances.data() + (params.q_len - 1);
    biased.add_stride_b = 0;
    biased.add_stride_h = n;
    biased.add_stride_q = -1;
    pp = &biased;
  }
  const AttentionParams &p = *pp;
  const int64_t dk = p.head_dim;
  const int64_t dv = p.v_head_dim > 0 ? p.v_head_dim : p.head_dim;
  if (p.batch <= 0 || p.q_len <= 0 || p.heads <= 0 || dv <= 0)
    return;
  const int64_t obs = p.out_batch_stride != 0 ? p.out_batch_stride : p.q_len * p.out_row_stride;
  if (!p.kv_lens && p.kv_len <= 0) {
    // Softmax over no keys, times an empty V: PyTorch's matmul gives zeros.
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t r = 0; r < p.q_len; ++r) {
        float *row = out + b * obs + r * p.out_row_stride;
        std::fill(row, row + p.heads * dv, 0.0f);
      }
    return;
  }
  const bool keyPad = p.mask == TFC_MASK_KEY_PADDING || p.mask == TFC_MASK_PADDING_CAUSAL;
  const bool causal = p.mask == TFC_MASK_CAUSAL || p.mask == TFC_MASK_PADDING_CAUSAL;
  // The position bias (expanded above) is read through the additive slot.
  const bool additive = p.mask == TFC_MASK_ADDITIVE || pp == &biased;
  assert(!keyPad || p.key_tokens);
  assert(!additive || p.additive);

  const int64_t dvp = (dv + kVec - 1) / kVec * kVec;
  // Batch strides: 0 means the batches follow each other.
  const int64_t qbs = p.q_batch_stride != 0 ? p.q_batch_stride : p.q_len * p.q_row_stride;
  const int64_t kbs = p.k_batch_stride != 0 ? p.k_batch_stride : p.kv_len * p.k_row_stride;
  const int64_t vbs = p.v_batch_stride != 0 ? p.v_batch_stride : p.kv_len * p.v_row_stride;
  const int64_t tbs = p.key_tokens_batch_stride != 0 ? p.key_tokens_batch_stride : p.kv_len;
  const int64_t group = p.kv_heads > 0 ? p.heads / p.kv_heads : 1;
  const Problem pr{p,   q,   k,   v,   out,    dk,     dv,       dvp,  qbs,
                   kbs, vbs, obs, tbs, keyPad, causal, additive, group};
  const int64_t nqb = (p.q_len + kBlockQ - 1) / kBlockQ;
  const int64_t tasks = p.batch * p.heads * nqb;
  // Which paths the blocks take: all but the last block have kBlockQ rows.
  const bool tiled = std::min(p.q_len, kBlockQ) > kRowPathMaxQ;
  const bool row = p.q_len - (nqb - 1) * kBlockQ <= kRowPathMaxQ;
  // Waking the other threads costs microseconds: a call with less work than
  // that (a decoding step over a short cache) runs on the calling thread.
  // The threshold counts multiply-adds, as if every query row took the row
  // path.
  double keys = 0; // over the batch
  for (int64_t b = 0; b < p.batch; ++b)
    keys += static_cast<double>(pr.kvLen(b));
  const double macs = keys * p.heads * p.q_len * (dk + dv);
  const bool parallel = tasks > 1 && (tiled || macs >= kParallelMinMacs);

#pragma omp parallel if (parallel)
  {
    Scratch sc(dk, dvp, tiled, row);
    // Dynamic: causal tasks differ in cost. The last query blocks (the most
    // key blocks under a causal mask) are handed out first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t qb = nqb - 1 - t % nqb;
      const int64_t bh = t / nqb;
      runTask(pr, sc, bh / p.heads, bh % p.heads, qb);
    }
  }
}

//===----------------------------------------------------------------------===//
// The plan's attention kernels
//===----------------------------------------------------------------------===//

namespace {

/// An attention's relative position bias (T5): the [num_buckets, H] table.
void setRelativeBias(AttentionParams &p, const Tensor *table, bool bidirectional,
                     int64_t maxDistance) {
  if (!table)
    return;
  p.rel_bias = table->as<float>();
  p.rel_buckets = table->shape[0];
  p.rel_bidirectional = bidirectional;
  p.rel_max_distance = maxDistance;
}

} // namespace

namespace {

/// An attention whose k and v are [N, L, D] blocks that rows share (the
/// encoder memory of decode_step's cross-attentions, one copy per batch
/// item): row b reads its |keys| keys (at most nb * L) through |table|
/// ([B, nb]) in place. Every block index is checked here: the table is the
/// caller's.
Status pagedKeys(const Tensor &table, const Tensor &k, int64_t keys, AttentionParams &p) {
  const int64_t B = table.shape[0], nb = table.shape[1], N = k.shape[0], L = k.shape[1];
  const int64_t *t = table.as<int64_t>();
  for (int64_t i = 0; i < B * nb; ++i)
    if (t[i] < 0 || t[i] >= N)
      return Status::invalidArgument("attention block " + std::to_string(t[i]) +
                                     " is outside the " + std::to_string(N) + " key blocks");
  if (nb > 1 && !pagedBlockLenOk(L))
    return Status::unsupported("attention over " + std::to_string(nb) + " blocks of " +
                               std::to_string(L) +
                               " keys per row (a block length the kernel reads in place: a "
                               "power of two up to 64, or a multiple of 64)");
  thread_local std::vector<int64_t> lens;
  lens.assign(static_cast<size_t>(B), keys);
  p.kv_len = keys;
  p.key_tokens_batch_stride = keys;
  p.kv_lens = lens.data();
  p.kv_blocks = t;
  p.kv_blocks_stride = nb;
  p.kv_block_len = L;
  return Status();
}

} // namespace

Status run(const AttentionCall &c) {
  const Tensor &q = *c.q, &k = *c.k, &v = *c.v;
  Tensor &out = *c.out;
  const auto &a = c.attrs;
  AttentionParams p{};
  p.batch = q.shape[0];
  p.q_len = q.shape[1];
  p.kv_len = k.shape[1];
  p.heads = a.num_heads;
  p.kv_heads = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
  p.window = a.window;
  p.softcap = (float)a.softcap;
  p.head_dim = q.shape[2] / p.heads;
  p.v_head_dim = v.shape[2] / p.kv_heads;
  p.q_row_stride = q.shape[2];
  p.k_row_stride = k.shape[2];
  p.v_row_stride = v.shape[2];
  p.out_row_stride = out.shape[2];
  p.scale = (float)a.scale;
  p.mask = a.mask_kind;
  p.mask_value = (float)a.mask_value;
  p.pad_id = a.pad_id;
  if (c.key_tokens)
    p.key_tokens = c.key_tokens->as<int64_t>();
  if (c.mask) {
    // The additive mask broadcasts to [B, H, Sq, Sk].
    const AdditiveMaskStrides st = additiveMaskStrides(*c.mask);
    p.additive = c.mask->as<float>();
    p.add_stride_q = st.q;
    p.add_stride_h = st.h;
    p.add_stride_b = st.b;
  }
  setRelativeBias(p, c.bias_table, a.bidirectional, a.max_distance);
  // bf16 q/k/v are widened once (the kernel's arithmetic is f32 either way).
  thread_local std::vector<float> qb, kb, vb, ob;
  if (c.block_table)
    TFC_RETURN_IF_ERROR(pagedKeys(*c.block_table, k,
                                  c.key_tokens ? c.key_tokens->shape[1]
                                               : c.block_table->shape[1] * k.shape[1],
                                  p));
  attention(p, asF32(q, qb), asF32(k, kb), asF32(v, vb), outF32(out, ob));
  finishOut(out, ob);
  return Status();
}

Status run(const CachedAttentionCall &c) {
  // q/k/v: [B, T, D] new tokens; row b's are at positions pos[b] .. pos[b]+T-1
  // (pos: one for all rows, or [B]). The caches are [N, L, D]: without a block
  // table row b is cache row b; with one ([B, nb] i64), row b's position p is
  // in cache row table[b][p / L] at p % L.
  const Tensor &q = *c.q, &k = *c.k, &v = *c.v, &kc = *c.k_cache, &vc = *c.v_cache;
  const int64_t B = q.shape[0], T = q.shape[1], L = kc.shape[1], N = kc.shape[0];
  const int64_t dk = k.shape[2], dv = v.shape[2];
  const int64_t *posv = c.pos->as<int64_t>();
  const bool perRowPos = c.pos->numel() > 1;
  const int64_t nb = c.block_table ? c.block_table->shape[1] : 1;
  const int64_t *table = c.block_table ? c.block_table->as<int64_t>() : nullptr;
  const int64_t capacity = L * nb;
  auto posOf = [&](int64_t b) { return posv[perRowPos ? b : 0]; };
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pos = posOf(b);
    if (pos < 0 || pos + T > capacity)
      return Status::invalidArgument("decode position " + std::to_string(pos + T) +
                                     " is beyond the KV cache's " + std::to_string(capacity) +
                                     " positions");
    if (table)
      for (int64_t j = 0, used = (pos + T + L - 1) / L; j < used; ++j)
        if (table[b * nb + j] < 0 || table[b * nb + j] >= N)
          return Status::invalidArgument("KV block " + std::to_string(table[b * nb + j]) +
                                         " is outside the cache's " + std::to_string(N) +
                                         " blocks");
  }
  if (!table && (kc.shape[0] < B || vc.shape[0] < B))
    return Status::invalidArgument("the KV cache holds fewer rows than the batch");
  float *kcache = kc.as<float>(), *vcache = vc.as<float>();
  // Where position p of batch row b lives in a cache of width w.
  auto at = [&](float *cache, int64_t w, int64_t b, int64_t p) {
    const int64_t row = table ? table[b * nb + p / L] : b;
    return cache + (row * L + p % L) * w;
  };
  // A folded-in rotary (tfc-fuse-rotary): each new key is rotated as it is
  // written to the cache, and each new query into the calling thread's |qRot|
  // (which the workers write through qRotated), one cos/sin per position.
  thread_local std::vector<float> qRot;
  const int64_t half = c.inv_freq ? c.inv_freq->shape[0] : 0;
  const int64_t hd = q.shape[2] / c.attrs.num_heads;
  if (c.inv_freq)
    qRot.resize(static_cast<size_t>(B * T * q.shape[2]));
  float *qRotated = c.inv_freq ? qRot.data() : nullptr;
  const float *qData = c.inv_freq ? qRotated : q.as<float>();
  const int64_t newRows = B * T;
#pragma omp parallel if (half > 0 && newRows * (q.shape[2] + dk) >= 65536)
  {
    std::vector<float> cs(static_cast<size_t>(2 * half));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < newRows; ++r) {
      const int64_t b = r / T, t = r % T;
      const float *kr = k.as<float>() + r * dk;
      float *kdst = at(kcache, dk, b, posOf(b) + t);
      if (half > 0) {
        rotaryAngles(posOf(b) + t, c.inv_freq->as<float>(), half, cs.data());
        rotateHeads(kr, kdst, dk / hd, hd, cs.data(), half, c.attrs.rotary_interleaved);
        rotateHeads(q.as<float>() + r * q.shape[2], qRotated + r * q.shape[2],
                    c.attrs.num_heads, hd, cs.data(), half, c.attrs.rotary_interleaved);
      } else {
        std::memcpy(kdst, kr, sizeof(float) * dk);
      }
      std::memcpy(at(vcache, dv, b, posOf(b) + t), v.as<float>() + r * dv, sizeof(float) * dv);
    }
  }
  AttentionParams p{};
  p.q_len = T;
  p.heads = c.attrs.num_heads;
  p.kv_heads = c.attrs.num_kv_heads > 0 ? c.attrs.num_kv_heads : c.attrs.num_heads;
  p.window = c.attrs.window;
  p.softcap = (float)c.attrs.softcap;
  p.head_dim = q.shape[2] / p.heads;
  p.v_head_dim = dv / p.kv_heads;
  p.q_row_stride = q.shape[2];
  p.k_row_stride = dk;
  p.v_row_stride = dv;
  p.out_row_stride = c.out->shape[2];
  p.scale = (float)c.attrs.scale;
  p.mask = TFC_MASK_CAUSAL;
  p.mask_value = -INFINITY;
  setRelativeBias(p, c.bias_table, c.attrs.bidirectional, c.attrs.max_distance);
  // Every row at one position, in its own cache row: one call over the batch
  // (a session's step).
  bool uniform = true;
  for (int64_t b = 1; uniform && perRowPos && b < B; ++b)
    uniform = posv[b] == posv[0];
  for (int64_t b = 0; uniform && table && b < B; ++b)
    uniform = table[b * nb] == b;
  if (uniform && (!table || posv[0] + T <= L)) {
    p.batch = B;
    p.kv_len = posv[0] + T;
    p.k_batch_stride = L * dk;
    p.v_batch_stride = L * dv;
    p.q_pos_offset = posv[0];
    attention(p, qData, kcache, vcache, c.out->as<float>());
    return Status();
  }
  // Rows at their own positions (the engine's rows): one call over the batch,
  // each row reading its keys in place through the block table (or its own
  // cache row), with its own key count. A relative position bias is expanded
  // per call, so rows with it take one call each; so do blocks the kernel
  // cannot page (pagedBlockLenOk), whose keys are gathered.
  std::vector<int64_t> lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    lens[b] = posOf(b) + T;
  std::vector<int64_t> rowOf;
  if (!table) {
    rowOf.resize(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b)
      rowOf[b] = b;
  }
  bool inPlace = true; // a block length the kernel pages, or rows within one block
  for (int64_t b = 0; inPlace && b < B && !pagedBlockLenOk(L); ++b)
    inPlace = lens[b] <= L;
  if (inPlace && !p.rel_bias) {
    p.batch = B;
    p.kv_lens = lens.data();
    p.kv_blocks = table ? table : rowOf.data();
    p.kv_blocks_stride = table ? nb : 1;
    p.kv_block_len = L;
    attention(p, qData, kcache, vcache, c.out->as<float>());
    return Status();
  }
  thread_local std::vector<float> kg, vg;
  p.batch = 1;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pos = posOf(b), n = pos + T;
    p.kv_len = n;
    p.q_pos_offset = pos;
    const float *kr = at(kcache, dk, b, 0), *vr = at(vcache, dv, b, 0);
    if (n > L) {
      kg.resize(static_cast<size_t>(n * dk));
      vg.resize(static_cast<size_t>(n * dv));
      for (int64_t j = 0; j < n; j += L) {
        const int64_t m = std::min(L, n - j);
        std::memcpy(kg.data() + j * dk, at(kcache, dk, b, j), sizeof(float) * m * dk);
        std::memcpy(vg.data() + j * dv, at(vcache, dv, b, j), sizeof(float) * m * dv);
      }
      kr = kg.data();
      vr = vg.data();
    }
    attention(p, qData + b * T * q.shape[2], kr, vr,
              c.out->as<float>() + b * T * c.out->shape[2]);
  }
  return Status();
}

} // namespace tfc::cpu
