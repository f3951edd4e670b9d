//===- DeriveGeneration.cpp - encode / decode_step from @forward ----------===//
//
// Derives the entry points a decoding loop needs from the fused @forward, with no
// description beyond the model's own graph (docs/generation.md):
//
//   @encode(sources...)            -> the encoder-side values the decoder reads
//                                     (cross-attention K/V, computed once)
//   @decode_step(step.tokens, step.pos, sources the decoder reads, encode
//                outputs..., caches...) -> the decoder outputs (logits)
//
// The target input is the one every causal self-attention's query depends on.
// Ops that depend on it form decode_step; ops that depend only on other inputs
// form encode. In decode_step a causal tfc.attention becomes
// tfc.cached_attention over a [batch, max_len, D] K and V cache (function
// arguments marked `tfc.state`, which the runtime keeps across calls), and
// tfc.token_embedding and tfc.rotary read their positions from step.pos on. Every other
// decoder-side op must act position by position. Where it does not, the model
// keeps only @forward and the pass warns at the op's location: generation is a
// derived capability, not a reason to reject a model that compiles.
//
//===----------------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/SymbolicShapes.h"
#include "tfc/kernel_schema.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::tfc {
#define GEN_PASS_DEF_DERIVEGENERATION
#include "passes/Passes.h.inc"
} // namespace mlir::tfc

using namespace mlir;
using namespace mlir::tfc;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

int64_t rankOf(Value v) { return v.getType().cast<RankedTensorType>().getRank(); }

bool isCausal(AttentionOp a) {
  return a.getMaskKind() == MaskKind::causal || a.getMaskKind() == MaskKind::padding_causal;
}

/// The symbolic name of every dynamic dim of |values| (as in the tfc.dims of
/// the inputs), found by re-inferring |f| with a distinct prime standing for
/// each input dim name.
LogicalResult symbolicDims(func::FuncOp f, ArrayRef<Value> values,
                           SmallVectorImpl<SmallVector<std::string>> &out) {
  std::vector<std::string> names;
  llvm::DenseMap<Value, SmallVector<std::string>> dimsOf;
  llvm::DenseSet<Value> wanted(values.begin(), values.end());
  auto dimValue = [&](StringRef nm) -> FailureOr<int64_t> {
    auto it = llvm::find(names, nm);
    if (it == names.end()) {
      if (names.size() == std::size(kDimSentinels))
        return failure();
      names.push_back(nm.str());
      it = names.end() - 1;
    }
    return kDimSentinels[it - names.begin()];
  };
  auto record = [&](Value orig, Value clone) -> LogicalResult {
    if (!wanted.count(orig))
      return success();
    SmallVector<std::string> dims;
    for (int64_t d : clone.getType().cast<RankedTensorType>().getShape()) {
      auto it = llvm::find(kDimSentinels, d);
      if (it == std::end(kDimSentinels))
        continue; // a static dim
      if ((size_t)(it - std::begin(kDimSentinels)) >= names.size())
        return failure();
      dims.push_back(names[it - std::begin(kDimSentinels)]);
    }
    dimsOf[orig] = std::move(dims);
    return success();
  };
  if (failed(reinferWithDims(f, dimValue, record)))
    return failure();
  for (Value v : values)
    out.push_back(dimsOf.lookup(v));
  return success();
}

/// A string array attribute of |xs|.
ArrayAttr strArray(Builder &b, ArrayRef<std::string> xs) {
  SmallVector<Attribute> a;
  for (const std::string &x : xs)
    a.push_back(b.getStringAttr(x));
  return b.getArrayAttr(a);
}

/// Clones |v|'s defining chain of constant ops into |map| on demand.
Value cloneConst(OpBuilder &ob, IRMapping &map, Value v) {
  if (Value m = map.lookupOrNull(v))
    return m;
  Operation *def = v.getDefiningOp();
  for (Value o : def->getOperands())
    cloneConst(ob, map, o);
  Operation *c = ob.clone(*def, map);
  return c->getResult(v.cast<OpResult>().getResultNumber());
}

struct Deriver {
  Deriver(ModuleOp module, func::FuncOp fwd) : module(module), fwd(fwd) {}

