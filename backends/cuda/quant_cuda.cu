//===- quant_cuda.cu - int8 and int4 linear weights on CUDA ----------------===//
//
// The device side of runQuantLinear (linear_cuda.cc): a GEMV on the quantized
// bytes for a decoding step's few rows, and the weight dequantized to f32 for
// cuBLASLt beyond. The layout is model.bin's (QuantWeightArgs): int8 or int4
// (two's complement nibbles, element e in the low nibble of byte e / 2 when e
// is even), f32 scales per row or per group of a row.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_device.cuh"

#include <algorithm>
#include <cstdint>

namespace tfc::cuda {
namespace {

Status launched(const char *what) { return cudaStatus(cudaGetLastError(), what); }

/// Weight element [r, c] of a quantized weight, scaled (QuantWeightArgs).
__device__ __forceinline__ float quantAt(const QuantWeightArgs &w, int64_t r, int64_t c,
                                         int64_t groups) {
  const int64_t e = r * w.k + c;
  int q;
  if (w.qType == TFC_DTYPE_I8) {
    q = static_cast<const signed char *>(w.q)[e];
  } else {
    const unsigned b = static_cast<const unsigned char *>(w.q)[e >> 1];
    q = static_cast<int>(((e & 1) ? b >> 4 : b & 15u) ^ 8u) - 8;
  }
  return static_cast<float>(q) * w.scales[w.group > 0 ? r * groups + c / w.group : r];
}

/// One warp per output column j: lane l sums columns l, l + 32, ... of every
/// row (consecutive lanes read consecutive weight bytes), then the warp adds
/// its lanes up.
__global__ void quantGemvKernel(QuantWeightArgs w, const void *x, uint32_t xType, int64_t rows,
                                float *acc) {
  const int lane = threadIdx.x & 31;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (j >= w.n)
    return;
  const int64_t groups = w.group > 0 ? (w.k + w.group - 1) / w.group : 1;
  float sum[kQuantGemvRows];
#pragma unroll
  for (int r = 0; r < kQuantGemvRows; ++r)
    sum[r] = 0.0f;
  for (int64_t c = lane; c < w.k; c += 32) {
    const float wv = quantAt(w, j, c, groups);
#pragma unroll
    for (int r = 0; r < kQuantGemvRows; ++r)
      if (r < rows)
        sum[r] += loadF(x, xType, r * w.k + c) * wv;
  }
#pragma unroll
  for (int r = 0; r < kQuantGemvRows; ++r) {
    const float v = warpSum(sum[r]);
    if (lane == 0 && r < rows)
      acc[r * w.n + j] = v;
  }
}

/// Weight e (0..3) of the 4 that float4 i of a 16-byte chunk meets: int8
/// byte e of word i; int4 nibble 4 * (i % 2) + e of word i / 2.
template <bool kInt4>
__device__ __forceinline__ float quantOf(const uint32_t (&wd)[4], int i, int e) {
  if (kInt4)
    return static_cast<float>(
        static_cast<int>(((wd[i / 2] >> (4 * (4 * (i % 2) + e))) & 15u) ^ 8u) - 8);
  return static_cast<float>(static_cast<signed char>(wd[i] >> (8 * e)));
}

/// The GEMV's vector form (launchQuantGemv checks its conditions: 16-byte
/// aligned weight rows and x, k a multiple of 16 (int8) or 32 (int4), groups
/// a multiple of 32). A warp owns kCols output columns; lane l reads 16 bytes
/// of each at a time (16 int8 or 32 int4 weights under one scale, all loads in
/// flight together) and each float4 of x once for all kCols columns; per row
/// and column the chunk's products are summed, then scaled once.
template <bool kInt4, int kCols>
__global__ void quantGemvVecKernel(QuantWeightArgs w, const float *x, int64_t rows, float *acc) {
  constexpr int kPer = kInt4 ? 32 : 16; // weights per 16 bytes
  const int lane = threadIdx.x & 31;
  const int64_t j0 =
      (static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5)) * kCols;
  if (j0 >= w.n)
    return;
  const int64_t groups = w.group > 0 ? (w.k + w.group - 1) / w.group : 1;
  const int64_t rowBytes = kInt4 ? w.k / 2 : w.k;
  const int64_t chunks = w.k / kPer;
  float sum[kQuantGemvRows][kCols];
#pragma unroll
  for (int r = 0; r < kQuantGemvRows; ++r)
#pragma unroll
    for (int col = 0; col < kCols; ++col)
      sum[r][col] = 0.0f;
  for (int64_t c = lane; c < chunks; c += 32) {
    const int64_t k0 = c * kPer;
    uint32_t wd[kCols][4];
    float sc[kCols];
#pragma unroll
    for (int col = 0; col < kCols; ++col) {
      const int64_t j = j0 + col;
      if (j < w.n) {
        const uint4 q = __ldg(reinterpret_cast<const uint4 *>(
                                  static_cast<const unsigned char *>(w.q) + j * rowBytes) +
                              c);
        wd[col][0] = q.x;
        wd[col][1] = q.y;
        wd[col][2] = q.z;
        wd[col][3] = q.w;
        sc[col] = __ldg(w.scales + (w.group > 0 ? j * groups + k0 / w.group : j));
      } else {
        wd[col][0] = wd[col][1] = wd[col][2] = wd[col][3] = 0;
        sc[col] = 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < kQuantGemvRows; ++r) {
      if (r >= rows)
        break;
      const float4 *xr = reinterpret_cast<const float4 *>(x + r * w.k + k0);
      float d[kCols];
#pragma unroll
      for (int col = 0; col < kCols; ++col)
        d[col] = 0.0f;
#pragma unroll
      for (int i = 0; i < kPer / 4; ++i) {
        const float4 xv = __ldg(xr + i);
#pragma unroll
        for (int col = 0; col < kCols; ++col)
          d[col] += xv.x * quantOf<kInt4>(wd[col], i, 0) + xv.y * quantOf<kInt4>(wd[col], i, 1) +
                    xv.z * quantOf<kInt4>(wd[col], i, 2) + xv.w * quantOf<kInt4>(wd[col], i, 3);
      }
#pragma unroll
      for (int col = 0; col < kCols; ++col)
        sum[r][col] += d[col] * sc[col];
    }
  }
#pragma unroll
  for (int r = 0; r < kQuantGemvRows; ++r)
#pragma unroll
    for (int col = 0; col < kCols; ++col) {
      const float v = warpSum(sum[r][col]);
      if (lane == 0 && r < rows && j0 + col < w.n)
        acc[r * w.n + j0 + col] = v;
    }
}

/// One block per weight row (grid-stride): no division per element, reads
/// and writes coalesced along the row.
__global__ void dequantizeKernel(QuantWeightArgs w, float *out) {
  const int64_t groups = w.group > 0 ? (w.k + w.group - 1) / w.group : 1;
  for (int64_t r = blockIdx.x; r < w.n; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < w.k; c += blockDim.x)
      out[r * w.k + c] = quantAt(w, r, c, groups);
}

/// dequantizeKernel's vector form, 4 weights per thread: one 4-byte (int8)
/// or 2-byte (int4) load and one float4 store (k and the group multiples of 4,
/// out 16-byte aligned). The launch's memory traffic is the prefill's cost
/// besides the GEMM, so it runs at the copy's bandwidth.
template <bool kInt4>
__global__ void dequantize4Kernel(QuantWeightArgs w, float *out) {
  const int64_t groups = w.group > 0 ? w.k / w.group + (w.k % w.group != 0) : 1;
  const int64_t k4 = w.k / 4;
  for (int64_t r = blockIdx.x; r < w.n; r += gridDim.x) {
    const float *scale = w.scales + r * groups;
    float4 *dst = reinterpret_cast<float4 *>(out + r * w.k);
    for (int64_t c = threadIdx.x; c < k4; c += blockDim.x) {
      const float sc = scale[w.group > 0 ? (4 * c) / w.group : 0];
      int q[4];
      if (kInt4) {
        const unsigned h = static_cast<const unsigned short *>(w.q)[(r * w.k) / 4 + c];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          q[e] = static_cast<int>(((h >> (4 * e)) & 15u) ^ 8u) - 8;
      } else {
        const unsigned b = static_cast<const unsigned *>(w.q)[(r * w.k) / 4 + c];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          q[e] = static_cast<signed char>(b >> (8 * e));
      }
      dst[c] = make_float4(q[0] * sc, q[1] * sc, q[2] * sc, q[3] * sc);
    }
  }
}

} // namespace

Status launchQuantGemv(const QuantWeightArgs &w, const void *x, uint32_t xType, int64_t rows,
                       float *acc, cudaStream_t s) {
  if (rows <= 0 || w.n <= 0)
    return Status::ok();
  constexpr int kWarpsPerBlock = 4;
  const int64_t blocks = (w.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff || rows > kQuantGemvRows)
    return Status::unsupported("quantized GEMV of too many columns or rows");
  const bool int4 = w.qType == TFC_DTYPE_I4;
  const auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (xType == TFC_DTYPE_F32 && aligned(x) && aligned(w.q) && w.k % (int4 ? 32 : 16) == 0 &&
      (w.group == 0 || w.group % 32 == 0)) {
    // Columns per warp: more share each load of x, fewer keep every SM busy
    // on narrow layers (132 SMs on an H100).
    const float *xf = static_cast<const float *>(x);
    const unsigned threads = kWarpsPerBlock * 32;
    auto grid = [&](int cols) {
      return static_cast<unsigned>((w.n + cols * kWarpsPerBlock - 1) / (cols * kWarpsPerBlock));
    };
    if (w.n >= 16384) {
      if (int4)
        quantGemvVecKernel<true, 4><<<grid(4), threads, 0, s>>>(w, xf, rows, acc);
      else
        quantGemvVecKernel<false, 4><<<grid(4), threads, 0, s>>>(w, xf, rows, acc);
    } else if (w.n >= 4096) {
      if (int4)
        quantGemvVecKernel<true, 2><<<grid(2), threads, 0, s>>>(w, xf, rows, acc);
      else
        quantGemvVecKernel<false, 2><<<grid(2), threads, 0, s>>>(w, xf, rows, acc);
    } else {
      if (int4)
        quantGemvVecKernel<true, 1><<<grid(1), threads, 0, s>>>(w, xf, rows, acc);
      else
        quantGemvVecKernel<false, 1><<<grid(1), threads, 0, s>>>(w, xf, rows, acc);
    }
    return launched("quantized GEMV kernel");
  }
  quantGemvKernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, s>>>(w, x, xType, rows,
                                                                               acc);
  return launched("quantized GEMV kernel");
}

Status launchDequantize(const QuantWeightArgs &w, float *out, cudaStream_t s) {
  if (w.n * w.k <= 0)
    return Status::ok();
  const int64_t blocks = std::min<int64_t>(w.n, 65535);
  const bool vec4 = w.k % 4 == 0 && (w.group == 0 || w.group % 4 == 0) &&
                    reinterpret_cast<uintptr_t>(out) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(w.q) % 4 == 0;
  if (vec4 && w.qType == TFC_DTYPE_I4)
    dequantize4Kernel<true><<<static_cast<unsigned>(blocks), 256, 0, s>>>(w, out);
  else if (vec4)
    dequantize4Kernel<false><<<static_cast<unsigned>(blocks), 256, 0, s>>>(w, out);
  else
    dequantizeKernel<<<static_cast<unsigned>(blocks), 256, 0, s>>>(w, out);
  return launched("dequantize kernel");
}

} // namespace tfc::cuda
