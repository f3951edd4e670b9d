//===- attention_cuda.cu - Fused multi-head attention on CUDA -------------===//
//
// The kernel behind ATTENTION and CACHED_ATTENTION: per head,
// softmax(scale * Q K^T, masked) V with the heads merged, FlashAttention-style,
// with exactly the semantics of backends/cpu/attention_cpu.h (read its header
// for the edge cases: masked_fill replaces scores, a row whose scores are all
// -inf gives NaN, one whose keys are all masked with a finite fill gives the
// average of all values).
//
// Tiling. A block of 4 warps owns one (batch, head) and a tile of kBlockQ = 16
// query rows, 4 per warp. It streams the keys in tiles of kBlockK = 32 through
// shared memory: K converted to f32 in chunks of 64 of head_dim (rows padded
// by one float so that lane j reading key j hits distinct banks), then the V
// tile. Lane j of a warp computes the scores of key j against the warp's 4
// query rows (read from shared memory as broadcasts), applies the masks from
// their compact forms (key token ids, the causal rule, a strided additive
// tensor) and then runs the online softmax: running max m and sum l per row,
// with warp shuffles for the tile's max and sum, and the accumulator
// rescaled by exp(m_old - m_new). For P V, lane c owns output columns c,
// c + 32, ... (DVC of them, at most 8: 256 columns; wider values are split
// over blockIdx.z, each slice recomputing the scores). No [B, H, Sq, Sk]
// matrix exists anywhere; memory per block is O(tile).
//
// Masked tiles. A key tile that every query row of the block has masked
// (above the causal diagonal, or all padding) is skipped: each of its scores
// is mask_value, which adds exp(mask_value - m), zero in f32, once any real
// score exists. When that is not so (mask_value finite and a row with no
// unmasked key, or a fill close to the scores), the skipped tiles are
// processed afterwards with every score set to mask_value, as
// attention_cpu.cc does; the online softmax does not depend on the order of
// the tiles.
//
// Paged keys. With a block table (AttnArgs::table), k and v are blocks of L
// positions and row b's key j is at j % L of block table[b][j / L]: the
// engine's paged KV cache, and the blocks of encoder memory an item's rows
// share. Each key tile first looks up its 32 keys' rows (Tile::krow); the
// tiles still run over the row's logical positions, so the sums, and the
// results, do not depend on the block length.
//
// Arithmetic is f32 whatever the dtypes (f32, f16, bf16; each operand's own).
// The scores and P V run on the CUDA cores, not on tensor cores: see
// docs/backend-cuda.md for why and what comes next.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_device.cuh"
#include "tfc/relative_bucket.h"

#include <cmath>

namespace tfc::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kThreadsPerBlock = kWarps * 32;
constexpr int kBlockQ = kWarps * kRowsPerWarp;
constexpr int kBlockK = 32; // one key per lane
constexpr int kChunkD = 64; // head_dim columns of Q and K staged at a time
// The elements of a K (and Q) chunk each thread stages. Each thread loads all
// of its elements into registers first, then stores them to shared memory, so
// that its loads are in flight together: one loop that loaded and stored each
// element in turn waited out the memory latency 16 times per tile, which made
// a decoding step's attention (one query, 5 key tiles) take as long as a
// 127-token prefill on an H100 (93 us a layer at Llama-3.2-1B's shape).
constexpr int kKPerThread = kBlockK * kChunkD / kThreadsPerBlock;
constexpr int kQPerThread = kBlockQ * kChunkD / kThreadsPerBlock;
static_assert(kBlockK * kChunkD % kThreadsPerBlock == 0 &&
                  kBlockQ * kChunkD % kThreadsPerBlock == 0 &&
                  kBlockK * 32 % kThreadsPerBlock == 0,
              "tiles split evenly over the block's threads");
// exp(x) for x below this is below f32's resolution next to the row
// maximum's exp(0) = 1 (attention_cpu.cc's kExpCutoff).
constexpr float kExpCutoff = -87.0f;

