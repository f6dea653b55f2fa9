//===- TessTrainingOps.td - loss, gradient and optimizer ops -*- tablegen -*-===//
//
// The ops that only a training step has: the loss, the gradients that are
// not a short composition of forward ops, and the optimizer update. Each maps
// one to one onto a kernel of runtime/include/tessera/runtime/cpu_kernels.h,
// named in its description; its semantics are that kernel's.
// `tess-build-training` creates them; nothing else needs to.
//
// Included by TessOps.td; rules are numbered per op as there.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_TRAINING_OPS_TD
#define TESS_TRAINING_OPS_TD

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def Tess_CrossEntropyOp : Tess_Op<"cross_entropy",
    [Pure, InferTypeOpAdaptor, Tess_Differentiable, Tess_Shardable]> {
  let summary = "mean cross-entropy of logits against integer targets";
  let description = [{
    `mean over {i : targets[i] != ignore_index} of
    -log softmax(logits[i, :])[targets[i]]`, where `i` ranges over every
    position of the leading dims and the last dim of `logits` holds the
    classes (the vocabulary). The loss is an `f32` scalar whatever the
    logits' type; with no counted target it is 0. A target outside
    `[0, V)` that is not `ignore_index` is a runtime error.
    Kernel: `tessera_cpu_cross_entropy` on the logits viewed as `[N, V]`.

    With `count_over %all_targets`, the sum over these rows is divided by
    the number of counted targets in `all_targets` instead: the loss of one
    block of rows of a larger batch, so that the blocks' losses add up to
    the batch's mean (tess-chunk-loss-head computes the head a block of
    rows at a time). A block with no counted row then contributes 0.

    Rules: (C1) logits have rank >= 1; (C2) targets have the logits' shape
    without the last dim; (C3) `all_targets` has the targets' element type
    and at least as many elements.

    ```mlir
    %loss = tess.cross_entropy %logits, %targets {ignore_index = -100 : i64}
      : (tensor<2x31x512xf32>, tensor<2x31xi64>) -> tensor<f32>
    %part = tess.cross_entropy %block, %block_targets count_over %targets
      : (tensor<31x512xf32>, tensor<31xi64>, tensor<2x31xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$logits, Tess_IndexTensor:$targets,
                   Optional<Tess_IndexTensor>:$all_targets,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = [{
    $logits `,` $targets (`count_over` $all_targets^)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$logits, "::mlir::Value":$targets, "int64_t":$ignore_index), [{
      build($_builder, $_state, logits, targets, ::mlir::Value(), ignore_index);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The gradient of this loss when it is the next op, on the same logits,
    /// targets and ignore index (the backward's first op), or null. The
    /// kernels then compute both in one pass over the logits
    /// (tessera_*_cross_entropy_with_grad), and the cost model prices them
    /// so.
    CrossEntropyGradOp fusedGradient();
    /// Whether `grad` is this loss's gradient: the same logits, targets,
    /// ignore index and count, wherever it is.
    bool isGradient(CrossEntropyGradOp grad);
  }];
}

def Tess_CrossEntropyGradOp : Tess_Op<"cross_entropy_grad",
    [Pure, InferTypeOpAdaptor, Tess_Shardable]> {
  let summary = "gradient of tess.cross_entropy with respect to the logits";
  let description = [{
    `dlogits[i, :] = dloss * (softmax(logits[i, :]) - onehot(targets[i])) /
    count` on counted rows and 0 on ignored ones, `count` being the number of
    targets that are not `ignore_index`. The result has the logits' type.
    Kernel: `tessera_cpu_cross_entropy_grad`. Every kernel may write dlogits
    over the logits (each element is read before it is overwritten): the
    arena planner gives the gradient the logits' storage when nothing reads
    them afterwards, so a large vocabulary's [tokens, classes] block exists
    once. `count_over %all_targets` takes `count` from `all_targets`, as
    tess.cross_entropy's does.

    Rules: (C1) logits have rank >= 1; (C2) targets have the logits' shape
    without the last dim; (C3) `all_targets` has the targets' element type
    and at least as many elements; `dloss` is `tensor<f32>` (its type
    constraint).

    ```mlir
    %dlogits = tess.cross_entropy_grad %logits, %targets, %dloss {ignore_index = -100 : i64}
      : (tensor<2x31x512xf32>, tensor<2x31xi64>, tensor<f32>) -> tensor<2x31x512xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$logits, Tess_IndexTensor:$targets,
                   0DTensorOf<[F32]>:$dloss,
                   Optional<Tess_IndexTensor>:$all_targets,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Tess_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $targets `,` $dloss (`count_over` $all_targets^)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$logits, "::mlir::Value":$targets, "::mlir::Value":$dloss, "int64_t":$ignore_index), [{
      build($_builder, $_state, logits, targets, dloss, ::mlir::Value(), ignore_index);
    }]>
  ];
}

