//===- cuda_device.cuh - device helpers of the CUDA kernels -----*- CUDA -*-===//
//
// Loads and stores through a run-time tfc_dtype_t, warp and block reductions,
// and the data-error record: what kernels_cuda.cu and attention_cuda.cu share.
// Device code; included by .cu files only.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CUDA_CUDA_DEVICE_CUH
#define TFC_BACKENDS_CUDA_CUDA_DEVICE_CUH

#include "backends/cuda/cuda_internal.h"
#include "tfc/abi.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tfc::cuda {

/// Element i of p, of type t, as a float (ids and bools converted).
__device__ __forceinline__ float loadF(const void *p, uint32_t t, int64_t i) {
  switch (t) {
  case TFC_DTYPE_F32:
    return static_cast<const float *>(p)[i];
  case TFC_DTYPE_F16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case TFC_DTYPE_BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  case TFC_DTYPE_I64:
    return static_cast<float>(static_cast<const long long *>(p)[i]);
  case TFC_DTYPE_I32:
    return static_cast<float>(static_cast<const int *>(p)[i]);
  case TFC_DTYPE_BOOL:
    return static_cast<const unsigned char *>(p)[i];
  case TFC_DTYPE_I8:
    return static_cast<const signed char *>(p)[i];
  default:
    return 0.0f;
  }
}

/// Element i as a double: exact for every dtype up to 2^53 (the CPU backend's
/// loadAsDouble, used for integer arithmetic, compare and cast).
__device__ __forceinline__ double loadD(const void *p, uint32_t t, int64_t i) {
  switch (t) {
  case TFC_DTYPE_I64:
    return static_cast<double>(static_cast<const long long *>(p)[i]);
  case TFC_DTYPE_I32:
    return static_cast<const int *>(p)[i];
  default:
    return loadF(p, t, i);
  }
}

/// An id (i64, i32 or any other integer dtype) as a 64-bit integer.
__device__ __forceinline__ long long loadId(const void *p, uint32_t t, int64_t i) {
  switch (t) {
  case TFC_DTYPE_I64:
    return static_cast<const long long *>(p)[i];
  case TFC_DTYPE_I32:
    return static_cast<const int *>(p)[i];
  default:
    return static_cast<long long>(loadD(p, t, i));
  }
}

__device__ __forceinline__ void storeF(void *p, uint32_t t, int64_t i, float v) {
  switch (t) {
  case TFC_DTYPE_F32:
    static_cast<float *>(p)[i] = v;
    break;
  case TFC_DTYPE_F16:
    static_cast<__half *>(p)[i] = __float2half_rn(v);
    break;
  case TFC_DTYPE_BF16:
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    break;
  case TFC_DTYPE_I64:
    static_cast<long long *>(p)[i] = static_cast<long long>(v);
    break;
  case TFC_DTYPE_I32:
    static_cast<int *>(p)[i] = static_cast<int>(v);
    break;
  case TFC_DTYPE_BOOL:
    static_cast<unsigned char *>(p)[i] = v != 0.0f;
    break;
  case TFC_DTYPE_I8:
    static_cast<signed char *>(p)[i] = static_cast<signed char>(v);
    break;
  default:
    break;
  }
}

/// The CPU backend's storeFromDouble: integers truncate, bools test != 0,
/// floats round through f32.
__device__ __forceinline__ void storeD(void *p, uint32_t t, int64_t i, double v) {
  switch (t) {
  case TFC_DTYPE_I64:
    static_cast<long long *>(p)[i] = static_cast<long long>(v);
    break;
  case TFC_DTYPE_I32:
    static_cast<int *>(p)[i] = static_cast<int>(v);
    break;
  case TFC_DTYPE_BOOL:
    static_cast<unsigned char *>(p)[i] = v != 0.0;
    break;
  default:
    storeF(p, t, i, static_cast<float>(v));
    break;
  }
}

__device__ __forceinline__ bool isFloatType(uint32_t t) {
  return t == TFC_DTYPE_F32 || t == TFC_DTYPE_F16 || t == TFC_DTYPE_BF16;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename T> __device__ __forceinline__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024), returned to
/// every thread. |shared| holds 32 values. Contains __syncthreads(): call it
/// from every thread.
template <typename T> __device__ T blockSum(T v, T *shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warpSum(v);
  __syncthreads(); // |shared| may still be read by a previous call
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  T r = lane < warps ? shared[lane] : T(0);
  return warpSum(r);
}

/// Max over the block; as blockSum.
__device__ inline float blockMax(float v, float *shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  float r = lane < warps ? shared[lane] : -INFINITY;
  return warpMax(r);
}

/// Records a data error unless one is already recorded (the first one wins).
__device__ inline void recordError(DeviceError *err, uint32_t code, long long a, long long b) {
  if (atomicCAS(&err->code, 0u, code) == 0u) {
    err->a = a;
    err->b = b;
  }
}

} // namespace tfc::cuda

#endif // TFC_BACKENDS_CUDA_CUDA_DEVICE_CUH
