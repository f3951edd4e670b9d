//===- ImporterStacks.cpp - embeddings, blocks, stacks, output head -------===//
//
// A stack (encoder or decoder) is its embedding (token table, token types,
// positional encoding, embedding norm), then `layers.count` copies of its blocks
// under the layer's name, then a final norm. A block wraps one body (attention,
// feed_forward or an `ops:` list) in its residual and norm (ImporterBlocks.cpp).
// The output head projects to the vocabulary.
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
namespace td = ::mlir::tfc;

namespace tfc::detail {

//===----------------------------------------------------------------------===//
// Stacks, embeddings, output
//===----------------------------------------------------------------------===//

FailureOr<Value> Importer::emitEmbedding(const Node &stack, Value tokens) {
  auto en = require(stack, "embedding", "a stack");
  if (failed(en))
    return failure();
  const Node &e = **en;
  if (failed(expectMap(e, "embedding")) ||
      failed(checkKeys(e, "embedding", {"weight", "vocab", "scale"})))
    return failure();
  auto wn = require(e, "weight", "embedding");
  auto vn = require(e, "vocab", "embedding");
  if (failed(wn) || failed(vn))
    return failure();
  auto wname = getString(**wn, "weight");
  auto vocab = evalInt(**vn, "vocab");
  if (failed(wname) || failed(vocab))
    return failure();
  Location l = loc(e, *wname);
  auto table = weight(e, *wname, {*vocab, dModel}, WeightRole::Matrix);
  if (failed(table))
    return failure();
  auto x = make<td::EmbeddingOp>(l, {*table, tokens});
  if (failed(x))
    return failure();
  Value h = *x;
  if (const Node *sc = e.get("scale")) {
    auto f = evalNum(*sc, "scale");
    if (failed(f))
      return failure();
    h = *make<td::MulOp>(l, {h, constF(l, f->value)});
  }

  if (const Node *tt = stack.get("token_types")) {
    if (failed(expectMap(*tt, "token_types")) ||
        failed(checkKeys(*tt, "token_types", {"input", "weight", "vocab", "optional"})))
      return failure();
    auto ttw = require(*tt, "weight", "token_types");
    auto ttv = require(*tt, "vocab", "token_types");
    if (failed(ttw) || failed(ttv))
      return failure();
    std::string inName = "token_types";
    if (const Node *in = tt->get("input")) {
      auto s = getString(*in, "input");
      if (failed(s))
        return failure();
      inName = *s;
    }
    auto tname = getString(**ttw, "weight");
    auto tv = evalInt(**ttv, "vocab");
    if (failed(tname) || failed(tv))
      return failure();
    auto ttab = weight(*tt, *tname, {*tv, dModel}, WeightRole::Matrix);
    if (failed(ttab))
      return failure();
    Value ids = inputs.at(inName);
    auto te = make<td::EmbeddingOp>(loc(*tt, *tname), {*ttab, ids});
    if (failed(te))
      return failure();
    h = *make<td::AddOp>(loc(*tt, *tname), {h, *te});
  }

  if (const Node *pn = stack.get("positional")) {
    const Node &p = *pn;
    if (failed(expectMap(p, "positional")) ||
        failed(checkKeys(p, "positional",
                         {"kind", "variant", "max_len", "weight", "buffer", "index",
                          "padding_idx", "offset"})))
      return failure();
    auto kn = require(p, "kind", "positional");
    if (failed(kn))
      return failure();
    auto kind = getChoice(**kn, "positional kind", {"sinusoidal", "learned", "none"});
    if (failed(kind))
      return failure();
    if (*kind != "none") {
      int64_t rows = maxLen;
      if (const Node *m = p.get("max_len")) {
        auto v = evalInt(*m, "max_len");
        if (failed(v))
          return failure();
        rows = *v;
      }
      bool byBatch = false;
      if (const Node *ix = p.get("index")) {
        auto v = getChoice(*ix, "index", {"position", "batch"});
        if (failed(v))
          return failure();
        byBatch = *v == "batch";
      }
      // RoBERTa's positions: real tokens numbered from padding_idx + 1, padding
      // at row padding_idx, so the table needs padding_idx + 1 more rows.
      std::optional<int64_t> paddingIdx; // read back as getPaddingIdxAttr().getInt()
      if (const Node *pi = p.get("padding_idx")) {
        if (byBatch)
          return error(*pi, "padding_idx numbers positions along the sequence; it does not "
                            "combine with index: batch");
        auto v = evalInt(*pi, "padding_idx", 0);
        if (failed(v))
          return failure();
        paddingIdx = *v;
      }
      // BART's learned positions: row = position + offset (its table has 2 rows
      // more than positions, never used); a compile-time slice of the table.
      int64_t offset = 0;
      if (const Node *on = p.get("offset")) {
        if (*kind != "learned" || paddingIdx)
          return error(*on, "offset applies to a learned table without padding_idx");
        auto v = evalInt(*on, "offset", 0);
        if (failed(v))
          return failure();
        offset = *v;
      }
      int64_t needed =
          (byBatch ? maxBatch : maxLen) + (paddingIdx ? *paddingIdx + 1 : 0) + offset;
      if (rows < needed)
        return error(p, "positional table has " + Twine(rows) +
                             " rows but the model accepts " +
                             (byBatch ? "batches" : "sequences") + " up to " +
                             Twine(needed));
      Value tab;
      if (*kind == "learned") {
        auto wn2 = require(p, "weight", "a learned positional encoding");
        if (failed(wn2))
          return failure();
        auto s = getString(**wn2, "weight");
        if (failed(s))
          return failure();
        auto t = weight(p, *s, {rows, dModel}, WeightRole::Matrix);
        if (failed(t))
          return failure();
        tab = *t;
        if (offset > 0) {
          auto sl = make<td::SliceOp>(loc(p), {tab},
                                      {i64("axis", 0), i64("start", offset),
                                       i64("size", rows - offset)});
          if (failed(sl))
            return failure();
          tab = *sl;
        }
      } else {
        td::PEVariant variant = td::PEVariant::standard;
        if (const Node *vn2 = p.get("variant")) {
          auto v = getChoice(*vn2, "variant", {"standard", "exp2i", "exp2i_cos_next", "split"});
          if (failed(v))
            return failure();
          variant = *td::symbolizePEVariant(*v);
        }
        if (dModel % 2 != 0)
          return error(p, "a sinusoidal table needs an even d_model, got " +
                               Twine(dModel));
        tab = *make<td::SinusoidTableOp>(
            loc(p), {},
            {attr("variant", td::PEVariantAttr::get(&ctx, variant)),
             i64("rows", rows), i64("dim", dModel)});
        if (const Node *buf = p.get("buffer")) {
          // A registered buffer (e.g. 'encoder.pe.pe') may be in the checkpoint;
          // it is recomputed here, so it is accepted and not reported as unused.
          auto s = getString(*buf, "buffer");
          if (failed(s))
            return failure();
          ws.accept(*s);
        }
      }
      SmallVector<NamedAttribute> posAttrs{i64("axis", byBatch ? 0 : 1)};
      if (paddingIdx)
        posAttrs.push_back(i64("padding_idx", *paddingIdx));
      Value pos = *make<td::PositionsOp>(loc(p), {tokens}, posAttrs);
      auto pe = make<td::EmbeddingOp>(loc(p), {tab, pos});
      if (failed(pe))
        return failure();
      h = *make<td::AddOp>(loc(p), {h, *pe});
    }
  }

  if (const Node *nn = stack.get("embedding_norm")) {
    auto r = emitNorm(*nn, h, "embedding_norm");
    if (failed(r))
      return failure();
    h = *r;
  }
  return h;
}

/// A stack's rotary position embedding (RoPE, applied by the attentions that
/// say `rotary: true`): its inverse frequencies, as transformers'
/// modeling_rope_utils computes them, with the rope scaling folded in.
///   rotary: {dim: D, theta: T, interleaved: false,
///            scaling: {type: linear | llama3, factor: F, low_freq_factor: L,
///                      high_freq_factor: H, original_max_len: N}}
///   LongRoPE (Phi-3): scaling: {type: longrope, short_factor: [D / 2 numbers],
///                      long_factor: [...], original_max_len: N, attention_factor: A,
///                      max_len: M}: each frequency divided by its factor, the long
///                      ones when M > N; A scales cos and sin.
/// YaRN (transformers' _compute_yarn_parameters, in its f32 arithmetic): each
/// frequency a blend of itself (extrapolation) and itself / factor
/// (interpolation), by a linear ramp over the dims between the correction
/// range of beta_fast (32) and beta_slow (1) rotations in original_max_len
/// positions (floored and ceiled unless truncate: false); cos and sin times
/// attention_factor (0.1 ln(factor) + 1 unless given).
LogicalResult Importer::emitYarn(const Node &sn, double factor, int64_t dim, double theta,
                                 std::vector<double> &inv, StackEnv &env) {
  auto num = [&](const char *key, std::optional<double> dflt) -> FailureOr<double> {
    const Node *k = sn.get(key);
    if (!k) {
      if (dflt)
        return *dflt;
      return error(sn, Twine("rope scaling 'yarn' needs '") + key + "'");
    }
    auto v = evalNum(*k, key);
    if (failed(v))
      return failure();
    return v->value;
  };
  auto old = num("original_max_len", std::nullopt), fast = num("beta_fast", 32.0),
       slow = num("beta_slow", 1.0),
       att = num("attention_factor", factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1.0);
  if (failed(old) || failed(fast) || failed(slow) || failed(att))
    return failure();
  // truncate: true or false, or an expression (the HF path's rope_truncate, 1 or 0).
  bool truncate = true;
  if (const Node *t = sn.get("truncate")) {
    const bool word = t->isScalar() && (t->scalar == "true" || t->scalar == "false");
    if (word) {
      truncate = t->scalar == "true";
    } else {
      auto v = evalNum(*t, "truncate");
      if (failed(v))
        return failure();
      truncate = v->value != 0;
    }
  }
  if (!(*old > 0) || !(*fast > 0) || !(*slow > 0) || !(*att > 0) || !std::isfinite(*att) ||
      !std::isfinite(*old) || !std::isfinite(*fast) || !std::isfinite(*slow))
    return error(sn, "rope scaling 'yarn' needs positive original_max_len, beta_fast, "
                     "beta_slow and attention_factor");
  if (!(theta > 1) || !std::isfinite(theta))
    return error(sn, "rope scaling 'yarn' needs a rotary theta above 1"); // its log divides
  auto corr = [&](double rotations) {
    return dim * std::log(*old / (rotations * 2 * M_PI)) / (2 * std::log(theta));
  };
  double lo = corr(*fast), hi = corr(*slow);
  if (truncate) {
    lo = std::floor(lo);
    hi = std::ceil(hi);
  }
  lo = std::max(lo, 0.0);
  hi = std::min(hi, static_cast<double>(dim - 1));
  if (lo == hi)
    hi += 0.001; // transformers' guard against a zero-width ramp
  for (size_t i = 0; i < inv.size(); ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos = static_cast<float>(std::pow(theta, static_cast<double>(e)));
    const float extra = 1.0f / pos, interp = 1.0f / (static_cast<float>(factor) * pos);
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(lo)) / static_cast<float>(hi - lo), 0.0f,
        1.0f);
    const float keep = 1.0f - ramp; // the extrapolation's share
    inv[i] = interp * (1.0f - keep) + extra * keep;
  }
  env.rotaryAttention = *att;
  return success();
}

