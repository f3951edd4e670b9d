//===- attention_cpu.cc - Fused multi-head attention on the CPU -----------===//
//
// FlashAttention-style fused attention in f32. Work is split into tasks of one
// (batch, head, block of kBlockQ query rows); each task streams the key/value
// rows in blocks of kBlockK and keeps, per query row, the running maximum m,
// the running sum l of exp(s - m) and an accumulator of the exp-weighted value
// rows, rescaling l and the accumulator whenever m grows (the online softmax).
// So memory is O(block) per thread whatever the sequence length, and the
// [B, H, Sq, Sk] score matrix never exists.
//
// Inner loops use GCC/Clang vector extensions (not intrinsics): the width is
// picked from the target (16 floats with AVX-512, 8 with AVX, 4 otherwise) and
// the compiler maps the operations onto whatever the target has. They are used
// rather than plain loops because the register tiles (4 query rows x 64 keys
// for Q K^T, 4 rows x 64 value columns for P V) must stay in registers across
// the reduction loop, which the auto-vectorizer does not guarantee, and because
// exp() must vectorize without -ffast-math.
//
// Each task runs on one thread in a fixed order, so the result is bitwise
// independent of the thread count and of OpenMP's scheduling.
//
//===----------------------------------------------------------------------===//

#include "backends/cpu/attention_cpu.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

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

