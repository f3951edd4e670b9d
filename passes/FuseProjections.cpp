//===- FuseProjections.cpp - packed QKV GEMMs and linear epilogues --------===//
//
// Turns the frontend's one-linear-per-projection form into what a GEMM library
// runs well: Q, K and V of one attention in one GEMM over a packed weight, and
// bias + activation + residual add in the GEMM's epilogue (oneDNN post-ops, or a
// cuBLASLt epilogue), and a gated FFN's product (SwiGLU, GeGLU) in the gate's. Each step only rewrites values with a single user, so no
// intermediate anyone else reads disappears. Each step is an OpRewritePattern
// built from the ops' generated builders (DRR does not fit them: see the
// patterns), applied by the greedy driver.
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::tfc {
#define GEN_PASS_DEF_FUSEPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

/// GPT-2 Conv1D: add(matmul(x, W), b) with W [in, out] -> linear(x, W^T, b).
struct NormalizeConv1D : public OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp mm, PatternRewriter &rewriter) const override {
    auto w = mm.getRhs().getType().cast<RankedTensorType>();
    auto x = mm.getLhs().getType().cast<RankedTensorType>();
    if (w.getRank() != 2 || x.getRank() < 2 || mm.getTransposeB() || !w.hasStaticShape())
      return rewriter.notifyMatchFailure(mm, "not x times a static [in, out] weight");
    if (x.getElementType() != w.getElementType())
      return rewriter.notifyMatchFailure(mm, "input and weight element types differ");
    // The bias: a [out] vector added to the product, its only user.
    Value bias;
    Operation *replaced = mm;
    if (mm->hasOneUse())
      if (auto add = dyn_cast<AddOp>(*mm->user_begin())) {
        Value other = add.getLhs() == mm.getResult() ? add.getRhs() : add.getLhs();
        auto ot = other.getType().cast<RankedTensorType>();
        if (ot.getRank() == 1 && ot.getDimSize(0) == w.getDimSize(1) &&
            add.getType() == mm.getType()) {
          bias = other;
          replaced = add;
        }
      }
    rewriter.setInsertionPoint(mm);
    Location loc = mm.getLoc();
    DenseI64ArrayAttr perm = rewriter.getDenseI64ArrayAttr({1, 0});
    Value wt;
    if (auto sl = mm.getRhs().getDefiningOp<SliceOp>();
        sl && normalizeAxis((int64_t)sl.getAxis(), 2) == 1) {
      // A slice of a packed [in, 3*out] weight: transpose the whole tensor and
      // slice rows, so the packing below can fold the slices back together.
      Value full = rewriter.create<TransposeOp>(loc, sl.getInput(), perm);
      wt = rewriter.create<SliceOp>(loc, full, rewriter.getI64IntegerAttr(0),
                                    sl.getStartAttr(), sl.getSizeAttr());
    } else {
      wt = rewriter.create<TransposeOp>(loc, mm.getRhs(), perm);
    }
    if (replaced != mm.getOperation())
      rewriter.setInsertionPoint(replaced);
    rewriter.replaceOpWithNewOp<LinearOp>(replaced, mm.getLhs(), wt, bias);
    if (replaced != mm.getOperation())
      rewriter.eraseOp(mm);
    return success();
  }
};

