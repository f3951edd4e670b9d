// Regression: tfc-opt crashes (segfault) parsing a tfc.cast of an unranked
// tensor. The custom parser infers the result type before the operand type is
// verified, and CastOp::inferReturnTypes calls getShape() on the null
// RankedTensorType of a tensor<*xf32>. Expected: an error, no crash.
// RUN: tfc-opt %s --verify-diagnostics

func.func @cast_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{ranked}}
  %0 = tfc.cast %x : tensor<*xf32> -> i64
  return
}
