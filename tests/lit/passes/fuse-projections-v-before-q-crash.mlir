// Regression: --tfc-fuse-projections crashes (segfault in OpBuilder::create)
// when the packed projections are not in Q, K, V order in the block. The packer
// sets the builder's insertion point before the last of the linears in block
// order, then erases the linears in Q, K, V order while still building slices;
// if the last linear in the block is not the last one packed (here: V defined
// first), the insertion point dangles. Reachable from YAML: an `ops:` block that
// lists the V projection before Q and K makes `tfc compile` segfault.
// Expected: the same packing as for Q, K, V order.
// RUN: tfc-opt --split-input-file --tfc-fuse-projections %s | FileCheck %s

// CHECK-LABEL: func.func @v_first
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[WQ:[^:]+]]: tensor<64x64xf32>, %[[WK:[^:]+]]: tensor<64x64xf32>, %[[WV:[^:]+]]: tensor<64x64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK: %[[W:.+]] = tfc.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64}
// CHECK: %[[P:.+]] = tfc.linear %[[X]], %[[W]], %{{.+}} : (tensor<?x?x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
// CHECK-DAG: %[[Q:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64}
// CHECK-DAG: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CHECK-DAG: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 128 : i64}
// CHECK: tfc.attention causal %[[Q]], %[[K]], %[[V]]
func.func @v_first(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>, %wv: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %v = tfc.linear %x, %wv, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q = tfc.linear %x, %wq, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %x, %wk, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask causal> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// Cross-attention with V's projection before K's.

// CHECK-LABEL: func.func @cross_v_first
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[MEM:[^:]+]]: tensor<?x?x64xf32>, %[[WQ:[^:]+]]: tensor<64x64xf32>, %[[WK:[^:]+]]: tensor<64x64xf32>, %[[WV:[^:]+]]: tensor<64x64xf32>)
// CHECK: %[[W:.+]] = tfc.concat %[[WK]], %[[WV]] {axis = 0 : i64}
// CHECK: %[[P:.+]] = tfc.linear %[[MEM]], %[[W]] : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
// CHECK-DAG: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64}
// CHECK-DAG: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CHECK: tfc.attention none %{{.+}}, %[[K]], %[[V]]
func.func @cross_v_first(%x: tensor<?x?x64xf32>, %mem: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>, %wv: tensor<64x64xf32>) -> tensor<?x?x64xf32> {
  %q = tfc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %mem, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %mem, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