//===----------------------------------------------------------------------===//
// Gradients of activations and layers
//===----------------------------------------------------------------------===//

def Tess_GeluGradOp : Tess_Op<"gelu_grad", [Pure, SameOperandsAndResultType, Tess_Shardable]> {
  let summary = "gradient of tess.gelu: dy * gelu'(x)";
  let description = [{
    The derivative of `tess.gelu` with the same `approximation`, at the
    forward's input `x`, times the result's cotangent `dy`. Kernel:
    `tessera_cpu_unary_grad` with `TESSERA_GELU_ERF` (none) or
    `TESSERA_GELU_TANH` (tanh). The other unary ops' gradients are short
    compositions of forward ops and have no op of their own.

    ```mlir
    %dx = tess.gelu_grad %x, %dy {approximation = #tess<gelu_approximation tanh>} : tensor<2x31x256xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$dy,
      DefaultValuedAttr<Tess_GeluApproximationAttr,
                        "::tessera::tess::GeluApproximation::none">:$approximation);
  let results = (outs Tess_FloatTensor:$dx);
  let assemblyFormat = "$input `,` $dy attr-dict `:` type($input)";
}

def Tess_SiluGradOp : Tess_Op<"silu_grad", [Pure, SameOperandsAndResultType, Tess_Shardable]> {
  let summary = "gradient of tess.silu: dy * silu'(x)";
  let description = [{
    `dy * s (1 + x (1 - s))` with `s = sigmoid(x)`. Kernel:
    `tessera_cpu_unary_grad` with `TESSERA_SILU`.

    ```mlir
    %dx = tess.silu_grad %x, %dy : tensor<2x31x256xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$dy);
  let results = (outs Tess_FloatTensor:$dx);
  let assemblyFormat = "$input `,` $dy attr-dict `:` type($input)";
}

def Tess_SwigluGradOp : Tess_Op<"swiglu_grad",
    [Pure, SameOperandsAndResultType, Elementwise, Tess_Shardable]> {
  let summary = "gradients of tess.swiglu with respect to gate and up";
  let description = [{
    With `s = sigmoid(gate)`: `dgate = dy * up * s (1 + gate (1 - s))` and
    `dup = dy * gate * s`, from one read of gate, up and dy. Kernel:
    `tessera_{cpu,cuda}_swiglu_grad`.

    ```mlir
    %dgate, %dup = tess.swiglu_grad %gate, %up, %dy : tensor<2x31x256xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$gate, Tess_FloatTensor:$up,
                   Tess_FloatTensor:$dy);
  let results = (outs Tess_FloatTensor:$dgate, Tess_FloatTensor:$dup);
  let assemblyFormat = "$gate `,` $up `,` $dy attr-dict `:` type($gate)";
}

def Tess_PackedSwigluGradOp : Tess_Op<"packed_swiglu_grad",
    [Pure, Tess_Shardable]> {
  let summary = "gradient of tess.packed_swiglu, gate and up halves in one tensor";
  let description = [{
    `tess.swiglu_grad` on the halves of the packed `input` (`[.., 2F]`,
    gate then up in each row) with the result's cotangent `dy` (`[.., F]`):
    the result `dinput` is `[.., 2F]`, `dgate` in each row's first `F`
    elements and `dup` in its last `F`, the layout the packed gate/up
    projection's backward GEMMs read. Each element pair is read before it
    is written, so `dinput` may overwrite `input` (the arena planner does
    so where `input` is dead). Kernel: `tessera_{cpu,cuda}_packed_swiglu_grad`.

    Rules: (C1) `input` has rank at least 1 and a static, even last dim;
    (C2) `dy` is `input`'s type with the last dim halved; (C3) the result
    has `input`'s type.

    ```mlir
    %dgu = tess.packed_swiglu_grad %gu, %dy
      : (tensor<2x31x512xf32>, tensor<2x31x256xf32>) -> tensor<2x31x512xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$dy);
  let results = (outs Tess_FloatTensor:$dinput);
  let assemblyFormat = "$input `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tess_LayerNormGradOp : Tess_Op<"layer_norm_grad",
    [Pure, AttrSizedOperandSegments, Tess_VerifiesBeforeInference,
     InferTypeOpAdaptor, Tess_Shardable]> {
  let summary = "gradients of tess.layer_norm";
  let description = [{
    From the forward's input `x`, its `scale` (when it had one) and the
    result's cotangent `dy`: the cotangents of the input, of the scale (a
    result exactly when `scale` is an operand) and of the bias (a result
    exactly when `bias_grad` is set, i.e. the forward had a bias), in that
    order. `axis` and `epsilon` are the forward's; statistics are recomputed.
    Kernel: `tessera_cpu_layer_norm_grad`. With a `residual` (only
    tess-fuse-epilogues adds one, from the `tess.add` of `dx` right after
    the op), `dx` is `residual` plus the input's cotangent, in one kernel:
    `tessera_cpu_layer_norm_grad_add`.

    Rules: (C1) `axis` is in `[-rank, rank)`; (C2) `scale` has the
    normalized shape and the input's element type; (C3) `epsilon >= 0`;
    (C4) `dy` has the input's type; (C5) one result for `dx`, one more with
    `scale`, one more with `bias_grad`; (C6) `residual` has the input's type.

    ```mlir
    %dx, %dscale, %dbias = tess.layer_norm_grad %x scale %g, %dy {bias_grad, epsilon = 1.0e-05 : f64}
      : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xf32>)
      -> (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input,
                   Optional<Tess_FloatTensor>:$scale, Tess_FloatTensor:$dy,
                   Optional<Tess_FloatTensor>:$residual,
                   DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon,
                   DefaultValuedAttr<I64Attr, "-1">:$axis,
                   UnitAttr:$bias_grad);
  let results = (outs Variadic<Tess_FloatTensor>:$gradients);
  let assemblyFormat = [{
    $input (`scale` $scale^)? `,` $dy (`residual` $residual^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// C5, checked before the result types are compared with inference.
    ::mlir::LogicalResult verifyBeforeInference();
    ::mlir::Value getDx() { return getGradients()[0]; }
    /// Null when the forward had no scale.
    ::mlir::Value getDscale() {
      return getScale() ? getGradients()[1] : ::mlir::Value();
    }
    /// Null without `bias_grad`.
    ::mlir::Value getDbias() {
      return getBiasGrad() ? getGradients().back() : ::mlir::Value();
    }
  }];
}

def Tess_RmsNormGradOp : Tess_Op<"rms_norm_grad",
    [Pure, AttrSizedOperandSegments, Tess_VerifiesBeforeInference,
     InferTypeOpAdaptor, Tess_Shardable]> {
  let summary = "gradients of tess.rms_norm";
  let description = [{
    From the forward's input `x`, its `scale` (when it had one) and the
    result's cotangent `dy`: the cotangent of the input and, when `scale` is
    an operand, of the scale. Kernel: `tessera_cpu_rms_norm_grad`. With a
    `residual` (tess-fuse-epilogues), `dx` is `residual` plus the input's
    cotangent: `tessera_cpu_rms_norm_grad_add`.

    Rules: (C1) `axis` is in `[-rank, rank)`; (C2) `scale` has the
    normalized shape and the input's element type; (C3) `epsilon >= 0`;
    (C4) `dy` has the input's type; (C5) one result for `dx`, one more with
    `scale`; (C6) `residual` has the input's type.

    ```mlir
    %dx, %dscale = tess.rms_norm_grad %x scale %g, %dy {epsilon = 1.0e-06 : f64}
      : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xf32>)
      -> (tensor<2x32x64xf32>, tensor<64xf32>)
    %dxr, %dscaler = tess.rms_norm_grad %x scale %g, %dy residual %r {epsilon = 1.0e-06 : f64}
      : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>)
      -> (tensor<2x32x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input,
                   Optional<Tess_FloatTensor>:$scale, Tess_FloatTensor:$dy,
                   Optional<Tess_FloatTensor>:$residual,
                   DefaultValuedAttr<F64Attr, "1.0e-6">:$epsilon,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Variadic<Tess_FloatTensor>:$gradients);
  let assemblyFormat = [{
    $input (`scale` $scale^)? `,` $dy (`residual` $residual^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// C5, checked before the result types are compared with inference.
    ::mlir::LogicalResult verifyBeforeInference();
    ::mlir::Value getDx() { return getGradients()[0]; }
    /// Null when the forward had no scale.
    ::mlir::Value getDscale() {
      return getScale() ? getGradients()[1] : ::mlir::Value();
    }
  }];
}

def Tess_SoftmaxGradOp : Tess_Op<"softmax_grad",
    [Pure, SameOperandsAndResultType, Tess_Shardable]> {
  let summary = "gradient of tess.softmax, from its output";
  let description = [{
    `dx = y * (dy - sum(dy * y, axis))` where `y` is the forward's result.
    Kernel: `tessera_cpu_softmax_grad`. Rule: (C1) `axis` is in
    `[-rank, rank)`.

    ```mlir
    %dx = tess.softmax_grad %y, %dy {axis = -1 : i64} : tensor<2x4x32x32xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$output, Tess_FloatTensor:$dy,
                   DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Tess_FloatTensor:$dx);
  let assemblyFormat = "$output `,` $dy attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def Tess_AttentionGradOp : Tess_Op<"attention_grad",
    [Pure, InferTypeOpAdaptor, Tess_Shardable]> {
  let summary = "gradients of tess.attention with respect to q, k and v";
  let description = [{
    From the forward's operands and attributes and the result's cotangent
    `dy`: `dq`, `dk`, `dv`, with the types of `q`, `k`, `v`. For grouped
    K/V heads, `dk`/`dv` sum over the query heads of each group. The mask is
    a constant: no gradient flows into it. The forward is recomputed,
    dropout included: the same `seed` draws the same mask, so no random
    numbers are consumed and the op is pure. Kernel:
    `tessera_cpu_attention_grad`.

    Rules: (C1) to (C10) are `tess.attention`'s (`stream_axis` and
    `head_stream_axis` included: the forward's block of the stream); (C11) `dy` has the attention's
    result type. A `softcap` c scales each score's gradient by
    `1 - tanh^2(s / c)`.

    ```mlir
    %dq, %dk, %dv = tess.attention_grad %q, %k, %v, %dy {causal, scale = 2.500000e-01 : f64}
      : (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x4x32x16xf32>)
      -> (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>)
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$query, Tess_FloatTensor:$key,
                   Tess_FloatTensor:$value, Optional<Tess_FloatTensor>:$mask,
                   Tess_FloatTensor:$dy,
                   UnitAttr:$causal, F64Attr:$scale,
                   DefaultValuedAttr<F64Attr, "0.0">:$dropout,
                   DefaultValuedAttr<I64Attr, "0">:$seed,
                   DefaultValuedAttr<I64Attr, "0">:$window,
                   DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                   OptionalAttr<StrAttr>:$stream_axis,
                   OptionalAttr<StrAttr>:$head_stream_axis);
  let results = (outs Tess_FloatTensor:$dq, Tess_FloatTensor:$dk,
                      Tess_FloatTensor:$dv);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` (`mask` $mask^ `,`)? $dy attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tess_PackedAttentionGradOp : Tess_Op<"packed_attention_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "gradient of tess.packed_attention with respect to qkv";
  let description = [{
    From the forward's operand, its results `y` and `lse`, and `y`'s
    cotangent `dy`: `dqkv`, in `qkv`'s packed layout (dq, dk, dv of each
    token side by side), so the fused QKV projection's backward reads it as
    it is. Grouped K/V heads sum over the query heads of their group. With
    the forward's statistics at hand, the backward is FlashAttention-2's:
    `D = rowsum(dy * y)`, then one pass over the key tiles. Kernel:
    `tessera_{cpu,cuda}_packed_attention_grad`.

    Rules: (C1) to (C4) are `tess.packed_attention`'s; (C5) `y` and `lse`
    have the forward's result types; (C6) `dy` has `y`'s type.

    ```mlir
    %dqkv = tess.packed_attention_grad %qkv, %y, %lse, %dy {causal, key_heads = 2 : i64, query_heads = 2 : i64, scale = 2.500000e-01 : f64}
      : (tensor<2x32x96xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32x32xf32>) -> tensor<2x32x96xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$qkv, Tess_FloatTensor:$y,
                   RankedTensorOf<[F32]>:$lse, Tess_FloatTensor:$dy,
                   I64Attr:$query_heads, I64Attr:$key_heads, UnitAttr:$causal,
                   F64Attr:$scale);
  let results = (outs Tess_FloatTensor:$dqkv);
  let assemblyFormat = "$qkv `,` $y `,` $lse `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Tess_LinearWeightGradOp : Tess_Op<"linear_weight_grad",
    [Pure, InferTypeOpAdaptor, Tess_Shardable]> {
  let summary = "a linear layer's weight gradient, summed over its rows";
  let description = [{
    `dW[k, n] = sum_i x[i..., k] * dy[i..., n]`: the gradient of
    `tess.linear`'s weight, every leading dim of the input and of `dy` a row
    summed over. With `transpose_weight` the result is `[n, k]`, as such a
    linear stores its weight (PyTorch's `nn.Linear`).

    It keeps the rows' dims, where a reshape to `[rows, .]` and a
    `tess.matmul` would merge them: so a split of any of them (the tokens of
    a sequence split as well as the samples) is a partial sum of the
    gradient, which the partition all-reduces, instead of a reshape that
    gathers both operands. After the partition, `tess-expand-weight-grads`
    (the lowering preparation's) makes it that reshape and matmul, the GEMM
    the kernels run.

    Rules: (C1) the input and `dy` have rank >= 1 and the same leading dims;
    (C2) one element type.

    ```mlir
    %dw = tess.linear_weight_grad %x, %dy {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<2x32x192xf32>) -> tensor<192x64xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$dy,
                   UnitAttr:$transpose_weight);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = "$input `,` $dy attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Gradients of data movement
//===----------------------------------------------------------------------===//

def Tess_EmbeddingGradOp : Tess_Op<"embedding_grad", [Pure, Tess_Shardable]> {
  let summary = "gradient of tess.embedding with respect to the table";
  let description = [{
    `dtable = 0; dtable[ids[i...], :] += dy[i..., :]`: rows looked up
    several times accumulate. The result type is the table's (the row count
    does not follow from the operands). Kernel: `tessera_cpu_embedding_grad`.

    Rules: (C1) the result has rank 2 and `dy`'s element type; (C2) `dy`'s
    shape is the ids' shape followed by the table's row width. (C3)
    `rows_axis`, as for `tess.embedding`, names an axis of the module's
    `tess.mesh`: the result is the rank's block of the table's rows, and
    only the ids in it add their `dy` rows.

    ```mlir
    %dwte = tess.embedding_grad %ids, %dy
      : (tensor<2x32xi64>, tensor<2x32x64xf32>) -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Tess_IndexTensor:$indices, Tess_FloatTensor:$dy,
                   OptionalAttr<StrAttr>:$rows_axis);
  let results = (outs Tess_FloatTensor:$dtable);
  let assemblyFormat = "$indices `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tess_GatherGradOp : Tess_Op<"gather_grad", [Pure, Tess_Shardable]> {
  let summary = "gradient of tess.gather with respect to its input";
  let description = [{
    The adjoint of `tess.gather` along `axis`: `dx = 0`, then every `dy`
    element is added at the place of the input it was gathered from
    (negative indices count from the end). The result type is the input's.
    Kernel: `tessera_cpu_gather_grad`.

    Rules: (C1) `axis` is in `[-rank, rank)` of the result; (C2) `dy` has the
    result's element type and the shape `tess.gather` gives:
    `result[:axis] + indices.shape + result[axis+1:]`.

    ```mlir
    %dx = tess.gather_grad %i, %dy {axis = 1 : i64}
      : (tensor<3xi64>, tensor<4x3x8xf32>) -> tensor<4x10x8xf32>
    ```
  }];
  let arguments = (ins Tess_IndexTensor:$indices, Tess_Tensor:$dy,
                   I64Attr:$axis);
  let results = (outs Tess_Tensor:$dx);
  let assemblyFormat = "$indices `,` $dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tess_SliceGradOp : Tess_Op<"slice_grad", [Pure, Tess_Shardable]> {
  let summary = "gradient of tess.slice: dy written back into zeros";
  let description = [{
    The adjoint of `tess.slice`: `dx = 0`, then
    `dx[start + i * stride] = dy[i]` per dim. The result type is the sliced
    input's. Kernel: `tessera_cpu_slice_grad`.

    Rules: (C1) one `starts` and `strides` entry per dim, and `dy` has the
    result's rank and element type; (C2) `starts >= 0` and `strides >= 1`;
    (C3) the window of `dy` lies inside the result: for a dim of `n > 0`
    elements, `start + (n - 1) * stride < dim` (`start <= dim` when
    `n = 0`).

    ```mlir
    %dx = tess.slice_grad %dy {starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>}
      : (tensor<2x32x64xf32>) -> tensor<2x32x192xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$dy, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$strides);
  let results = (outs Tess_Tensor:$dx);
  let assemblyFormat = "$dy attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Tess_AdamWOp : Tess_Op<"adamw", [Pure, InferTypeOpAdaptor, Tess_Shardable]> {
  let summary = "one AdamW step, as new values of param, m and v";
  let description = [{
    PyTorch's `torch.optim.AdamW` for one tensor, written functionally: the
    results are the updated parameter and moments. With `g = grad *
    grad_scale` (`grad_scale` folds in gradient clipping and the division by
    the loss scale):

    ```
    param' = param * (1 - lr * weight_decay)
    m' = beta1 m + (1 - beta1) g
    v' = beta2 v + (1 - beta2) g^2
    param' -= lr * (m' / (1 - beta1^step)) / (sqrt(v' / (1 - beta2^step)) + epsilon)
    ```

    `step` (counted from 1), `lr` and `grad_scale` are scalar tensors, so
    that one compiled step serves every iteration. `param` may be stored as
    `f32`, `bf16` or `f16`; `grad` in any float type; `m` and `v` are `f32`.
    Kernel: `tessera_cpu_adamw` (in place: the lowering gives each result
    its operand's buffer).

    Rules: (C1) `grad`, `m` and `v` have the parameter's shape; (C2) `lr`
    and `grad_scale` are `tensor<f32>`, `step` is `tensor<i64>` and `m`, `v`
    are `f32` (their type constraints); (C3) `beta1` and `beta2` are in
    `[0, 1)`; (C4) `epsilon > 0` and `weight_decay >= 0`.

    ```mlir
    %p2, %m2, %v2 = tess.adamw %p, %g, %m, %v, %lr, %step, %gscale
        {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64,
         epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}
      : (tensor<64x192xf32>, tensor<64x192xbf16>, tensor<64x192xf32>, tensor<64x192xf32>,
         tensor<f32>, tensor<i64>, tensor<f32>)
      -> (tensor<64x192xf32>, tensor<64x192xf32>, tensor<64x192xf32>)
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, BF16, F16]>:$param,
                   Tess_FloatTensor:$grad,
                   RankedTensorOf<[F32]>:$m, RankedTensorOf<[F32]>:$v,
                   0DTensorOf<[F32]>:$lr, 0DTensorOf<[I64]>:$step,
                   0DTensorOf<[F32]>:$grad_scale,
                   DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                   DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                   DefaultValuedAttr<F64Attr, "1.0e-8">:$epsilon,
                   DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let results = (outs RankedTensorOf<[F32, BF16, F16]>:$new_param,
                      RankedTensorOf<[F32]>:$new_m,
                      RankedTensorOf<[F32]>:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step `,` $grad_scale attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // TESS_TRAINING_OPS_TD
