//===- TfcOps.cpp - tfc op shape inference, verifiers and folders ---------===//
//
// Every tfc op infers its result type (InferTypeOpInterface). The interface's
// verifier compares the written type with the inferred one, so shape rules live in
// exactly one place: the inferReturnTypes functions below. Checks that are not
// about the result type (attribute ranges, mask operands) are in the verifiers.
// The attention ops are in TfcAttentionOps.cpp; the helpers both files use, in
// TfcOpsInternal.h.
//
//===----------------------------------------------------------------------------===//
#include "ir/TfcDialect.h"
#include "ir/TfcOpsInternal.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace mlir::tfc;
using namespace mlir::tfc::opdetail;

static std::string dimsToString(ArrayRef<int64_t> shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += shape[i] == kDyn ? "?" : std::to_string(shape[i]);
  }
  return s;
}

namespace mlir::tfc {

int64_t normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : axis;
}

LogicalResult broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                              SmallVectorImpl<int64_t> &out,
                              std::optional<Location> loc) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else if (da == kDyn)
      out[i] = db; // a symbolic dim meets a concrete one: it must equal it
    else if (db == kDyn)
      out[i] = da;
    else if (da == db)
      out[i] = da;
    else
      return emitOptionalError(loc, "shapes [", dimsToString(a), "] and [",
                               dimsToString(b), "] do not broadcast (dim ", i,
                               ": ", da, " vs ", db, ")");
  }
  return success();
}

} // namespace mlir::tfc

//===----------------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------------===//

namespace {

LogicalResult inferBroadcast(std::optional<Location> loc, ValueRange operands,
                             Type resultElem, SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    SmallVector<int64_t> next;
    if (failed(broadcastShapes(shape, rankedOf(v).getShape(), next, loc)))
      return failure();
    shape = next;
  }
  return pushTensor(types, shape, resultElem);
}
} // namespace

//===----------------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------------===//

TFC_INFER(WeightOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  types.push_back(a.getType());
  return success();
}

LogicalResult WeightOp::verify() {
  auto t = getType().dyn_cast<RankedTensorType>();
  if (!t || !t.hasStaticShape())
    return emitOpError("weight '") << getName() << "' must have a static shape";
  if (getName().empty())
    return emitOpError("weight name must not be empty");
  return success();
}

