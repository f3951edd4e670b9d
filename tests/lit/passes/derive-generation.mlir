// RUN: tfc-opt --split-input-file --verify-diagnostics --tfc-derive-generation %s | FileCheck %s

// --tfc-derive-generation (passes/DeriveGeneration.cpp, docs/passes.md
// "Generation entry points"): from the fused @forward, @encode (when the decoder
// reads encoder-side values) and @decode_step with one K and one V cache per
// causal self-attention, [batch, max_len, width] in program order; then the cases
// where nothing is derived, silently (no decoder) or with a warning at the op or
// function that stops it.

// A decoder-only model of two layers whose key and value widths all differ, so
// that each cache's shape says which attention and which of K or V it is.
// decode_step: step.tokens, step.pos (one position per row), step.blocks (each
// row's block table, kv_blocks of at most 16), then cache.k.0, cache.v.0,
// cache.k.1, cache.v.1 of [batch, 16 (len's maximum), width]; step (the new
// tokens per row and call: one when decoding, the prompt when prefilling) gets
// the maximum 16. The logits are of the step's last position only: the head's input is
// sliced to it (start -1 counts from the end) before the head.

// CHECK-LABEL: module @decoder_only attributes {tfc.generation = {max_len = 16 : i64, target = "tokens"}} {
// CHECK: func.func @forward(
// CHECK-NOT: func.func @encode
// CHECK: func.func @decode_step(%arg0: tensor<?x?xi64> {tfc.dims = ["batch", "step"], tfc.name = "step.tokens"}, %arg1: tensor<?xi64> {tfc.dims = ["batch"], tfc.name = "step.pos"}, %arg2: tensor<?x?xi64> {tfc.dims = ["batch", "kv_blocks"], tfc.name = "step.blocks"}, %arg3: tensor<?x16x8xf32> {tfc.dims = ["batch"], tfc.name = "cache.k.0", tfc.state}, %arg4: tensor<?x16x4xf32> {tfc.dims = ["batch"], tfc.name = "cache.v.0", tfc.state}, %arg5: tensor<?x16x6xf32> {tfc.dims = ["batch"], tfc.name = "cache.k.1", tfc.state}, %arg6: tensor<?x16x2xf32> {tfc.dims = ["batch"], tfc.name = "cache.v.1", tfc.state}) -> (tensor<?x1x10xf32> {tfc.name = "logits"}) attributes {tfc.dim_max = {batch = 4 : i64, kv_blocks = 16 : i64, len = 16 : i64, step = 16 : i64}} {
// CHECK-NEXT: %[[WTE:.+]] = tfc.weight "wte"
// CHECK-NEXT: %[[WPE:.+]] = tfc.weight "wpe"
// CHECK-NEXT: %[[X:.+]] = tfc.token_embedding %arg0, %[[WTE]] positions(%[[WPE]]) offset(%arg1) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<16x8xf32>, tensor<?xi64>) -> tensor<?x?x8xf32>
// CHECK-NOT: tfc.attention
// CHECK: %[[A0:.+]] = tfc.cached_attention %{{.+}}, %{{.+}}, %{{.+}}, %arg3, %arg4, %arg1 blocks(%arg2) {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x16x8xf32>, tensor<?x16x4xf32>, tensor<?xi64>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
// CHECK-NOT: tfc.attention
// CHECK: tfc.linear %[[A0]]
// CHECK-NOT: tfc.attention
// CHECK: %[[A1:.+]] = tfc.cached_attention %{{.+}}, %{{.+}}, %{{.+}}, %arg5, %arg6, %arg1 blocks(%arg2) {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x?x6xf32>, tensor<?x?x6xf32>, tensor<?x?x2xf32>, tensor<?x16x6xf32>, tensor<?x16x2xf32>, tensor<?xi64>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
// CHECK-NEXT: %[[WOUT:.+]] = tfc.weight "out"
// CHECK-NEXT: %[[LAST:.+]] = tfc.slice %[[A1]] {axis = 1 : i64, size = 1 : i64, start = -1 : i64} : tensor<?x?x2xf32> -> tensor<?x1x2xf32>
// CHECK-NEXT: %[[L:.+]] = tfc.linear %[[LAST]], %[[WOUT]] : (tensor<?x1x2xf32>, tensor<10x2xf32>) -> tensor<?x1x10xf32>
// CHECK-NEXT: return %[[L]] : tensor<?x1x10xf32>
module @decoder_only {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> (tensor<?x?x10xf32> {tfc.name = "logits"})
      attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %wpe = tfc.weight "wpe" : tensor<16x8xf32>
    %x = tfc.token_embedding %tok, %wte positions(%wpe) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %w0 = tfc.weight "h0.qkv" : tensor<20x8xf32>
    %qkv0 = tfc.linear %x, %w0 : (tensor<?x?x8xf32>, tensor<20x8xf32>) -> tensor<?x?x20xf32>
    %q0 = tfc.slice %qkv0 {axis = 2 : i64, size = 8 : i64, start = 0 : i64} : tensor<?x?x20xf32> -> tensor<?x?x8xf32>
    %k0 = tfc.slice %qkv0 {axis = 2 : i64, size = 8 : i64, start = 8 : i64} : tensor<?x?x20xf32> -> tensor<?x?x8xf32>
    %v0 = tfc.slice %qkv0 {axis = 2 : i64, size = 4 : i64, start = 16 : i64} : tensor<?x?x20xf32> -> tensor<?x?x4xf32>
    %a0 = tfc.attention causal %q0, %k0, %v0 {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    %w1 = tfc.weight "h1.qkv" : tensor<14x4xf32>
    %qkv1 = tfc.linear %a0, %w1 : (tensor<?x?x4xf32>, tensor<14x4xf32>) -> tensor<?x?x14xf32>
    %q1 = tfc.slice %qkv1 {axis = 2 : i64, size = 6 : i64, start = 0 : i64} : tensor<?x?x14xf32> -> tensor<?x?x6xf32>
    %k1 = tfc.slice %qkv1 {axis = 2 : i64, size = 6 : i64, start = 6 : i64} : tensor<?x?x14xf32> -> tensor<?x?x6xf32>
    %v1 = tfc.slice %qkv1 {axis = 2 : i64, size = 2 : i64, start = 12 : i64} : tensor<?x?x14xf32> -> tensor<?x?x2xf32>
    %a1 = tfc.attention causal %q1, %k1, %v1 {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x6xf32>, tensor<?x?x6xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
    %wout = tfc.weight "out" : tensor<10x2xf32>
    %logits = tfc.linear %a1, %wout : (tensor<?x?x2xf32>, tensor<10x2xf32>) -> tensor<?x?x10xf32>
    return %logits : tensor<?x?x10xf32>
  }
}

// -----

// An encoder-decoder model (nn.Transformer's shape, one layer each): the target
// is the input the causal self-attention's query reads (tgt, the second input).
// @encode takes the other inputs and returns the cross-attention's K and V
// (memory.0, memory.1, with their symbolic dims); decode_step takes step.tokens,
// step.pos, step.blocks, step.memory_blocks (each row's batch item: the
// cross-attention reads its keys through it), src (the cross-attention's
// padding mask reads it, one row per row), memory.0 and memory.1 as blocks
// ([memory_rows, memory_len]: a session passes one per batch item, the engine
// pages them; beams share them), then the self-attention's caches,
// [batch, 20, 8]. memory_rows is at most max_batch blocks of one position per
// source position, plus one.

// CHECK-LABEL: module @encoder_decoder attributes {tfc.generation = {max_len = 20 : i64, target = "tgt"}} {
// CHECK: func.func @forward(
// CHECK: func.func @encode(%arg0: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"}) -> (tensor<?x?x8xf32> {tfc.name = "memory.0"}, tensor<?x?x4xf32> {tfc.name = "memory.1"}) attributes {tfc.dim_max = {batch = 2 : i64, src_len = 12 : i64, tgt_len = 20 : i64}} {
// CHECK: tfc.attention key_padding %{{.+}}, %{{.+}}, %{{.+}}, %arg0
// CHECK: %[[KV:.+]] = tfc.linear
// CHECK-NEXT: %[[K:.+]] = tfc.slice %[[KV]] {axis = 2 : i64, size = 8 : i64, start = 0 : i64}
// CHECK-NEXT: %[[V:.+]] = tfc.slice %[[KV]] {axis = 2 : i64, size = 4 : i64, start = 8 : i64}
// CHECK-NEXT: return %[[K]], %[[V]] : tensor<?x?x8xf32>, tensor<?x?x4xf32>
// CHECK: func.func @decode_step(%arg0: tensor<?x?xi64> {tfc.dims = ["batch", "step"], tfc.name = "step.tokens"}, %arg1: tensor<?xi64> {tfc.dims = ["batch"], tfc.name = "step.pos"}, %arg2: tensor<?x?xi64> {tfc.dims = ["batch", "kv_blocks"], tfc.name = "step.blocks"}, %arg3: tensor<?x?xi64> {tfc.dims = ["batch", "memory_blocks"], tfc.name = "step.memory_blocks"}, %arg4: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"}, %arg5: tensor<?x?x8xf32> {tfc.dims = ["memory_rows", "memory_len"], tfc.name = "memory.0"}, %arg6: tensor<?x?x4xf32> {tfc.dims = ["memory_rows", "memory_len"], tfc.name = "memory.1"}, %arg7: tensor<?x20x8xf32> {tfc.dims = ["batch"], tfc.name = "cache.k.0", tfc.state}, %arg8: tensor<?x20x8xf32> {tfc.dims = ["batch"], tfc.name = "cache.v.0", tfc.state}) -> (tensor<?x1x10xf32> {tfc.name = "logits"}) attributes {tfc.dim_max = {batch = 2 : i64, kv_blocks = 20 : i64, memory_blocks = 12 : i64, memory_len = 12 : i64, memory_rows = 25 : i64, src_len = 12 : i64, step = 20 : i64, tgt_len = 20 : i64}} {
// CHECK: %[[XT:.+]] = tfc.token_embedding %arg0, %{{.+}} positions(%{{.+}}) offset(%arg1)
// CHECK-NEXT: %[[SA:.+]] = tfc.cached_attention %[[XT]], %[[XT]], %[[XT]], %arg7, %arg8, %arg1 blocks(%arg2) {num_heads = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK-NEXT: %[[CA:.+]] = tfc.attention key_padding %[[SA]], %arg5, %arg6, %arg4 blocks(%arg3) {num_heads = 2 : i64, scale = 5.000000e-01 : f64}
// CHECK: %[[CAL:.+]] = tfc.slice %[[CA]] {axis = 1 : i64, size = 1 : i64, start = -1 : i64}
// CHECK: tfc.linear %[[CAL]]
// CHECK-NOT: tfc.attention
// CHECK: return
module @encoder_decoder {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"},
                     %tgt: tensor<?x?xi64> {tfc.dims = ["batch", "tgt_len"], tfc.name = "tgt"})
      -> (tensor<?x?x10xf32> {tfc.name = "logits"})
      attributes {tfc.dim_max = {batch = 2 : i64, src_len = 12 : i64, tgt_len = 20 : i64}} {
    %emb = tfc.weight "emb" : tensor<10x8xf32>
    %pos = tfc.weight "pos" : tensor<20x8xf32>
    %xs = tfc.token_embedding %src, %emb positions(%pos) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<20x8xf32>) -> tensor<?x?x8xf32>
    %es = tfc.attention key_padding %xs, %xs, %xs, %src {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %xt = tfc.token_embedding %tgt, %emb positions(%pos) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<20x8xf32>) -> tensor<?x?x8xf32>
    %sa = tfc.attention padding_causal %xt, %xt, %xt, %tgt {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %wkv = tfc.weight "cross.kv" : tensor<12x8xf32>
    %kv = tfc.linear %es, %wkv : (tensor<?x?x8xf32>, tensor<12x8xf32>) -> tensor<?x?x12xf32>
    %ck = tfc.slice %kv {axis = 2 : i64, size = 8 : i64, start = 0 : i64} : tensor<?x?x12xf32> -> tensor<?x?x8xf32>
    %cv = tfc.slice %kv {axis = 2 : i64, size = 4 : i64, start = 8 : i64} : tensor<?x?x12xf32> -> tensor<?x?x4xf32>
    %ca = tfc.attention key_padding %sa, %ck, %cv, %src {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?xi64>) -> tensor<?x?x4xf32>
    %wout = tfc.weight "out" : tensor<10x4xf32>
    %logits = tfc.linear %ca, %wout : (tensor<?x?x4xf32>, tensor<10x4xf32>) -> tensor<?x?x10xf32>
    return %logits : tensor<?x?x10xf32>
  }
}

