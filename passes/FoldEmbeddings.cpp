//===- FoldEmbeddings.cpp - one kernel for the whole embedding ------------===//
//
// add(mul(embedding(W, ids), c), embedding(table, positions(ids))) and its
// variants (no scale, learned or sinusoidal table, token types) become one
// tfc.token_embedding: the scale is an attribute, the positional table a constant
// computed at compile time, so the runtime does one gather-scale-add pass.
//
//===----------------------------------------------------------------------------===//
#include "passes/PassUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

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
  SmallVector<Operation *> dead;
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
    p.dead.push_back(m);
    p.dead.push_back(emb);
    return true;
  }
  auto emb = v.getDefiningOp<EmbeddingOp>();
  if (!emb || !emb->hasOneUse() ||
      emb.getIds().getType().cast<RankedTensorType>().getRank() != 2 ||
      emb.getIds().getDefiningOp<PositionsOp>())
    return false;
  p.tok = emb;
  p.dead.push_back(emb);
  return true;
}

/// Matches embedding(table, positions(ids)) for the same ids.
bool matchPositions(Value v, Parts &p) {
  auto emb = v.getDefiningOp<EmbeddingOp>();
  if (!emb || !emb->hasOneUse())
    return false;
  auto pos = emb.getIds().getDefiningOp<PositionsOp>();
  if (!pos || pos.getInput() != p.tok.getIds())
    return false;
  p.posTable = emb.getTable();
  p.posAxis = (int64_t)pos.getAxis();
  p.dead.push_back(emb);
  return true;
}

struct FoldEmbeddingsPass
    : public mlir::tfc::impl::FoldEmbeddingsBase<FoldEmbeddingsPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp a) { adds.push_back(a); });
    llvm::SmallPtrSet<Operation *, 16> erased;
    // Outermost adds first, so a chain tok + types + positions folds as a whole.
    for (AddOp add : llvm::reverse(adds)) {
      if (erased.contains(add))
        continue;
      // Flatten a chain of adds: tok (+ types) + positions, in any order.
      SmallVector<Value, 3> terms;
      SmallVector<AddOp, 2> chain{add};
      for (Value o : {add.getLhs(), add.getRhs()}) {
        auto inner = o.getDefiningOp<AddOp>();
        if (inner && inner->hasOneUse() && inner.getType() == add.getType()) {
          terms.push_back(inner.getLhs());
          terms.push_back(inner.getRhs());
          chain.push_back(inner);
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
          p.dead.push_back(te);
        }
        matched = true;
      }
      if (!matched)
        continue;
      if (!p.posTable && !p.types)
        continue;
      OpBuilder b(add);
      OperationState st(add.getLoc(), TokenEmbeddingOp::getOperationName());
      st.addOperands({p.tok.getIds(), p.tok.getTable()});
      if (p.posTable)
        st.addOperands(p.posTable);
      if (p.types)
        st.addOperands({p.types.getIds(), p.types.getTable()});
      st.addTypes(add.getType());
      st.addAttribute("scale", b.getF64FloatAttr(p.scale));
      st.addAttribute("position_axis", b.getI64IntegerAttr(p.posAxis));
      st.addAttribute("operand_segment_sizes",
                      b.getDenseI32ArrayAttr({1, 1, p.posTable ? 1 : 0,
                                              p.types ? 1 : 0, p.types ? 1 : 0, 0}));
      Operation *te = b.create(st);
      add.getResult().replaceAllUsesWith(te->getResult(0));
      for (AddOp a : chain) {
        erased.insert(a);
        a->erase();
      }
      for (Operation *op : p.dead)
        if (op->use_empty())
          op->erase();
    }
  }
};

} // namespace