template <int DVC> struct Tile {
  float q[kBlockQ][kChunkD];        // scaled Q, one head_dim chunk
  float k[kBlockK][kChunkD + 1];    // K chunk, padded rows
  float v[kBlockK][DVC * 32];       // the V tile's columns of this slice
  float p[kWarps][kRowsPerWarp][kBlockK]; // probabilities, per warp
  int64_t krow[kBlockK]; // a paged tile's keys: their rows of the [blocks * L] cache
};

/// What every thread knows of its block's (batch, head, query tile, value
/// slice), set up once by initBlock and read by the kernel's steps below.
struct BlockCtx {
  int tid, lane, warp;
  int64_t b, h, q0, d0v, dvSlice;
  int64_t kvLen, qOffset;
  bool paged; // keys through a block table (AttnArgs::table)
  bool keyPad, causal, additive;
  float mv;
  int64_t row0; // this warp's first query row
  bool warpActive;
  int nChunks;
  int64_t qBase, kBase, vBase, tokBase;
};

/// The online softmax of this warp's rows: running max m and sum l per row,
/// and this lane's output columns of each row.
template <int DVC> struct RowState {
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DVC];
};

/// The block's setup; false when the block has nothing to do (a cached
/// attention's position out of range).
template <int DVC>
__device__ __forceinline__ bool initBlock(const AttnArgs &a, BlockCtx &c) {
  c.tid = threadIdx.x;
  c.lane = c.tid & 31;
  c.warp = c.tid >> 5;
  c.b = blockIdx.x / a.heads;
  c.h = blockIdx.x % a.heads;
  c.q0 = static_cast<int64_t>(blockIdx.y) * kBlockQ;
  c.d0v = static_cast<int64_t>(blockIdx.z) * DVC * 32;
  c.dvSlice = min(static_cast<int64_t>(DVC * 32), a.dv - c.d0v);

  c.kvLen = a.kvLen;
  c.qOffset = a.qPosOffset;
  c.paged = a.table != nullptr;
  if (a.pos) {
    // Cached attention: the cache write checked pos and recorded any error.
    const long long p = loadId(a.pos, a.posType, a.posPerRow ? c.b : 0);
    if (p < 0 || p + a.qLen > a.cacheLen)
      return false;
    c.kvLen = p + a.qLen;
    c.qOffset = p;
  }
  if (c.paged) {
    // Every block the row reads must be in range. A cached attention's
    // cache write checked them and recorded any error; for rows that share
    // blocks of encoder memory the host zeroed the output, which a row with
    // a block out of range leaves as it is.
    const int64_t used = (c.kvLen + a.blockLen - 1) / a.blockLen;
    bool bad = false;
    for (int64_t i = c.tid; i < used; i += kThreadsPerBlock) {
      const int64_t blk = a.table[c.b * a.blocksPerRow + i];
      bad = bad || blk < 0 || blk >= a.numBlocks;
    }
    if (__syncthreads_or(bad))
      return false;
  }
  c.keyPad = a.mask == TFC_MASK_KEY_PADDING || a.mask == TFC_MASK_PADDING_CAUSAL;
  c.causal = a.mask == TFC_MASK_CAUSAL || a.mask == TFC_MASK_PADDING_CAUSAL;
  c.additive = a.mask == TFC_MASK_ADDITIVE;
  c.mv = a.maskValue;

  c.row0 = c.q0 + c.warp * kRowsPerWarp; // this warp's first query row
  c.warpActive = c.row0 < a.qLen;
  c.nChunks = static_cast<int>((a.dk + kChunkD - 1) / kChunkD);

  c.qBase = c.b * a.qBatch + c.h * a.dk;
  // Paged keys add their row of the [blocks * L] cache (sh.krow) to these.
  c.kBase = (c.paged ? 0 : c.b * a.kBatch) + c.h / a.group * a.dk;
  c.vBase = (c.paged ? 0 : c.b * a.vBatch) + c.h / a.group * a.dv + c.d0v;
  c.tokBase = c.b * a.tokensBatch;
  return true;
}

/// Stages kPer elements per thread of a tile into shared memory (kPerThread
/// above): all of the thread's loads first, in flight together, then its
/// stores. |load(idx)| reads element idx of the tile, |store(idx, v)| writes it.
template <int kPer, typename Load, typename Store>
__device__ __forceinline__ void stageTile(int tid, Load load, Store store) {
  float v[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u)
    v[u] = load(tid + u * kThreadsPerBlock);
#pragma unroll
  for (int u = 0; u < kPer; ++u)
    store(tid + u * kThreadsPerBlock, v[u]);
}

