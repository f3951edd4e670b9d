//===- kernel_rules.h - what each kernel's operands must satisfy ----------===//
//
// The contract of every kernel of include/tfc/kernels.def, checked on the
// actual tensors of one call before the kernel runs: operand counts, ranks,
// shapes against each other, dtypes, and attribute ranges (axes in range, head
// counts that divide widths, permutations, finite scales). A call that passes
// never makes a kernel read or write outside its operands, whatever model.bin
// says; one that fails is rejected with a message naming the rule.
//
// Data-dependent rules (a token id out of range, a decode position beyond the
// KV cache) stay with the kernels, which check them as they read the data.
//
// Both backends check every call through this: the CPU in runKernel, the
// CUDA device before it queues a kernel.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_KERNEL_RULES_H
#define TFC_BACKENDS_KERNEL_RULES_H

#include "backends/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tfc {

/// Which backend runs the call: the float dtypes differ. The CPU computes in
/// f32, with bf16 only where include/tfc/abi.h allows it; CUDA reads and
/// writes f32, f16 or bf16 for every float operand.
enum class KernelBackend { Cpu, Cuda };

/// "" when the call satisfies |kernel|'s rules, else what is wrong, starting
/// with the kernel's name.
std::string checkKernelCall(KernelBackend backend, uint32_t kernel,
                            const std::vector<const Tensor *> &in,
                            const Tensor &out, const std::vector<int64_t> &ints,
                            const std::vector<double> &floats);

} // namespace tfc

#endif // TFC_BACKENDS_KERNEL_RULES_H
