// RUN: tfc-opt --split-input-file --tfc-fuse-attention %s | FileCheck %s

// --tfc-fuse-attention: the head split of Q/K/V, Q.K^T, the scale, the mask and
// the softmax, P.V and the head merge become one tfc.attention whose operands are
// the pre-split [B, S, D] Q, K and V, and whose attributes carry the recovered
// mask kind, head count, scale, mask value and pad id. The dead chain is erased
// by the pass itself. The MUST NOT FUSE cases at the end keep their softmax.
// Every case is self-contained: Q, K and V are [B, S, 64], split into 4 heads of 16.

// Key padding, as tutorial 000 writes it: masked_fill(scores / sqrt(d_k),
// not(unsqueeze(unsqueeze(ids != pad))), -1e9). pad_id is 1 so that it prints
// (0 is the default and is elided); -1e9 is the default mask_value.

// CHECK-LABEL: func.func @key_padding
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention key_padding %[[Q]], %[[K]], %[[V]], %[[IDS]]
// CHECK-SAME: {num_heads = 4 : i64, pad_id = 1 : i64, scale = 2.500000e-01 : f64}
// CHECK-SAME: (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @key_padding(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %pad = tfc.constant dense<1> : tensor<i64>
  %keep = tfc.compare #tfc<cmp ne> %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
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

// Causal: masked_fill(not(unsqueeze(nopeak_mask(ids)))). The mask takes no operand.

// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %{{[^:]+}}: tensor<?x?xi64>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention causal %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @causal(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %np = tfc.nopeak_mask %ids : tensor<?x?xi64> -> tensor<1x?x?xi1>
  %np4 = tfc.unsqueeze %np {axis = 1 : i64} : tensor<1x?x?xi1> -> tensor<1x1x?x?xi1>
  %masked = tfc.not %np4 : tensor<1x1x?x?xi1> -> tensor<1x1x?x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<1x1x?x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Padding and causal, as the tutorials' decoder self-attention:
// and(unsqueeze(ids != pad, 1), nopeak_mask(ids)).

// CHECK-LABEL: func.func @padding_causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention padding_causal %[[Q]], %[[K]], %[[V]], %[[IDS]] {num_heads = 4 : i64, pad_id = 2 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @padding_causal(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %pad = tfc.constant dense<2> : tensor<i64>
  %keep = tfc.compare #tfc<cmp ne> %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %keep3 = tfc.unsqueeze %keep {axis = 1 : i64} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  %np = tfc.nopeak_mask %ids : tensor<?x?xi64> -> tensor<1x?x?xi1>
  %both = tfc.and %keep3, %np : (tensor<?x1x?xi1>, tensor<1x?x?xi1>) -> tensor<?x?x?xi1>
  %both4 = tfc.unsqueeze %both {axis = 1 : i64} : tensor<?x?x?xi1> -> tensor<?x1x?x?xi1>
  %masked = tfc.not %both4 : tensor<?x1x?x?xi1> -> tensor<?x1x?x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// The same with the and's operands swapped.

