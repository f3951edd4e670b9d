//===- FoldEmbeddings.cpp - one kernel for the whole embedding ------------===//
//
// add(mul(embedding(W, ids), c), embedding(table, positions(ids))) and its
// variants (no scale, learned or sinusoidal table, token types) become one
// tfc.token_embedding: the scale is an attribute, the positional table a constant
// computed at compile time, so the runtime does one gather-scale-add pass.
// Then a token lookup that is left alone (LLaMA, T5: no positional table;
// Gemma: scaled) becomes a token_embedding too, so that --precision int8 /
// int4 store its table in int8 as every other token table (and as the tied
// lm_head that shares it), instead of f32.
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::tfc {
#define GEN_PASS_DEF_FOLDEMBEDDINGS
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

struct Parts {
  EmbeddingOp tok;
  double scale = 1.0;
  Value posTable;
  int64_t posAxis = 1;
  EmbeddingOp types;
};

/// Matches a token lookup, optionally scaled: embedding(W, ids) [* c].
bool matchToken(Value v, Parts &p) {
  if (auto m = v.getDefiningOp<MulOp>()) {
    auto c = getScalarConstant(m.getRhs());
    Value e = m.getLhs();
    if (!c) {
      c = getScalarConstant(m.getLhs());
      e = m.getRhs();
    }
    auto emb = e.getDefiningOp<EmbeddingOp>();
    if (!c || !emb || !m->hasOneUse() || !emb->hasOneUse())
      return false;
    p.tok = emb;
    p.scale = *c;
    return true;
  }
  auto emb = v.getDefiningOp<EmbeddingOp>();
  if (!emb || !emb->hasOneUse() ||
      emb.getIds().getType().cast<RankedTensorType>().getRank() != 2 ||
      emb.getIds().getDefiningOp<PositionsOp>())
    return false;
  p.tok = emb;
  return true;
}

/// Matches embedding(table, positions(ids)) for the same ids.
bool matchPositions(Value v, Parts &p) {
  auto emb = v.getDefiningOp<EmbeddingOp>();
  if (!emb || !emb->hasOneUse())
    return false;
  auto pos = emb.getIds().getDefiningOp<PositionsOp>();
  // RoBERTa's padded positions depend on the ids: the fused kernel numbers
  // positions 0, 1, 2, ..., so those stay a positions op and a lookup.
  if (!pos || pos.getInput() != p.tok.getIds() || pos.getPaddingIdx())
    return false;
  p.posTable = emb.getTable();
  p.posAxis = (int64_t)pos.getAxis();
  return true;
}

/// Rooted at the outermost add of tok (+ types) + positions, in any order.
struct FoldEmbeddingsPattern : public OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    // Flatten a chain of adds: tok (+ types) + positions, in any order.
    SmallVector<Value, 3> terms;
    for (Value o : {add.getLhs(), add.getRhs()}) {
      auto inner = o.getDefiningOp<AddOp>();
      if (inner && inner->hasOneUse() && inner.getType() == add.getType()) {
        terms.push_back(inner.getLhs());
        terms.push_back(inner.getRhs());
      } else {
        terms.push_back(o);
      }
    }
    // Any term may be the token lookup (the others refer to its ids): try each.
    Parts p;
    bool matched = false;
    for (size_t t = 0; t < terms.size() && !matched; ++t) {
      p = Parts();
      if (!matchToken(terms[t], p))
        continue;
      SmallVector<Value> rest;
      for (size_t j = 0; j < terms.size(); ++j)
        if (j != t && !(!p.posTable && matchPositions(terms[j], p)))
          rest.push_back(terms[j]);
      if (rest.size() > 1)
        continue;
      if (rest.size() == 1) {
        // What is left may be one token-type lookup.
        auto te = rest[0].getDefiningOp<EmbeddingOp>();
        if (!te || !te->hasOneUse() || te.getIds().getDefiningOp<PositionsOp>() ||
            te.getIds().getType() != p.tok.getIds().getType())
          continue;
        p.types = te;
      }
      matched = true;
    }
    if (!matched)
      return rewriter.notifyMatchFailure(add, "not a sum of embedding lookups of one ids");
    if (!p.posTable && !p.types)
      return rewriter.notifyMatchFailure(add, "no positional or token-type table to fold");
    // The adds and lookups are dead once the outer add is replaced; the greedy
    // driver erases them.
    rewriter.replaceOpWithNewOp<TokenEmbeddingOp>(
        add, add.getType(), p.tok.getIds(), p.tok.getTable(), p.posTable,
        p.types ? p.types.getIds() : Value(), p.types ? p.types.getTable() : Value(),
        /*position_offset=*/Value(), rewriter.getF64FloatAttr(p.scale),
        rewriter.getI64IntegerAttr(p.posAxis));
    return success();
  }
};

/// A lone token lookup, optionally scaled: embedding(W, ids) [* c] with W a
/// weight and ids of rank 2 that are not positions.
struct FoldTokenLookupPattern : public OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(EmbeddingOp emb, PatternRewriter &rewriter) const override {
    if (emb.getIds().getType().cast<RankedTensorType>().getRank() != 2 ||
        emb.getIds().getDefiningOp<PositionsOp>() || !emb.getTable().getDefiningOp<WeightOp>())
      return rewriter.notifyMatchFailure(emb, "not a lookup of token ids [batch, len] in a "
                                              "weight table");
    Operation *root = emb;
    double scale = 1.0;
    if (emb->hasOneUse())
      if (auto m = dyn_cast<MulOp>(*emb->getUsers().begin())) {
        auto c = getScalarConstant(m.getLhs() == emb.getResult() ? m.getRhs() : m.getLhs());
        if (c && m.getType() == emb.getType()) {
          root = m;
          scale = *c;
        }
      }
    rewriter.replaceOpWithNewOp<TokenEmbeddingOp>(
        root, emb.getType(), emb.getIds(), emb.getTable(), /*positions=*/Value(),
        /*type_ids=*/Value(), /*type_table=*/Value(), /*position_offset=*/Value(),
        rewriter.getF64FloatAttr(scale), rewriter.getI64IntegerAttr(1));
    return success();
  }
};

struct FoldEmbeddingsPass
    : public mlir::tfc::impl::FoldEmbeddingsBase<FoldEmbeddingsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldEmbeddingsPattern>(&getContext());
    // Bottom-up: the outermost add first, so tok + types + positions folds as
    // a whole. Not converging is not an error (as in canonicalize).
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns),
                                       fusionRewriteConfig(/*topDown=*/false));
    // Then the lookups no sum took.
    RewritePatternSet lone(&getContext());
    lone.add<FoldTokenLookupPattern>(&getContext());
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(lone),
                                       fusionRewriteConfig(/*topDown=*/false));
  }
};

} // namespace
