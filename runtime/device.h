//===- device.h - where a session's plan runs: the CPU or a CUDA device ----===//
//
// Internal to libtfrun. The executor (tfrun.cc) walks the same plan for every
// device; what differs is where memory lives and who runs a kernel. The CPU
// path needs none of this (host memory, tfc::cpu::runKernel). A Device is the
// other case: memory the host cannot touch, explicit copies, kernels queued on
// a stream, and errors that surface at sync().
//
// Every method returns an Error (or a message), never throws.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_RUNTIME_DEVICE_H
#define TFC_RUNTIME_DEVICE_H

#include "backends/cpu/kernels_cpu.h"
#include "runtime/model.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfrun {

class Device {
public:
  virtual ~Device() = default;
  /// "cuda:0 (NVIDIA H100 80GB HBM3, sm_90)".
  virtual std::string describe() const = 0;
  virtual Error alloc(size_t bytes, void **out) = 0;
  virtual void release(void *p) = 0;
  virtual Error upload(void *dst, const void *src, size_t bytes) = 0;
  /// Waits for the queued work first, so |dst| is ready when it returns.
  virtual Error download(void *dst, const void *src, size_t bytes) = 0;
  virtual Error copy(void *dst, const void *src, size_t bytes) = 0;
  virtual Error zero(void *dst, size_t bytes) = 0;
  /// f32 host values to |dtype| (F32, F16 or BF16) in device memory: the
  /// one-time weight conversion of a run-time compute dtype.
  virtual Error convertUpload(void *dst, const float *src, int64_t count, uint32_t dtype) = 0;
  /// Queues one plan instruction; tensors hold device pointers.
  virtual std::string run(uint32_t kernel, const std::vector<const tfc::cpu::Tensor *> &in,
                          tfc::cpu::Tensor &out, const std::vector<int64_t> &ints,
                          const std::vector<double> &floats) = 0;
  /// Waits for the queued work; reports asynchronous errors.
  virtual Error sync() = 0;
};

/// The number of usable CUDA devices: 0 when libtfrun was built without CUDA,
/// or there is no driver or GPU (|why| then says which).
int cudaDeviceCount(std::string *why = nullptr);

/// A CUDA device with its own stream. TFRUN_UNSUPPORTED when libtfrun was
/// built without CUDA or |ordinal| names no device.
Error createCudaDevice(int ordinal, std::unique_ptr<Device> &out);

} // namespace tfrun

#endif // TFC_RUNTIME_DEVICE_H