// -----

// Encoder memory that the decoder reads other than as the keys and values of
// cross-attentions that can read it through a block table (here a second
// cross-attention with a position bias reads it too) stays one row per batch
// row: no step.memory_blocks, and the cross-attentions read it as rows of
// their own.

// CHECK-LABEL: module @memory_read_elsewhere
// CHECK: func.func @decode_step(
// CHECK-NOT: step.memory_blocks
// CHECK-SAME: tfc.dims = ["batch", "src_len"], tfc.name = "memory.0"
// CHECK: %[[CA:.+]] = tfc.attention key_padding %{{.+}}, %arg4, %arg4, %arg3 {num_heads
// CHECK: tfc.attention none %[[CA]], %arg4, %arg4 bias(
module @memory_read_elsewhere {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"},
                     %tgt: tensor<?x?xi64> {tfc.dims = ["batch", "tgt_len"], tfc.name = "tgt"})
      -> (tensor<?x?x8xf32> {tfc.name = "out"})
      attributes {tfc.dim_max = {batch = 2 : i64, src_len = 12 : i64, tgt_len = 20 : i64}} {
    %emb = tfc.weight "emb" : tensor<10x8xf32>
    %pos = tfc.weight "pos" : tensor<20x8xf32>
    %xs = tfc.token_embedding %src, %emb positions(%pos) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<20x8xf32>) -> tensor<?x?x8xf32>
    %xt = tfc.token_embedding %tgt, %emb positions(%pos) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<20x8xf32>) -> tensor<?x?x8xf32>
    %sa = tfc.attention causal %xt, %xt, %xt {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %ca = tfc.attention key_padding %sa, %xs, %xs, %src {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %table = tfc.weight "rel" : tensor<8x2xf32>
    %cb = tfc.attention none %ca, %xs, %xs bias(%table) {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8x2xf32>) -> tensor<?x?x8xf32>
    return %cb : tensor<?x?x8xf32>
  }
}