  ModuleOp module;
  func::FuncOp fwd;
  /// Per value: the bit set of @forward's inputs it depends on.
  llvm::DenseMap<Value, uint64_t> deps;
  unsigned target = 0;

  // What findTarget() and collectDecoder() find, for the builders.
  SmallVector<AttentionOp> causal;   // the causal self-attentions, in program order
  RankedTensorType tgtT;             // the target input's type
  DictionaryAttr dimMax;             // @forward's tfc.dim_max
  StringRef batchName, lenName;      // the target's dims
  IntegerAttr lenMax;                // len's declared maximum: the KV-cache length
  llvm::SetVector<Value> boundary;   // encode-side op results the decoder reads
  llvm::SetVector<Value> srcArgs;    // non-target inputs the decoder reads
  SmallVector<unsigned> decOutputs;  // @forward's results that depend on the target
  SmallVector<SmallVector<std::string>> boundaryDims; // the boundary's symbolic dims
  /// The cross-attentions that read their keys and values through a block
  /// table (findItemMemory), and the boundary values they read, which
  /// decode_step takes as [memory_rows, memory_len, width] blocks: a session
  /// passes one block per batch item, the engine pages them. memSrcName is
  /// the source length they all have in @forward (src_len).
  llvm::DenseSet<Operation *> itemAttn;
  llvm::DenseSet<Value> itemMemory;
  std::string memSrcName;
  int memBlocksArg = -1; // decode_step's step.memory_blocks, when itemAttn is not empty

  bool dependsOnTarget(Value v) const { return deps.lookup(v) >> target & 1; }
  bool isConst(Value v) const { return deps.lookup(v) == 0; }

  /// Why |op| (a decoder-side op) cannot run one position at a time, or empty.
  std::string positionWiseProblem(Operation *op) const;
  LogicalResult run();

  /// Computes deps, finds the causal self-attentions and the target input, and
  /// checks that it is [batch, len] with a declared maximum for len. False (with a
  /// warning where the model has causal self-attention) when there is nothing to
  /// derive.
  bool findTarget();
  /// Checks that every decoder-side op is position-wise and collects what the
  /// decoder reads from the encoder side; false (with a warning, except when no
  /// output depends on the target) when generation cannot be derived.
  bool collectDecoder();
  /// Finds the decoder's cross-attentions whose keys and values are boundary
  /// values read by nothing else, with no position bias and no mask but key
  /// padding: the rows of one batch item (its beams, the rows of an engine's
  /// request) can share one copy of them, through a block table.
  void findItemMemory();
  /// @encode, after @forward: the source inputs to the boundary values.
  func::FuncOp buildEncode(OpBuilder &b);
  /// @decode_step's signature and attributes: the positions of the source
  /// inputs, memory values and caches among its arguments go to the vectors.
  func::FuncOp createDecodeStep(OpBuilder &b, SmallVectorImpl<unsigned> &srcArgPos,
                                SmallVectorImpl<unsigned> &boundaryPos,
                                SmallVectorImpl<unsigned> &cachePos);
  /// @decode_step's body: the decoder-side ops, causal attentions over the caches.
  void cloneDecoder(func::FuncOp dec, ArrayRef<unsigned> srcArgPos,
                    ArrayRef<unsigned> boundaryPos, ArrayRef<unsigned> cachePos);
};

