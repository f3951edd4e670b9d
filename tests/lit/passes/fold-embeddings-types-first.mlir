// Regression: --tfc-fold-embeddings misses the fold when the token-type lookup
// is the first term of the add chain. The matcher takes the first embedding of
// the flattened chain as the token lookup, so it picks the token-type lookup,
// the positions (of the real token ids) then do not match, and the outer add is
// left alone; only the inner add folds. Semantics are kept, the fusion is lost.
// Expected: one tfc.token_embedding with positions and types, whatever the
// order of the terms.
// RUN: tfc-opt --split-input-file --tfc-fold-embeddings %s | FileCheck %s

// CHECK-LABEL: func.func @types_left_of_tokens_and_positions
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[TT:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>, %[[T:[^:]+]]: tensor<2x64xf32>, %[[P:[^:]+]]: tensor<32x64xf32>)
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[P]]) types(%[[TT]], %[[T]])
// CHECK-NEXT: return %[[E]]
func.func @types_left_of_tokens_and_positions(%ids: tensor<?x?xi64>, %tt: tensor<?x?xi64>, %w: tensor<100x64xf32>, %tw: tensor<2x64xf32>, %pw: tensor<32x64xf32>) -> tensor<?x?x64xf32> {
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %a = tfc.add %e, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  %te = tfc.embedding %tw, %tt : (tensor<2x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %x = tfc.add %te, %a : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}

// -----

// (types + tokens) + positions.

// CHECK-LABEL: func.func @types_first_then_positions
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<?x?xi64>, %[[TT:[^:]+]]: tensor<?x?xi64>, %[[W:[^:]+]]: tensor<100x64xf32>, %[[T:[^:]+]]: tensor<2x64xf32>, %[[P:[^:]+]]: tensor<32x64xf32>)
// CHECK: %[[E:.+]] = tfc.token_embedding %[[IDS]], %[[W]] positions(%[[P]]) types(%[[TT]], %[[T]])
// CHECK-NEXT: return %[[E]]
func.func @types_first_then_positions(%ids: tensor<?x?xi64>, %tt: tensor<?x?xi64>, %w: tensor<100x64xf32>, %tw: tensor<2x64xf32>, %pw: tensor<32x64xf32>) -> tensor<?x?x64xf32> {
  %te = tfc.embedding %tw, %tt : (tensor<2x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %e = tfc.embedding %w, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = tfc.add %te, %e : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
  %pv = tfc.embedding %pw, %p : (tensor<32x64xf32>, tensor<1x?xi64>) -> tensor<1x?x64xf32>
  %x = tfc.add %a, %pv : (tensor<?x?x64xf32>, tensor<1x?x64xf32>) -> tensor<?x?x64xf32>
  return %x : tensor<?x?x64xf32>
}