// -----

// Two cross-attentions share their key: the first could read its memory
// through a block table, but the second's value is read elsewhere (by an
// attention with a position bias), so the second reads the shared key as
// rows, and so must the first. Nothing is read through a table.

// CHECK-LABEL: module @shared_key_read_as_rows
// CHECK: func.func @decode_step(
// CHECK-NOT: step.memory_blocks
// CHECK-SAME: tfc.dims = ["batch", "src_len"], tfc.name = "memory.0"
// CHECK-NOT: blocks(%arg3)
// CHECK: return
module @shared_key_read_as_rows {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"},
                     %tgt: tensor<?x?xi64> {tfc.dims = ["batch", "tgt_len"], tfc.name = "tgt"})
      -> (tensor<?x?x8xf32> {tfc.name = "out"})
      attributes {tfc.dim_max = {batch = 2 : i64, src_len = 12 : i64, tgt_len = 20 : i64}} {
    %emb = tfc.weight "emb" : tensor<10x8xf32>
    %pos = tfc.weight "pos" : tensor<20x8xf32>
    %xs = tfc.token_embedding %src, %emb positions(%pos) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<20x8xf32>) -> tensor<?x?x8xf32>
    %w = tfc.weight "w" : tensor<8x8xf32>
    %ys = tfc.linear %xs, %w : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %xt = tfc.token_embedding %tgt, %emb positions(%pos) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<20x8xf32>) -> tensor<?x?x8xf32>
    %sa = tfc.attention causal %xt, %xt, %xt {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %c1 = tfc.attention key_padding %sa, %xs, %xs, %src {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %c2 = tfc.attention key_padding %c1, %xs, %ys, %src {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %table = tfc.weight "rel" : tensor<8x2xf32>
    %c3 = tfc.attention none %c2, %ys, %ys bias(%table) {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<8x2xf32>) -> tensor<?x?x8xf32>
    return %c3 : tensor<?x?x8xf32>
  }
}

// -----

// Encoder-only (no causal self-attention): nothing to derive, and no warning.

// CHECK-LABEL: module @encoder_only {
// CHECK-NOT: tfc.generation
// CHECK-NOT: @decode_step
module @encoder_only {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "src"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %src : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention key_padding %x, %x, %x, %src {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// A module that already has a decode_step is left as it is.

// CHECK-LABEL: module @has_decode_step {
// CHECK-NOT: tfc.cached_attention
// CHECK: func.func @decode_step(%arg0: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
// CHECK-NOT: tfc.cached_attention
module @has_decode_step {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
  func.func @decode_step(%tok: tensor<?x?xi64>) -> tensor<?x?x8xf32> {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    return %x : tensor<?x?x8xf32>
  }
}

// -----

// No @forward: nothing to derive from.

// CHECK-LABEL: module @no_forward {
// CHECK-NOT: @decode_step
module @no_forward {
  func.func @main(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// No output depends on the target (the causal attention's result is unused):
// nothing to derive, and no warning.

// CHECK-LABEL: module @no_target_output {
// CHECK-NOT: @decode_step
module @no_target_output {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"},
                     %tgt: tensor<?x?xi64> {tfc.dims = ["batch", "tgt_len"], tfc.name = "tgt"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, src_len = 16 : i64, tgt_len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %xs = tfc.embedding %wte, %src : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %xt = tfc.embedding %wte, %tgt : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %xt, %xt, %xt {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %xs : tensor<?x?x8xf32>
  }
}

// -----

// More than 63 inputs (the dependence sets are 64-bit masks): nothing is
// derived, and no warning.

// CHECK-LABEL: module @too_many_inputs {
// CHECK-NOT: @decode_step
module @too_many_inputs {
  func.func @forward(%a0: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"}, %a1: tensor<?x?xi64>, %a2: tensor<?x?xi64>, %a3: tensor<?x?xi64>, %a4: tensor<?x?xi64>, %a5: tensor<?x?xi64>, %a6: tensor<?x?xi64>, %a7: tensor<?x?xi64>, %a8: tensor<?x?xi64>, %a9: tensor<?x?xi64>, %a10: tensor<?x?xi64>, %a11: tensor<?x?xi64>, %a12: tensor<?x?xi64>, %a13: tensor<?x?xi64>, %a14: tensor<?x?xi64>, %a15: tensor<?x?xi64>, %a16: tensor<?x?xi64>, %a17: tensor<?x?xi64>, %a18: tensor<?x?xi64>, %a19: tensor<?x?xi64>, %a20: tensor<?x?xi64>, %a21: tensor<?x?xi64>, %a22: tensor<?x?xi64>, %a23: tensor<?x?xi64>, %a24: tensor<?x?xi64>, %a25: tensor<?x?xi64>, %a26: tensor<?x?xi64>, %a27: tensor<?x?xi64>, %a28: tensor<?x?xi64>, %a29: tensor<?x?xi64>, %a30: tensor<?x?xi64>, %a31: tensor<?x?xi64>, %a32: tensor<?x?xi64>, %a33: tensor<?x?xi64>, %a34: tensor<?x?xi64>, %a35: tensor<?x?xi64>, %a36: tensor<?x?xi64>, %a37: tensor<?x?xi64>, %a38: tensor<?x?xi64>, %a39: tensor<?x?xi64>, %a40: tensor<?x?xi64>, %a41: tensor<?x?xi64>, %a42: tensor<?x?xi64>, %a43: tensor<?x?xi64>, %a44: tensor<?x?xi64>, %a45: tensor<?x?xi64>, %a46: tensor<?x?xi64>, %a47: tensor<?x?xi64>, %a48: tensor<?x?xi64>, %a49: tensor<?x?xi64>, %a50: tensor<?x?xi64>, %a51: tensor<?x?xi64>, %a52: tensor<?x?xi64>, %a53: tensor<?x?xi64>, %a54: tensor<?x?xi64>, %a55: tensor<?x?xi64>, %a56: tensor<?x?xi64>, %a57: tensor<?x?xi64>, %a58: tensor<?x?xi64>, %a59: tensor<?x?xi64>, %a60: tensor<?x?xi64>, %a61: tensor<?x?xi64>, %a62: tensor<?x?xi64>, %a63: tensor<?x?xi64>)
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %a0 : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// The causal attention's query reads two inputs: which one is the target?

// CHECK-LABEL: module @two_targets {
// CHECK-NOT: @decode_step
module @two_targets {
  func.func @forward(%a: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "a"},
                     %b: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "b"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %xa = tfc.embedding %wte, %a : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %xb = tfc.embedding %wte, %b : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %x = tfc.add %xa, %xb : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: the causal self-attentions do not read exactly one target input}}
    %o = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %o : tensor<?x?x8xf32>
  }
}

// -----

// Two causal attentions over different inputs: no input is common to both
// queries. The warning is at the first.

// CHECK-LABEL: module @no_common_target {
// CHECK-NOT: @decode_step
module @no_common_target {
  func.func @forward(%a: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "a"},
                     %b: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "b"})
      -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %xa = tfc.embedding %wte, %a : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %xb = tfc.embedding %wte, %b : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: the causal self-attentions do not read exactly one target input}}
    %oa = tfc.attention causal %xa, %xa, %xa {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %ob = tfc.attention causal %xb, %xb, %xb {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %oa, %ob : tensor<?x?x8xf32>, tensor<?x?x8xf32>
  }
}

// -----

// The target has no tfc.dims: not [batch, len] token ids. The warning is at @forward.

// CHECK-LABEL: module @target_without_dims {
// CHECK-NOT: @decode_step
module @target_without_dims {
  // expected-warning@+1 {{no generation entry points: the target input is not [batch, len] token ids}}
  func.func @forward(%tok: tensor<?x?xi64> {tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// @forward has no tfc.dim_max at all: the same warning.

// CHECK-LABEL: module @no_dim_max {
// CHECK-NOT: @decode_step
module @no_dim_max {
  // expected-warning@+1 {{no generation entry points: the target input is not [batch, len] token ids}}
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// tfc.dim_max declares no maximum for the target's length: no cache length.

// CHECK-LABEL: module @no_len_max {
// CHECK-NOT: @decode_step
module @no_len_max {
  // expected-warning@+1 {{no generation entry points: no declared maximum for 'len'}}
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// A decoder-side matmul may mix positions (only the ops docs/passes.md lists
// run position by position). The warning is at the op.

// CHECK-LABEL: module @matmul_mixes {
// CHECK-NOT: @decode_step
module @matmul_mixes {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x?xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: 'tfc.matmul' may mix positions}}
    %m = tfc.matmul %a, %a {transpose_b = true} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x?xf32>
    return %m : tensor<?x?x?xf32>
  }
}

// -----

// A decoder-side softmax over the positions axis.

// CHECK-LABEL: module @softmax_mixes {
// CHECK-NOT: @decode_step
module @softmax_mixes {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: a softmax mixes positions}}
    %s = tfc.softmax %a {axis = 1 : i64} : tensor<?x?x8xf32>
    return %s : tensor<?x?x8xf32>
  }
}

// -----

// A decoder-side log_softmax over the positions axis.

// CHECK-LABEL: module @log_softmax_mixes {
// CHECK-NOT: @decode_step
module @log_softmax_mixes {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: a log_softmax mixes positions}}
    %s = tfc.log_softmax %a {axis = 1 : i64} : tensor<?x?x8xf32>
    return %s : tensor<?x?x8xf32>
  }
}

