// Regression: --tfc-fuse-attention misses an additive mask that has the full
// scores type [B, H, Sq, Sk] (a relative-position bias, an ALiBi table) when it
// is the LEFT operand of the add. The matcher swaps the add's operands only when
// the right one alone has the scores' type; with equal types it takes the left
// operand (the mask) as the scores and then finds no Q.K^T matmul.
// (add(scores, mask) with the same types fuses.)
// Expected: tfc.attention additive with the mask operand, as for add(scores, mask).
// RUN: tfc-opt --split-input-file --tfc-fuse-attention %s | FileCheck %s

// CHECK-LABEL: func.func @full_additive_mask_lhs
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[M:[^:]+]]: tensor<?x4x?x?xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention additive %[[Q]], %[[K]], %[[V]], %[[M]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
func.func @full_additive_mask_lhs(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %m: tensor<?x4x?x?xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %f = tfc.add %m, %sc : (tensor<?x4x?x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}
