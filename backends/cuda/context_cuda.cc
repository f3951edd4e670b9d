//===- context_cuda.cc - CUDA devices, contexts, memory and conversion ----===//
//
// Host side of the CUDA backend, part one: device discovery and the Context
// (stream, cuBLASLt handle, scratch, the device-side error record), device
// memory and copies, and the one-time conversion of f32 weights to f16 or
// bf16. The kernel dispatch is in kernels_cuda.cc.
//
//===----------------------------------------------------------------------===//
#include "backends/cuda/cuda_internal.h"

#include "tfc/abi.h"

#include <algorithm>
#include <cmath>

namespace tfc::cuda {

std::string cudaMessage(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return "";
  return std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e);
}

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status::ok();
  return Status(e == cudaErrorMemoryAllocation ? Code::OutOfMemory : Code::Internal,
                cudaMessage(e, what));
}

// --- Context ----------------------------------------------------------------

Status Context::activate() {
  int current = -1;
  TFC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device)
    TFC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  return Status::ok();
}

namespace {
/// |buf| grown to at least |bytes| (never shrunk).
Status growScratch(cudaStream_t stream, void *&buf, size_t &have, size_t bytes, void **out) {
  if (bytes > have) {
    // The old buffer may still be read by queued work.
    if (buf) {
      TFC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "scratch resize");
      TFC_CUDA_RETURN_IF_ERROR(cudaFree(buf), "cudaFree (scratch)");
      buf = nullptr;
      have = 0;
    }
    const size_t size = std::max<size_t>(bytes, 1 << 20);
    TFC_CUDA_RETURN_IF_ERROR(cudaMalloc(&buf, size), "cudaMalloc (scratch)");
    have = size;
  }
  *out = buf;
  return Status::ok();
}
} // namespace

Status Context::scratchFor(size_t bytes, void **out) {
  return growScratch(stream, scratch, scratchBytes, bytes, out);
}

Status Context::weightScratchFor(size_t bytes, void **out) {
  return growScratch(stream, weightScratch, weightScratchBytes, bytes, out);
}

Context::~Context() {
  // Teardown: errors are ignored (there is no one left to report them to).
  (void)activate();
  if (stream)
    (void)cudaStreamSynchronize(stream);
  gemm.reset();
  if (scratch)
    (void)cudaFree(scratch);
  if (weightScratch)
    (void)cudaFree(weightScratch);
  if (error)
    (void)cudaFree(error);
  if (errorHost)
    (void)cudaFreeHost(errorHost);
  if (stream)
    (void)cudaStreamDestroy(stream);
}

void ContextDeleter::operator()(Context *ctx) const { delete ctx; }

Status deviceCount(int &n) {
  n = 0;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) // no driver, too old a driver, no device: none to use
    return Status::unsupported(cudaMessage(e, "cudaGetDeviceCount"));
  n = count;
  return Status::ok();
}

Status deviceName(int device, std::string &name) {
  cudaDeviceProp prop;
  TFC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  name = std::string(prop.name) + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  return Status::ok();
}

Status createContext(int device, ContextPtr &out) {
  int n = 0;
  TFC_RETURN_IF_ERROR(deviceCount(n));
  if (device < 0 || device >= n)
    return Status::unsupported("CUDA device " + std::to_string(device) + " does not exist (" +
                               std::to_string(n) + " devices)");
  ContextPtr ctx(new Context);
  ctx->device = device;
  TFC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  TFC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking),
                           "cudaStreamCreateWithFlags");
  TFC_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void **>(&ctx->error), sizeof(DeviceError)),
                           "cudaMalloc (error record)");
  TFC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ctx->error, 0, sizeof(DeviceError), ctx->stream),
                           "cudaMemsetAsync (error record)");
  TFC_CUDA_RETURN_IF_ERROR(cudaHostAlloc(reinterpret_cast<void **>(&ctx->errorHost),
                                         sizeof(DeviceError), cudaHostAllocDefault),
                           "cudaHostAlloc (error record)");
  *ctx->errorHost = DeviceError{};
  TFC_RETURN_IF_ERROR(createGemmState(*ctx));
  TFC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx->stream), "createContext");
  out = std::move(ctx);
  return Status::ok();
}

