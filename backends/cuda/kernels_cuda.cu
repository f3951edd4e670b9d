//===- kernels_cuda.cu - the CUDA backend's non-GEMM, non-attention kernels ===//
//
// Straightforward, correct kernels for every primitive op and for the fused
// layer norm and token embedding, launched by kernels_cuda.cc:
// - one elementwise kernel for all broadcasting ops, casts and copies
//   (transpose, slice, views), driven by an op code and run-time dtypes;
// - reductions and softmax around one axis: a warp (reductions) or a block
//   (softmax) per row when the axis is the last one, otherwise a thread per
//   column, so that reads stay coalesced;
// - layer norm, a block per row, statistics accumulated in double as in
//   layer_norm_cpu.cc (a large mean over a small spread keeps its digits);
// - embedding rows, the KV-cache write, the linear epilogue (when cuBLASLt's
//   cannot be used), weight conversion, positions and the no-peek mask.
// Arithmetic is f32 for floats and double for integers, as in kernels_cpu.cc.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_device.cuh"
#include "tfc/relative_bucket.h"

#include <algorithm>
#include <cmath>

namespace tfc::cuda {
namespace {

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements.
unsigned gridFor(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1)
    b = 1;
  return static_cast<unsigned>(b < (1 << 20) ? b : (1 << 20));
}

Status launched(const char *what) { return cudaStatus(cudaGetLastError(), what); }

/// Each operand's element offset for output element e.
__device__ __forceinline__ void offsets(const Broadcast &bc, int nin, int64_t e, int64_t *off) {
  if (bc.rank <= 1) {
    for (int k = 0; k < 3; ++k)
      off[k] = k < nin ? e * bc.stride[k][0] : 0;
    return;
  }
  off[0] = off[1] = off[2] = 0;
  int64_t rem = e;
  for (int d = bc.rank - 1; d >= 0; --d) {
    const int64_t idx = rem % bc.shape[d];
    rem /= bc.shape[d];
    for (int k = 0; k < 3; ++k)
      if (k < nin)
        off[k] += idx * bc.stride[k][d];
  }
}

__device__ __forceinline__ int elementSize(uint32_t dtype) {
  switch (dtype) {
  case TFC_DTYPE_BOOL:
  case TFC_DTYPE_I8:
    return 1;
  case TFC_DTYPE_F16:
  case TFC_DTYPE_BF16:
    return 2;
  case TFC_DTYPE_I64:
    return 8;
  default:
    return 4;
  }
}

__device__ __forceinline__ void copyElement(void *dst, int64_t di, const void *src, int64_t si,
                                            uint32_t dtype) {
  switch (elementSize(dtype)) {
  case 1:
    static_cast<unsigned char *>(dst)[di] = static_cast<const unsigned char *>(src)[si];
    break;
  case 2:
    static_cast<unsigned short *>(dst)[di] = static_cast<const unsigned short *>(src)[si];
    break;
  case 4:
    static_cast<unsigned *>(dst)[di] = static_cast<const unsigned *>(src)[si];
    break;
  default:
    static_cast<unsigned long long *>(dst)[di] =
        static_cast<const unsigned long long *>(src)[si];
    break;
  }
}

/// The elementwise float kernels of tfc/unary.def, with the CPU's formulas.
__device__ __forceinline__ float unary(uint32_t kernel, int32_t mode, float x) {
  switch (kernel) {
#define TFC_UNARY(ENUM, EXPR)                                                              \
  case TFC_KERNEL_##ENUM:                                                                  \
    return (EXPR);
#include "tfc/unary.def"
#undef TFC_UNARY
  default:
    return x;
  }
}

__global__ void elementwiseKernel(EwArgs a) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < a.n;
       e += step) {
    int64_t off[3];
    offsets(a.bc, a.nin, e, off);
    switch (a.op) {
    case EwOp::Add:
    case EwOp::Sub:
    case EwOp::Mul:
    case EwOp::Div:
      if (isFloatType(a.inType[0])) {
        const float x = loadF(a.in[0], a.inType[0], off[0]);
        const float y = loadF(a.in[1], a.inType[1], off[1]);
        const float r = a.op == EwOp::Add ? x + y
                        : a.op == EwOp::Sub ? x - y
                        : a.op == EwOp::Mul ? x * y
                                            : x / y;
        storeF(a.out, a.outType, e, r);
      } else {
        const double x = loadD(a.in[0], a.inType[0], off[0]);
        const double y = loadD(a.in[1], a.inType[1], off[1]);
        const double r = a.op == EwOp::Add ? x + y
                         : a.op == EwOp::Sub ? x - y
                         : a.op == EwOp::Mul ? x * y
                                             : x / y;
        storeD(a.out, a.outType, e, r);
      }
      break;
    case EwOp::And:
      static_cast<unsigned char *>(a.out)[e] =
          static_cast<const unsigned char *>(a.in[0])[off[0]] &&
          static_cast<const unsigned char *>(a.in[1])[off[1]];
      break;
    case EwOp::Not:
      static_cast<unsigned char *>(a.out)[e] = !static_cast<const unsigned char *>(a.in[0])[off[0]];
      break;
    case EwOp::Compare: {
      const double x = loadD(a.in[0], a.inType[0], off[0]);
      const double y = loadD(a.in[1], a.inType[1], off[1]);
      const bool r = a.pred == 0   ? x == y
                     : a.pred == 1 ? x != y
                     : a.pred == 2 ? x < y
                     : a.pred == 3 ? x <= y
                     : a.pred == 4 ? x > y
                                   : x >= y;
      static_cast<unsigned char *>(a.out)[e] = r;
      break;
    }
    case EwOp::Cast:
      storeD(a.out, a.outType, e, loadD(a.in[0], a.inType[0], off[0]));
      break;
    case EwOp::MaskedFill:
      if (static_cast<const unsigned char *>(a.in[1])[off[1]])
        storeF(a.out, a.outType, e, a.value);
      else if (a.inType[0] == a.outType)
        copyElement(a.out, e, a.in[0], off[0], a.outType);
      else
        storeF(a.out, a.outType, e, loadF(a.in[0], a.inType[0], off[0]));
      break;
    case EwOp::Select: {
      const int k = static_cast<const unsigned char *>(a.in[0])[off[0]] ? 1 : 2;
      if (a.inType[k] == a.outType)
        copyElement(a.out, e, a.in[k], off[k], a.outType);
      else
        storeD(a.out, a.outType, e, loadD(a.in[k], a.inType[k], off[k]));
      break;
    }
    case EwOp::Unary:
      storeF(a.out, a.outType, e, unary(a.kernel, a.pred, loadF(a.in[0], a.inType[0], off[0])));
      break;
    case EwOp::Copy:
      copyElement(a.out, e, a.in[0], off[0], a.outType);
      break;
    }
  }
}