/// Packs the linears feeding one attention that read the same input.
struct PackAttentionProjections : public OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp att, PatternRewriter &rewriter) const override {
    SmallVector<unsigned> idx; // which of q(0), k(1), v(2) to pack
    auto lin = [&](unsigned i) { return att->getOperand(i).getDefiningOp<LinearOp>(); };
    auto packable = [&](unsigned i, unsigned j) {
      LinearOp a = lin(i), c = lin(j);
      return a && c && a.getInput() == c.getInput() && a->hasOneUse() && c->hasOneUse() &&
             (bool)a.getBias() == (bool)c.getBias() && a != c;
    };
    if (packable(0, 1) && packable(0, 2))
      idx = {0, 1, 2};
    else if (packable(1, 2))
      idx = {1, 2};
    else
      return rewriter.notifyMatchFailure(att, "no two projections share their input");
    SmallVector<LinearOp, 3> ls;
    for (unsigned i : idx)
      ls.push_back(lin(i));
    // Insert after the last of the linears' operands: all are defined before
    // the first linear that uses them, and the weights are cheap sources.
    Operation *latest = lin(idx.front());
    for (LinearOp l : ls)
      if (latest->isBeforeInBlock(l))
        latest = l;
    rewriter.setInsertionPoint(latest);
    Location loc = ls.front().getLoc();
    IntegerAttr axis0 = rewriter.getI64IntegerAttr(0);
    SmallVector<Value> ws, bs;
    for (LinearOp l : ls) {
      ws.push_back(l.getWeight());
      if (l.getBias())
        bs.push_back(l.getBias());
    }
    Value w = rewriter.create<ConcatOp>(loc, ws, axis0);
    Value b = bs.empty() ? Value() : rewriter.create<ConcatOp>(loc, bs, axis0);
    Value packed = rewriter.create<LinearOp>(loc, ls.front().getInput(), w, b);
    int64_t start = 0;
    int64_t last = packed.getType().cast<RankedTensorType>().getRank() - 1;
    // Build every slice before replacing anything: the insertion point is one
    // of the linears being replaced.
    SmallVector<Value, 3> slices;
    for (LinearOp l : ls) {
      int64_t n = l.getType().cast<RankedTensorType>().getShape().back();
      slices.push_back(rewriter.create<SliceOp>(loc, packed, rewriter.getI64IntegerAttr(last),
                                                rewriter.getI64IntegerAttr(start),
                                                rewriter.getI64IntegerAttr(n)));
      start += n;
    }
    // The packed linear precedes the attention: it sits where the last
    // projection was.
    for (auto [l, sl] : llvm::zip(ls, slices))
      rewriter.replaceOp(l, sl);
    return success();
  }
};

/// linear -> relu/gelu/silu becomes fused_linear{activation}; a linear (with its
/// activation) used once by an add gets the add as its residual. Rooted at the
/// linear, so with the driver's top-down order the first linear of
/// add(linear, linear) takes the add, as it always has.
struct FuseEpilogue : public OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LinearOp l, PatternRewriter &rewriter) const override {
    Activation act = Activation::none;
    Operation *last = l;
    if (l->hasOneUse()) {
      Operation *u = *l->user_begin();
      if (isa<ReluOp>(u))
        act = Activation::relu;
      else if (auto g = dyn_cast<GeluOp>(u))
        act = g.getApproximate() == GeluApprox::tanh ? Activation::gelu_tanh
                                                     : Activation::gelu;
      else if (isa<SiluOp>(u))
        act = Activation::silu;
      if (act != Activation::none)
        last = u;
    }
    Value residual;
    Operation *add = nullptr;
    if (last->hasOneUse())
      if (auto a = dyn_cast<AddOp>(*last->user_begin())) {
        Value other = a.getLhs() == last->getResult(0) ? a.getRhs() : a.getLhs();
        // Legal when the add keeps the linear's shape: the residual is a full
        // tensor, not a broadcast.
        // The fused op is built where the add is, so the residual (an operand
        // of the add) dominates it wherever it was defined.
        if (other != last->getResult(0) && other.getType() == a.getType() &&
            a.getType() == last->getResult(0).getType()) {
          residual = other;
          add = a;
        }
      }
    if (act == Activation::none && !residual)
      return rewriter.notifyMatchFailure(l, "no activation or residual add to fold");
    Operation *root = add ? add : last;
    rewriter.setInsertionPoint(root);
    auto fused = rewriter.create<FusedLinearOp>(
        l.getLoc(), root->getResult(0).getType(), l.getInput(), l.getWeight(), l.getBias(),
        residual, Value(), ActivationAttr::get(getContext(), act));
    rewriter.replaceOp(root, fused.getResult());
    if (last != root && last != l.getOperation())
      rewriter.eraseOp(last); // the activation, when the add was the root
    rewriter.eraseOp(l);
    return success();
  }
};

