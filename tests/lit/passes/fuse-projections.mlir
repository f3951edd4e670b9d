// RUN: tfc-opt --split-input-file --tfc-fuse-projections %s | FileCheck %s
// RUN: tfc-opt --split-input-file --tfc-fuse-projections --canonicalize %s | FileCheck %s --check-prefix=CANON
// RUN: tfc-opt --split-input-file --tfc-fuse-projections --cse --canonicalize %s | FileCheck %s --check-prefix=CSE

// --tfc-fuse-projections:
//  - the Q, K and V linears of one tfc.attention that read the same input become
//    one linear over concat(Wq, Wk, Wv) (and concat of the biases) followed by
//    slices of its output (K and V only for cross-attention);
//  - weights that are consecutive slices of one packed tensor fold back to it
//    under --canonicalize (GPT-2's Conv1D form also needs --cse, since each
//    matmul gets its own transpose of the packed weight);
//  - linear -> relu / gelu / silu becomes tfc.fused_linear with that activation;
//  - add(r, linear) with the linear used once becomes a residual epilogue;
//  - GPT-2's Conv1D, matmul(x, W[in, out]) + b, becomes linear(x, W^T, b).
// The second and third RUN lines check only the cases with CANON / CSE lines.

// QKV packing: one [192, 64] GEMM, then slices of its last axis in Q, K, V order.