LogicalResult Importer::emitRotaryFrequencies(const Node &n, StackEnv &env) {
  if (failed(expectMap(n, "rotary")) ||
      failed(checkKeys(n, "rotary", {"dim", "theta", "interleaved", "scaling"})))
    return failure();
  auto dn = require(n, "dim", "rotary");
  auto tn = require(n, "theta", "rotary");
  if (failed(dn) || failed(tn))
    return failure();
  auto dim = evalInt(**dn, "dim");
  auto theta = evalNum(**tn, "theta");
  if (failed(dim) || failed(theta))
    return failure();
  if (*dim <= 0 || *dim % 2 != 0)
    return error(**dn, "the rotary dim must be positive and even, got " + Twine(*dim));
  if (!(theta->value > 0))
    return error(**tn, "the rotary theta must be positive");
  if (const Node *in = n.get("interleaved")) {
    auto v = getBool(*in, "interleaved");
    if (failed(v))
      return failure();
    env.rotaryInterleaved = *v;
  }
  // Default RoPE, as transformers computes it in f32:
  // 1 / theta ^ (arange(0, dim, 2) / dim).
  const int64_t half = *dim / 2;
  std::vector<double> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(*dim);
    inv[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta->value), (double)e));
  }
  if (const Node *sn = n.get("scaling")) {
    if (failed(expectMap(*sn, "scaling")) ||
        failed(checkKeys(*sn, "scaling",
                         {"type", "factor", "low_freq_factor", "high_freq_factor",
                          "original_max_len", "short_factor", "long_factor",
                          "attention_factor", "max_len", "beta_fast", "beta_slow",
                          "truncate"})))
      return failure();
    auto ty = require(*sn, "type", "scaling");
    if (failed(ty))
      return failure();
    auto type = getChoice(**ty, "rope scaling type",
                          {"default", "linear", "llama3", "longrope", "yarn"});
    if (failed(type))
      return failure();
    auto num = [&](const char *key) -> FailureOr<double> {
      auto k = require(*sn, key, ("rope scaling '" + *type + "'").c_str());
      if (failed(k))
        return failure();
      auto v = evalNum(**k, key);
      if (failed(v))
        return failure();
      return v->value;
    };
    if (*type == "longrope") {
      auto old = num("original_max_len"), att = num("attention_factor"), len = num("max_len");
      if (failed(old) || failed(att) || failed(len))
        return failure();
      if (!(*att > 0) || !std::isfinite(*att))
        return error(*sn, "the longrope attention_factor must be positive");
      const char *which = *len > *old ? "long_factor" : "short_factor";
      auto ln = require(*sn, which, "rope scaling 'longrope'");
      if (failed(ln))
        return failure();
      if (!(*ln)->isSeq() || (int64_t)(*ln)->items.size() != half)
        return error(**ln, Twine("longrope ") + which + " must be a list of " + Twine(half) +
                               " numbers (rotary dim / 2)");
      for (int64_t i = 0; i < half; ++i) {
        auto f = evalNum((*ln)->items[i], which);
        if (failed(f))
          return failure();
        if (!(f->value > 0) || !std::isfinite(f->value))
          return error((*ln)->items[i], Twine("longrope ") + which + " values must be positive");
        // transformers: 1 / (ext_factors * base ** (arange(0, dim, 2) / dim)), in f32.
        const float e = static_cast<float>(2 * i) / static_cast<float>(*dim);
        const float p = static_cast<float>(std::pow(static_cast<double>(theta->value), (double)e));
        inv[i] = 1.0f / (static_cast<float>(f->value) * p);
      }
      env.rotaryAttention = *att;
    } else if (*type != "default") {
      auto factor = num("factor");
      if (failed(factor))
        return failure();
      if (!(*factor > 0))
        return error(*sn, "the rope scaling factor must be positive");
      if (*type == "linear") {
        // Positions divided by the factor: the frequencies are.
        for (double &f : inv)
          f = static_cast<float>(f / *factor);
      } else if (*type == "yarn") {
        if (failed(emitYarn(*sn, *factor, *dim, theta->value, inv, env)))
          return failure();
      } else {
        // Llama 3.1: low frequencies divided by the factor, high ones kept,
        // a smooth blend between (modeling_rope_utils' _compute_llama3_parameters).
        auto lo = num("low_freq_factor"), hi = num("high_freq_factor"),
             old = num("original_max_len");
        if (failed(lo) || failed(hi) || failed(old))
          return failure();
        if (!(*hi > *lo))
          return error(*sn, "llama3 rope scaling needs high_freq_factor > low_freq_factor");
        const double loWave = *old / *lo, hiWave = *old / *hi;
        for (double &f : inv) {
          const double wave = 2 * M_PI / f;
          double g = wave > loWave ? f / *factor : f;
          if (!(wave < hiWave) && !(wave > loWave)) {
            const double smooth = (*old / wave - *lo) / (*hi - *lo);
            g = (1 - smooth) * g / *factor + smooth * g;
          }
          f = static_cast<float>(g);
        }
      }
    }
  }
  auto t = RankedTensorType::get({half}, b.getF32Type());
  std::vector<float> vals(inv.begin(), inv.end());
  env.rotaryFreq = *make<td::ConstantOp>(
      loc(n), {}, {attr("value", DenseElementsAttr::get(t, llvm::ArrayRef<float>(vals)))});
  return success();
}

