//===- TfcOps.td - the tfc dialect: a Transformer graph IR -----*- tablegen -*-===//
//
// The `tfc` dialect is the graph IR between the YAML frontend and the execution plan.
// The frontend emits only primitive tensor ops (matmul, softmax, masked_fill, ...);
// fused ops such as `tfc.attention` and `tfc.layer_norm` are produced by the passes.
//
// Shapes: batch and sequence lengths are symbolic (`?`); their names and declared
// maximums live on the function (`tfc.dims` on arguments, `tfc.dim_max` on the
// function). Every op infers its result type from its operands and attributes
// (InferTypeOpInterface), and the verifier checks the written type against it.
//
//===----------------------------------------------------------------------------===//

#ifndef TFC_OPS_TD
#define TFC_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "ir/TfcInterfaces.td"

//===----------------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------------===//

def Tfc_Dialect : Dialect {
  let name = "tfc";
  let summary = "Transformer graph IR for the tfc compiler";
  let description = [{
    Tensor-level ops for Transformer inference. Ops carry the YAML location of the
    model-description node that produced them, so diagnostics point at the user's line.
  }];
  let cppNamespace = "::mlir::tfc";
  let useDefaultAttributePrinterParser = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
}

class Tfc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tfc_Dialect, mnemonic, !listconcat(traits,
        [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>])>;

// An op that runs as the plan kernel TFC_KERNEL_<kernel> (a row of
// include/tfc/kernels.def) and whose kernel reads no attributes.
class Tfc_KernelOp<string mnemonic, string kernel, list<Trait> traits = []>
    : Tfc_Op<mnemonic, !listconcat(traits,
        [Tfc_KernelId<kernel>, Tfc_KernelOpInterface])>;

// The same for a kernel that reads attributes: the op implements
// appendKernelAttributes (ir/TfcKernels.cpp).
class Tfc_KernelAttrOp<string mnemonic, string kernel, list<Trait> traits = []>
    : Tfc_Op<mnemonic, !listconcat(traits,
        [Tfc_KernelId<kernel>,
         DeclareOpInterfaceMethods<Tfc_KernelOpInterface, ["appendKernelAttributes"]>])>;

//===----------------------------------------------------------------------------===//
// Enums. Append-only: their integer values may be serialized.
//===----------------------------------------------------------------------------===//

def Tfc_MaskKind : I32EnumAttr<"MaskKind", "attention mask meaning", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"key_padding", 1>,
    I32EnumAttrCase<"causal", 2>,
    I32EnumAttrCase<"padding_causal", 3>,
    I32EnumAttrCase<"additive", 4>]> {
  let cppNamespace = "::mlir::tfc";
  let genSpecializedAttr = 0;
}
def Tfc_MaskKindAttr : EnumAttr<Tfc_Dialect, Tfc_MaskKind, "mask">;

def Tfc_NormVariant : I32EnumAttr<"NormVariant", "normalization variant", [
    // gamma * (x - mean) / sqrt(var_biased + eps) + beta  (nn.LayerNorm)
    I32EnumAttrCase<"layer_norm", 0>,
    // gamma * (x - mean) / (std_unbiased + eps) + beta    (the tutorials' Norm)
    I32EnumAttrCase<"std_norm", 1>,
    // gamma * x / sqrt(mean(x^2) + eps), no centering, no shift (T5's RMSNorm)
    I32EnumAttrCase<"rms_norm", 2>]> {
  let cppNamespace = "::mlir::tfc";
  let genSpecializedAttr = 0;
}
def Tfc_NormVariantAttr : EnumAttr<Tfc_Dialect, Tfc_NormVariant, "norm">;