// Block sizes. A task's working set (packed Q and K^T blocks, the score block,
// the packed V block and the accumulator) is about 80 KB at head_dim 64: it
// lives in L2, and the register tiles below reuse each loaded row 4 times.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;
// Register tiles: kRows query rows times kColVecs (Q K^T) or kDVecs (P V)
// vectors. 4x4 fills half of AVX-512's 32 registers; narrower targets have 16.
constexpr int kRows = 4;
constexpr int kColVecs = kVec == 16 ? 4 : 2;
constexpr int kDVecs = kVec == 16 ? 4 : 2;
static_assert(kBlockQ % kRows == 0 && kBlockK % (kColVecs * kVec) == 0, "tiles");

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
TFC_INLINE VI viload(const int32_t *p) {
  VI v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
TFC_INLINE VF vsplat(float x) { return VF{} + x; }
TFC_INLINE VF vmax(VF a, VF b) { return a > b ? a : b; }
TFC_INLINE float hmax(VF v) {
  float m = v[0];
  for (int i = 1; i < kVec; ++i)
    m = std::max(m, v[i]);
  return m;
}
// Lane order is fixed, so the sum is deterministic.
TFC_INLINE float hsum(VF v) {
  float s = v[0];
  for (int i = 1; i < kVec; ++i)
    s += v[i];
  return s;
}

/// exp(x) to about 1 ulp for x in [-87, 88], exactly 0 below -87 (including
/// -inf), NaN for NaN. Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a degree
/// 5 polynomial for e^r, and 2^n built in the exponent bits. n is rounded with
/// the 1.5 * 2^23 trick so that no float-to-int conversion (undefined for NaN)
/// is needed.
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
/// The same function on one value, so that the rescale factors round exactly
/// like the probabilities (see the skipped-block argument in runTask).
TFC_INLINE float sexp(float x) { return vexp(vsplat(x))[0]; }

/// Per-thread buffers, allocated once per call and reused by all the thread's
/// tasks. Rows are padded to whole vectors (dkp, dvp) with zeros so that no
/// loop needs a scalar tail.
struct Scratch {
  std::vector<float> storage;
  float *q, *kt, *v, *s, *acc, *m, *l, *alpha;
  std::vector<int32_t> padMask; // per key of the block: -1 if padding

  Scratch(int64_t dkp, int64_t dvp) : padMask(kBlockK) {
    const int64_t sizes[] = {kBlockQ * dkp, dkp * kBlockK, kBlockK * dvp, kBlockQ * kBlockK,
                             kBlockQ * dvp, kBlockQ,       kBlockQ,       kBlockQ};
    int64_t total = 0;
    for (int64_t n : sizes)
      total += (n + 15) / 16 * 16;
    storage.assign(total + 16, 0.0f);
    // 64-byte aligned start; every buffer size is a multiple of 16 floats.
    float *p = storage.data();
    p += (16 - (reinterpret_cast<uintptr_t>(p) / sizeof(float)) % 16) % 16;
    float **slots[] = {&q, &kt, &v, &s, &acc, &m, &l, &alpha};
    for (int i = 0; i < 8; ++i) {
      *slots[i] = p;
      p += (sizes[i] + 15) / 16 * 16;
    }
  }
};

/// S[r][j] = sum_d Q[r][d] * Kt[d][j] for r < rows (a multiple of kRows) and
/// all kBlockK columns. Q is [rows][dkp], Kt is [dk][kBlockK].
void scoresBlock(const float *Q, int64_t dkp, int64_t dk, const float *Kt, float *S,
                 int64_t rows) {
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const float *qr = Q + r0 * dkp;
    for (int64_t c0 = 0; c0 < kBlockK; c0 += kColVecs * kVec) {
      VF acc[kRows][kColVecs];
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
        for (int c = 0; c < kColVecs; ++c)
          acc[r][c] = VF{};
      for (int64_t d = 0; d < dk; ++d) {
        const float *kt = Kt + d * kBlockK + c0;
        VF kv[kColVecs];
#pragma GCC unroll 16
        for (int c = 0; c < kColVecs; ++c)
          kv[c] = vload(kt + c * kVec);
#pragma GCC unroll 16
        for (int r = 0; r < kRows; ++r) {
          const VF a = vsplat(qr[r * dkp + d]);
#pragma GCC unroll 16
          for (int c = 0; c < kColVecs; ++c)
            acc[r][c] += a * kv[c];
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
        for (int c = 0; c < kColVecs; ++c)
          vstore(S + (r0 + r) * kBlockK + c0 + c * kVec, acc[r][c]);
    }
  }
}

/// acc[r][d0 : d0 + N*kVec] = alpha[r] * acc[r][...] + sum_{j < nk} P[r][j] V[j][...]
/// for the kRows rows starting at P, acc, alpha.
template <int N>
TFC_INLINE void pvTile(const float *P, const float *V, int64_t dvp, int64_t nk, float *acc,
                       const float *alpha, int64_t d0) {
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
    for (int c = 0; c < N; ++c)
      vv[c] = vload(V + j * dvp + d0 + c * kVec);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const VF pr = vsplat(P[r * kBlockK + j]);
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

/// acc = alpha * acc + P V over rows < rows (a multiple of kRows). P is
/// [rows][kBlockK] (first nk columns used), V is [nk][dvp].
void pvBlock(const float *P, const float *V, int64_t dvp, int64_t nk, float *acc,
             const float *alpha, int64_t rows) {
  const int64_t nv = dvp / kVec;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const float *pr = P + r0 * kBlockK;
    float *ar = acc + r0 * dvp;
    const float *al = alpha + r0;
    int64_t c = 0;
    for (; c + kDVecs <= nv; c += kDVecs)
      pvTile<kDVecs>(pr, V, dvp, nk, ar, al, c * kVec);
    switch (nv - c) {
    case 0:
      break;
    case 1:
      pvTile<1>(pr, V, dvp, nk, ar, al, c * kVec);
      break;
    case 2:
      if constexpr (kDVecs > 2)
        pvTile<2>(pr, V, dvp, nk, ar, al, c * kVec);
      break;
    default:
      if constexpr (kDVecs > 3)
        pvTile<3>(pr, V, dvp, nk, ar, al, c * kVec);
      break;
    }
  }
}

/// Everything a task needs besides its indices.
struct Problem {
  const AttentionParams &p;
  const float *q, *k, *v;
  float *out;
  int64_t dk, dv, dkp, dvp;
  bool keyPad, causal, additive;
};

/// How a key block relates to a query block.
enum class BlockKind { Clean, Partial, AllMasked };

/// Classifies key block [k0, k0 + nk) for query rows [q0, q0 + nq) of batch b;
/// for Partial blocks of a padding mask it fills sc.padMask.
BlockKind classify(const Problem &pr, Scratch &sc, int64_t b, int64_t q0, int64_t nq,
                   int64_t k0, int64_t nk, bool *hasPad) {
  *hasPad = false;
  if (pr.causal && k0 > q0 + nq - 1)
    return BlockKind::AllMasked;
  bool partial = pr.causal && k0 + nk - 1 > q0;
  if (pr.keyPad) {
    const int64_t *tok = pr.p.key_tokens + b * pr.p.kv_len + k0;
    int64_t pads = 0;
    for (int64_t j = 0; j < nk; ++j) {
      const bool isPad = tok[j] == pr.p.pad_id;
      sc.padMask[j] = isPad ? -1 : 0;
      pads += isPad;
    }
    if (pads == nk)
      return BlockKind::AllMasked;
    if (pads) {
      *hasPad = true;
      partial = true;
    }
  }
  return partial ? BlockKind::Partial : BlockKind::Clean;
}

/// One key block of one task: scores, masks, online-softmax update, P V. With
/// `forced` every score of the block is mask_value (the block is entirely
/// masked and was skipped in the main pass), so K is not even read.
void processBlock(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t q0, int64_t nq,
                  int64_t rows, int64_t k0, int64_t nk, bool forced, bool hasPad) {
  const AttentionParams &p = pr.p;
  const float mv = p.mask_value;

  // Pack V [nk][dvp]: contiguous rows with zero padding, so P V needs no tail.
  for (int64_t j = 0; j < nk; ++j) {
    const float *src = pr.v + (b * p.kv_len + k0 + j) * p.v_row_stride + h * pr.dv;
    float *dst = sc.v + j * pr.dvp;
    std::memcpy(dst, src, pr.dv * sizeof(float));
    std::fill(dst + pr.dv, dst + pr.dvp, 0.0f);
  }

  if (!forced) {
    // Pack K^T [dk][kBlockK], zero in the columns past nk, so that the score
    // tile's inner loop runs over contiguous keys.
    for (int64_t j = 0; j < nk; ++j) {
      const float *src = pr.k + (b * p.kv_len + k0 + j) * p.k_row_stride + h * pr.dk;
      for (int64_t d = 0; d < pr.dk; ++d)
        sc.kt[d * kBlockK + j] = src[d];
    }
    if (nk < kBlockK)
      for (int64_t d = 0; d < pr.dk; ++d)
        std::fill(sc.kt + d * kBlockK + nk, sc.kt + (d + 1) * kBlockK, 0.0f);
    scoresBlock(sc.q, pr.dkp, pr.dk, sc.kt, sc.s, rows);
  }

  const float *addBase =
      pr.additive ? p.additive + b * p.add_stride_b + h * p.add_stride_h : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    float *s = sc.s + r * kBlockK;
    if (r >= nq) {
      // Padding rows of the last query block: keep them finite and inert.
      std::fill(s, s + kBlockK, 0.0f);
      sc.alpha[r] = 1.0f;
      continue;
    }
    const int64_t i = q0 + r;
    if (forced) {
      std::fill(s, s + nk, mv);
    } else {
      if (addBase) {
        const float *a = addBase + i * p.add_stride_q + k0;
        for (int64_t j = 0; j < nk; ++j)
          s[j] += a[j];
      }
      if (hasPad) {
        const VF fill = vsplat(mv);
        for (int64_t j = 0; j < kBlockK; j += kVec)
          vstore(s + j, viload(sc.padMask.data() + j) ? fill : vload(s + j));
      }
      if (pr.causal)
        for (int64_t j = std::max<int64_t>(i - k0 + 1, 0); j < nk; ++j)
          s[j] = mv;
    }
    std::fill(s + nk, s + kBlockK, -kInf);

    // Online softmax update of row r.
    VF mx = vload(s);
    for (int64_t j = kVec; j < kBlockK; j += kVec)
      mx = vmax(mx, vload(s + j));
    const float mOld = sc.m[r];
    const float mNew = std::max(mOld, hmax(mx));
    if (mNew == -kInf) {
      // Every score so far is -inf: nothing to add yet (exp(-inf - -inf)
      // would be NaN); the row stays at l = 0 and ends as NaN if it never
      // sees a finite score, as PyTorch's softmax does.
      std::fill(s, s + kBlockK, 0.0f);
      sc.alpha[r] = 1.0f;
      continue;
    }
    const float alpha = sexp(mOld - mNew); // 0 when mOld = -inf
    const VF mn = vsplat(mNew);
    VF sum{};
    for (int64_t j = 0; j < kBlockK; j += kVec) {
      const VF e = vexp(vload(s + j) - mn);
      vstore(s + j, e);
      sum += e;
    }
    sc.l[r] = sc.l[r] * alpha + hsum(sum);
    sc.m[r] = mNew;
    sc.alpha[r] = alpha;
  }

  pvBlock(sc.s, sc.v, pr.dvp, nk, sc.acc, sc.alpha, rows);
}

void runTask(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t qb) {
  const AttentionParams &p = pr.p;
  const int64_t q0 = qb * kBlockQ;
  const int64_t nq = std::min(kBlockQ, p.q_len - q0);
  const int64_t rows = (nq + kRows - 1) / kRows * kRows;

  // Pack the query block, pre-multiplied by scale (one multiply per element
  // instead of one per score).
  for (int64_t r = 0; r < rows; ++r) {
    float *dst = sc.q + r * pr.dkp;
    int64_t d = 0;
    if (r < nq) {
      const float *src = pr.q + (b * p.q_len + q0 + r) * p.q_row_stride + h * pr.dk;
      for (; d < pr.dk; ++d)
        dst[d] = p.scale * src[d];
    }
    std::fill(dst + d, dst + pr.dkp, 0.0f);
  }
  std::fill(sc.acc, sc.acc + rows * pr.dvp, 0.0f);
  std::fill(sc.m, sc.m + rows, -kInf);
  std::fill(sc.l, sc.l + rows, 0.0f);

  // Main pass over the key blocks that hold at least one unmasked key for this
  // query block. Entirely masked blocks (above the causal diagonal, or all
  // padding) are skipped: each of their scores is mask_value, so they add
  // exp(mask_value - m) per key, which vexp() makes exactly 0 (and the rescale
  // exactly 1) whenever mask_value - m < kExpCutoff.
  const int64_t nkb = (p.kv_len + kBlockK - 1) / kBlockK;
  bool skipped = false;
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t k0 = kb * kBlockK, nk = std::min(kBlockK, p.kv_len - k0);
    bool hasPad;
    const BlockKind kind = classify(pr, sc, b, q0, nq, k0, nk, &hasPad);
    if (kind == BlockKind::AllMasked) {
      skipped = true;
      continue;
    }
    processBlock(pr, sc, b, h, q0, nq, rows, k0, nk, /*forced=*/false, hasPad);
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
      bool hasPad;
      if (classify(pr, sc, b, q0, nq, k0, nk, &hasPad) == BlockKind::AllMasked)
        processBlock(pr, sc, b, h, q0, nq, rows, k0, nk, /*forced=*/true, false);
    }
  }

  for (int64_t r = 0; r < nq; ++r) {
    float *dst = pr.out + (b * p.q_len + q0 + r) * p.out_row_stride + h * pr.dv;
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
  if (p.kv_len <= 0) {
    // Softmax over no keys, times an empty V: PyTorch's matmul gives zeros.
    for (int64_t r = 0; r < p.batch * p.q_len; ++r)
      std::fill(out + r * p.out_row_stride, out + r * p.out_row_stride + p.heads * dv, 0.0f);
    return;
  }
  const bool keyPad = p.mask == MaskKind::KeyPadding || p.mask == MaskKind::PaddingCausal;
  const bool causal = p.mask == MaskKind::Causal || p.mask == MaskKind::PaddingCausal;
  const bool additive = p.mask == MaskKind::Additive;
  assert(!keyPad || p.key_tokens);
  assert(!additive || p.additive);

  const Problem pr{p,  q,
                   k,  v,
                   out, dk,
                   dv, (dk + kVec - 1) / kVec * kVec,
                   (dv + kVec - 1) / kVec * kVec,
                   keyPad, causal,
                   additive};
  const int64_t nqb = (p.q_len + kBlockQ - 1) / kBlockQ;
  const int64_t tasks = p.batch * p.heads * nqb;

#pragma omp parallel if (tasks > 1)
  {
    Scratch sc(pr.dkp, pr.dvp);
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