// CHECK-LABEL: func.func @qkv_packing
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[WQ:[^:]+]]: tensor<64x64xf32>, %[[BQ:[^:]+]]: tensor<64xf32>, %[[WK:[^:]+]]: tensor<64x64xf32>, %[[BK:[^:]+]]: tensor<64xf32>, %[[WV:[^:]+]]: tensor<64x64xf32>, %[[BV:[^:]+]]: tensor<64xf32>)
// CHECK-DAG: %[[W:.+]] = tfc.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<192x64xf32>
// CHECK-DAG: %[[B:.+]] = tfc.concat %[[BQ]], %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<192xf32>
// CHECK: %[[P:.+]] = tfc.linear %[[X]], %[[W]], %[[B]] : (tensor<?x?x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
// CHECK-DAG: %[[Q:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64} : tensor<?x?x192xf32> -> tensor<?x?x64xf32>
// CHECK-DAG: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CHECK-DAG: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 128 : i64}
// CHECK: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]]
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: tfc.linear
func.func @qkv_packing(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<64x64xf32>, %bk: tensor<64xf32>, %wv: tensor<64x64xf32>, %bv: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %q = tfc.linear %x, %wq, %bq : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %x, %wk, %bk : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %x, %wv, %bv : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// QKV packing without biases.

// CHECK-LABEL: func.func @qkv_packing_no_bias
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[WQ:[^:]+]]: tensor<64x64xf32>, %[[WK:[^:]+]]: tensor<64x64xf32>, %[[WV:[^:]+]]: tensor<64x64xf32>)
// CHECK: %[[W:.+]] = tfc.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64}
// CHECK-NEXT: %[[P:.+]] = tfc.linear %[[X]], %[[W]] : (tensor<?x?x64xf32>, tensor<192x64xf32>) -> tensor<?x?x192xf32>
// CHECK-DAG: %[[Q:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64}
// CHECK-DAG: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CHECK-DAG: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 128 : i64}
// CHECK: tfc.attention causal %[[Q]], %[[K]], %[[V]]
func.func @qkv_packing_no_bias(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>, %wv: tensor<64x64xf32>) -> tensor<?x?x64xf32> {
  %q = tfc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %x, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask causal> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// Cross-attention: Q reads the decoder state, K and V the encoder memory. Only
// K and V are packed (2-way, [128, 64]); Q keeps its own linear.

// CHECK-LABEL: func.func @cross_attention_kv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[MEM:[^:]+]]: tensor<?x?x64xf32>, %[[WQ:[^:]+]]: tensor<64x64xf32>, %[[BQ:[^:]+]]: tensor<64xf32>, %[[WK:[^:]+]]: tensor<64x64xf32>, %[[BK:[^:]+]]: tensor<64xf32>, %[[WV:[^:]+]]: tensor<64x64xf32>, %[[BV:[^:]+]]: tensor<64xf32>, %[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK-DAG: %[[Q:.+]] = tfc.linear %[[X]], %[[WQ]], %[[BQ]] : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-DAG: %[[W:.+]] = tfc.concat %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<128x64xf32>
// CHECK-DAG: %[[B:.+]] = tfc.concat %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<64xf32>, tensor<64xf32>) -> tensor<128xf32>
// CHECK: %[[P:.+]] = tfc.linear %[[MEM]], %[[W]], %[[B]] : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-DAG: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64}
// CHECK-DAG: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CHECK: tfc.attention key_padding %[[Q]], %[[K]], %[[V]], %[[IDS]]
func.func @cross_attention_kv(%x: tensor<?x?x64xf32>, %mem: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %bq: tensor<64xf32>, %wk: tensor<64x64xf32>, %bk: tensor<64xf32>, %wv: tensor<64x64xf32>, %bv: tensor<64xf32>, %ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %q = tfc.linear %x, %wq, %bq : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %mem, %wk, %bk : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %mem, %wv, %bv : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask key_padding> %q, %k, %v, %ids {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// torch.nn.MultiheadAttention's in_proj_weight [3D, D]: Q, K and V are row
// slices of one packed weight and bias. Packing concatenates the slices again,
// and --canonicalize folds concat(slice 0, slice 64, slice 128) back to it.

// CANON-LABEL: func.func @packed_weight_folds
// CANON-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<192x64xf32>, %[[B:[^:]+]]: tensor<192xf32>)
// CANON-NOT: tfc.concat
// CANON: %[[P:.+]] = tfc.linear %[[X]], %[[W]], %[[B]] : (tensor<?x?x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
// CANON-DAG: %[[Q:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64}
// CANON-DAG: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CANON-DAG: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 128 : i64}
// CANON: %[[A:.+]] = tfc.attention none %[[Q]], %[[K]], %[[V]]
// CANON-NEXT: return %[[A]]

// Without --canonicalize the concat of the slices is still there.
// CHECK-LABEL: func.func @packed_weight_folds
// CHECK: tfc.concat %{{.+}}, %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<192x64xf32>
// CHECK: tfc.linear %{{.+}} -> tensor<?x?x192xf32>
func.func @packed_weight_folds(%x: tensor<?x?x64xf32>, %w: tensor<192x64xf32>, %b: tensor<192xf32>) -> tensor<?x?x64xf32> {
  %wq = tfc.slice %w {axis = 0 : i64, start = 0 : i64, size = 64 : i64} : tensor<192x64xf32> -> tensor<64x64xf32>
  %bq = tfc.slice %b {axis = 0 : i64, start = 0 : i64, size = 64 : i64} : tensor<192xf32> -> tensor<64xf32>
  %q = tfc.linear %x, %wq, %bq : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %wk = tfc.slice %w {axis = 0 : i64, start = 64 : i64, size = 64 : i64} : tensor<192x64xf32> -> tensor<64x64xf32>
  %bk = tfc.slice %b {axis = 0 : i64, start = 64 : i64, size = 64 : i64} : tensor<192xf32> -> tensor<64xf32>
  %k = tfc.linear %x, %wk, %bk : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %wv = tfc.slice %w {axis = 0 : i64, start = 128 : i64, size = 64 : i64} : tensor<192x64xf32> -> tensor<64x64xf32>
  %bv = tfc.slice %b {axis = 0 : i64, start = 128 : i64, size = 64 : i64} : tensor<192xf32> -> tensor<64xf32>
  %v = tfc.linear %x, %wv, %bv : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// Slices that do not cover the whole packed weight (the K and V rows of
// cross-attention) stay a concat of slices.

// CANON-LABEL: func.func @partial_slices_do_not_fold
// CANON-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[MEM:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<192x64xf32>)
// CANON-DAG: %[[SK:.+]] = tfc.slice %[[W]] {axis = 0 : i64, size = 64 : i64, start = 64 : i64}
// CANON-DAG: %[[SV:.+]] = tfc.slice %[[W]] {axis = 0 : i64, size = 64 : i64, start = 128 : i64}
// CANON: %[[C:.+]] = tfc.concat %[[SK]], %[[SV]] {axis = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<128x64xf32>
// CANON: tfc.linear %[[MEM]], %[[C]] : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
func.func @partial_slices_do_not_fold(%x: tensor<?x?x64xf32>, %mem: tensor<?x?x64xf32>, %w: tensor<192x64xf32>) -> tensor<?x?x64xf32> {
  %wq = tfc.slice %w {axis = 0 : i64, start = 0 : i64, size = 64 : i64} : tensor<192x64xf32> -> tensor<64x64xf32>
  %q = tfc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %wk = tfc.slice %w {axis = 0 : i64, start = 64 : i64, size = 64 : i64} : tensor<192x64xf32> -> tensor<64x64xf32>
  %k = tfc.linear %mem, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %wv = tfc.slice %w {axis = 0 : i64, start = 128 : i64, size = 64 : i64} : tensor<192x64xf32> -> tensor<64x64xf32>
  %v = tfc.linear %mem, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// GPT-2's packed Conv1D c_attn: W is [in, 3 * out] and each projection is
// matmul(x, slice(W, axis 1)) + slice(b). Each becomes a linear over a row slice
// of transpose(W); after --cse (one transpose) and --canonicalize the packed
// GEMM reads transpose(W) and b whole.

// CSE-LABEL: func.func @conv1d_packed_qkv
// CSE-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x192xf32>, %[[B:[^:]+]]: tensor<192xf32>)
// CSE-NEXT: %[[WT:.+]] = tfc.transpose %[[W]] {perm = array<i64: 1, 0>} : tensor<64x192xf32> -> tensor<192x64xf32>
// CSE-NEXT: %[[P:.+]] = tfc.linear %[[X]], %[[WT]], %[[B]] : (tensor<?x?x64xf32>, tensor<192x64xf32>, tensor<192xf32>) -> tensor<?x?x192xf32>
// CSE-NEXT: %[[Q:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 0 : i64}
// CSE-NEXT: %[[K:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 64 : i64}
// CSE-NEXT: %[[V:.+]] = tfc.slice %[[P]] {axis = 2 : i64, size = 64 : i64, start = 128 : i64}
// CSE-NEXT: %[[A:.+]] = tfc.attention causal %[[Q]], %[[K]], %[[V]]
// CSE-NEXT: return %[[A]]

// Without CSE every projection has its own transpose of W, so the concat stays.
// CANON-LABEL: func.func @conv1d_packed_qkv
// CANON-COUNT-3: tfc.transpose
// CANON: tfc.concat
// CANON-NOT: tfc.matmul
func.func @conv1d_packed_qkv(%x: tensor<?x?x64xf32>, %w: tensor<64x192xf32>, %b: tensor<192xf32>) -> tensor<?x?x64xf32> {
  %wq = tfc.slice %w {axis = 1 : i64, start = 0 : i64, size = 64 : i64} : tensor<64x192xf32> -> tensor<64x64xf32>
  %bq = tfc.slice %b {axis = 0 : i64, start = 0 : i64, size = 64 : i64} : tensor<192xf32> -> tensor<64xf32>
  %mq = tfc.matmul %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %q = tfc.add %mq, %bq : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %wk = tfc.slice %w {axis = 1 : i64, start = 64 : i64, size = 64 : i64} : tensor<64x192xf32> -> tensor<64x64xf32>
  %bk = tfc.slice %b {axis = 0 : i64, start = 64 : i64, size = 64 : i64} : tensor<192xf32> -> tensor<64xf32>
  %mk = tfc.matmul %x, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.add %mk, %bk : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %wv = tfc.slice %w {axis = 1 : i64, start = 128 : i64, size = 64 : i64} : tensor<64x192xf32> -> tensor<64x64xf32>
  %bv = tfc.slice %b {axis = 0 : i64, start = 128 : i64, size = 64 : i64} : tensor<192xf32> -> tensor<64xf32>
  %mv = tfc.matmul %x, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.add %mv, %bv : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask causal> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// Conv1D: matmul(x, W[in, out]) + b becomes linear(x, transpose(W), b).

// CHECK-LABEL: func.func @conv1d_bias
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x128xf32>, %[[B:[^:]+]]: tensor<128xf32>)
// CHECK-NEXT: %[[WT:.+]] = tfc.transpose %[[W]] {perm = array<i64: 1, 0>} : tensor<64x128xf32> -> tensor<128x64xf32>
// CHECK-NEXT: %[[L:.+]] = tfc.linear %[[X]], %[[WT]], %[[B]] : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[L]]
func.func @conv1d_bias(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  %m = tfc.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %y = tfc.add %b, %m : (tensor<128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %y : tensor<?x?x128xf32>
}

// -----

// Conv1D without a bias.

// CHECK-LABEL: func.func @conv1d_no_bias
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x128xf32>)
// CHECK-NEXT: %[[WT:.+]] = tfc.transpose %[[W]] {perm = array<i64: 1, 0>} : tensor<64x128xf32> -> tensor<128x64xf32>
// CHECK-NEXT: %[[L:.+]] = tfc.linear %[[X]], %[[WT]] : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[L]]
func.func @conv1d_no_bias(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>) -> tensor<?x?x128xf32> {
  %m = tfc.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  return %m : tensor<?x?x128xf32>
}

// -----

// Conv1D followed by gelu(tanh) and a residual add (GPT-2's MLP): the whole
// thing ends as two fused linears.

// CHECK-LABEL: func.func @conv1d_mlp
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W1:[^:]+]]: tensor<64x128xf32>, %[[B1:[^:]+]]: tensor<128xf32>, %[[W2:[^:]+]]: tensor<128x64xf32>, %[[B2:[^:]+]]: tensor<64xf32>)
// CHECK-NEXT: %[[W1T:.+]] = tfc.transpose %[[W1]] {perm = array<i64: 1, 0>} : tensor<64x128xf32> -> tensor<128x64xf32>
// CHECK-NEXT: %[[H:.+]] = tfc.fused_linear %[[X]], %[[W1T]] bias(%[[B1]]) {activation = #tfc<act gelu_tanh>} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[W2T:.+]] = tfc.transpose %[[W2]] {perm = array<i64: 1, 0>} : tensor<128x64xf32> -> tensor<64x128xf32>
// CHECK-NEXT: %[[Y:.+]] = tfc.fused_linear %[[H]], %[[W2T]] bias(%[[B2]]) residual(%[[X]]) : (tensor<?x?x128xf32>, tensor<64x128xf32>, tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: tfc.matmul
func.func @conv1d_mlp(%x: tensor<?x?x64xf32>, %w1: tensor<64x128xf32>, %b1: tensor<128xf32>, %w2: tensor<128x64xf32>, %b2: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %m1 = tfc.matmul %x, %w1 : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  %h1 = tfc.add %m1, %b1 : (tensor<?x?x128xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %g = tfc.gelu %h1 {approximate = #tfc<gelu tanh>} : tensor<?x?x128xf32>
  %m2 = tfc.matmul %g, %w2 : (tensor<?x?x128xf32>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %h2 = tfc.add %m2, %b2 : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %x, %h2 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// linear + relu -> fused_linear {relu}.

// CHECK-LABEL: func.func @linear_relu
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<128x64xf32>, %[[B:[^:]+]]: tensor<128xf32>)
// CHECK-NEXT: %[[Y:.+]] = tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) {activation = #tfc<act relu>} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear_relu(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> tensor<?x?x128xf32> {
  %l = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %r = tfc.relu %l : tensor<?x?x128xf32>
  return %r : tensor<?x?x128xf32>
}

// -----

// linear + silu -> fused_linear {silu}, with the residual add after it: a
// gated feed-forward's gate projection, Marian's swish FFN.

// CHECK-LABEL: func.func @linear_silu
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NEXT: %[[Y:.+]] = tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) residual(%[[X]]) {activation = #tfc<act silu>} : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @linear_silu(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %l = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %s = tfc.silu %l : tensor<?x?x64xf32>
  %y = tfc.add %s, %x : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// linear + gelu(tanh) -> fused_linear {gelu_tanh}; linear + exact gelu ->
// fused_linear {gelu}.

// CHECK-LABEL: func.func @linear_gelu
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<128x64xf32>, %[[B:[^:]+]]: tensor<128xf32>)
// CHECK-NEXT: %[[T:.+]] = tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) {activation = #tfc<act gelu_tanh>} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[E:.+]] = tfc.fused_linear %[[X]], %[[W]] {activation = #tfc<act gelu>} : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
// CHECK-NEXT: return %[[T]], %[[E]]
func.func @linear_gelu(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  %l = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %t = tfc.gelu %l {approximate = #tfc<gelu tanh>} : tensor<?x?x128xf32>
  %l2 = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %e = tfc.gelu %l2 : tensor<?x?x128xf32>
  return %t, %e : tensor<?x?x128xf32>, tensor<?x?x128xf32>
}

// -----

// Residual add folds, with the residual on either side of the add.

// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[R:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NEXT: %[[Y1:.+]] = tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) residual(%[[R]]) : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[Y2:.+]] = tfc.fused_linear %[[Y1]], %[[W]] residual(%[[R]]) : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y2]]
func.func @residual(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %l = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %r, %l : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %l2 = tfc.linear %y, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %y2 = tfc.add %l2, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y2 : tensor<?x?x64xf32>
}

// -----

// Activation and residual together: add(r, relu(linear(x))).

// CHECK-LABEL: func.func @relu_then_residual
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[R:[^:]+]]: tensor<?x?x64xf32>, %[[W:[^:]+]]: tensor<64x64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NEXT: %[[Y:.+]] = tfc.fused_linear %[[X]], %[[W]] bias(%[[B]]) residual(%[[R]]) {activation = #tfc<act relu>}
// CHECK-NEXT: return %[[Y]]
func.func @relu_then_residual(%x: tensor<?x?x64xf32>, %r: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %l = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.relu %l : tensor<?x?x64xf32>
  %y = tfc.add %r, %a : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the linear has a second user, so the relu cannot be folded
// into it (the pre-activation value would be lost).

// CHECK-LABEL: func.func @linear_two_users_keeps_relu
// CHECK-NOT: tfc.fused_linear
// CHECK: %[[L:.+]] = tfc.linear
// CHECK-NEXT: %[[A:.+]] = tfc.relu %[[L]]
// CHECK-NEXT: return %[[A]], %[[L]]
func.func @linear_two_users_keeps_relu(%x: tensor<?x?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>) -> (tensor<?x?x128xf32>, tensor<?x?x128xf32>) {
  %l = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %r = tfc.relu %l : tensor<?x?x128xf32>
  return %r, %l : tensor<?x?x128xf32>, tensor<?x?x128xf32>
}

// -----

// MUST NOT FUSE: a residual that broadcasts (a different type from the linear's
// result) is not an epilogue add.

// CHECK-LABEL: func.func @broadcast_residual_not_folded
// CHECK-NOT: tfc.fused_linear
// CHECK: %[[L:.+]] = tfc.linear
// CHECK-NEXT: %[[Y:.+]] = tfc.add %{{.+}}, %[[L]] : (tensor<1x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[L2:.+]] = tfc.linear
// CHECK-NEXT: %[[Y2:.+]] = tfc.add %[[L2]], %{{.+}} : (tensor<1x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]], %[[Y2]]
func.func @broadcast_residual_not_folded(%x: tensor<?x?x64xf32>, %x1: tensor<1x?x64xf32>, %r: tensor<1x?x64xf32>, %big: tensor<?x?x64xf32>, %w: tensor<64x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %l = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %r, %l : (tensor<1x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %l2 = tfc.linear %x1, %w : (tensor<1x?x64xf32>, tensor<64x64xf32>) -> tensor<1x?x64xf32>
  %y2 = tfc.add %l2, %big : (tensor<1x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y, %y2 : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the add's result is the linear's only user, but the linear is
// added to itself: there is no separate residual.

// CHECK-LABEL: func.func @self_add_not_folded
// CHECK-NOT: tfc.fused_linear
// CHECK: %[[L:.+]] = tfc.linear
// CHECK-NEXT: tfc.add %[[L]], %[[L]]
func.func @self_add_not_folded(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x?x64xf32> {
  %l = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %l, %l : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// MUST NOT PACK: the K projection is also returned, so Q, K and V stay three
// linears (K and V are not packed either, since K has two users).

// CHECK-LABEL: func.func @projection_other_user
// CHECK-NOT: tfc.concat
// CHECK-COUNT-3: tfc.linear
// CHECK-NOT: tfc.concat
// CHECK: tfc.attention
func.func @projection_other_user(%x: tensor<?x?x64xf32>, %wq: tensor<64x64xf32>, %wk: tensor<64x64xf32>, %wv: tensor<64x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %q = tfc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %x, %wv : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a, %k : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// MUST NOT PACK: Q, K and V read three different inputs.

// CHECK-LABEL: func.func @different_inputs
// CHECK-NOT: tfc.concat
// CHECK-COUNT-3: tfc.linear
// CHECK-NOT: tfc.concat
// CHECK: tfc.attention
func.func @different_inputs(%x: tensor<?x?x64xf32>, %y: tensor<?x?x64xf32>, %z: tensor<?x?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x?x64xf32> {
  %q = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %y, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %z, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

// -----

// MUST NOT PACK: K and V disagree on having a bias (and Q has none either way).

// CHECK-LABEL: func.func @bias_mismatch
// CHECK-NOT: tfc.concat
// CHECK-COUNT-3: tfc.linear
// CHECK-NOT: tfc.concat
// CHECK: tfc.attention
func.func @bias_mismatch(%x: tensor<?x?x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %q = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %v = tfc.linear %x, %w : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %a = tfc.attention #tfc<mask none> %q, %k, %v {num_heads = 4 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}
