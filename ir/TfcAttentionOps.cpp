//===- TfcAttentionOps.cpp - attention op shape inference and verifiers ---===//
//
// The attention ops' half of TfcOps.cpp: tfc.attention, tfc.cached_attention
// and tfc.relative_position_bias, with the head split and the relative position
// bias table checks they share. Shape rules are the inferReturnTypes functions,
// as for every tfc op (TfcOps.cpp's header says why).
//
//===----------------------------------------------------------------------------===//
#include "ir/TfcDialect.h"
#include "ir/TfcOpsInternal.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::tfc;
using namespace mlir::tfc::opdetail;

TFC_INFER(AttentionOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto q = rankedOf(a.getQuery());
  auto k = rankedOf(a.getKey());
  auto v = rankedOf(a.getValue());
  if (q.getRank() != 3 || k.getRank() != 3 || v.getRank() != 3)
    return emitOptionalError(loc, "attention expects [batch, seq, dim] operands");
  if (!dimsAgree(k.getDimSize(1), v.getDimSize(1)))
    return emitOptionalError(loc, "attention key and value lengths differ");
  if (!dimsAgree(q.getDimSize(2), k.getDimSize(2)))
    return emitOptionalError(loc, "attention query and key widths differ");
  SmallVector<int64_t> out(q.getShape());
  out[2] = v.getDimSize(2);
  return pushTensor(types, out, q.getElementType());
}

/// The head split both attention ops share: a [batch, seq, dim] query whose
/// width divides into num_heads > 0 heads.
static LogicalResult verifyHeads(Operation *op, Value query, int64_t heads) {
  auto qt = query.getType().cast<RankedTensorType>();
  if (qt.getRank() != 3)
    return op->emitOpError("query must be [batch, seq, dim]");
  int64_t d = qt.getDimSize(2);
  if (heads <= 0)
    return op->emitOpError("num_heads must be positive");
  if (d != kDyn && d % heads != 0)
    return op->emitOpError("model width ") << d << " is not divisible by " << heads
                                           << " heads";
  return success();
}

/// The relative position bias table [num_buckets, H] both attention ops and
/// tfc.relative_position_bias take, with the bucket parameters
/// tfc/relative_bucket.h needs.
static LogicalResult verifyPositionBias(Operation *op, Value table, int64_t heads,
                                        int64_t maxDistance, bool bidirectional) {
  if (!table)
    return success();
  auto t = table.getType().cast<RankedTensorType>();
  if (t.getRank() != 2 || (heads > 0 && !dimsAgree(t.getDimSize(1), heads)))
    return op->emitOpError("the relative position bias table must be [num_buckets, ")
           << heads << "], got " << t;
  int64_t nb = t.getDimSize(0);
  int64_t exact = bidirectional ? nb / 4 : nb / 2;
  if (nb != kDyn && (exact < 1 || maxDistance <= exact))
    return op->emitOpError("relative position buckets: ")
           << nb << " buckets need max_distance > " << exact << " (got " << maxDistance
           << ") and at least " << (bidirectional ? 4 : 2) << " buckets";
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyHeads(*this, getQuery(), (int64_t)getNumHeads())))
    return failure();
  MaskKind kind = getMaskKind();
  bool needsOperand = kind == MaskKind::key_padding ||
                      kind == MaskKind::padding_causal ||
                      kind == MaskKind::additive;
  if (needsOperand != (bool)getMask())
    return emitOpError("mask kind '")
           << stringifyMaskKind(kind) << "' "
           << (needsOperand ? "needs" : "takes no") << " mask operand";
  if (getMask()) {
    auto m = getMask().getType().cast<RankedTensorType>();
    if (kind == MaskKind::additive) {
      if (!m.getElementType().isa<FloatType>())
        return emitOpError("an additive mask must be a float tensor");
    } else if (m.getRank() != 2 || !m.getElementType().isa<IntegerType>() ||
               m.getElementType().isInteger(1)) {
      return emitOpError("a key_padding mask operand must be [batch, seq] token ids");
    }
  }
  return verifyPositionBias(*this, getPositionBias(), (int64_t)getNumHeads(),
                            (int64_t)getBiasMaxDistance(), getBiasBidirectional());
}

TFC_INFER(CachedAttentionOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto q = rankedOf(a.getQuery());
  auto k = rankedOf(a.getKey());
  auto v = rankedOf(a.getValue());
  auto kc = rankedOf(a.getKCache());
  auto vc = rankedOf(a.getVCache());
  for (auto t : {q, k, v, kc, vc})
    if (t.getRank() != 3)
      return emitOptionalError(loc, "cached_attention expects [batch, seq, dim] operands");
  if (rankedOf(a.getPos()).getRank() > 1)
    return emitOptionalError(loc, "cached_attention pos must be one position (rank 0) or one "
                                  "per row ([batch])");
  if (a.getBlockTable() && rankedOf(a.getBlockTable()).getRank() != 2)
    return emitOptionalError(loc, "cached_attention block_table must be [batch, blocks]");
  if (!dimsAgree(q.getDimSize(2), k.getDimSize(2)) ||
      !dimsAgree(k.getDimSize(2), kc.getDimSize(2)) ||
      !dimsAgree(v.getDimSize(2), vc.getDimSize(2)))
    return emitOptionalError(loc, "cached_attention widths differ");
  if (!dimsAgree(kc.getDimSize(1), vc.getDimSize(1)))
    return emitOptionalError(loc, "cached_attention cache lengths differ");
  SmallVector<int64_t> out(q.getShape());
  out[2] = v.getDimSize(2);
  return pushTensor(types, out, q.getElementType());
}

LogicalResult CachedAttentionOp::verify() {
  if (failed(verifyHeads(*this, getQuery(), (int64_t)getNumHeads())))
    return failure();
  if (getKCache().getType().cast<RankedTensorType>().getDimSize(1) == kDyn)
    return emitOpError("the cache length must be static");
  return verifyPositionBias(*this, getPositionBias(), (int64_t)getNumHeads(),
                            (int64_t)getBiasMaxDistance(), getBiasBidirectional());
}

TFC_INFER(RelativePositionBiasOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto t = rankedOf(a.getTable());
  auto q = rankedOf(a.getQuery());
  auto k = rankedOf(a.getKey());
  if (t.getRank() != 2)
    return emitOptionalError(loc, "relative_position_bias expects a [num_buckets, heads] table");
  if (q.getRank() != 2 || k.getRank() != 2)
    return emitOptionalError(loc, "relative_position_bias expects [batch, seq] query and key ids");
  return pushTensor(types, {1, t.getDimSize(1), q.getDimSize(1), k.getDimSize(1)},
                    t.getElementType());
}

LogicalResult RelativePositionBiasOp::verify() {
  return verifyPositionBias(*this, getTable(), -1, (int64_t)getMaxDistance(),
                            getBidirectional());
}
