// Regression: --tfc-fuse-layer-norm fuses a norm whose "eps" constant is
// negative into a tfc.layer_norm with that eps; the op's verifier rejects it
// ("eps must be non-negative") and tfc-opt / tfc compile fail with an internal
// verifier error instead of leaving the primitives alone. Reachable from YAML
// with an `ops:` block whose eps parameter is negative.
// Expected: no fusion (the primitives stay), valid IR.
// RUN: tfc-opt --split-input-file --tfc-fuse-layer-norm %s | FileCheck %s

// CHECK-LABEL: func.func @layer_norm_negative_eps
// CHECK-NOT: tfc.layer_norm
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return
func.func @layer_norm_negative_eps(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps = tfc.constant dense<-1.0e-05> : tensor<f32>
  %ve = tfc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %ve : tensor<?x?x1xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %nrm, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %m, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// CHECK-LABEL: func.func @std_norm_negative_eps
// CHECK-NOT: tfc.layer_norm
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return
func.func @std_norm_negative_eps(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<-1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}
