//===- FuseLayerNorm.cpp - norm primitives into tfc.layer_norm ------------===//
//
// Recognizes the three normalizations Transformers in the wild write by hand and
// turns each into one tfc.layer_norm with a variant attribute, so a model that
// wrote its Norm in primitives still gets one kernel:
//
//   layer_norm: (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta
//   std_norm:   gamma * (x - mean) / (sqrt(sum((x - mean)^2) / (N - 1)) + eps) + beta
//   rms_norm:   x / sqrt(mean(x^2) + eps) * gamma             (T5's RMSNorm, no beta)
//
// Commuted operands of add and mul are accepted. The match is rooted at the
// final add; intermediates other than x, gamma and beta must have no other users.
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::tfc {
#define GEN_PASS_DEF_FUSELAYERNORM
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

bool lastAxis(Operation *op, int64_t axis) {
  auto t = op->getOperand(0).getType().cast<RankedTensorType>();
  return normalizeAxis(axis, t.getRank()) == t.getRank() - 1;
}

/// A [D] vector (gamma or beta) for an input whose last dim is D.
bool isParamVector(Value p, int64_t d) {
  auto t = p.getType().cast<RankedTensorType>();
  return t.getRank() == 1 && (d == ShapedType::kDynamic || t.getDimSize(0) == d);
}

/// Matches xc = sub(x, reduce_mean(x, -1, keepdim)); returns x.
Value matchCentered(Value xc, SmallVectorImpl<Operation *> &chain) {
  auto sub = xc.getDefiningOp<SubOp>();
  if (!sub)
    return {};
  auto mean = sub.getRhs().getDefiningOp<ReduceMeanOp>();
  if (!mean || mean.getInput() != sub.getLhs() || !mean.getKeepdim() ||
      !lastAxis(mean, (int64_t)mean.getAxis()))
    return {};
  chain.push_back(sub);
  chain.push_back(mean);
  return sub.getLhs();
}

/// Matches sq = mul(xc, xc).
bool isSquareOf(Value sq, Value xc) {
  auto m = sq.getDefiningOp<MulOp>();
  return m && m.getLhs() == xc && m.getRhs() == xc;
}

struct NormMatch {
  NormVariant variant;
  Value x, gamma, beta;
  double eps;
  SmallVector<Operation *> chain;
};

/// Splits a binary op's operands into (the one defined by OpT, the other).
template <typename OpT, typename BinOp>
std::optional<std::pair<OpT, Value>> operandDefinedBy(BinOp op) {
  if (auto a = op.getLhs().template getDefiningOp<OpT>())
    return std::make_pair(a, op.getRhs());
  if (auto b = op.getRhs().template getDefiningOp<OpT>())
    return std::make_pair(b, op.getLhs());
  return std::nullopt;
}

/// std_norm: add(div(mul(gamma, xc), add(sqrt(div(reduce_sum(xc*xc), N-1)), eps)), beta)
std::optional<NormMatch> matchStdNorm(AddOp root) {
  NormMatch m{NormVariant::std_norm, {}, {}, {}, 0, {root}};
  auto d = operandDefinedBy<DivOp>(root);
  if (!d)
    return std::nullopt;
  auto [div, beta] = *d;
  auto num = div.getLhs().getDefiningOp<MulOp>();
  auto den = div.getRhs().getDefiningOp<AddOp>();
  if (!num || !den)
    return std::nullopt;
  // numerator: gamma * xc (either order)
  Value xc, gamma;
  for (auto [a, b] : {std::pair<Value, Value>{num.getLhs(), num.getRhs()},
                      {num.getRhs(), num.getLhs()}})
    if (a.getDefiningOp<SubOp>() && !xc) {
      xc = a;
      gamma = b;
    }
  if (!xc)
    return std::nullopt;
  // denominator: sqrt(var) + eps
  auto s = operandDefinedBy<SqrtOp>(den);
  if (!s)
    return std::nullopt;
  auto [sqrt, epsV] = *s;
  auto eps = getScalarConstant(epsV);
  auto var = sqrt.getInput().getDefiningOp<DivOp>();
  if (!eps || *eps < 0 || !var)
    return std::nullopt;
  auto sum = var.getLhs().getDefiningOp<ReduceSumOp>();
  auto nm1 = getScalarConstant(var.getRhs());
  if (!sum || !nm1 || !sum.getKeepdim() || !lastAxis(sum, (int64_t)sum.getAxis()) ||
      !isSquareOf(sum.getInput(), xc))
    return std::nullopt;
  Value x = matchCentered(xc, m.chain);
  if (!x)
    return std::nullopt;
  int64_t dim = x.getType().cast<RankedTensorType>().getShape().back();
  if (dim == ShapedType::kDynamic || *nm1 != (double)(dim - 1) ||
      !isParamVector(gamma, dim) || !isParamVector(beta, dim))
    return std::nullopt;
  m.chain.append({div, num, den, sqrt, var, sum, sum.getInput().getDefiningOp()});
  m.x = x;
  m.gamma = gamma;
  m.beta = beta;
  m.eps = *eps;
  return m;
}

/// The part layer_norm and rms_norm share: mul(div(y, sqrt(add(reduce_mean(y*y),
/// eps))), gamma), either operand order of mul and add. Returns y (the centered
/// input for layer_norm, the input itself for rms_norm) and fills gamma, eps
/// and the chain's ops (mul first).
Value matchScaledByRms(MulOp mul, Value &gamma, double &eps, SmallVectorImpl<Operation *> &chain) {
  auto dd = operandDefinedBy<DivOp>(mul);
  if (!dd)
    return {};
  auto [div, g] = *dd;
  Value y = div.getLhs();
  auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
  if (!sqrt)
    return {};
  auto ve = sqrt.getInput().getDefiningOp<AddOp>();
  if (!ve)
    return {};
  auto vm = operandDefinedBy<ReduceMeanOp>(ve);
  if (!vm)
    return {};
  auto [ms, epsV] = *vm;
  auto e = getScalarConstant(epsV);
  if (!e || *e < 0 || !ms.getKeepdim() || !lastAxis(ms, (int64_t)ms.getAxis()) ||
      !isSquareOf(ms.getInput(), y))
    return {};
  gamma = g;
  eps = *e;
  chain.append({mul, div, sqrt, ve, ms, ms.getInput().getDefiningOp()});
  return y;
}

/// layer_norm: add(mul(div(xc, sqrt(add(reduce_mean(xc*xc), eps))), gamma), beta)
std::optional<NormMatch> matchLayerNorm(AddOp root) {
  NormMatch m{NormVariant::layer_norm, {}, {}, {}, 0, {root}};
  auto mm = operandDefinedBy<MulOp>(root);
  if (!mm)
    return std::nullopt;
  auto [mul, beta] = *mm;
  Value xc = matchScaledByRms(mul, m.gamma, m.eps, m.chain);
  if (!xc)
    return std::nullopt;
  Value x = matchCentered(xc, m.chain);
  if (!x)
    return std::nullopt;
  int64_t dim = x.getType().cast<RankedTensorType>().getShape().back();
  if (!isParamVector(m.gamma, dim) || !isParamVector(beta, dim))
    return std::nullopt;
  m.x = x;
  m.beta = beta;
  return m;
}

/// rms_norm (T5's T5LayerNorm): mul(div(x, sqrt(add(reduce_mean(x*x), eps))), gamma).
/// Rooted at the mul. An x that is itself centered (x - mean(x)) is the inside
/// of a layer_norm, which its own pattern fuses at the final add.
std::optional<NormMatch> matchRmsNorm(MulOp root) {
  NormMatch m{NormVariant::rms_norm, {}, {}, {}, 0, {}};
  Value x = matchScaledByRms(root, m.gamma, m.eps, m.chain);
  SmallVector<Operation *> probe;
  if (!x || matchCentered(x, probe))
    return std::nullopt;
  if (!isParamVector(m.gamma, x.getType().cast<RankedTensorType>().getShape().back()))
    return std::nullopt;
  m.x = x;
  return m;
}

/// Every op in the chain except the root may only feed other chain ops.
bool chainIsPrivate(const NormMatch &m) {
  llvm::SmallPtrSet<Operation *, 16> in(m.chain.begin(), m.chain.end());
  for (Operation *op : m.chain) {
    if (op == m.chain.front())
      continue;
    for (Operation *user : op->getUsers())
      if (!in.contains(user))
        return false;
  }
  return true;
}

/// Rooted at the final add of either norm. The chain is private (checked), so
/// it is dead once the add is replaced; the greedy driver erases it.
struct FuseLayerNormPattern : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp root, PatternRewriter &rewriter) const override {
    auto m = matchStdNorm(root);
    if (!m)
      m = matchLayerNorm(root);
    if (!m)
      return rewriter.notifyMatchFailure(root, "not the last add of a norm");
    if (!chainIsPrivate(*m))
      return rewriter.notifyMatchFailure(root, "a norm intermediate has other users");
    if (m->x.getType() != root.getType())
      return rewriter.notifyMatchFailure(root, "the norm changes its input's type");
    rewriter.replaceOpWithNewOp<LayerNormOp>(
        root, root.getType(), NormVariantAttr::get(getContext(), m->variant), m->x, m->gamma,
        m->beta, rewriter.getF64FloatAttr(m->eps));
    return success();
  }
};

/// Rooted at the final mul of an rms_norm.
struct FuseRmsNormPattern : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp root, PatternRewriter &rewriter) const override {
    auto m = matchRmsNorm(root);
    if (!m)
      return rewriter.notifyMatchFailure(root, "not the last mul of an rms_norm");
    if (!chainIsPrivate(*m))
      return rewriter.notifyMatchFailure(root, "a norm intermediate has other users");
    if (m->x.getType() != root.getType())
      return rewriter.notifyMatchFailure(root, "the norm changes its input's type");
    rewriter.replaceOpWithNewOp<LayerNormOp>(root, root.getType(),
                                             NormVariantAttr::get(getContext(), m->variant),
                                             m->x, m->gamma, Value(),
                                             rewriter.getF64FloatAttr(m->eps));
    return success();
  }
};

struct FuseLayerNormPass : public mlir::tfc::impl::FuseLayerNormBase<FuseLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseLayerNormPattern, FuseRmsNormPattern>(&getContext());
    // Not converging within the driver's iterations leaves correct IR; as in
    // canonicalize, that is not an error.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns),
                                       fusionRewriteConfig(/*topDown=*/true));
  }
};

} // namespace
