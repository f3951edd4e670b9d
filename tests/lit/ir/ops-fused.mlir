// The ops the fusion passes add besides tfc.attention / tfc.layer_norm (see
// ops.mlir): tfc.concat, tfc.fused_linear and tfc.token_embedding, with every
// combination of their optional operands (each optional group has its own
// keyword, so any subset re-parses; a residual without a bias and token types
// without a positional table once printed forms that did not).
// RUN: tfc-opt %s | FileCheck %s
// RUN: tfc-opt %s --mlir-print-op-generic | tfc-opt | FileCheck %s
// RUN: tfc-opt %s > %t.1.mlir
// RUN: tfc-opt %t.1.mlir | diff %t.1.mlir -

// CHECK-LABEL: func.func @fusion_results(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>, %[[TT:[a-z0-9]+]]: tensor<?x?xi64>, %[[X:[a-z0-9]+]]: tensor<?x?x8xf32>, %[[W:[a-z0-9]+]]: tensor<16x8xf32>, %[[B:[a-z0-9]+]]: tensor<16xf32>, %[[R:[a-z0-9]+]]: tensor<?x?x16xf32>, %[[TAB:[a-z0-9]+]]: tensor<10x8xf32>, %[[PE:[a-z0-9]+]]: tensor<32x8xf32>, %[[TTAB:[a-z0-9]+]]: tensor<2x8xf32>
func.func @fusion_results(%ids: tensor<?x?xi64>, %tt: tensor<?x?xi64>, %x: tensor<?x?x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %r: tensor<?x?x16xf32>, %tab: tensor<10x8xf32>, %pe: tensor<32x8xf32>, %ttab: tensor<2x8xf32>) {
  // CHECK: tfc.concat %[[W]], %[[W]], %[[W]] {axis = 0 : i64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<48x8xf32>
  %c = tfc.concat %w, %w, %w {axis = 0} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<48x8xf32>
  // CHECK: tfc.fused_linear %[[X]], %[[W]] : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  %f0 = tfc.fused_linear %x, %w : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) {activation = #tfc<act relu>} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %f1 = tfc.fused_linear %x, %w bias(%b) {activation = #tfc<act relu>} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) residual(%[[R]]) {activation = #tfc<act gelu_tanh>} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %f2 = tfc.fused_linear %x, %w bias(%b) residual(%r) {activation = #tfc<act gelu_tanh>} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfc.fused_linear %[[X]], %[[W]] residual(%[[R]]) {activation = #tfc<act gelu>} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %f3 = tfc.fused_linear %x, %w residual(%r) {activation = #tfc<act gelu>} : (tensor<?x?x8xf32>, tensor<16x8xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  // CHECK: tfc.token_embedding %[[IDS]], %[[TAB]] : (tensor<?x?xi64>, tensor<10x8xf32>) -> tensor<?x?x8xf32>
  %e0 = tfc.token_embedding %ids, %tab : (tensor<?x?xi64>, tensor<10x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.token_embedding %[[IDS]], %[[TAB]] positions(%[[PE]]) {position_axis = 0 : i64, scale = 8.000000e+00 : f64} : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
  %e1 = tfc.token_embedding %ids, %tab positions(%pe) {scale = 8.0 : f64, position_axis = 0 : i64} : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<32x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.token_embedding %[[IDS]], %[[TAB]] positions(%[[PE]]) types(%[[TT]], %[[TTAB]]) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<32x8xf32>, tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  %e2 = tfc.token_embedding %ids, %tab positions(%pe) types(%tt, %ttab) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<32x8xf32>, tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  // CHECK: tfc.token_embedding %[[IDS]], %[[TAB]] types(%[[TT]], %[[TTAB]]) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  %e3 = tfc.token_embedding %ids, %tab types(%tt, %ttab) : (tensor<?x?xi64>, tensor<10x8xf32>, tensor<?x?xi64>, tensor<2x8xf32>) -> tensor<?x?x8xf32>
  return
}
