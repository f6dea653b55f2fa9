//===- TessOps.td - operations of the tess dialect ---------*- tablegen -*-===//
//
// Verifier rules are numbered per op (C1, C2, ...) in the description; the
// verifier's messages and test/Dialect/Tess/invalid.mlir use the same numbers
// so that spec, code and test point at each other.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_OPS_TD
#define TESS_OPS_TD

include "Tess/IR/TessBase.td"
include "Tess/IR/TessInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Values: constants and parameters
//===----------------------------------------------------------------------===//

def Tess_ConstantOp : Tess_Op<"constant",
    [ConstantLike, Pure, Tess_VerifiesBeforeInference, InferTypeOpAdaptor]> {
  let summary = "a tensor known at compile time";
  let description = [{
    A constant tensor. The importer leaves these only where a value is truly
    data (a folded attention mask, a scale); shape arithmetic never survives
    as constants. Rule: (C1) `value` is a ranked tensor (a
    `DenseElementsAttr`, a `dense_resource`, ...), and its type is the
    result's.

    ```mlir
    %half = tess.constant dense<5.000000e-01> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// C1, checked before the result type is compared with inference.
    ::mlir::LogicalResult verifyBeforeInference();
  }];
}

def Tess_ParameterOp : Tess_Op<"parameter", [Pure]> {
  let summary = "a named weight of the model";
  let description = [{
    A model weight, named as the ONNX initializer that holds it (PyTorch's
    parameter name), with the place its bytes live. `trainable` marks the
    tensors the optimizer updates; a parameter without it is a buffer (a
    frozen weight or a non-learned tensor such as rotary frequencies).

    The bytes are not in the IR unless the importer is asked for them
    (`value`), so a graph-only model of any size compiles.

    Rules: (C1) `name` is not empty; (C2) a `value`, when present, has the
    result's type.

    ```mlir
    %w = tess.parameter "transformer.h.0.attn.c_attn.weight" trainable
           {location = #tess.weight_location<file = "gpt2.onnx.data", offset = 0, length = 49152>}
           : tensor<64x192xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$trainable,
                   OptionalAttr<Tess_WeightLocationAttr>:$location,
                   OptionalAttr<ElementsAttr>:$value);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$name (`trainable` $trainable^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class Tess_UnaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : Tess_Op<mnemonic, !listconcat(traits,
        [Pure, SameOperandsAndResultType, Elementwise, Tess_Shardable])> {
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Tess_NegOp : Tess_UnaryOp<"neg", Tess_Tensor, [Tess_Differentiable]> {
  let summary = "elementwise negation";
  let description = [{
    ```mlir
    %y = tess.neg %x : tensor<4x8xf32>
    ```
  }];
  let hasFolder = 1;
}
def Tess_AbsOp : Tess_UnaryOp<"abs", Tess_Tensor, [Tess_Differentiable]> {
  let summary = "elementwise absolute value";
  let description = "`%y = tess.abs %x : tensor<4xf32>`";
}
def Tess_ExpOp : Tess_UnaryOp<"exp", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise e^x";
  let description = "`%y = tess.exp %x : tensor<4xf32>`";
}
def Tess_LogOp : Tess_UnaryOp<"log", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise natural logarithm";
  let description = "`%y = tess.log %x : tensor<4xf32>`";
}
def Tess_SqrtOp : Tess_UnaryOp<"sqrt", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise square root";
  let description = "`%y = tess.sqrt %x : tensor<4xf32>`";
}
def Tess_RsqrtOp : Tess_UnaryOp<"rsqrt", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise 1/sqrt(x)";
  let description = "`%y = tess.rsqrt %x : tensor<4xf32>`";
}
def Tess_ReciprocalOp : Tess_UnaryOp<"reciprocal", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise 1/x";
  let description = "`%y = tess.reciprocal %x : tensor<4xf32>`";
}
def Tess_TanhOp : Tess_UnaryOp<"tanh", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise hyperbolic tangent";
  let description = "`%y = tess.tanh %x : tensor<4xf32>`";
}
def Tess_ErfOp : Tess_UnaryOp<"erf", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise Gauss error function";
  let description = "`%y = tess.erf %x : tensor<4xf32>`";
}
def Tess_SigmoidOp : Tess_UnaryOp<"sigmoid", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise logistic function 1/(1+e^-x)";
  let description = "`%y = tess.sigmoid %x : tensor<4xf32>`";
}
def Tess_ReluOp : Tess_UnaryOp<"relu", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise max(x, 0)";
  let description = "`%y = tess.relu %x : tensor<4xf32>`";
}
def Tess_CosOp : Tess_UnaryOp<"cos", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise cosine (rotary embedding tables)";
  let description = "`%y = tess.cos %x : tensor<32x8xf32>`";
}
def Tess_SinOp : Tess_UnaryOp<"sin", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise sine (rotary embedding tables)";
  let description = "`%y = tess.sin %x : tensor<32x8xf32>`";
}
def Tess_SiluOp : Tess_UnaryOp<"silu", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise x * sigmoid(x) (SwiGLU's gate)";
  let description = [{
    The importer fuses `x * Sigmoid(x)` into this op.

    ```mlir
    %y = tess.silu %x : tensor<2x16x128xf32>
    ```
  }];
}
def Tess_SwigluOp : Tess_Op<"swiglu", [Pure, SameOperandsAndResultType,
    Elementwise, Tess_Differentiable, Tess_Shardable]> {
  let summary = "SwiGLU's gating: silu(gate) * up";
  let description = [{
    `gate * sigmoid(gate) * up`, elementwise: the gated MLP of Llama,
    Mistral, Qwen and Phi-3 between its gate/up projections and its down
    projection. One op is one pass over gate and up, and silu(gate) is
    neither stored nor kept for the backward
    (`tess.swiglu_grad` recomputes it). Created by `tess-fuse-activations`
    from `tess.mul(tess.silu(gate), up)`. Kernels: `tessera_{cpu,cuda}_swiglu`.

    ```mlir
    %y = tess.swiglu %gate, %up : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$gate, Tess_FloatTensor:$up);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}
def Tess_PackedSwigluOp : Tess_Op<"packed_swiglu",
    [Pure, Tess_Differentiable, Tess_Shardable]> {
  let summary = "SwiGLU's gating over a gate/up-packed tensor";
  let description = [{
    `tess.swiglu` on the two halves of one tensor: `input` is `[.., 2F]`,
    each row's `F` gate values then its `F` up values (the result of one
    linear of the concatenated gate and up weights), and the result is
    `[.., F]`, `silu(input[.., :F]) * input[.., F:]`. The kernels read the
    halves in place (strided rows of `2F`), so no split copies them, and
    its gradient `tess.packed_swiglu_grad` writes one `[.., 2F]` tensor:
    autodiff then gives the packed projection one dx GEMM (K = 2F) and one
    dW GEMM. Created by `tess-pack-gate-up-projections`. Kernels:
    `tessera_{cpu,cuda}_packed_swiglu`.

    Rules: (C1) `input` has rank at least 1 and a static, even last dim;
    (C2) the result is `input`'s type with the last dim halved.

    ```mlir
    %y = tess.packed_swiglu %gu : (tensor<2x16x256xf32>) -> tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}
def Tess_LogicalNotOp : Tess_UnaryOp<"logical_not", Tess_BoolTensor> {
  let summary = "elementwise boolean negation";
  let description = "`%y = tess.logical_not %m : tensor<4xi1>`";
  let hasFolder = 1;
}

def Tess_GeluOp : Tess_UnaryOp<"gelu", Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `x * Phi(x)` where Phi is the standard normal CDF, computed exactly
    (`approximation = none`: `0.5 x (1 + erf(x / sqrt 2))`) or with GPT-2's
    tanh formula (`approximation = tanh`:
    `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`).

    ```mlir
    %y = tess.gelu %x {approximation = #tess<gelu_approximation tanh>} : tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input,
      DefaultValuedAttr<Tess_GeluApproximationAttr,
                        "::tessera::tess::GeluApproximation::none">:$approximation);
}

class Tess_BinaryOp<string mnemonic, Type operandType, Type resultType,
                    list<Trait> traits = []>
    : Tess_Op<mnemonic, !listconcat(traits,
        [Pure, InferTypeOpAdaptor, Tess_Shardable])> {
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  string broadcastRule = [{
    Operands broadcast with numpy's rule: shapes are aligned from the right
    and a dimension of size 1 stretches. Rules: (C1) both operands have one
    element type; (C2) their shapes broadcast.
  }];
}

def Tess_AddOp : Tess_BinaryOp<"add", Tess_Tensor, Tess_Tensor, [Commutative, Tess_Differentiable]> {
  let summary = "elementwise sum with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.add %x, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_SubOp : Tess_BinaryOp<"sub", Tess_Tensor, Tess_Tensor, [Tess_Differentiable]> {
  let summary = "elementwise difference with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.sub %x, %mean : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_MulOp : Tess_BinaryOp<"mul", Tess_Tensor, Tess_Tensor, [Commutative, Tess_Differentiable]> {
  let summary = "elementwise product with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.mul %x, %half : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_DivOp : Tess_BinaryOp<"div", Tess_Tensor, Tess_Tensor, [Tess_Differentiable]> {
  let summary = "elementwise quotient with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.div %x, %d : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_PowOp : Tess_BinaryOp<"pow", Tess_FloatTensor, Tess_FloatTensor, [Tess_Differentiable]> {
  let summary = "elementwise power with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    ```
  }]);
}
def Tess_MaximumOp : Tess_BinaryOp<"maximum", Tess_Tensor, Tess_Tensor, [Commutative, Tess_Differentiable]> {
  let summary = "elementwise maximum with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.maximum %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_MinimumOp : Tess_BinaryOp<"minimum", Tess_Tensor, Tess_Tensor, [Commutative, Tess_Differentiable]> {
  let summary = "elementwise minimum with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %y = tess.minimum %x, %cap : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_LogicalAndOp : Tess_BinaryOp<"logical_and", Tess_BoolTensor, Tess_BoolTensor, [Commutative]> {
  let summary = "elementwise boolean and with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %m = tess.logical_and %a, %b : (tensor<1x1x8x8xi1>, tensor<2x1x8x8xi1>) -> tensor<2x1x8x8xi1>
    ```
  }]);
  let hasFolder = 1;
}
def Tess_LogicalOrOp : Tess_BinaryOp<"logical_or", Tess_BoolTensor, Tess_BoolTensor, [Commutative]> {
  let summary = "elementwise boolean or with broadcasting";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %m = tess.logical_or %a, %b : (tensor<8x8xi1>, tensor<8x8xi1>) -> tensor<8x8xi1>
    ```
  }]);
  let hasFolder = 1;
}

