// RUN: tfc-opt --split-input-file --tfc-fuse-rotary %s | FileCheck %s

// --tfc-fuse-rotary (passes/FuseRotary.cpp, docs/passes.md "Rotary inside the
// cached attention"): the tfc.rotary of a cached attention's new queries and
// keys folds into the attention's `inv_freq` operand when both match the
// kernel's rotary; otherwise the ops stay as they are.

// A decode_step layer: 4 query heads over 2 key/value heads of width 8, the
// rotaries at the attention's positions (step.pos) with one inv_freq.
// CHECK-LABEL: func.func @folds
// CHECK-NOT: tfc.rotary
// CHECK: tfc.cached_attention %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 blocks(%arg6) rotary(%arg7) {num_heads = 4 : i64, num_kv_heads = 2 : i64, rotary_interleaved = true, scale = 0.35355339059327379 : f64, window = 3 : i64}
// CHECK-NOT: tfc.rotary
func.func @folds(%q: tensor<?x?x32xf32>, %k: tensor<?x?x16xf32>, %v: tensor<?x?x16xf32>,
                 %kc: tensor<?x8x16xf32>, %vc: tensor<?x8x16xf32>, %pos: tensor<?xi64>,
                 %blocks: tensor<?x?xi64>, %f: tensor<4xf32>) -> tensor<?x?x32xf32> {
  %rq = tfc.rotary %q, %f offset(%pos) {head_dim = 8, interleaved = true} : (tensor<?x?x32xf32>, tensor<4xf32>, tensor<?xi64>) -> tensor<?x?x32xf32>
  %rk = tfc.rotary %k, %f offset(%pos) {head_dim = 8, interleaved = true} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<?xi64>) -> tensor<?x?x16xf32>
  %o = tfc.cached_attention %rq, %rk, %v, %kc, %vc, %pos blocks(%blocks) {num_heads = 4, num_kv_heads = 2, scale = 0.35355339059327379, window = 3} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<?xi64>, tensor<?x?xi64>) -> tensor<?x?x32xf32>
  return %o : tensor<?x?x32xf32>
}

// -----

// The rotated key is also returned: it must exist, so nothing folds.
// CHECK-LABEL: func.func @rotated_key_read_elsewhere
// CHECK: tfc.rotary
// CHECK: tfc.rotary
// CHECK: tfc.cached_attention %{{.+}}, %{{.+}}, %arg2, %arg3, %arg4, %arg5 {
func.func @rotated_key_read_elsewhere(%q: tensor<?x?x16xf32>, %k: tensor<?x?x16xf32>,
    %v: tensor<?x?x16xf32>, %kc: tensor<?x8x16xf32>, %vc: tensor<?x8x16xf32>,
    %pos: tensor<i64>, %f: tensor<4xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>) {
  %rq = tfc.rotary %q, %f offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %rk = tfc.rotary %k, %f offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %o = tfc.cached_attention %rq, %rk, %v, %kc, %vc, %pos {num_heads = 2, scale = 0.5} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  return %o, %rk : tensor<?x?x16xf32>, tensor<?x?x16xf32>
}

// -----

// The query's rotary is at other positions than the attention's, the key's
// has other frequencies, and a third attention's rotaries split the heads
// other than it does: none folds.
// CHECK-LABEL: func.func @mismatches
// CHECK-COUNT-6: tfc.rotary
// CHECK-NOT: rotary(
func.func @mismatches(%q: tensor<?x?x16xf32>, %k: tensor<?x?x16xf32>, %v: tensor<?x?x16xf32>,
    %kc: tensor<?x8x16xf32>, %vc: tensor<?x8x16xf32>, %pos: tensor<i64>, %other: tensor<i64>,
    %f: tensor<4xf32>, %g: tensor<4xf32>) -> (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) {
  %q1 = tfc.rotary %q, %f offset(%other) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %k1 = tfc.rotary %k, %f offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %o1 = tfc.cached_attention %q1, %k1, %v, %kc, %vc, %pos {num_heads = 2, scale = 0.5} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %q2 = tfc.rotary %q, %f offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %k2 = tfc.rotary %k, %g offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %o2 = tfc.cached_attention %q2, %k2, %v, %kc, %vc, %pos {num_heads = 2, scale = 0.5} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %q3 = tfc.rotary %q, %f offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %k3 = tfc.rotary %k, %f offset(%pos) {head_dim = 8} : (tensor<?x?x16xf32>, tensor<4xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  %o3 = tfc.cached_attention %q3, %k3, %v, %kc, %vc, %pos {num_heads = 1, scale = 0.5} : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x8x16xf32>, tensor<?x8x16xf32>, tensor<i64>) -> tensor<?x?x16xf32>
  return %o1, %o2, %o3 : tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>
}
