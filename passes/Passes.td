//===- Passes.td - tfc pass definitions -------------------*- tablegen -*-===//
//
// Each pass has a `tfc-opt` flag and lit tests under tests/lit/passes/.
//
//===----------------------------------------------------------------------------===//
#ifndef TFC_PASSES_TD
#define TFC_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseAttention : Pass<"tfc-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse Q.K^T, scale, mask, softmax and P.V (with the head split "
                "and merge around them) into one tfc.attention";
  let description = [{
    Starts from every `tfc.softmax` over the last axis and walks the chain the
    frontend (or a hand-written model) produced:

      reshape/transpose (head split) of Q, K, V
      -> matmul(Q, K^T) -> div/mul by a constant (or none: scale folded into Q)
      -> masked_fill(not(mask)) | add(additive) | nothing
      -> softmax -> matmul(P, V) -> transpose/reshape (head merge)

    The mask's meaning is recovered from where it came from: a comparison of token
    ids with pad_id gives `key_padding`, `tfc.nopeak_mask` gives `causal`, their
    conjunction gives `padding_causal`; anything else becomes an `additive` mask.
    Every intermediate must have no other user, or the chain is left alone.
  }];
  let dependentDialects = ["::mlir::tfc::TfcDialect"];
}

def FuseLayerNorm : Pass<"tfc-fuse-layer-norm", "::mlir::func::FuncOp"> {
  let summary = "Fuse the primitive sequences of LayerNorm and of the tutorials' "
                "unbiased-std Norm into one tfc.layer_norm";
  let description = [{
    Recognizes, over the last axis:
      layer_norm: (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta
      std_norm:   gamma * (x - mean) / (sqrt(sum((x - mean)^2) / (N - 1)) + eps) + beta
  }];
  let dependentDialects = ["::mlir::tfc::TfcDialect"];
}

def FuseProjections : Pass<"tfc-fuse-projections", "::mlir::func::FuncOp"> {
  let summary = "Pack Q/K/V projections into one GEMM; fold bias, activation and "
                "residual add into the linear's epilogue";
  let description = [{
    - matmul(x, W[in, out]) (+ b), GPT-2's Conv1D, becomes linear(x, W^T, b);
    - the Q, K and V linears of one tfc.attention that read the same input become
      one linear over concat(Wq, Wk, Wv) followed by slices (K and V alone for
      cross-attention). Weights that were slices of one packed checkpoint tensor
      fold back to it;
    - linear followed by relu / gelu becomes tfc.fused_linear with an activation;
    - add(r, linear(...)) with the linear used once becomes a residual epilogue.
  }];
  let dependentDialects = ["::mlir::tfc::TfcDialect"];
}

def FoldEmbeddings : Pass<"tfc-fold-embeddings", "::mlir::func::FuncOp"> {
  let summary = "Fold embedding scale, positional table and token types into one "
                "tfc.token_embedding";
  let dependentDialects = ["::mlir::tfc::TfcDialect"];
}

def DeriveGeneration : Pass<"tfc-derive-generation", "::mlir::ModuleOp"> {
  let summary = "Derive @encode and @decode_step (with a KV cache) from the fused @forward";
  let description = [{
    The target input is the one every causal self-attention's query reads. Ops
    that depend on it form @decode_step, where causal attention becomes
    tfc.cached_attention over `tfc.state` cache arguments and token_embedding
    reads positions from `step.pos`. Ops that depend only on the other inputs
    form @encode, whose results are the values the decoder reads (cross-attention
    K and V). A model whose decoder is not position-wise keeps only @forward, with
    a warning. See docs/generation.md.
  }];
  let dependentDialects = ["::mlir::tfc::TfcDialect", "::mlir::func::FuncDialect"];
}

def FuseRotary : Pass<"tfc-fuse-rotary", "::mlir::func::FuncOp"> {
  let summary = "Fold the tfc.rotary of a cached attention's new queries and keys "
                "into the tfc.cached_attention";
  let description = [{
    Runs after tfc-derive-generation. Where a tfc.cached_attention's query and
    key are each a tfc.rotary used only there, with the same inv_freq and pair
    layout, at the attention's positions (offset = its pos) and its head
    width, the attention takes the un-rotated values and `inv_freq`: the
    kernel rotates each key as it writes it to the KV cache and each query as
    it reads it, so no separate pass over them runs.
  }];
  let dependentDialects = ["::mlir::tfc::TfcDialect"];
}

#endif // TFC_PASSES_TD
