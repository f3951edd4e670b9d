//===- TfcInterfaces.td - how a tfc op becomes a plan kernel ---*- tablegen -*-===//
//
// KernelOpInterface is the one place that says which runtime kernel an op runs
// as and which attributes that kernel reads. The plan writer asks the interface;
// an op without it has no kernel (it is evaluated at compile time, or rejected).
//
//===----------------------------------------------------------------------------===//

#ifndef TFC_INTERFACES_TD
#define TFC_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Tfc_KernelOpInterface : OpInterface<"KernelOpInterface"> {
  let cppNamespace = "::mlir::tfc";
  let description = [{
    An op that runs as one instruction of a model.bin plan. Its kernel id is a
    row of include/tfc/kernels.def, given by the op's `KernelId` trait
    (`Tfc_KernelOp<"add", "ADD">` in TfcOps.td); its int and float attributes
    are appended in the order the runtime decodes them (the comments in
    include/tfc/abi.h). The default appends none, so an elementwise op with no
    attributes only needs its line in TfcOps.td.
  }];
  let methods = [
    InterfaceMethod<
      "The plan kernel this op runs as (a tfc_kernel_t).",
      "uint32_t", "getKernelId", (ins), [{}],
      [{ return ConcreteOp::kKernelId; }]>,
    InterfaceMethod<
      "Appends the kernel's int and float attributes, in the runtime's order.",
      "void", "appendKernelAttributes",
      (ins "std::vector<int64_t> &":$ints, "std::vector<double> &":$floats), [{}],
      [{ (void)ints; (void)floats; }]>,
  ];
}

// The kernel id of an op: `KernelId<TFC_KERNEL_<kernel>>` (ir/TfcInterfaces.h),
// which gives the op `static constexpr uint32_t kKernelId`.
class Tfc_KernelId<string kernel>
    : ParamNativeOpTrait<"KernelId", "TFC_KERNEL_" # kernel> {
  let cppNamespace = "::mlir::tfc";
}

#endif // TFC_INTERFACES_TD
