//===- TfcKernels.cpp - the plan kernel of each tfc op --------------------===//
//
// KernelOpInterface (TfcInterfaces.td): the attributes each kernel reads, in
// the order the runtime decodes them (the comments in include/tfc/abi.h). Ops
// whose kernel reads no attributes use the interface's default. The checks at
// the end tie the ops' kernel ids to include/tfc/kernels.def at compile time.
//
//===----------------------------------------------------------------------------===//
#include "ir/TfcDialect.h"

#include "llvm/Support/ErrorHandling.h"

#include <string>
#include <type_traits>

using namespace mlir;
using namespace mlir::tfc;

#include "ir/TfcInterfaces.cpp.inc"

/// An axis attribute as the kernel reads it: in [0, rank of the first operand).
static int64_t kernelAxis(Operation *op, int64_t axis) {
  return normalizeAxis(axis, op->getOperand(0).getType().cast<RankedTensorType>().getRank());
}

void TokenEmbeddingOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                              std::vector<double> &floats) {
  ints.insert(ints.end(), {(int64_t)getPositionAxis(), getPositions() ? 1 : 0,
                           getTypeIds() ? 1 : 0, getPositionOffset() ? 1 : 0});
  floats.push_back(getScale().convertToDouble());
}

void LinearOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.push_back(getBias() ? 1 : 0);
}

void FusedLinearOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                           std::vector<double> &) {
  ints.insert(ints.end(),
              {getBias() ? 1 : 0, getResidual() ? 1 : 0, (int64_t)getActivation()});
}

void MatmulOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.push_back(getTransposeB() ? 1 : 0);
}

void CompareOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.push_back((int64_t)getPredicate());
}

void MaskedFillOp::appendKernelAttributes(std::vector<int64_t> &,
                                          std::vector<double> &floats) {
  floats.push_back(getValue().convertToDouble());
}

void TransposeOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.insert(ints.end(), getPerm().begin(), getPerm().end());
}

void SliceOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.insert(ints.end(), {kernelAxis(*this, (int64_t)getAxis()), (int64_t)getStart(),
                           (int64_t)getSize()});
}

void ReduceMeanOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                          std::vector<double> &) {
  ints.insert(ints.end(), {kernelAxis(*this, (int64_t)getAxis()), getKeepdim() ? 1 : 0});
}

void ReduceSumOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &) {
  ints.insert(ints.end(), {kernelAxis(*this, (int64_t)getAxis()), getKeepdim() ? 1 : 0});
}

void GeluOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.push_back((int64_t)getApproximate());
}

void SoftmaxOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.push_back(kernelAxis(*this, (int64_t)getAxis()));
}

void LogSoftmaxOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                          std::vector<double> &) {
  ints.push_back(kernelAxis(*this, (int64_t)getAxis()));
}

void LayerNormOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  ints.push_back((int64_t)getVariant());
  floats.push_back(getEps().convertToDouble());
}

void AttentionOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  ints.insert(ints.end(),
              {(int64_t)getMaskKind(), (int64_t)getNumHeads(), (int64_t)getPadId()});
  if (getPositionBias()) // the table is the last input (abi.h)
    ints.insert(ints.end(), {1, getBiasBidirectional() ? 1 : 0, (int64_t)getBiasMaxDistance()});
  floats.insert(floats.end(),
                {getScale().convertToDouble(), getMaskValue().convertToDouble()});
}

void CachedAttentionOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                               std::vector<double> &floats) {
  ints.push_back((int64_t)getNumHeads());
  if (getPositionBias())
    ints.insert(ints.end(), {1, getBiasBidirectional() ? 1 : 0, (int64_t)getBiasMaxDistance()});
  floats.push_back(getScale().convertToDouble());
}

void RelativePositionBiasOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                                    std::vector<double> &) {
  ints.insert(ints.end(), {getBidirectional() ? 1 : 0, (int64_t)getMaxDistance()});
}

void PositionsOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &) {
  ints.push_back(kernelAxis(*this, (int64_t)getAxis()));
  if (IntegerAttr pad = getPaddingIdxAttr())
    ints.push_back(pad.getInt()); // a second int: RoBERTa's padded positions (abi.h)
}

//===----------------------------------------------------------------------------===//
// Checks against include/tfc/kernels.def
//===----------------------------------------------------------------------------===//

namespace {

/// Whether kernels.def has a row with id |id|.
constexpr bool isKernelDefRow(uint32_t id) {
  switch (id) {
#define TFC_KERNEL(ENUM, name, id, in, ints, floats)                                     \
  case id:                                                                               \
    return true;
#include "tfc/kernels.def"
#undef TFC_KERNEL
  default:
    return false;
  }
}

template <typename OpT, typename = void>
struct HasKernelId : std::false_type {};
template <typename OpT>
struct HasKernelId<OpT, std::void_t<decltype(OpT::kKernelId)>> : std::true_type {};

/// The kernel id of OpT, or UINT32_MAX for an op without one.
template <typename OpT>
constexpr uint32_t kernelIdOf() {
  if constexpr (HasKernelId<OpT>::value)
    return OpT::kKernelId;
  else
    return UINT32_MAX;
}

/// Every op's KernelId is a row of kernels.def, no two ops share one, and
/// there are as many such ops as rows: each row has exactly one op.
template <typename... Ops>
constexpr bool kernelIdsCoverTheTable() {
  constexpr uint32_t ids[] = {kernelIdOf<Ops>()...};
  unsigned count = 0;
  for (size_t i = 0; i < sizeof...(Ops); ++i) {
    if (ids[i] == UINT32_MAX)
      continue;
    if (!isKernelDefRow(ids[i]))
      return false;
    for (size_t j = 0; j < i; ++j)
      if (ids[j] == ids[i])
        return false;
    ++count;
  }
  return count == TFC_KERNEL_COUNT;
}

/// The ops whose KernelId row is not named as the op: "tfc.<name>".
template <typename... Ops>
std::string opsNotNamedAsTheirKernel() {
  std::string bad;
  auto check = [&](StringRef opName, uint32_t id) {
    if (id != UINT32_MAX && opName != (Twine("tfc.") + tfc_kernel_name(id)).str())
      bad += (Twine(" ") + opName + " (" + tfc_kernel_name(id) + ")").str();
  };
  (check(Ops::getOperationName(), kernelIdOf<Ops>()), ...);
  return bad;
}

} // namespace

static_assert(kernelIdsCoverTheTable<
#define GET_OP_LIST
#include "ir/TfcOps.cpp.inc"
                  >(),
              "the tfc ops' KernelIds and the rows of include/tfc/kernels.def differ: "
              "each row needs exactly one op");

void mlir::tfc::checkKernelNames() {
  // A string comparison, which C++17 cannot do at compile time on an op name.
  std::string bad = opsNotNamedAsTheirKernel<
#define GET_OP_LIST
#include "ir/TfcOps.cpp.inc"
      >();
  if (!bad.empty())
    llvm::report_fatal_error("tfc ops with another op's kernel id (kernels.def):" +
                             Twine(bad));
}