std::string Deriver::positionWiseProblem(Operation *op) const {
  auto lastAxis = [&](int64_t axis) {
    int64_t r = rankOf(op->getOperand(0));
    return axis == -1 || axis == r - 1;
  };
  if (auto a = dyn_cast<AttentionOp>(op)) {
    if (isCausal(a))
      return dependsOnTarget(a.getKey()) && dependsOnTarget(a.getValue())
                 ? ""
                 : "its causal attention reads keys that are not the target's";
    if (dependsOnTarget(a.getKey()) || dependsOnTarget(a.getValue()) ||
        (a.getMask() && dependsOnTarget(a.getMask())))
      return "an attention over target positions has no causal mask";
    return "";
  }
  if (auto r = dyn_cast<RotaryOp>(op))
    return r.getOffset() ? "its rotary embedding already has a position offset" : "";
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    // A reshape that keeps the batch and position dims (0 copies a dim) and
    // splits or merges the features (Qwen3's per-head norms) is position-wise.
    auto shape = r.getShape();
    return shape.size() >= 2 && shape[0] == 0 && shape[1] == 0 && rankOf(op->getOperand(0)) >= 2
               ? ""
               : "a reshape moves the positions";
  }
  if (auto t = dyn_cast<TokenEmbeddingOp>(op)) {
    if (t.getPositions() && t.getPositionAxis() != 1)
      return "its positional table is indexed by the batch axis, not by position";
    if (t.getTypeIds() && dependsOnTarget(t.getTypeIds()))
      return "target token types are not supported in decode_step";
    return "";
  }
  // The kernel's schema (include/tfc/kernels.def) says which kernels are
  // position-wise, and which broadcast elementwise.
  const ::tfc::schema::KernelInfo *info = nullptr;
  if (auto k = dyn_cast<KernelOpInterface>(op))
    info = ::tfc::schema::kernelInfo(k.getKernelId());
  if (info && info->flags & TFC_KF_POSITION_WISE)
    return "";
  if (info && info->flags & TFC_KF_BROADCAST) {
    int64_t r = rankOf(op->getResult(0));
    for (Value v : op->getOperands()) {
      if (dependsOnTarget(v) || rankOf(v) < r - 1 || rankOf(v) <= 1)
        continue;
      // Broadcast from the right: the operand's dim under the result's
      // position axis (r - 2); a static 1 there (Marian's [1, vocab]
      // final_logits_bias) is the same for every position.
      auto t = v.getType().dyn_cast<RankedTensorType>();
      const int64_t axis = rankOf(v) - 2;
      if (t && axis >= 0 && t.getDimSize(axis) == 1)
        continue;
      return "an elementwise operand varies along the positions but is not the target's";
    }
    return "";
  }
  if (auto s = dyn_cast<SoftmaxOp>(op))
    return lastAxis((int64_t)s.getAxis()) ? "" : "a softmax mixes positions";
  if (auto s = dyn_cast<LogSoftmaxOp>(op))
    return lastAxis((int64_t)s.getAxis()) ? "" : "a log_softmax mixes positions";
  if (auto s = dyn_cast<SliceOp>(op))
    return lastAxis((int64_t)s.getAxis()) ? "" : "a slice cuts the positions";
  return "'" + op->getName().getStringRef().str() + "' may mix positions";
}

LogicalResult Deriver::run() {
  if (fwd.getNumArguments() > 63)
    return success();
  if (!findTarget() || !collectDecoder())
    return success();
  findItemMemory();
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointAfter(fwd);
  if (!boundary.empty())
    b.setInsertionPointAfter(buildEncode(b));
  SmallVector<unsigned> srcArgPos, boundaryPos, cachePos;
  func::FuncOp dec = createDecodeStep(b, srcArgPos, boundaryPos, cachePos);
  cloneDecoder(dec, srcArgPos, boundaryPos, cachePos);
  auto nameOfArg = [&](unsigned i) {
    auto n = fwd.getArgAttrOfType<StringAttr>(i, "tfc.name");
    return n ? n.str() : "input" + std::to_string(i);
  };
  module->setAttr("tfc.generation",
                  b.getDictionaryAttr(
                      {b.getNamedAttr("target", b.getStringAttr(nameOfArg(target))),
                       b.getNamedAttr("max_len", b.getI64IntegerAttr(lenMax.getInt()))}));
  return success();
}