// CHECK-LABEL: func.func @padding_causal_commuted
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention padding_causal %[[Q]], %[[K]], %[[V]], %[[IDS]] {num_heads = 4 : i64, pad_id = 2 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @padding_causal_commuted(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %pad = tfc.constant dense<2> : tensor<i64>
  %keep = tfc.compare #tfc<cmp ne> %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %keep3 = tfc.unsqueeze %keep {axis = 1 : i64} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  %np = tfc.nopeak_mask %ids : tensor<?x?xi64> -> tensor<1x?x?xi1>
  %both = tfc.and %np, %keep3 : (tensor<1x?x?xi1>, tensor<?x1x?xi1>) -> tensor<?x?x?xi1>
  %both4 = tfc.unsqueeze %both {axis = 1 : i64} : tensor<?x?x?xi1> -> tensor<?x1x?x?xi1>
  %masked = tfc.not %both4 : tensor<?x1x?x?xi1> -> tensor<?x1x?x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// An additive float mask (BERT's extended attention mask): add(scores, mask).
// The mask tensor becomes the operand as it is.

// CHECK-LABEL: func.func @additive
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[M:[^:]+]]: tensor<?x1x1x?xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention additive %[[Q]], %[[K]], %[[V]], %[[M]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @additive(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %m: tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %f = tfc.add %sc, %m : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xf32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// An additive mask on the left of the add.

// CHECK-LABEL: func.func @additive_commuted
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[M:[^:]+]]: tensor<?x1x1x?xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention additive %[[Q]], %[[K]], %[[V]], %[[M]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @additive_commuted(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %m: tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %f = tfc.add %m, %sc : (tensor<?x1x1x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// A boolean mask of unknown origin (a function argument) becomes an additive
// mask: select(masked, mask_value, 0).

// CHECK-LABEL: func.func @bool_mask_unknown_origin
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[MB:[^:]+]]: tensor<?x1x?x?xi1>)
// CHECK-DAG: %[[FILL:.+]] = tfc.constant dense<-1.000000e+09> : tensor<f32>
// CHECK-DAG: %[[ZERO:.+]] = tfc.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[SEL:.+]] = tfc.select %[[MB]], %[[FILL]], %[[ZERO]] : (tensor<?x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x1x?x?xf32>
// CHECK-NEXT: %[[A:.+]] = tfc.attention additive %[[Q]], %[[K]], %[[V]], %[[SEL]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @bool_mask_unknown_origin(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %mb: tensor<?x1x?x?xi1>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %f = tfc.masked_fill %sc, %mb {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// No mask at all (tutorial-simple).

// CHECK-LABEL: func.func @no_mask
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @no_mask(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
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
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Divide by sqrt(d_model) = 8 instead of sqrt(d_k) (tutorial 001): the
// scale is whatever the model divides by.

// CHECK-LABEL: func.func @div_sqrt_d_model
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @div_sqrt_d_model(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Multiply by a constant, constant on the right.

// CHECK-LABEL: func.func @mul_scale
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @mul_scale(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<0.125> : tensor<f32>
  %sc = tfc.mul %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Multiply by a constant, constant on the left.

// CHECK-LABEL: func.func @mul_scale_commuted
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @mul_scale_commuted(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<0.25> : tensor<f32>
  %sc = tfc.mul %c, %s : (tensor<f32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// No scale op: the model folded 1/sqrt(d_k) into Q's weights. scale = 1.

// CHECK-LABEL: func.func @scale_folded_into_q
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @scale_folded_into_q(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %s {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// masked_fill with -inf (GPT-2) keeps -inf as the mask value.

// CHECK-LABEL: func.func @neg_inf_fill
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %{{[^:]+}}: tensor<?x?xi64>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention causal %[[Q]], %[[K]], %[[V]] {mask_value = 0xFFF0000000000000 : f64, num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @neg_inf_fill(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %np = tfc.nopeak_mask %ids : tensor<?x?xi64> -> tensor<1x?x?xi1>
  %np4 = tfc.unsqueeze %np {axis = 1 : i64} : tensor<1x?x?xi1> -> tensor<1x1x?x?xi1>
  %masked = tfc.not %np4 : tensor<1x1x?x?xi1> -> tensor<1x1x?x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = 0xFFF0000000000000 : f64} : (tensor<?x4x?x?xf32>, tensor<1x1x?x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// K transposed explicitly: matmul(Q, transpose(K, [0, 1, 3, 2])) without
// transpose_b.

// CHECK-LABEL: func.func @k_transposed_explicitly
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @k_transposed_explicitly(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %kt = tfc.transpose %kh {perm = array<i64: 0, 1, 3, 2>} : tensor<?x4x?x16xf32> -> tensor<?x4x16x?xf32>
  %s = tfc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// K^T produced by the head split itself: transpose(reshape(K), [0, 2, 3, 1]).

// CHECK-LABEL: func.func @k_split_transposed
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]] {num_heads = 4 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @k_split_transposed(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<?x?x4x16xf32> -> tensor<?x4x16x?xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Self-attention without projections (tutorial-simple): Q, K and V are one
// value, split three times.

// CHECK-LABEL: func.func @same_qkv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>
// CHECK-NEXT: %[[A:.+]] = tfc.attention none %[[X]], %[[X]], %[[X]] {num_heads = 4 : i64, scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.softmax
func.func @same_qkv(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %x {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %x {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %x {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Two attentions in one function both fuse; the second uses the first's
// output as its query (cross-attention: K and V from elsewhere).

// CHECK-LABEL: func.func @two_attentions
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x?x64xf32>, %[[K:[^:]+]]: tensor<?x?x64xf32>, %[[V:[^:]+]]: tensor<?x?x64xf32>, %[[MEM:[^:]+]]: tensor<?x?x64xf32>)
// CHECK-NEXT: %[[A1:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]]
// CHECK-NEXT: %[[A2:.+]] = tfc.attention none %[[A1]], %[[MEM]], %[[MEM]]
// CHECK-NEXT: return %[[A2]]
// CHECK-NOT: tfc.softmax
func.func @two_attentions(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %mem: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
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
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  %r4 = tfc.reshape %r {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %rh = tfc.transpose %r4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %mem4 = tfc.reshape %mem {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %memh = tfc.transpose %mem4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s2 = tfc.matmul %rh, %memh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c2 = tfc.constant dense<4.0> : tensor<f32>
  %sc2 = tfc.div %s2, %c2 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p2 = tfc.softmax %sc2 {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o2 = tfc.matmul %p2, %memh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot2 = tfc.transpose %o2 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r2 = tfc.reshape %ot2 {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r2 : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: softmax over a non-last axis (the query axis).

// CHECK-LABEL: func.func @softmax_not_last_axis
// CHECK-NOT: tfc.attention
// CHECK: %[[P:.+]] = tfc.softmax %{{.+}} {axis = 2 : i64}
// CHECK: tfc.matmul %[[P]]
// CHECK-NOT: tfc.attention
// CHECK: return
func.func @softmax_not_last_axis(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = 2 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the masked scores are also returned.

// CHECK-LABEL: func.func @masked_scores_other_user
// CHECK-NOT: tfc.attention
// CHECK: %[[F:.+]] = tfc.masked_fill
// CHECK: tfc.softmax %[[F]]
// CHECK-NOT: tfc.attention
// CHECK: return %{{.+}}, %[[F]]
func.func @masked_scores_other_user(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %ids: tensor<?x?xi64>) -> (tensor<?x?x64xf32>, tensor<?x4x?x?xf32>) {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %pad = tfc.constant dense<0> : tensor<i64>
  %keep = tfc.compare #tfc<cmp ne> %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %keep3 = tfc.unsqueeze %keep {axis = 1 : i64} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  %keep4 = tfc.unsqueeze %keep3 {axis = 1 : i64} : tensor<?x1x?xi1> -> tensor<?x1x1x?xi1>
  %masked = tfc.not %keep4 : tensor<?x1x1x?xi1> -> tensor<?x1x1x?xi1>
  %f = tfc.masked_fill %sc, %masked {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r, %f : tensor<?x?x64xf32>, tensor<?x4x?x?xf32>
}

// -----

// MUST NOT FUSE: an additive-masked score with another user.

// CHECK-LABEL: func.func @additive_scores_other_user
// CHECK-NOT: tfc.attention
// CHECK: %[[F:.+]] = tfc.add
// CHECK: tfc.softmax %[[F]]
// CHECK-NOT: tfc.attention
// CHECK: return %{{.+}}, %[[F]]
func.func @additive_scores_other_user(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %m: tensor<?x1x1x?xf32>) -> (tensor<?x?x64xf32>, tensor<?x4x?x?xf32>) {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %f = tfc.add %sc, %m : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xf32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %f {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r, %f : tensor<?x?x64xf32>, tensor<?x4x?x?xf32>
}

// -----

// MUST NOT FUSE: the scale is a runtime tensor, not a constant.

// CHECK-LABEL: func.func @scale_not_constant
// CHECK-SAME: %[[D:[^:]+]]: tensor<f32>)
// CHECK-NOT: tfc.attention
// CHECK: %[[SC:.+]] = tfc.div %{{.+}}, %[[D]]
// CHECK: tfc.softmax %[[SC]]
// CHECK-NOT: tfc.attention
// CHECK: return
func.func @scale_not_constant(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %d: tensor<f32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %k4 = tfc.reshape %k {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %kh = tfc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %sc = tfc.div %s, %d : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the scaled scores are also returned.

// CHECK-LABEL: func.func @scaled_scores_other_user
// CHECK-NOT: tfc.attention
// CHECK: %[[SC:.+]] = tfc.div
// CHECK: tfc.softmax %[[SC]]
// CHECK-NOT: tfc.attention
// CHECK: return %{{.+}}, %[[SC]]
func.func @scaled_scores_other_user(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x4x?x?xf32>) {
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
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r, %sc : tensor<?x?x64xf32>, tensor<?x4x?x?xf32>
}

// -----

// MUST NOT FUSE: the Q.K^T matmul has another user.

// CHECK-LABEL: func.func @qk_other_user
// CHECK-NOT: tfc.attention
// CHECK: %[[S:.+]] = tfc.matmul
// CHECK: tfc.softmax
// CHECK-NOT: tfc.attention
// CHECK: return %{{.+}}, %[[S]]
func.func @qk_other_user(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x4x?x?xf32>) {
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
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r, %s : tensor<?x?x64xf32>, tensor<?x4x?x?xf32>
}

// -----

// MUST NOT FUSE: the probabilities are also returned.

// CHECK-LABEL: func.func @probs_other_user
// CHECK-NOT: tfc.attention
// CHECK: %[[P:.+]] = tfc.softmax
// CHECK-NOT: tfc.attention
// CHECK: return %{{.+}}, %[[P]]
func.func @probs_other_user(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x4x?x?xf32>) {
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
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r, %p : tensor<?x?x64xf32>, tensor<?x4x?x?xf32>
}

// -----

// MUST NOT FUSE: K arrives already split into heads (a KV cache), so there
// is no [B, S, D] key to hand to tfc.attention.

// CHECK-LABEL: func.func @k_not_a_head_split
// CHECK-NOT: tfc.attention
// CHECK: tfc.softmax
// CHECK-NOT: tfc.attention
// CHECK: return
func.func @k_not_a_head_split(%q: tensor<?x?x64xf32>, %kh: tensor<?x4x?x16xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %q4 = tfc.reshape %q {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %qh = tfc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %v4 = tfc.reshape %v {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
  %vh = tfc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x4x16xf32> -> tensor<?x4x?x16xf32>
  %s = tfc.matmul %qh, %kh {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
  %c = tfc.constant dense<4.0> : tensor<f32>
  %sc = tfc.div %s, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = tfc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %o = tfc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %ot = tfc.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<?x4x?x16xf32> -> tensor<?x?x4x16xf32>
  %r = tfc.reshape %ot {shape = array<i64: 0, 0, 64>} : tensor<?x?x4x16xf32> -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}
