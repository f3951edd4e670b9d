//===- kernels_cpu.h - the CPU backend's kernels for plan instructions ----===//
//
// One function per tfc_kernel_t (include/tfc/abi.h). The executor has already
// computed every output's shape from the plan's symbolic dims, so kernels get
// fully shaped, contiguous, row-major tensors and only compute. They never throw;
// a kernel that can detect bad input data (an out-of-range token id) returns a
// message, empty on success.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_KERNELS_CPU_H
#define TFC_BACKENDS_CPU_KERNELS_CPU_H

#include <cstdint>
#include <string>
#include <vector>

namespace tfc::cpu {

/// A contiguous tensor; |dtype| is a tfc_dtype_t.
struct Tensor {
  void *data = nullptr;
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
  /// For linear weights: the oneDNN-packed copy (a PackedLinear), or null.
  const void *packed = nullptr;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Runs kernel |kernel| (a tfc_kernel_t) on |in|, writing |out| (already shaped
/// and allocated). Returns an error message, or "" on success.
std::string runKernel(uint32_t kernel, const std::vector<const Tensor *> &in,
                      Tensor &out, const std::vector<int64_t> &ints,
                      const std::vector<double> &floats);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_KERNELS_CPU_H