// --- Reductions and softmax around an axis ----------------------------------

/// inner == 1: one warp per row of len elements.
__global__ void reduceRowsKernel(AxisArgs a, bool mean) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= a.outer)
    return;
  float acc = 0.0f;
  for (int64_t l = lane; l < a.len; l += 32)
    acc += loadF(a.x, a.xType, row * a.len + l);
  acc = warpSum(acc);
  if (lane == 0)
    storeF(a.y, a.yType, row, mean ? acc / static_cast<float>(a.len) : acc);
}

/// inner > 1: one thread per (outer, inner) column; neighbours read neighbours.
__global__ void reduceColsKernel(AxisArgs a, bool mean) {
  const int64_t n = a.outer * a.inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < n;
       c += step) {
    const int64_t o = c / a.inner, i = c % a.inner;
    float acc = 0.0f;
    for (int64_t l = 0; l < a.len; ++l)
      acc += loadF(a.x, a.xType, (o * a.len + l) * a.inner + i);
    storeF(a.y, a.yType, c, mean ? acc / static_cast<float>(a.len) : acc);
  }
}

/// inner == 1: one block per row. Three passes (max, sum, write) over a row
/// that stays in L1/L2 between them.
__global__ void softmaxRowsKernel(AxisArgs a, bool logp) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * a.len;
  float mx = -INFINITY;
  for (int64_t l = threadIdx.x; l < a.len; l += blockDim.x)
    mx = fmaxf(mx, loadF(a.x, a.xType, base + l));
  mx = blockMax(mx, red);
  float sum = 0.0f;
  for (int64_t l = threadIdx.x; l < a.len; l += blockDim.x)
    sum += expf(loadF(a.x, a.xType, base + l) - mx);
  sum = blockSum(sum, red);
  const float logSum = logf(sum);
  for (int64_t l = threadIdx.x; l < a.len; l += blockDim.x) {
    const float d = loadF(a.x, a.xType, base + l) - mx;
    storeF(a.y, a.yType, base + l, logp ? d - logSum : expf(d) / sum);
  }
}