Status synchronize(Context &ctx) {
  TFC_RETURN_IF_ERROR(ctx.activate());
  TFC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ctx.errorHost, ctx.error, sizeof(DeviceError),
                                           cudaMemcpyDeviceToHost, ctx.stream),
                           "cudaMemcpyAsync (error record)");
  TFC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize");
  const DeviceError e = *ctx.errorHost;
  if (e.code == kErrNone)
    return Status::ok();
  // Clear it for the next run (ordered before any later work on the stream).
  *ctx.errorHost = DeviceError{};
  TFC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(ctx.error, 0, sizeof(DeviceError), ctx.stream),
                           "cudaMemsetAsync (error record)");
  // Bad data the caller gave us (ids, positions), in the CPU backend's words.
  const std::string a = std::to_string(e.a), b = std::to_string(e.b);
  switch (e.code) {
  case kErrTokenId:
    return Status::invalidArgument("token id " + a + " is out of range [0, " + b + ")");
  case kErrPosition:
    return Status::invalidArgument("position " + a + " is beyond the " + b +
                                   "-row positional table");
  case kErrNegativeOffset:
    return Status::invalidArgument("negative position offset " + a);
  case kErrDecodePosition:
    return Status::invalidArgument("decode position " + a + " is beyond the KV cache's " + b +
                                   " positions");
  case kErrKvBlock:
    return Status::invalidArgument("KV block " + a + " is outside the cache's " + b + " blocks");
  default:
    return Status::internal("unknown CUDA kernel error " + std::to_string(e.code));
  }
}

// --- Memory --------------------------------------------------------------------

Status deviceAlloc(Context &ctx, size_t bytes, void **out) {
  *out = nullptr;
  TFC_RETURN_IF_ERROR(ctx.activate());
  TFC_CUDA_RETURN_IF_ERROR(cudaMalloc(out, bytes == 0 ? 1 : bytes), "cudaMalloc");
  return Status::ok();
}

Status deviceFree(Context &ctx, void *ptr) {
  if (!ptr)
    return Status::ok();
  TFC_RETURN_IF_ERROR(ctx.activate());
  TFC_CUDA_RETURN_IF_ERROR(cudaFree(ptr), "cudaFree");
  return Status::ok();
}

namespace {
Status copy(Context &ctx, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
            const char *what) {
  if (bytes == 0)
    return Status::ok();
  TFC_RETURN_IF_ERROR(ctx.activate());
  TFC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, ctx.stream), what);
  return Status::ok();
}
} // namespace

Status copyToDevice(Context &ctx, void *dst, const void *src, size_t bytes) {
  return copy(ctx, dst, src, bytes, cudaMemcpyHostToDevice, "cudaMemcpyAsync (to device)");
}
Status copyToHost(Context &ctx, void *dst, const void *src, size_t bytes) {
  return copy(ctx, dst, src, bytes, cudaMemcpyDeviceToHost, "cudaMemcpyAsync (to host)");
}
Status copyOnDevice(Context &ctx, void *dst, const void *src, size_t bytes) {
  return copy(ctx, dst, src, bytes, cudaMemcpyDeviceToDevice, "cudaMemcpyAsync (on device)");
}

Status fillZero(Context &ctx, void *dst, size_t bytes) {
  if (bytes == 0)
    return Status::ok();
  TFC_RETURN_IF_ERROR(ctx.activate());
  TFC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, ctx.stream), "cudaMemsetAsync");
  return Status::ok();
}

Status convertWeights(Context &ctx, const float *src, int64_t count, uint32_t dtype, void *dst) {
  if (dtype != TFC_DTYPE_F32 && dtype != TFC_DTYPE_F16 && dtype != TFC_DTYPE_BF16)
    return Status::unsupported("weights can be converted to f32, f16 or bf16 only, not dtype " +
                               std::to_string(dtype));
  if (count <= 0)
    return Status::ok();
  TFC_RETURN_IF_ERROR(ctx.activate());
  if (dtype == TFC_DTYPE_F32) {
    TFC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, count * sizeof(float),
                                             cudaMemcpyHostToDevice, ctx.stream),
                             "cudaMemcpyAsync (weights)");
    TFC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx.stream), "convertWeights");
    return Status::ok();
  }
  // Through an f32 staging buffer on the device, 64 MB at a time.
  const int64_t chunk = std::min<int64_t>(count, int64_t(1) << 24);
  float *staging = nullptr;
  TFC_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void **>(&staging), chunk * sizeof(float)),
                           "cudaMalloc (weight staging)");
  Status err;
  for (int64_t off = 0; off < count && err.isOk(); off += chunk) {
    const int64_t n = std::min(chunk, count - off);
    err = cudaStatus(
        cudaMemcpyAsync(staging, src + off, n * sizeof(float), cudaMemcpyHostToDevice, ctx.stream),
        "cudaMemcpyAsync (weights)");
    if (err.isOk())
      err = launchConvertF32(staging, static_cast<char *>(dst) + off * 2, dtype, n, ctx.stream);
  }
  Status syncErr = cudaStatus(cudaStreamSynchronize(ctx.stream), "convertWeights");
  (void)cudaFree(staging);
  return err.isOk() ? syncErr : err;
}

} // namespace tfc::cuda