FailureOr<Value> Importer::emitStack(const Node &n, StringRef which, StackEnv &env) {
  if (failed(expectMap(n, which)) ||
      failed(checkKeys(n, which,
                       {"input", "attention_mask", "embedding", "positional",
                        "token_types", "embedding_norm", "relative_attention_bias",
                        "rotary", "layers", "final_norm"})))
    return failure();
  auto x = emitEmbedding(n, env.tokens);
  if (failed(x))
    return failure();
  Value h = *x;
  if (const Node *rn = n.get("rotary"))
    if (failed(emitRotaryFrequencies(*rn, env)))
      return failure();
  if (const Node *rb = n.get("relative_attention_bias")) {
    // T5: one bucketed relative position bias per stack, [1, H, S, S], which
    // the self-attentions that say `position_bias: true` add to their scores.
    if (failed(expectMap(*rb, "relative_attention_bias")) ||
        failed(checkKeys(*rb, "relative_attention_bias",
                         {"weight", "buckets", "heads", "max_distance", "bidirectional"})))
      return failure();
    auto wn = require(*rb, "weight", "relative_attention_bias");
    auto bn = require(*rb, "buckets", "relative_attention_bias");
    auto hn = require(*rb, "heads", "relative_attention_bias");
    auto dn = require(*rb, "max_distance", "relative_attention_bias");
    auto bi = require(*rb, "bidirectional", "relative_attention_bias");
    if (failed(wn) || failed(bn) || failed(hn) || failed(dn) || failed(bi))
      return failure();
    auto wname = getString(**wn, "weight");
    auto buckets = evalInt(**bn, "buckets");
    auto heads = evalInt(**hn, "heads");
    auto maxDist = evalInt(**dn, "max_distance");
    auto bidir = getBool(**bi, "bidirectional");
    if (failed(wname) || failed(buckets) || failed(heads) || failed(maxDist) || failed(bidir))
      return failure();
    const int64_t exact = *bidir ? *buckets / 4 : *buckets / 2;
    if (exact < 1)
      return error(**bn, "relative_attention_bias needs at least " + Twine(*bidir ? 4 : 2) +
                             " buckets, got " + Twine(*buckets));
    if (*maxDist <= exact)
      return error(**dn, "max_distance must exceed the " + Twine(exact) +
                             " exact buckets, got " + Twine(*maxDist));
    auto table = weight(*rb, *wname, {*buckets, *heads}, WeightRole::Matrix);
    if (failed(table))
      return failure();
    auto bias = make<td::RelativePositionBiasOp>(
        loc(*rb, *wname), {*table, env.tokens, env.tokens},
        {attr("bidirectional", b.getBoolAttr(*bidir)), i64("max_distance", *maxDist)});
    if (failed(bias))
      return failure();
    env.posBias = *bias;
  }
  if (const Node *ln = n.get("layers")) {
    if (failed(expectMap(*ln, "layers")) ||
        failed(checkKeys(*ln, "layers", {"count", "name", "blocks"})))
      return failure();
    auto cn = require(*ln, "count", "layers");
    auto nn = require(*ln, "name", "layers");
    auto bn = require(*ln, "blocks", "layers");
    if (failed(cn) || failed(nn) || failed(bn))
      return failure();
    auto count = evalInt(**cn, "count", 0);
    auto pattern = getString(**nn, "name");
    if (failed(count) || failed(pattern))
      return failure();
    if (pattern->find("{i}") == std::string::npos)
      return error(**nn, "layer name '" + *pattern +
                              "' must contain '{i}' for the layer index");
    if (!(*bn)->isSeq())
      return error(**bn, "'blocks' must be a list, got " +
                              std::string(kindName(**bn)));
    for (int64_t i = 0; i < *count; ++i) {
      std::string layerName = *pattern;
      layerName.replace(layerName.find("{i}"), 3, std::to_string(i));
      scope = layerName + ".";
      layerIndex = i; // `i` in the blocks' expressions
      for (const Node &blk : (*bn)->items) {
        auto y = emitBlock(blk, h, env);
        if (failed(y))
          return failure();
        h = *y;
      }
      layerIndex = -1;
      scope.clear();
    }
  }
  if (const Node *fn = n.get("final_norm")) {
    auto y = emitNorm(*fn, h, "final_norm");
    if (failed(y))
      return failure();
    h = *y;
  }
  return h;
}

