//===- backends/tensor.h - the tensor view every backend's kernels take ---===//
//
// One contiguous, row-major tensor: an address (host memory for the CPU,
// device memory for CUDA), a tfc_dtype_t and a shape. The executor
// (runtime/executor.cc) fills one vector of these per function run, whatever
// the device, and hands them to the device's kernels as they are.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_TENSOR_H
#define TFC_BACKENDS_TENSOR_H

#include <cstdint>
#include <vector>

namespace tfc {

struct Tensor {
  void *data = nullptr;
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
  /// For linear weights on the CPU: the oneDNN-packed copy (a
  /// tfc::cpu::PackedLinear) that the CPU device made; null elsewhere.
  const void *packed = nullptr;
  /// A quantized weight's descriptor (model.bin's weight record): its f32
  /// scales, in the device's memory, one per row (group 0) or one per group of
  /// |group| elements of a row; null for a float tensor.
  const float *scales = nullptr;
  int64_t group = 0;
  /// A group-wise int8 weight's activation bits (model.bin's weight record):
  /// 8, or 0 for the default (16).
  int actBits = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

} // namespace tfc

#endif // TFC_BACKENDS_TENSOR_H
