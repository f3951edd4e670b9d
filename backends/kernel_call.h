//===- backends/kernel_call.h - typed kernel calls, from kernels.def ------===//
//
// What a backend's kernel receives: CamelCall, one struct per row of
// include/tfc/kernels.def, with the decoded attributes (tfc/kernel_schema.h)
// and each operand by name (null when the row says it is absent). Both
// backends run a plan instruction the same way:
//
//   RawCall (kernel id, inputs, output, ints, floats)
//     -> bindCall: schema::checkOperands on the backend's dtype sets, decode,
//        place the operands by name
//     -> checkShapes (backends/kernel_rules.h): the shape relations
//     -> the backend's run(const CamelCall &), from a table indexed by id.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_BACKENDS_KERNEL_CALL_H
#define TFC_BACKENDS_KERNEL_CALL_H

#include "backends/tensor.h"
#include "tfc/kernel_schema.h"
#include "tfc/status.h"

#include <vector>

namespace tfc {

#define TFC_ARG(n, present, cpu, cuda, flags) const Tensor *n = nullptr;
#define TFC_KERNEL(ENUM, name, Camel, id, flags, oc, ocu, of, A_, O_)           \
  struct Camel##Call {                                                                   \
    static constexpr uint32_t kKernel = id;                                              \
    static constexpr const char *kName = #name;                                          \
    schema::Camel##Attrs attrs;                                                          \
    TFC_SCHEMA_UNPAREN O_                                                          \
    Tensor *out = nullptr;                                                               \
  };
#include "tfc/kernels.def"
#undef TFC_KERNEL
#undef TFC_ARG

/// One plan instruction as the executor hands it over.
struct RawCall {
  uint32_t kernel;
  const std::vector<const Tensor *> &in;
  Tensor &out;
  const std::vector<int64_t> &ints;
  const std::vector<double> &floats;
};

/// Checks |r| against its row of kernels.def on |backend| (arity, dtypes,
/// attribute ranges) and fills |c|. An invalid-model status names the kernel.
#define TFC_KERNEL(ENUM, name, Camel, id, ...)                                           \
  Status bindCall(schema::Backend backend, const RawCall &r, Camel##Call &c);
#include "tfc/kernels.def"
#undef TFC_KERNEL

/// A backend's table of typed entry points, indexed by kernel id: |Entry| is
/// Status (*)(Ctx &, const RawCall &). Each row binds its CamelCall and hands
/// it to Run::run (after the shape rules). Used as
///   static const auto table = makeKernelTable<Ctx, Runner>(backend);
template <typename Ctx> using KernelEntry = Status (*)(Ctx &, const RawCall &);

} // namespace tfc

#endif // TFC_BACKENDS_KERNEL_CALL_H