def Tfc_PEVariant : I32EnumAttr<"PEVariant", "sinusoidal table variant", [
    // sin/cos(pos * exp(-ln(10000) * 2k / d)) computed in f32, column pairs (2k, 2k+1)
    I32EnumAttrCase<"standard", 0>,
    // sin/cos(pos / 10000^(2i/d)) with i the even column index, same exponent (seed 001)
    I32EnumAttrCase<"exp2i", 1>,
    // sin(pos / 10000^(2i/d)), cos(pos / 10000^(2(i+1)/d)) (seed 003)
    I32EnumAttrCase<"exp2i_cos_next", 2>,
    // Marian's (and fairseq's) layout: column k < d/2 is sin(pos / 10000^(2k/d)),
    // column d/2 + k the cos of the same angle; numpy double, stored as f32
    I32EnumAttrCase<"split", 3>]> {
  let cppNamespace = "::mlir::tfc";
  let genSpecializedAttr = 0;
}
def Tfc_PEVariantAttr : EnumAttr<Tfc_Dialect, Tfc_PEVariant, "pe">;

def Tfc_CmpPredicate : I32EnumAttr<"CmpPredicate", "comparison predicate", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>, I32EnumAttrCase<"lt", 2>,
    I32EnumAttrCase<"le", 3>, I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::tfc";
  let genSpecializedAttr = 0;
}
def Tfc_CmpPredicateAttr : EnumAttr<Tfc_Dialect, Tfc_CmpPredicate, "cmp">;

def Tfc_GeluApprox : I32EnumAttr<"GeluApprox", "GELU approximation", [
    I32EnumAttrCase<"none", 0>,   // 0.5 x (1 + erf(x / sqrt 2))
    I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::tfc";
  let genSpecializedAttr = 0;
}
def Tfc_GeluApproxAttr : EnumAttr<Tfc_Dialect, Tfc_GeluApprox, "gelu">;

def Tfc_Activation : I32EnumAttr<"Activation", "activation fused into a linear", [
    I32EnumAttrCase<"none", 0>,
    I32EnumAttrCase<"relu", 1>,
    I32EnumAttrCase<"gelu", 2>,
    I32EnumAttrCase<"gelu_tanh", 3>,
    I32EnumAttrCase<"silu", 4>]> {
  let cppNamespace = "::mlir::tfc";
  let genSpecializedAttr = 0;
}
def Tfc_ActivationAttr : EnumAttr<Tfc_Dialect, Tfc_Activation, "act">;

def Tfc_Float : AnyTypeOf<[F32, F16, BF16]>;
def Tfc_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Tfc_IdTensor : RankedTensorOf<[I64, I32]>;
def Tfc_BoolTensor : RankedTensorOf<[I1]>;
def Tfc_AnyTensor : RankedTensorOf<[F32, F16, BF16, I64, I32, I1]>;

//===----------------------------------------------------------------------------===//
// Sources: weights, constants, generated tables
//===----------------------------------------------------------------------------===//

