// Regression: --tfc-fuse-attention accepts any rank-3 reshape after the head
// merge transpose as "the head merge". A reshape of [B, S, H, d_k] to
// [B, 2S, D/2] (shape [0, -1, 32]) is fused into a tfc.attention whose result
// type (from the reshape) disagrees with the inferred [B, S, D]: the verifier
// rejects it and tfc-opt fails.
// Expected: the chain is not an attention (the merge does not give back
// [B, S, H * d_k]); the softmax stays and the IR is valid.
// RUN: tfc-opt --split-input-file --tfc-fuse-attention %s | FileCheck %s

// CHECK-LABEL: func.func @merge_to_other_width
// CHECK-NOT: tfc.attention
// CHECK: tfc.softmax
// CHECK-NOT: tfc.attention
// CHECK: return
func.func @merge_to_other_width(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x32xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, -1, 32>} : tensor<?x?x4x16xf32> -> tensor<?x?x32xf32>
  return %r : tensor<?x?x32xf32>
}
