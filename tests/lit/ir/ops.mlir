// Every tfc op the frontend or the passes produce, in its custom form: parse,
// print, parse again. The printed forms are checked, and printing is a fixed
// point, also through the generic form.
// RUN: tfc-opt %s | FileCheck %s
// RUN: tfc-opt %s | tfc-opt | FileCheck %s
// RUN: tfc-opt %s --mlir-print-op-generic | tfc-opt | FileCheck %s
// RUN: tfc-opt %s > %t.1.mlir
// RUN: tfc-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir

// CHECK-LABEL: func.func @sources(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>
func.func @sources(%ids: tensor<?x?xi64>) -> (tensor<4x8xf32>, tensor<f32>, tensor<16x8xf32>, tensor<1x?xi64>, tensor<1x?x?xi1>) {
  // CHECK: %[[W:.*]] = tfc.weight "enc.w" : tensor<4x8xf32>
  %w = tfc.weight "enc.w" : tensor<4x8xf32>
  // CHECK: %[[C:.*]] = tfc.constant dense<8.000000e+00> : tensor<f32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  // CHECK: %[[T:.*]] = tfc.sinusoid_table exp2i_cos_next {dim = 8 : i64, rows = 16 : i64} : tensor<16x8xf32>
  %t = tfc.sinusoid_table #tfc<pe exp2i_cos_next> {rows = 16, dim = 8} : tensor<16x8xf32>
  // CHECK: %[[P:.*]] = tfc.positions %[[IDS]] {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %p = tfc.positions %ids {axis = 1} : tensor<?x?xi64> -> tensor<1x?xi64>
  // CHECK: %[[M:.*]] = tfc.nopeak_mask %[[IDS]] : tensor<?x?xi64> -> tensor<1x?x?xi1>
  %m = tfc.nopeak_mask %ids : tensor<?x?xi64> -> tensor<1x?x?xi1>
  // CHECK: return %[[W]], %[[C]], %[[T]], %[[P]], %[[M]]
  return %w, %c, %t, %p, %m : tensor<4x8xf32>, tensor<f32>, tensor<16x8xf32>, tensor<1x?xi64>, tensor<1x?x?xi1>
}

// The other sinusoid variants and a batch-axis positions (tutorial 000's quirk).
// CHECK-LABEL: func.func @variants(
func.func @variants(%ids: tensor<?x?xi64>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<?x1xi64>) {
  // CHECK: tfc.sinusoid_table standard {dim = 4 : i64, rows = 8 : i64} : tensor<8x4xf32>
  %a = tfc.sinusoid_table #tfc<pe standard> {rows = 8, dim = 4} : tensor<8x4xf32>
  // CHECK: tfc.sinusoid_table exp2i {dim = 4 : i64, rows = 8 : i64} : tensor<8x4xf32>
  %b = tfc.sinusoid_table exp2i {rows = 8, dim = 4} : tensor<8x4xf32>
  // CHECK: tfc.positions %{{.*}} {axis = 0 : i64} : tensor<?x?xi64> -> tensor<?x1xi64>
  %p = tfc.positions %ids {axis = 0} : tensor<?x?xi64> -> tensor<?x1xi64>
  return %a, %b, %p : tensor<8x4xf32>, tensor<8x4xf32>, tensor<?x1xi64>
}

// RoBERTa's positions: [batch, seq], from the ids.
// CHECK-LABEL: func.func @padded_positions(
func.func @padded_positions(%ids: tensor<?x?xi64>) -> tensor<?x?xi64> {
  // CHECK: tfc.positions %{{.*}} {axis = 1 : i64, padding_idx = 1 : i64} : tensor<?x?xi64> -> tensor<?x?xi64>
  %p = tfc.positions %ids {axis = 1, padding_idx = 1} : tensor<?x?xi64> -> tensor<?x?xi64>
  return %p : tensor<?x?xi64>
}

