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

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

namespace tfc::cpu {
namespace {

#if defined(__AVX512F__)
constexpr int kVec = 16;
#elif defined(__AVX__)
constexpr int kVec = 8;
#else
constexpr int kVec = 4;
#endif

typedef float VF __attribute__((vector_size(kVec * sizeof(float))));
typedef int32_t VI __attribute__((vector_size(kVec * sizeof(int32_t))));

#define TFC_INLINE inline __attribute__((always_inline))

// Query lanes per task: kQVecs vectors (64 query rows with AVX-512).
constexpr int kQVecs = 4;
constexpr int64_t kBlockQ = kQVecs * kVec;
// Keys per block. A task's working set (Qt, the St block, the packed V block
// and the accumulator, 16 KB each at head_dim 64; K is read in place) stays
// in L2, and the register tiles below reuse every loaded vector 4 times.
constexpr int64_t kBlockK = 64;
// Register tiles. Scores: kKeyRows keys x up to kQVecs query vectors
// (16 accumulators with AVX-512, which has 32 registers; 8 with 16
// registers). P V: kRows query rows x kDVecs value vectors.
constexpr int kKeyRows = kVec == 16 ? 4 : 2;
constexpr int kRows = 4;
constexpr int kDVecs = kVec == 16 ? 4 : 2;
static_assert(kBlockQ % kRows == 0 && kBlockK % kKeyRows == 0, "tiles");
// Query blocks of at most this many rows take the row path (see the top of
// the file). The tiled path's cost per block hardly depends on its row count
// below kVec rows, while the row path's grows with it. Measured at head_dim 64,
// kv_len 128 and 512: with AVX-512 the row path takes 0.3x the tiled path's
// time for 1 row, 0.9x for 3, 1.1x for 4; with AVX2, 0.3x for 1 row, 0.65x
// for 2, 0.9-1.2x for 3. SSE (4 lanes) is a guess.
constexpr int64_t kRowPathMaxQ = kVec == 16 ? 3 : kVec / 4;
static_assert(kBlockK % kVec == 0, "row path: whole vectors of keys per block");
// Below this many multiply-adds a call runs on the calling thread (see
// attention()): about 7 us of work on the row path with AVX-512, against
// 1-4 us measured for starting and joining an OpenMP region on 2 busy cores.
constexpr double kParallelMinMacs = 1 << 17;

constexpr float kInf = std::numeric_limits<float>::infinity();
// vexp() returns exactly 0 below this. exp(-87) ~ 1.6e-38 is far below f32
// resolution relative to the row maximum's own term exp(0) = 1, so a key whose
// score is this far below the running maximum contributes nothing.
constexpr float kExpCutoff = -87.0f;

TFC_INLINE VF vload(const float *p) {
  VF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
TFC_INLINE void vstore(float *p, VF v) { std::memcpy(p, &v, sizeof v); }
// x - 0 is x for every x (x + 0 is not: -0 + 0 = +0), so the compiler folds
// the subtraction and this is a single broadcast.
TFC_INLINE VF vsplat(float x) { return x - VF{}; }
TFC_INLINE VF vmax(VF a, VF b) { return a > b ? a : b; }

/// Keeps a loaded vector in a register. Without this, GCC folds the load of a
/// tile operand into each of the FMAs that use it (one load per use instead of
/// one per tile), which makes the tiles load-bound: measured 10-15% slower at
/// head_dim 64. The empty asm only claims to modify the register; it emits
/// nothing.
TFC_INLINE void pinInRegister(VF &v) {
#if defined(__GNUC__) && defined(__AVX512F__)
  asm("" : "+v"(v));
#elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  asm("" : "+x"(v));
#else
  (void)v;
#endif
}

/// exp(x) to about 1 ulp for x in [-87, 88], exactly 0 below -87 (including
/// -inf), NaN for NaN. Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree
/// 5 polynomial for e^r, and 2^n built in the exponent bits. n is rounded with
/// the 1.5 * 2^23 trick so that no float-to-int conversion (undefined for NaN)
/// is needed. exp(0) is exactly 1.
TFC_INLINE VF vexp(VF x) {
  const VI under = x < vsplat(kExpCutoff);
  x = vmax(x, vsplat(kExpCutoff));
  x = x < vsplat(88.0f) ? x : vsplat(88.0f);
  const VF magic = vsplat(12582912.0f); // 1.5 * 2^23
  const VF t = x * vsplat(1.44269504088896341f) + magic;
  const VF n = t - magic;
  const VI ni = (VI)t - (VI)magic;
  VF r = x - n * vsplat(0.693359375f);
  r = r - n * vsplat(-2.12194440e-4f);
  VF y = vsplat(1.9875691500e-4f);
  y = y * r + vsplat(1.3981999507e-3f);
  y = y * r + vsplat(8.3334519073e-3f);
  y = y * r + vsplat(4.1665795894e-2f);
  y = y * r + vsplat(1.6666665459e-1f);
  y = y * r + vsplat(5.0000001201e-1f);
  y = y * (r * r) + r + vsplat(1.0f);
  y = y * (VF)((ni + 127) << 23);
  return under ? vsplat(0.0f) : y;
}

/// Per-thread buffers, allocated once per call and reused by all the thread's
/// tasks. They are not initialized: every task writes what it reads. The
/// tiled path's buffers exist only if some query block takes it, so a
/// decoding step does not pay for a 64-row tile, not even to allocate it.
struct Scratch {
  std::unique_ptr<float[]> storage;
  // Tiled path.
  float *qt = nullptr;    // [dk][kBlockQ]      scaled Q^T, zero in unused lanes
  float *st = nullptr;    // [kBlockK][kBlockQ] scores, then probabilities, transposed
  float *v = nullptr;     // [kBlockK][dvp]     the block's V rows, zero-padded
  float *acc = nullptr;   // [kBlockQ][dvp]     exp-weighted sums of V rows
  float *m = nullptr, *l = nullptr; // [kBlockQ] running max and sum per query row
  float *alpha = nullptr; // [kBlockQ]          this block's rescale factor per query row
  // Row path.
  float *rq = nullptr;    // [dkp]     the scaled query row, zero-padded
  float *rs = nullptr;    // [kBlockK] scores, then probabilities, of one key block
  float *racc = nullptr;  // [dvp]     exp-weighted sum of V rows

  Scratch(int64_t dk, int64_t dvp, bool tiled, bool row) {
    const int64_t dkp = (dk + kVec - 1) / kVec * kVec;
    const int64_t sizes[] = {
        tiled ? dk * kBlockQ : 0, tiled ? kBlockK * kBlockQ : 0, tiled ? kBlockK * dvp : 0,
        tiled ? kBlockQ * dvp : 0, tiled ? kBlockQ : 0, tiled ? kBlockQ : 0,
        tiled ? kBlockQ : 0, row ? dkp : 0, row ? kBlockK : 0, row ? dvp : 0};
    constexpr int kSlots = sizeof sizes / sizeof sizes[0];
    int64_t total = 0;
    for (int64_t n : sizes)
      total += (n + 15) / 16 * 16;
    storage.reset(new float[total + 16]);
    // 64-byte aligned start; every buffer size is a multiple of 16 floats.
    float *p = storage.get();
    p += (16 - (reinterpret_cast<uintptr_t>(p) / sizeof(float)) % 16) % 16;
    float **slots[] = {&qt, &st, &v, &acc, &m, &l, &alpha, &rq, &rs, &racc};
    static_assert(sizeof slots / sizeof slots[0] == kSlots, "one slot per size");
    for (int i = 0; i < kSlots; ++i) {
      if (sizes[i] > 0)
        *slots[i] = p;
      p += (sizes[i] + 15) / 16 * 16;
    }
  }
};

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

/// Everything a task needs besides its indices.
struct Problem {
  const AttentionParams &p;
  const float *q, *k, *v;
  float *out;
  int64_t dk, dv, dvp;
  // The batch strides of q, k, v, out and key_tokens, defaults resolved.
  int64_t qbs, kbs, vbs, obs, tbs;
  bool keyPad, causal, additive;

  /// Head h of query row i (key row j, output row i) of batch b.
  const float *qRow(int64_t b, int64_t i, int64_t h) const {
    return q + b * qbs + i * p.q_row_stride + h * dk;
  }
  const float *kRow(int64_t b, int64_t j, int64_t h) const {
    return k + b * kbs + j * p.k_row_stride + h * dk;
  }
  const float *vRow(int64_t b, int64_t j, int64_t h) const {
    return v + b * vbs + j * p.v_row_stride + h * dv;
  }
  float *outRow(int64_t b, int64_t i, int64_t h) const {
    return out + b * obs + i * p.out_row_stride + h * dv;
  }
  /// The token id of key j of batch b, and those after it.
  const int64_t *tokens(int64_t b, int64_t j) const { return p.key_tokens + b * tbs + j; }
};

/// Whether key block [k0, k0 + nk) is masked for every query row of
/// [q0, q0 + nq): above the causal diagonal, or all padding.
bool blockAllMasked(const Problem &pr, int64_t b, int64_t q0, int64_t nq, int64_t k0,
                    int64_t nk) {
  if (pr.causal && k0 > q0 + nq - 1 + pr.p.q_pos_offset)
    return true;
  if (pr.keyPad) {
    const int64_t *tok = pr.tokens(b, k0);
    return std::all_of(tok, tok + nk, [&](int64_t t) { return t == pr.p.pad_id; });
  }
  return false;
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
        const int64_t n = std::min(k0 + j - q0 - p.q_pos_offset, lanes);
        if (n > 0)
          std::fill(st + j * kBlockQ, st + j * kBlockQ + n, mv);
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
      const int64_t first = std::max<int64_t>(0, i + p.q_pos_offset + 1 - k0);
      if (first < nk)
        std::fill(s + first, s + nk, mv);
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

  const int64_t nkb = (p.kv_len + kBlockK - 1) / kBlockK;
  bool skipped = false;
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t k0 = kb * kBlockK, nk = std::min(kBlockK, p.kv_len - k0);
    if (blockAllMasked(pr, b, i, 1, k0, nk)) {
      skipped = true;
      continue;
    }
    rowBlock(pr, sc, b, h, i, k0, nk, /*forced=*/false, m, l);
  }
  if (skipped && p.mask_value > -kInf && !(p.mask_value - m < kExpCutoff)) {
    for (int64_t kb = 0; kb < nkb; ++kb) {
      const int64_t k0 = kb * kBlockK, nk = std::min(kBlockK, p.kv_len - k0);
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
  const int64_t nkb = (p.kv_len + kBlockK - 1) / kBlockK;
  bool skipped = false;
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t k0 = kb * kBlockK, nk = std::min(kBlockK, p.kv_len - k0);
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
      const int64_t k0 = kb * kBlockK, nk = std::min(kBlockK, p.kv_len - k0);
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

void attention(const AttentionParams &p, const float *q, const float *k, const float *v,
               float *out) {
  const int64_t dk = p.head_dim;
  const int64_t dv = p.v_head_dim > 0 ? p.v_head_dim : p.head_dim;
  if (p.batch <= 0 || p.q_len <= 0 || p.heads <= 0 || dv <= 0)
    return;
  const int64_t obs = p.out_batch_stride != 0 ? p.out_batch_stride : p.q_len * p.out_row_stride;
  if (p.kv_len <= 0) {
    // Softmax over no keys, times an empty V: PyTorch's matmul gives zeros.
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t r = 0; r < p.q_len; ++r) {
        float *row = out + b * obs + r * p.out_row_stride;
        std::fill(row, row + p.heads * dv, 0.0f);
      }
    return;
  }
  const bool keyPad = p.mask == MaskKind::KeyPadding || p.mask == MaskKind::PaddingCausal;
  const bool causal = p.mask == MaskKind::Causal || p.mask == MaskKind::PaddingCausal;
  const bool additive = p.mask == MaskKind::Additive;
  assert(!keyPad || p.key_tokens);
  assert(!additive || p.additive);

  const int64_t dvp = (dv + kVec - 1) / kVec * kVec;
  // Batch strides: 0 means the batches follow each other.
  const int64_t qbs = p.q_batch_stride != 0 ? p.q_batch_stride : p.q_len * p.q_row_stride;
  const int64_t kbs = p.k_batch_stride != 0 ? p.k_batch_stride : p.kv_len * p.k_row_stride;
  const int64_t vbs = p.v_batch_stride != 0 ? p.v_batch_stride : p.kv_len * p.v_row_stride;
  const int64_t tbs = p.key_tokens_batch_stride != 0 ? p.key_tokens_batch_stride : p.kv_len;
  const Problem pr{p, q, k, v, out, dk, dv, dvp, qbs, kbs, vbs, obs, tbs, keyPad, causal, additive};
  const int64_t nqb = (p.q_len + kBlockQ - 1) / kBlockQ;
  const int64_t tasks = p.batch * p.heads * nqb;
  // Which paths the blocks take: all but the last block have kBlockQ rows.
  const bool tiled = std::min(p.q_len, kBlockQ) > kRowPathMaxQ;
  const bool row = p.q_len - (nqb - 1) * kBlockQ <= kRowPathMaxQ;
  // Waking the other threads costs microseconds: a call with less work than
  // that (a decoding step over a short cache) runs on the calling thread.
  // The threshold counts multiply-adds, as if every query row took the row
  // path.
  const double macs = static_cast<double>(p.batch) * p.heads * p.q_len * p.kv_len * (dk + dv);
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

} // namespace tfc::cpu
