//===- device.h - where a session's plan runs: the CPU or a CUDA device ----===//
//
// Internal to libtfrun. The executor (executor.cc) walks the same plan, with
// the same tensor views (backends/tensor.h), for every device. A Device says
// where memory lives, how weights get there, and who runs a kernel:
//
//   - the CPU (device_cpu.cc): host memory, so inputs, weights and outputs are
//     used in place; weights of linears are packed for oneDNN once, in the CPU
//     device's pack cache (shared by every CPU session on the same weights);
//     kernels run synchronously on OpenMP threads.
//   - CUDA (device_cuda.cc): device memory, explicit copies, kernels queued on
//     the session's stream, and errors that surface at sync().
//
// A Device belongs to one session and is used by one thread at a time. Every
// method returns a Status, never throws.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_DEVICE_H
#define TFC_RUNTIME_DEVICE_H

#include "backends/tensor.h"
#include "runtime/model.h"
#include "tfc/kernel_schema.h"
#include "tfc/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfrun::rt {

class Device {
public:
  virtual ~Device() = default;
  /// "cpu (avx2, fma; ...)" or "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)".
  virtual std::string describe() const = 0;
  /// True when the device's memory is host memory: the executor then reads
  /// inputs and f32 outputs in place instead of copying them.
  virtual bool hostMemory() const = 0;
  /// The dtype f32 activations and weights are computed in (a CUDA session's
  /// --dtype); the CPU computes in what model.bin stores.
  virtual uint32_t computeDtype() const { return TFC_DTYPE_F32; }
  /// Whose dtype sets of tfc/kernels.def the device's kernels accept.
  virtual tfc::schema::Backend schemaBackend() const { return tfc::schema::Backend::Cpu; }

  /// Once, when a session is created: whether |m| can run here (an error that
  /// names what is missing) and the device's copy of its weights.
  virtual Status bindModel(const Model &m) = 0;
  /// Where value |value| (a weight) of function |fn| lives for the kernels, in
  /// |dtype| (its stored dtype, or computeDtype() for f32 weights): the data,
  /// and the CPU's packed copy of a linear weight (else null).
  virtual Status weight(size_t fn, uint32_t value, uint32_t dtype, void **data,
                        const void **packed) = 0;

  /// |zeroed|: the memory reads as zeros (the KV cache).
  virtual Status alloc(size_t bytes, void **out, bool zeroed = false) = 0;
  virtual void release(void *p) = 0;
  virtual Status upload(void *dst, const void *src, size_t bytes) = 0;
  /// Waits for the queued work first, so |dst| is ready when it returns.
  virtual Status download(void *dst, const void *src, size_t bytes) = 0;
  virtual Status copy(void *dst, const void *src, size_t bytes) = 0;

  /// Before a run's first kernel, on the thread that runs it.
  virtual void beginRun() {}
  /// Runs (CPU) or queues (CUDA) one plan instruction.
  virtual Status run(const Instr &in, const std::vector<const tfc::Tensor *> &args,
                     tfc::Tensor &out) = 0;
  /// Waits for the queued work; reports asynchronous errors.
  virtual Status sync() = 0;
};

/// The CPU, with |threads| OpenMP threads per run (0: all cores).
/// Unsupported on a CPU without AVX2 and FMA, or for a compute dtype other
/// than f32 (on the CPU the precision is chosen at compile time).
Status createCpuDevice(int threads, uint32_t computeDtype, std::unique_ptr<Device> &out);

/// The number of usable CUDA devices: 0 when libtfrun was built without CUDA,
/// or there is no driver or GPU (|why| then says which).
int cudaDeviceCount(std::string *why = nullptr);

/// A CUDA device with its own stream, computing f32 values in |computeDtype|
/// (f32, f16 or bf16). Unsupported when libtfrun was built without CUDA or
/// |ordinal| names no device.
Status createCudaDevice(int ordinal, uint32_t computeDtype, std::unique_ptr<Device> &out);

} // namespace tfrun::rt

#endif // TFC_RUNTIME_DEVICE_H