/// inner > 1: one thread per column.
__global__ void softmaxColsKernel(AxisArgs a, bool logp) {
  const int64_t n = a.outer * a.inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < n;
       c += step) {
    const int64_t base = (c / a.inner) * a.len * a.inner + c % a.inner;
    float mx = -INFINITY;
    for (int64_t l = 0; l < a.len; ++l)
      mx = fmaxf(mx, loadF(a.x, a.xType, base + l * a.inner));
    float sum = 0.0f;
    for (int64_t l = 0; l < a.len; ++l)
      sum += expf(loadF(a.x, a.xType, base + l * a.inner) - mx);
    const float logSum = logf(sum);
    for (int64_t l = 0; l < a.len; ++l) {
      const float d = loadF(a.x, a.xType, base + l * a.inner) - mx;
      storeF(a.y, a.yType, base + l * a.inner, logp ? d - logSum : expf(d) / sum);
    }
  }
}

// --- Layer norm ----------------------------------------------------------------

/// One block per row: the mean, then the centred sum of squares (two passes,
/// both in double), then the affine output, as layer_norm_cpu.cc.
__global__ void layerNormKernel(NormArgs a) {
  __shared__ double red[32];
  const int64_t row = blockIdx.x;
  const int64_t base = row * a.dim;
  double sum = 0.0;
  if (a.variant != 2) // rms_norm does not center: its mean is 0
    for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x)
      sum += loadF(a.x, a.xType, base + j);
  const double mean = blockSum(sum, red) / static_cast<double>(a.dim);
  double ss = 0.0;
  for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) {
    const double c = static_cast<double>(loadF(a.x, a.xType, base + j)) - mean;
    ss += c * c;
  }
  ss = blockSum(ss, red);
  double inv;
  if (a.variant != 1) { // layer_norm and rms_norm
    inv = 1.0 / sqrt(ss / static_cast<double>(a.dim) + static_cast<double>(a.eps));
  } else {
    // Unbiased: a one-element row divides 0 by 0 (NaN), like torch.std.
    const double sd = a.dim > 1 ? sqrt(ss / static_cast<double>(a.dim - 1))
                              : __longlong_as_double(0x7ff8000000000000LL);
    inv = 1.0 / (sd + static_cast<double>(a.eps));
  }
  const float invf = static_cast<float>(inv);
  for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) {
    const float n = static_cast<float>(static_cast<double>(loadF(a.x, a.xType, base + j)) - mean) *
                    invf;
    const float g = a.gamma ? loadF(a.gamma, a.gammaType, j) : 1.0f;
    const float b = a.beta ? loadF(a.beta, a.betaType, j) : 0.0f;
    storeF(a.y, a.yType, base + j, n * g + b);
  }
}