def Tess_CompareOp : Tess_BinaryOp<"compare", Tess_Tensor, Tess_BoolTensor> {
  let summary = "elementwise comparison with broadcasting, giving i1";
  let description = !strconcat(broadcastRule, [{
    ```mlir
    %m = tess.compare le, %i, %j : (tensor<8x1xi64>, tensor<1x8xi64>) -> tensor<8x8xi1>
    ```
  }]);
  let arguments = (ins Tess_ComparisonPredicateAttr:$predicate,
                   Tess_Tensor:$lhs, Tess_Tensor:$rhs);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Tess_WhereOp : Tess_Op<"where",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `condition ? on_true : on_false`, all three broadcast together.
    Rules: (C1) both branches have one element type; (C2) the three shapes
    broadcast.

    ```mlir
    %y = tess.where %m, %x, %neg_inf
      : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Tess_BoolTensor:$condition, Tess_Tensor:$on_true,
                   Tess_Tensor:$on_false);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def Tess_CastOp : Tess_Op<"cast", [Pure, Elementwise, Tess_Differentiable, Tess_Shardable]> {
  let summary = "elementwise change of element type";
  let description = [{
    Converts every element to the result's element type (float rounding is
    round-to-nearest-even; float to integer truncates toward zero; to `i1`
    means "not zero"). Integers are signed, except `i1`, whose values are 0
    and 1: a wider integer is sign-extended (`i1` zero-extended) or
    truncated to its low bits. Rule: (C1) the shapes are equal (checked by
    the `Elementwise` trait).

    ```mlir
    %h = tess.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tess_DropoutOp : Tess_Op<"dropout", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>, Tess_Differentiable, Tess_Shardable]> {
  let summary = "training-time dropout";
  let description = [{
    Zeroes each element with probability `rate` and scales the rest by
    `1 / (1 - rate)`, as `torch.nn.functional.dropout` does in training. It
    draws random numbers, so it is not `Pure`: two dropouts of one value are
    different and neither may be merged or hoisted: it writes the
    `tess::RandomNumbers` resource. Rule: (C1) `rate` is in
    `[0, 1)`.

    `seed` names the op's random stream: whether element `i` is kept is a
    pure function of `(seed, i)`, so the gradient is `tess.dropout` of the
    result's cotangent with the same `seed` and `rate`, and no mask is
    stored. `tess-build-training` gives every dropout its own seed.

    `stream_axis`, set by `tess-partition-spmd` on a rank's block of a
    dropout whose dim 0 is split over that mesh axis, makes the rank draw
    from the same stream advanced to its block's first element: element `i`
    of block `c` is element `c * n + i` of the whole tensor (n the block's
    elements), so the partitioned step drops exactly what the unsplit one
    drops. Rule: (C2) `stream_axis` needs a `rate` above 0 and names an
    axis of the module's `tess.mesh`.

    ```mlir
    %y = tess.dropout %x {rate = 1.000000e-01 : f64} : tensor<2x32x64xf32>
    // A rank's rows of a batch split over dp.
    %z = tess.dropout %x {rate = 1.000000e-01 : f64, seed = 3 : i64, stream_axis = "dp"} : tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, F64Attr:$rate,
                   DefaultValuedAttr<I64Attr, "0">:$seed,
                   OptionalAttr<StrAttr>:$stream_axis);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Tess_MatmulOp : Tess_Op<"matmul",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "batched matrix product with optional transposes";
  let description = [{
    `op(lhs) @ op(rhs)` over the last two dims, where `op` transposes those
    two dims when `transpose_lhs` / `transpose_rhs` is set; leading (batch)
    dims broadcast as numpy does.

    Rules: (C1) both operands have rank >= 2; (C2) one element type;
    (C3) the contracted dims agree; (C4) batch dims broadcast.

    ```mlir
    // scores = q @ k^T per head
    %s = tess.matmul %q, %k {transpose_rhs}
      : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$lhs, Tess_Tensor:$rhs,
                   UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def Tess_LinearOp : Tess_Op<"linear",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "a dense layer: input @ weight (+ bias)";
  let description = [{
    `y[..., n] = sum_k x[..., k] * W[k, n] + b[n]`. The weight is stored as
    `[in, out]` (GPT-2's Conv1D, ONNX Gemm) or, with `transpose_weight`, as
    PyTorch's `nn.Linear` keeps it, `[out, in]`. This is the op the sharding
    search splits Megatron-style (column- or row-parallel).

    Rules: (C1) input has rank >= 1, weight rank 2; (C2) one element type;
    (C3) the input's last dim equals the weight's `in` dim; (C4) the bias,
    when present, is `[out]`.

    ```mlir
    %h = tess.linear %x, %w, %b
      : (tensor<2x32x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<2x32x192xf32>
    %y = tess.linear %x, %w_torch {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<512x64xf32>) -> tensor<2x32x512xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input, Tess_Tensor:$weight,
                   Optional<Tess_Tensor>:$bias, UnitAttr:$transpose_weight);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Transformer layers
//===----------------------------------------------------------------------===//

def Tess_LayerNormOp : Tess_Op<"layer_norm",
    [Pure, AttrSizedOperandSegments, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "layer normalization over the trailing dims";
  let description = [{
    Normalizes over dims `[axis, rank)`: `(x - mean) / sqrt(var + epsilon)`,
    then multiplies by `scale` and adds `bias` when given. Statistics are
    computed in fp32 whatever the input type.

    Rules: (C1) `axis` is in `[-rank, rank)`; (C2) `scale` and `bias` have
    the normalized shape and the input's element type; (C3) `epsilon >= 0`.

    ```mlir
    %y = tess.layer_norm %x scale %g bias %b {epsilon = 1.0e-05 : f64}
      : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input,
                   Optional<Tess_FloatTensor>:$scale,
                   Optional<Tess_FloatTensor>:$bias,
                   DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tess_RmsNormOp : Tess_Op<"rms_norm",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "root-mean-square normalization over the trailing dims";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale` over dims `[axis, rank)`
    (Llama's RMSNorm). Statistics are computed in fp32.

    Rules: (C1) `axis` is in `[-rank, rank)`; (C2) `scale` has the
    normalized shape and the input's element type; (C3) `epsilon >= 0`.

    ```mlir
    %y = tess.rms_norm %x scale %g {epsilon = 1.0e-06 : f64}
      : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input,
                   Optional<Tess_FloatTensor>:$scale,
                   DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`scale` $scale^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tess_RotaryOp : Tess_Op<"rotary",
    [Pure, Tess_Differentiable, Tess_Shardable]> {
  let summary = "rotary position embedding of the last dim's two halves";
  let description = [{
    Rotates each pair `(x[..., i], x[..., i + h])`, `h = D / 2`, of the last
    dim by the angles behind `cos` and `sin` (the rotate-half form of
    Llama, Mistral, Qwen, Gemma and GPT-NeoX's rotary embedding):

    ```
    y[..., i]     = x[..., i]     * cos[..., i]     - x[..., i + h] * sin[..., i]
    y[..., i + h] = x[..., i + h] * cos[..., i + h] + x[..., i]     * sin[..., i + h]
    ```

    `cos` and `sin` broadcast to `x` (typically `[1, 1, T, D]` against
    `[B, H, T, D]`). With `adjoint`, the op applies the transposed rotation
    (`sin` enters with the opposite sign on each half), which is the
    gradient with respect to `x`: `tess.rotary` is its own VJP with
    `adjoint` flipped. `cos` and `sin` carry no gradient:
    `tess-fuse-rotary` creates the op only where they are computed from
    buffers and constants alone (the rotary frequencies and positions).
    Kernels: `tessera_{cpu,cuda}_rotary`, one pass over x.

    `rotated_heads = n` (0, the default, rotates everything) rotates only
    the entries of dim -2 below n and copies the others unchanged: a packed
    q/k/v projection viewed as `[B, T, Hq + 2 Hkv, D]` has its query and key
    heads rotated and its value heads passed through in one pass, which is
    how `tess-fuse-packed-attention` feeds `tess.packed_attention` from a
    rotary model.

    Rules: (C1) `x`'s last dim is even and at least 2; (C2) `cos` and `sin`
    have `x`'s rank and element type and broadcast to `x`'s shape; (C3)
    the result has `x`'s type; (C4) `rotated_heads` is 0, or x has rank >= 2
    and `0 < rotated_heads <= x.dim(-2)`.

    ```mlir
    %y = tess.rotary %x, %cos, %sin
      : (tensor<2x4x32x16xf32>, tensor<1x1x32x16xf32>, tensor<1x1x32x16xf32>) -> tensor<2x4x32x16xf32>
    %qkv = tess.rotary %packed, %c, %s {rotated_heads = 6 : i64}
      : (tensor<2x32x8x16xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>) -> tensor<2x32x8x16xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$cos,
                   Tess_FloatTensor:$sin, UnitAttr:$adjoint,
                   DefaultValuedAttr<I64Attr, "0">:$rotated_heads);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tess_SoftmaxOp : Tess_Op<"softmax",
    [Pure, SameOperandsAndResultType, Tess_Differentiable, Tess_Shardable]> {
  let summary = "softmax along one dim";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along `axis`. Rule: (C1) `axis` is in
    `[-rank, rank)`.

    ```mlir
    %p = tess.softmax %s {axis = -1 : i64} : tensor<2x4x32x32xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Tess_EmbeddingOp : Tess_Op<"embedding",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "row lookup in an embedding table";
  let description = [{
    `result[i..., :] = table[indices[i...], :]`: the token (or position)
    embedding. Rules: (C1) the table has rank 2; (C2) indices are `i32` or
    `i64` (the operand's type constraint); (C3) indices have rank >= 1 (one
    id alone is looked up with `tess.gather`, so that every embedding reads
    a batch of tokens, as the sharding search assumes). Out-of-range ids are a runtime error of the executable, not UB.

    `rows_axis`, set by `tess-partition-spmd` on a vocabulary-parallel
    lookup (Megatron's VocabParallelEmbedding), says the table is the
    rank's block of rows along that mesh axis: rows `[c * n, (c + 1) * n)`
    of the whole table (n the block's rows, c the rank's coordinate). An id
    in the block reads its row, any other id of the whole table gives
    zeros, so the ranks' results are a partial sum over the axis. (C4)
    `rows_axis` names an axis of the module's `tess.mesh`.

    ```mlir
    %e = tess.embedding %wte, %ids
      : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$table, Tess_IndexTensor:$indices,
                   OptionalAttr<StrAttr>:$rows_axis);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = "$table `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tess_AttentionOp : Tess_Op<"attention", [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>, Tess_Differentiable, Tess_Shardable]> {
  let summary = "scaled dot-product attention (causal, masked, grouped K/V)";
  let description = [{
    Per batch and query head h:
    `softmax(cap(scale * Q[h] K[g]^T) + mask) V[g]` with `g = h / (Hq / Hkv)`,
    i.e. grouped-query attention when K/V have fewer heads. `cap` is the
    identity unless `softcap` c is nonzero, when it is Gemma-2's logit
    softcapping `c * tanh(s / c)` (attn_logit_softcapping), which bounds each
    score to (-c, c) before the mask hides keys. `causal` hides
    key positions after the query's: query i sees keys j <= i + o, with
    o = kv_seq - q_seq. A nonzero `window` W narrows that to the W most
    recent keys, i + o - W < j <= i + o (Mistral's sliding window; W-1 is
    FlashAttention's window_size_left), so a kernel skips the blocks outside
    the band instead of reading an [S, S] mask. `mask`, when present, is added to the
    scores (0 keeps, a large negative value hides). A query whose every key
    is hidden (all scores -inf) gets weights 0 and an output of 0, as
    PyTorch's scaled_dot_product_attention defines it, not NaN: every backend
    must do the same (tess-fuse-attention relies on it when it drops the
    exporter's NaN guard). Layout is `[batch, heads, seq, head_dim]`.

    Rules: (C1) q, k, v have rank 4 and one element type; (C2) k and v agree
    on batch, heads and sequence; q's batch and head_dim equal k's; (C3) K/V
    have at least one head and the query head count is a multiple of it;
    (C4) the mask has q's element type and broadcasts to
    `[batch, q_heads, q_seq, kv_seq]`; (C5) `scale` is positive and finite;
    (C6) causal needs q_seq <= kv_seq; (C7) `dropout`, the probability with
    which training drops each attention weight (after the softmax), is in
    `[0, 1)`, and a nonzero one needs at most 65,536 query heads; (C8)
    `window` is not negative, and a nonzero one needs `causal`; (C9)
    `softcap` is 0 (none) or positive and finite. `seed` names the random
    stream of that dropout, as for `tess.dropout`: weight `(b, h, i, j)`
    draws at position `((b * 65536 + h) * q_seq + i) * kv_seq + j`, a fixed
    head stride, so that a block of batch rows or of heads begins at a fixed
    offset of the stream. `stream_axis` (a rank's block of a batch split
    over that mesh axis) and `head_stream_axis` (of the heads, split over
    that axis), both set by `tess-partition-spmd`, advance the stream to the
    block's first weight, so a rank draws the unsplit op's masks. (C10)
    `stream_axis` and `head_stream_axis` need a `dropout` above 0 and name
    axes of the module's `tess.mesh`.

    ```mlir
    %o = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64}
      : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>)
      -> tensor<2x4x32x16xf32>
    // Each query sees itself and the 7 keys before it.
    %w = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64, window = 8 : i64}
      : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>)
      -> tensor<2x4x32x16xf32>
    // Gemma-2: every score squashed into (-50, 50) before the softmax.
    %c = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64, softcap = 5.000000e+01 : f64}
      : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>)
      -> tensor<2x4x32x16xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$query, Tess_FloatTensor:$key,
                   Tess_FloatTensor:$value, Optional<Tess_FloatTensor>:$mask,
                   UnitAttr:$causal, F64Attr:$scale,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                   DefaultValuedAttr<I64Attr, "0">:$seed,
                   DefaultValuedAttr<I64Attr, "0">:$window,
                   DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                   OptionalAttr<StrAttr>:$stream_axis,
                   OptionalAttr<StrAttr>:$head_stream_axis);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tess_PackedAttentionOp : Tess_Op<"packed_attention",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "attention over a QKV-packed tensor, with each row's log-sum-exp";
  let description = [{
    `tess.attention` (no mask, no dropout, no window, no softcap) on the heads of one packed
    tensor, the layout of a fused QKV projection's output and of
    FlashAttention's `qkvpacked` entry: `qkv` is `[batch, seq, (Hq + 2 Hkv)
    head_dim]`, each token's `query_heads` query heads, then `key_heads` key
    heads, then `key_heads` value heads. The result `y` is `[batch, seq,
    Hq head_dim]`, each token's heads side by side: what the output
    projection reads. So the kernel reads and writes the projections'
    layouts directly, and no transpose of q, k, v or y exists.

    `lse` (`[batch, Hq, seq]`, f32) is each query row's natural-log
    `log(sum_j exp(scale q . k_j))` over its visible keys, -inf for a row that
    sees none. `tess.packed_attention_grad` reads it (and `y`) so that the
    backward does not rerun the forward to rebuild the softmax statistics.

    Created after autodiff by `tess-fuse-packed-attention`, so it has no
    VJP. Kernels: `tessera_{cpu,cuda}_packed_attention`.

    Rules: (C1) `qkv` has rank 3; (C2) `query_heads` and `key_heads` are at
    least 1 and `query_heads` is a multiple of `key_heads`; (C3) `qkv`'s last
    dim is a multiple of `query_heads + 2 key_heads`; (C4) `scale` is
    positive and finite.

    ```mlir
    %y, %lse = tess.packed_attention %qkv {causal, key_heads = 2 : i64, query_heads = 2 : i64, scale = 2.500000e-01 : f64}
      : (tensor<2x32x96xf32>) -> (tensor<2x32x32xf32>, tensor<2x2x32xf32>)
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$qkv, I64Attr:$query_heads,
                   I64Attr:$key_heads, UnitAttr:$causal, F64Attr:$scale);
  let results = (outs Tess_FloatTensor:$result, RankedTensorOf<[F32]>:$lse);
  let assemblyFormat = "$qkv attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Tess_ReshapeOp : Tess_Op<"reshape", [Pure, Tess_Differentiable, Tess_Shardable]> {
  let summary = "same elements, another static shape";
  let description = [{
    Row-major reinterpretation. Rule: (C1) element counts and element types
    are equal.

    ```mlir
    %y = tess.reshape %x : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tess_TransposeOp : Tess_Op<"transpose",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "permute dims";
  let description = [{
    `result.dim(i) = input.dim(permutation[i])`. Rule: (C1) `permutation` is
    a permutation of `[0, rank)`.

    ```mlir
    %y = tess.transpose %x {permutation = array<i64: 0, 2, 1, 3>}
      : (tensor<2x32x4x16xf32>) -> tensor<2x4x32x16xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tess_BroadcastOp : Tess_Op<"broadcast", [Pure, Tess_Differentiable, Tess_Shardable]> {
  let summary = "stretch size-1 dims (numpy rules) to the result shape";
  let description = [{
    ONNX Expand: the input's shape, right-aligned, broadcasts to the result
    shape. Rules: (C1) one element type; (C2) the input's rank is at most the
    result's and every input dim is 1 or equals the result's.

    ```mlir
    %y = tess.broadcast %x : (tensor<2x1x32x16xf32>) -> tensor<2x4x32x16xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Tess_SliceOp : Tess_Op<"slice",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "a strided window of a tensor";
  let description = [{
    `result[i] = input[start + i * stride]` per dim, `limit` exclusive, with
    all three arrays normalized (non-negative, in range, one per dim).
    Rules: (C1) one entry per dim; (C2) `0 <= start <= limit <= dim`;
    (C3) strides >= 1.

    ```mlir
    %y = tess.slice %x {starts = array<i64: 0, 0, 64>, limits = array<i64: 2, 32, 128>,
                        strides = array<i64: 1, 1, 1>}
      : (tensor<2x32x192xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Tess_SplitOp : Tess_Op<"split",
    [Pure, Tess_VerifiesBeforeInference, InferTypeOpAdaptor,
     Tess_Differentiable, Tess_Shardable]> {
  let summary = "cut a tensor into consecutive pieces along one dim";
  let description = [{
    GPT-2 splits its fused QKV projection this way. Rules: (C1) `axis` is in
    `[-rank, rank)`; (C2) `sizes` are positive and sum to the dim; (C3) one
    result per size.

    ```mlir
    %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 64, 64, 64>}
      : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>)
    ```
  }];
  let arguments = (ins Tess_Tensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Tess_Tensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// C3, checked before the result types are compared with inference.
    ::mlir::LogicalResult verifyBeforeInference();
  }];
}

def Tess_ConcatOp : Tess_Op<"concat",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "join tensors along one dim";
  let description = [{
    Rules: (C1) at least one input; (C2) equal ranks and element types;
    (C3) `axis` is in `[-rank, rank)`; (C4) all other dims agree.

    ```mlir
    %y = tess.concat %a, %b {axis = -1 : i64}
      : (tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>) -> tensor<2x4x32x16xf32>
    ```
  }];
  let arguments = (ins Variadic<Tess_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Tess_GatherOp : Tess_Op<"gather",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "ONNX Gather along any axis";
  let description = [{
    `result = input[:, ..., indices, ...]` at `axis`: the result's shape is
    `input[:axis] + indices.shape + input[axis+1:]`. Negative indices count
    from the end. `tess.embedding` is the axis-0 rank-2 case and is preferred
    where it applies. Rule: (C1) `axis` is in `[-rank, rank)`.

    ```mlir
    %y = tess.gather %x, %i {axis = 1 : i64}
      : (tensor<4x10x8xf32>, tensor<3xi64>) -> tensor<4x3x8xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input, Tess_IndexTensor:$indices, I64Attr:$axis);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input `,` $indices attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Tess_ReductionOp<string mnemonic, string what>
    : Tess_Op<mnemonic, [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = what # " over the given dims";
  let description = "Reduces `dims` (each in `[-rank, rank)`, no repeats: "
    # "C1), keeping them as size 1 with `keep_dims`.\n\n"
    # "```mlir\n%s = tess." # mnemonic
    # " %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>\n```";
  let arguments = (ins Tess_Tensor:$input, DenseI64ArrayAttr:$dims, UnitAttr:$keep_dims);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Tess_ReduceSumOp : Tess_ReductionOp<"reduce_sum", "sum">;
def Tess_ReduceMeanOp : Tess_ReductionOp<"reduce_mean", "arithmetic mean">;
def Tess_ReduceMaxOp : Tess_ReductionOp<"reduce_max", "maximum">;
def Tess_ReduceMinOp : Tess_ReductionOp<"reduce_min", "minimum">;

include "Tess/IR/TessTrainingOps.td"
include "Tess/IR/TessCollectiveOps.td"
include "Tess/IR/TessPlanAttrs.td"
include "Tess/IR/TessFusedOps.td"

#endif // TESS_OPS_TD
