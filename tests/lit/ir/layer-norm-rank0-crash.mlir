// Regression: tfc-opt crashes verifying a tfc.layer_norm of a rank-0 tensor:
// LayerNormOp::verify reads getDimSize(getRank() - 1) without checking the rank.
// (AttentionOp::verify likewise reads dim 2 of the query before the rank-3 check
// of inferReturnTypes runs; that reads out of bounds without crashing.)
// Expected: an error, no crash.
// RUN: tfc-opt %s --verify-diagnostics

func.func @layer_norm_scalar(%x: tensor<f32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{rank}}
  %0 = tfc.layer_norm #tfc<norm layer_norm> %x, %g, %g {eps = 1.0e-5 : f64} : (tensor<f32>, tensor<1xf32>, tensor<1xf32>) -> tensor<f32>
  return
}