/// out[0, h, i, j] = table[bucket(j - i), h], one thread per element.
__global__ void relativeBiasKernel(const float *table, int64_t buckets, int64_t heads,
                                   float *out, int64_t sq, int64_t sk, int bidirectional,
                                   int64_t maxDistance) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= heads * sq * sk)
    return;
  const int64_t j = e % sk, i = (e / sk) % sq, h = e / (sk * sq);
  out[e] = table[tfc_relative_bucket(j - i, bidirectional, buckets, maxDistance) * heads + h];
}

// --- Embeddings, KV cache, epilogue, conversions ---------------------------------

/// One block per token row: table[id] * scale (+ type_table[type_id])
/// (+ positions[p]), the CPU's order of additions.
__global__ void embeddingKernel(EmbedArgs a, DeviceError *err) {
  const int64_t r = blockIdx.x;
  const long long id = loadId(a.ids, a.idsType, r);
  if (id < 0 || id >= a.vocab) {
    if (threadIdx.x == 0)
      recordError(err, kErrTokenId, id, a.vocab);
    return;
  }
  long long typeId = 0;
  if (a.typeTable) {
    typeId = loadId(a.typeIds, a.typeIdsType, r);
    if (typeId < 0 || typeId >= a.typeVocab) {
      if (threadIdx.x == 0)
        recordError(err, kErrTokenId, typeId, a.typeVocab);
      return;
    }
  }
  long long p = 0;
  if (a.pos) {
    long long offset = a.offset ? loadId(a.offset, a.offsetType, a.offsetPerRow ? r / a.seq : 0)
                                : 0;
    if (offset < 0) {
      if (threadIdx.x == 0)
        recordError(err, kErrNegativeOffset, offset, 0);
      return;
    }
    p = a.axis == 0 ? r / a.seq : r % a.seq + offset;
    if (p >= a.posRows) {
      if (threadIdx.x == 0)
        recordError(err, kErrPosition, p, a.posRows);
      return;
    }
  }
  const float s = a.rowScales && a.group == 0 ? a.scale * a.rowScales[id] : a.scale;
  const float *groupScales =
      a.rowScales && a.group > 0 ? a.rowScales + id * ((a.dim + a.group - 1) / a.group) : nullptr;
  for (int64_t k = threadIdx.x; k < a.dim; k += blockDim.x) {
    float v = loadF(a.table, a.tableType, id * a.dim + k) *
              (groupScales ? a.scale * groupScales[k / a.group] : s);
    if (a.typeTable)
      v += loadF(a.typeTable, a.typeTableType, typeId * a.dim + k);
    if (a.pos)
      v += loadF(a.pos, a.posType, p * a.dim + k);
    storeF(a.out, a.outType, r * a.dim + k, v);
  }
}

/// One block per token row r = b * seq + s: every head's rotated pairs, then
/// the features that do not rotate. cos and sin in double, rounded to f32 (as
/// the CPU does). Each thread reads what it writes, so out may alias x.
__global__ void rotaryKernel(RotaryArgs a, DeviceError *err) {
  const int64_t r = blockIdx.x, b = r / a.seq;
  const long long offset = a.offset ? a.offset[a.offsetPerRow ? b : 0] : 0;
  if (offset < 0) {
    if (threadIdx.x == 0)
      recordError(err, kErrNegativeOffset, offset, 0);
    return;
  }
  const float pos = static_cast<float>(r % a.seq + offset);
  const int64_t width = a.heads * a.headDim, pairs = a.heads * a.half;
  const int64_t base = r * width;
  for (int64_t e = threadIdx.x; e < pairs; e += blockDim.x) {
    const int64_t h = e / a.half, k = e % a.half;
    const float angle = pos * a.invFreq[k];
    const float co = static_cast<float>(cos(static_cast<double>(angle)));
    const float si = static_cast<float>(sin(static_cast<double>(angle)));
    const int64_t ia = base + h * a.headDim + (a.interleaved ? 2 * k : k);
    const int64_t ib = base + h * a.headDim + (a.interleaved ? 2 * k + 1 : k + a.half);
    const float xa = loadF(a.x, a.xType, ia), xb = loadF(a.x, a.xType, ib);
    storeF(a.out, a.outType, ia, xa * co - xb * si);
    storeF(a.out, a.outType, ib, xb * co + xa * si);
  }
  const int64_t rest = a.headDim - 2 * a.half;
  for (int64_t e = threadIdx.x; e < a.heads * rest; e += blockDim.x) {
    const int64_t i = base + (e / rest) * a.headDim + 2 * a.half + e % rest;
    storeF(a.out, a.outType, i, loadF(a.x, a.xType, i));
  }
}

