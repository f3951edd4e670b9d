//===- FuseRotary.cpp - rotary embeddings inside the cached attention -----===//
//
// In @decode_step, a LLaMA-family layer rotates its new queries and keys
// (tfc.rotary with the offset step.pos) and hands them to tfc.cached_attention,
// which writes the keys to the KV cache. That is two passes over memory and
// two kernel launches per layer that the attention can do itself: the key is
// rotated as it is written to the cache, and the query as the attention
// reads it (issue 24, "rotary embeddings, applied where Q and K are produced
// or loaded"). This pass folds the two tfc.rotary ops into the
// tfc.cached_attention's `inv_freq` operand.
//
// It folds only when the two rotaries match exactly what the kernel does:
// both read the same frequencies, with the same pair layout, at the
// attention's own positions (offset = its pos), with the attention's head
// width, and nothing else reads the rotated values. @forward's tfc.attention
// keeps its tfc.rotary ops; its queries and keys are not written anywhere.
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::tfc {
#define GEN_PASS_DEF_FUSEROTARY
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

struct FoldRotaryPattern : public OpRewritePattern<CachedAttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(CachedAttentionOp op, PatternRewriter &rw) const override {
    if (op.getInvFreq())
      return rw.notifyMatchFailure(op, "already has its rotary");
    auto rq = op.getQuery().getDefiningOp<RotaryOp>();
    auto rk = op.getKey().getDefiningOp<RotaryOp>();
    if (!rq || !rk)
      return rw.notifyMatchFailure(op, "the query and the key are not both rotated");
    if (rq.getInvFreq() != rk.getInvFreq() || rq.getInterleaved() != rk.getInterleaved())
      return rw.notifyMatchFailure(op, "the query's and the key's rotaries differ");
    if (rq.getOffset() != op.getPos() || rk.getOffset() != op.getPos())
      return rw.notifyMatchFailure(op, "a rotary is not at the attention's positions");
    const int64_t heads = (int64_t)op.getNumHeads();
    const int64_t dq = op.getQuery().getType().cast<RankedTensorType>().getDimSize(2);
    if (dq == ShapedType::kDynamic || heads <= 0 || dq % heads != 0 ||
        (int64_t)rq.getHeadDim() != dq / heads || (int64_t)rk.getHeadDim() != dq / heads)
      return rw.notifyMatchFailure(op, "a rotary's head width is not the attention's");
    if (!rq->hasOneUse() || !rk->hasOneUse())
      return rw.notifyMatchFailure(op, "a rotated value has other users");
    // The two rotaries are left dead (Pure): the driver erases them.
    rw.replaceOpWithNewOp<CachedAttentionOp>(
        op, op.getType(), rq.getInput(), rk.getInput(), op.getValue(), op.getKCache(),
        op.getVCache(), op.getPos(), op.getPositionBias(), op.getBlockTable(), rq.getInvFreq(),
        op.getNumHeadsAttr(), op.getScaleAttr(), op.getBiasBidirectionalAttr(),
        op.getBiasMaxDistanceAttr(), op.getNumKvHeadsAttr(), op.getWindowAttr(),
        op.getSoftcapAttr(), rw.getBoolAttr(rq.getInterleaved()));
    return success();
  }
};

struct FuseRotaryPass : public mlir::tfc::impl::FuseRotaryBase<FuseRotaryPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldRotaryPattern>(&getContext());
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns),
                                       fusionRewriteConfig(/*topDown=*/true));
  }
};

} // namespace