def Tfc_WeightOp : Tfc_Op<"weight"> {
  let summary = "a named weight tensor from the checkpoint";
  let description = [{
    References the tensor `name` of the model's weight store. The data lives
    outside the IR (in the safetensors file, or generated from the seed), so the
    printed IR stays small.

    ```mlir
    %w = tfc.weight "encoder.layers.0.attn.q_linear.weight" : tensor<512x512xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, TypeAttr:$type);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` $type";
  let hasVerifier = 1;
}

def Tfc_ConstantOp : Tfc_Op<"constant", [ConstantLike]> {
  let summary = "a small constant tensor";
  let description = [{
    ```mlir
    %c = tfc.constant dense<8.0> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Tfc_SinusoidTableOp : Tfc_Op<"sinusoid_table"> {
  let summary = "a sinusoidal positional-encoding table, computed at compile time";
  let description = [{
    Produces a `[rows, dim]` f32 table. `variant` selects the formula: the
    standard log-space one, or the exponents used by tutorials 001 and 003.

    ```mlir
    %pe = tfc.sinusoid_table #tfc<pe exp2i_cos_next> {rows = 80, dim = 512} : tensor<80x512xf32>
    ```
  }];
  let arguments = (ins Tfc_PEVariantAttr:$variant, I64Attr:$rows, I64Attr:$dim);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$variant attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfc_PositionsOp : Tfc_KernelAttrOp<"positions", "POSITIONS"> {
  let summary = "0, 1, 2, ... along one axis of a token tensor";
  let description = [{
    For `ids` of shape [d0, ..., dn], returns an i64 tensor of the same rank whose
    dims are all 1 except `axis`, holding arange(d_axis). Positions for a learned or
    sinusoidal table are `positions(ids) {axis = 1}`.

    With `padding_idx` (ids [B, S], axis 1) the result is [B, S], RoBERTa's
    position ids (transformers' create_position_ids_from_input_ids): the real
    tokens (ids != padding_idx) are numbered padding_idx + 1, padding_idx + 2, ...
    in order, and padding gets padding_idx.

    ```mlir
    %p = tfc.positions %ids {axis = 1 : i64} : tensor<?x?xi64> -> tensor<1x?xi64>
    %q = tfc.positions %ids {axis = 1 : i64, padding_idx = 1 : i64} : tensor<?x?xi64> -> tensor<?x?xi64>
    ```
  }];
  let arguments = (ins Tfc_AnyTensor:$input, I64Attr:$axis, OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Tfc_IdTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Tfc_RelativePositionBiasOp
    : Tfc_KernelAttrOp<"relative_position_bias", "RELATIVE_POSITION_BIAS"> {
  let summary = "T5's bucketed relative position bias, [1, H, Sq, Sk]";
  let description = [{
    `table` is [num_buckets, H] (transformers' relative_attention_bias.weight);
    `query` [B, Sq] and `key` [B, Sk] give only the lengths. Element (0, h, i, j)
    is table[bucket(j - i), h], with transformers' _relative_position_bucket:
    with `bidirectional`, half the buckets are for keys after the query; the
    first half of the (remaining) buckets are exact distances, the rest grow
    logarithmically up to `max_distance`. The encoder's is bidirectional, the
    decoder's not. `tfc-fuse-attention` folds it into `tfc.attention`'s
    `position_bias` operand (the table), so fused code never builds it.

    ```mlir
    %b = tfc.relative_position_bias %tab, %src, %src {bidirectional = true, max_distance = 128 : i64} : (tensor<32x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> tensor<1x8x?x?xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$table, Tfc_AnyTensor:$query, Tfc_AnyTensor:$key,
                       BoolAttr:$bidirectional, I64Attr:$max_distance);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $query `,` $key attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfc_NopeakMaskOp : Tfc_KernelOp<"nopeak_mask", "NOPEAK_MASK"> {
  let summary = "the no-peek (causal) mask of a sequence: allowed[i][j] = j <= i";
  let description = [{
    For `ids` of shape [B, S], returns `tensor<1xSxSxi1>`, true where query i may
    attend key j. It is `triu(ones(1, S, S), k=1) == 0` from the tutorials.

    ```mlir
    %m = tfc.nopeak_mask %tgt : tensor<?x?xi64> -> tensor<1x?x?xi1>
    ```
  }];
  let arguments = (ins Tfc_AnyTensor:$input);
  let results = (outs Tfc_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------------===//
// Primitive tensor ops
//===----------------------------------------------------------------------------===//

def Tfc_EmbeddingOp : Tfc_KernelOp<"embedding", "EMBEDDING"> {
  let summary = "gather rows of a table by integer ids";
  let description = [{
    `table` is [V, D]; the result has shape ids.shape + [D].

    ```mlir
    %x = tfc.embedding %table, %ids : (tensor<100x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$table, Tfc_IdTensor:$ids);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
}

def Tfc_LinearOp : Tfc_KernelAttrOp<"linear", "LINEAR"> {
  let summary = "y = x W^T + b, as torch.nn.Linear";
  let description = [{
    `weight` is [N, K] (out, in), `bias` (optional) is [N]; `x` is [..., K].

    ```mlir
    %y = tfc.linear %x, %w, %b : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$input, Tfc_FloatTensor:$weight,
                       Optional<Tfc_FloatTensor>:$bias);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tfc_MatmulOp : Tfc_KernelAttrOp<"matmul", "MATMUL"> {
  let summary = "batched matrix product with broadcast batch dims";
  let description = [{
    [..., M, K] x [..., K, N] -> [..., M, N]; with `transpose_b` the right operand is
    [..., N, K]. Batch dims broadcast as in torch.matmul.

    ```mlir
    %s = tfc.matmul %q, %k {transpose_b = true} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$lhs, Tfc_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

class Tfc_BinaryOp<string mnemonic, string what, string kernel>
    : Tfc_KernelOp<mnemonic, kernel> {
  let summary = "elementwise " # what # " with numpy broadcasting";
  let arguments = (ins Tfc_AnyTensor:$lhs, Tfc_AnyTensor:$rhs);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}
def Tfc_AddOp : Tfc_BinaryOp<"add", "addition", "ADD">;
def Tfc_SubOp : Tfc_BinaryOp<"sub", "subtraction", "SUB">;
def Tfc_MulOp : Tfc_BinaryOp<"mul", "multiplication", "MUL">;
def Tfc_DivOp : Tfc_BinaryOp<"div", "division", "DIV">;
def Tfc_AndOp : Tfc_BinaryOp<"and", "logical and (i1)", "AND">;

def Tfc_CompareOp : Tfc_KernelAttrOp<"compare", "COMPARE"> {
  let summary = "elementwise comparison producing i1, with broadcasting";
  let description = [{
    ```mlir
    %keep = tfc.compare #tfc<cmp ne> %ids, %pad : (tensor<?x?xi64>, tensor<i64>) -> tensor<?x?xi1>
    ```
  }];
  let arguments = (ins Tfc_CmpPredicateAttr:$predicate, Tfc_AnyTensor:$lhs,
                       Tfc_AnyTensor:$rhs);
  let results = (outs Tfc_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Tfc_NotOp : Tfc_KernelOp<"not", "NOT"> {
  let summary = "logical not of an i1 tensor";
  let arguments = (ins Tfc_BoolTensor:$input);
  let results = (outs Tfc_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Tfc_CastOp : Tfc_KernelOp<"cast", "CAST"> {
  let summary = "elementwise conversion to another element type";
  let description = [{
    The result element type is given by the written result type; true becomes 1.

    ```mlir
    %f = tfc.cast %keep : tensor<?x?xi1> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins Tfc_AnyTensor:$input, TypeAttr:$element_type);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` $element_type";
}

def Tfc_MaskedFillOp : Tfc_KernelAttrOp<"masked_fill", "MASKED_FILL"> {
  let summary = "x where mask is false, `value` where it is true (torch masked_fill)";
  let description = [{
    `mask` broadcasts against `x`. `value` may be -inf.

    ```mlir
    %y = tfc.masked_fill %s, %m {value = -1.0e9 : f64} : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xi1>) -> tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$input, Tfc_BoolTensor:$mask, F64Attr:$value);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$input `,` $mask attr-dict `:` functional-type(operands, results)";
}

def Tfc_SelectOp : Tfc_KernelOp<"select", "SELECT"> {
  let summary = "cond ? a : b, elementwise with broadcasting";
  let arguments = (ins Tfc_BoolTensor:$cond, Tfc_AnyTensor:$on_true,
                       Tfc_AnyTensor:$on_false);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = [{
    $cond `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)
  }];
}

def Tfc_ReshapeOp : Tfc_KernelOp<"reshape", "RESHAPE"> {
  let summary = "reshape; 0 copies the input dim at that index, -1 is inferred";
  let description = [{
    ```mlir
    %h = tfc.reshape %x {shape = array<i64: 0, 0, 4, 16>} : tensor<?x?x64xf32> -> tensor<?x?x4x16xf32>
    ```
  }];
  let arguments = (ins Tfc_AnyTensor:$input, DenseI64ArrayAttr:$shape);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Tfc_TransposeOp : Tfc_KernelAttrOp<"transpose", "TRANSPOSE"> {
  let summary = "permute dims: result dim i is input dim perm[i]";
  let arguments = (ins Tfc_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Tfc_UnsqueezeOp : Tfc_KernelOp<"unsqueeze", "UNSQUEEZE"> {
  let summary = "insert a dim of size 1 at `axis` (torch.unsqueeze)";
  let arguments = (ins Tfc_AnyTensor:$input, I64Attr:$axis);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Tfc_SliceOp : Tfc_KernelAttrOp<"slice", "SLICE"> {
  let summary = "static slice [start, start + size) along one axis; a negative start counts from the end";
  let arguments = (ins Tfc_AnyTensor:$input, I64Attr:$axis, I64Attr:$start, I64Attr:$size);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Tfc_ConcatOp : Tfc_Op<"concat"> {
  let summary = "concatenate tensors along one axis";
  let description = [{
    Used for packed projection weights: concat(Wq, Wk, Wv) along axis 0. A concat of
    consecutive slices of one tensor folds back to that tensor.

    ```mlir
    %w = tfc.concat %wq, %wk, %wv {axis = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<192x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Tfc_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Tfc_AnyTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

class Tfc_ReduceOp<string mnemonic, string what, string kernel>
    : Tfc_KernelAttrOp<mnemonic, kernel> {
  let summary = what # " over one axis";
  let arguments = (ins Tfc_FloatTensor:$input, I64Attr:$axis,
                       DefaultValuedAttr<BoolAttr, "true">:$keepdim);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}
def Tfc_ReduceMeanOp : Tfc_ReduceOp<"reduce_mean", "mean", "REDUCE_MEAN">;
def Tfc_ReduceSumOp : Tfc_ReduceOp<"reduce_sum", "sum", "REDUCE_SUM">;

// Elementwise (MLIR's trait): passes that ask whether an op mixes positions
// (tfc-derive-generation) know every unary op from it, without a list to extend.
class Tfc_UnaryOp<string mnemonic, string what, string kernel,
                  list<Trait> traits = []>
    : Tfc_KernelOp<mnemonic, kernel, !listconcat(traits, [Elementwise])> {
  let summary = "elementwise " # what;
  let arguments = (ins Tfc_FloatTensor:$input);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  // The result has the input's type: the shape rule of every unary op, here so
  // that a new one is its def line alone (ir/TfcOps.cpp's inferSameType).
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr, ::mlir::RegionRange,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return inferSameType(loc, operands, types);
    }
  }];
}
def Tfc_SqrtOp : Tfc_UnaryOp<"sqrt", "square root", "SQRT">;
def Tfc_ReluOp : Tfc_UnaryOp<"relu", "max(x, 0)", "RELU">;
def Tfc_SiluOp : Tfc_UnaryOp<"silu", "x * sigmoid(x) (SiLU, swish)", "SILU">;
def Tfc_TanhOp : Tfc_UnaryOp<"tanh", "hyperbolic tangent", "TANH">;

def Tfc_GeluOp : Tfc_KernelAttrOp<"gelu", "GELU"> {
  let summary = "elementwise GELU, exact (erf) or tanh-approximated";
  let arguments = (ins Tfc_FloatTensor:$input,
                       DefaultValuedAttr<Tfc_GeluApproxAttr, "GeluApprox::none">:$approximate);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Tfc_SoftmaxOp : Tfc_KernelAttrOp<"softmax", "SOFTMAX"> {
  let summary = "softmax over one axis";
  let arguments = (ins Tfc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Tfc_LogSoftmaxOp : Tfc_KernelAttrOp<"log_softmax", "LOG_SOFTMAX"> {
  let summary = "log-softmax over one axis";
  let arguments = (ins Tfc_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------------===//
// Fused ops (produced by the passes; also accepted from the frontend's `ops:`)
//===----------------------------------------------------------------------------===//

def Tfc_LayerNormOp : Tfc_KernelAttrOp<"layer_norm", "LAYER_NORM"> {
  let summary = "normalization over the last axis, in one of three variants";
  let description = [{
    `layer_norm`: gamma * (x - mean) / sqrt(var + eps) + beta, biased variance.
    `std_norm`:   gamma * (x - mean) / (std + eps) + beta, unbiased std (the
    tutorials' Norm class).
    `rms_norm`:   gamma * x / sqrt(mean(x^2) + eps), T5's RMSNorm: no centering
    and no `beta` operand.

    ```mlir
    %y = tfc.layer_norm #tfc<norm std_norm> %x, %g, %b {eps = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Tfc_NormVariantAttr:$variant, Tfc_FloatTensor:$input,
                       Tfc_FloatTensor:$gamma, Optional<Tfc_FloatTensor>:$beta, F64Attr:$eps);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $variant $input `,` $gamma (`,` $beta^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfc_FusedLinearOp : Tfc_KernelAttrOp<"fused_linear", "FUSED_LINEAR", [AttrSizedOperandSegments]> {
  let summary = "y = act(x W^T + b) * multiplier + residual, one GEMM with its epilogue";
  let description = [{
    The projection fusion's result: a linear layer with its bias, activation, a
    product with another tensor of its shape (a gated FFN's SwiGLU or GeGLU:
    act(x W_gate^T) * (x W_up^T)) and a residual add folded into the GEMM
    epilogue. `bias`, `multiplier` and `residual` are optional.

    ```mlir
    %y = tfc.fused_linear %x, %w bias(%b) {activation = #tfc<act relu>} : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>) -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$input, Tfc_FloatTensor:$weight,
                       Optional<Tfc_FloatTensor>:$bias,
                       Optional<Tfc_FloatTensor>:$residual,
                       Optional<Tfc_FloatTensor>:$multiplier,
                       DefaultValuedAttr<Tfc_ActivationAttr, "Activation::none">:$activation);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` `(` $bias^ `)`)? (`residual` `(` $residual^ `)`)? (`multiplier` `(` $multiplier^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tfc_TokenEmbeddingOp : Tfc_KernelAttrOp<"token_embedding", "TOKEN_EMBEDDING", [AttrSizedOperandSegments]> {
  let summary = "table[ids] * scale + positions[pos(ids)] (+ types[type_ids])";
  let description = [{
    The embedding fusion's result: the token lookup, its scale and the positional
    table in one kernel. Positions index `position_axis` of `ids` (1 = sequence
    position; 0 reproduces tutorial 000's batch-indexed table). `offset`, a
    rank-0 i64 tensor, shifts the positions: row t reads positions[offset + t]
    (decode_step, where the new tokens start at the cache position).

    ```mlir
    %x = tfc.token_embedding %ids, %table positions(%pe) {scale = 8.0 : f64, position_axis = 1 : i64} : (tensor<?x?xi64>, tensor<100x64xf32>, tensor<80x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Tfc_IdTensor:$ids, Tfc_FloatTensor:$table,
                       Optional<Tfc_FloatTensor>:$positions,
                       Optional<Tfc_IdTensor>:$type_ids,
                       Optional<Tfc_FloatTensor>:$type_table,
                       Optional<Tfc_IdTensor>:$position_offset,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<I64Attr, "1">:$position_axis);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table (`positions` `(` $positions^ `)`)? (`types` `(` $type_ids^ `,` $type_table `)`)? (`offset` `(` $position_offset^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tfc_AttentionOp : Tfc_KernelAttrOp<"attention", "ATTENTION", [AttrSizedOperandSegments]> {
  let summary = "multi-head scaled dot-product attention with a typed mask";
  let description = [{
    `query` is [B, Sq, D], `key` and `value` are [B, Sk, D]; D splits into
    `num_heads` heads. Computes, per head,
    softmax(scale * Q K^T, masked) V and merges the heads back to [B, Sq, D].
    With `num_kv_heads` (grouped-query attention; 0 means num_heads), key and
    value hold that many heads of the same head width, and query head h reads
    key/value head h / (num_heads / num_kv_heads). A `window` W > 0 (a causal
    mask only) is a sliding window: query i sees keys i - W < j <= i, as
    Mistral's and Gemma's local layers (transformers' sliding_window). A
    `softcap` c > 0 soft-caps the scaled scores, c * tanh(s / c), before the
    mask and bias (Gemma 2's attn_logit_softcapping); 0 is none.

    The mask is typed, so a backend never needs a materialized [B, Sq, Sk] mask:
    - `none`: no operand;
    - `key_padding`: `mask` is the key-side token ids [B, Sk]; keys equal to
      `pad_id` are masked;
    - `causal`: no operand; key j > query i is masked;
    - `padding_causal`: both of the above;
    - `additive`: `mask` is a float tensor broadcastable to [B, H, Sq, Sk], added
      to the scaled scores.
    Masked scores are set to `mask_value` (for example -1e9 or -inf) before the softmax.

    The optional `position_bias` is T5's bucketed relative position bias in its
    compact form, the [num_buckets, H] table: the score of query i (at position
    i) and key j gets table[bucket(j - i), h] added before the mask, with
    bucket() as `tfc.relative_position_bias` computes it from
    `bias_bidirectional` and `bias_max_distance`. No [B, H, Sq, Sk] or
    [H, Sq, Sk] tensor exists.

    With a `block_table` ([B, nb] i64), `key` and `value` are [N, L, D] blocks
    that rows share: row b's key j is block `block_table[b][j / L]`, at
    `j % L`, and each row has as many keys as a `key_padding` mask's [B, Sk]
    (Sk <= nb * L), else nb * L. `tfc-derive-generation` gives decode_step's
    cross-attentions one: the encoder memory is held once per batch item, in
    blocks, and the beams of an item (and the rows of the engine's requests)
    read their item's blocks. No causal mask, position bias or additive mask
    goes with it.

    ```mlir
    %o = tfc.attention #tfc<mask key_padding> %q, %k, %v, %src {num_heads = 8 : i64, scale = 0.125 : f64, mask_value = -1.0e9 : f64, pad_id = 0 : i64} : (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?xi64>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins Tfc_MaskKindAttr:$mask_kind, Tfc_FloatTensor:$query,
                       Tfc_FloatTensor:$key, Tfc_FloatTensor:$value,
                       Optional<Tfc_AnyTensor>:$mask,
                       Optional<Tfc_FloatTensor>:$position_bias,
                       Optional<Tfc_IdTensor>:$block_table,
                       I64Attr:$num_heads, F64Attr:$scale,
                       DefaultValuedAttr<F64Attr, "-1.0e9">:$mask_value,
                       DefaultValuedAttr<I64Attr, "0">:$pad_id,
                       DefaultValuedAttr<BoolAttr, "false">:$bias_bidirectional,
                       DefaultValuedAttr<I64Attr, "128">:$bias_max_distance,
                       DefaultValuedAttr<I64Attr, "0">:$num_kv_heads,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $mask_kind $query `,` $key `,` $value (`,` $mask^)? (`bias` `(` $position_bias^ `)`)? (`blocks` `(` $block_table^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfc_RotaryOp : Tfc_KernelAttrOp<"rotary", "ROTARY"> {
  let summary = "rotary position embedding (RoPE) of each head of [B, S, H * head_dim]";
  let description = [{
    Rotates each head of `input` ([B, S, H * head_dim]) by its position:
    the token at sequence index s of row b is at position s, plus `offset`
    (i64: rank 0 for all rows, or [B]; decode_step's step.pos) when given.
    `inv_freq` ([R / 2] f32, R <= head_dim even) holds the rotation's inverse
    frequencies, so rope scaling (linear, llama3) is folded in when it is made;
    for pair i the angle is position * inv_freq[i]. The first R features of a
    head rotate, the rest pass through. Pairs are (i, i + R/2) (transformers'
    rotate_half, Llama's layout), or (2i, 2i + 1) with `interleaved` (GPT-J):
      y_a = x_a cos - x_b sin,   y_b = x_b cos + x_a sin.

    ```mlir
    %y = tfc.rotary %q, %inv_freq {head_dim = 64 : i64} : (tensor<?x?x512xf32>, tensor<32xf32>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$input, Tfc_FloatTensor:$inv_freq,
                       Optional<Tfc_IdTensor>:$offset,
                       I64Attr:$head_dim,
                       DefaultValuedAttr<BoolAttr, "false">:$interleaved);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $inv_freq (`offset` `(` $offset^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfc_CachedAttentionOp : Op<Tfc_Dialect, "cached_attention",
    [DeclareOpInterfaceMethods<InferTypeOpInterface>, MemoryEffects<[MemRead, MemWrite]>,
     AttrSizedOperandSegments,
     Tfc_KernelId<"CACHED_ATTENTION">,
     DeclareOpInterfaceMethods<Tfc_KernelOpInterface, ["appendKernelAttributes"]>]> {
  let summary = "causal self-attention of new tokens over a KV cache (decode_step)";
  let description = [{
    The incremental form of a causal `tfc.attention`, made by
    `tfc-derive-generation` for `decode_step`. `query`, `key` and `value` are
    the new tokens' [B, T, D] projections; row b's are at positions
    `pos[b] .. pos[b]+T-1` (`pos` is i64, rank 0 for one position for all rows,
    or [B] for one per row). `k_cache` and `v_cache` are [N, L, D] state buffers
    that persist across calls (function arguments marked `tfc.state`). Without
    a `block_table`, row b's positions are cache row b's; with one ([B, nb] i64,
    the cache's rows are blocks of L positions), row b's position p is in cache
    row `block_table[b][p / L]` at `p % L`. The op writes `key` and `value` at
    the new positions *in place* (hence its memory effects), then attends from
    each new query i over positions `0 .. pos[b]+i` (the causal rule). It never
    masks padding: a generated prefix has none. An optional `position_bias`
    table is applied as in `tfc.attention`, with query i at position pos + i;
    `num_kv_heads` is grouped-query attention as there (the caches hold the
    key/value heads only), `window` the sliding window and `softcap` the
    scores' soft-cap. With `inv_freq` ([rotary_dim / 2] f32, from a
    `tfc.rotary` that `tfc-fuse-rotary` folded in), the new queries and keys
    are first rotated as `tfc.rotary` does with the offset `pos`, pairs
    interleaved when `rotary_interleaved`: the keys as they are written to the
    cache, so no separate pass over them runs.

    ```mlir
    %o = tfc.cached_attention %q, %k, %v, %kc, %vc, %pos {num_heads = 8 : i64, scale = 0.125 : f64} : (tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x?x512xf32>, tensor<?x64x512xf32>, tensor<?x64x512xf32>, tensor<i64>) -> tensor<?x?x512xf32>
    ```
  }];
  let arguments = (ins Tfc_FloatTensor:$query, Tfc_FloatTensor:$key, Tfc_FloatTensor:$value,
                       Tfc_FloatTensor:$k_cache, Tfc_FloatTensor:$v_cache,
                       Tfc_IdTensor:$pos, Optional<Tfc_FloatTensor>:$position_bias,
                       Optional<Tfc_IdTensor>:$block_table,
                       Optional<Tfc_FloatTensor>:$inv_freq,
                       I64Attr:$num_heads, F64Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$bias_bidirectional,
                       DefaultValuedAttr<I64Attr, "128">:$bias_max_distance,
                       DefaultValuedAttr<I64Attr, "0">:$num_kv_heads,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<BoolAttr, "false">:$rotary_interleaved);
  let results = (outs Tfc_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $k_cache `,` $v_cache `,` $pos (`bias` `(` $position_bias^ `)`)? (`blocks` `(` $block_table^ `)`)? (`rotary` `(` $inv_freq^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // TFC_OPS_TD
