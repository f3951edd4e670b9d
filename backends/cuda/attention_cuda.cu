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
// exp(x) for x below this is below f32's resolution next to the row
// maximum's exp(0) = 1 (attention_cpu.cc's kExpCutoff).
constexpr float kExpCutoff = -87.0f;

enum MaskKind : int32_t { kNone = 0, kKeyPadding = 1, kCausal = 2, kPaddingCausal = 3, kAdditive = 4 };

template <int DVC> struct Tile {
  float q[kBlockQ][kChunkD];        // scaled Q, one head_dim chunk
  float k[kBlockK][kChunkD + 1];    // K chunk, padded rows
  float v[kBlockK][DVC * 32];       // the V tile's columns of this slice
  float p[kWarps][kRowsPerWarp][kBlockK]; // probabilities, per warp
};

template <int DVC>
__global__ void __launch_bounds__(kThreadsPerBlock) attentionKernel(AttnArgs a) {
  __shared__ Tile<DVC> sh;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t b = blockIdx.x / a.heads, h = blockIdx.x % a.heads;
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kBlockQ;
  const int64_t d0v = static_cast<int64_t>(blockIdx.z) * DVC * 32;
  const int64_t dvSlice = min(static_cast<int64_t>(DVC * 32), a.dv - d0v);

  int64_t kvLen = a.kvLen, qOffset = a.qPosOffset;
  if (a.pos) {
    // Cached attention: the cache write checked pos and recorded any error.
    const long long p = loadId(a.pos, a.posType, 0);
    if (p < 0 || p + a.qLen > a.cacheLen)
      return;
    kvLen = p + a.qLen;
    qOffset = p;
  }
  const bool keyPad = a.mask == kKeyPadding || a.mask == kPaddingCausal;
  const bool causal = a.mask == kCausal || a.mask == kPaddingCausal;
  const bool additive = a.mask == kAdditive;
  const float mv = a.maskValue;

  const int64_t row0 = q0 + warp * kRowsPerWarp; // this warp's first query row
  const bool warpActive = row0 < a.qLen;
  const int nChunks = static_cast<int>((a.dk + kChunkD - 1) / kChunkD);

  const int64_t qBase = b * a.qBatch + h * a.dk;
  const int64_t kBase = b * a.kBatch + h * a.dk;
  const int64_t vBase = b * a.vBatch + h * a.dv + d0v;
  const int64_t tokBase = b * a.tokensBatch;

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DVC];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < DVC; ++c)
      acc[r][c] = 0.0f;
  }

  // Q chunk c, pre-multiplied by scale (as the CPU kernel does); zero past
  // q_len and head_dim.
  auto loadQ = [&](int c) {
    for (int idx = tid; idx < kBlockQ * kChunkD; idx += kThreadsPerBlock) {
      const int rr = idx / kChunkD, dd = idx % kChunkD;
      const int64_t i = q0 + rr, d = static_cast<int64_t>(c) * kChunkD + dd;
      sh.q[rr][dd] = i < a.qLen && d < a.dk
                         ? a.scale * loadF(a.q, a.qType, qBase + i * a.qRow + d)
                         : 0.0f;
    }
  };

  // Whether every query row of the block has every key of the tile masked.
  // Block-uniform; every thread must call it (it synchronizes).
  auto tileMasked = [&](int64_t k0, int nk) -> bool {
    bool masked = causal && k0 > q0 + kBlockQ - 1 + qOffset;
    if (keyPad) {
      const bool mine =
          tid >= nk || loadId(a.tokens, a.tokensType, tokBase + k0 + tid) == a.padId;
      const int allPad = __syncthreads_and(mine);
      masked = masked || allPad;
    }
    return masked;
  };

  // One key tile: scores (or all mask_value when forced), masks, online
  // softmax, P V. Every thread must call it.
  auto processTile = [&](int64_t k0, bool forced) {
    const int nk = static_cast<int>(min(static_cast<int64_t>(kBlockK), kvLen - k0));
    float s[kRowsPerWarp];
    __syncthreads(); // the previous tile's readers of sh.k and sh.v are done
    if (!forced) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        s[r] = 0.0f;
      for (int c = 0; c < nChunks; ++c) {
        if (c > 0)
          __syncthreads();
        if (nChunks > 1)
          loadQ(c);
        for (int idx = tid; idx < kBlockK * kChunkD; idx += kThreadsPerBlock) {
          const int jj = idx / kChunkD, dd = idx % kChunkD;
          const int64_t d = static_cast<int64_t>(c) * kChunkD + dd;
          sh.k[jj][dd] = jj < nk && d < a.dk
                             ? loadF(a.k, a.kType, kBase + (k0 + jj) * a.kRow + d)
                             : 0.0f;
        }
        __syncthreads();
        if (warpActive) {
          const int dn = static_cast<int>(min(static_cast<int64_t>(kChunkD),
                                              a.dk - static_cast<int64_t>(c) * kChunkD));
          for (int dd = 0; dd < dn; ++dd) {
            const float kv = sh.k[lane][dd];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r)
              s[r] += sh.q[warp * kRowsPerWarp + r][dd] * kv;
          }
        }
      }
      const int64_t j = k0 + lane;
      const bool pad = keyPad && lane < nk &&
                       loadId(a.tokens, a.tokensType, tokBase + j) == a.padId;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t i = row0 + r;
        if (lane >= nk) {
          s[r] = -INFINITY; // not a key: weighs exactly 0
          continue;
        }
        if (additive && i < a.qLen)
          s[r] += loadF(a.add, a.addType, b * a.addB + h * a.addH + i * a.addQ + j);
        if (a.relBias)
          s[r] += a.relBias[tfc_relative_bucket(j - i - qOffset, a.relBidirectional,
                                                a.relBuckets, a.relMaxDistance) *
                                a.heads +
                            h];
        if (pad)
          s[r] = mv;
        if (causal && j > i + qOffset)
          s[r] = mv;
      }
    } else {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        s[r] = lane < nk ? mv : -INFINITY;
    }

    for (int idx = tid; idx < kBlockK * DVC * 32; idx += kThreadsPerBlock) {
      const int jj = idx / (DVC * 32), dd = idx % (DVC * 32);
      sh.v[jj][dd] =
          jj < nk && dd < dvSlice ? loadF(a.v, a.vType, vBase + (k0 + jj) * a.vRow + dd) : 0.0f;
    }
    __syncthreads();
    if (!warpActive)
      return;

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float mNew = fmaxf(m[r], warpMax(s[r]));
      // A row with no finite score so far subtracts 0 instead of -inf, so
      // that its terms stay exp(-inf) = 0 rather than NaN (attention_cpu.cc).
      const float mUse = mNew == -INFINITY ? 0.0f : mNew;
      const float alpha = expf(m[r] - mUse); // 0 while m = -inf
      const float p = expf(s[r] - mUse);
      l[r] = l[r] * alpha + warpSum(p);
      m[r] = mNew;
