//===- attention_impl.h - private: the CPU attention's tiles and helpers --===//
//
// Shared by attention_cpu.cc (the entry point and the tiled path) and
// attention_row.cc (the row path): the vector type and its helpers, the tile
// sizes, the per-thread scratch and the problem description. See
// attention_cpu.cc for the algorithm.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_ATTENTION_IMPL_H
#define TFC_BACKENDS_CPU_ATTENTION_IMPL_H

#include "backends/cpu/attention_cpu.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

namespace tfc::cpu::attention_detail {


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
/// is needed. exp(0) is exactly 1. A NaN lane is returned as it came (the
/// clamps below would turn it into exp(-87) or exp(88), and an attention score
/// of NaN would then weigh nothing instead of making the row NaN; issue 21).
TFC_INLINE VF vexp(VF x) {
  const VF in = x;
  const VI nan = x != x;
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
  y = nan ? in : y;
  return under ? vsplat(0.0f) : y;
}

/// c * tanh(x / c), Gemma 2's soft-capping of attention scores, as
/// c - 2c / (exp(2x / c) + 1): within a few f32 ulps of c of the exact value
/// (its absolute error, not its relative one, is what the softmax sees); +-c
/// at +-inf, NaN for NaN.
TFC_INLINE VF vsoftcap(VF x, float c) {
  return vsplat(c) - vsplat(2.0f * c) / (vexp(x * vsplat(2.0f / c)) + vsplat(1.0f));
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

/// Everything a task needs besides its indices.
struct Problem {
  const AttentionParams &p;
  const float *q, *k, *v;
  float *out;
  int64_t dk, dv, dvp;
  // The batch strides of q, k, v, out and key_tokens, defaults resolved.
  int64_t qbs, kbs, vbs, obs, tbs;
  bool keyPad, causal, additive;
  int64_t group; ///< query heads per key/value head

  /// Head h of query row i (key row j, output row i) of batch b.
  const float *qRow(int64_t b, int64_t i, int64_t h) const {
    return q + b * qbs + i * p.q_row_stride + h * dk;
  }
  /// Key (value) row j of batch b: rows j .. the end of j's key block
  /// follow at k_row_stride (v_row_stride), paged or not.
  /// Query head h reads key/value head h / group (grouped-query attention).
  const float *kRow(int64_t b, int64_t j, int64_t h) const {
    return k + keyRow(b, j) * p.k_row_stride + (p.kv_blocks ? 0 : b * kbs) + h / group * dk;
  }
  const float *vRow(int64_t b, int64_t j, int64_t h) const {
    return v + keyRow(b, j) * p.v_row_stride + (p.kv_blocks ? 0 : b * vbs) + h / group * dv;
  }
  /// The row of k (and v) that holds key j of batch b: j itself in batch b's
  /// rows, or where the block table puts it.
  int64_t keyRow(int64_t b, int64_t j) const {
    if (!p.kv_blocks)
      return j;
    const int64_t L = p.kv_block_len;
    return p.kv_blocks[b * p.kv_blocks_stride + j / L] * L + j % L;
  }
  /// Batch b's keys, and the position of its query row 0.
  int64_t kvLen(int64_t b) const { return p.kv_lens ? p.kv_lens[b] : p.kv_len; }
  int64_t qOffset(int64_t b) const {
    return p.kv_lens ? p.kv_lens[b] - p.q_len : p.q_pos_offset;
  }
  /// Keys per key block: kBlockK, or a paged cache's shorter blocks.
  int64_t keyBlock() const {
    return p.kv_blocks && p.kv_block_len < kBlockK ? p.kv_block_len : kBlockK;
  }
  float *outRow(int64_t b, int64_t i, int64_t h) const {
    return out + b * obs + i * p.out_row_stride + h * dv;
  }
  /// The token id of key j of batch b, and those after it.
  const int64_t *tokens(int64_t b, int64_t j) const { return p.key_tokens + b * tbs + j; }
};

/// Whether key block [k0, k0 + nk) is masked for every query row of
/// [q0, q0 + nq): above the causal diagonal, or all padding.
inline bool blockAllMasked(const Problem &pr, int64_t b, int64_t q0, int64_t nq, int64_t k0,
                    int64_t nk) {
  if (pr.causal && k0 > q0 + nq - 1 + pr.qOffset(b))
    return true;
  // Left of the sliding window of every row: the first row's is the latest.
  if (pr.causal && pr.p.window > 0 && k0 + nk - 1 <= q0 + pr.qOffset(b) - pr.p.window)
    return true;
  if (pr.keyPad) {
    const int64_t *tok = pr.tokens(b, k0);
    return std::all_of(tok, tok + nk, [&](int64_t t) { return t == pr.p.pad_id; });
  }
  return false;
}

/// Query row i of batch b, head h, on the row path (attention_row.cc).
void rowTask(const Problem &pr, Scratch &sc, int64_t b, int64_t h, int64_t i);

} // namespace tfc::cpu::attention_detail

#endif // TFC_BACKENDS_CPU_ATTENTION_IMPL_H
