// Regression: --tfc-fuse-attention classifies a padding mask computed from a
// FLOAT tensor (a Hugging Face style attention_mask, keep = mask != 0.0) as
// key_padding and hands the f32 tensor to tfc.attention as token ids; the
// verifier then rejects the op ("a key_padding mask operand must be [batch, seq]
// token ids") and tfc-opt fails. classifyKeep checks neither the element type of
// the compared tensor nor that the constant is an integer (pad_id is cast with
// (int64_t), so 0.5 would become 0).
// Expected: valid IR; the mask is not key_padding (it may fuse as an additive
// mask built from the boolean, or not fuse at all).
// RUN: tfc-opt --split-input-file --tfc-fuse-attention %s | FileCheck %s

// A float attention_mask (1.0 = keep), compared with 0.0.

// CHECK-LABEL: func.func @float_attention_mask
// CHECK-NOT: tfc.attention key_padding
// CHECK: return
func.func @float_attention_mask(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %am: tensor<?x?xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %zero = tfc.constant dense<0.0> : tensor<f32>
  %keep = tfc.compare #tfc<cmp ne> %am, %zero : (tensor<?x?xf32>, tensor<f32>) -> tensor<?x?xi1>
  %keep3 = tfc.unsqueeze %keep {axis = 1 : i64} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  %keep4 = tfc.unsqueeze %keep3 {axis = 1 : i64} : tensor<?x1x?xi1> -> tensor<?x1x1x?xi1>
  %masked = tfc.not %keep4 : tensor<?x1x1x?xi1> -> tensor<?x1x1x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// The same compared with 0.5: a key_padding pad_id would even be truncated to 0.

// CHECK-LABEL: func.func @float_attention_mask_half
// CHECK-NOT: tfc.attention key_padding
// CHECK: return
func.func @float_attention_mask_half(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %am: tensor<?x?xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %zero = tfc.constant dense<0.5> : tensor<f32>
  %keep = tfc.compare #tfc<cmp ne> %am, %zero : (tensor<?x?xf32>, tensor<f32>) -> tensor<?x?xi1>
  %keep3 = tfc.unsqueeze %keep {axis = 1 : i64} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  %keep4 = tfc.unsqueeze %keep3 {axis = 1 : i64} : tensor<?x1x?xi1> -> tensor<?x1x1x?xi1>
  %masked = tfc.not %keep4 : tensor<?x1x1x?xi1> -> tensor<?x1x1x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}
