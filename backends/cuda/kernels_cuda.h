//===- kernels_cuda.h - the CUDA backend's kernels for plan instructions --===//
//
// The CUDA counterpart of backends/cpu/kernels_cpu.h: one entry point,
// runKernel(), for every tfc_kernel_t (include/tfc/abi.h), with the CPU
// backend's semantics, on tensors in device memory, queued on the stream of a
// per-session Context. Plus what a runtime needs around it: device discovery,
// device memory, copies and the one-time conversion of f32 weights to f16 or
// bf16 at load.
//
// This header is plain C++17 and includes no CUDA header, so the runtime's .cc
// files can include it whether or not they are compiled with CUDA. Every
// fallible function returns a tfc::Status whose code is chosen where the error
// is found; none throws or aborts:
// - a CUDA, cuBLASLt or cuBLAS failure: Internal, or OutOfMemory for a failed
//   allocation; its message reads "CUDA error in <what>: <reason>";
// - bad data found on the device (below): InvalidArgument;
// - a configuration this backend does not support (i8 linear weights, a rank
//   above kMaxRank, a grid too large, a GEMM cuBLASLt has no algorithm for),
//   or no usable CUDA device: Unsupported;
// - operands that do not fit the kernel: InvalidModel.
//
// Errors that depend on data in device memory (a token id out of range, a
// decode position beyond the KV cache) are found by the kernels themselves,
// which then skip the offending work; they are reported by the next
// synchronize() on the Context, with the CPU backend's wording, as
// InvalidArgument. A runtime that
// synchronizes once at the end of a run therefore still reports them.
//
// See docs/backend-cuda.md for the kernel design.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CUDA_KERNELS_CUDA_H
#define TFC_BACKENDS_CUDA_KERNELS_CUDA_H

#include "backends/tensor.h"
#include "tfc/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfc::cuda {

/// A contiguous, row-major tensor in DEVICE memory; |dtype| is a tfc_dtype_t.
/// The one tensor view of every backend (backends/tensor.h); |packed| is unused
/// here (weights are used as stored).
using Tensor = tfc::Tensor;

/// One session's device state: the device ordinal, a CUDA stream every call
/// on this Context is queued on, a cuBLASLt handle with its workspace and
/// algorithm cache, scratch memory, and the device-side error record.
/// Thread-compatible: one thread at a time per Context; distinct Contexts may
/// be used concurrently from different threads.
class Context;

/// Releases a Context (waits for its stream first).
struct ContextDeleter {
  void operator()(Context *ctx) const;
};
using ContextPtr = std::unique_ptr<Context, ContextDeleter>;

/// Sets |n| to the number of CUDA devices. Unsupported (and n = 0) when there
/// is no driver, the driver is too old, or there is no device.
Status deviceCount(int &n);

/// Sets |name| to a short description of device |device| ("NVIDIA H100 80GB
/// HBM3, sm_90").
Status deviceName(int device, std::string &name);

/// Creates a Context on device |device| into |out| (and makes |device| current
/// on the calling thread). |out| is released with the ContextPtr.
Status createContext(int device, ContextPtr &out);

/// Waits for everything queued on |ctx|, then reports the first asynchronous
/// CUDA error or data error (bad token id, decode position) the kernels met
/// since the previous synchronize(), and clears the data error.
Status synchronize(Context &ctx);

/// cudaMalloc / cudaFree on |ctx|'s device. A null pointer frees nothing.
Status deviceAlloc(Context &ctx, size_t bytes, void **out);
Status deviceFree(Context &ctx, void *ptr);

/// Copies queued on |ctx|'s stream (asynchronous with respect to the host
/// only for page-locked host memory; ordinary host memory is copied before
/// these return). copyToHost's |dst| is valid after synchronize().
Status copyToDevice(Context &ctx, void *dst, const void *src, size_t bytes);
Status copyToHost(Context &ctx, void *dst, const void *src, size_t bytes);
Status copyOnDevice(Context &ctx, void *dst, const void *src, size_t bytes);
Status fillZero(Context &ctx, void *dst, size_t bytes);

/// Converts |count| f32 values in HOST memory to |dtype| (TFC_DTYPE_F32, F16
/// or BF16, round to nearest even) into DEVICE memory at |dst|: the one-time
/// weight conversion at model load. Synchronous: |src| may be released when it
/// returns.
Status convertWeights(Context &ctx, const float *src, int64_t count, uint32_t dtype, void *dst);

/// Runs kernel |kernel| (a tfc_kernel_t) on |in|, writing |out| (already shaped
/// and allocated in device memory), on |ctx|'s stream: the instruction is
/// bound to its typed call (backends/kernel_call.h), checked against the
/// schema's CUDA dtypes and the shape rules, and handed to that kernel's
/// run(). Float tensors may be f32, f16 or bf16 (the arithmetic is f32); ids
/// i64 or i32; bool one byte. OK once the work is queued; see the top of the
/// file for errors found on the device. RESHAPE and UNSQUEEZE, views that the
/// executor normally resolves without a kernel, copy the data when |out| does
/// not alias the input.
Status runKernel(Context &ctx, uint32_t kernel, const std::vector<const Tensor *> &in,
                 Tensor &out, const std::vector<int64_t> &ints,
                 const std::vector<double> &floats);

} // namespace tfc::cuda

#endif // TFC_BACKENDS_CUDA_KERNELS_CUDA_H