/// Q chunk ch, pre-multiplied by scale (as the CPU kernel does); zero past
/// q_len and head_dim.
template <int DVC>
__device__ __forceinline__ void loadQ(Tile<DVC> &sh, const AttnArgs &a, const BlockCtx &c,
                                      int ch) {
  stageTile<kQPerThread>(
      c.tid,
      [&](int idx) {
        const int64_t i = c.q0 + idx / kChunkD,
                      d = static_cast<int64_t>(ch) * kChunkD + idx % kChunkD;
        return i < a.qLen && d < a.dk ? a.scale * loadF(a.q, a.qType, c.qBase + i * a.qRow + d)
                                      : 0.0f;
      },
      [&](int idx, float v) { sh.q[idx / kChunkD][idx % kChunkD] = v; });
}

/// Key k0 + jj's row in k and v: its cache row of [blocks * L] when paged
/// (processTile filled sh.krow), else its row of c.b's keys.
template <int DVC>
__device__ __forceinline__ int64_t keyRow(const Tile<DVC> &sh, const BlockCtx &c, int64_t k0,
                                          int jj) {
  return c.paged ? sh.krow[jj] : k0 + jj;
}

/// Whether every query row of the block has every key of the tile masked.
/// Block-uniform; every thread must call it (it synchronizes).
__device__ __forceinline__ bool tileMasked(const AttnArgs &a, const BlockCtx &c, int64_t k0,
                                           int nk) {
  bool masked = c.causal && k0 > c.q0 + kBlockQ - 1 + c.qOffset;
  // Left of every row's sliding window (the first row's is the latest).
  masked = masked || (c.causal && a.window > 0 && k0 + nk - 1 <= c.q0 + c.qOffset - a.window);
  if (c.keyPad) {
    const bool mine =
        c.tid >= nk || loadId(a.tokens, a.tokensType, c.tokBase + k0 + c.tid) == a.padId;
    const int allPad = __syncthreads_and(mine);
    masked = masked || allPad;
  }
  return masked;
}

/// The scores of key k0 + lane against this warp's rows, masks applied (-inf
/// past the tile's nk keys). Every thread must call it (it synchronizes).
template <int DVC>
__device__ __forceinline__ void tileScores(Tile<DVC> &sh, const AttnArgs &a, const BlockCtx &c,
                                           int64_t k0, int nk, float (&s)[kRowsPerWarp]) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    s[r] = 0.0f;
  for (int ch = 0; ch < c.nChunks; ++ch) {
    if (ch > 0)
      __syncthreads();
    if (c.nChunks > 1)
      loadQ(sh, a, c, ch);
    stageTile<kKPerThread>(
        c.tid,
        [&](int idx) {
          const int jj = idx / kChunkD;
          const int64_t d = static_cast<int64_t>(ch) * kChunkD + idx % kChunkD;
          return jj < nk && d < a.dk
                     ? loadF(a.k, a.kType, c.kBase + keyRow(sh, c, k0, jj) * a.kRow + d)
                     : 0.0f;
        },
        [&](int idx, float v) { sh.k[idx / kChunkD][idx % kChunkD] = v; });
    __syncthreads();
    if (c.warpActive) {
      const int dn = static_cast<int>(min(static_cast<int64_t>(kChunkD),
                                          a.dk - static_cast<int64_t>(ch) * kChunkD));
      for (int dd = 0; dd < dn; ++dd) {
        const float kv = sh.k[c.lane][dd];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r)
          s[r] += sh.q[c.warp * kRowsPerWarp + r][dd] * kv;
      }
    }
  }
  const int64_t j = k0 + c.lane;
  const bool pad = c.keyPad && c.lane < nk &&
                   loadId(a.tokens, a.tokensType, c.tokBase + j) == a.padId;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = c.row0 + r;
    if (c.lane >= nk) {
      s[r] = -INFINITY; // not a key: weighs exactly 0
      continue;
    }
    if (a.softcap > 0.0f) // Gemma 2: before the masks and biases
      s[r] = a.softcap * tanhf(s[r] / a.softcap);
    if (c.additive && i < a.qLen)
      s[r] += loadF(a.add, a.addType, c.b * a.addB + c.h * a.addH + i * a.addQ + j);
    if (a.relBias)
      s[r] += a.relBias[tfc_relative_bucket(j - i - c.qOffset, a.relBidirectional,
                                            a.relBuckets, a.relMaxDistance) *
                            a.heads +
                        c.h];
    if (pad)
      s[r] = c.mv;
    if (c.causal && (j > i + c.qOffset || (a.window > 0 && j <= i + c.qOffset - a.window)))
      s[r] = c.mv;
  }
}