// CHECK-LABEL: func.func @primitive(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>, %[[X:[a-z0-9]+]]: tensor<?x?x8xf32>, %[[W:[a-z0-9]+]]: tensor<16x8xf32>, %[[B:[a-z0-9]+]]: tensor<16xf32>, %[[G:[a-z0-9]+]]: tensor<8xf32>, %[[S:[a-z0-9]+]]: tensor<?x4x?x?xf32>, %[[K:[a-z0-9]+]]: tensor<?x?xi1>
func.func @primitive(%ids: tensor<?x?xi64>, %x: tensor<?x?x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %g: tensor<8xf32>, %s: tensor<?x4x?x?xf32>, %k: tensor<?x?xi1>) {
  // CHECK: %[[TAB:.*]] = tfc.weight "emb" : tensor<10x8xf32>
  %tab = tfc.weight "emb" : tensor<10x8xf32>
  // CHECK: tfc.embedding %[[TAB]], %[[IDS]] : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %e = tfc.embedding %tab, %ids : (tensor<10x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // CHECK: %[[L:.*]] = tfc.linear %[[X]], %[[W]], %[[B]] : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %l = tfc.linear %x, %w, %b : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfc.linear %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %l2 = tfc.linear %x, %w : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfc.matmul %[[X]], %[[W]] {transpose_b = true} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %mm = tfc.matmul %x, %w {transpose_b = true} : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // The default transpose_b = false is not printed.
  // CHECK: tfc.matmul %[[L]], %[[W]] : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  %mm2 = tfc.matmul %l, %w {transpose_b = false} : (tensor<?x?x16xf32>, tensor<16x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.add %[[X]], %[[G]] : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %a = tfc.add %x, %g : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.sub %[[X]], %[[G]] : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %su = tfc.sub %x, %g : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.mul %[[X]], %[[X]] : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %mu = tfc.mul %x, %x : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.div %[[X]], %[[G]] : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %di = tfc.div %x, %g : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: %[[PAD:.*]] = tfc.constant dense<0> : tensor<i64>
  %pad = tfc.constant dense<0> : tensor<i64>
  // CHECK: %[[NE:.*]] = tfc.compare ne %[[IDS]], %[[PAD]] : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %ne = tfc.compare #tfc<cmp ne> %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  // CHECK: tfc.compare ge %[[IDS]], %[[PAD]] : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  %ge = tfc.compare ge %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
  // CHECK: %[[AN:.*]] = tfc.and %[[NE]], %[[K]] : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  %an = tfc.and %ne, %k : (tensor<?x?xi1>, tensor<?x?xi1>) -> tensor<?x?xi1>
  // CHECK: %[[NO:.*]] = tfc.not %[[AN]] : tensor<?x?xi1> -> tensor<?x?xi1>
  %no = tfc.not %an : tensor<?x?xi1> -> tensor<?x?xi1>
  // CHECK: %[[CF:.*]] = tfc.cast %[[NE]] : tensor<?x?xi1> -> f32
  %cf = tfc.cast %ne : tensor<?x?xi1> -> f32
  // CHECK: %[[U:.*]] = tfc.unsqueeze %[[NO]] {axis = 1 : i64} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  %u = tfc.unsqueeze %no {axis = 1} : tensor<?x?xi1> -> tensor<?x1x?xi1>
  // CHECK: %[[U2:.*]] = tfc.unsqueeze %[[U]] {axis = 1 : i64} : tensor<?x1x?xi1> -> tensor<?x1x1x?xi1>
  %u2 = tfc.unsqueeze %u {axis = 1} : tensor<?x1x?xi1> -> tensor<?x1x1x?xi1>
  // CHECK: tfc.masked_fill %[[S]], %[[U2]] {value = -1.000000e+09 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
  %mf = tfc.masked_fill %s, %u2 {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
  // CHECK: tfc.masked_fill %[[S]], %[[U2]] {value = 0xFFF0000000000000 : f64}
  %mfi = tfc.masked_fill %s, %u2 {value = 0xFFF0000000000000 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
  // CHECK: tfc.select %[[NE]], %[[CF]], %[[CF]] : (tensor<?x?xi1>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  %sel = tfc.select %ne, %cf, %cf : (tensor<?x?xi1>, tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  // CHECK: %[[R:.*]] = tfc.reshape %[[X]] {shape = array<i64: 0, 0, 2, 4>} : tensor<?x?x8xf32> -> tensor<?x?x2x4xf32>
  %r = tfc.reshape %x {shape = array<i64: 0, 0, 2, 4>} : tensor<?x?x8xf32> -> tensor<?x?x2x4xf32>
  // CHECK: tfc.reshape %[[W]] {shape = array<i64: -1>} : tensor<16x8xf32> -> tensor<128xf32>
  %rf = tfc.reshape %w {shape = array<i64: -1>} : tensor<16x8xf32> -> tensor<128xf32>
  // CHECK: tfc.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x2x4xf32> -> tensor<?x2x?x4xf32>
  %tr = tfc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : tensor<?x?x2x4xf32> -> tensor<?x2x?x4xf32>
  // CHECK: tfc.slice %[[W]] {axis = 0 : i64, size = 8 : i64, start = 4 : i64} : tensor<16x8xf32> -> tensor<8x8xf32>
  %sl = tfc.slice %w {axis = 0, start = 4, size = 8} : tensor<16x8xf32> -> tensor<8x8xf32>
  // CHECK: %[[RM:.*]] = tfc.reduce_mean %[[X]] {axis = -1 : i64} : tensor<?x?x8xf32> -> tensor<?x?x1xf32>
  %rm = tfc.reduce_mean %x {axis = -1} : tensor<?x?x8xf32> -> tensor<?x?x1xf32>
  // CHECK: tfc.reduce_sum %[[X]] {axis = -1 : i64, keepdim = false} : tensor<?x?x8xf32> -> tensor<?x?xf32>
  %rs = tfc.reduce_sum %x {axis = -1, keepdim = false} : tensor<?x?x8xf32> -> tensor<?x?xf32>
  // CHECK: tfc.sqrt %[[RM]] : tensor<?x?x1xf32>
  %sq = tfc.sqrt %rm : tensor<?x?x1xf32>
  // CHECK: tfc.relu %[[X]] : tensor<?x?x8xf32>
  %re = tfc.relu %x : tensor<?x?x8xf32>
  // CHECK: tfc.gelu %[[X]] : tensor<?x?x8xf32>
  %ge0 = tfc.gelu %x : tensor<?x?x8xf32>
  // CHECK: tfc.gelu %[[X]] {approximate = #tfc<gelu tanh>} : tensor<?x?x8xf32>
  %ge1 = tfc.gelu %x {approximate = #tfc<gelu tanh>} : tensor<?x?x8xf32>
  // CHECK: tfc.softmax %[[S]] {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %sm = tfc.softmax %s {axis = -1} : tensor<?x4x?x?xf32>
  // CHECK: tfc.log_softmax %[[X]] {axis = 2 : i64} : tensor<?x?x8xf32>
  %ls = tfc.log_softmax %x {axis = 2} : tensor<?x?x8xf32>
  return
}

// The fused ops the passes produce.
// CHECK-LABEL: func.func @fused(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>, %[[X:[a-z0-9]+]]: tensor<?x?x8xf32>, %[[G:[a-z0-9]+]]: tensor<8xf32>, %[[ADD:[a-z0-9]+]]: tensor<?x1x1x?xf32>, %[[MEM:[a-z0-9]+]]: tensor<?x?x8xf32>
func.func @fused(%ids: tensor<?x?xi64>, %x: tensor<?x?x8xf32>, %g: tensor<8xf32>, %add: tensor<?x1x1x?xf32>, %mem: tensor<?x?x8xf32>) {
  // CHECK: tfc.layer_norm layer_norm %[[X]], %[[G]], %[[G]] {eps = 1.000000e-05 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  %ln = tfc.layer_norm #tfc<norm layer_norm> %x, %g, %g {eps = 1.0e-5 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.layer_norm std_norm %[[X]], %[[G]], %[[G]] {eps = 9.9999999999999995E-7 : f64}
  %sn = tfc.layer_norm #tfc<norm std_norm> %x, %g, %g {eps = 1.0e-6 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.attention none %[[X]], %[[X]], %[[X]] {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %at0 = tfc.attention #tfc<mask none> %x, %x, %x {num_heads = 2, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // The defaults mask_value = -1e9 and pad_id = 0 are not printed.
  // CHECK: tfc.attention key_padding %[[X]], %[[MEM]], %[[MEM]], %[[IDS]] {num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  %at1 = tfc.attention #tfc<mask key_padding> %x, %mem, %mem, %ids {num_heads = 2, scale = 0.5, mask_value = -1.0e9 : f64, pad_id = 0} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // CHECK: tfc.attention causal %[[X]], %[[X]], %[[X]] {mask_value = 0xFFF0000000000000 : f64, num_heads = 2 : i64, scale = 5.000000e-01 : f64}
  %at2 = tfc.attention #tfc<mask causal> %x, %x, %x {num_heads = 2, scale = 0.5, mask_value = 0xFFF0000000000000 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.attention padding_causal %[[X]], %[[X]], %[[X]], %[[IDS]] {num_heads = 2 : i64, pad_id = 3 : i64, scale = 5.000000e-01 : f64}
  %at3 = tfc.attention #tfc<mask padding_causal> %x, %x, %x, %ids {num_heads = 2, scale = 0.5, pad_id = 3} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
  // CHECK: tfc.attention additive %[[X]], %[[X]], %[[X]], %[[ADD]] {mask_value = -1.000000e+04 : f64, num_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x8xf32>
  %at4 = tfc.attention #tfc<mask additive> %x, %x, %x, %add {num_heads = 2, scale = 0.5, mask_value = -1.0e4 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x8xf32>
  return
}

// Grouped-query attention: 4 query heads of 2 over 2 key/value heads (K, V of
// width 4); rotary embeddings, with and without a per-row position offset.
// CHECK-LABEL: func.func @llama_ops
func.func @llama_ops(%q: tensor<?x?x8xf32>, %k: tensor<?x?x4xf32>, %f: tensor<1xf32>, %pos: tensor<?xi64>) -> (tensor<?x?x8xf32>, tensor<?x?x4xf32>) {
  // CHECK: tfc.rotary %{{.*}}, %{{.*}} {head_dim = 2 : i64} : (tensor<?x?x8xf32>, tensor<1xf32>) -> tensor<?x?x8xf32>
  %rq = tfc.rotary %q, %f {head_dim = 2} : (tensor<?x?x8xf32>, tensor<1xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.rotary %{{.*}}, %{{.*}} offset(%{{.*}}) {head_dim = 2 : i64, interleaved = true} : (tensor<?x?x4xf32>, tensor<1xf32>, tensor<?xi64>) -> tensor<?x?x4xf32>
  %rk = tfc.rotary %k, %f offset(%pos) {head_dim = 2, interleaved = true} : (tensor<?x?x4xf32>, tensor<1xf32>, tensor<?xi64>) -> tensor<?x?x4xf32>
  // CHECK: tfc.attention causal %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  %o = tfc.attention #tfc<mask causal> %rq, %rk, %rk {num_heads = 4, num_kv_heads = 2, scale = 0.5} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x8xf32>
  return %o, %rk : tensor<?x?x8xf32>, tensor<?x?x4xf32>
}