TFC_INFER(ConstantOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  types.push_back(a.getValue().getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

TFC_INFER(SinusoidTableOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  return pushTensor(types, {(int64_t)a.getRows(), (int64_t)a.getDim()},
                    Float32Type::get(ctx));
}

LogicalResult SinusoidTableOp::verify() {
  if ((int64_t)getRows() <= 0)
    return emitOpError("rows must be positive, got ") << (int64_t)getRows();
  if ((int64_t)getDim() <= 0 || getDim() % 2 != 0)
    return emitOpError("dim must be positive and even (sin/cos pairs), got ")
           << (int64_t)getDim();
  return success();
}

TFC_INFER(PositionsOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto in = rankedOf(a.getInput());
  int64_t axis = normalizeAxis((int64_t)a.getAxis(), in.getRank());
  if (axis < 0)
    return emitOptionalError(loc, "axis ", (int64_t)a.getAxis(),
                             " is out of range for rank ", in.getRank());
  if (IntegerAttr pad = a.getPaddingIdxAttr()) { // signed: I64Attr's getter is unsigned
    if (in.getRank() != 2 || axis != 1)
      return emitOptionalError(loc, "positions with padding_idx need [batch, seq] ids and "
                                    "axis 1");
    if (pad.getInt() < 0)
      return emitOptionalError(loc, "padding_idx must be >= 0, got ", pad.getInt());
    return pushTensor(types, in.getShape(), IntegerType::get(ctx, 64));
  }
  SmallVector<int64_t> shape(in.getRank(), 1);
  shape[axis] = in.getDimSize(axis);
  return pushTensor(types, shape, IntegerType::get(ctx, 64));
}

TFC_INFER(NopeakMaskOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto in = rankedOf(a.getInput());
  if (in.getRank() != 2)
    return emitOptionalError(loc, "nopeak_mask expects [batch, seq] ids, got rank ",
                             in.getRank());
  int64_t s = in.getDimSize(1);
  return pushTensor(types, {1, s, s}, IntegerType::get(ctx, 1));
}

//===----------------------------------------------------------------------------===//
// Primitive ops
//===----------------------------------------------------------------------------===//

TFC_INFER(EmbeddingOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto table = rankedOf(a.getTable());
  auto ids = rankedOf(a.getIds());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "embedding table must be [vocab, dim], got rank ",
                             table.getRank());
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  return pushTensor(types, shape, table.getElementType());
}

TFC_INFER(LinearOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto x = rankedOf(a.getInput());
  auto w = rankedOf(a.getWeight());
  if (w.getRank() != 2)
    return emitOptionalError(loc, "linear weight must be [out, in], got [",
                             dimsToString(w.getShape()), "]");
  if (x.getRank() < 1)
    return emitOptionalError(loc, "linear input must have rank >= 1");
  int64_t k = x.getDimSize(x.getRank() - 1);
  if (!dimsAgree(k, w.getDimSize(1)))
    return emitOptionalError(loc, "linear input has ", k,
                             " features but the weight [",
                             dimsToString(w.getShape()), "] expects ",
                             w.getDimSize(1));
  if (a.getBias()) {
    auto b = rankedOf(a.getBias());
    if (b.getRank() != 1 || !dimsAgree(b.getDimSize(0), w.getDimSize(0)))
      return emitOptionalError(loc, "linear bias [", dimsToString(b.getShape()),
                               "] does not match ", w.getDimSize(0),
                               " output features");
  }
  if (x.getElementType() != w.getElementType())
    return emitOptionalError(loc, "linear input and weight element types differ");
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = w.getDimSize(0);
  return pushTensor(types, shape, x.getElementType());
}

TFC_INFER(MatmulOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto l = rankedOf(a.getLhs());
  auto r = rankedOf(a.getRhs());
  if (l.getRank() < 2 || r.getRank() < 2)
    return emitOptionalError(loc, "matmul operands must have rank >= 2, got ",
                             l.getRank(), " and ", r.getRank());
  if (l.getElementType() != r.getElementType())
    return emitOptionalError(loc, "matmul operand element types differ");
  // Read defaulted attributes from the dictionary: during inference the
  // attribute may be absent, and the adaptor does not fill in defaults.
  auto tbAttr = attrs ? attrs.get("transpose_b").dyn_cast_or_null<BoolAttr>() : BoolAttr();
  bool tb = tbAttr && tbAttr.getValue();
  int64_t m = l.getDimSize(l.getRank() - 2), k = l.getDimSize(l.getRank() - 1);
  int64_t k2 = r.getDimSize(r.getRank() - (tb ? 1 : 2));
  int64_t n = r.getDimSize(r.getRank() - (tb ? 2 : 1));
  if (!dimsAgree(k, k2))
    return emitOptionalError(loc, "matmul contracting dims differ: [",
                             dimsToString(l.getShape()), "] x [",
                             dimsToString(r.getShape()), "]",
                             tb ? " (transpose_b)" : "");
  SmallVector<int64_t> batch;
  if (failed(broadcastShapes(l.getShape().drop_back(2), r.getShape().drop_back(2),
                             batch, loc)))
    return failure();
  batch.push_back(m);
  batch.push_back(n);
  return pushTensor(types, batch, l.getElementType());
}

static LogicalResult inferArith(std::optional<Location> loc, ValueRange operands,
                                SmallVectorImpl<Type> &types) {
  Type el = rankedOf(operands[0]).getElementType();
  if (el != rankedOf(operands[1]).getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             rankedOf(operands[0]), " vs ", rankedOf(operands[1]));
  return inferBroadcast(loc, operands, el, types);
}

TFC_INFER(AddOp) { return inferArith(loc, operands, types); }
TFC_INFER(SubOp) { return inferArith(loc, operands, types); }
TFC_INFER(MulOp) { return inferArith(loc, operands, types); }
TFC_INFER(DivOp) { return inferArith(loc, operands, types); }
TFC_INFER(AndOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  if (!rankedOf(operands[0]).getElementType().isInteger(1))
    return emitOptionalError(loc, "'and' expects i1 operands");
  return inferArith(loc, operands, types);
}

TFC_INFER(CompareOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  if (rankedOf(a.getLhs()).getElementType() != rankedOf(a.getRhs()).getElementType())
    return emitOptionalError(loc, "compare operand element types differ");
  return inferBroadcast(loc, {a.getLhs(), a.getRhs()}, IntegerType::get(ctx, 1),
                        types);
}

TFC_INFER(NotOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  types.push_back(operands[0].getType());
  return success();
}

TFC_INFER(CastOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  return pushTensor(types, rankedOf(a.getInput()).getShape(), a.getElementType());
}

TFC_INFER(MaskedFillOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  return inferBroadcast(loc, {a.getInput(), a.getMask()},
                        rankedOf(a.getInput()).getElementType(), types);
}

TFC_INFER(SelectOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  Type el = rankedOf(a.getOnTrue()).getElementType();
  if (el != rankedOf(a.getOnFalse()).getElementType())
    return emitOptionalError(loc, "select branches have different element types");
  return inferBroadcast(loc, operands, el, types);
}

TFC_INFER(ReshapeOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto in = rankedOf(a.getInput());
  ArrayRef<int64_t> spec = a.getShape();
  SmallVector<int64_t> out(spec.size());
  SmallVector<bool> copied(in.getRank(), false);
  int inferIdx = -1;
  int64_t knownOut = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t s = spec[i];
    if (s == 0) {
      if ((int64_t)i >= in.getRank())
        return emitOptionalError(loc, "reshape: 0 at index ", i,
                                 " has no input dim to copy");
      out[i] = in.getDimSize(i);
      copied[i] = true;
    } else if (s == -1) {
      if (inferIdx >= 0)
        return emitOptionalError(loc, "reshape: more than one -1 in the shape");
      inferIdx = i;
    } else if (s > 0) {
      out[i] = s;
      knownOut *= s;
    } else {
      return emitOptionalError(loc, "reshape: invalid dim ", s);
    }
  }
  // Elements not accounted for by copied dims must match across the reshape.
  int64_t rest = 1;
  bool restStatic = true;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (copied[i])
      continue;
    if (in.getDimSize(i) == kDyn)
      restStatic = false;
    else
      rest *= in.getDimSize(i);
  }
  if (inferIdx >= 0) {
    if (!restStatic) {
      out[inferIdx] = kDyn;
    } else if (rest % knownOut != 0) {
      return emitOptionalError(loc, "reshape: cannot infer -1: ", rest,
                               " elements are not divisible by ", knownOut);
    } else {
      out[inferIdx] = rest / knownOut;
    }
  } else if (restStatic && rest != knownOut) {
    return emitOptionalError(loc, "reshape: input [", dimsToString(in.getShape()),
                             "] cannot become [", dimsToString(spec), "]");
  }
  return pushTensor(types, out, in.getElementType());
}

