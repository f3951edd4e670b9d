//===- ImporterBlocks.cpp - a layer's blocks: residuals and norms ---------===//
//
// A block wraps one body (attention, feed_forward or an `ops:` list) in its
// residual and norm: pre (x + f(norm(x)), optionally post-normed and scaled),
// post (norm(f(x) + x)) or none; a parallel block has two bodies that read the
// same input, x + attention(norm(x)) + feed_forward(ff_norm(x)).
//
//===----------------------------------------------------------------------------===//
#include "frontend/ImporterInternal.h"

#include <cmath>

using namespace mlir;
namespace td = ::mlir::tfc;

namespace tfc::detail {

FailureOr<Value> Importer::emitBlock(const Node &n, Value x, const StackEnv &env) {
  if (failed(expectMap(n, "block")) ||
      failed(checkKeys(n, "block",
                       {"residual", "norm", "ff_norm", "post_norm", "scale", "attention",
                        "feed_forward", "ops", "output"})))
    return failure();
  std::string residual = "pre";
  if (const Node *r = n.get("residual")) {
    auto v = getChoice(*r, "residual", {"pre", "post", "none", "parallel"});
    if (failed(v))
      return failure();
    residual = *v;
  }
  if (residual == "parallel")
    return emitParallelBlock(n, x, env);
  if (const Node *fn = n.keyNode("ff_norm"))
    return error(*fn, "'ff_norm' is for a 'parallel' residual block");
  int bodies = (n.get("attention") ? 1 : 0) + (n.get("feed_forward") ? 1 : 0) +
               (n.get("ops") ? 1 : 0);
  if (bodies != 1)
    return error(n, "a block needs exactly one of 'attention', 'feed_forward' or "
                     "'ops'");
  const Node *norm = n.get("norm");
  const Node *postNorm = n.get("post_norm");
  // A pre block may norm only the sublayer's output (OLMo 2: x + post_norm(f(x))).
  if (!norm && residual != "none" && !(residual == "pre" && postNorm))
    return error(n, "a '" + residual + "' residual block needs a 'norm'");

  auto body = [&](Value in) -> FailureOr<Value> {
    if (const Node *a = n.get("attention"))
      return emitAttention(*a, in, env);
    if (const Node *f = n.get("feed_forward"))
      return emitFeedForward(*f, in);
    return emitOps(n, in, env);
  };
  if (postNorm && residual != "pre")
    return error(*n.keyNode("post_norm"), "'post_norm' is for a 'pre' residual block");
  const Node *scaleNode = n.get("scale");
  if (scaleNode && residual != "pre")
    return error(*n.keyNode("scale"), "'scale' is for a 'pre' residual block");
  if (residual == "pre") {
    // x + sublayer(norm(x)), or with post_norm (Gemma 2 and 3's sandwich)
    // x + post_norm(sublayer(norm(x))), the norm before the sublayer optional
    // then; `scale` multiplies what is added (Granite's residual_multiplier).
    FailureOr<Value> xn = x;
    if (norm)
      xn = emitNorm(*norm, x, "norm");
    if (failed(xn))
      return failure();
    auto y = body(*xn);
    if (failed(y))
      return failure();
    if (postNorm) {
      y = emitNorm(*postNorm, *y, "post_norm");
      if (failed(y))
        return failure();
    }
    if (scaleNode) {
      auto f = evalNum(*scaleNode, "scale");
      if (failed(f))
        return failure();
      if (!std::isfinite(f->value))
        return error(*scaleNode, "'scale' must be a finite number");
      if (f->value != 1.0) {
        Location sl = loc(*scaleNode);
        y = make<td::MulOp>(sl, {*y, constF(sl, f->value)});
        if (failed(y))
          return failure();
      }
    }
    return make<td::AddOp>(loc(n), {x, *y});
  }
  if (residual == "post") {
    // norm(sublayer(x) + x)
    auto y = body(x);
    if (failed(y))
      return failure();
    auto s = make<td::AddOp>(loc(n), {*y, x});
    if (failed(s))
      return failure();
    return emitNorm(*norm, *s, "norm");
  }
  auto y = body(x);
  if (failed(y) || !norm)
    return y;
  return emitNorm(*norm, *y, "norm");
}

FailureOr<Value> Importer::emitParallelBlock(const Node &n, Value x, const StackEnv &env) {
  // x + attention(norm(x)) + feed_forward(ff_norm(x)), both sublayers reading
  // the block's input (GPT-J, Phi-1/1.5/2 with one norm; GPT-NeoX's
  // use_parallel_residual with an ff_norm of its own). The attention's sum is
  // added first, so that each sublayer's output projection takes the running
  // sum as its GEMM's residual (fused_linear), as a pre block's does.
  const Node *attn = n.get("attention"), *ff = n.get("feed_forward");
  if (!attn || !ff || n.get("ops"))
    return error(n, "a 'parallel' residual block needs an 'attention' and a 'feed_forward' "
                    "(and no 'ops')");
  for (const char *k : {"post_norm", "scale"})
    if (const Node *kn = n.keyNode(k))
      return error(*kn, std::string("'") + k + "' is for a 'pre' residual block");
  auto nn = require(n, "norm", "a 'parallel' residual block");
  if (failed(nn))
    return failure();
  auto xn = emitNorm(**nn, x, "norm");
  if (failed(xn))
    return failure();
  FailureOr<Value> xf = *xn;
  if (const Node *fn = n.get("ff_norm"))
    xf = emitNorm(*fn, x, "ff_norm");
  if (failed(xf))
    return failure();
  auto a = emitAttention(*attn, *xn, env);
  if (failed(a))
    return failure();
  auto f = emitFeedForward(*ff, *xf);
  if (failed(f))
    return failure();
  auto h = make<td::AddOp>(loc(*attn), {x, *a});
  if (failed(h))
    return failure();
  return make<td::AddOp>(loc(n), {*h, *f});
}

} // namespace tfc::detail
