//===- TessFusedOps.td - two ops the kernels compute in one call -*- tablegen -*-===//
//
// What tess-fuse-epilogues makes of an op and the op right after it when one
// kernel call computes both: a GEMM with its residual add in the GEMM's C,
// with GELU or its gradient in the epilogue, or with the bias gradient's
// column sum; a loss and its gradient in one pass over the logits. Each
// maps one to one onto a kernel of
// runtime/include/tessera/runtime/cpu_kernels.h (and its CUDA twin), named
// in its description; its semantics are that kernel's, and equal, up to
// rounding, to the pair it replaces.
//
// They exist only after autodiff, partitioning and the pipeline split (the
// fusion runs right before the lowering), so they have no VJP and no
// sharding rule; the interpreter, the arena planner and the lowering all see
// them, so a fixture run by the interpreter tests the calls the executable
// makes. The norm gradients' residual add is an operand of
// tess.layer_norm_grad / tess.rms_norm_grad (TessTrainingOps.td).
//
// Included by TessOps.td; rules are numbered per op as there.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_FUSED_OPS_TD
#define TESS_FUSED_OPS_TD

def Tess_LinearAddOp : Tess_Op<"linear_add", [Pure, InferTypeOpAdaptor]> {
  let summary = "a dense layer and the residual add after it";
  let description = [{
    `y = tess.linear(input, weight, bias) + addend`, the add in the GEMM's C
    (cuBLASLt's beta = 1). Made of a `tess.linear` whose one use is the
    `tess.add` right after it. Kernel: `tessera_cpu_linear_add`.

    Rules: (C1)-(C4) those of tess.linear; (C5) `addend` has the linear's
    result type.

    ```mlir
    %y = tess.linear_add %x, %w add %residual {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<64x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$input, Tess_Tensor:$weight,
                   Tess_Tensor:$addend, Optional<Tess_Tensor>:$bias,
                   UnitAttr:$transpose_weight);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `add` $addend attr-dict `:` functional-type(operands, results)
  }];
}

def Tess_LinearGeluOp : Tess_Op<"linear_gelu", [Pure, InferTypeOpAdaptor]> {
  let summary = "a dense layer with tanh-approximated GELU in its epilogue";
  let description = [{
    `preactivation = tess.linear(input, weight, bias)` and
    `result = tess.gelu(preactivation) {approximation = tanh}`, both written
    by one GEMM with GELU in its epilogue (the pre-activation is kept for
    the backward). Made of a `tess.linear` and the tanh `tess.gelu` of its
    result right after it. Kernel: `tessera_cpu_linear_gelu`.

    Rules: (C1)-(C4) those of tess.linear; both results have its result type.

    ```mlir
    %pre, %h = tess.linear_gelu %x, %w, %b
      : (tensor<2x32x64xf32>, tensor<64x256xf32>, tensor<256xf32>)
      -> (tensor<2x32x256xf32>, tensor<2x32x256xf32>)
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$weight,
                   Optional<Tess_FloatTensor>:$bias,
                   UnitAttr:$transpose_weight);
  let results = (outs Tess_FloatTensor:$preactivation,
                      Tess_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Tess_LinearGeluGradOp : Tess_Op<"linear_gelu_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "a bias-free dense layer with GELU's gradient in its epilogue";
  let description = [{
    `result = tess.gelu_grad(preactivation, tess.linear(input, weight))`
    with the tanh approximation: the input gradient of a GELU MLP's first
    layer output, from the second layer's `input` cotangent, in one GEMM
    (GELU's gradient in the GEMM's epilogue). Made of a bias-free `tess.linear` whose one
    use is the tanh `tess.gelu_grad` right after it. Kernel:
    `tessera_cpu_linear_dgelu`.

    Rules: (C1)-(C3) those of tess.linear; (C4) `preactivation` has the
    linear's result type.

    ```mlir
    %dpre = tess.linear_gelu_grad %dh, %w, %pre {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<256x64xf32>, tensor<2x32x256xf32>) -> tensor<2x32x256xf32>
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$input, Tess_FloatTensor:$weight,
                   Tess_FloatTensor:$preactivation, UnitAttr:$transpose_weight);
  let results = (outs Tess_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $preactivation attr-dict `:` functional-type(operands, results)
  }];
}

def Tess_MatmulAddOp : Tess_Op<"matmul_add", [Pure, InferTypeOpAdaptor]> {
  let summary = "a matrix product and the add after it";
  let description = [{
    `result = tess.matmul(lhs, rhs) + addend`, the add in the GEMM's C. The
    kernels read each element of `addend` before writing that element of
    the result, so the arena planner may give both one buffer: a weight
    gradient summed over blocks of rows (tess-chunk-loss-head) is one
    buffer. Made of a `tess.matmul` whose one use is the `tess.add` right
    after it. Kernel: `tessera_cpu_matmul_add`.

    Rules: (C1)-(C4) those of tess.matmul; (C5) `addend` has the product's
    type.

    ```mlir
    %dw1 = tess.matmul_add %dlogits, %h, %dw0 {transpose_lhs}
      : (tensor<16x100xf32>, tensor<16x64xf32>, tensor<100x64xf32>) -> tensor<100x64xf32>
    ```
  }];
  let arguments = (ins Tess_Tensor:$lhs, Tess_Tensor:$rhs, Tess_Tensor:$addend,
                   UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $addend attr-dict `:` functional-type(operands, results)
  }];
}

def Tess_MatmulBiasGradOp : Tess_Op<"matmul_bias_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "a weight gradient and the bias gradient, in one GEMM";
  let description = [{
    `result = tess.matmul(lhs, rhs)` over 2-D operands and
    `column_sum[n] = sum_r rhs[r, n]`: for `lhs = x`, `rhs = dy` (tokens in
    rows) with `transpose_lhs`, a linear layer's weight gradient and its
    bias gradient, which cuBLASLt's bias-gradient epilogue sums while the
    GEMM reads dy.
    Made of a `tess.matmul` and the `tess.reduce_sum` of its `rhs` (or of
    what `rhs` is a reshape of) over every dim but the last, right after it.
    Kernel: `tessera_cpu_matmul_bias_grad`.

    Rules: (C1) both operands have rank 2; (C2)-(C3) those of tess.matmul.

    ```mlir
    %dw, %db = tess.matmul_bias_grad %x, %dy {transpose_lhs}
      : (tensor<64x32xf32>, tensor<64x96xf32>) -> (tensor<32x96xf32>, tensor<96xf32>)
    ```
  }];
  let arguments = (ins Tess_Tensor:$lhs, Tess_Tensor:$rhs,
                   UnitAttr:$transpose_lhs);
  let results = (outs Tess_Tensor:$result, Tess_Tensor:$column_sum);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
}

def Tess_CrossEntropyWithGradOp : Tess_Op<"cross_entropy_with_grad",
    [Pure, InferTypeOpAdaptor]> {
  let summary = "the loss and its gradient in one pass over the logits";
  let description = [{
    `loss = tess.cross_entropy(logits, targets)` and
    `dlogits = tess.cross_entropy_grad(logits, targets, dloss)`, with the
    same `count_over` and `ignore_index`, from one read of each row of the
    logits. As tess.cross_entropy_grad's, the kernels may write dlogits
    over the logits (the arena planner gives them the logits' storage when
    nothing reads the logits afterwards). Made of a `tess.cross_entropy`
    and its gradient right after it (`CrossEntropyOp::fusedGradient`).
    Kernel: `tessera_cpu_cross_entropy_with_grad`.

    Rules: (C1)-(C3) those of tess.cross_entropy; `dloss` is `tensor<f32>`
    (its type constraint).

    ```mlir
    %loss, %dlogits = tess.cross_entropy_with_grad %logits, %targets, %dloss {ignore_index = -100 : i64}
      : (tensor<2x31x512xf32>, tensor<2x31xi64>, tensor<f32>) -> (tensor<f32>, tensor<2x31x512xf32>)
    ```
  }];
  let arguments = (ins Tess_FloatTensor:$logits, Tess_IndexTensor:$targets,
                   0DTensorOf<[F32]>:$dloss,
                   Optional<Tess_IndexTensor>:$all_targets,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$loss, Tess_FloatTensor:$dlogits);
  let assemblyFormat = [{
    $logits `,` $targets `,` $dloss (`count_over` $all_targets^)? attr-dict `:` functional-type(operands, results)
  }];
}

#endif // TESS_FUSED_OPS_TD