/// One row of blocks per new row (b, t) (blockIdx.x), its features spread over
/// blockIdx.y: k and v into the caches at position pos + t of row b (in its
/// block table's block (pos + t) / len, where it has one). A decoding step has
/// one new row, so spreading its features over blocks is what keeps the
/// rotary's sines and cosines (double precision) from running on one SM: on an
/// H100, one block of 128 threads took 44 us a layer at Llama-3.2-1B's shape.
__global__ void cacheWriteKernel(CacheWriteArgs a, DeviceError *err) {
  const int64_t b = blockIdx.x / a.steps, t = blockIdx.x % a.steps;
  const long long pos = loadId(a.pos, a.posType, a.posPerRow ? b : 0);
  const int64_t rowLen = a.table ? a.blocksPerRow * a.len : a.len;
  const bool recorder = t == 0 && blockIdx.y == 0; // records the row's errors
  if (pos < 0 || pos + a.steps > rowLen) {
    if (recorder && threadIdx.x == 0)
      recordError(err, kErrDecodePosition, pos + a.steps, rowLen);
    return;
  }
  if (a.table && recorder) // every block the row's attention reads, as the CPU checks them
    for (int64_t i = threadIdx.x; i < (pos + a.steps + a.len - 1) / a.len; i += blockDim.x) {
      const int64_t blk = a.table[b * a.blocksPerRow + i];
      if (blk < 0 || blk >= a.cacheRows)
        recordError(err, kErrKvBlock, blk, a.cacheRows);
    }
  const int64_t p = pos + t;
  const int64_t row = a.table ? a.table[b * a.blocksPerRow + p / a.len] : b;
  if (row < 0 || row >= a.cacheRows)
    return; // recorded above
  const int64_t src = b * a.steps + t, dst = row * a.len + (a.table ? p % a.len : p);
  const int64_t d0 = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  if (a.invFreq) {
    // Rotary: feature d of a head pairs with d +- half (or its odd/even
    // neighbour); cos and sin in double, rounded to f32, as rotaryKernel.
    const float fp = static_cast<float>(p);
    auto rotated = [&](const void *x, uint32_t xType, int64_t base, int64_t d) {
      const int64_t f = d % a.headDim;
      const float xd = loadF(x, xType, base + d);
      if (f >= 2 * a.half)
        return xd;
      const bool first = a.interleaved ? f % 2 == 0 : f < a.half;
      const int64_t k = a.interleaved ? f / 2 : (first ? f : f - a.half);
      const int64_t partner =
          a.interleaved ? (first ? d + 1 : d - 1) : (first ? d + a.half : d - a.half);
      const float angle = fp * a.invFreq[k];
      const float co = static_cast<float>(cos(static_cast<double>(angle)));
      const float si = static_cast<float>(sin(static_cast<double>(angle)));
      const float xp = loadF(x, xType, base + partner);
      return first ? xd * co - xp * si : xd * co + xp * si;
    };
    for (int64_t d = d0; d < a.dk; d += stride)
      storeF(a.kc, a.kcType, dst * a.dk + d, rotated(a.k, a.kType, src * a.dk, d));
    for (int64_t d = d0; d < a.qWidth; d += stride)
      a.qOut[src * a.qWidth + d] = rotated(a.q, a.qType, src * a.qWidth, d);
  } else {
    for (int64_t d = d0; d < a.dk; d += stride)
      storeF(a.kc, a.kcType, dst * a.dk + d, loadF(a.k, a.kType, src * a.dk + d));
  }
  for (int64_t d = d0; d < a.dv; d += stride)
    storeF(a.vc, a.vcType, dst * a.dv + d, loadF(a.v, a.vType, src * a.dv + d));
}