TFC_INFER(TransposeOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto in = rankedOf(a.getInput());
  ArrayRef<int64_t> perm = a.getPerm();
  if ((int64_t)perm.size() != in.getRank())
    return emitOptionalError(loc, "transpose: perm has ", perm.size(),
                             " entries for rank ", in.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen[p])
      return emitOptionalError(loc, "transpose: perm [", dimsToString(perm),
                               "] is not a permutation");
    seen[p] = true;
    out.push_back(in.getDimSize(p));
  }
  return pushTensor(types, out, in.getElementType());
}

TFC_INFER(UnsqueezeOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto in = rankedOf(a.getInput());
  int64_t axis = normalizeAxis((int64_t)a.getAxis(), in.getRank() + 1);
  if (axis < 0)
    return emitOptionalError(loc, "unsqueeze: axis ", (int64_t)a.getAxis(),
                             " is out of range for rank ", in.getRank());
  SmallVector<int64_t> out(in.getShape());
  out.insert(out.begin() + axis, 1);
  return pushTensor(types, out, in.getElementType());
}

TFC_INFER(ConcatOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  if (operands.empty())
    return emitOptionalError(loc, "concat needs at least one input");
  auto first = rankedOf(operands[0]);
  int64_t axis = normalizeAxis((int64_t)a.getAxis(), first.getRank());
  if (axis < 0)
    return emitOptionalError(loc, "concat: axis out of range");
  SmallVector<int64_t> out(first.getShape());
  for (Value v : operands.drop_front()) {
    auto t = rankedOf(v);
    if (t.getRank() != first.getRank() || t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "concat inputs differ in rank or element type");
    for (int64_t i = 0; i < t.getRank(); ++i) {
      if (i == axis) {
        out[i] = (out[i] == kDyn || t.getDimSize(i) == kDyn) ? kDyn
                                                              : out[i] + t.getDimSize(i);
      } else if (!dimsAgree(out[i], t.getDimSize(i))) {
        return emitOptionalError(loc, "concat inputs differ in dim ", i);
      }
    }
  }
  return pushTensor(types, out, first.getElementType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  // concat(slice(W, a, n), slice(W, a+n, m), ...) covering all of W along the
  // same axis folds back to W (a packed checkpoint weight split then re-packed).
  Value source;
  int64_t next = 0;
  int64_t axis = normalizeAxis((int64_t)getAxis(), getType().cast<RankedTensorType>().getRank());
  for (Value in : getInputs()) {
    auto s = in.getDefiningOp<SliceOp>();
    if (!s || (source && s.getInput() != source) ||
        normalizeAxis((int64_t)s.getAxis(), getType().cast<RankedTensorType>().getRank()) != axis ||
        (int64_t)s.getStart() != next)
      return {};
    source = s.getInput();
    next += (int64_t)s.getSize();
  }
  if (source && source.getType() == getType())
    return source;
  return {};
}

TFC_INFER(FusedLinearOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  SmallVector<Value, 3> lin{a.getInput(), a.getWeight()};
  if (a.getBias())
    lin.push_back(a.getBias());
  if (failed(LinearOp::inferReturnTypes(ctx, loc, lin, nullptr, regions, types)))
    return failure();
  if (a.getResidual() && !succeeded(verifyCompatibleShape(types[0], a.getResidual().getType())))
    return emitOptionalError(loc, "fused_linear residual ", a.getResidual().getType(),
                             " does not match the result ", types[0]);
  if (a.getMultiplier() &&
      !succeeded(verifyCompatibleShape(types[0], a.getMultiplier().getType())))
    return emitOptionalError(loc, "fused_linear multiplier ", a.getMultiplier().getType(),
                             " does not match the result ", types[0]);
  return success();
}

TFC_INFER(TokenEmbeddingOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  if (failed(EmbeddingOp::inferReturnTypes(ctx, loc, {a.getTable(), a.getIds()},
                                           nullptr, regions, types)))
    return failure();
  for (Value t : {a.getPositions(), a.getTypeTable()})
    if (t) {
      auto tt = rankedOf(t);
      if (tt.getRank() != 2 ||
          !dimsAgree(tt.getDimSize(1), rankedOf(a.getTable()).getDimSize(1)))
        return emitOptionalError(loc, "token_embedding tables differ in width");
    }
  if (a.getPositionOffset() && rankedOf(a.getPositionOffset()).getRank() > 1)
    return emitOptionalError(loc, "token_embedding offset must be one offset (rank 0) or one "
                                  "per row ([batch])");
  return success();
}

TFC_INFER(SliceOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto in = rankedOf(a.getInput());
  int64_t axis = normalizeAxis((int64_t)a.getAxis(), in.getRank());
  int64_t start = (int64_t)a.getStart(), size = (int64_t)a.getSize();
  if (axis < 0)
    return emitOptionalError(loc, "slice: axis out of range");
  // A negative start counts from the end: -1 is the last row (decode_step's
  // cut to the last position, on a dim known only at run time).
  const int64_t dim = in.getDimSize(axis);
  if (start < 0 && size > 0 && start + size <= 0 && (dim == kDyn || start + dim >= 0))
    start = dim == kDyn ? 0 : start + dim;
  else if (start < 0)
    return emitOptionalError(loc, "slice [", start, ", ", start + size,
                             ") from the end is out of range for dim ",
                             dim == kDyn ? std::string("?") : std::to_string(dim));
  if (size <= 0 || (dim != kDyn && start + size > dim))
    return emitOptionalError(loc, "slice [", start, ", ", start + size,
                             ") is out of range for dim ", in.getDimSize(axis));
  SmallVector<int64_t> out(in.getShape());
  out[axis] = size;
  return pushTensor(types, out, in.getElementType());
}

static LogicalResult inferReduce(std::optional<Location> loc, Value input,
                                 int64_t axisAttr, bool keepdim,
                                 SmallVectorImpl<Type> &types) {
  auto in = rankedOf(input);
  int64_t axis = normalizeAxis(axisAttr, in.getRank());
  if (axis < 0)
    return emitOptionalError(loc, "reduce: axis ", axisAttr,
                             " is out of range for rank ", in.getRank());
  SmallVector<int64_t> out(in.getShape());
  if (keepdim)
    out[axis] = 1;
  else
    out.erase(out.begin() + axis);
  return pushTensor(types, out, in.getElementType());
}

static bool keepdimOf(DictionaryAttr attrs) {
  auto k = attrs ? attrs.get("keepdim").dyn_cast_or_null<BoolAttr>() : BoolAttr();
  return !k || k.getValue();
}

TFC_INFER(ReduceMeanOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  return inferReduce(loc, a.getInput(), (int64_t)a.getAxis(), keepdimOf(attrs), types);
}
TFC_INFER(ReduceSumOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  return inferReduce(loc, a.getInput(), (int64_t)a.getAxis(), keepdimOf(attrs), types);
}

/// The result type of an op whose result has its input's type.
static LogicalResult inferSameType(std::optional<Location> loc, ValueRange operands,
                                   SmallVectorImpl<Type> &types) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  types.push_back(operands[0].getType());
  return success();
}
// The unary ops (Tfc_UnaryOp in TfcOps.td) call it from their generated class.
#define TFC_SAME_TYPE(OpT)                                                     \
  TFC_INFER(OpT) { return inferSameType(loc, operands, types); }