// -----

// A decoder-side slice along the positions axis.

// CHECK-LABEL: module @slice_cuts {
// CHECK-NOT: @decode_step
module @slice_cuts {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x1x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: a slice cuts the positions}}
    %s = tfc.slice %a {axis = 1 : i64, size = 1 : i64, start = 0 : i64} : tensor<?x?x8xf32> -> tensor<?x1x8xf32>
    return %s : tensor<?x1x8xf32>
  }
}

// -----

// A positional table indexed by the batch axis (tutorial-codersarts' bug,
// docs/passes.md): it is not a position lookup.

// CHECK-LABEL: module @positions_by_batch {
// CHECK-NOT: @decode_step
module @positions_by_batch {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %wpe = tfc.weight "wpe" : tensor<16x8xf32>
    // expected-warning@+1 {{no generation entry points: its positional table is indexed by the batch axis, not by position}}
    %x = tfc.token_embedding %tok, %wte positions(%wpe) {position_axis = 0 : i64} : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// Token types that are the target (or depend on it).

// CHECK-LABEL: module @target_token_types {
// CHECK-NOT: @decode_step
module @target_token_types {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %wtt = tfc.weight "wtt" : tensor<10x8xf32>
    // expected-warning@+1 {{no generation entry points: target token types are not supported in decode_step}}
    %x = tfc.token_embedding %tok, %wte types(%tok, %wtt) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<?x?xi64>, tensor<10x8xf32>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// A second, non-causal self-attention over the target's positions: a position
// would see later ones.

// CHECK-LABEL: module @unmasked_attention {
// CHECK-NOT: @decode_step
module @unmasked_attention {
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: an attention over target positions has no causal mask}}
    %b = tfc.attention none %a, %a, %a {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %b : tensor<?x?x8xf32>
  }
}