__global__ void linearEpilogueKernel(EpilogueArgs a) {
  const int64_t n = a.rows * a.n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step) {
    float v = loadF(a.acc, a.accType, e);
    if (a.bias)
      v += loadF(a.bias, a.biasType, e % a.n);
    if (a.actKernel >= 0)
      v = unary(static_cast<uint32_t>(a.actKernel), a.actMode, v);
    if (a.mul)
      v *= loadF(a.mul, a.mulType, e);
    if (a.res)
      v += loadF(a.res, a.resType, e);
    storeF(a.out, a.outType, e, v);
  }
}

__global__ void convertKernel(const float *src, void *dst, uint32_t dtype, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    storeF(dst, dtype, i, src[i]);
}

__global__ void iotaKernel(void *out, uint32_t dtype, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    storeD(out, dtype, i, static_cast<double>(i));
}

// RoBERTa's positions: one thread per row, a running count of real tokens.
__global__ void paddedPositionsKernel(const void *ids, uint32_t idType, int64_t *out,
                                      int64_t rows, int64_t seq, int64_t pad) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= rows)
    return;
  int64_t count = 0;
  for (int64_t i = 0; i < seq; ++i) {
    const int64_t id = static_cast<int64_t>(loadD(ids, idType, b * seq + i));
    out[b * seq + i] = id != pad ? pad + ++count : pad;
  }
}

__global__ void nopeakKernel(unsigned char *out, int64_t seq) {
  const int64_t n = seq * seq;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += step)
    out[e] = e % seq <= e / seq;
}

} // namespace

Status launchElementwise(const EwArgs &a, cudaStream_t s) {
  if (a.n <= 0)
    return Status::ok();
  elementwiseKernel<<<gridFor(a.n), kThreads, 0, s>>>(a);
  return launched("elementwise kernel");
}

Status launchReduce(const AxisArgs &a, bool mean, cudaStream_t s) {
  if (a.outer * a.inner <= 0)
    return Status::ok();
  if (a.inner == 1) {
    const int64_t warps = kThreads / 32;
    const int64_t blocks = (a.outer + warps - 1) / warps;
    if (blocks > 0x7fffffff)
      return Status::unsupported("reduction over too many rows for one CUDA grid");
    reduceRowsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(a, mean);
  } else {
    reduceColsKernel<<<gridFor(a.outer * a.inner), kThreads, 0, s>>>(a, mean);
  }
  return launched("reduce kernel");
}

Status launchSoftmax(const AxisArgs &a, bool log, cudaStream_t s) {
  if (a.outer * a.inner <= 0 || a.len <= 0)
    return Status::ok();
  if (a.inner == 1) {
    if (a.outer > 0x7fffffff)
      return Status::unsupported("softmax over too many rows for one CUDA grid");
    softmaxRowsKernel<<<static_cast<unsigned>(a.outer), kThreads, 0, s>>>(a, log);
  } else {
    softmaxColsKernel<<<gridFor(a.outer * a.inner), kThreads, 0, s>>>(a, log);
  }
  return launched("softmax kernel");
}

Status launchLayerNorm(const NormArgs &a, cudaStream_t s) {
  if (a.rows <= 0 || a.dim <= 0)
    return Status::ok();
  if (a.rows > 0x7fffffff)
    return Status::unsupported("layer norm over too many rows for one CUDA grid");
  // 128 threads cover a model dimension of 512 in 4 elements each; wider rows
  // get more threads.
  const int threads = a.dim >= 2048 ? 512 : a.dim >= 1024 ? 256 : 128;
  layerNormKernel<<<static_cast<unsigned>(a.rows), threads, 0, s>>>(a);
  return launched("layer norm kernel");
}

