//===- FuseProjections.cpp - packed QKV GEMMs and linear epilogues --------===//
//
// Turns the frontend's one-linear-per-projection form into what a GEMM library
// runs well: Q, K and V of one attention in one GEMM over a packed weight, and
// bias + activation + residual add in the GEMM's epilogue (oneDNN post-ops, or a
// cuBLASLt epilogue). Each step only rewrites values with a single user, so no
// intermediate anyone else reads disappears.
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::tfc {
#define GEN_PASS_DEF_FUSEPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

/// GPT-2 Conv1D: add(matmul(x, W), b) with W [in, out] -> linear(x, W^T, b).
void normalizeConv1D(func::FuncOp f) {
  SmallVector<MatmulOp> mms;
  f.walk([&](MatmulOp m) { mms.push_back(m); });
  for (MatmulOp mm : mms) {
    auto w = mm.getRhs().getType().cast<RankedTensorType>();
    auto x = mm.getLhs().getType().cast<RankedTensorType>();
    if (w.getRank() != 2 || x.getRank() < 2 || mm.getTransposeB() || !w.hasStaticShape())
      continue;
    OpBuilder b(mm);
    auto perm = b.getNamedAttr("perm", b.getDenseI64ArrayAttr({1, 0}));
    Value wt;
    if (auto sl = mm.getRhs().getDefiningOp<SliceOp>();
        sl && normalizeAxis((int64_t)sl.getAxis(), 2) == 1) {
      // A slice of a packed [in, 3*out] weight: transpose the whole tensor and
      // slice rows, so the packing below can fold the slices back together.
      Value full = buildInferred<TransposeOp>(b, mm.getLoc(), {sl.getInput()}, {perm});
      wt = buildInferred<SliceOp>(b, mm.getLoc(), {full},
                          {b.getNamedAttr("axis", b.getI64IntegerAttr(0)),
                           b.getNamedAttr("start", sl.getStartAttr()),
                           b.getNamedAttr("size", sl.getSizeAttr())});
    } else {
      wt = buildInferred<TransposeOp>(b, mm.getLoc(), {mm.getRhs()}, {perm});
    }
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
          b.setInsertionPoint(add);
        }
      }
    SmallVector<Value, 3> ops{mm.getLhs(), wt};
    if (bias)
      ops.push_back(bias);
    Value lin = buildInferred<LinearOp>(b, mm.getLoc(), ops);
    if (!lin)
      continue;
    replaced->getResult(0).replaceAllUsesWith(lin);
    if (replaced != mm.getOperation())
      replaced->erase();
    mm->erase();
  }
}

/// Packs the linears feeding one attention that read the same input.
void packAttentionProjections(func::FuncOp f) {
  SmallVector<AttentionOp> atts;
  f.walk([&](AttentionOp a) { atts.push_back(a); });
  for (AttentionOp att : atts) {
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
      continue;
    SmallVector<LinearOp> ls;
    for (unsigned i : idx)
      ls.push_back(lin(i));
    OpBuilder b(ls.front());
    // Insert after the last of the linears' operands: all are defined before
    // the first linear that uses them, and the weights are cheap sources.
    Operation *latest = ls.front();
    for (LinearOp l : ls)
      if (latest->isBeforeInBlock(l))
        latest = l;
    b.setInsertionPoint(latest);
    Location loc = ls.front().getLoc();
    auto axis0 = b.getNamedAttr("axis", b.getI64IntegerAttr(0));
    SmallVector<Value> ws, bs;
    for (LinearOp l : ls) {
      ws.push_back(l.getWeight());
      if (l.getBias())
        bs.push_back(l.getBias());
    }
    Value w = buildInferred<ConcatOp>(b, loc, ws, {axis0});
    SmallVector<Value, 3> ops{ls.front().getInput(), w};
    if (!bs.empty())
      ops.push_back(buildInferred<ConcatOp>(b, loc, bs, {axis0}));
    Value packed = buildInferred<LinearOp>(b, loc, ops);
    int64_t start = 0;
    int64_t last = packed.getType().cast<RankedTensorType>().getRank() - 1;
    // Build every slice before erasing anything: the builder's insertion point
    // is one of the linears being replaced.
    SmallVector<Value, 3> slices;
    for (LinearOp l : ls) {
      int64_t n = l.getType().cast<RankedTensorType>().getShape().back();
      slices.push_back(buildInferred<SliceOp>(b, loc, {packed},
                                      {b.getNamedAttr("axis", b.getI64IntegerAttr(last)),
                                       b.getNamedAttr("start", b.getI64IntegerAttr(start)),
                                       b.getNamedAttr("size", b.getI64IntegerAttr(n))}));
      start += n;
    }
    for (auto [l, sl] : llvm::zip(ls, slices)) {
      l.getResult().replaceAllUsesWith(sl);
      l->erase();
    }
    // The packed linear must precede the attention; it does, since it sits
    // where the last projection was.
  }
}

/// linear -> relu/gelu becomes fused_linear{activation}; a linear (or fused
/// linear without residual) used once by an add gets the add as its residual.
void fuseEpilogues(func::FuncOp f) {
  SmallVector<LinearOp> lins;
  f.walk([&](LinearOp l) { lins.push_back(l); });
  for (LinearOp l : lins) {
    Activation act = Activation::none;
    Operation *last = l;
    if (l->hasOneUse()) {
      Operation *u = *l->user_begin();
      if (isa<ReluOp>(u))
        act = Activation::relu;
      else if (auto g = dyn_cast<GeluOp>(u))
        act = g.getApproximate() == GeluApprox::tanh ? Activation::gelu_tanh
                                                     : Activation::gelu;
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
      continue;
    Operation *root = add ? add : last;
    OpBuilder b(root);
    SmallVector<Value, 4> ops{l.getInput(), l.getWeight()};
    if (l.getBias())
      ops.push_back(l.getBias());
    if (residual)
      ops.push_back(residual);
    OperationState st(l.getLoc(), FusedLinearOp::getOperationName());
    st.addOperands(ops);
    st.addTypes(root->getResult(0).getType());
    st.addAttribute("activation", ActivationAttr::get(b.getContext(), act));
    st.addAttribute("operand_segment_sizes",
                    b.getDenseI32ArrayAttr({1, 1, l.getBias() ? 1 : 0, residual ? 1 : 0}));
    Operation *fused = b.create(st);
    root->getResult(0).replaceAllUsesWith(fused->getResult(0));
    if (add)
      add->erase();
    if (last != l.getOperation())
      last->erase();
    l->erase();
  }
}

struct FuseProjectionsPass
    : public mlir::tfc::impl::FuseProjectionsBase<FuseProjectionsPass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    normalizeConv1D(f);
    packAttentionProjections(f);
    fuseEpilogues(f);
  }
};

} // namespace
