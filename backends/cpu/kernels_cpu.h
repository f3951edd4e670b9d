//===- kernels_cpu.h - the CPU backend's kernels for plan instructions ----===//
//
// One function per tfc_kernel_t (include/tfc/abi.h). The executor has already
// computed every output's shape from the plan's symbolic dims, so kernels get
// fully shaped, contiguous, row-major tensors and only compute. They never throw;
// a kernel that can detect bad input data (an out-of-range token id) returns a
// Status (tfc/status.h) with the message.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_KERNELS_CPU_H
#define TFC_BACKENDS_CPU_KERNELS_CPU_H

#include "backends/tensor.h"
#include "tfc/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tfc::cpu {

/// A contiguous tensor in host memory (backends/tensor.h).
using Tensor = tfc::Tensor;

/// Runs kernel |kernel| (a tfc_kernel_t) on |in|, writing |out| (already shaped
/// and allocated). Bad input data (an out-of-range token id, operands that do
/// not fit the kernel) is InvalidArgument with the kernel's message.
Status runKernel(uint32_t kernel, const std::vector<const Tensor *> &in,
                      Tensor &out, const std::vector<int64_t> &ints,
                      const std::vector<double> &floats);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_KERNELS_CPU_H
