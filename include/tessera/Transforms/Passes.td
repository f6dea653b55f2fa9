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
    `tess.gelu` with `approximation = none`, and `x * sigmoid(x)` becomes
    `tess.silu`. Constants must match to within 1e-6 relative.
  }];
  let constructor = "::tessera::createFuseActivationsPass()";
  let dependentDialects = ["::tessera::tess::TessDialect"];
}

def FuseAttention : Pass<"tess-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse matmul-scale-mask-softmax-matmul into tess.attention";
  let description = [{
    Recognizes scaled dot-product attention as exporters write it:
    `softmax(Q K^T * s + M) V` (the scale may also divide, or multiply Q and
    K separately) and replaces it by one `tess.attention`. A constant
    additive mask that hides exactly the keys after each query becomes the
    `causal` flag; a mask that hides nothing is dropped; any other mask stays
    an operand. K/V heads repeated for grouped-query attention
    (`broadcast` + `reshape` of `[B, Hkv, 1, S, D]`) are folded back, so
    the op sees the `Hkv` heads and does the grouping itself.

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

#endif // TESSERA_TRANSFORMS_PASSES_TD