FailureOr<Value> Importer::emitOutput(const Node &n, Value x, int64_t vocab,
                                      std::string &outName) {
  if (failed(expectMap(n, "output")) ||
      failed(checkKeys(n, "output",
                       {"ops", "linear", "vocab", "divide_by", "softcap", "log_softmax",
                        "name"})))
    return failure();
  Value y = x;
  outName = "hidden";
  // A head written as primitive ops (pooling, a pooler, a classifier) runs
  // first, on the last stack's output as `x`, with the model's inputs in
  // scope; weight names are not prefixed.
  if (n.get("ops")) {
    std::string saved = scope;
    scope.clear();
    auto r = emitOps(n, y, StackEnv{});
    scope = saved;
    if (failed(r))
      return failure();
    y = *r;
  }
  if (const Node *vn = n.get("vocab")) {
    auto v = evalInt(*vn, "vocab");
    if (failed(v))
      return failure();
    vocab = *v;
  }
  if (const Node *ln = n.get("linear")) {
    if (vocab <= 0)
      return error(n, "output needs 'vocab' for its linear layer");
    auto spec = parseLinear(*ln, "linear");
    if (failed(spec))
      return failure();
    auto r = applyLinear(*spec, y, dModel, vocab);
    if (failed(r))
      return failure();
    y = *r;
    outName = "logits";
  }
  // Granite's logits_scaling: y / divide_by (1: none), as transformers divides.
  if (const Node *dn = n.get("divide_by")) {
    auto f = evalNum(*dn, "divide_by");
    if (failed(f))
      return failure();
    if (f->value == 0 || !std::isfinite(f->value))
      return error(*dn, "'divide_by' must be a finite number other than zero");
    if (f->value != 1.0) {
      Location dl = loc(*dn);
      auto d = make<td::DivOp>(dl, {y, constF(dl, f->value)}, {});
      if (failed(d))
        return failure();
      y = *d;
    }
  }
  // Gemma 2's final_logit_softcapping: softcap * tanh(y / softcap), as
  // transformers computes it (a division, the tanh, a product). 0: none.
  auto softcap = evalSoftcap(n);
  if (failed(softcap))
    return failure();
  if (*softcap > 0) {
    Location cl = loc(*n.get("softcap"));
    Value cap = constF(cl, *softcap);
    auto d = make<td::DivOp>(cl, {y, cap}, {});
    auto t = succeeded(d) ? make<td::TanhOp>(cl, {*d}, {}) : d;
    auto m = succeeded(t) ? make<td::MulOp>(cl, {*t, cap}, {}) : t;
    if (failed(m))
      return failure();
    y = *m;
  }
  if (const Node *ls = n.get("log_softmax")) {
    auto v = getBool(*ls, "log_softmax");
    if (failed(v))
      return failure();
    if (*v) {
      y = *make<td::LogSoftmaxOp>(loc(*ls), {y}, {i64("axis", -1)});
      outName = "log_probs";
    }
  }
  if (const Node *nm = n.get("name")) {
    auto s = getString(*nm, "name");
    if (failed(s))
      return failure();
    outName = *s;
  }
  return y;
}

} // namespace tfc::detail