bool Deriver::findTarget() {
  Block &body = fwd.getBody().front();
  for (auto [i, arg] : llvm::enumerate(fwd.getArguments()))
    deps[arg] = uint64_t(1) << i;
  for (Operation &op : body.without_terminator()) {
    uint64_t m = 0;
    for (Value v : op.getOperands())
      m |= deps.lookup(v);
    for (Value r : op.getResults())
      deps[r] = m;
    if (auto a = dyn_cast<AttentionOp>(op); a && isCausal(a))
      causal.push_back(a);
  }
  if (causal.empty())
    return false; // no decoder: nothing to generate with
  uint64_t common = ~uint64_t(0);
  for (AttentionOp a : causal)
    common &= deps.lookup(a.getQuery());
  if (__builtin_popcountll(common) != 1) {
    emitWarning(causal.front().getLoc(),
                "no generation entry points: the causal self-attentions do not read "
                "exactly one target input");
    return false;
  }
  target = (unsigned)__builtin_ctzll(common);
  tgtT = fwd.getArgument(target).getType().cast<RankedTensorType>();
  auto tgtDims = fwd.getArgAttrOfType<ArrayAttr>(target, "tfc.dims");
  dimMax = fwd->getAttrOfType<DictionaryAttr>("tfc.dim_max");
  if (tgtT.getRank() != 2 || !tgtDims || tgtDims.size() != 2 || !dimMax) {
    emitWarning(fwd.getLoc(), "no generation entry points: the target input is not "
                              "[batch, len] token ids");
    return false;
  }
  batchName = tgtDims[0].cast<StringAttr>().getValue();
  lenName = tgtDims[1].cast<StringAttr>().getValue();
  lenMax = dimMax.getAs<IntegerAttr>(lenName);
  if (!lenMax) {
    emitWarning(fwd.getLoc(), "no generation entry points: no declared maximum for '")
        << lenName << "'";
    return false;
  }
  return true;
}

bool Deriver::collectDecoder() {
  Block &body = fwd.getBody().front();
  // Classify and check the decoder side; collect the boundary it reads.
  for (Operation &op : body.without_terminator()) {
    if (!dependsOnTarget(op.getResult(0)))
      continue;
    std::string why = positionWiseProblem(&op);
    if (!why.empty()) {
      emitWarning(op.getLoc(), "no generation entry points: ") << why;
      return false;
    }
    for (Value v : op.getOperands()) {
      if (dependsOnTarget(v) || isConst(v))
        continue;
      if (auto ba = v.dyn_cast<BlockArgument>())
        srcArgs.insert(v);
      else
        boundary.insert(v);
    }
  }
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands()))
    if (dependsOnTarget(v))
      decOutputs.push_back(i);
  if (decOutputs.empty())
    return false;

  if (failed(symbolicDims(fwd, boundary.getArrayRef(), boundaryDims))) {
    emitWarning(fwd.getLoc(), "no generation entry points: the shapes of the values "
                              "encode hands to decode_step are not symbolic");
    return false;
  }
  return true;
}

void Deriver::findItemMemory() {
  Block &body = fwd.getBody().front();
  auto isBoundary = [&](Value v) { return boundary.contains(v); };
  llvm::SmallVector<AttentionOp> candidates;
  for (Operation &op : body.without_terminator()) {
    auto a = dyn_cast<AttentionOp>(op);
    if (!a || !dependsOnTarget(a.getResult()) || isCausal(a) || a.getPositionBias() ||
        a.getBlockTable() ||
        (a.getMaskKind() != MaskKind::none && a.getMaskKind() != MaskKind::key_padding) ||
        !isBoundary(a.getKey()) || !isBoundary(a.getValue()))
      continue;
    candidates.push_back(a);
  }
  // A boundary value is per item when every decoder-side use is as the key or
  // value of a candidate, it is [rows, source length, width] with both
  // counts dynamic, and every such value has the same source length.
  auto perItem = [&](Value v) {
    auto t = v.getType().cast<RankedTensorType>();
    if (t.getRank() != 3 || t.getDimSize(0) != kDyn || t.getDimSize(1) != kDyn)
      return false;
    const SmallVector<std::string> &dims =
        boundaryDims[llvm::find(boundary, v) - boundary.begin()];
    if (dims.size() < 2 || (!memSrcName.empty() && dims[1] != memSrcName) ||
        !dimMax.getAs<IntegerAttr>(dims[1]))
      return false;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (!dependsOnTarget(user->getResult(0)))
        continue; // encode-side
      auto a = dyn_cast<AttentionOp>(user);
      if (!a || !llvm::is_contained(candidates, a) ||
          (use.get() != a.getKey() && use.get() != a.getValue()) || a.getMask() == v)
        return false;
    }
    return true;
  };
  for (AttentionOp a : candidates)
    if (perItem(a.getKey()) && perItem(a.getValue())) {
      memSrcName = boundaryDims[llvm::find(boundary, a.getKey()) - boundary.begin()][1];
      itemAttn.insert(a);
    }
  // Every reader of a value in blocks must read it through the table: drop
  // the attentions whose memory another candidate reads without one, until
  // none is left to drop.
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation *a : llvm::to_vector(itemAttn)) {
      auto att = cast<AttentionOp>(a);
      for (Value x : {att.getKey(), att.getValue()})
        for (Operation *user : x.getUsers())
          if (dependsOnTarget(user->getResult(0)) && !itemAttn.contains(user) &&
              itemAttn.contains(a)) {
            itemAttn.erase(a);
            changed = true;
          }
    }
  }
  for (Operation *a : itemAttn) {
    itemMemory.insert(cast<AttentionOp>(a).getKey());
    itemMemory.insert(cast<AttentionOp>(a).getValue());
  }
}

