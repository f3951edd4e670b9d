//===- TfcInterfaces.h - how a tfc op becomes a plan kernel ---------------===//
//
// KernelOpInterface (TfcInterfaces.td) and the KernelId trait that carries an
// op's row of include/tfc/kernels.def.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_IR_TFCINTERFACES_H
#define TFC_IR_TFCINTERFACES_H

#include "tfc/abi.h"

#include "mlir/IR/OpDefinition.h"

#include <cstdint>
#include <vector>

namespace mlir::tfc {
/// The plan kernel an op runs as: a tfc_kernel_t from include/tfc/kernels.def.
/// ir/TfcKernels.cpp checks at compile time that each row has exactly one op,
/// and checkKernelNames() that op `tfc.<name>` has the row named <name>.
template <uint32_t Id>
struct KernelId {
  template <typename ConcreteOp>
  class Impl : public OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static constexpr uint32_t kKernelId = Id;
  };
};

/// Aborts if a tfc op carries the kernel id of a kernels.def row named other
/// than the op (a typo in TfcOps.td); the dialect runs it when it loads.
void checkKernelNames();
} // namespace mlir::tfc

#include "ir/TfcInterfaces.h.inc"

#endif // TFC_IR_TFCINTERFACES_H
