//===- Passes.td - Tessera's passes --------------------------*- tablegen -*-===//
//
// Every flag carries the `tess-` prefix. Groups are under banners and
// alphabetical within a group.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PASSES_TD
#define TESSERA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Fusion: decomposed ONNX patterns -> Transformer-level tess ops
//===----------------------------------------------------------------------===//

def FuseActivations : Pass<"tess-fuse-activations", "::mlir::func::FuncOp"> {
  let summary = "Fuse decomposed GELU (erf and tanh forms) and SiLU chains";
  let description = [{
    Exporters spell activations out as elementwise chains. This pass finds
    them and replaces each by one op, so kernels and autodiff see GELU/SiLU.

    Before (GPT-2's tanh GELU as torch exports it):
    ```mlir
    %h = tess.mul %x, %c0_5 ...
    %p = tess.pow %x, %c3 ...
    %q = tess.mul %p, %c0_044715 ...
    %s = tess.add %x, %q ...
    %t = tess.mul %s, %c0_79788 ...
    %u = tess.tanh %t ...
    %v = tess.add %u, %c1 ...
    %y = tess.mul %h, %v ...
    ```
    After:
    ```mlir
    %y = tess.gelu %x {approximation = #tess<gelu_approximation tanh>} : tensor<64x256xf32>
    ```
    Also `0.5 * x * (1 + erf(x / sqrt 2))` (any association of the
    products, division by sqrt 2 or multiplication by 1/sqrt 2) becomes
    `tess.gelu` with `approximation = none`, `x * sigmoid(x)` becomes
    `tess.silu`, and SwiGLU's `silu(gate) * up` (silu feeding only the
    product) becomes `tess.swiglu gate, up`. Constants must match to within
    1e-6 relative.
  }];
  let constructor = "::tessera::createFuseActivationsPass()";
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FuseAttention : Pass<"tess-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse matmul-scale-mask-softmax-matmul into tess.attention";
  let description = [{
    Recognizes scaled dot-product attention as exporters write it:
    `softmax(Q K^T * s + M) V` (the scale may also divide, or multiply Q and
    K separately) and replaces it by one `tess.attention`. An additive mask
    that hides exactly the keys after each query becomes the `causal` flag,
    one that also hides all but the last W of them (a sliding window) the
    flag and `window = W`; a mask that hides nothing is dropped; any other
    mask stays an operand. The mask is read from its values when it is a
    constant, and from its arithmetic when it is a comparison of token
    positions (`kv_pos <= q_pos`, `kv_pos > q_pos - W`), which the importer
    leaves unfolded at long sequences. Gemma-2's logit softcapping between
    the scale and the mask, `mul(tanh(div(s, c)), c)`, becomes
    `softcap = c`. K/V heads repeated for grouped-query
    attention (`broadcast` + `reshape` of `[B, Hkv, 1, S, D]`) are folded
    back, so the op sees the `Hkv` heads and does the grouping itself.

    Before:
    ```mlir
    %s = tess.matmul %q, %k {transpose_rhs} ...
    %t = tess.mul %s, %scale ...
    %u = tess.add %t, %causal_mask ...
    %p = tess.softmax %u {axis = -1 : i64} ...
    %o = tess.matmul %p, %v ...
    ```
    After:
    ```mlir
    %o = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64} ...
    ```
  }];
  let constructor = "::tessera::createFuseAttentionPass()";
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FuseHeadSplit : Pass<"tess-fuse-head-split", "::mlir::func::FuncOp"> {
  let summary = "One transpose for a fused QKV's heads, then a split the "
                "arena turns into views";
  let description = [{
    A tensor split along its last dim into equal pieces, each viewed as
    `[..., H, Dh]` and transposed the same way (GPT-2's fused QKV into the
    `[B, H, T, Dh]` heads the attention reads), becomes one view of the whole
    as `[..., N, H, Dh]`, one transpose with the piece dim first, and a split
    along that outermost dim. The transposes move the same bytes; the old
    split copied each strided piece, the new one's pieces are contiguous and
    the arena planner makes them views. The values and every other use are
    unchanged. tesserac runs it right before the lowering (after any
    partitioning and remat), so the planner's search sees the model's graph.

    Before:
    ```mlir
    %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 64, 64, 64>} ...
    %q4 = tess.reshape %q : (tensor<2x32x64xf32>) -> tensor<2x32x4x16xf32>
    %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} ...
    (the same for %k and %v)
    ```
    After:
    ```mlir
    %p = tess.reshape %qkv : (tensor<2x32x192xf32>) -> tensor<2x32x3x4x16xf32>
    %t = tess.transpose %p {permutation = array<i64: 2, 0, 3, 1, 4>} ...
    %q1, %k1, %v1 = tess.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1>} ...
    %qh = tess.reshape %q1 : (tensor<1x2x4x32x16xf32>) -> tensor<2x4x32x16xf32>
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def PackGateUpProjections
    : Pass<"tess-pack-gate-up-projections", "::mlir::func::FuncOp"> {
  let summary = "SwiGLU's gate and up projections as one linear";
  let description = [{
    The two `tess.linear` of one input that a `tess.swiglu` alone reads as
    its gate and up (one weight orientation, both or neither with a bias,
    one result type `[.., F]`: the Llama-family MLP) become one linear of
    the concatenated weights `[2F, D]` (and biases) producing `[.., 2F]`,
    and the swiglu becomes `tess.packed_swiglu` of it, which reads the gate
    and up halves of each row in place. Run before autodiff: the backward
    is then one `tess.packed_swiglu_grad` writing one `[.., 2F]` gradient,
    one dx GEMM (K = 2F) and one dW GEMM for the pair, where unpacked it is
    two of each. The weights stay the model's own parameters, concatenated
    in the step and their gradient split back.

    tesserac runs it on one-device programs under `--pack-gate-up on`; the
    default is off until the packed step has been timed against the
    unpacked one on a GPU (the Llama 3.2 1B benchmark), and should flip to
    on if it is faster there.

    Before:
    ```mlir
    %g = tess.linear %x, %wg {transpose_weight} : (tensor<2x32x64xf32>, tensor<128x64xf32>) -> tensor<2x32x128xf32>
    %u = tess.linear %x, %wu {transpose_weight} : (tensor<2x32x64xf32>, tensor<128x64xf32>) -> tensor<2x32x128xf32>
    %y = tess.swiglu %g, %u : tensor<2x32x128xf32>
    ```
    After:
    ```mlir
    %w = tess.concat %wg, %wu {axis = 0 : i64} : (tensor<128x64xf32>, tensor<128x64xf32>) -> tensor<256x64xf32>
    %gu = tess.linear %x, %w {transpose_weight} : (tensor<2x32x64xf32>, tensor<256x64xf32>) -> tensor<2x32x256xf32>
    %y = tess.packed_swiglu %gu : (tensor<2x32x256xf32>) -> tensor<2x32x128xf32>
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def PackQkvProjections
    : Pass<"tess-pack-qkv-projections", "::mlir::func::FuncOp"> {
  let summary = "The q, k and v projections of one input as one linear and a split";
  let description = [{
    Three `tess.linear` of one input whose results reach the query, key and
    value of one `tess.attention` (no mask, no dropout) as heads (a reshape
    of the last dim to `[H, Dh]`, the transpose `[0, 2, 1, 3]` and, for q
    and k, an optional `tess.rotary`: the Llama-family form) become one
    linear of the concatenated weights (and biases) and a `tess.split` in
    q, k, v order. Run before autodiff: the backward is then one dx and one
    dW GEMM over the packed gradient, and `tess-fuse-packed-attention` reads
    the pieces in place. The weights stay the model's own parameters,
    concatenated in the step. tesserac runs it on one-device programs (the
    sharding search splits each projection's columns, not a packed weight's
    pieces).

    Before:
    ```mlir
    %q = tess.linear %x, %wq {transpose_weight} ...
    %k = tess.linear %x, %wk {transpose_weight} ...
    %v = tess.linear %x, %wv {transpose_weight} ...
    ```
    After:
    ```mlir
    %w = tess.concat %wq, %wk, %wv {axis = 0 : i64} ...
    %qkv = tess.linear %x, %w {transpose_weight} ...
    %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 64, 16, 16>} ...
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FusePackedAttention
    : Pass<"tess-fuse-packed-attention", "::mlir::func::FuncOp"> {
  let summary = "Attention over a fused QKV projection as tess.packed_attention";
  let description = [{
    A `tess.attention` (no mask, no dropout) whose q, k and v are the three
    pieces of a split of one `[B, T, (Hq + 2 Hkv) Dh]` tensor along its last
    dim, each viewed as `[B, T, H, Dh]` and transposed to `[B, H, T, Dh]`
    (GPT-2's fused c_attn), becomes `tess.packed_attention` on that tensor;
    its `tess.attention_grad` becomes `tess.packed_attention_grad`, which
    reads the forward's output and log-sum-exp instead of rerunning the
    forward, and writes the gradient in the packed layout. Then the function
    is canonicalized, so the head transposes of q, k, v, y, dy and of the
    three gradients, and the concat of the gradients, are gone. When q and
    k are rotated alike after the head transpose (Llama-family: a
    `tess.rotary` with an `[X, 1, T, Dh]` table pair), the packed op reads
    the projection rotated in its own layout (one `tess.rotary` with
    `rotated_heads = Hq + Hkv`), and the gradient's adjoint rotations,
    transposes and concat become one adjoint rotation of the packed
    gradient. tesserac runs it right before the lowering (after
    partitioning and remat), before `tess-fuse-head-split`.

    Before:
    ```mlir
    %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 64, 64, 64>} ...
    %qh = tess.transpose (tess.reshape %q) {permutation = array<i64: 0, 2, 1, 3>} ...
    %y = tess.attention %qh, %kh, %vh {causal, scale = 2.500000e-01 : f64} ...
    %dq, %dk, %dv = tess.attention_grad %qh, %kh, %vh, %dyh {causal, ...} ...
    ```
    After:
    ```mlir
    %y, %lse = tess.packed_attention %qkv {causal, key_heads = 4 : i64, query_heads = 4 : i64, scale = 2.500000e-01 : f64} ...
    %dqkv = tess.packed_attention_grad %qkv, %y, %lse, %dy {causal, ...} ...
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def ScheduleResidualAdds : Pass<"tess-schedule-residual-adds", "::mlir::func::FuncOp"> {
  let summary = "Move each sum of two linears' results right after the later linear";
  let description = [{
    A `tess.add` one of whose operands is the result (and its only use) of a
    `tess.linear`, and whose other operand already exists before that
    linear, moves right after it (after the later of two such linears).
    tess-fuse-epilogues then makes the pair one `tess.linear_add` (one
    call, `tessera_*_linear_add`, the other operand as the GEMM's C).
    Autodiff makes these sums where one tensor feeds several linears
    (q/k/v, gate/up) and puts the weight gradients between. An add right
    after a norm gradient whose dx it sums stays (tess-fuse-epilogues makes
    that pair one norm gradient with a residual). Only the order changes.
    tesserac runs it right before the lowering.

    Before:
    ```mlir
    %a = tess.linear %dq, %wq {transpose_weight} ...
    %dwq = tess.matmul %dq, %x {transpose_lhs} ...
    %b = tess.linear %dk, %wk {transpose_weight} ...
    %dwk = tess.matmul %dk, %x {transpose_lhs} ...
    %dx = tess.add %a, %b ...
    ```
    After:
    ```mlir
    %a = tess.linear %dq, %wq {transpose_weight} ...
    %dwq = tess.matmul %dq, %x {transpose_lhs} ...
    %b = tess.linear %dk, %wk {transpose_weight} ...
    %dx = tess.add %a, %b ...
    %dwk = tess.matmul %dk, %x {transpose_lhs} ...
    ```
  }];
}

def ChunkLossHead : Pass<"tess-chunk-loss-head", "::mlir::func::FuncOp"> {
  let summary = "Compute the head and its loss a block of rows at a time";
  let description = [{
    A large vocabulary makes the head's logits the largest tensor of the
    step (Llama 3's 128,256 classes over 16,384 tokens are 4.2 GB in bf16),
    and they live at the step's peak, between the forward and the backward.
    Where the logits of a `tess.linear` head feed only a fused
    `tess.cross_entropy` / `tess.cross_entropy_grad` pair, and the
    gradient feeds only the input gradient's `tess.linear` and the weight
    gradient's `tess.matmul` (`transpose_lhs`, over the head's input), the
    pass splits the rows into K equal blocks and computes, block after
    block: the logits, the loss and its gradient (`count_over` the whole
    batch's targets, so that the blocks' losses add up to the mean), the
    input gradient's rows and the weight gradient, summed over blocks
    (`tess.add` right after each matmul: one `matmul_add` call, in place).
    The arena planner then reuses one block's logits for the next: the
    whole [rows, classes] tensor never exists. K is the smallest divisor of
    the rows (at most 64) that keeps one block's logits within
    `max-block-bytes`; a head that already fits, or whose rows have no such
    divisor, is left as it is. tesserac runs it right before the lowering
    (`--logits-block`).

    Before:
    ```mlir
    %logits = tess.linear %h, %w {transpose_weight} ...
    %loss = tess.cross_entropy %logits, %t ...
    %dl = tess.cross_entropy_grad %logits, %t, %dloss ...
    %dh = tess.linear %dl, %w ...
    %dw = tess.matmul %dl2, %h2 {transpose_lhs} ...
    ```
    After (K = 2):
    ```mlir
    %h0, %h1 = tess.split %h2 ...   %t0, %t1 = tess.split %t1d ...
    %l0 = tess.linear %h0, %w {transpose_weight} ...
    %loss0 = tess.cross_entropy %l0, %t0 count_over %t ...
    %dl0 = tess.cross_entropy_grad %l0, %t0, %dloss count_over %t ...
    %dh0 = tess.linear %dl0, %w ...
    %dw0 = tess.matmul %dl0, %h0 {transpose_lhs} ...
    %l1 = ... %dh1 = ...
    %dw1 = tess.matmul %dl1, %h1 {transpose_lhs} ...
    %dw = tess.add %dw0, %dw1 ...
    %loss = tess.add %loss0, %loss1 ...
    %dh = tess.concat %dh0, %dh1 ...
    ```
  }];
  let options = [
    Option<"maxBlockBytes", "max-block-bytes", "int64_t",
           /*default=*/"1073741824",
           "The most bytes one block's logits may take (0: never split)">,
  ];
}

def FuseEpilogues : Pass<"tess-fuse-epilogues", "::mlir::func::FuncOp"> {
  let summary = "Make each pair of adjacent ops that one kernel call computes one op";
  let description = [{
    The kernels compute some adjacent pairs in one call, the second op in
    the first's epilogue. Each such pair becomes one op, which the
    interpreter, the arena planner and the lowering all see:
    - `tess.linear` + the tanh `tess.gelu` of its result: `tess.linear_gelu`
      (both results kept);
    - bias-free `tess.linear` + the tanh `tess.gelu_grad` whose dy is its
      result (its only use): `tess.linear_gelu_grad`;
    - `tess.linear` + the `tess.add` of its result (its only use) and an
      earlier value of the same type: `tess.linear_add`;
    - `tess.matmul` + the `tess.reduce_sum` of its rhs over every dim but
      the last (a weight and a bias gradient): `tess.matmul_bias_grad`;
    - `tess.matmul` + the `tess.add` of its result (its only use):
      `tess.matmul_add`;
    - `tess.layer_norm_grad` / `tess.rms_norm_grad` + the `tess.add` of its
      dx (its only use): the same op with a `residual` operand.
    - `tess.cross_entropy` + its `tess.cross_entropy_grad` on the same
      logits and targets: `tess.cross_entropy_with_grad`.
    Only adjacent pairs fuse (the scheduling passes before it decide where
    ops run); the fused op takes the second op's place. tesserac runs it
    last before the lowering (`tess-lowering-preparation`).

    Before:
    ```mlir
    %pre = tess.linear %x, %w1, %b1 ...
    %h = tess.gelu %pre {approximation = #tess<gelu_approximation tanh>} ...
    %m = tess.linear %h, %w2, %b2 ...
    %y = tess.add %m, %x ...
    ```
    After:
    ```mlir
    %pre, %h = tess.linear_gelu %x, %w1, %b1 ...
    %y = tess.linear_add %h, %w2, %b2 add %x ...
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def LookUpBeforeCast : Pass<"tess-look-up-before-cast", "::mlir::func::FuncOp"> {
  let summary = "Look embedding rows up in the master table, then cast them";
  let description = [{
    A `tess.cast` whose every user is a `tess.embedding` reading it as the
    table (mixed precision's compute copy of a table nothing else reads: an
    untied model's token embedding) is dropped; each lookup reads the cast's
    input instead and its rows are cast. A lookup commutes with an
    elementwise cast, so the values are the same, while the step no longer
    writes (or keeps, until the lookup) a [vocabulary, d] copy: 1 GiB of
    bf16 for Llama 3 8B. Part of tess-lowering-preparation, after autodiff.

    Before:
    ```mlir
    %t = tess.cast %wte : tensor<512x64xf32> to tensor<512x64xbf16>
    %e = tess.embedding %t, %ids : (tensor<512x64xbf16>, tensor<2x32xi64>) -> tensor<2x32x64xbf16>
    ```
    After:
    ```mlir
    %r = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
    %e = tess.cast %r : tensor<2x32x64xf32> to tensor<2x32x64xbf16>
    ```
  }];
}

def ReadComputeCopies : Pass<"tess-read-compute-copies", "::mlir::func::FuncOp"> {
  let summary = "Let @forward_backward read the compute-precision copies of the parameters it only casts";
  let description = [{
    Mixed precision casts every f32 master weight to the compute type at the
    start of each step: for Llama 3.2 1B, 147 casts reading 4.9 GB and
    writing 2.5 GB a step, into copies live for the whole step. The driver
    can keep that copy instead, rounded from the master by the optimizer as
    it writes the master (one more store in AdamW's pass), so the step reads
    it as an input and makes nothing.

    On `@forward_backward` of a bf16 or fp16 step (`tess.precision`), each
    `tess.parameter` argument whose every user is a `tess.cast` to the
    compute type becomes an argument of the compute type and the casts are
    dropped: the values the step reads are the same bit for bit (the
    driver's copy is the same round-to-nearest-even cast). A parameter with
    another use (a lookup tess-look-up-before-cast left on the master table,
    a collective) stays the f32 master. The lowering records which
    parameters are read as copies in program.h's `parameter_step_dtypes`.
    Pipelined programs' chunk functions keep their casts (their prepare
    makes them once a step). Part of tess-lowering-preparation, after
    tess-look-up-before-cast.

    Before:
    ```mlir
    func.func @forward_backward(%w: tensor<64x64xf32> {tess.parameter = "w"}, ...)
        attributes {tess.precision = "bf16"} {
      %c = tess.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
      %y = tess.linear %x, %c : ...
    ```
    After:
    ```mlir
    func.func @forward_backward(%w: tensor<64x64xbf16> {tess.parameter = "w"}, ...)
        attributes {tess.precision = "bf16"} {
      %y = tess.linear %x, %w : ...
    ```
  }];
}

def ScheduleGeluGrad : Pass<"tess-schedule-gelu-grad", "::mlir::func::FuncOp"> {
  let summary = "Move each gelu_grad right after the linear that makes its dy";
  let description = [{
    A `tess.gelu_grad` whose `dy` is the result (and its only use) of a
    bias-free `tess.linear` (the input gradient of the layer the GELU fed)
    moves right after that linear, provided its input is defined before it.
    tess-fuse-epilogues then makes the pair one `tess.linear_gelu_grad`
    (one call, `tessera_*_linear_dgelu`: one GEMM with cuBLASLt's DGELU
    epilogue on the GPU). Only the order changes. tesserac runs it right before the lowering.

    Before:
    ```mlir
    %g = tess.linear %dy, %w {transpose_weight} ...
    %dw = tess.matmul %h, %dy {transpose_lhs} ...
    %dx = tess.gelu_grad %pre, %g {approximation = #tess<gelu_approximation tanh>} ...
    ```
    After:
    ```mlir
    %g = tess.linear %dy, %w {transpose_weight} ...
    %dx = tess.gelu_grad %pre, %g {approximation = #tess<gelu_approximation tanh>} ...
    %dw = tess.matmul %h, %dy {transpose_lhs} ...
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def ExpandWeightGrads
    : Pass<"tess-expand-weight-grads", "::mlir::func::FuncOp"> {
  let summary = "Each linear_weight_grad as the reshapes to rows and the GEMM";
  let description = [{
    `tess.linear_weight_grad` keeps its rows' dims so that the search, the
    partition and the stage costs see a split of any of them as a partial
    sum of the weight's gradient (a sequence split's tokens included). Once
    the step is partitioned, the rows of each rank's block are contiguous
    in memory whatever was split, and the gradient is the GEMM the kernels
    run: both operands viewed as `[rows, features]` (tess.reshape, a view)
    and one `tess.matmul {transpose_lhs}`, the form that tess-fuse-epilogues
    fuses with a bias gradient and tess-chunk-loss-head cuts into blocks.
    tesserac runs it first in the lowering preparation.

    Before:
    ```mlir
    %dw = tess.linear_weight_grad %x, %dy {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<2x32x192xf32>) -> tensor<192x64xf32>
    ```
    After:
    ```mlir
    %x2 = tess.reshape %x : (tensor<2x32x64xf32>) -> tensor<64x64xf32>
    %dy2 = tess.reshape %dy : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
    %dw = tess.matmul %dy2, %x2 {transpose_lhs}
      : (tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<192x64xf32>
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def ScheduleLossGradient
    : Pass<"tess-schedule-loss-gradient", "::mlir::func::FuncOp"> {
  let summary = "Move each cross_entropy right before its gradient";
  let description = [{
    A `tess.cross_entropy` and the `tess.cross_entropy_grad` of the same
    logits, targets and ignore index are one fused kernel
    (tess-fuse-epilogues) and, where the logits are large, one block of rows
    at a time (tess-chunk-loss-head), when the gradient directly follows the
    loss. A step partitioned for a mesh computes between them the mean's
    all-reduced count of targets (the gradient's scale) and the all-reduce
    of the loss. The loss moves down to right before its gradient, and the
    ops between them that read the loss's value (directly or not) move to
    right after it, in their order; the others stay. Only the order changes;
    a gradient that reads the loss's value is left alone. tesserac runs it
    right before the lowering.

    Before:
    ```mlir
    %loss = tess.cross_entropy %logits, %t ...
    %sum = tess.all_reduce %loss {axis = "dp"} : tensor<f32>
    %count = tess.all_reduce %n {axis = "dp"} : tensor<f32>
    %scale = tess.div %seed, %count ...
    %dl = tess.cross_entropy_grad %logits, %t, %scale ...
    ```
    After:
    ```mlir
    %count = tess.all_reduce %n {axis = "dp"} : tensor<f32>
    %scale = tess.div %seed, %count ...
    %loss = tess.cross_entropy %logits, %t ...
    %dl = tess.cross_entropy_grad %logits, %t, %scale ...
    %sum = tess.all_reduce %loss {axis = "dp"} : tensor<f32>
    ```
  }];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FuseLinear : Pass<"tess-fuse-linear", "::mlir::func::FuncOp"> {
  let summary = "Turn matmul by a weight (+ bias) into tess.linear";
  let description = [{
    `x @ W + b` where `W` is a rank-2 `tess.parameter` (possibly through a
    transpose, as PyTorch's `nn.Linear` exports) becomes `tess.linear`, with
    `transpose_weight` when the stored weight is `[out, in]`. A following
    `add` of a `[out]` bias is absorbed; reshapes that only flatten the
    leading dims around a linear (GPT-2's `view`s around `addmm`) are
    removed.

    Before:
    ```mlir
    %wt = tess.transpose %w {permutation = array<i64: 1, 0>} ...
    %m = tess.matmul %x, %wt ...
    %y = tess.add %m, %b ...
    ```
    After:
    ```mlir
    %y = tess.linear %x, %w, %b {transpose_weight} ...
    ```
  }];
  let constructor = "::tessera::createFuseLinearPass()";
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FuseNorms : Pass<"tess-fuse-norms", "::mlir::func::FuncOp"> {
  let summary = "Fuse decomposed LayerNorm and RMSNorm chains";
  let description = [{
    LayerNorm: `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * g + b`;
    RMSNorm: `x * rsqrt(mean(x^2) + eps) * g` in its spellings (`rsqrt`,
    `reciprocal(sqrt)`, `1 / sqrt`, `div by sqrt`), including Llama's casts
    to fp32 and back. Reductions must run over the trailing dims.

    Before:
    ```mlir
    %p = tess.pow %x, %two ...
    %m = tess.reduce_mean %p {dims = array<i64: -1>, keep_dims} ...
    %e = tess.add %m, %eps ...
    %r = tess.rsqrt %e ...
    %n = tess.mul %x, %r ...
    %y = tess.mul %g, %n ...
    ```
    After:
    ```mlir
    %y = tess.rms_norm %x scale %g {epsilon = 1.0e-06 : f64} ...
    ```
  }];
  let constructor = "::tessera::createFuseNormsPass()";
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FuseRotary : Pass<"tess-fuse-rotary", "::mlir::func::FuncOp"> {
  let summary = "Fuse the decomposed rotary position embedding";
  let description = [{
    `x * cos + rotate_half(x) * sin`, rotate_half(x) being
    `concat(-x[..., h:], x[..., :h])` on the last dim (h = D / 2), the form
    of Llama, Mistral, Qwen, Gemma, Phi and GPT-NeoX exports, becomes one
    `tess.rotary` (products and the sum in either order). Only where cos
    and sin depend on no trainable parameter: the op gives them no
    gradient. cos and sin of lower rank get leading unit dims.

    Before:
    ```mlir
    %xc = tess.mul %x, %cos ...
    %hi = tess.slice %x {starts = [0, 0, 0, 8], limits = [2, 4, 32, 16], ...}
    %lo = tess.slice %x {starts = [0, 0, 0, 0], limits = [2, 4, 32, 8], ...}
    %n = tess.neg %hi ...
    %r = tess.concat %n, %lo {axis = -1 : i64} ...
    %rs = tess.mul %r, %sin ...
    %y = tess.add %xc, %rs ...
    ```
    After:
    ```mlir
    %y = tess.rotary %x, %cos, %sin ...
    ```
  }];
  let constructor = "::tessera::createFuseRotaryPass()";
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

//===----------------------------------------------------------------------===//
// Training: the forward graph -> a training step
//===----------------------------------------------------------------------===//

def BuildTraining : Pass<"tess-build-training", "::mlir::ModuleOp"> {
  let summary = "Build @forward_backward and @optimizer_step from @forward";
  let description = [{
    Turns the forward graph that `tesserac --emit=mlir` prints,
    `func.func @forward(%input_ids) -> logits` with `tess.parameter` ops, into
    a training step by reverse-mode automatic differentiation. `@forward`
    is kept as it is; the module gains two functions:

    `@forward_backward` takes one `f32` master weight per trainable
    parameter (argument attribute `tess.parameter = "<name>"`), one argument
    per buffer (a `tess.parameter` without `trainable`; `tess.buffer`), the
    token ids, the targets (`[B, T]` integers: for `causal-lm` the ids
    shifted by one, for `mlm` the labels; `ignore-index` marks positions
    without a loss; the runtime provides them) and the loss scale
    (`tensor<f32>`). It returns the unscaled mean cross-entropy and one
    gradient per trainable parameter (`tess.gradient = "<name>"`) of the
    loss times the loss scale.

    With `precision=bf16` or `fp16`, every `f32` tensor of the forward
    becomes that type: the master weights are cast down on entry and the
    gradients are returned in the compute type. The loss reads the logits
    in the compute type (its kernels compute in `f32`), and its gradient
    comes out in it.

    A linear head whose classes are not a multiple of `vocabulary-multiple`
    is padded to the next multiple (GPT-2's 50,257 to 50,304), so that the
    logits, their gradient and the head's GEMMs are aligned: its weight gets
    zero rows (`tess.concat` with a zero `tess.constant`) and its bias the
    lowest finite value for the padded classes, whose softmax probability
    and gradient are then exactly 0. The loss and every gradient are the
    unpadded head's; `@forward_backward` records the model's vocabulary in
    `tess.vocabulary`.

    The backward walks the ops in reverse, asking each for its
    vector-Jacobian product (`DifferentiableOpInterface`) and summing the
    cotangents of values used several times with `tess.add`. An op without
    the interface between a parameter and the loss is an error. Dropout ops
    (and attentions with dropout) get distinct `seed`s, 0, 1, 2, ... in
    program order; their gradients reuse them, so masks are regenerated,
    not stored.

    `@optimizer_step` takes the master weights, the gradients, AdamW's first
    and second moments (`f32`), the learning rate, the step (from 1) and the
    gradient scale (the runtime's clipping factor over the loss scale) and
    returns the updated weights and moments, one `tess.adamw` per parameter.

    Before:
    ```mlir
    func.func @forward(%ids: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
      %w = tess.parameter "wte" trainable : tensor<16x4xf32>
      %e = tess.embedding %w, %ids : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
      %y = tess.linear %e, %w {transpose_weight} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
      return %y : tensor<2x8x16xf32>
    }
    ```
    After (`@forward` unchanged):
    ```mlir
    func.func @forward_backward(%wte: tensor<16x4xf32> {tess.parameter = "wte"},
        %ids: tensor<2x8xi64> {tess.input = "input_ids"}, %targets: tensor<2x8xi64> {tess.input = "targets"},
        %loss_scale: tensor<f32> {tess.input = "loss_scale"})
        -> (tensor<f32>, tensor<16x4xf32> {tess.gradient = "wte"})
        attributes {tess.loss = "causal-lm", tess.precision = "fp32"} {
      %e = tess.embedding %wte, %ids ...
      %y = tess.linear %e, %wte {transpose_weight} ...
      %loss = tess.cross_entropy %y, %targets {ignore_index = -100 : i64} ...
      %dy = tess.cross_entropy_grad %y, %targets, %loss_scale ...
      %de = tess.linear %dy, %wte ...
      %dw1 = tess.matmul %dy2, %e2 {transpose_lhs} ...
      %dw2 = tess.embedding_grad %ids, %de ...
      %dw = tess.add %dw1, %dw2 ...
      return %loss, %dw : tensor<f32>, tensor<16x4xf32>
    }
    func.func @optimizer_step(%wte: tensor<16x4xf32>, %g: tensor<16x4xf32>,
        %m: tensor<16x4xf32>, %v: tensor<16x4xf32>, %lr: tensor<f32>,
        %step: tensor<i64>, %grad_scale: tensor<f32>)
        -> (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>) {
      %p2, %m2, %v2 = tess.adamw %wte, %g, %m, %v, %lr, %step, %grad_scale ...
      return %p2, %m2, %v2 : ...
    }
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"causal-lm\"",
           "The training objective, which says how the runtime builds the "
           "targets: causal-lm (next token) or mlm (masked labels)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "The compute type of the forward and backward: fp32, bf16 or "
           "fp16 (master weights and optimizer state stay fp32)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "The target value that marks a position without a loss">,
    Option<"vocabularyMultiple", "vocabulary-multiple", "int64_t",
           /*default=*/"64",
           "Pad a linear head's classes to a multiple of this (0 or 1: "
           "never)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "AdamW's first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "AdamW's second-moment decay">,
    Option<"adamEpsilon", "adam-epsilon", "double", /*default=*/"1.0e-8",
           "AdamW's denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "AdamW's decoupled weight decay">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect",
                           "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Plan: the decisions every later pass reads
//===----------------------------------------------------------------------===//

def FitMemory : Pass<"tess-fit-memory", "::mlir::ModuleOp"> {
  let summary = "Decide the recomputation and the optimizer offload that fit "
                "one device, and write them in the module's #tess.plan";
  let description = [{
    The first decision of the compile's `search` phase, on the module's
    `@forward` before the training step exists: what the step compiled for
    one device (tess-build-training with q/k/v packed, tess-rematerialize,
    the lowering preparation, on a copy) needs by the one memory analysis
    (lib/Analysis/StepMemory.h: its arena planned from liveness, the
    training state, the GEMM scratch), against `memory-limit`. It takes the
    least recomputation that fits: none, else selective, else full (only
    `remat` when pinned). When none fits with the optimizer state on the
    device, the plan offloads it (the executable's `--offload optimizer`:
    masters and moments in host memory), with the least recomputation that
    fits so, and a remark says why; `offload` pins that choice either way.

    The decision is the module's `#tess.plan` (its `remat` and `offload`,
    replacing any plan there): tess-search-sharding adds the mesh and the
    ZeRO stage to it, and the search is calibrated by the step recomputing
    what it says.

    ```mlir
    // tess-fit-memory{memory-limit=4718592 precision=bf16}
    module attributes {tess.plan = #tess.plan<remat = "selective">} {
      func.func @forward(...) {...}
    }
    ```

    On a mesh of several devices (`mesh`, or `devices` more than one, the
    devices whose mesh tess-search-sharding chooses) nothing is measured:
    the search divides the step without recomputation (or the pinned one)
    and checks its own bound.

    Errors (their advice names tesserac's flags): no recomputation fits
    even with the optimizer offloaded, with what each mode needs and what
    the offloaded step would hold, priced on the cluster's host where the
    cluster has one; an offload pinned on a mesh; options that do not parse
    (a cluster that is neither built in nor a file, a mesh that does not
    fit it, an unknown mode).
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"h200\"",
           "h200, h200-multinode, a100-megatron or a cluster JSON file: its "
           "device memory is the default limit, its host prices the "
           "offload">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The device mesh: 2x4, 8 or dp=2,tp=4 (empty: one device)">,
    Option<"devices", "devices", "int64_t", /*default=*/"0",
           "The devices tess-search-sharding chooses a mesh of (its "
           "`devices`; 0: the mesh's)">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes the step must fit on one device (0: the cluster's device "
           "memory)">,
    Option<"remat", "remat", "std::string", /*default=*/"\"\"",
           "Pin the recomputation: none, selective or full (empty: the "
           "least that fits)">,
    Option<"offload", "offload", "std::string", /*default=*/"\"\"",
           "Pin the optimizer offload: optimizer or none (empty: offloaded "
           "only when nothing else fits)">,
    Option<"loss", "loss", "std::string", /*default=*/"\"causal-lm\"",
           "The step's objective (tess-build-training's loss)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "The step's precision (tess-build-training's precision)">,
    Option<"vocabularyMultiple", "vocabulary-multiple", "int64_t",
           /*default=*/"64",
           "The head's padding (tess-build-training's vocabulary-multiple)">,
    Option<"logitsBlockBytes", "logits-block-bytes", "int64_t",
           /*default=*/"int64_t(1) << 30",
           "The lowering preparation's largest block of the head's logits "
           "(0: never split)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect",
                           "::mlir::func::FuncDialect"];
}

def SearchPipeline : Pass<"tess-search-pipeline", "::mlir::ModuleOp"> {
  let summary = "Search the pipeline plan of @forward on a cluster and write "
                "it as the module's #tess.plan";
  let description = [{
    Runs the inter-op search (lib/Pipeline/InterOpSearch.h: Alpa's dynamic
    program over the chain of the program's units, each stage's submesh
    planned DP x TP with or without ZeRO-1, the micro-batches, the schedule
    and the recomputation per stage, every candidate fitting the device
    memory) on the module's `@forward`, whose batch is the step's global
    batch, and writes the plan it finds as the module's `#tess.plan`: the
    stage mesh every stage runs on, ZeRO-1 inside it (`zero = 1`) where the
    search shards the stages' optimizer state, the recomputation (a stage
    that recomputes otherwise says so on its chunks), the stage count,
    schedule and micro-batches, and one `#tess.chunk` per chunk with its
    device and its first and last unit (embedding, layers, head).

    The search prices each candidate at any micro-batch from the training
    step built at two batches (tess-build-training with `loss`, `precision`
    and `vocabulary-multiple`, q/k/v apart), the forward taken to each batch
    from the module's own; its activations are scaled to the step the
    compile measures for one device (CompiledStepMemory.h, with
    `logits-block-bytes`), and a plan on one device is decided by that
    step's measured peak, recomputing more until it fits.

    ```mlir
    // tess-search-pipeline{cluster=eight-small-devices.json zero=0} on a
    // forward at batch 4: two micro-batches of 2 samples.
    module attributes {tess.plan = #tess.plan<
        mesh = #tess.mesh<dp = 2, tp = 2>, stages = 2, schedule = "1f1b",
        microbatches = 2, chunks = [#tess.chunk<device = 0, units = 0 to 1>,
                                    #tess.chunk<device = 1, units = 2 to 3>]>} {
      func.func @forward(%ids: tensor<2x31xi64>) -> tensor<2x31x512xf32> {...}
    }
    ```

    The module is left at one micro-batch (the global batch over the plan's
    micro-batches, ForwardBatch.h): the step a pipelined plan runs, which
    the training phase builds and the plan phase then plans (its mesh joins
    when the stages are partitioned), so the compile continues on the
    module the pass leaves; `tesserac --explain --pipeline` makes the same decision
    (PipelinePlan.h's decidePipelinePlan) and prints it with the stages'
    predicted time and memory.

    The pins are constraints on the search, not another path: `stages`,
    `micro-batches`, `schedule`, `remat`, `zero` (0 or 1), the stages'
    `tensor-parallel` degree and `stage-units` (each stage's unit count)
    force their choice, `devices` the devices used, `memory-limit` the
    bytes a device may hold.

    Errors, each naming the option at fault: a cluster that is neither built
    in nor a readable file, an option out of range or that does not parse,
    a module without `@forward` or whose forward has no common batch, a
    pinned choice the program or cluster cannot take, no plan that fits,
    and a plan the compiled driver cannot run (stages of different meshes,
    ZeRO-1 on some stages only, a stage with fewer layers than its
    interleaved chunks), with the flag that pins one it can.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"h200\"",
           "h200, h200-multinode, a100-megatron or a cluster JSON file">,
    Option<"devices", "devices", "int64_t", /*default=*/"0",
           "The devices the pipeline uses, the cluster's first (0: all)">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes a device may hold (0: the cluster's device memory)">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Pin the pipeline stages (0: searched)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"0",
           "Pin the micro-batches a step, dividing the batch (0: searched)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "Pin the schedule: gpipe, 1f1b or interleaved:V (empty: "
           "searched)">,
    Option<"remat", "remat", "std::string", /*default=*/"\"\"",
           "Pin every layer's recomputation: none, selective or full "
           "(empty: searched per stage)">,
    Option<"zero", "zero", "int", /*default=*/"-1",
           "Pin ZeRO-1 inside the stage mesh: 0 or 1 (-1: searched)">,
    Option<"tensorParallel", "tensor-parallel", "int64_t", /*default=*/"0",
           "Pin every stage's tensor-parallel degree (0: searched)">,
    ListOption<"stageUnits", "stage-units", "int64_t",
               "Pin the stage boundaries: each stage's unit count, first to "
               "last (with stages)">,
    Option<"loss", "loss", "std::string", /*default=*/"\"causal-lm\"",
           "The step's objective (tess-build-training's loss)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "The step's precision (tess-build-training's precision)">,
    Option<"vocabularyMultiple", "vocabulary-multiple", "int64_t",
           /*default=*/"64",
           "The head's padding (tess-build-training's vocabulary-multiple)">,
    Option<"logitsBlockBytes", "logits-block-bytes", "int64_t",
           /*default=*/"int64_t(1) << 30",
           "The measured step's largest block of the head's logits (the "
           "lowering preparation's; 0: never split)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect",
                           "::mlir::func::FuncDialect"];
}

def SearchPlan : Pass<"tess-search-plan", "::mlir::ModuleOp"> {
  let summary = "Weigh the mesh plan of N devices against the pipelined one "
                "and write the winner";
  let description = [{
    The decision of a compile over `devices` devices (tesserac --devices
    N, its pins this pass's options): the one-stage mesh plans and the pipelined
    plans as one search, intra-op and inter-op together
    (tessera/Transforms/TrainingPlan.h). It runs, once each, on the
    module's `@forward` at the step's global batch:

    - the pipeline search (tess-search-pipeline with `devices`), and the
      same search's best one-stage plan priced on the profile it searched;
    - the mesh search (tess-fit-memory, then tess-search-sharding choosing
      the mesh of `devices`).

    The pipelined plan wins when the compiled driver runs it and it is
    predicted faster than both one-stage prices, or when no mesh of
    `devices` fits a one-stage plan (then the pipeline search's plan, one
    stage or more); else the mesh search's plan does. The module is left as
    the winner's pass leaves it: the mesh plan on the forward's ops with the
    module's `tess.mesh` and `#tess.plan`, or the pipeline's `#tess.plan`
    with the forward at one micro-batch, as tess-search-pipeline leaves it
    (the step the compile then builds).

    ```mlir
    // tess-search-plan{cluster=eight-smaller-devices.json devices=8}
    // on gpt2-tiny at batch 8 x 32: no mesh of 8 fits, PP 2 x TP 4 does.
    module attributes {tess.plan = #tess.plan<mesh = #tess.mesh<tp = 4>,
        remat = "full", stages = 2, schedule = "1f1b", microbatches = 8,
        chunks = [#tess.chunk<device = 0, units = 0 to 1>,
                  #tess.chunk<device = 1, units = 2 to 3, remat = "none">]>} {
      func.func @forward(%ids: tensor<1x32xi64>) -> tensor<1x32x512xf32> {...}
    }
    // tess-search-plan{cluster=h200-multinode devices=16} on gpt2-tiny at
    // batch 8 x 16: the mesh search's dp=16 (0.004 ms) beats PP 2 x DP 8.
    module attributes {tess.mesh = #tess.mesh<dp = 16>,
                       tess.plan = #tess.plan<mesh = #tess.mesh<dp = 16>>} {
      func.func @forward(...) {... {tess.planned = #tess.planned<...>} ...}
    }
    ```

    The pins are constraints on the one decision, not another path. Each
    constrains every search whose plans it describes, and leaves out the
    search none of whose plans it allows (the "Plan choice" table says which
    and why):

    - `zero` 0 or 1 (ZeRO-1 inside a pipeline's stage mesh, every
      parameter's ZeRO stage on a mesh), `remat` (every layer's
      recomputation) and `memory-limit` (each device's bytes) pin both;
    - `stages` 1 pins the pipeline search to one stage (the mesh plan
      still wins unless it does not fit); `stages` S > 1, `micro-batches`
      M > 1 and `schedule` pin a pipeline's shape, which no one-stage mesh
      plan has: the pipeline search alone, its plan compiled;
    - `zero` 2 or 3, which no pipelined plan runs: the mesh search alone;
    - `mesh` (tesserac's `--mesh`) pins one stage's mesh: the mesh search
      searches that mesh alone, and the pipeline search runs `devices` /
      its devices stages on it, each with its tensor-parallel degree; on
      more devices than the mesh has, the pipeline search alone. `devices`
      0 is the mesh's times `stages`;
    - `shard` (tesserac's `--shard`, with `mesh`) pins parameters' layouts
      on that mesh, which only the mesh search plans: the mesh search
      alone.

    ```mlir
    // tess-search-plan{cluster=eight-smaller-devices.json devices=8 mesh=1x4}
    // on gpt2-tiny at batch 8 x 32: two stages of TP 4, the pipeline
    // search's plan alone.
    module attributes {tess.plan = #tess.plan<mesh = #tess.mesh<tp = 4>,
        stages = 2, ...>} {...}
    // tess-search-plan{cluster=eight-smaller-devices.json devices=8 stages=1}
    // on gpt2-tiny at batch 8 x 32: no one-stage plan of 8 devices fits, and
    // the pin allows no other; the error names both searches' reasons.
    ```

    The remaining options are the searches' own, with their meaning there.

    Errors: `devices` below 2 (one device has no mesh or pipeline to
    choose), `zero` outside -1 to 3, pins that leave out both searches
    (`zero` 2 with `stages` 2), `shard` without `mesh`, a `mesh` that does not parse, has an axis
    other than dp and tp, or whose devices do not divide `devices` or make
    another stage count than `stages`, each search's own errors, and no plan that
    fits under the pins (neither search's plan fits, or only a pipeline the
    compiled driver cannot run), with each search's reason.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"h200\"",
           "h200, h200-multinode, a100-megatron or a cluster JSON file">,
    Option<"devices", "devices", "int64_t", /*default=*/"0",
           "The devices both searches plan for (at least 2; 0 with `mesh`: "
           "its devices times `stages`)">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Pin one stage's mesh, dp x tp (2x4 or dp=2,tp=4): the mesh "
           "search searches it alone, the pipeline search runs every stage "
           "on it (empty: searched)">,
    ListOption<"pins", "shard", "std::string",
               "REGEX=SPEC pins of the mesh search on `mesh` (tesserac's "
               "--shard): the mesh search alone">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes per device every plan must fit (0: the cluster's device "
           "memory)">,
    Option<"zero", "zero", "int", /*default=*/"-1",
           "Pin ZeRO: 0 or 1 on both searches, 2 or 3 the mesh search's "
           "alone (-1: searched)">,
    Option<"remat", "remat", "std::string", /*default=*/"\"\"",
           "Pin every layer's recomputation: none, selective or full "
           "(empty: each search's choice)">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Pin the pipeline stages: 1 a one-stage plan, S > 1 the pipeline "
           "search's alone (0: searched)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"0",
           "Pin the micro-batches a step: above 1 the pipeline search's "
           "alone (0: searched)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "Pin the pipeline schedule, gpipe, 1f1b or interleaved:V: the "
           "pipeline search's alone (empty: searched)">,
    Option<"searchTimeout", "search-timeout", "double", /*default=*/"10",
           "Seconds CBC may spend on the mesh search's ILP">,
    Option<"loss", "loss", "std::string", /*default=*/"\"causal-lm\"",
           "The step's objective (tess-build-training's loss)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "The step's precision (tess-build-training's precision)">,
    Option<"vocabularyMultiple", "vocabulary-multiple", "int64_t",
           /*default=*/"64",
           "The head's padding (tess-build-training's vocabulary-multiple)">,
    Option<"logitsBlockBytes", "logits-block-bytes", "int64_t",
           /*default=*/"int64_t(1) << 30",
           "The measured step's largest block of the head's logits (the "
           "lowering preparation's; 0: never split)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect",
                           "::mlir::func::FuncDialect"];
}

def SearchSharding : Pass<"tess-search-sharding", "::mlir::ModuleOp"> {
  let summary = "Search the sharding plan of @forward on a mesh and write it "
                "on the forward's ops";
  let description = [{
    Runs the whole-mesh intra-op search (lib/Sharding/MeshSharding.h: Alpa's
    ILP over every axis at once, ZeRO per parameter, the per-device memory
    bound, repeated layers solved once) on the module's `@forward`, in
    place, and writes what it decided as IR (lib/Sharding/SearchedPlan.h):
    the module's `tess.mesh` and `#tess.plan` (its mesh and ZeRO stage), and
    on every forward op a `#tess.planned` with its strategy and the layouts
    it reads and leaves (a parameter's also its optimizer state's layout and
    ZeRO stage), and on each result the layout the loss reads it in.

    It runs before the training step is built (tesserac's `search` phase):
    `tess-build-training` clones every forward op into `@forward_backward`
    with its attributes, so the step's ops carry the plan by construction
    and the shard phase reads it there; no copy of the module is searched
    and nothing is matched back. The forward is the search's view because
    its ops are the forward part of the step before the loss, the
    autodiff and the precision casts, which the search prices itself.

    ```mlir
    // tess-fit-memory{mesh=4}, tess-search-sharding{mesh=4}
    module attributes {tess.mesh = #tess.mesh<dp = 4>,
                       tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>>} {
      func.func @forward(%ids: tensor<8x16xi64>)
          -> (tensor<8x16x512xf32> {tess.planned = #tess.layout<[dp, -, -]>}) {
        %wte = tess.parameter "wte" trainable {tess.planned = #tess.planned<
                 strategy = "[-, -] ZeRO-0", results = [#tess.layout<[-, -]>],
                 state = #tess.layout<[-, -]>, zero = 0>} : tensor<512x64xf32>
        %x = tess.embedding %wte, %ids {tess.planned = #tess.planned<
                 strategy = "dp: split tokens",
                 operands = [#tess.layout<[-, -]>, #tess.layout<[dp, -]>],
                 results = [#tess.layout<[dp, -, -]>]>} : ...
    ```

    The pins are constraints on the search, not another path: `zero` holds
    every trainable parameter at one ZeRO stage, each `shard` value
    (`REGEX=SPEC`, as tesserac's --shard) holds the parameters it matches and
    their readers to a strategy or layout.

    The search's per-op model is scaled to the step the compile builds for
    one device from `@forward` (tess-build-training with `loss`,
    `precision` and `vocabulary-multiple`, the recomputation the module's
    `#tess.plan` says, as tess-fit-memory wrote it, the lowering preparation
    with `logits-block-bytes`), measured by the one memory analysis and
    priced by the cost model: its compute and optimizer seconds, its
    activations and fixed bytes. The replicated plan then predicts that
    step's peak exactly. `calibration` gives those numbers instead
    (`compute` and `optimizer` seconds per step and per element,
    `activations` and `fixed` bytes), for a module whose step is not built.

    On a mesh of several devices, with the calibration measured, the plan
    is checked against the program it compiles to: the training step built
    from the planned forward (q/k/v apart), its layouts written from the
    plan (tess-annotate-from-plan, whose remarks are the pass's) and one
    rank's program partitioned (tess-partition-spmd) and measured by the
    one memory analysis, as the compile builds it. The search's per-op
    model misses that rank either way, so the search runs again under a
    bound corrected by the miss: lowered when the rank does not fit the
    memory limit, raised when it fits with room a faster plan might use
    (kept between the highest bound whose rank fitted and the lowest whose
    rank did not), at most four searches; the fastest plan whose rank fits
    is written, and --explain lists each search's bound and rank.

    `devices` (instead of `mesh`) chooses the mesh: every `dp=N`,
    `dp=A,tp=B` (A x B = N) and `tp=N`, from the most data-parallel, each
    searched and checked as above; the plan predicted fastest of those that
    fit is written (the first on a tie), its mesh in `tess.mesh` and the
    `#tess.plan`, and the remarks are the chosen mesh's only.

    ```mlir
    // tess-fit-memory{devices=4}, tess-search-sharding{devices=4}
    module attributes {tess.mesh = #tess.mesh<dp = 4>,
                       tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>>} {...}
    ```

    Errors, each naming the option: a cluster that is neither built in nor
    a readable cluster file, a mesh that does not parse or does not fit the
    cluster, both `mesh` and `devices`, `devices` below 0 or a
    factorisation that does not fit the cluster, a pin that does not parse
    or names an axis the mesh has not, a module without `@forward`, no plan
    that fits the memory limit (with the least memory any plan needs), a
    checked plan whose compiled rank still misses the limit (what it needs
    against the search's prediction), and, with `devices`, no mesh that
    fits (each mesh's reason).
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", /*default=*/"\"h200\"",
           "h200, h200-multinode, a100-megatron or a cluster JSON file">,
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The device mesh: 2x4, 8 or dp=2,tp=4 (empty: one device)">,
    Option<"devices", "devices", "int64_t", /*default=*/"0",
           "Choose the mesh of N devices, dp x tp, whose plan fits and is "
           "predicted fastest (0: `mesh`)">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes per device the plan must fit (0: the cluster's device "
           "memory; one device: not checked, the compiled step decides)">,
    Option<"zero", "zero", "int", /*default=*/"-1",
           "Every trainable parameter's ZeRO stage, 0 to 3 (-1: searched)">,
    ListOption<"pins", "shard", "std::string",
               "REGEX=SPEC pins (tesserac's --shard)">,
    Option<"searchTimeout", "search-timeout", "double", /*default=*/"10",
           "Seconds CBC may spend on the ILP; beyond it the greedy plan "
           "answers">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "The step's precision, fp32, bf16 or fp16: the search prices "
           "kernels, collectives and weight copies at it">,
    Option<"calibration", "calibration", "std::string", /*default=*/"\"\"",
           "compute=S,optimizer=S,activations=B,saved=B,fixed=B: the "
           "compiled step's numbers the search's model is scaled to "
           "(saved: what the forward keeps of the activations; empty: "
           "measured from the module)">,
    Option<"loss", "loss", "std::string", /*default=*/"\"causal-lm\"",
           "The measured step's objective (tess-build-training's loss)">,
    Option<"vocabularyMultiple", "vocabulary-multiple", "int64_t",
           /*default=*/"64",
           "The measured step's head padding (tess-build-training's "
           "vocabulary-multiple)">,
    Option<"logitsBlockBytes", "logits-block-bytes", "int64_t",
           /*default=*/"int64_t(1) << 30",
           "The measured step's largest block of the head's logits (the "
           "lowering preparation's; 0: never split)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect",
                           "::mlir::func::FuncDialect"];
}

def WritePlan : Pass<"tess-write-plan", "::mlir::ModuleOp"> {
  let summary = "Write the module's #tess.plan";
  let description = [{
    Sets the module attribute `tess.plan` to `plan`, the text of a
    `#tess.plan` (the attribute's own syntax and rules, C1 to C7), replacing
    any plan already there. An empty `plan` writes the one-device plan that
    decides nothing (`#tess.plan<>`: ZeRO 0, no recomputation, no pipeline).
    tesserac's `plan` phase (tessera/Driver/CompilePhases.h) runs it with
    the plan its search or its flags decided, so that `tess-rematerialize`,
    `tess-annotate-sharding`, `tess-split-pipeline-stages` and the lowering
    read one decision from the IR; given the same text, tessera-opt
    reproduces that phase.

    ```mlir
    // tess-write-plan{plan="#tess.plan<remat = \"selective\">"}
    module attributes {tess.plan = #tess.plan<remat = "selective">} {...}
    ```

    A text that does not parse, or parses to another attribute, is an error
    naming the option.
  }];
  let options = [
    Option<"plan", "plan", "std::string", /*default=*/"\"\"",
           "The #tess.plan to write, as text (empty: one device, nothing "
           "decided)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

//===----------------------------------------------------------------------===//
// Partitioning: a training step -> the per-rank program of a device mesh
//===----------------------------------------------------------------------===//

def AnnotateFromPlan : Pass<"tess-annotate-from-plan", "::mlir::ModuleOp"> {
  let summary = "Write the searched plan the step's ops carry as the "
                "partitioner's layouts";
  let description = [{
    The shard phase of a searched plan: `tess-search-sharding` wrote its
    decision on @forward's ops (`tess.planned`, lib/Sharding/SearchedPlan.h)
    and `tess-build-training`'s clones carried it into `@forward_backward`.
    This pass writes the complete, verified annotation `tess-partition-spmd`
    reads (lib/Sharding/PlanAnnotation.h: `tess.mesh`, `tess.layout` on
    arguments and results, `tess.layouts` on ops) and erases the wishes:

    - a parameter's argument takes the compute layout its `tess.parameter`
      was planned (by name), the token ids the layout their first planned
      reader needs, the targets the token dims of the logits' layout;
    - a forward op of the step that carries a plan leaves its results in
      the plan's layouts; every other op (the loss, the backward, an op
      canonicalization made) takes the layouts its operands arrive in;
    - a gradient leaves in its parameter's layout for its ZeRO stage;
    - a split the plan reads piece by piece (a fused QKV's, its axis split)
      runs piece-major: it and the backward's concat are marked
      `tess.piece_major`, the weight, bias and gradients `tess.pieces`
      (lib/Transforms/Partition/PieceMajorRegion.h), where every op that
      touches the dim keeps its positions and the layouts keep the dim
      split (a try whose layouts break a region is redone with that dim
      whole).

    ```mlir
    // before: %1 = tess.linear %0, %arg1, %arg2 {tess.planned =
    //     #tess.planned<strategy = "dp: data-parallel", operands = [...],
    //     results = [#tess.layout<[dp, -, -]>]>} : ...
    // after:  %1 = tess.linear %0, %arg1, %arg2
    //     {tess.layouts = [#tess.layout<[dp, -, -]>]} : ...
    ```

    Where the partitioner cannot run the plan as the search priced it (a
    split read piece by piece whose region is not piece-major, an operand
    it reads in another layout, an op folded away) it does what it can and,
    with `remarks`, says so in a
    remark `partition: ...` on the step. Errors: a module without a searched
    plan (no `tess.mesh`, no @forward) or without @forward_backward.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"true",
           "A remark for each place the partitioner departs from the plan">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def AnnotateSharding : Pass<"tess-annotate-sharding", "::mlir::ModuleOp"> {
  let summary = "Write a forced sharding plan (DP, TP, DP x TP) on @forward_backward";
  let description = [{
    Writes a complete plan (lib/Sharding's PlanAnnotation.h: `tess.mesh` on
    the module, a `#tess.layout` as `tess.layout` on arguments and results
    and as `tess.layouts` on ops) for the training step that
    `tess-build-training` built, for one of
    the classic layouts, so that `tess-partition-spmd` can be tested against
    single-device numbers without the search:

    - `dp`: the token ids and targets split on the batch dim over `dp`;
      every parameter replicated; gradients all-reduced over `dp`.
    - `tp`: Megatron-LM tensor parallelism over `tp`. A linear layer whose
      input comes from other linear layers through activations, products
      (SwiGLU), reshapes, transposes, rotary arithmetic or an attention is
      *row-parallel* (weight split on `in`, result a partial sum completed
      by one all-reduce); the linear layers it comes from are
      *column-parallel* (weight and bias split on `out`). Attention is split
      on heads (Q and K/V head counts must divide by the axis size). In
      GPT-2's fused QKV the three projections are cut apart by a
      `tess.split`; that linear is column-parallel piece by piece as
      Megatron-LM's (each rank its columns of q, k and v: the split and the
      backward's concat marked `tess.piece_major`, the weight, bias and
      their gradients `tess.pieces`), where every op that touches the dim
      keeps its positions (lib/Transforms/Partition/PieceMajorRegion.h);
      else it stays replicated and each rank slices its heads before the
      attention. The LM head (the linear whose result is the loss's
      logits) is column-parallel over the vocabulary, and
      `tess-partition-spmd` computes the loss on each rank's block of
      classes (Megatron-LM's vocab_parallel_cross_entropy). A lookup of the
      token ids in a table the forward reads only there and as the head's
      weight is vocabulary-parallel, as Megatron-LM's
      VocabParallelEmbedding: the table's rows over `tp`, the lookup a
      partial sum completed by one all-reduce, its gradient each rank's
      block of rows. Norms are replicated. The rule is
      `tessera/Analysis/MegatronPartition.h`, which the pipeline's stage
      model prices too.
    - `dp-tp`: both, on a 2-D mesh.

    Only the ops before the loss are classified; the backward's layouts
    follow by propagation (each op runs in the layouts its operands arrive
    in, see lib/Transforms/Partition/LayoutChoice.h), and so does every op
    the rules do not name. The loss is replicated. A gradient leaves in its
    parameter's layout, completed over `dp` in the program; with
    `defer-gradient-reduction` it leaves as the pending partial sum over
    `dp` (`tess.layout = #tess.layout<[-, tp] partial(dp)>`) for the driver's bucketed
    reducer.

    ```mlir
    // tess-annotate-sharding{mesh=2x2 strategy=dp-tp}, an MLP block:
    func.func @forward_backward(
        %w1: tensor<64x256xf32> {tess.layout = #tess.layout<[-, tp]>, tess.parameter = "fc.weight"}, ...
        %ids: tensor<4x32xi64> {tess.input = "input_ids", tess.layout = #tess.layout<[dp, -]>}, ...
      %h = tess.linear %x, %w1 {tess.layouts = [#tess.layout<[dp, -, tp]>]} ...
      %y = tess.linear %g, %w2 {tess.layouts = [#tess.layout<[dp, -, -] partial(tp)>]} ...
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "The device mesh: 2x2 (axes dp, tp), 4 (axis dp) or dp=2,tp=2">,
    ListOption<"axes", "axes", "std::string",
               "Names of the mesh axes, outermost first (default: the "
               "mesh's own, dp for one axis, dp,tp for two)">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"dp\"",
           "The plan: dp, tp or dp-tp">,
    Option<"deferGradientReduction", "defer-gradient-reduction", "bool",
           /*default=*/"false",
           "Leave gradients as partial sums over dp for the driver's reducer">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def PartitionSpmd : Pass<"tess-partition-spmd", "::mlir::ModuleOp"> {
  let summary = "Rewrite an annotated training step into the per-rank program";
  let description = [{
    Reads the plan of `@forward_backward` (PlanAnnotation.h: every value's
    layout on the module's `tess.mesh`) and rewrites the function into what
    one rank runs: every tensor becomes its local block (a dim split over
    an axis of size n is n times smaller), and wherever the layout a value
    has differs from the one its consumer runs in, the collectives that
    convert it are inserted (lib/Transforms/Partition/Reshard.h): a pending
    partial sum is all-reduced (or reduce-scattered into a split), a split
    is all-gathered (or moved to another dim by an all-to-all), a
    replicated value is sliced to the rank's block (`tess.shard_slice`), and
    a replicated addend of a partial sum (a row-parallel layer's bias) is
    divided by n.

    Each op runs in the layouts LayoutChoice.h picks for its result layouts
    and arriving operands; a result that comes out other than the plan says
    is resharded right after the op. The loss is the mean over the global
    batch: a cross-entropy whose rows are split combines the ranks' means
    weighted by their counted targets (two scalar all-reduces), and its
    gradient is scaled by the rank's share of the targets.

    A split or concat marked `tess.piece_major` (a fused QKV laid out piece
    by piece) runs on the rank's 1/n of each piece: its sizes are the local
    pieces'. After the rewrite each such region is walked again on the
    local program (PieceMajorRegion.h); a reshard that moved contiguous
    blocks of its dim is an error (a compiler bug), never a wrong order.

    The arguments keep their `tess.layout` and `tess.pieces` (the driver
    gives each rank the block of every parameter and of the tokens it
    names), as do the results. The function gets `tess.partitioned`.

    Before (mesh `tp = 2`), a row-parallel layer:
    ```mlir
    %y = tess.linear %h, %w, %b {tess.layouts = [#tess.layout<[-, -] partial(tp)>]}
      : (tensor<8x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
    %z = tess.gelu %y : tensor<8x64xf32>
    ```
    After (`%h` split as `[-, tp]`, `%w` as `[tp, -]`):
    ```mlir
    %c = tess.constant dense<5.000000e-01> : tensor<f32>
    %b2 = tess.mul %b, %c : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
    %y = tess.linear %h, %w, %b2 : (tensor<8x128xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
    %r = tess.all_reduce %y {axis = "tp"} : tensor<8x64xf32>
    %z = tess.gelu %r : tensor<8x64xf32>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string",
           /*default=*/"\"forward_backward\"",
           "The function to partition">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def PrintShardingLabels
    : Pass<"tess-print-sharding-labels", "::mlir::func::FuncOp"> {
  let summary = "Print each op's sharding labels and the layouts it runs in";
  let description = [{
    For every op with the tess ShardingInterface, prints to stdout what the
    interface answers (TessShardingLabels.h): each label's kind, the labels
    of every operand and result dim (`-` for a dim kept whole), the labels
    summed into each result, the operands added to a sum, the groups of
    operands the op is linear in, and the splits the intra-op search
    offers. An op carrying `tess.arriving` (one `#tess.layout` per operand,
    on `mesh`) also gets the layouts the partition rewrite runs it in for
    those operands (LayoutChoice.h). A split the op keeps whole is warned
    about: the op reads that operand gathered. It is how the per-op
    partition rules are tested.

    ```mlir
    // tess-print-sharding-labels{mesh=2x2}
    %y = tess.gelu %x {tess.arriving = [#tess.layout<[dp, tp]>]} : tensor<4x8xf32>
    ```
    prints
    ```
    tess.gelu
      labels: 0 parallel, 1 parallel
      operand 0: [0, 1]
      result 0: [0, 1]
      splits: split dim 0 = 0, split dim 1 = 1
      runs in: operands [dp, tp] -> results [dp, tp]
    ```
    A `tess.arriving` of the wrong length, not a `#tess.layout`, or naming
    an axis not of `mesh` is an error naming the op.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"2x2\"",
           "The device mesh the `tess.arriving` layouts are on (e.g. 2x2, "
           "dp=2,tp=4)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

//===----------------------------------------------------------------------===//
// Pipeline: a training step -> per-stage forward and backward functions
//===----------------------------------------------------------------------===//

def SplitPipelineStages : Pass<"tess-split-pipeline-stages", "::mlir::ModuleOp"> {
  let summary = "Cut @forward_backward into per-stage forward and backward functions";
  let description = [{
    Cuts the training step along layer boundaries (lib/Pipeline's
    ProgramUnits: embedding, one unit per layer, head) into `stages x
    virtual` contiguous pipeline stages of as equal a unit count as
    possible, stage c running on device `c mod stages` (with `virtual` > 1,
    device s owns the interleaved schedule's chunks s, s + stages, ...).
    Each stage c becomes a prepare function, called once a step, and two
    functions that a schedule calls per micro-batch, independently:

    ```mlir
    func.func @stage1_prepare(
        %w: tensor<...> {tess.parameter = "..."}, ...)
        -> (tensor<...> {tess.resident}, ...)      // e.g. the bf16 weights
    func.func @stage1_forward(
        %r: tensor<...> {tess.resident}, ...,      // the prepare's results
        %act: tensor<...> {tess.activation},       // from stage 0's forward
        %w: tensor<...> {tess.parameter = "..."},  // and tess.buffer / tess.input
        ...) -> (tensor<...> {tess.activation},    // to stage 2's forward
                 tensor<...> {tess.saved},         // to this stage's backward
                 tensor<f32> {tess.loss})          // the stage holding the loss
    func.func @stage1_backward(
        %r: tensor<...> {tess.resident}, ...,
        %saved: tensor<...> {tess.saved},
        %dact: tensor<...> {tess.activation_gradient}, // from stage 2's backward
        %w: tensor<...> {tess.parameter = "..."}, ...)
        -> (tensor<...> {tess.activation_gradient}, // to stage 0's backward
            tensor<...> {tess.gradient = "..."})
    ```

    The resident values are what the stage reads of forward values computed
    from parameters, buffers and constants alone (ProgramUnits'
    parameterOnly: the weights' casts to the compute type, a padded LM head
    built from a tied embedding, position embeddings): each stage computes
    its own once a step, so none crosses a boundary or is saved per
    micro-batch; the forward and the backward both take all of them, in the
    prepare's order. The activations crossing a boundary are every other
    forward value of an
    earlier stage that a later stage reads (usually the residual stream
    alone; a value read further down is passed on stage by stage), and
    likewise for the activation gradients (a backward op reading a single
    gradient, a reshape, goes down to the stage of its readers, so that
    only its operand crosses); the saved values are the forward
    values the stage's backward reads. tess-rematerialize's clones
    (`tess.recomputed`) and the ops reading them are the backward's,
    though they read forward values only: the stage's backward recomputes
    from their saved inputs. The loss' stage returns it; each
    parameter gradient is returned by the stage that completes it, a
    gradient summed from several stages (a tied embedding's) in parts.
    Each function carries `tess.pipeline_stage`
    (c) and `tess.pipeline_device` (c mod stages); the module gets
    `tess.pipeline = {stages, virtual}`.

    A module with a `tess.plan` (TessPlanAttrs.td) is split as its plan
    says, and the options are ignored: `stages` devices, V chunks per
    device for the schedule interleaved:V (else 1), and the plan's `chunks`
    where it has them (otherwise the even split above, which is then
    written into the plan's `chunks`). A plan without a schedule is an
    error. @forward_backward and
    @optimizer_step stay. The cross-entropy's `loss_scale` input scales
    the gradients: a schedule of m micro-batches passes 1/m to get the
    global batch's mean.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Pipeline stages (devices)">,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "Stages per device (chunks of the interleaved schedule)">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect",
                           "::mlir::func::FuncDialect"];
}

def Rematerialize : Pass<"tess-rematerialize", "::mlir::ModuleOp"> {
  let summary = "Recompute a layer's activations in its backward instead of "
                "keeping them";
  let description = [{
    Runs on tess-build-training's `@forward_backward` (after its
    canonicalization and CSE; a later CSE would merge the clones back). For
    each Transformer layer (lib/Pipeline's ProgramUnits: layers by parameter
    name) whose key `layers` matches, the forward values of the layer that
    the backward reads and `mode` says to recompute
    (`tessera::pipeline::planLayerRecomputation`, Remat.h) are recomputed:
    the forward ops producing them are cloned just before the first
    backward op that reads one of them (so after the backward of the layer
    above) and every use at or after the first backward op reads the clone.
    The originals then die at their last forward use, and the liveness-based
    arena (lib/Lowering) holds them for the forward only.

    - `none`: nothing changes.
    - `selective`: the layer norms', elementwise activations' (GELU) and
      dropouts' outputs are recomputed from values the backward keeps
      anyway; matmul and attention outputs stay kept.
    - `full`: everything but the layer's input is recomputed from it.

    A module with a `tess.plan` takes the mode from the plan's `remat`
    (`mode` is then ignored), a layer of a chunk that says its own remat
    (`#tess.chunk<..., remat = "full">`: the pipeline search chose it per
    stage) that chunk's.

    Dropout draws its mask from its `seed` attribute and the element index,
    so a clone reproduces the same mask and the numbers are unchanged.

    Before (`full`, one layer, backward abridged):
    ```mlir
    %n = tess.layer_norm %x scale %g bias %b : ...
    %h = tess.linear %n, %w, %c : ...
    ... the layers above, the loss, their backward ...
    %dw = tess.matmul %n, %dh {transpose_lhs} : ...
    ```
    After:
    ```mlir
    %n = tess.layer_norm %x scale %g bias %b : ...
    %h = tess.linear %n, %w, %c : ...
    ... the layers above, the loss, their backward ...
    %n_again = tess.layer_norm %x scale %g bias %b : ...
    %dw = tess.matmul %n_again, %dh {transpose_lhs} : ...
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"full\"",
           "none, selective or full">,
    Option<"layers", "layers", "std::string", /*default=*/"\".*\"",
           "The layers to rematerialize: a regular expression that must "
           "match a layer's whole key (e.g. transformer\\.h\\.[0-5])">,
  ];
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

#endif // TESSERA_TRANSFORMS_PASSES_TD