func::FuncOp Deriver::buildEncode(OpBuilder &b) {
  Block &body = fwd.getBody().front();
  SmallVector<Type> argTypes, resTypes;
  SmallVector<unsigned> srcIdx;
  for (unsigned i = 0; i < fwd.getNumArguments(); ++i)
    if (i != target) {
      srcIdx.push_back(i);
      argTypes.push_back(fwd.getArgument(i).getType());
    }
  for (Value v : boundary)
    resTypes.push_back(v.getType());
  auto enc = b.create<func::FuncOp>(fwd.getLoc(), "encode",
                                    FunctionType::get(module.getContext(), argTypes, resTypes));
  enc->setAttr("tfc.dim_max", dimMax);
  Block *eb = enc.addEntryBlock();
  IRMapping map;
  for (auto [j, i] : llvm::enumerate(srcIdx)) {
    map.map(fwd.getArgument(i), eb->getArgument(j));
    enc.setArgAttrs(j, fwd.getArgAttrDict(i));
  }
  // The ops the boundary needs, in program order.
  llvm::DenseSet<Operation *> needed;
  SmallVector<Value> work(boundary.begin(), boundary.end());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !needed.insert(def).second)
      continue;
    for (Value o : def->getOperands())
      work.push_back(o);
  }
  OpBuilder eb2 = OpBuilder::atBlockEnd(eb);
  for (Operation &op : body.without_terminator())
    if (needed.count(&op))
      eb2.clone(op, map);
  SmallVector<Value> results;
  for (Value v : boundary)
    results.push_back(map.lookup(v));
  eb2.create<func::ReturnOp>(fwd.getLoc(), results);
  for (unsigned i = 0; i < boundary.size(); ++i)
    enc.setResultAttr(i, "tfc.name", b.getStringAttr("memory." + std::to_string(i)));
  return enc;
}

