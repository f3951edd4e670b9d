// RUN: tfc-opt --split-input-file --tfc-fold-embeddings %s | FileCheck %s

// --tfc-fold-embeddings: embedding(W, ids) [* c] + embedding(P, positions(ids))
// [+ embedding(T, type_ids)], in any order and association, becomes one
// tfc.token_embedding with the scale and the positions' axis as attributes
// (scale = 1 and position_axis = 1 are the defaults and are not printed).

// The tutorials: token lookup scaled by sqrt(d_model), plus a sinusoidal table
// indexed by sequence position.

// CHECK-LABEL: func.func @scaled_sinusoid
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK-DAG: %[[W:.+]] = tfc.weight "tok" : tensor<100x64xf32>
// CHECK-DAG: %[[PE:.+]] = tfc.sinusoid_table exp2i_cos_next {dim = 64 : i64, rows = 80 : i64} : tensor<80x64xf32>
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[PE]]) {scale = 8.000000e+00 : f64} : (tensor<?x?xi64>, tensor<100x64xf32>, tensor<80x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[E]]
// CHECK-NOT: tfc.embedding
// CHECK-NOT: tfc.mul
func.func @scaled_sinusoid(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %w = tfc.weight "tok" : tensor<100x64xf32>
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  %s = tfc.mul %e, %c : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %pe = tfc.sinusoid_table #tfc<pe exp2i_cos_next> {rows = 80 : i64, dim = 64 : i64} : tensor<80x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pe, %p : (tensor<80x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %s, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// Commuted: positions first, the scale constant on the left of the mul.

// CHECK-LABEL: func.func @scaled_commuted
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>, %[[P:[^:]+]]: tensor<32x64xf32>)
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[P]]) {scale = 5.000000e-01 : f64}
// CHECK-NEXT: return %[[E]]
func.func @scaled_commuted(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>, %pw: tensor<32x64xf32>) -> tensor<?x?x64xf32> {
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %c = tfc.constant dense<0.5> : tensor<f32>
  %s = tfc.mul %c, %e : (tensor<f32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %x = tfc.add %pv, %s : (tensor<1x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// GPT-2: learned positions, no scale. Nothing but the fused op is left.

// CHECK-LABEL: func.func @learned_positions
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK-DAG: %[[WTE:.+]] = tfc.weight "wte" : tensor<100x64xf32>
// CHECK-DAG: %[[WPE:.+]] = tfc.weight "wpe" : tensor<32x64xf32>
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[WTE]] positions(%[[WPE]]) : (tensor<?x?xi64>, tensor<100x64xf32>, tensor<32x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[E]]
// CHECK-NOT: tfc.embedding
func.func @learned_positions(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %wte = tfc.weight "wte" : tensor<100x64xf32>
  %e = tfc.embedding %wte, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %wpe = tfc.weight "wpe" : tensor<32x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %wpe, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %e, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// Tutorial 000 indexes its positional table by the batch index (positions along
// axis 0): position_axis = 0.

// CHECK-LABEL: func.func @batch_indexed_positions
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>)
// CHECK: %[[PE:.+]] = tfc.sinusoid_table standard
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[PE]]) {position_axis = 0 : i64, scale = 8.000000e+00 : f64}
// CHECK-NEXT: return %[[E]]
func.func @batch_indexed_positions(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  %s = tfc.mul %e, %c : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %pe = tfc.sinusoid_table #tfc<pe standard> {rows = 64 : i64, dim = 64 : i64} : tensor<64x64xf32>
  %p = tfc.positions %ids {axis = 0 : i64} : tensor<?x?xi64> -> tensor<?x1xi64>
  %pv = tfc.embedding %pe, %p : (tensor<64x64xf32>, tensor<?x1xi64>) -> tensor<?x1x64xf32>
  %x = tfc.add %s, %pv : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// BERT: (tokens + token types) + positions folds as a whole.

// CHECK-LABEL: func.func @bert_token_types
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[TT:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>, %[[T:[^:]+]]: tensor<2x64xf32>, %[[P:[^:]+]]: tensor<32x64xf32>)
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[P]]) types(%[[TT]], %[[T]]) : (tensor<?x?xi64>, tensor<100x64xf32>, tensor<32x64xf32>, tensor<?x?xi64>, tensor<2x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[E]]
// CHECK-NOT: tfc.embedding
// CHECK-NOT: tfc.add
func.func @bert_token_types(%ids: tensor<?x?xi64>, %tt: tensor<?x?xi64>, %w: tensor<100x64xf32>, %tw: tensor<2x64xf32>, %pw: tensor<32x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %te = tfc.embedding %tw, %tt : (tensor<2x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = tfc.add %e, %te : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %a, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// (tokens + positions) + token types.

// CHECK-LABEL: func.func @positions_then_types
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[TT:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>, %[[T:[^:]+]]: tensor<2x64xf32>, %[[P:[^:]+]]: tensor<32x64xf32>)
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[P]]) types(%[[TT]], %[[T]])
// CHECK-NEXT: return %[[E]]
func.func @positions_then_types(%ids: tensor<?x?xi64>, %tt: tensor<?x?xi64>, %w: tensor<100x64xf32>, %tw: tensor<2x64xf32>, %pw: tensor<32x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %a = tfc.add %e, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  %te = tfc.embedding %tw, %tt : (tensor<2x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %x = tfc.add %a, %te : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// Token types without positions.

// CHECK-LABEL: func.func @types_only
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[TT:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>, %[[T:[^:]+]]: tensor<2x64xf32>)
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] types(%[[TT]], %[[T]]) : (tensor<?x?xi64>, tensor<100x64xf32>, tensor<?x?xi64>, tensor<2x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[E]]
func.func @types_only(%ids: tensor<?x?xi64>, %tt: tensor<?x?xi64>, %w: tensor<100x64xf32>, %tw: tensor<2x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %te = tfc.embedding %tw, %tt : (tensor<2x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %x = tfc.add %e, %te : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// MUST NOT FOLD: the token embedding is also returned (e.g. tied to another
// use), so it must stay a separate lookup.

// CHECK-LABEL: func.func @embedding_used_twice
// CHECK-NOT: tfc.token_embedding
// CHECK: %[[E:.+]] = tfc.embedding
// CHECK: tfc.add
// CHECK-NOT: tfc.token_embedding
// CHECK: return %{{.+}}, %[[E]]
func.func @embedding_used_twice(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>, %pw: tensor<32x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %e, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x, %e : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// MUST NOT FOLD: the scaled lookup is also returned.

// CHECK-LABEL: func.func @scaled_embedding_used_twice
// CHECK-NOT: tfc.token_embedding
// CHECK: %[[S:.+]] = tfc.mul
// CHECK: tfc.add
// CHECK-NOT: tfc.token_embedding
// CHECK: return %{{.+}}, %[[S]]
func.func @scaled_embedding_used_twice(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>, %pw: tensor<32x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  %s = tfc.mul %e, %c : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %s, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x, %s : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// MUST NOT FOLD: the positional lookup is also returned.

// CHECK-LABEL: func.func @positions_used_twice
// CHECK-NOT: tfc.token_embedding
// CHECK: %[[PV:.+]] = tfc.embedding %{{.+}}, %{{.+}} : (tensor<32x64xf32>, tensor<1x?xi64>)
// CHECK: tfc.add
// CHECK-NOT: tfc.token_embedding
// CHECK: return %{{.+}}, %[[PV]]
func.func @positions_used_twice(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>, %pw: tensor<32x64xf32>) -> (tensor<?x?x64xf32>, tensor<1x?x64xf32>) {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %e, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x, %pv : tensor<?x?x64xf32>, tensor<1x?x64xf32>
}

// -----

// MUST NOT FOLD: the positions are those of another token tensor.

// CHECK-LABEL: func.func @positions_of_other_ids
// CHECK-NOT: tfc.token_embedding
// CHECK: tfc.add
// CHECK-NOT: tfc.token_embedding
// CHECK: return
func.func @positions_of_other_ids(%ids: tensor<?x?xi64>, %other: tensor<?x?xi64>, %w: tensor<100x64xf32>, %pw: tensor<32x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %p = tfc.positions %other {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %e, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// MUST NOT FOLD: the scale is a runtime value, not a constant.

// CHECK-LABEL: func.func @scale_not_constant
// CHECK-NOT: tfc.token_embedding
// CHECK: tfc.mul
// CHECK: tfc.add
// CHECK-NOT: tfc.token_embedding
// CHECK: return
func.func @scale_not_constant(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>, %pw: tensor<32x64xf32>, %c: tensor<f32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %s = tfc.mul %e, %c : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %s, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// MUST NOT FOLD: a token lookup plus an arbitrary tensor (a residual, not an
// embedding) is not an embedding sum.

// CHECK-LABEL: func.func @plus_non_embedding
// CHECK-NOT: tfc.token_embedding
// CHECK: tfc.add
// CHECK-NOT: tfc.token_embedding
// CHECK: return
func.func @plus_non_embedding(%ids: tensor<?x?xi64>, %w: tensor<100x64xf32>, %r: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %x = tfc.add %e, %r : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// A lone lookup in a weight table (LLaMA, T5: no positional table) becomes a
// token_embedding, its constant scale (Gemma's sqrt(hidden)) an attribute, so
// that --precision int8 / int4 store the table in int8.

// CHECK-LABEL: func.func @lone_lookup
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>)
// CHECK: %[[W:.+]] = tfc.weight "tok"
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] {scale = 8.000000e+00 : f64}
// CHECK-NEXT: return %[[E]]
// CHECK-NOT: tfc.embedding
func.func @lone_lookup(%ids: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %w = tfc.weight "tok" : tensor<100x64xf32>
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %c = tfc.constant dense<8.0> : tensor<f32>
  %s = tfc.mul %e, %c : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  return %s : tensor<?x?x64xf32>
}

// -----

// A lookup of positions is not a token lookup, and stays.

// CHECK-LABEL: func.func @lone_positions
// CHECK-NOT: tfc.token_embedding
// CHECK: tfc.embedding
func.func @lone_positions(%ids: tensor<?x?xi64>) -> tensor<1x?x64xf32> {
  %w = tfc.weight "pos" : tensor<32x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %e = tfc.embedding %w, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  return %e : tensor<1x?x64xf32>
}