// -----

// A causal attention whose query is the target's but whose keys and values are
// another input's: no cache of the target's keys can stand for them.

// CHECK-LABEL: module @causal_over_source {
// CHECK-NOT: @decode_step
module @causal_over_source {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"},
                     %tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64, src_len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %xs = tfc.embedding %wte, %src : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: its causal attention reads keys that are not the target's}}
    %a = tfc.attention causal %x, %xs, %xs {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// An elementwise op adds another input's per-position values to the target's.
// (A [1, 8] operand, static 1 on the positions axis, would be accepted.)

// CHECK-LABEL: module @elementwise_over_source {
// CHECK-NOT: @decode_step
module @elementwise_over_source {
  func.func @forward(%src: tensor<?x?xi64> {tfc.dims = ["batch", "src_len"], tfc.name = "src"},
                     %tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64, src_len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %xs = tfc.embedding %wte, %src : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    // expected-warning@+1 {{no generation entry points: an elementwise operand varies along the positions but is not the target's}}
    %s = tfc.add %a, %xs : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %s : tensor<?x?x8xf32>
  }
}

// -----

// More distinct symbolic dim names among the inputs (10) than the sentinels that
// stand for them (passes/SymbolicShapes.h, 9): the values encode would hand to
// decode_step cannot be given symbolic dims. The warning is at @forward.

// CHECK-LABEL: module @too_many_dim_names {
// CHECK-NOT: @decode_step
module @too_many_dim_names {
  // expected-warning@+1 {{no generation entry points: the shapes of the values encode hands to decode_step are not symbolic}}
  func.func @forward(%tok: tensor<?x?xi64> {tfc.dims = ["batch", "len"], tfc.name = "tokens"},
                     %extra: tensor<?x?x?x?x?x?x?x?xf32> {tfc.dims = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"], tfc.name = "extra"})
      -> tensor<?x?x8xf32> attributes {tfc.dim_max = {batch = 4 : i64, len = 16 : i64}} {
    %wte = tfc.weight "wte" : tensor<10x8xf32>
    %x = tfc.embedding %wte, %tok : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a = tfc.attention causal %x, %x, %x {num_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}