func::FuncOp Deriver::createDecodeStep(OpBuilder &b, SmallVectorImpl<unsigned> &srcArgPos,
                                       SmallVectorImpl<unsigned> &boundaryPos,
                                       SmallVectorImpl<unsigned> &cachePos) {
  auto ret = cast<func::ReturnOp>(fwd.getBody().front().getTerminator());
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  auto addArg = [&](Type t, ArrayRef<NamedAttribute> attrs) {
    argTypes.push_back(t);
    argAttrs.push_back(b.getDictionaryAttr(attrs));
    return argTypes.size() - 1;
  };
  auto named = [&](StringRef n, Attribute a) { return b.getNamedAttr(n, a); };
  addArg(RankedTensorType::get({kDyn, kDyn}, tgtT.getElementType()),
         {named("tfc.name", b.getStringAttr("step.tokens")),
          named("tfc.dims", strArray(b, {batchName.str(), "step"}))});
  // One position per row, and each row's block table: the cache blocks its K
  // and V live in, in position order. The runtime picks the block length (the
  // caches' second dim): a session gives each row one block of max_len
  // positions, the engine pages rows in short blocks. So rows at different
  // positions, in any blocks, share a step (continuous batching).
  addArg(RankedTensorType::get({kDyn}, b.getI64Type()),
         {named("tfc.name", b.getStringAttr("step.pos")),
          named("tfc.dims", strArray(b, {batchName.str()}))});
  addArg(RankedTensorType::get({kDyn, kDyn}, b.getI64Type()),
         {named("tfc.name", b.getStringAttr("step.blocks")),
          named("tfc.dims", strArray(b, {batchName.str(), "kv_blocks"}))});
  // The cross-attentions that read encoder memory through a block table: row
  // b's source position p is in memory block step.memory_blocks[b][p / L] at
  // p % L (L: the memory's second dim, memory_len). A session passes one block
  // per batch item (L = its source length), the engine pages the memory in
  // its pool; either way the beams of an item share one copy.
  if (!itemAttn.empty())
    memBlocksArg = (int)addArg(
        RankedTensorType::get({kDyn, kDyn}, b.getI64Type()),
        {named("tfc.name", b.getStringAttr("step.memory_blocks")),
         named("tfc.dims", strArray(b, {batchName.str(), "memory_blocks"}))});
  for (Value v : srcArgs) {
    unsigned i = v.cast<BlockArgument>().getArgNumber();
    auto d = fwd.getArgAttrDict(i);
    srcArgPos.push_back(addArg(v.getType(), d ? d.getValue() : ArrayRef<NamedAttribute>{}));
  }
  for (auto [j, v] : llvm::enumerate(boundary)) {
    SmallVector<std::string> dims = boundaryDims[j];
    if (itemMemory.contains(v)) {
      dims[0] = "memory_rows";
      dims[1] = "memory_len";
    }
    boundaryPos.push_back(addArg(
        v.getType(), {named("tfc.name", b.getStringAttr("memory." + std::to_string(j))),
                      named("tfc.dims", strArray(b, dims))}));
  }
  int64_t L = lenMax.getInt();
  for (auto [j, a] : llvm::enumerate(causal)) {
    auto kT = a.getKey().getType().cast<RankedTensorType>();
    auto vT = a.getValue().getType().cast<RankedTensorType>();
    for (auto [which, t] : {std::make_pair("k", kT), std::make_pair("v", vT)}) {
      auto ct = RankedTensorType::get({kDyn, L, t.getDimSize(2)}, t.getElementType());
      cachePos.push_back(addArg(
          ct, {named("tfc.name", b.getStringAttr("cache." + std::string(which) + "." +
                                                 std::to_string(j))),
               named("tfc.dims", strArray(b, {batchName.str()})),
               named("tfc.state", b.getUnitAttr())}));
    }
  }
  SmallVector<Type> resTypes;
  for (unsigned i : decOutputs)
    resTypes.push_back(ret.getOperand(i).getType());
  auto dec = b.create<func::FuncOp>(fwd.getLoc(), "decode_step",
                                    FunctionType::get(module.getContext(), argTypes, resTypes));
  SmallVector<NamedAttribute> dm(dimMax.getValue());
  // Up to max_len new tokens per row and call: a prompt is prefilled in one
  // call (or a few, chunked by the runtime). The runtime plans each call's
  // arena for its actual sizes, so a one-token step stays small.
  if (!dimMax.get("step"))
    dm.push_back(named("step", b.getI64IntegerAttr(L)));
  // Blocks per row: at most one per position (blocks of one position).
  if (!dimMax.get("kv_blocks"))
    dm.push_back(named("kv_blocks", b.getI64IntegerAttr(L)));
  if (!itemAttn.empty()) {
    // Memory in blocks of at most a whole source, one per position at least;
    // as many blocks as every row's source in blocks of one, and a block of
    // zeros (the engine's padding).
    const int64_t S = dimMax.getAs<IntegerAttr>(memSrcName).getInt();
    const auto bm = dimMax.getAs<IntegerAttr>(batchName);
    const int64_t rowsMax = bm ? bm.getInt() : 1;
    for (auto [name, v] : {std::make_pair("memory_rows", rowsMax * S + 1),
                           std::make_pair("memory_len", S), std::make_pair("memory_blocks", S)})
      if (!dimMax.get(name))
        dm.push_back(named(name, b.getI64IntegerAttr(v)));
  }
  dec->setAttr("tfc.dim_max", b.getDictionaryAttr(dm));
  dec.addEntryBlock();
  for (unsigned i = 0; i < argAttrs.size(); ++i)
    dec.setArgAttrs(i, argAttrs[i]);
  for (auto [j, i] : llvm::enumerate(decOutputs))
    dec.setResultAttrs(j, fwd.getResultAttrDict(i));
  return dec;
}

