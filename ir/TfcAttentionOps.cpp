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

/// The key and value widths of a [grouped-query] attention: with kv of the
/// heads heads (0: all of them; grouped-query attention when fewer), the key
/// is kv / heads of the query's width, and the output heads / kv of the
/// value's. |out| is the output's width.
static LogicalResult groupedWidths(std::optional<Location> loc, int64_t heads, int64_t kv,
                                   int64_t dq, int64_t dk, int64_t dv, int64_t &out) {
  if (kv <= 0 || heads <= 0 || kv == heads) {
    if (!dimsAgree(dq, dk))
      return emitOptionalError(loc, "attention query and key widths differ");
    out = dv;
    return success();
  }
  if (heads % kv != 0)
    return emitOptionalError(loc, "num_heads ", heads, " is not a multiple of num_kv_heads ",
                             kv);
  if (dq != kDyn && dk != kDyn && dq * kv != dk * heads)
    return emitOptionalError(loc, "a key of ", kv, " heads must be ", kv, "/", heads,
                             " of the query's width ", dq, ", got ", dk);
  out = dv == kDyn ? kDyn : dv / kv * heads;
  return success();
}

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
  SmallVector<int64_t> out(q.getShape());
  if (failed(groupedWidths(loc, attrs ? a.getNumHeads() : 0, attrs ? a.getNumKvHeads() : 0,
                           q.getDimSize(2), k.getDimSize(2), v.getDimSize(2), out[2])))
    return failure();
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

/// num_kv_heads: 0 (every head), or a divisor of num_heads.
static LogicalResult verifyKvHeads(Operation *op, int64_t heads, int64_t kv) {
  if (kv < 0 || (kv > 0 && heads > 0 && heads % kv != 0))
    return op->emitOpError("num_kv_heads ") << kv << " must divide num_heads " << heads;
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyHeads(*this, getQuery(), (int64_t)getNumHeads())) ||
      failed(verifyKvHeads(*this, (int64_t)getNumHeads(), (int64_t)getNumKvHeads())))
    return failure();
  MaskKind kind = getMaskKind();
  if (getWindow() < 0 || (getWindow() > 0 && kind != MaskKind::causal &&
                          kind != MaskKind::padding_causal))
    return emitOpError("a sliding window (window ")
           << getWindow() << ") must be positive and needs a causal mask";
  if (!(getSoftcap().convertToDouble() >= 0) || !getSoftcap().isFinite())
    return emitOpError("the score soft-cap ")
           << getSoftcap().convertToDouble() << " must be finite and not negative";
  bool needsOperand = kind == MaskKind::key_padding ||
                      kind == MaskKind::padding_causal ||
                      kind == MaskKind::additive;
  if (needsOperand != (bool)getMask())
    return emitOpError("mask kind '")
           << stringifyMaskKind(kind) << "' "
           << (needsOperand ? "needs" : "takes no") << " mask operand";
  if (Value t = getBlockTable()) {
    // Rows read shared [N, L, D] blocks: nothing that indexes keys by a
    // row's own layout goes with it.
    if (t.getType().cast<RankedTensorType>().getRank() != 2)
      return emitOpError("the block table must be [batch, blocks]");
    if (kind != MaskKind::none && kind != MaskKind::key_padding)
      return emitOpError("a block table takes mask kind 'none' or 'key_padding', not '")
             << stringifyMaskKind(kind) << "'";
    if (getPositionBias())
      return emitOpError("a block table takes no position bias");
  }
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
  if (!dimsAgree(k.getDimSize(2), kc.getDimSize(2)) ||
      !dimsAgree(v.getDimSize(2), vc.getDimSize(2)))
    return emitOptionalError(loc, "cached_attention widths differ");
  if (!dimsAgree(kc.getDimSize(1), vc.getDimSize(1)))
    return emitOptionalError(loc, "cached_attention cache lengths differ");
  SmallVector<int64_t> out(q.getShape());
  if (failed(groupedWidths(loc, attrs ? a.getNumHeads() : 0, attrs ? a.getNumKvHeads() : 0,
                           q.getDimSize(2), k.getDimSize(2), v.getDimSize(2), out[2])))
    return failure();
  return pushTensor(types, out, q.getElementType());
}

LogicalResult CachedAttentionOp::verify() {
  if (failed(verifyHeads(*this, getQuery(), (int64_t)getNumHeads())) ||
      failed(verifyKvHeads(*this, (int64_t)getNumHeads(), (int64_t)getNumKvHeads())))
    return failure();
  if (getKCache().getType().cast<RankedTensorType>().getDimSize(1) == kDyn)
    return emitOpError("the cache length must be static");
  if (getWindow() < 0)
    return emitOpError("the sliding window ") << getWindow() << " is negative";
  if (!(getSoftcap().convertToDouble() >= 0) || !getSoftcap().isFinite())
    return emitOpError("the score soft-cap ")
           << getSoftcap().convertToDouble() << " must be finite and not negative";
  if (Value inv = getInvFreq()) {
    auto f = inv.getType().cast<RankedTensorType>();
    if (f.getRank() != 1 || !f.getElementType().isF32())
      return emitOpError("inv_freq must be f32 [rotary_dim / 2]");
    const int64_t heads = (int64_t)getNumHeads();
    const int64_t dq = getQuery().getType().cast<RankedTensorType>().getDimSize(2);
    const int64_t half = f.getDimSize(0);
    if (half != kDyn && dq != kDyn && heads > 0 && (half < 1 || 2 * half > dq / heads))
      return emitOpError("inv_freq of ") << half << " frequencies rotates more than "
                                         << "head_dim " << dq / heads;
  }
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

TFC_INFER(RotaryOp) {
  if (failed(checkRanked(loc, operands)))
    return failure();
  Adaptor a(operands, attrs, regions);
  auto x = rankedOf(a.getInput());
  if (x.getRank() != 3)
    return emitOptionalError(loc, "rotary expects a [batch, seq, heads * head_dim] input");
  if (rankedOf(a.getInvFreq()).getRank() != 1)
    return emitOptionalError(loc, "rotary inv_freq must be [rotary_dim / 2]");
  if (a.getOffset() && rankedOf(a.getOffset()).getRank() > 1)
    return emitOptionalError(loc, "rotary offset must be one offset (rank 0) or one per row "
                                  "([batch])");
  return pushTensor(types, x.getShape(), x.getElementType());
}

LogicalResult RotaryOp::verify() {
  const int64_t hd = (int64_t)getHeadDim();
  if (hd <= 0 || hd % 2 != 0)
    return emitOpError("head_dim must be positive and even, got ") << hd;
  const int64_t d = getInput().getType().cast<RankedTensorType>().getDimSize(2);
  if (d != kDyn && d % hd != 0)
    return emitOpError("width ") << d << " is not a multiple of head_dim " << hd;
  auto f = getInvFreq().getType().cast<RankedTensorType>();
  if (!f.getElementType().isF32())
    return emitOpError("inv_freq must be f32");
  if (f.getDimSize(0) != kDyn && (f.getDimSize(0) < 1 || 2 * f.getDimSize(0) > hd))
    return emitOpError("inv_freq of ") << f.getDimSize(0) << " frequencies rotates more than "
                                       << "head_dim " << hd;
  return success();
}
