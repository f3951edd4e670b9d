// Regression: --tfc-fuse-projections does not fold add(r, linear(x)) into a
// residual epilogue when r is defined after the linear (but before the add).
// The pass requires the residual to be "defined before the linear runs", but it
// builds the tfc.fused_linear at the add, where r always dominates, so the
// restriction only loses fusions (Passes.td: "add(r, linear(...)) with the
// linear used once becomes a residual epilogue").
// Expected: one tfc.fused_linear with residual(%r).
// RUN: tfc-opt --split-input-file --tfc-fuse-projections %s | FileCheck %s

// CHECK-LABEL: func.func @residual_defined_after_linear
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x64xf32>, %[[Y:[^:]+]]: tensor<?x?x64xf32>)
// CHECK: %[[R:.+]] = tfc.relu %[[Y]]
// CHECK-NEXT: %[[F:.+]] = tfc.fused_linear %[[X]], %[[W]] residual(%[[R]])
// CHECK-NEXT: return %[[F]]
func.func @residual_defined_after_linear(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %y: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %l = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %r = tfc.relu %y : tensor<?x?x64xf32>
  %a = tfc.add %r, %l : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