#pragma unroll
      for (int c = 0; c < DVC; ++c)
        acc[r][c] *= alpha;
      sh.p[warp][r][lane] = p;
    }
    __syncwarp();
    for (int jj = 0; jj < nk; ++jj) {
      float vv[DVC];
#pragma unroll
      for (int c = 0; c < DVC; ++c)
        vv[c] = sh.v[jj][lane + 32 * c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float pr = sh.p[warp][r][jj];
#pragma unroll
        for (int c = 0; c < DVC; ++c)
          acc[r][c] += pr * vv[c];
      }
    }
    __syncwarp(); // sh.p is rewritten by the next tile
  };

  if (nChunks == 1)
    loadQ(0); // visible after processTile's first barrier
  const int64_t nTiles = (kvLen + kBlockK - 1) / kBlockK;
  bool skipped = false;
  for (int64_t t = 0; t < nTiles; ++t) {
    const int64_t k0 = t * kBlockK;
    const int nk = static_cast<int>(min(static_cast<int64_t>(kBlockK), kvLen - k0));
    if (tileMasked(k0, nk)) {
      skipped = true;
      continue;
    }
    processTile(k0, false);
  }
  if (skipped && mv > -INFINITY) {
    bool need = false;
    if (warpActive) {
      for (int r = 0; r < kRowsPerWarp; ++r)
        need = need || (row0 + r < a.qLen && !(mv - m[r] < kExpCutoff));
    }
    if (__syncthreads_or(need)) {
      for (int64_t t = 0; t < nTiles; ++t) {
        const int64_t k0 = t * kBlockK;
        const int nk = static_cast<int>(min(static_cast<int64_t>(kBlockK), kvLen - k0));
        if (tileMasked(k0, nk))
          processTile(k0, true);
      }
    }
  }

  if (!warpActive)
    return;
  const float nan = __int_as_float(0x7fc00000);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = row0 + r;
    if (i >= a.qLen)
      break;
    // l is 0 only when every score of the row is -inf: softmax gives NaN.
    const float inv = l[r] == 0.0f ? nan : 1.0f / l[r];
    const int64_t o = b * a.oBatch + i * a.oRow + h * a.dv + d0v;
#pragma unroll
    for (int c = 0; c < DVC; ++c) {
      const int d = lane + 32 * c;
      if (d < dvSlice)
        storeF(a.out, a.outType, o + d, l[r] == 0.0f ? nan : acc[r][c] * inv);
    }
  }
}

template <int DVC> std::string launchWith(const AttnArgs &a, cudaStream_t s) {
  const int64_t slices = (a.dv + DVC * 32 - 1) / (DVC * 32);
  const int64_t qTiles = (a.qLen + kBlockQ - 1) / kBlockQ;
  const int64_t bh = a.batch * a.heads;
  if (bh > 0x7fffffff || qTiles > 65535 || slices > 65535)
    return "attention too large for one CUDA grid (batch*heads " + std::to_string(bh) +
           ", query tiles " + std::to_string(qTiles) + ")";
  dim3 grid(static_cast<unsigned>(bh), static_cast<unsigned>(qTiles),
            static_cast<unsigned>(slices));
  attentionKernel<DVC><<<grid, kThreadsPerBlock, 0, s>>>(a);
  return cudaMessage(cudaGetLastError(), "attention kernel");
}

} // namespace

std::string launchAttention(const AttnArgs &a, cudaStream_t s) {
  if (a.batch <= 0 || a.heads <= 0 || a.qLen <= 0 || a.dv <= 0)
    return "";
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
