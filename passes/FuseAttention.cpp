//===- FuseAttention.cpp - attention + mask + softmax into tfc.attention --===//
//
// The matcher walks backwards and forwards from a softmax and either returns a
// complete description of the attention around it (AttentionMatch) or the step
// that failed. A rewrite pattern rooted at each softmax replaces every match,
// under the greedy driver (which erases what the fused op leaves dead); its
// notifyMatchFailure reason is the text the fusion report shows for a softmax
// that was left alone. The match is on the
// dataflow, not on how the model was written, so the tutorials' variants (divide
// by sqrt(d_k) or sqrt(d_model), masked_fill with -1e9 or -inf, additive masks,
// no projections at all) all fuse. T5's relative position bias added to the
// scores becomes the fused op's `position_bias` operand (the compact table).
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

namespace mlir::tfc {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

/// Everything needed to build the fused op.
struct AttentionMatch {
  Value q, k, v;         // [B, S, D] before the head split
  int64_t heads = 0;
  double scale = 1.0;
  MaskKind kind = MaskKind::none;
  Value maskOperand;     // token ids (key_padding kinds) or additive tensor
  Value maskedBool;      // general bool mask to turn into an additive one
  RelativePositionBiasOp bias; // T5's relative position bias added to the scores
  int64_t padId = 0;
  double maskValue = -1e9;
  ReshapeOp merge;       // the head merge: the op the fused op replaces
  SmallVector<Operation *> chain; // the matched ops, last first
};

bool isPerm(TransposeOp t, ArrayRef<int64_t> perm) {
  return t && t.getPerm() == perm;
}

/// Matches the head split t = transpose(reshape(x, [B, S, H, dk]), perm) of a
/// [B, S, D] value x and returns x. |perm| is [0,2,1,3] for Q and V, and
/// [0,2,3,1] for a K that is transposed by the split itself.
FailureOr<Value> matchSplit(Value t, ArrayRef<int64_t> perm, int64_t &heads,
                            int64_t &dk, std::string &why, StringRef what) {
  auto tr = t.getDefiningOp<TransposeOp>();
  if (!isPerm(tr, perm)) {
    why = (what + " is not a head split (transpose " +
           (perm[3] == 1 ? "[0, 2, 3, 1]" : "[0, 2, 1, 3]") + " of a reshape)")
              .str();
    return failure();
  }
  auto rs = tr.getInput().getDefiningOp<ReshapeOp>();
  if (!rs) {
    why = (what + " head split does not start from a reshape").str();
    return failure();
  }
  auto in = rs.getInput().getType().cast<RankedTensorType>();
  auto out = rs.getType().cast<RankedTensorType>();
  ArrayRef<int64_t> spec = rs.getShape();
  if (in.getRank() != 3 || out.getRank() != 4 || out.isDynamicDim(2) ||
      out.isDynamicDim(3)) {
    why = (what + " reshape is not [B, S, D] -> [B, S, H, d_k]").str();
    return failure();
  }
  // Batch and sequence dims must be carried over, not reshuffled.
  bool keepsB = spec[0] == 0 || (!in.isDynamicDim(0) && spec[0] == in.getDimSize(0));
  bool keepsS = spec[1] == 0 || spec[1] == -1 ||
                (!in.isDynamicDim(1) && spec[1] == in.getDimSize(1));
  int64_t h = out.getDimSize(2), d = out.getDimSize(3);
  if (!keepsB || !keepsS || (!in.isDynamicDim(2) && in.getDimSize(2) != h * d)) {
    why = (what + " reshape does not split the model dim into heads").str();
    return failure();
  }
  if (heads && (heads != h || dk != d)) {
    why = (what + " has a different head split than the query").str();
    return failure();
  }
  heads = h;
  dk = d;
  return rs.getInput();
}

/// Classifies a "keep" mask (true = may attend) of shape [B|1, 1|Sq, Sk].
bool classifyKeep(Value keep3, AttentionMatch &m) {
  auto padForm = [&](Value v, Value &tok, int64_t &pad) {
    auto u = v.getDefiningOp<UnsqueezeOp>();
    if (!u || (int64_t)u.getAxis() != 1)
      return false;
    auto cmp = u.getInput().getDefiningOp<CompareOp>();
    if (!cmp || cmp.getPredicate() != CmpPredicate::ne ||
        !cmp.getLhs().getType().cast<RankedTensorType>().getElementType().isa<IntegerType>() ||
        cmp.getLhs().getType().cast<RankedTensorType>().getRank() != 2)
      return false; // only token ids [B, S] compared with pad_id are key padding
    auto c = getScalarConstant(cmp.getRhs());
    if (!c)
      return false;
    tok = cmp.getLhs();
    pad = (int64_t)*c;
    return true;
  };
  Value tok;
  int64_t pad;
  if (padForm(keep3, tok, pad)) {
    m.kind = MaskKind::key_padding;
    m.maskOperand = tok;
    m.padId = pad;
    return true;
  }
  if (keep3.getDefiningOp<NopeakMaskOp>()) {
    m.kind = MaskKind::causal;
    return true;
  }
  if (auto a = keep3.getDefiningOp<AndOp>()) {
    for (auto [p, n] : {std::pair<Value, Value>{a.getLhs(), a.getRhs()},
                        {a.getRhs(), a.getLhs()}})
      if (n.getDefiningOp<NopeakMaskOp>() && padForm(p, tok, pad)) {
        m.kind = MaskKind::padding_causal;
        m.maskOperand = tok;
        m.padId = pad;
        return true;
      }
  }
  return false;
}

/// Recovers the mask's meaning from the boolean fed to masked_fill (true =
/// masked). Unknown shapes of mask become a general additive mask.
void classifyMasked(Value masked, AttentionMatch &m) {
  if (auto n = masked.getDefiningOp<NotOp>())
    if (auto u = n.getInput().getDefiningOp<UnsqueezeOp>())
      if ((int64_t)u.getAxis() == 1 && classifyKeep(u.getInput(), m))
        return;
  m.kind = MaskKind::additive;
  m.maskedBool = masked;
}

FailureOr<AttentionMatch> matchAttention(SoftmaxOp sm, std::string &why) {
  AttentionMatch m;
  auto st = sm.getType().cast<RankedTensorType>();
  if (st.getRank() != 4) {
    why = "softmax input is not [batch, heads, query, key] scores";
    return failure();
  }
  if (normalizeAxis((int64_t)sm.getAxis(), 4) != 3) {
    why = "softmax is not over the last (key) axis";
    return failure();
  }
  // Forward: P.V, then the head merge.
  if (!sm->hasOneUse()) {
    why = "the attention probabilities have other users";
    return failure();
  }
  auto pv = dyn_cast<MatmulOp>(*sm->user_begin());
  if (!pv || pv.getLhs() != sm.getResult() || pv.getTransposeB()) {
    why = "the softmax does not feed matmul(P, V)";
    return failure();
  }
  if (!pv->hasOneUse()) {
    why = "matmul(P, V) has other users";
    return failure();
  }
  auto mt = dyn_cast<TransposeOp>(*pv->user_begin());
  if (!isPerm(mt, {0, 2, 1, 3}) || !mt->hasOneUse()) {
    why = "matmul(P, V) is not followed by the head merge transpose [0, 2, 1, 3]";
    return failure();
  }
  auto merge = dyn_cast<ReshapeOp>(*mt->user_begin());
  if (!merge || merge.getType().cast<RankedTensorType>().getRank() != 3) {
    why = "the head merge does not reshape to [batch, seq, d_model]";
    return failure();
  }
  m.merge = merge;
  m.chain = {merge, mt, pv, sm};

  // Backward: mask, scale, Q.K^T.
  Value s = sm.getInput();
  if (auto mf = s.getDefiningOp<MaskedFillOp>()) {
    if (!mf->hasOneUse()) {
      why = "the masked scores have other users";
      return failure();
    }
    m.maskValue = mf.getValue().convertToDouble();
    classifyMasked(mf.getMask(), m);
    m.chain.push_back(mf);
    s = mf.getInput();
  }
  // T5: scores + relative_position_bias (before the mask). The bias op may be
  // shared by every layer of the stack; the fused op takes its table.
  if (auto add = s.getDefiningOp<AddOp>()) {
    for (auto [sc, other] : {std::pair<Value, Value>{add.getLhs(), add.getRhs()},
                             {add.getRhs(), add.getLhs()}}) {
      auto rb = other.getDefiningOp<RelativePositionBiasOp>();
      if (!rb)
        continue;
      if (!add->hasOneUse()) {
        why = "the biased scores have other users";
        return failure();
      }
      m.bias = rb;
      m.chain.push_back(add);
      s = sc;
      break;
    }
  }
  if (m.bias && m.kind == MaskKind::additive) {
    why = "a relative position bias together with an additive mask is not supported";
    return failure();
  }
  if (m.bias && s.getDefiningOp<MaskedFillOp>()) {
    why = "the scores are masked before the position bias is added";
    return failure();
  }
  if (m.kind == MaskKind::none && !m.bias) {
    if (auto add = s.getDefiningOp<AddOp>()) {
    if (!add->hasOneUse()) {
      why = "the masked scores have other users";
      return failure();
    }
    // The scores are the operand computed from Q.K^T (scaled or not); the mask
    // is the other one, whatever its shape.
    Value a = add.getLhs(), b = add.getRhs();
    auto isScores = [](Value v) {
      return v.getDefiningOp<DivOp>() || v.getDefiningOp<MulOp>() ||
             v.getDefiningOp<MatmulOp>();
    };
    if (!isScores(a) && isScores(b))
      std::swap(a, b);
    if (a.getType() != add.getType() || !b.getType()
                                             .cast<RankedTensorType>()
                                             .getElementType()
                                             .isa<FloatType>()) {
      why = "the additive mask is not a float tensor added to the scores";
      return failure();
    }
    m.kind = MaskKind::additive;
    m.maskOperand = b;
    m.chain.push_back(add);
    s = a;
    }
  }
  if (auto div = s.getDefiningOp<DivOp>()) {
    auto c = getScalarConstant(div.getRhs());
    if (!c || *c == 0) {
      why = "the score scale is not a constant";
      return failure();
    }
    if (!div->hasOneUse()) {
      why = "the scaled scores have other users";
      return failure();
    }
    m.scale = 1.0 / *c;
    m.chain.push_back(div);
    s = div.getLhs();
  } else if (auto mul = s.getDefiningOp<MulOp>()) {
    Value other = mul.getLhs();
    auto c = getScalarConstant(mul.getRhs());
    if (!c) {
      c = getScalarConstant(mul.getLhs());
      other = mul.getRhs();
    }
    if (!c) {
      why = "the score scale is not a constant";
      return failure();
    }
    if (!mul->hasOneUse()) {
      why = "the scaled scores have other users";
      return failure();
    }
    m.scale = *c;
    m.chain.push_back(mul);
    s = other;
  }
  auto qk = s.getDefiningOp<MatmulOp>();
  if (!qk) {
    why = "the scores are not a matmul(Q, K^T)";
    return failure();
  }
  if (!qk->hasOneUse()) {
    why = "the Q.K^T matmul has other users";
    return failure();
  }
  m.chain.push_back(qk);
  int64_t heads = 0, dk = 0;
  auto q = matchSplit(qk.getLhs(), {0, 2, 1, 3}, heads, dk, why, "Q");
  if (failed(q))
    return failure();
  FailureOr<Value> k = failure();
  if (qk.getTransposeB()) {
    k = matchSplit(qk.getRhs(), {0, 2, 1, 3}, heads, dk, why, "K");
  } else if (auto kt = qk.getRhs().getDefiningOp<TransposeOp>();
             isPerm(kt, {0, 1, 3, 2})) {
    k = matchSplit(kt.getInput(), {0, 2, 1, 3}, heads, dk, why, "K");
  } else {
    k = matchSplit(qk.getRhs(), {0, 2, 3, 1}, heads, dk, why, "K^T");
  }
  if (failed(k))
    return failure();
  auto v = matchSplit(pv.getRhs(), {0, 2, 1, 3}, heads, dk, why, "V");
  if (failed(v))
    return failure();
  // The merge must undo the head split: [B, Sq, H, d_k] -> [B, Sq, H * d_k].
  ArrayRef<int64_t> spec = merge.getShape();
  auto mergedT = merge.getType().cast<RankedTensorType>();
  if (spec.size() != 3 || spec[0] != 0 || (spec[1] != 0 && spec[1] != -1) ||
      mergedT.getDimSize(2) != heads * dk || (spec[1] == -1 && spec[2] != heads * dk)) {
    why = "the head merge does not reshape to [batch, seq, heads * d_k]";
    return failure();
  }
  if (m.bias) {
    auto t = m.bias.getTable().getType().cast<RankedTensorType>();
    if (t.getDimSize(1) != heads) {
      why = "the relative position bias table has a different head count";
      return failure();
    }
  }
  m.q = *q;
  m.k = *k;
  m.v = *v;
  m.heads = heads;
  return m;
}

/// Rooted at a softmax: matches the attention around it and replaces the head
/// merge with one tfc.attention. The failure reason is the one the fusion
/// report prints (explainAttentionMismatch runs the same matcher).
struct FuseAttentionPattern : public OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftmaxOp sm, PatternRewriter &rewriter) const override {
    std::string why;
    auto m = matchAttention(sm, why);
    if (failed(m))
      return rewriter.notifyMatchFailure(sm, why);
    rewriter.setInsertionPoint(m->merge);
    Location loc = m->chain.back()->getLoc(); // the Q.K^T matmul: the attention's YAML node
    Value mask = m->maskOperand;
    if (m->kind == MaskKind::additive && m->maskedBool) {
      // A boolean mask of unknown origin: masked positions get mask_value added.
      auto f32 = RankedTensorType::get({}, rewriter.getF32Type());
      Value fill = rewriter.create<ConstantOp>(
          loc, DenseElementsAttr::get(f32, (float)m->maskValue));
      Value zero = rewriter.create<ConstantOp>(loc, DenseElementsAttr::get(f32, 0.0f));
      mask = rewriter.create<SelectOp>(loc, m->maskedBool, fill, zero);
    }
    // The chain (and the head splits and mask plumbing only it used) is dead
    // once the merge is replaced; the greedy driver erases it.
    rewriter.replaceOpWithNewOp<AttentionOp>(
        m->merge, m->merge.getType(), MaskKindAttr::get(getContext(), m->kind), m->q, m->k,
        m->v, mask, m->bias ? m->bias.getTable() : Value(), /*block_table=*/Value(),
        rewriter.getI64IntegerAttr(m->heads), rewriter.getF64FloatAttr(m->scale),
        rewriter.getF64FloatAttr(m->maskValue), rewriter.getI64IntegerAttr(m->padId),
        rewriter.getBoolAttr(m->bias ? m->bias.getBidirectional() : false),
        rewriter.getI64IntegerAttr(m->bias ? (int64_t)m->bias.getMaxDistance() : 128),
        /*num_kv_heads=*/rewriter.getI64IntegerAttr(0), /*window=*/rewriter.getI64IntegerAttr(0),
        /*softcap=*/rewriter.getF64FloatAttr(0));
    return success();
  }
};

struct FuseAttentionPass : public mlir::tfc::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext());
    // Not converging within the driver's iterations leaves correct IR; as in
    // canonicalize, that is not an error.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns),
                                       fusionRewriteConfig(/*topDown=*/true));
  }
};

} // namespace

std::string mlir::tfc::explainAttentionMismatch(SoftmaxOp softmax) {
  std::string why;
  if (succeeded(matchAttention(softmax, why)))
    return "";
  return why;
}