/// The online softmax over the tile's scores s, then P V into the
/// accumulator. The warp's lanes must all call it.
template <int DVC>
__device__ __forceinline__ void accumulateTile(Tile<DVC> &sh, const BlockCtx &c, int nk,
                                               const float (&s)[kRowsPerWarp],
                                               RowState<DVC> &st) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float mNew = fmaxf(st.m[r], warpMax(s[r]));
    // A row with no finite score so far subtracts 0 instead of -inf, so
    // that its terms stay exp(-inf) = 0 rather than NaN (attention_cpu.cc).
    const float mUse = mNew == -INFINITY ? 0.0f : mNew;
    const float alpha = expf(st.m[r] - mUse); // 0 while m = -inf
    const float p = expf(s[r] - mUse);
    st.l[r] = st.l[r] * alpha + warpSum(p);
    st.m[r] = mNew;
#pragma unroll
    for (int cc = 0; cc < DVC; ++cc)
      st.acc[r][cc] *= alpha;
    sh.p[c.warp][r][c.lane] = p;
  }
  __syncwarp();
  for (int jj = 0; jj < nk; ++jj) {
    float vv[DVC];
#pragma unroll
    for (int cc = 0; cc < DVC; ++cc)
      vv[cc] = sh.v[jj][c.lane + 32 * cc];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float pr = sh.p[c.warp][r][jj];
#pragma unroll
      for (int cc = 0; cc < DVC; ++cc)
        st.acc[r][cc] += pr * vv[cc];
    }
  }
  __syncwarp(); // sh.p is rewritten by the next tile
}

/// One key tile: scores (or all mask_value when forced), masks, online
/// softmax, P V. Every thread must call it.
template <int DVC>
__device__ __forceinline__ void processTile(Tile<DVC> &sh, const AttnArgs &a, const BlockCtx &c,
                                            RowState<DVC> &st, int64_t k0, bool forced) {
  const int nk = static_cast<int>(min(static_cast<int64_t>(kBlockK), c.kvLen - k0));
  float s[kRowsPerWarp];
  __syncthreads(); // the previous tile's readers of sh.k, sh.v and sh.krow are done
  if (c.paged) {
    // Where the tile's keys are: block table[b][j / L], position j % L.
    if (c.tid < nk) {
      const int64_t j = k0 + c.tid;
      sh.krow[c.tid] = a.table[c.b * a.blocksPerRow + j / a.blockLen] * a.blockLen +
                       j % a.blockLen;
    }
    __syncthreads();
  }
  if (!forced) {
    tileScores(sh, a, c, k0, nk, s);
  } else {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      s[r] = c.lane < nk ? c.mv : -INFINITY;
  }

  stageTile<kBlockK * DVC * 32 / kThreadsPerBlock>(
      c.tid,
      [&](int idx) {
        const int jj = idx / (DVC * 32), dd = idx % (DVC * 32);
        return jj < nk && dd < c.dvSlice
                   ? loadF(a.v, a.vType, c.vBase + keyRow(sh, c, k0, jj) * a.vRow + dd)
                   : 0.0f;
      },
      [&](int idx, float v) { sh.v[idx / (DVC * 32)][idx % (DVC * 32)] = v; });
  __syncthreads();
  if (!c.warpActive)
    return;
  accumulateTile(sh, c, nk, s, st);
}