Status launchEmbedding(const EmbedArgs &a, DeviceError *err, cudaStream_t s) {
  if (a.tokens <= 0 || a.dim <= 0)
    return Status::ok();
  if (a.tokens > 0x7fffffff)
    return Status::unsupported("embedding of too many tokens for one CUDA grid");
  const int threads = a.dim >= 512 ? 256 : 128;
  embeddingKernel<<<static_cast<unsigned>(a.tokens), threads, 0, s>>>(a, err);
  return launched("embedding kernel");
}

Status launchRotary(const RotaryArgs &a, DeviceError *err, cudaStream_t s) {
  const int64_t rows = a.batch * a.seq;
  if (rows <= 0 || a.heads <= 0)
    return Status::ok();
  if (rows > 0x7fffffff)
    return Status::unsupported("rotary of too many tokens for one CUDA grid");
  rotaryKernel<<<static_cast<unsigned>(rows), 128, 0, s>>>(a, err);
  return launched("rotary kernel");
}

Status launchCacheWrite(const CacheWriteArgs &a, DeviceError *err, cudaStream_t s) {
  if (a.batch * a.steps <= 0)
    return Status::ok();
  if (a.batch * a.steps > 0x7fffffff)
    return Status::unsupported("KV-cache write of too many rows for one CUDA grid");
  // Enough blocks per row for one feature a thread (at most 64).
  const int64_t widest = std::max(std::max(a.dk, a.dv), a.invFreq ? a.qWidth : 0);
  const int64_t slices = std::min<int64_t>(64, std::max<int64_t>(1, (widest + 127) / 128));
  const dim3 grid(static_cast<unsigned>(a.batch * a.steps), static_cast<unsigned>(slices));
  cacheWriteKernel<<<grid, 128, 0, s>>>(a, err);
  return launched("KV-cache write kernel");
}

Status launchLinearEpilogue(const EpilogueArgs &a, cudaStream_t s) {
  if (a.rows * a.n <= 0)
    return Status::ok();
  linearEpilogueKernel<<<gridFor(a.rows * a.n), kThreads, 0, s>>>(a);
  return launched("linear epilogue kernel");
}

Status launchConvertF32(const float *src, void *dst, uint32_t dtype, int64_t n, cudaStream_t s) {
  if (n <= 0)
    return Status::ok();
  convertKernel<<<gridFor(n), kThreads, 0, s>>>(src, dst, dtype, n);
  return launched("weight conversion kernel");
}

Status launchIota(void *out, uint32_t dtype, int64_t n, cudaStream_t s) {
  if (n <= 0)
    return Status::ok();
  iotaKernel<<<gridFor(n), kThreads, 0, s>>>(out, dtype, n);
  return launched("positions kernel");
}

Status launchPaddedPositions(const void *ids, uint32_t idType, void *out, int64_t rows, int64_t seq,
                             int64_t pad, cudaStream_t s) {
  if (rows <= 0 || seq <= 0)
    return Status::ok();
  paddedPositionsKernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0,
                          s>>>(ids, idType, static_cast<int64_t *>(out), rows, seq, pad);
  return launched("positions kernel");
}

Status launchRelativeBias(const float *table, int64_t buckets, int64_t heads, float *out,
                          int64_t sq, int64_t sk, int bidirectional, int64_t maxDistance,
                          cudaStream_t s) {
  const int64_t n = heads * sq * sk;
  if (n <= 0)
    return Status::ok();
  relativeBiasKernel<<<gridFor(n), kThreads, 0, s>>>(table, buckets, heads, out, sq, sk,
                                                     bidirectional, maxDistance);
  return launched("relative position bias kernel");
}

Status launchNopeak(void *out, int64_t seq, cudaStream_t s) {
  if (seq <= 0)
    return Status::ok();
  nopeakKernel<<<gridFor(seq * seq), kThreads, 0, s>>>(static_cast<unsigned char *>(out), seq);
  return launched("nopeak mask kernel");
}

} // namespace tfc::cuda
