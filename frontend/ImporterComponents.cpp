//===- ImporterComponents.cpp - norms, attention, FFN ---------------------===//
//
// The sublayer components, each expanded into primitive tfc ops exactly as the
// PyTorch code the description mirrors computes it: attention becomes linear /
// reshape / transpose / matmul / scale / masked_fill / softmax / matmul, norms
// become reductions and arithmetic. Fusing them back is the passes' job, so the
// frontend stays a faithful transcription. Linear layers: ImporterLinear.cpp.
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

using namespace mlir;
namespace td = ::mlir::tfc;

namespace tfc::detail {

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitNorm(const Node &n, Value x, StringRef what, int64_t width) {
  const int64_t dModel = width > 0 ? width : this->dModel; // the features normalized
  if (failed(expectMap(n, what)) ||
      failed(checkKeys(n, what, {"kind", "name", "eps", "gain", "shift", "offset"})))
    return failure();
  std::string kind = "layer_norm";
  if (const Node *k = n.get("kind")) {
    auto v = getChoice(*k, "norm kind", {"layer_norm", "std_norm", "rms_norm"});
    if (failed(v))
      return failure();
    kind = *v;
  }
  bool stdNorm = kind == "std_norm";
  bool rmsNorm = kind == "rms_norm";
  if (rmsNorm && n.get("shift"))
    return error(*n.keyNode("shift"), "an rms_norm has no shift");
  auto nameNode = require(n, "name", what);
  if (failed(nameNode))
    return failure();
  auto name = getString(**nameNode, "name");
  if (failed(name))
    return failure();
  double eps = stdNorm || rmsNorm ? 1e-6 : 1e-5;
  if (const Node *e = n.get("eps")) {
    auto v = evalNum(*e, "eps");
    if (failed(v))
      return failure();
    if (!(v->value >= 0))
      return error(*e, "'eps' must be non-negative");
    eps = v->value;
  }
  std::string gain = stdNorm ? "alpha" : "weight";
  std::string shift = "bias";
  // `shift: false`: a LayerNorm without a bias (Cohere's, OLMo's).
  const Node *sn = n.get("shift");
  const bool noShift = sn && sn->isScalar() && sn->scalar == "false";
  for (auto [key, dst] : {std::pair<const char *, std::string *>{"gain", &gain},
                          {"shift", &shift}})
    if (const Node *g = n.get(key); g && !(g == sn && noShift)) {
      auto v = getString(*g, key);
      if (failed(v))
        return failure();
      *dst = *v;
    }
  auto xt = x.getType().cast<RankedTensorType>();
  if (!xt.getElementType().isa<FloatType>() || xt.getRank() < 1 ||
      (xt.getShape().back() != kDyn && xt.getShape().back() != dModel))
    return error(n, what + " normalizes over " + (width > 0 ? "head_dim" : "d_model") +
                        " (" + Twine(dModel) + ") features, but its input is " + typeStr(xt));
  std::string prefix = qualify(*name) + ".";
  auto g = weight(n, prefix + gain, {dModel}, WeightRole::Gain);
  if (failed(g))
    return failure();
  Location l = loc(n, prefix.substr(0, prefix.size() - 1));
  if (const Node *on = n.get("offset")) {
    // The gain is offset + weight (Gemma's RMSNorm multiplies by 1 + weight,
    // in f32): summed here, once, into a constant of the model.
    auto off = evalNum(*on, "offset");
    if (failed(off))
      return failure();
    if (off->value != 0) {
      std::vector<float> vals = ws.materialize(prefix + gain);
      for (float &v : vals)
        v = static_cast<float>(v + static_cast<float>(off->value));
      auto t = RankedTensorType::get({dModel}, b.getF32Type());
      g = make<td::ConstantOp>(
          l, {}, {attr("value", DenseElementsAttr::get(t, llvm::ArrayRef<float>(vals)))});
      if (failed(g))
        return failure();
    }
  }
  auto red = [&](auto tag, Value v) {
    using OpT = decltype(tag);
    return make<OpT>(l, {v}, {i64("axis", -1), attr("keepdim", b.getBoolAttr(true))});
  };
  if (rmsNorm) {
    // T5LayerNorm: weight * x / sqrt(mean(x^2) + eps); no mean, no shift.
    Value sq = *make<td::MulOp>(l, {x, x});
    auto ms = red(td::ReduceMeanOp(), sq);
    if (failed(ms))
      return failure();
    Value ve = *make<td::AddOp>(l, {*ms, constF(l, eps)});
    Value sd = *make<td::SqrtOp>(l, {ve});
    Value xn = *make<td::DivOp>(l, {x, sd});
    return make<td::MulOp>(l, {xn, *g});
  }
  FailureOr<Value> s = failure();
  if (noShift) { // zeros, so that the norm fuses as any layer_norm does
    auto t = RankedTensorType::get({dModel}, b.getF32Type());
    s = make<td::ConstantOp>(l, {}, {attr("value", DenseElementsAttr::get(t, 0.0f))});
  } else {
    s = weight(n, prefix + shift, {dModel}, WeightRole::Shift);
  }
  if (failed(s))
    return failure();
  // mean, centered input.
  auto mean = red(td::ReduceMeanOp(), x);
  if (failed(mean))
    return failure();
  Value xc = *make<td::SubOp>(l, {x, *mean});
  Value sq = *make<td::MulOp>(l, {xc, xc});
  Value y;
  if (stdNorm) {
    // alpha * (x - mean) / (x.std(unbiased) + eps) + bias
    Value ss = *red(td::ReduceSumOp(), sq);
    Value var = *make<td::DivOp>(l, {ss, constF(l, (double)(dModel - 1))});
    Value sd = *make<td::SqrtOp>(l, {var});
    Value den = *make<td::AddOp>(l, {sd, constF(l, eps)});
    Value num = *make<td::MulOp>(l, {*g, xc});
    y = *make<td::DivOp>(l, {num, den});
  } else {
    // (x - mean) / sqrt(var_biased + eps) * weight
    Value var = *red(td::ReduceMeanOp(), sq);
    Value ve = *make<td::AddOp>(l, {var, constF(l, eps)});
    Value sd = *make<td::SqrtOp>(l, {ve});
    Value xn = *make<td::DivOp>(l, {xc, sd});
    y = *make<td::MulOp>(l, {xn, *g});
  }
  return make<td::AddOp>(l, {y, *s});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitAttention(const Node &n, Value x,
                                         const StackEnv &stackEnv) {
  // `rotary:` may be this attention's own frequencies ({dim, theta, scaling}, as
  // the stack's `rotary:`), e.g. Gemma 3's local and global layers, whose bases
  // differ: they replace the stack's for this attention.
  StackEnv own;
  const Node *ownRotary = n.isMap() ? n.get("rotary") : nullptr;
  if (ownRotary && ownRotary->isMap()) {
    own = stackEnv;
    if (failed(emitRotaryFrequencies(*ownRotary, own)))
      return failure();
  } else {
    ownRotary = nullptr;
  }
  const StackEnv &env = ownRotary ? own : stackEnv;
  if (failed(expectMap(n, "attention")) ||
      failed(checkKeys(n, "attention",
                       {"type", "mask", "q", "k", "v", "qkv", "qkv_order", "out", "heads",
                        "head_dim", "scale", "divide_by", "mask_value", "mask_mode",
                        "position_bias", "name", "kv_heads", "rotary", "q_norm",
                        "k_norm", "qk_norm_over", "window", "softcap"})))
    return failure();
  Location l = loc(n);
  if (const Node *nm = n.get("name")) {
    // The module path of the attention (e.g. encoder.layers.0.attn) for reports.
    auto s = getString(*nm, "name");
    if (failed(s))
      return failure();
    l = loc(n, qualify(*s));
  }
  bool cross = false;
  if (const Node *t = n.get("type")) {
    auto v = getChoice(*t, "attention type", {"self", "cross"});
    if (failed(v))
      return failure();
    cross = *v == "cross";
  }
  if (cross && !env.memory)
    return error(n, "cross-attention needs an encoder; this model has none");
  int64_t heads;
  if (const Node *h = n.get("heads")) {
    auto v = evalInt(*h, "heads");
    if (failed(v))
      return failure();
    heads = *v;
  } else {
    if (!paramNodes.count("heads"))
      return error(n, "attention needs 'heads' (or a 'heads' parameter)");
    auto v = paramInt("heads", n);
    if (failed(v))
      return failure();
    heads = *v;
  }
  if (heads <= 0)
    return error(n, "heads must be positive, got " + Twine(heads));
  // The per-head width: d_model / heads, or `head_dim` (T5's d_kv), when the
  // projections' inner size heads * head_dim differs from d_model.
  int64_t dk;
  if (const Node *hd = n.get("head_dim")) {
    auto v = evalInt(*hd, "head_dim");
    if (failed(v))
      return failure();
    if (*v <= 0)
      return error(*hd, "head_dim must be positive, got " + Twine(*v));
    dk = *v;
  } else {
    if (dModel % heads != 0)
      return error(n, "d_model " + Twine(dModel) + " is not divisible by heads " +
                           Twine(heads));
    dk = dModel / heads;
  }
  const int64_t inner = heads * dk;
  // Grouped-query attention: K and V of kv_heads heads, each shared by
  // heads / kv_heads query heads (Llama 2 70B, Llama 3, Mistral, Qwen).
  int64_t kvHeads = heads;
  if (const Node *kh = n.get("kv_heads")) {
    auto v = evalInt(*kh, "kv_heads");
    if (failed(v))
      return failure();
    if (*v <= 0 || heads % *v != 0)
      return error(*kh, "kv_heads must divide heads " + Twine(heads) + ", got " + Twine(*v));
    kvHeads = *v;
  }
  const int64_t kvInner = kvHeads * dk;
  bool rotary = false;
  if (const Node *rn = n.get("rotary")) {
    // An expression of the layer index that is 1 or 0 says it per layer
    // (SmolLM3's layers without rotary positions).
    auto v = ownRotary ? FailureOr<bool>(true) : getFlag(*rn, "rotary");
    if (failed(v))
      return failure();
    rotary = *v;
    if (rotary && !env.rotaryFreq)
      return error(*rn, "rotary needs the stack's 'rotary' frequencies");
    if (rotary && cross)
      return error(*rn, "rotary embeddings are for self-attention");
    if (rotary && env.rotaryFreq.getType().cast<RankedTensorType>().getDimSize(0) * 2 > dk)
      return error(*rn, "the stack's rotary dim exceeds head_dim " + Twine(dk));
  }
  bool posBias = false;
  if (const Node *pb = n.get("position_bias")) {
    auto v = getBool(*pb, "position_bias");
    if (failed(v))
      return failure();
    posBias = *v;
    if (posBias && !env.posBias)
      return error(*pb, "position_bias needs the stack's 'relative_attention_bias'");
    if (posBias && cross)
      return error(*pb, "a relative position bias is for self-attention");
  }

  // Mask.
  std::string maskKind = "none";
  if (const Node *m = n.get("mask")) {
    auto v = getChoice(*m, "mask", {"none", "padding", "causal", "padding+causal"});
    if (failed(v))
      return failure();
    maskKind = *v;
  }
  double maskValue = -1e9;
  if (const Node *mv = n.get("mask_value")) {
    auto v = evalNum(*mv, "mask_value");
    if (failed(v))
      return failure();
    maskValue = v->value;
  }
  bool additive = false;
  if (const Node *mm = n.get("mask_mode")) {
    auto v = getChoice(*mm, "mask_mode", {"fill", "additive"});
    if (failed(v))
      return failure();
    additive = *v == "additive";
  }
  if (additive && maskKind != "padding")
    return error(n, "mask_mode 'additive' is supported for 'padding' masks only");
  bool wantsPad = maskKind == "padding" || maskKind == "padding+causal";
  // With an attention_mask input the padding comes from it, not from pad_id.
  Value keyMask = cross ? env.memoryMask : env.mask;
  if (wantsPad && !keyMask && !paramNodes.count("pad_id"))
    return error(n, "a padding mask needs a 'pad_id' parameter");
  if (cross && (maskKind == "causal" || maskKind == "padding+causal"))
    return error(n, "a causal mask makes no sense for cross-attention");

  Value kvIn = cross ? env.memory : x;

  // Projections.
  Value q = x, k = kvIn, v = kvIn;
  if (const Node *qkv = n.get("qkv")) {
    for (const char *key : {"q", "k", "v"})
      if (n.get(key))
        return error(*n.keyNode(key), std::string("'") + key +
                                           "' conflicts with the packed 'qkv'");
    auto spec = parseLinear(*qkv, "qkv");
    if (failed(spec))
      return failure();
    // Q, K and V packed along the output, in that order (GPT-2's c_attn, Phi-3's
    // qkv_proj): heads * head_dim rows of Q, then kv_heads * head_dim of K and V;
    // with `qkv_order: heads` (GPT-NeoX) head by head, each head's q, k and v rows
    // side by side.
    bool byHead = false;
    if (const Node *on = n.get("qkv_order")) {
      auto o = getChoice(*on, "qkv_order", {"projections", "heads"});
      if (failed(o))
        return failure();
      byHead = *o == "heads";
      if (byHead && kvHeads != heads)
        return error(*on, "'qkv_order: heads' needs as many key/value heads as heads");
    }
    const int64_t total = inner + 2 * kvInner;
    const int64_t count = byHead ? heads : 1, stride = byHead ? 3 * dk : 0;
    auto pq = applyLinear(*spec, x, dModel, inner, 0, total, count, stride);
    auto pk = applyLinear(*spec, kvIn, dModel, kvInner, byHead ? dk : inner, total,
                                 count, stride);
    auto pv = applyLinear(*spec, kvIn, dModel, kvInner,
                                 byHead ? 2 * dk : inner + kvInner, total, count, stride);
    if (failed(pq) || failed(pk) || failed(pv))
      return failure();
    q = *pq, k = *pk, v = *pv;
  } else {
    // A missing q/k/v means the input is used unprojected (tutorial 001 defines
    // per-head projections but never applies them).
    for (auto [key, val, in] : {std::tuple<const char *, Value *, Value>{"q", &q, x},
                                {"k", &k, kvIn},
                                {"v", &v, kvIn}}) {
      if (const Node *pn = n.get(key)) {
        auto spec = parseLinear(*pn, key);
        if (failed(spec))
          return failure();
        auto r = applyLinear(*spec, in, dModel, val == &q ? inner : kvInner);
        if (failed(r))
          return failure();
        *val = *r;
      }
    }
  }

  if (rotary || kvHeads != heads || n.get("q_norm") || n.get("k_norm") || n.get("window") ||
      n.get("softcap") || n.get("qk_norm_over"))
    return emitFusedAttention(n, l, q, k, v, heads, kvHeads, dk, rotary, maskKind, maskValue,
                              posBias, env);

  // Split heads: [B, S, D] -> [B, S, H, dk] -> [B, H, S, dk].
  auto split = [&](Value t) -> FailureOr<Value> {
    auto r = make<td::ReshapeOp>(l, {t}, {arr("shape", {0, 0, heads, dk})});
    if (failed(r))
      return failure();
    return make<td::TransposeOp>(l, {*r}, {arr("perm", {0, 2, 1, 3})});
  };
  auto qh = split(q), kh = split(k), vh = split(v);
  if (failed(qh) || failed(kh) || failed(vh))
    return failure();
  auto scores = make<td::MatmulOp>(l, {*qh, *kh},
                                    {attr("transpose_b", b.getBoolAttr(true))});
  if (failed(scores))
    return failure();
  Value s = *scores;

  // Scale: by default scores / sqrt(d_k), as the tutorials write it.
  if (n.get("scale") && n.get("divide_by"))
    return error(*n.keyNode("divide_by"), "give either 'scale' or 'divide_by'");
  if (const Node *sc = n.get("scale")) {
    auto f = evalNum(*sc, "scale");
    if (failed(f))
      return failure();
    s = *make<td::MulOp>(l, {s, constF(l, f->value)});
  } else {
    double div = std::sqrt((double)dk);
    if (const Node *dv = n.get("divide_by")) {
      auto f = evalNum(*dv, "divide_by");
      if (failed(f))
        return failure();
      if (f->value == 0)
        return error(*dv, "'divide_by' must not be zero");
      div = f->value;
    }
    s = *make<td::DivOp>(l, {s, constF(l, div)});
  }
  if (posBias) {
    // T5: scores + position_bias, before the mask.
    auto r = make<td::AddOp>(l, {s, env.posBias});
    if (failed(r))
      return failure();
    s = *r;
  }

  // Mask, built as the tutorials build it: (tokens != pad).unsqueeze(-2), the
  // no-peek triangle, their conjunction, .unsqueeze(1), then masked_fill(mask == 0).
  if (maskKind != "none") {
    Value keyTokens = cross ? env.memoryTokens : env.tokens;
    Value keep; // [B or 1, 1 or Sq, Sk]
    if (wantsPad) {
      // keep = key_tokens != pad_id, or attention_mask != 0 (transformers' 1/0 mask).
      int64_t pad = 0;
      if (!keyMask) {
        auto p = paramInt("pad_id", n, 0);
        if (failed(p))
          return failure();
        pad = *p;
      }
      auto ne = make<td::CompareOp>(
          l, {keyMask ? keyMask : keyTokens, constI(l, pad)},
          {attr("predicate", td::CmpPredicateAttr::get(&ctx, td::CmpPredicate::ne))});
      if (failed(ne))
        return failure();
      if (additive) {
        // BERT: (1 - mask) * -10000 added to the scores, mask [B, 1, 1, Sk].
        auto f = make<td::CastOp>(l, {*ne},
                                   {attr("element_type", TypeAttr::get(b.getF32Type()))});
        Value inv = *make<td::SubOp>(l, {constF(l, 1.0), *f});
        Value add = *make<td::MulOp>(l, {inv, constF(l, maskValue)});
        Value u1 = *make<td::UnsqueezeOp>(l, {add}, {i64("axis", 1)});
        Value u2 = *make<td::UnsqueezeOp>(l, {u1}, {i64("axis", 1)});
        auto r = make<td::AddOp>(l, {s, u2});
        if (failed(r))
          return failure();
        s = *r;
      } else {
        keep = *make<td::UnsqueezeOp>(l, {*ne}, {i64("axis", 1)});
      }
    }
    if (maskKind == "causal" || maskKind == "padding+causal") {
      Value nopeak = *make<td::NopeakMaskOp>(l, {env.tokens});
      if (keep) {
        auto a = make<td::AndOp>(l, {keep, nopeak});
        if (failed(a))
          return failure();
        keep = *a;
      } else {
        keep = nopeak;
      }
    }
    if (keep) {
      Value k4 = *make<td::UnsqueezeOp>(l, {keep}, {i64("axis", 1)});
      Value masked = *make<td::NotOp>(l, {k4});
      auto r = make<td::MaskedFillOp>(l, {s, masked}, {f64("value", maskValue)});
      if (failed(r))
        return failure();
      s = *r;
    }
  }

  auto p = make<td::SoftmaxOp>(l, {s}, {i64("axis", -1)});
  if (failed(p))
    return failure();
  auto o = make<td::MatmulOp>(l, {*p, *vh});
  if (failed(o))
    return failure();
  // Merge heads: [B, H, Sq, dk] -> [B, Sq, H, dk] -> [B, Sq, D].
  Value ot = *make<td::TransposeOp>(l, {*o}, {arr("perm", {0, 2, 1, 3})});
  auto merged = make<td::ReshapeOp>(l, {ot}, {arr("shape", {0, 0, inner})});
  if (failed(merged))
    return failure();
  if (const Node *on = n.get("out")) {
    auto spec = parseLinear(*on, "out");
    if (failed(spec))
      return failure();
    return applyLinear(*spec, *merged, inner, dModel);
  }
  if (inner != dModel)
    return error(n, "heads * head_dim (" + Twine(inner) + ") differs from d_model (" +
                         Twine(dModel) + "): the attention needs an 'out' projection");
  return *merged;
}

/// The attentions of the LLaMA family (rotary embeddings, grouped-query
/// heads), emitted as the fused tfc.attention the matmul chain above fuses
/// into: rotary on the projected queries and keys, then the attention over
/// kv_heads key/value heads, then the output projection.
FailureOr<Value> Importer::emitFusedAttention(const Node &n, Location l, Value q, Value k,
                                              Value v, int64_t heads, int64_t kvHeads,
                                              int64_t dk, bool rotary,
                                              const std::string &maskKind, double maskValue,
                                              bool posBias, const StackEnv &env) {
  if (posBias)
    return error(n, "a relative position bias does not combine with rotary or kv_heads");
  if (maskKind != "none" && maskKind != "causal")
    return error(*n.keyNode("mask"), "an attention with rotary or kv_heads takes the masks "
                                     "'none' and 'causal', not '" + maskKind + "'");
  if (n.get("mask_mode"))
    return error(*n.keyNode("mask_mode"), "mask_mode does not apply with rotary or kv_heads");
  // A sliding window (Mistral; transformers' sliding_window): query i sees
  // keys i - window < j <= i. 0: none.
  int64_t window = 0;
  if (const Node *wn = n.get("window")) {
    auto w = evalInt(*wn, "window", /*min=*/0);
    if (failed(w))
      return failure();
    if (*w > 0 && maskKind != "causal")
      return error(*wn, "a sliding window needs mask: causal");
    window = *w;
  }
  // Gemma 2's soft-capping of the scaled scores, softcap * tanh(s / softcap)
  // (transformers' attn_logit_softcapping). 0: none.
  auto softcap = evalSoftcap(n);
  if (failed(softcap))
    return failure();
  // Qwen3: an RMSNorm over each head of the queries and the keys, before RoPE;
  // OLMo 2: over the whole projection (qk_norm_over: projection).
  bool overProjection = false;
  if (const Node *on = n.get("qk_norm_over")) {
    auto v = getChoice(*on, "qk_norm_over", {"heads", "projection"});
    if (failed(v))
      return failure();
    overProjection = *v == "projection";
  }
  for (auto [key, t, h] : {std::tuple<const char *, Value *, int64_t>{"q_norm", &q, heads},
                           {"k_norm", &k, kvHeads}}) {
    const Node *nn = n.get(key);
    if (!nn)
      continue;
    if (overProjection) {
      auto normed = emitNorm(*nn, *t, key, h * dk);
      if (failed(normed))
        return failure();
      *t = *normed;
      continue;
    }
    auto split = make<td::ReshapeOp>(l, {*t}, {arr("shape", {0, 0, h, dk})});
    if (failed(split))
      return failure();
    auto normed = emitNorm(*nn, *split, key, dk);
    if (failed(normed))
      return failure();
    auto merged = make<td::ReshapeOp>(l, {*normed}, {arr("shape", {0, 0, h * dk})});
    if (failed(merged))
      return failure();
    *t = *merged;
  }
  // LongRoPE's attention_factor A scales cos and sin, so the rotated part of q
  // and k: with the whole head rotated that is the scores times A^2, which the
  // attention's scale takes (below); with part of it (Phi-4-mini's
  // partial_rotary_factor) q and k are multiplied by A on their rotated dims
  // before the rotation, which is linear.
  const int64_t rotDim =
      rotary ? env.rotaryFreq.getType().cast<RankedTensorType>().getDimSize(0) * 2 : 0;
  if (rotary && env.rotaryAttention != 1.0 && rotDim < dk) {
    for (auto [t, h] : {std::pair<Value *, int64_t>{&q, heads}, {&k, kvHeads}}) {
      std::vector<float> vals(h * dk, 1.0f);
      for (int64_t i = 0; i < h * dk; ++i)
        if (i % dk < rotDim)
          vals[i] = static_cast<float>(env.rotaryAttention);
      auto ty = RankedTensorType::get({h * dk}, b.getF32Type());
      auto c = make<td::ConstantOp>(
          l, {}, {attr("value", DenseElementsAttr::get(ty, llvm::ArrayRef<float>(vals)))});
      if (failed(c))
        return failure();
      auto m = make<td::MulOp>(l, {*t, *c});
      if (failed(m))
        return failure();
      *t = *m;
    }
  }
  if (rotary) {
    for (Value *t : {&q, &k}) {
      auto r = make<td::RotaryOp>(l, {*t, env.rotaryFreq},
                                  {i64("head_dim", dk),
                                   attr("interleaved", b.getBoolAttr(env.rotaryInterleaved))});
      if (failed(r))
        return failure();
      *t = *r;
    }
  }
  double scale = 1.0 / std::sqrt((double)dk);
  if (n.get("scale") && n.get("divide_by"))
    return error(*n.keyNode("divide_by"), "give either 'scale' or 'divide_by'");
  if (const Node *sc = n.get("scale")) {
    auto f = evalNum(*sc, "scale");
    if (failed(f))
      return failure();
    scale = f->value;
  } else if (const Node *dv = n.get("divide_by")) {
    auto f = evalNum(*dv, "divide_by");
    if (failed(f))
      return failure();
    if (f->value == 0)
      return error(*dv, "'divide_by' must not be zero");
    scale = 1.0 / f->value;
  }
  if (rotary && rotDim == dk)
    scale *= env.rotaryAttention * env.rotaryAttention;
  const td::MaskKind kind = maskKind == "causal" ? td::MaskKind::causal : td::MaskKind::none;
  auto o = make<td::AttentionOp>(
      l, {q, k, v},
      {attr("mask_kind", td::MaskKindAttr::get(&ctx, kind)), i64("num_heads", heads),
       f64("scale", scale), f64("mask_value", maskValue), i64("num_kv_heads", kvHeads),
       i64("window", window), f64("softcap", *softcap),
       attr("operand_segment_sizes", b.getDenseI32ArrayAttr({1, 1, 1, 0, 0, 0}))});
  if (failed(o))
    return failure();
  const int64_t inner = heads * dk;
  if (const Node *on = n.get("out")) {
    auto spec = parseLinear(*on, "out");
    if (failed(spec))
      return failure();
    return applyLinear(*spec, *o, inner, dModel);
  }
  if (inner != dModel)
    return error(n, "heads * head_dim (" + Twine(inner) + ") differs from d_model (" +
                         Twine(dModel) + "): the attention needs an 'out' projection");
  return *o;
}

} // namespace tfc::detail