/// The warp's rows of the output, normalized by l (NaN where l is 0).
template <int DVC>
__device__ __forceinline__ void storeRows(const AttnArgs &a, const BlockCtx &c,
                                          const RowState<DVC> &st) {
  const float nan = __int_as_float(0x7fc00000);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = c.row0 + r;
    if (i >= a.qLen)
      break;
    // l is 0 only when every score of the row is -inf: softmax gives NaN.
    const float inv = st.l[r] == 0.0f ? nan : 1.0f / st.l[r];
    const int64_t o = c.b * a.oBatch + i * a.oRow + c.h * a.dv + c.d0v;
#pragma unroll
    for (int cc = 0; cc < DVC; ++cc) {
      const int d = c.lane + 32 * cc;
      if (d < c.dvSlice)
        storeF(a.out, a.outType, o + d, st.l[r] == 0.0f ? nan : st.acc[r][cc] * inv);
    }
  }
}

template <int DVC>
__global__ void __launch_bounds__(kThreadsPerBlock) attentionKernel(AttnArgs a) {
  __shared__ Tile<DVC> sh;
  BlockCtx c;
  if (!initBlock<DVC>(a, c))
    return;

  RowState<DVC> st;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    st.m[r] = -INFINITY;
    st.l[r] = 0.0f;
#pragma unroll
    for (int cc = 0; cc < DVC; ++cc)
      st.acc[r][cc] = 0.0f;
  }

  if (c.nChunks == 1)
    loadQ(sh, a, c, 0); // visible after processTile's first barrier
  const int64_t nTiles = (c.kvLen + kBlockK - 1) / kBlockK;
  bool skipped = false;
  for (int64_t t = 0; t < nTiles; ++t) {
    const int64_t k0 = t * kBlockK;
    const int nk = static_cast<int>(min(static_cast<int64_t>(kBlockK), c.kvLen - k0));
    if (tileMasked(a, c, k0, nk)) {
      skipped = true;
      continue;
    }
    processTile(sh, a, c, st, k0, false);
  }
  if (skipped && c.mv > -INFINITY) {
    bool need = false;
    if (c.warpActive) {
      for (int r = 0; r < kRowsPerWarp; ++r)
        need = need || (c.row0 + r < a.qLen && !(c.mv - st.m[r] < kExpCutoff));
    }
    if (__syncthreads_or(need)) {
      for (int64_t t = 0; t < nTiles; ++t) {
        const int64_t k0 = t * kBlockK;
        const int nk = static_cast<int>(min(static_cast<int64_t>(kBlockK), c.kvLen - k0));
        if (tileMasked(a, c, k0, nk))
          processTile(sh, a, c, st, k0, true);
      }
    }
  }

  if (!c.warpActive)
    return;
  storeRows(a, c, st);
}

template <int DVC> Status launchWith(const AttnArgs &a, cudaStream_t s) {
  const int64_t slices = (a.dv + DVC * 32 - 1) / (DVC * 32);
  const int64_t qTiles = (a.qLen + kBlockQ - 1) / kBlockQ;
  const int64_t bh = a.batch * a.heads;
  if (bh > 0x7fffffff || qTiles > 65535 || slices > 65535)
    return Status::unsupported("attention too large for one CUDA grid (batch*heads " +
                               std::to_string(bh) + ", query tiles " + std::to_string(qTiles) +
                               ")");
  dim3 grid(static_cast<unsigned>(bh), static_cast<unsigned>(qTiles),
            static_cast<unsigned>(slices));
  attentionKernel<DVC><<<grid, kThreadsPerBlock, 0, s>>>(a);
  return cudaStatus(cudaGetLastError(), "attention kernel");
}

} // namespace

Status launchAttention(const AttnArgs &a, cudaStream_t s) {
  if (a.batch <= 0 || a.heads <= 0 || a.qLen <= 0 || a.dv <= 0)
    return Status::ok();
  // The value columns a lane keeps in registers: as few as the head needs.
  if (a.dv <= 32)
    return launchWith<1>(a, s);
  if (a.dv <= 64)
    return launchWith<2>(a, s);
  if (a.dv <= 128)
    return launchWith<4>(a, s);
  return launchWith<8>(a, s);
}

} // namespace tfc::cuda
