//===- kernels_cpu.h - the CPU backend's kernels for plan instructions ----===//
//
// One entry point per row of include/tfc/kernels.def: run(const CamelCall &)
// (backends/kernel_call.h), defined in the op's own file:
//
//   embedding_cpu.cc    token_embedding, embedding, positions, nopeak_mask,
//                       relative_position_bias
//   linear_cpu.cc       linear, fused_linear, matmul (linear_dnnl.cc: GEMMs)
//   pointwise_cpu.cc    add, sub, mul, div, and, not, compare, cast,
//                       masked_fill, select
//   elementwise_cpu.cc  the tfc/unary.def kernels (sqrt, relu, gelu, silu, tanh)
//   shape_cpu.cc        reshape, unsqueeze, transpose, slice
//   reduce_cpu.cc       reduce_mean, reduce_sum, softmax, log_softmax
//   layer_norm_cpu.cc   layer_norm
//   attention_cpu.cc    attention, cached_attention
//
// runKernel (kernels_cpu.cc) binds a plan instruction to its typed call,
// checks it (the schema's CPU dtypes, then backends/kernel_rules.h) and calls
// the entry point from a table indexed by kernel id. The executor has already
// computed every output's shape from the plan's symbolic dims, so kernels get
// fully shaped, contiguous, row-major tensors and only compute. They never
// throw; a kernel that can detect bad input data (an out-of-range token id)
// returns a Status (tfc/status.h) with the message.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_CPU_KERNELS_CPU_H
#define TFC_BACKENDS_CPU_KERNELS_CPU_H

#include "backends/kernel_call.h"
#include "backends/tensor.h"
#include "tfc/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tfc::cpu {

/// A contiguous tensor in host memory (backends/tensor.h).
using Tensor = tfc::Tensor;

/// Runs kernel |kernel| (a tfc_kernel_t) on |in|, writing |out| (already shaped
/// and allocated). Operands that do not fit the kernel are InvalidModel; bad
/// input data (an out-of-range token id) is InvalidArgument, with the kernel's
/// message.
Status runKernel(uint32_t kernel, const std::vector<const Tensor *> &in, Tensor &out,
                 const std::vector<int64_t> &ints, const std::vector<double> &floats);

/// The typed entry points, one per kernel (see the file comment for where
/// each lives). Their operands have passed the schema and the shape rules.
#define TFC_KERNEL(ENUM, name, Camel, ...) Status run(const tfc::Camel##Call &c);
#include "tfc/kernels.def"
#undef TFC_KERNEL

/// bf16 adapters for kernels that compute in f32: a bf16 tensor's values
/// widened into |buf|, or an f32 tensor's own data.
const float *asF32(const Tensor &t, std::vector<float> &buf);
/// Where an f32 kernel writes |out|: its own memory, or |buf| when |out| is
/// bf16 (narrowed afterwards by finishOut).
float *outF32(Tensor &out, std::vector<float> &buf);
void finishOut(Tensor &out, const std::vector<float> &buf);

} // namespace tfc::cpu

#endif // TFC_BACKENDS_CPU_KERNELS_CPU_H
