//===- tfc/kernel_schema.h - typed kernels, generated from kernels.def ----===//
//
// What tfc/kernels.def says about each kernel, as C++ that the compiler, the
// loader and both backends share (no MLIR, no backend types):
//
// - CamelAttrs: the kernel's attributes, named and typed. encode() appends
//   them to an instruction's int and float lists (the compiler), decode()
//   reads and range-checks them (the runtime, once per call).
// - CamelSlots: where each named operand sits in the instruction's input list
//   (-1 when absent), from the decoded attributes: locate() also says how many
//   inputs the instruction must have.
// - checkOperands(): arity, each operand's dtype against its set (the plan's,
//   which is the CPU's, or CUDA's), tied dtypes and weight storage. It is the
//   one dtype rule set: the loader, the CPU and CUDA all call it.
// - kernelInfo(): names, flags and dtype sets as data, for passes that ask
//   "position-wise?" or "can this operand be bf16?".
//
// Shape relations stay hand-written, in backends/kernel_rules.cc.
//
//===----------------------------------------------------------------------===//
#ifndef TFC_KERNEL_SCHEMA_H
#define TFC_KERNEL_SCHEMA_H

#include "tfc/abi.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfc::schema {

#define TFC_SCHEMA_UNPAREN(...) __VA_ARGS__

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

#define TFC_INT(n) int64_t n = 0;
#define TFC_BOOL(n) bool n = false;
#define TFC_ENUM(n, T, count) T n = static_cast<T>(0);
#define TFC_RANGE(n, lo, hi) int64_t n = lo;
#define TFC_INT_OPT(n, dflt) int64_t n = dflt;
#define TFC_BOOL_OPT(n) bool n = false;
#define TFC_INTS(n) std::vector<int64_t> n;
#define TFC_FLOAT(n) double n = 0;
#define TFC_FLOAT_NN(n) double n = 0;
#define TFC_FLOAT_OPT(n, dflt) double n = dflt;
#define TFC_KERNEL(ENUM, name, Camel, id, flags, oc, ocu, of, attrs, operands)           \
  struct Camel##Attrs {                                                                  \
    static constexpr uint32_t kKernel = id;                                              \
    TFC_SCHEMA_UNPAREN attrs                                                             \
    /** Appends the attributes in their stored order. */                                 \
    void encode(std::vector<int64_t> &ints, std::vector<double> &floats) const;          \
    /** Reads |ints| and |floats| into |a|: "" or what is wrong (no kernel name). */     \
    static std::string decode(const std::vector<int64_t> &ints,                          \
                              const std::vector<double> &floats, Camel##Attrs &a);       \
  };
#include "tfc/kernels.def"
#undef TFC_KERNEL
#undef TFC_INT
#undef TFC_BOOL
#undef TFC_ENUM
#undef TFC_RANGE
#undef TFC_INT_OPT
#undef TFC_BOOL_OPT
#undef TFC_INTS
#undef TFC_FLOAT
#undef TFC_FLOAT_NN
#undef TFC_FLOAT_OPT

//===----------------------------------------------------------------------===//
// Operand slots
//===----------------------------------------------------------------------===//

/// The dtype of input |i|, or UINT32_MAX when there is none: what a gate such
/// as "the weight is i8" reads.
struct InputDtypes {
  const uint32_t *dtypes;
  size_t count;
  uint32_t operator()(int32_t i) const {
    return i >= 0 && (size_t)i < count ? dtypes[i] : UINT32_MAX;
  }
};

#define TFC_ARG(n, present, cpu, cuda, flags) int32_t n = -1;
#define TFC_KERNEL(ENUM, name, Camel, id, flags, oc, ocu, of, attrs, operands)           \
  struct Camel##Slots {                                                                  \
    TFC_SCHEMA_UNPAREN operands                                                          \
    /** Places the operands that |a| says are present; returns how many inputs the       \
        instruction has. */                                                              \
    static uint32_t locate(const Camel##Attrs &a, const InputDtypes &dt, Camel##Slots &s); \
  };
#include "tfc/kernels.def"
#undef TFC_KERNEL
#undef TFC_ARG

//===----------------------------------------------------------------------===//
// The schema as data
//===----------------------------------------------------------------------===//

enum class Backend { Cpu, Cuda };

struct OperandInfo {
  const char *name;
  uint32_t cpu, cuda; ///< TFC_DTS_* sets; the CPU's is also the plan's
  uint32_t flags;     ///< TFC_AF_*
  uint32_t set(Backend b) const { return b == Backend::Cpu ? cpu : cuda; }
};

struct KernelInfo {
  uint32_t id;
  const char *name;
  uint32_t flags; ///< TFC_KF_*
  OperandInfo out;
  const OperandInfo *operands; ///< in stored order, the optional ones included
  uint32_t numOperands;
};

/// The schema row of |kernel|, or null for an unknown id.
const KernelInfo *kernelInfo(uint32_t kernel);

/// The dtypes and storage of one instruction's operands, as the loader or a
/// backend sees them.
struct OperandDtypes {
  const uint32_t *in; ///< one per input
  size_t count;
  uint32_t out;
  /// Per input, whether it is stored in model.bin (a weight); null when the
  /// caller does not know (the backends), which skips that rule.
  const uint8_t *isWeight = nullptr;
};

/// The instruction's attributes, arity and dtypes against |kernel|'s row on
/// |backend|: "" or what is wrong, starting with the kernel's name.
std::string checkOperands(Backend backend, uint32_t kernel, const std::vector<int64_t> &ints,
                          const std::vector<double> &floats, const OperandDtypes &d);

/// Which input of the instruction is |kernel|'s operand named |operand|, or -1
/// (absent, unknown, or attributes that do not decode).
int32_t operandIndex(uint32_t kernel, const char *operand, const std::vector<int64_t> &ints,
                     const std::vector<double> &floats, const InputDtypes &dt);

/// The schema row of input |i| of the instruction, or null when it has none.
const OperandInfo *operandRow(uint32_t kernel, size_t i, const std::vector<int64_t> &ints,
                              const std::vector<double> &floats, const InputDtypes &dt);

/// The name of input |i| of the instruction ("weight"), or "" when it has none.
const char *operandName(uint32_t kernel, size_t i, const std::vector<int64_t> &ints,
                        const std::vector<double> &floats, const InputDtypes &dt);

/// The unary.def kernel and its mode that activation |act| applies; false for
/// TFC_ACT_NONE or an unknown value.
bool activationUnary(int64_t act, uint32_t *kernel, int64_t *mode);

} // namespace tfc::schema

#endif // TFC_KERNEL_SCHEMA_H