/// mul(linear, m) with m of the linear's shape, the linear plain or fused with
/// an activation (a gated FFN, SwiGLU or GeGLU: act(x W_gate^T) * (x
/// W_up^T)) -> fused_linear with m as its multiplier: the product joins the
/// GEMM's epilogue instead of a pass that reads both tensors and writes a
/// third. The product is the same f32 multiplication, so the fused form gives
/// the unfused one's bits.
struct FuseMultiplier : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul, PatternRewriter &rewriter) const override {
    for (auto [a, m] : {std::pair<Value, Value>{mul.getLhs(), mul.getRhs()},
                        {mul.getRhs(), mul.getLhs()}}) {
      if (a == m || !a.hasOneUse() || a.getType() != mul.getType() ||
          m.getType() != mul.getType())
        continue;
      Value input, weight, bias;
      Activation act = Activation::none;
      if (auto f = a.getDefiningOp<FusedLinearOp>()) {
        if (f.getResidual() || f.getMultiplier())
          continue;
        input = f.getInput(), weight = f.getWeight(), bias = f.getBias();
        act = f.getActivation();
      } else if (auto l = a.getDefiningOp<LinearOp>()) {
        input = l.getInput(), weight = l.getWeight(), bias = l.getBias();
      } else {
        continue;
      }
      // Built where the mul is, so the multiplier (an operand of the mul)
      // dominates it wherever it was defined.
      Operation *linear = a.getDefiningOp();
      rewriter.setInsertionPoint(mul);
      auto fused = rewriter.create<FusedLinearOp>(linear->getLoc(), mul.getType(), input, weight,
                                                  bias, Value(), m,
                                                  ActivationAttr::get(getContext(), act));
      rewriter.replaceOp(mul, fused.getResult());
      rewriter.eraseOp(linear);
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "no linear of the product's shape used only by it");
  }
};

/// add(linear(x, W), c) with c a constant [N] or [1, ..., 1, N] (Marian's and
/// BART's final_logits_bias) -> linear(x, W, c as [N]): the bias joins the
/// GEMM's epilogue instead of a pass over the [rows, vocab] logits.
struct FoldLinearBias : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (auto [a, c] : {std::pair<Value, Value>{add.getLhs(), add.getRhs()},
                        {add.getRhs(), add.getLhs()}}) {
      auto l = a.getDefiningOp<LinearOp>();
      if (!l || l.getBias() || !l->hasOneUse() || a.getType() != add.getType())
        continue;
      if (!c.getDefiningOp<WeightOp>() && !c.getDefiningOp<ConstantOp>())
        continue;
      auto ct = c.getType().cast<RankedTensorType>();
      auto lt = a.getType().cast<RankedTensorType>();
      const int64_t n = lt.getShape().back();
      if (!ct.hasStaticShape() || ct.getRank() < 1 || ct.getRank() > lt.getRank() ||
          n == ShapedType::kDynamic || ct.getShape().back() != n ||
          ct.getElementType() != lt.getElementType() ||
          llvm::any_of(ct.getShape().drop_back(), [](int64_t d) { return d != 1; }))
        continue;
      rewriter.setInsertionPoint(add);
      Value bias = c;
      if (ct.getRank() != 1)
        bias = rewriter.create<ReshapeOp>(add.getLoc(), c, rewriter.getDenseI64ArrayAttr({n}));
      rewriter.replaceOpWithNewOp<LinearOp>(add, l.getInput(), l.getWeight(), bias);
      rewriter.eraseOp(l);
      return success();
    }
    return rewriter.notifyMatchFailure(add, "not a linear plus a constant [N] bias");
  }
};

/// Applies one pattern over |f| in program order.
template <typename PatternT>
void applyInOrder(func::FuncOp f) {
  RewritePatternSet patterns(f.getContext());
  patterns.add<PatternT>(f.getContext());
  // Not converging is not an error (as in canonicalize).
  (void)applyPatternsAndFoldGreedily(f, std::move(patterns),
                                     fusionRewriteConfig(/*topDown=*/true));
}

struct FuseProjectionsPass
    : public mlir::tfc::impl::FuseProjectionsBase<FuseProjectionsPass> {
  void runOnOperation() override {
    // In three steps: packing needs every Conv1D as a linear, and the
    // epilogues must not take a projection before it is packed.
    func::FuncOp f = getOperation();
    applyInOrder<NormalizeConv1D>(f);
    applyInOrder<PackAttentionProjections>(f);
    applyInOrder<FoldLinearBias>(f);
    applyInOrder<FuseEpilogue>(f);
    // After the activations are in their linears: a gate's act(x W^T) then
    // takes the product with the up projection.
    applyInOrder<FuseMultiplier>(f);
  }
};

} // namespace
