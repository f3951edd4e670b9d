// --tfc-fuse-projections on a gated FFN (SwiGLU: Llama, Qwen, Mistral; GeGLU:
// Gemma, T5 v1.1): mul(act(linear(x, Wg)), linear(x, Wu)) becomes the up
// linear, then the gate's tfc.fused_linear with its activation and the up
// projection as its multiplier, so no elementwise product is left; the down
// projection still takes the residual add.
// RUN: tfc-opt --split-input-file --tfc-fuse-projections %s | FileCheck %s

// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[WG:[^:]+]]: tensor<128x64xf32>, %[[WU:[^:]+]]: tensor<128x64xf32>, %[[WD:[^:]+]]: tensor<64x128xf32>)
// CHECK: %[[U:.+]] = tfc.linear %[[X]], %[[WU]] : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[H:.+]] = tfc.fused_linear %[[X]], %[[WG]] multiplier(%[[U]]) {activation = #tfc<act silu>}
// CHECK-NEXT: %[[D:.+]] = tfc.fused_linear %[[H]], %[[WD]] residual(%[[X]])
// CHECK-NEXT: return %[[D]]
// CHECK-NOT: tfc.mul
func.func @swiglu(%x: tensor<?x?x64xf32>, %wg: tensor<128x64xf32>, %wu: tensor<128x64xf32>, %wd: tensor<64x128xf32>) -> tensor<?x?x64xf32> {
  %u = tfc.linear %x, %wu : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %g = tfc.linear %x, %wg : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %a = tfc.silu %g : tensor<?x?x128xf32>
  %h = tfc.mul %a, %u : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %d = tfc.linear %h, %wd : (tensor<?x?x128xf32>, tensor<64x128xf32>) -> tensor<?x?x64xf32>
  %r = tfc.add %x, %d : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// The product's operands in the other order, and a plain linear (no
// activation) as the fused one: the first operand that is a linear takes it.

// CHECK-LABEL: func.func @plain_linear_times
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64xf32>, %[[W:[^:]+]]: tensor<32x64xf32>, %[[M:[^:]+]]: tensor<?x32xf32>)
// CHECK: %[[F:.+]] = tfc.fused_linear %[[X]], %[[W]] multiplier(%[[M]])
// CHECK-NEXT: return %[[F]]
func.func @plain_linear_times(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %m: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %l = tfc.linear %x, %w : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %p = tfc.mul %m, %l : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %p : tensor<?x32xf32>
}

// -----

// Not fused: a broadcast product (the other operand is not the linear's shape),
// and a linear that another op also reads.

// CHECK-LABEL: func.func @not_fused
// CHECK: tfc.linear
// CHECK: tfc.mul
// CHECK: tfc.mul
func.func @not_fused(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %s: tensor<32xf32>, %m: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %l = tfc.linear %x, %w : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %p = tfc.mul %l, %s : (tensor<?x32xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %q = tfc.mul %l, %m : (tensor<?x32xf32>, tensor<?x32xf32>) -> tensor<?x32xf32>
  return %p, %q : tensor<?x32xf32>, tensor<?x32xf32>
}