TFC_SAME_TYPE(GeluOp)
TFC_SAME_TYPE(SoftmaxOp)
TFC_SAME_TYPE(LogSoftmaxOp)
TFC_SAME_TYPE(LayerNormOp)

template <typename OpT>
static LogicalResult verifyAxis(OpT op) {
  int64_t rank = op.getInput().getType().template cast<RankedTensorType>().getRank();
  if (normalizeAxis((int64_t)op.getAxis(), rank) < 0)
    return op.emitOpError("axis ") << (int64_t)op.getAxis()
                                   << " is out of range for rank " << rank;
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifyAxis(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyAxis(*this); }

LogicalResult LayerNormOp::verify() {
  auto x = getInput().getType().cast<RankedTensorType>();
  if (x.getRank() < 1)
    return emitOpError("input must have rank >= 1");
  int64_t d = x.getDimSize(x.getRank() - 1);
  const bool rms = getVariant() == NormVariant::rms_norm;
  if (rms == (bool)getBeta())
    return emitOpError(rms ? "rms_norm takes no shift (beta)" : "needs a shift (beta)");
  for (Value p : {getGamma(), getBeta()}) {
    if (!p)
      continue;
    auto t = p.getType().cast<RankedTensorType>();
    if (t.getRank() != 1 || !dimsAgree(t.getDimSize(0), d))
      return emitOpError("gain and shift must be [") << d << "], got " << t;
  }
  if (!(getEps().convertToDouble() >= 0.0))
    return emitOpError("eps must be non-negative");
  return success();
}

#define GET_OP_CLASSES
#include "ir/TfcOps.cpp.inc"
