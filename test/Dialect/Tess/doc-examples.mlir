// RUN: tessera-opt %s -split-input-file | FileCheck %s

// Every ```mlir example in the descriptions of TessBase.td, TessOps.td,
// TessTrainingOps.td and TessFusedOps.td, copied verbatim between its function's arguments and
// return, so that an example which stops parsing or verifying fails here.
// When an example changes, change it here too.

// CHECK-LABEL: func.func @weight_location
func.func @weight_location() {
  %a = tess.parameter "a" {location = #tess.weight_location<file = "gpt2-124m.raw.dyn.onnx.data", offset = 0, length = 3072>} : tensor<768xf32>
  %b = tess.parameter "b" {location = #tess.weight_location<file = "gpt2-tiny.raw.dyn.onnx">} : tensor<768xf32>
  return
}

// -----

// CHECK-LABEL: func.func @constant
func.func @constant() -> tensor<f32> {
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  return %half : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @parameter
func.func @parameter() -> tensor<64x192xf32> {
  %w = tess.parameter "transformer.h.0.attn.c_attn.weight" trainable
         {location = #tess.weight_location<file = "gpt2.onnx.data", offset = 0, length = 49152>}
         : tensor<64x192xf32>
  return %w : tensor<64x192xf32>
}

// -----

// CHECK-LABEL: func.func @neg
func.func @neg(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = tess.neg %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4xf32>, %m: tensor<4xi1>) {
  %y0 = tess.abs %x : tensor<4xf32>
  %y1 = tess.exp %x : tensor<4xf32>
  %y2 = tess.log %x : tensor<4xf32>
  %y3 = tess.sqrt %x : tensor<4xf32>
  %y4 = tess.rsqrt %x : tensor<4xf32>
  %y5 = tess.reciprocal %x : tensor<4xf32>
  %y6 = tess.tanh %x : tensor<4xf32>
  %y7 = tess.erf %x : tensor<4xf32>
  %y8 = tess.sigmoid %x : tensor<4xf32>
  %y9 = tess.relu %x : tensor<4xf32>
  %y10 = tess.logical_not %m : tensor<4xi1>
  return
}

// -----

// CHECK-LABEL: func.func @silu
func.func @silu(%x: tensor<2x16x128xf32>) -> tensor<2x16x128xf32> {
  %y = tess.silu %x : tensor<2x16x128xf32>
  return %y : tensor<2x16x128xf32>
}

// -----

// CHECK-LABEL: func.func @gelu
func.func @gelu(%x: tensor<2x32x256xf32>) -> tensor<2x32x256xf32> {
  %y = tess.gelu %x {approximation = #tess<gelu_approximation tanh>} : tensor<2x32x256xf32>
  return %y : tensor<2x32x256xf32>
}

// -----

// The stream_axis example's module has a mesh with its axis.
// CHECK-LABEL: func.func @dropout
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @dropout(%x: tensor<2x32x64xf32>) -> tensor<2x32x64xf32> {
  %y = tess.dropout %x {rate = 1.000000e-01 : f64} : tensor<2x32x64xf32>
  // A rank's rows of a batch split over dp.
  %z = tess.dropout %x {rate = 1.000000e-01 : f64, seed = 3 : i64, stream_axis = "dp"} : tensor<2x32x64xf32>
  return %y : tensor<2x32x64xf32>
}
}

// -----

// CHECK-LABEL: func.func @add
func.func @add(%x: tensor<2x8x64xf32>, %b: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %y = tess.add %x, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @sub
func.func @sub(%x: tensor<2x8x64xf32>, %mean: tensor<2x8x1xf32>) -> tensor<2x8x64xf32> {
  %y = tess.sub %x, %mean : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @mul
func.func @mul(%x: tensor<2x8x64xf32>, %half: tensor<f32>) -> tensor<2x8x64xf32> {
  %y = tess.mul %x, %half : (tensor<2x8x64xf32>, tensor<f32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @div
func.func @div(%x: tensor<2x8x64xf32>, %d: tensor<2x8x1xf32>) -> tensor<2x8x64xf32> {
  %y = tess.div %x, %d : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// CHECK-LABEL: func.func @pow
func.func @pow(%x: tensor<2x8xf32>, %three: tensor<f32>) -> tensor<2x8xf32> {
  %y = tess.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @maximum
func.func @maximum(%x: tensor<4xf32>, %zero: tensor<f32>) -> tensor<4xf32> {
  %y = tess.maximum %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @minimum
func.func @minimum(%x: tensor<4xf32>, %cap: tensor<f32>) -> tensor<4xf32> {
  %y = tess.minimum %x, %cap : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @logical_and
func.func @logical_and(%a: tensor<1x1x8x8xi1>, %b: tensor<2x1x8x8xi1>) -> tensor<2x1x8x8xi1> {
  %m = tess.logical_and %a, %b : (tensor<1x1x8x8xi1>, tensor<2x1x8x8xi1>) -> tensor<2x1x8x8xi1>
  return %m : tensor<2x1x8x8xi1>
}

// -----

// CHECK-LABEL: func.func @logical_or
func.func @logical_or(%a: tensor<8x8xi1>, %b: tensor<8x8xi1>) -> tensor<8x8xi1> {
  %m = tess.logical_or %a, %b : (tensor<8x8xi1>, tensor<8x8xi1>) -> tensor<8x8xi1>
  return %m : tensor<8x8xi1>
}

// -----

// CHECK-LABEL: func.func @compare
func.func @compare(%i: tensor<8x1xi64>, %j: tensor<1x8xi64>) -> tensor<8x8xi1> {
  %m = tess.compare le, %i, %j : (tensor<8x1xi64>, tensor<1x8xi64>) -> tensor<8x8xi1>
  return %m : tensor<8x8xi1>
}

// -----

// CHECK-LABEL: func.func @where
func.func @where(%m: tensor<8x8xi1>, %x: tensor<2x4x8x8xf32>, %neg_inf: tensor<f32>) -> tensor<2x4x8x8xf32> {
  %y = tess.where %m, %x, %neg_inf
    : (tensor<8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @cast
func.func @cast(%x: tensor<2x8xf32>) -> tensor<2x8xbf16> {
  %h = tess.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
  return %h : tensor<2x8xbf16>
}

// -----

// CHECK-LABEL: func.func @matmul
func.func @matmul(%q: tensor<2x4x32x16xf32>, %k: tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32> {
  // scores = q @ k^T per head
  %s = tess.matmul %q, %k {transpose_rhs}
    : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32>
  return %s : tensor<2x4x32x32xf32>
}

// -----

// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x32x64xf32>, %w: tensor<64x192xf32>, %b: tensor<192xf32>,
                  %w_torch: tensor<512x64xf32>) {
  %h = tess.linear %x, %w, %b
    : (tensor<2x32x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<2x32x192xf32>
  %y = tess.linear %x, %w_torch {transpose_weight}
    : (tensor<2x32x64xf32>, tensor<512x64xf32>) -> tensor<2x32x512xf32>
  return
}

// -----

// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<2x32x64xf32> {
  %y = tess.layer_norm %x scale %g bias %b {epsilon = 1.0e-05 : f64}
    : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  return %y : tensor<2x32x64xf32>
}

// -----

// CHECK-LABEL: func.func @swiglu
func.func @swiglu(%gate: tensor<2x16x128xf32>, %up: tensor<2x16x128xf32>) -> tensor<2x16x128xf32> {
  %y = tess.swiglu %gate, %up : tensor<2x16x128xf32>
  return %y : tensor<2x16x128xf32>
}

// -----

// CHECK-LABEL: func.func @swiglu_grad
func.func @swiglu_grad(%gate: tensor<2x31x256xf32>, %up: tensor<2x31x256xf32>, %dy: tensor<2x31x256xf32>) -> (tensor<2x31x256xf32>, tensor<2x31x256xf32>) {
  %dgate, %dup = tess.swiglu_grad %gate, %up, %dy : tensor<2x31x256xf32>
  return %dgate, %dup : tensor<2x31x256xf32>, tensor<2x31x256xf32>
}

// -----

// CHECK-LABEL: func.func @packed_swiglu
func.func @packed_swiglu(%gu: tensor<2x16x256xf32>) -> tensor<2x16x128xf32> {
  %y = tess.packed_swiglu %gu : (tensor<2x16x256xf32>) -> tensor<2x16x128xf32>
  return %y : tensor<2x16x128xf32>
}

// -----

// CHECK-LABEL: func.func @packed_swiglu_grad
func.func @packed_swiglu_grad(%gu: tensor<2x31x512xf32>, %dy: tensor<2x31x256xf32>) -> tensor<2x31x512xf32> {
  %dgu = tess.packed_swiglu_grad %gu, %dy
    : (tensor<2x31x512xf32>, tensor<2x31x256xf32>) -> tensor<2x31x512xf32>
  return %dgu : tensor<2x31x512xf32>
}

// -----

// CHECK-LABEL: func.func @rotary
func.func @rotary(%x: tensor<2x4x32x16xf32>, %cos: tensor<1x1x32x16xf32>, %sin: tensor<1x1x32x16xf32>) -> tensor<2x4x32x16xf32> {
  %y = tess.rotary %x, %cos, %sin
    : (tensor<2x4x32x16xf32>, tensor<1x1x32x16xf32>, tensor<1x1x32x16xf32>) -> tensor<2x4x32x16xf32>
  return %y : tensor<2x4x32x16xf32>
}

// CHECK-LABEL: func.func @rotary_packed
// CHECK: tess.rotary %{{.*}} {rotated_heads = 6 : i64}
func.func @rotary_packed(%packed: tensor<2x32x8x16xf32>, %c: tensor<1x32x1x16xf32>, %s: tensor<1x32x1x16xf32>) -> tensor<2x32x8x16xf32> {
  %qkv = tess.rotary %packed, %c, %s {rotated_heads = 6 : i64}
    : (tensor<2x32x8x16xf32>, tensor<1x32x1x16xf32>, tensor<1x32x1x16xf32>) -> tensor<2x32x8x16xf32>
  return %qkv : tensor<2x32x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>) -> tensor<2x32x64xf32> {
  %y = tess.rms_norm %x scale %g {epsilon = 1.0e-06 : f64}
    : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  return %y : tensor<2x32x64xf32>
}

// -----

// CHECK-LABEL: func.func @softmax
func.func @softmax(%s: tensor<2x4x32x32xf32>) -> tensor<2x4x32x32xf32> {
  %p = tess.softmax %s {axis = -1 : i64} : tensor<2x4x32x32xf32>
  return %p : tensor<2x4x32x32xf32>
}

// -----

// CHECK-LABEL: func.func @embedding
func.func @embedding(%wte: tensor<512x64xf32>, %ids: tensor<2x32xi64>) -> tensor<2x32x64xf32> {
  %e = tess.embedding %wte, %ids
    : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
  return %e : tensor<2x32x64xf32>
}

// -----

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x32x16xf32>, %k: tensor<2x4x32x16xf32>, %v: tensor<2x4x32x16xf32>) -> tensor<2x4x32x16xf32> {
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
  return %o : tensor<2x4x32x16xf32>
}

// -----

// CHECK-LABEL: func.func @reshape
func.func @reshape(%x: tensor<2x32x192xf32>) -> tensor<64x192xf32> {
  %y = tess.reshape %x : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
  return %y : tensor<64x192xf32>
}

// -----

// CHECK-LABEL: func.func @transpose
func.func @transpose(%x: tensor<2x32x4x16xf32>) -> tensor<2x4x32x16xf32> {
  %y = tess.transpose %x {permutation = array<i64: 0, 2, 1, 3>}
    : (tensor<2x32x4x16xf32>) -> tensor<2x4x32x16xf32>
  return %y : tensor<2x4x32x16xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast
func.func @broadcast(%x: tensor<2x1x32x16xf32>) -> tensor<2x4x32x16xf32> {
  %y = tess.broadcast %x : (tensor<2x1x32x16xf32>) -> tensor<2x4x32x16xf32>
  return %y : tensor<2x4x32x16xf32>
}

// -----

// CHECK-LABEL: func.func @slice
func.func @slice(%x: tensor<2x32x192xf32>) -> tensor<2x32x64xf32> {
  %y = tess.slice %x {starts = array<i64: 0, 0, 64>, limits = array<i64: 2, 32, 128>,
                      strides = array<i64: 1, 1, 1>}
    : (tensor<2x32x192xf32>) -> tensor<2x32x64xf32>
  return %y : tensor<2x32x64xf32>
}

// -----

// CHECK-LABEL: func.func @split
func.func @split(%qkv: tensor<2x32x192xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 64, 64, 64>}
    : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2x4x32x8xf32>, %b: tensor<2x4x32x8xf32>) -> tensor<2x4x32x16xf32> {
  %y = tess.concat %a, %b {axis = -1 : i64}
    : (tensor<2x4x32x8xf32>, tensor<2x4x32x8xf32>) -> tensor<2x4x32x16xf32>
  return %y : tensor<2x4x32x16xf32>
}

// -----

// CHECK-LABEL: func.func @gather
func.func @gather(%x: tensor<4x10x8xf32>, %i: tensor<3xi64>) -> tensor<4x3x8xf32> {
  %y = tess.gather %x, %i {axis = 1 : i64}
    : (tensor<4x10x8xf32>, tensor<3xi64>) -> tensor<4x3x8xf32>
  return %y : tensor<4x3x8xf32>
}

// -----

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<2x8x64xf32>) {
  %s0 = tess.reduce_sum %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>
  %s1 = tess.reduce_mean %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>
  %s2 = tess.reduce_max %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>
  %s3 = tess.reduce_min %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>
  return
}

// -----

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%logits: tensor<2x31x512xf32>, %targets: tensor<2x31xi64>, %dloss: tensor<f32>) {
  %loss = tess.cross_entropy %logits, %targets {ignore_index = -100 : i64}
    : (tensor<2x31x512xf32>, tensor<2x31xi64>) -> tensor<f32>
  %dlogits = tess.cross_entropy_grad %logits, %targets, %dloss {ignore_index = -100 : i64}
    : (tensor<2x31x512xf32>, tensor<2x31xi64>, tensor<f32>) -> tensor<2x31x512xf32>
  return
}

// -----

// CHECK-LABEL: func.func @activation_grads
func.func @activation_grads(%x: tensor<2x31x256xf32>, %dy: tensor<2x31x256xf32>) {
  %dx = tess.gelu_grad %x, %dy {approximation = #tess<gelu_approximation tanh>} : tensor<2x31x256xf32>
  %dx2 = tess.silu_grad %x, %dy : tensor<2x31x256xf32>
  return
}

// -----

// CHECK-LABEL: func.func @norm_grads
func.func @norm_grads(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>, %dy: tensor<2x32x64xf32>, %r: tensor<2x32x64xf32>) {
  %dx, %dscale, %dbias = tess.layer_norm_grad %x scale %g, %dy {bias_grad, epsilon = 1.0e-05 : f64}
    : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xf32>)
    -> (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %dx2, %dscale2 = tess.rms_norm_grad %x scale %g, %dy {epsilon = 1.0e-06 : f64}
    : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xf32>)
    -> (tensor<2x32x64xf32>, tensor<64xf32>)
    %dxr, %dscaler = tess.rms_norm_grad %x scale %g, %dy residual %r {epsilon = 1.0e-06 : f64}
      : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<2x32x64xf32>, tensor<2x32x64xf32>)
      -> (tensor<2x32x64xf32>, tensor<64xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @softmax_grad
func.func @softmax_grad(%y: tensor<2x4x32x32xf32>, %dy: tensor<2x4x32x32xf32>) {
  %dx = tess.softmax_grad %y, %dy {axis = -1 : i64} : tensor<2x4x32x32xf32>
  return
}

// -----

// CHECK-LABEL: func.func @packed_attention
func.func @packed_attention(%qkv: tensor<2x32x96xf32>) {
    %y, %lse = tess.packed_attention %qkv {causal, key_heads = 2 : i64, query_heads = 2 : i64, scale = 2.500000e-01 : f64}
      : (tensor<2x32x96xf32>) -> (tensor<2x32x32xf32>, tensor<2x2x32xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @packed_attention_grad
func.func @packed_attention_grad(%qkv: tensor<2x32x96xf32>, %y: tensor<2x32x32xf32>, %lse: tensor<2x2x32xf32>, %dy: tensor<2x32x32xf32>) {
    %dqkv = tess.packed_attention_grad %qkv, %y, %lse, %dy {causal, key_heads = 2 : i64, query_heads = 2 : i64, scale = 2.500000e-01 : f64}
      : (tensor<2x32x96xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32x32xf32>) -> tensor<2x32x96xf32>
  return
}

// -----

// CHECK-LABEL: func.func @attention_grad
func.func @attention_grad(%q: tensor<2x4x32x16xf32>, %k: tensor<2x2x32x16xf32>, %v: tensor<2x2x32x16xf32>,
                          %dy: tensor<2x4x32x16xf32>) {
  %dq, %dk, %dv = tess.attention_grad %q, %k, %v, %dy {causal, scale = 2.500000e-01 : f64}
    : (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x4x32x16xf32>)
    -> (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @linear_weight_grad
func.func @linear_weight_grad(%x: tensor<2x32x64xf32>, %dy: tensor<2x32x192xf32>) {
  %dw = tess.linear_weight_grad %x, %dy {transpose_weight}
    : (tensor<2x32x64xf32>, tensor<2x32x192xf32>) -> tensor<192x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @data_movement_grads
func.func @data_movement_grads(%ids: tensor<2x32xi64>, %dy: tensor<2x32x64xf32>, %i: tensor<3xi64>,
                               %dg: tensor<4x3x8xf32>) {
  %dwte = tess.embedding_grad %ids, %dy
    : (tensor<2x32xi64>, tensor<2x32x64xf32>) -> tensor<512x64xf32>
  %dx = tess.gather_grad %i, %dg {axis = 1 : i64}
    : (tensor<3xi64>, tensor<4x3x8xf32>) -> tensor<4x10x8xf32>
  %dx2 = tess.slice_grad %dy {starts = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>}
    : (tensor<2x32x64xf32>) -> tensor<2x32x192xf32>
  return
}

// -----

// CHECK-LABEL: func.func @adamw
func.func @adamw(%p: tensor<64x192xf32>, %g: tensor<64x192xbf16>, %m: tensor<64x192xf32>, %v: tensor<64x192xf32>,
                 %lr: tensor<f32>, %step: tensor<i64>, %gscale: tensor<f32>) {
  %p2, %m2, %v2 = tess.adamw %p, %g, %m, %v, %lr, %step, %gscale
      {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64,
       epsilon = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}
    : (tensor<64x192xf32>, tensor<64x192xbf16>, tensor<64x192xf32>, tensor<64x192xf32>,
       tensor<f32>, tensor<i64>, tensor<f32>)
    -> (tensor<64x192xf32>, tensor<64x192xf32>, tensor<64x192xf32>)
  return
}

// -----

// TessFusedOps.td

// CHECK-LABEL: func.func @linear_add
func.func @linear_add(%x: tensor<2x32x64xf32>, %w: tensor<64x64xf32>, %residual: tensor<2x32x64xf32>) {
    %y = tess.linear_add %x, %w add %residual {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<64x64xf32>, tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @linear_gelu
func.func @linear_gelu(%x: tensor<2x32x64xf32>, %w: tensor<64x256xf32>, %b: tensor<256xf32>) {
    %pre, %h = tess.linear_gelu %x, %w, %b
      : (tensor<2x32x64xf32>, tensor<64x256xf32>, tensor<256xf32>)
      -> (tensor<2x32x256xf32>, tensor<2x32x256xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @linear_gelu_grad
func.func @linear_gelu_grad(%dh: tensor<2x32x64xf32>, %w: tensor<256x64xf32>, %pre: tensor<2x32x256xf32>) {
    %dpre = tess.linear_gelu_grad %dh, %w, %pre {transpose_weight}
      : (tensor<2x32x64xf32>, tensor<256x64xf32>, tensor<2x32x256xf32>) -> tensor<2x32x256xf32>
  return
}

// -----

// CHECK-LABEL: func.func @matmul_add
func.func @matmul_add(%dlogits: tensor<16x100xf32>, %h: tensor<16x64xf32>, %dw0: tensor<100x64xf32>) {
    %dw1 = tess.matmul_add %dlogits, %h, %dw0 {transpose_lhs}
      : (tensor<16x100xf32>, tensor<16x64xf32>, tensor<100x64xf32>) -> tensor<100x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @matmul_bias_grad
func.func @matmul_bias_grad(%x: tensor<64x32xf32>, %dy: tensor<64x96xf32>) {
    %dw, %db = tess.matmul_bias_grad %x, %dy {transpose_lhs}
      : (tensor<64x32xf32>, tensor<64x96xf32>) -> (tensor<32x96xf32>, tensor<96xf32>)
  return
}

// -----

// CHECK-LABEL: func.func @cross_entropy_with_grad
func.func @cross_entropy_with_grad(%logits: tensor<2x31x512xf32>, %targets: tensor<2x31xi64>, %dloss: tensor<f32>) {
    %loss, %dlogits = tess.cross_entropy_with_grad %logits, %targets, %dloss {ignore_index = -100 : i64}
      : (tensor<2x31x512xf32>, tensor<2x31xi64>, tensor<f32>) -> (tensor<f32>, tensor<2x31x512xf32>)
  return
}
