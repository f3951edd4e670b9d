//===- kernel_rules.h - the shape relations of each kernel ----------------===//
//
// The relations between one call's operands that tfc/kernels.def cannot say:
// ranks, shapes against each other, head counts that divide widths, axes in
// range, permutations, broadcasting, and the few dtype relations between
// operands (a bf16 input to a linear needs a reduced-precision weight). Arity,
// per-operand dtypes and attribute ranges come first, from the schema
// (backends/kernel_call.h bindCall). A call that passes both never makes a
// kernel read or write outside its operands, whatever model.bin says; one that
// fails is rejected with a message naming the rule.
//
// Data-dependent rules (a token id out of range, a decode position beyond the
// KV cache) stay with the kernels, which check them as they read the data.
//
// Both backends check every call through this before it runs.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_KERNEL_RULES_H
#define TFC_BACKENDS_KERNEL_RULES_H

#include "backends/kernel_call.h"

#include <string>

namespace tfc {

/// "" when the call's operands relate as |kernel| needs, else what is wrong,
/// starting with the kernel's name.
#define TFC_KERNEL(ENUM, name, Camel, ...) std::string checkShapes(const Camel##Call &c);
#include "tfc/kernels.def"
#undef TFC_KERNEL

/// An additive attention mask broadcasts to [B, H, Sq, Sk]: its dims right-
/// aligned to rank 4 (missing leading dims 1), and its element strides along
/// q, h and b (0 on a broadcast dim). Shared by the shape rule and both
/// backends' attention calls.
std::vector<int64_t> additiveMaskDims(const Tensor &mask);
struct AdditiveMaskStrides {
  int64_t q, h, b;
};
AdditiveMaskStrides additiveMaskStrides(const Tensor &mask);

/// A slice's first row along an axis of |len|: a negative start counts from
/// the end (-1 is the last row), as decode_step's cut to the last position
/// needs for a step length known only at run time.
inline int64_t sliceStart(int64_t start, int64_t len) { return start < 0 ? start + len : start; }

} // namespace tfc

#endif // TFC_BACKENDS_KERNEL_RULES_H