void Deriver::cloneDecoder(func::FuncOp dec, ArrayRef<unsigned> srcArgPos,
                           ArrayRef<unsigned> boundaryPos, ArrayRef<unsigned> cachePos) {
  Block &body = fwd.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Block *db = &dec.getBody().front();
  IRMapping map;
  map.map(fwd.getArgument(target), db->getArgument(0));
  Value pos = db->getArgument(1), blocks = db->getArgument(2);
  for (auto [j, v] : llvm::enumerate(srcArgs))
    map.map(v, db->getArgument(srcArgPos[j]));
  for (auto [j, v] : llvm::enumerate(boundary))
    map.map(v, db->getArgument(boundaryPos[j]));
  OpBuilder ob = OpBuilder::atBlockEnd(db);
  // A step of T tokens (a prefill) needs the logits of its last position only.
  // Each output is cut to that position as early as the graph allows: before
  // the linear (the LM head) that ends its chain of position-wise ops, or at
  // the output itself. The ops after the cut then run on one position per row.
  llvm::DenseMap<Operation *, unsigned> cutInput; // op -> operand cut before it
  llvm::SmallSetVector<Value, 2> cutOutput;
  for (unsigned i : decOutputs) {
    Value v = ret.getOperand(i);
    Operation *op = v.getDefiningOp();
    while (op && !isa<LinearOp, FusedLinearOp>(op) && op->getNumResults() == 1 &&
           positionWiseProblem(op).empty()) {
      Value next;
      unsigned n = 0;
      for (Value o : op->getOperands())
        if (dependsOnTarget(o) && ++n == 1)
          next = o;
      if (n != 1 || rankOf(next) != rankOf(v) || !next.hasOneUse())
        break;
      op = next.getDefiningOp();
    }
    if (op && isa<LinearOp, FusedLinearOp>(op) && dependsOnTarget(op->getOperand(0)) &&
        rankOf(op->getOperand(0)) == 3 && op->getOperand(0).hasOneUse() &&
        llvm::none_of(llvm::drop_begin(op->getOperands()),
                      [&](Value o) { return dependsOnTarget(o); }))
      cutInput[op] = 0;
    else if (rankOf(v) >= 2)
      cutOutput.insert(v);
  }
  auto lastPosition = [&](Location loc, Value x) -> Value {
    return ob.create<SliceOp>(loc, x, ob.getI64IntegerAttr(rankOf(x) - 2),
                              ob.getI64IntegerAttr(-1), ob.getI64IntegerAttr(1));
  };
  unsigned nextCache = 0;
  for (Operation &op : body.without_terminator()) {
    if (!dependsOnTarget(op.getResult(0)))
      continue;
    for (Value v : op.getOperands())
      if (isConst(v))
        cloneConst(ob, map, v);
    if (auto it = cutInput.find(&op); it != cutInput.end()) {
      Value in = op.getOperand(it->second);
      IRMapping local = map;
      local.map(in, lastPosition(op.getLoc(), map.lookup(in)));
      Operation *c = ob.clone(op, local);
      for (auto [r, cr] : llvm::zip(op.getResults(), c->getResults()))
        map.map(r, cr);
      continue;
    }
    if (auto a = dyn_cast<AttentionOp>(op); a && itemAttn.contains(a)) {
      auto c = ob.create<AttentionOp>(
          a.getLoc(), a.getType(), a.getMaskKindAttr(), map.lookup(a.getQuery()),
          map.lookup(a.getKey()), map.lookup(a.getValue()),
          a.getMask() ? map.lookup(a.getMask()) : Value(), /*position_bias=*/Value(),
          db->getArgument(memBlocksArg), a.getNumHeadsAttr(), a.getScaleAttr(),
          a.getMaskValueAttr(), a.getPadIdAttr(), a.getBiasBidirectionalAttr(),
          a.getBiasMaxDistanceAttr(), a.getNumKvHeadsAttr(), a.getWindowAttr(),
          a.getSoftcapAttr());
      map.map(a.getResult(), c.getResult());
      continue;
    }
    if (auto a = dyn_cast<AttentionOp>(op); a && isCausal(a)) {
      Value kc = db->getArgument(cachePos[nextCache++]);
      Value vc = db->getArgument(cachePos[nextCache++]);
      auto c = ob.create<CachedAttentionOp>(
          a.getLoc(), a.getType(), map.lookup(a.getQuery()), map.lookup(a.getKey()),
          map.lookup(a.getValue()), kc, vc, pos,
          a.getPositionBias() ? map.lookup(a.getPositionBias()) : Value(), blocks,
          /*inv_freq=*/Value(), a.getNumHeadsAttr(), a.getScaleAttr(),
          a.getBiasBidirectionalAttr(), a.getBiasMaxDistanceAttr(), a.getNumKvHeadsAttr(),
          a.getWindowAttr(), a.getSoftcapAttr(), ob.getBoolAttr(false));
      map.map(a.getResult(), c.getResult());
      continue;
    }
    if (auto r = dyn_cast<RotaryOp>(op)) {
      // The new tokens' positions start at each row's step.pos.
      auto rc = ob.create<RotaryOp>(r.getLoc(), r.getType(), map.lookup(r.getInput()),
                                    map.lookup(r.getInvFreq()), pos, r.getHeadDimAttr(),
                                    r.getInterleavedAttr());
      map.map(r.getResult(), rc.getResult());
      continue;
    }
    if (auto t = dyn_cast<TokenEmbeddingOp>(op); t && t.getPositions()) {
      auto te = ob.create<TokenEmbeddingOp>(
          t.getLoc(), t.getType(), map.lookup(t.getIds()), map.lookup(t.getTable()),
          map.lookup(t.getPositions()),
          t.getTypeIds() ? map.lookup(t.getTypeIds()) : Value(),
          t.getTypeTable() ? map.lookup(t.getTypeTable()) : Value(), pos,
          t.getScaleAttr(), t.getPositionAxisAttr());
      map.map(t.getResult(), te.getResult());
      continue;
    }
    ob.clone(op, map);
  }
  SmallVector<Value> results;
  for (unsigned i : decOutputs) {
    Value v = ret.getOperand(i);
    results.push_back(cutOutput.count(v) ? lastPosition(v.getLoc(), map.lookup(v))
                                         : map.lookup(v));
  }
  ob.create<func::ReturnOp>(fwd.getLoc(), results);
  // The ops after a cut were cloned with @forward's types; infer them again,
  // in program order, and give decode_step the results' types.
  for (Operation &op : db->without_terminator()) {
    auto iface = dyn_cast<InferTypeOpInterface>(&op);
    if (!iface)
      continue;
    SmallVector<Type> types;
    if (failed(iface.inferReturnTypes(op.getContext(), op.getLoc(), op.getOperands(),
                                      op.getAttrDictionary(), op.getRegions(), types)))
      continue; // the verifier reports it at the op
    for (auto [r, t] : llvm::zip(op.getResults(), types))
      r.setType(t);
  }
  SmallVector<Type> resTypes;
  for (Value v : results)
    resTypes.push_back(v.getType());
  dec.setFunctionType(FunctionType::get(dec.getContext(), dec.getArgumentTypes(), resTypes));
}

struct DeriveGenerationPass
    : public mlir::tfc::impl::DeriveGenerationBase<DeriveGenerationPass> {
  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto fwd = m.lookupSymbol<func::FuncOp>("forward");
    if (!fwd || m.lookupSymbol("decode_step"))
      return;
    Deriver d{m, fwd};
    if (failed(d.run()))
      signalPassFailure();
  }
};

} // namespace
