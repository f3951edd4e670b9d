// RUN: tfc-opt --split-input-file --tfc-fuse-layer-norm %s | FileCheck %s

// --tfc-fuse-layer-norm: the primitive sequences of nn.LayerNorm (variant
// layer_norm) and of the tutorials' unbiased-std Norm (variant std_norm), over the
// last axis, become one tfc.layer_norm. Commuted add/mul operands are accepted.
// Intermediates with other users, reductions over another axis and a std_norm
// with a divisor other than N - 1 must not fuse.

// The tutorials' Norm: alpha * (x - mean) / (std_unbiased + eps) + bias, with
// std_unbiased = sqrt(sum((x - mean)^2) / (N - 1)), exactly as the frontend emits
// it. The primitive ops are erased (the dead eps and N - 1 constants are left to
// canonicalize); eps is the f32 constant's value, widened to f64.

// CHECK-LABEL: func.func @std_norm
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y:.+]] = tfc.layer_norm std_norm %[[X]], %[[G]], %[[B]] {eps = 9.9999999747524271E-7 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @std_norm(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// std_norm with every commutative operand swapped: (x - mean) * gamma,
// eps + std, beta + scaled.

// CHECK-LABEL: func.func @std_norm_commuted
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y:.+]] = tfc.layer_norm std_norm %[[X]], %[[G]], %[[B]] {eps = 9.9999999747524271E-7 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @std_norm_commuted(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %eps, %sd : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %xc, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %b, %sc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// nn.LayerNorm in primitives (GPT-2, BERT): (x - mean) / sqrt(mean((x - mean)^2)
// + eps) * gamma + beta. eps = 2^-10 prints exactly.

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y:.+]] = tfc.layer_norm layer_norm %[[X]], %[[G]], %[[B]] {eps = 9.765625E-4 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve = tfc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %ve : tensor<?x?x1xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %nrm, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %m, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// layer_norm with every commutative operand swapped: gamma * normed, eps + var,
// beta + scaled.

// CHECK-LABEL: func.func @layer_norm_commuted
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y:.+]] = tfc.layer_norm layer_norm %[[X]], %[[G]], %[[B]] {eps = 9.765625E-4 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_commuted(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve = tfc.add %eps, %var : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %ve : tensor<?x?x1xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %g, %nrm : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %b, %m : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// A norm whose result has several users still fuses (only intermediates must be
// private); axis 2 is the last axis written positively.

// CHECK-LABEL: func.func @root_two_users
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y:.+]] = tfc.layer_norm layer_norm %[[X]], %[[G]], %[[B]]
// CHECK-NEXT: return %[[Y]], %[[Y]]
func.func @root_two_users(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %mean = tfc.reduce_mean %x {axis = 2 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = 2 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve = tfc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %ve : tensor<?x?x1xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %nrm, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %m, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %y : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Two norms in a row (the second reads the first) both fuse.

// CHECK-LABEL: func.func @two_norms
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x?x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y1:.+]] = tfc.layer_norm std_norm %[[X]], %[[G]], %[[B]]
// CHECK-NOT: tfc.{{(reduce_mean|reduce_sum|sub|mul|div|sqrt|add)}}
// CHECK: %[[Y2:.+]] = tfc.layer_norm layer_norm %[[Y1]], %[[G]], %[[B]]
// CHECK-NEXT: return %[[Y2]]
func.func @two_norms(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %mean2 = tfc.reduce_mean %y {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc2 = tfc.sub %y, %mean2 : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq2 = tfc.mul %xc2, %xc2 : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var2 = tfc.reduce_mean %sq2 {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps2 = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve2 = tfc.add %var2, %eps2 : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd2 = tfc.sqrt %ve2 : tensor<?x?x1xf32>
  %nrm2 = tfc.div %xc2, %sd2 : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m2 = tfc.mul %nrm2, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y2 = tfc.add %m2, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y2 : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the mean is taken over axis 1, not the last axis.

// CHECK-LABEL: func.func @std_norm_mean_not_last_axis
// CHECK-NOT: tfc.layer_norm
// CHECK: tfc.reduce_mean %{{.+}} {axis = 1 : i64}
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return
func.func @std_norm_mean_not_last_axis(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = 1 : i64} : tensor<?x?x64xf32> -> tensor<?x1x64xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the variance is reduced over axis 1, not the last axis.

// CHECK-LABEL: func.func @layer_norm_var_not_last_axis
// CHECK-NOT: tfc.layer_norm
// CHECK: tfc.reduce_mean %{{.+}} {axis = 1 : i64}
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return
func.func @layer_norm_var_not_last_axis(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = 1 : i64} : tensor<?x?x64xf32> -> tensor<?x1x64xf32>
  %eps = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve = tfc.add %var, %eps : (tensor<?x1x64xf32>, tensor<f32>) -> tensor<?x1x64xf32>
  %sd = tfc.sqrt %ve : tensor<?x1x64xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %nrm, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %m, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the mean is also returned.

// CHECK-LABEL: func.func @mean_other_user
// CHECK-NOT: tfc.layer_norm
// CHECK: %[[MEAN:.+]] = tfc.reduce_mean
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return %{{.+}}, %[[MEAN]]
func.func @mean_other_user(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x1xf32>) {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %mean : tensor<?x?x64xf32>, tensor<?x?x1xf32>
}

// -----

// MUST NOT FUSE: the centered x is also returned.

// CHECK-LABEL: func.func @centered_other_user
// CHECK-NOT: tfc.layer_norm
// CHECK: %[[XC:.+]] = tfc.sub
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return %{{.+}}, %[[XC]]
func.func @centered_other_user(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve = tfc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %ve : tensor<?x?x1xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %nrm, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %m, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %xc : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: the variance is also returned.

// CHECK-LABEL: func.func @variance_other_user
// CHECK-NOT: tfc.layer_norm
// CHECK: %[[VAR:.+]] = tfc.div %{{.+}}, %{{.+}} : (tensor<?x?x1xf32>
// CHECK: tfc.sqrt %[[VAR]]
// CHECK-NOT: tfc.layer_norm
// CHECK: return %{{.+}}, %[[VAR]]
func.func @variance_other_user(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x1xf32>) {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<63.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y, %var : tensor<?x?x64xf32>, tensor<?x?x1xf32>
}

// -----

// MUST NOT FUSE: std_norm divided by N = 64 instead of N - 1 = 63 is a biased
// std, which neither variant computes.

// CHECK-LABEL: func.func @std_norm_wrong_n_minus_1
// CHECK-NOT: tfc.layer_norm
// CHECK: tfc.constant dense<6.400000e+01>
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return
func.func @std_norm_wrong_n_minus_1(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %ss = tfc.reduce_sum %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %n = tfc.constant dense<64.0> : tensor<f32>
  %var = tfc.div %ss, %n : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %var : tensor<?x?x1xf32>
  %eps = tfc.constant dense<1.0e-06> : tensor<f32>
  %den = tfc.add %sd, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %num = tfc.mul %g, %xc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %sc = tfc.div %num, %den : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %sc, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// MUST NOT FUSE: gamma is a full tensor, not a [D] vector.

// CHECK-LABEL: func.func @gamma_not_a_vector
// CHECK-NOT: tfc.layer_norm
// CHECK: tfc.sqrt
// CHECK-NOT: tfc.layer_norm
// CHECK: return
func.func @gamma_not_a_vector(%x: tensor<?x?x64xf32>, %g: tensor<?x?x64xf32>, %b: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %mean = tfc.reduce_mean %x {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %xc = tfc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = tfc.mul %xc, %xc : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %var = tfc.reduce_mean %sq {axis = -1 : i64} : tensor<?x?x64xf32> -> tensor<?x?x1xf32>
  %eps = tfc.constant dense<9.765625e-04> : tensor<f32>
  %ve = tfc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %sd = tfc.sqrt %ve : tensor<?x?x1xf32>
  %nrm = tfc.div %xc, %sd : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %m = tfc.mul %nrm, %g : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %y = tfc.add %m, %b : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}
