//===- TfcKernels.cpp - the plan kernel of each tfc op --------------------===//
//
// KernelOpInterface (TfcInterfaces.td): the attributes each kernel reads, in
// the order the runtime decodes them (the comments in include/tfc/abi.h). Ops
// whose kernel reads no attributes use the interface's default. The checks at
// the end tie the ops' kernel ids to include/tfc/kernels.def at compile time.
//
//===----------------------------------------------------------------------------===//
#include "ir/TfcDialect.h"

#include "tfc/kernel_schema.h"

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

namespace sc = ::tfc::schema;

void TokenEmbeddingOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                              std::vector<double> &floats) {
  sc::TokenEmbeddingAttrs a;
  a.position_axis = (int64_t)getPositionAxis();
  a.has_positions = (bool)getPositions();
  a.has_type_ids = (bool)getTypeIds();
  a.has_offset = (bool)getPositionOffset();
  a.scale = getScale().convertToDouble();
  a.encode(ints, floats);
}

void LinearOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  sc::LinearAttrs a;
  a.has_bias = (bool)getBias();
  a.encode(ints, floats);
}

void FusedLinearOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                           std::vector<double> &floats) {
  sc::FusedLinearAttrs a;
  a.has_bias = (bool)getBias();
  a.has_residual = (bool)getResidual();
  a.activation = static_cast<tfc_act_t>(getActivation());
  a.has_multiplier = (bool)getMultiplier();
  a.encode(ints, floats);
}

void MatmulOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  sc::MatmulAttrs a;
  a.transpose_b = getTransposeB();
  a.encode(ints, floats);
}

void CompareOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  sc::CompareAttrs a;
  a.predicate = static_cast<tfc_cmp_t>(getPredicate());
  a.encode(ints, floats);
}

void MaskedFillOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                          std::vector<double> &floats) {
  sc::MaskedFillAttrs a;
  a.value = getValue().convertToDouble();
  a.encode(ints, floats);
}

void TransposeOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  sc::TransposeAttrs a;
  a.perm.assign(getPerm().begin(), getPerm().end());
  a.encode(ints, floats);
}

void SliceOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  sc::SliceAttrs a;
  a.axis = kernelAxis(*this, (int64_t)getAxis());
  a.start = (int64_t)getStart();
  a.size = (int64_t)getSize();
  a.encode(ints, floats);
}

/// Reductions and softmaxes: an axis in the kernel's range (and keepdim).
template <typename AttrsT, typename OpT>
static void encodeAxis(OpT op, std::vector<int64_t> &ints, std::vector<double> &floats) {
  AttrsT a;
  a.axis = kernelAxis(op, (int64_t)op.getAxis());
  if constexpr (std::is_same_v<AttrsT, sc::ReduceMeanAttrs> ||
                std::is_same_v<AttrsT, sc::ReduceSumAttrs>)
    a.keepdim = op.getKeepdim();
  a.encode(ints, floats);
}

void ReduceMeanOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                          std::vector<double> &floats) {
  encodeAxis<sc::ReduceMeanAttrs>(*this, ints, floats);
}

void ReduceSumOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  encodeAxis<sc::ReduceSumAttrs>(*this, ints, floats);
}

void SoftmaxOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  encodeAxis<sc::SoftmaxAttrs>(*this, ints, floats);
}

void LogSoftmaxOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                          std::vector<double> &floats) {
  encodeAxis<sc::LogSoftmaxAttrs>(*this, ints, floats);
}

void GeluOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  sc::GeluAttrs a;
  a.approximate = static_cast<tfc_gelu_t>(getApproximate());
  a.encode(ints, floats);
}

void LayerNormOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  sc::LayerNormAttrs a;
  a.variant = static_cast<tfc_norm_t>(getVariant());
  a.eps = getEps().convertToDouble();
  a.encode(ints, floats);
}

void AttentionOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  sc::AttentionAttrs a;
  a.mask_kind = static_cast<tfc_mask_t>(getMaskKind());
  a.num_heads = (int64_t)getNumHeads();
  a.pad_id = (int64_t)getPadId();
  a.has_bias = (bool)getPositionBias();
  if (a.has_bias) {
    a.bidirectional = getBiasBidirectional();
    a.max_distance = (int64_t)getBiasMaxDistance();
  }
  a.num_kv_heads = (int64_t)getNumKvHeads();
  a.window = (int64_t)getWindow();
  a.has_block_table = (bool)getBlockTable();
  a.scale = getScale().convertToDouble();
  a.mask_value = getMaskValue().convertToDouble();
  a.softcap = getSoftcap().convertToDouble();
  a.encode(ints, floats);
}

void CachedAttentionOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                               std::vector<double> &floats) {
  sc::CachedAttentionAttrs a;
  a.num_heads = (int64_t)getNumHeads();
  a.has_bias = (bool)getPositionBias();
  if (a.has_bias) {
    a.bidirectional = getBiasBidirectional();
    a.max_distance = (int64_t)getBiasMaxDistance();
  }
  a.has_block_table = (bool)getBlockTable();
  a.num_kv_heads = (int64_t)getNumKvHeads();
  a.window = (int64_t)getWindow();
  a.has_rotary = (bool)getInvFreq();
  a.rotary_interleaved = a.has_rotary && getRotaryInterleaved();
  a.scale = getScale().convertToDouble();
  a.softcap = getSoftcap().convertToDouble();
  a.encode(ints, floats);
}

void RotaryOp::appendKernelAttributes(std::vector<int64_t> &ints, std::vector<double> &floats) {
  sc::RotaryAttrs a;
  a.head_dim = (int64_t)getHeadDim();
  a.interleaved = getInterleaved();
  a.has_offset = (bool)getOffset();
  a.encode(ints, floats);
}

void RelativePositionBiasOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                                    std::vector<double> &floats) {
  sc::RelativePositionBiasAttrs a;
  a.bidirectional = getBidirectional();
  a.max_distance = (int64_t)getMaxDistance();
  a.encode(ints, floats);
}

void PositionsOp::appendKernelAttributes(std::vector<int64_t> &ints,
                                         std::vector<double> &floats) {
  sc::PositionsAttrs a;
  a.axis = kernelAxis(*this, (int64_t)getAxis());
  if (IntegerAttr pad = getPaddingIdxAttr())
    a.padding_idx = pad.getInt(); // RoBERTa's padded positions: ids is an input
  a.encode(ints, floats);
}

//===----------------------------------------------------------------------------===//
// The enums of include/tfc/enums.def are the ODS enums' cases
//===----------------------------------------------------------------------------===//

#define TFC_MASK(ENUM, ods, value)                                                       \
  static_assert((int)MaskKind::ods == TFC_MASK_##ENUM && TFC_MASK_##ENUM == value,       \
                "tfc/enums.def and MaskKind (TfcOps.td) differ");
#define TFC_NORM(ENUM, ods, value)                                                       \
  static_assert((int)NormVariant::ods == TFC_NORM_##ENUM && TFC_NORM_##ENUM == value,    \
                "tfc/enums.def and NormVariant (TfcOps.td) differ");
#define TFC_CMP(ENUM, ods, value)                                                        \
  static_assert((int)CmpPredicate::ods == TFC_CMP_##ENUM && TFC_CMP_##ENUM == value,     \
                "tfc/enums.def and CmpPredicate (TfcOps.td) differ");
#define TFC_GELU(ENUM, ods, value)                                                       \
  static_assert((int)GeluApprox::ods == TFC_GELU_##ENUM && TFC_GELU_##ENUM == value,     \
                "tfc/enums.def and GeluApprox (TfcOps.td) differ");
#define TFC_ACTIVATION(ENUM, ods, value, UNARY, mode)                                    \
  static_assert((int)Activation::ods == TFC_ACT_##ENUM && TFC_ACT_##ENUM == value,       \
                "tfc/enums.def and Activation (TfcOps.td) differ");
#include "tfc/enums.def"

// And each ODS enum has no case that enums.def lacks: its largest value is the
// last row's.
static_assert((int)getMaxEnumValForMaskKind() == TFC_MASK_COUNT - 1, "MaskKind has a case enums.def lacks");
static_assert((int)getMaxEnumValForNormVariant() == TFC_NORM_COUNT - 1,
              "NormVariant has a case enums.def lacks");
static_assert((int)getMaxEnumValForCmpPredicate() == TFC_CMP_COUNT - 1,
              "CmpPredicate has a case enums.def lacks");
static_assert((int)getMaxEnumValForGeluApprox() == TFC_GELU_COUNT - 1,
              "GeluApprox has a case enums.def lacks");
static_assert((int)getMaxEnumValForActivation() == TFC_ACT_COUNT - 1,
              "Activation has a case enums.def lacks");

//===----------------------------------------------------------------------------===//
// Checks against include/tfc/kernels.def
//===----------------------------------------------------------------------------===//

namespace {

/// Whether kernels.def has a row with id |id|.
constexpr bool isKernelDefRow(uint32_t id) {
  switch (id) {
#define TFC_KERNEL(ENUM, name, Camel, id, ...)                                           \
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
