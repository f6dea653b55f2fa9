// RUN: tessera-opt %s -tess-build-training=vocabulary-multiple=1 -split-input-file | FileCheck %s
// RUN: tessera-opt %s -tess-build-training="precision=bf16 loss=mlm ignore-index=0 vocabulary-multiple=1" -split-input-file | FileCheck %s --check-prefix=BF16
// The heads here are left unpadded (vocabulary-multiple=1);
// build-training-vocabulary-padding.mlir tests the padding.

// Tests that a linear head on an embedding becomes @forward_backward
// (parameters and buffers as arguments, loss and one gradient per trainable
// parameter, cotangents through linear, add and embedding) and
// @optimizer_step (one tess.adamw per parameter), and that @forward stays.
// CHECK-LABEL: func.func @forward(
// CHECK: tess.parameter "wte" trainable
// CHECK: return

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[WTE:[^:]*]]: tensor<16x8xf32> {tess.parameter = "wte"}
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x16xf32> {tess.parameter = "head.weight"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<16xf32> {tess.parameter = "head.bias"}
// CHECK-SAME: %[[SHIFT:[^:]*]]: tensor<8xf32> {tess.buffer = "shift"}
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<2x4xi64> {tess.input = "input_ids"}
// CHECK-SAME: %[[TARGETS:[^:]*]]: tensor<2x4xi64> {tess.input = "targets"}
// CHECK-SAME: %[[SCALE:[^:]*]]: tensor<f32> {tess.input = "loss_scale"}
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32> {tess.gradient = "wte"}, tensor<8x16xf32> {tess.gradient = "head.weight"}, tensor<16xf32> {tess.gradient = "head.bias"})
// CHECK-SAME: attributes {tess.loss = "causal-lm", tess.precision = "fp32"}
// CHECK-NOT: tess.parameter
// CHECK: %[[E:.*]] = tess.embedding %[[WTE]], %[[IDS]]
// CHECK: %[[X:.*]] = tess.add %[[E]], %[[SHIFT]]
// CHECK: %[[Y:.*]] = tess.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[LOSS:.*]] = tess.cross_entropy %[[Y]], %[[TARGETS]] : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
// CHECK: %[[DY:.*]] = tess.cross_entropy_grad %[[Y]], %[[TARGETS]], %[[SCALE]]
// CHECK: %[[DX:.*]] = tess.linear %[[DY]], %[[W]] {transpose_weight} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[DW:.*]] = tess.linear_weight_grad %[[X]], %[[DY]] : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
// CHECK: %[[DB:.*]] = tess.reduce_sum %[[DY]] {dims = array<i64: 0, 1>}
// CHECK: %[[DWTE:.*]] = tess.embedding_grad %[[IDS]], %[[DX]] : (tensor<2x4xi64>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
// CHECK: return %[[LOSS]], %[[DWTE]], %[[DW]], %[[DB]]

// CHECK-LABEL: func.func @optimizer_step(
// CHECK-SAME: %[[P0:[^:]*]]: tensor<16x8xf32> {tess.parameter = "wte"}
// CHECK-SAME: {tess.parameter = "head.bias"}
// CHECK-SAME: %[[G0:[^:]*]]: tensor<16x8xf32> {tess.gradient = "wte"}
// CHECK-SAME: {tess.gradient = "head.bias"}
// CHECK-SAME: %[[M0:[^:]*]]: tensor<16x8xf32> {tess.first_moment = "wte"}
// CHECK-SAME: {tess.first_moment = "head.bias"}
// CHECK-SAME: %[[V0:[^:]*]]: tensor<16x8xf32> {tess.second_moment = "wte"}
// CHECK-SAME: {tess.second_moment = "head.bias"}
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {tess.input = "lr"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {tess.input = "step"}
// CHECK-SAME: %[[GS:[^:]*]]: tensor<f32> {tess.input = "grad_scale"}
// CHECK-SAME: -> (tensor<16x8xf32> {tess.parameter = "wte"}
// CHECK: %[[NP0:[^,]*]], %[[NM0:[^,]*]], %[[NV0:[^ ]*]] = tess.adamw %[[P0]], %[[G0]], %[[M0]], %[[V0]], %[[LR]], %[[STEP]], %[[GS]] :
// CHECK-COUNT-2: tess.adamw
// CHECK: return %[[NP0]], {{.*}}, %[[NM0]], {{.*}}, %[[NV0]],

// With bf16, master weights and the buffer are cast down on entry, the
// forward and backward run in bf16 and the loss in f32; the gradients are
// bf16, as the optimizer's grad operands. The loss reads the bf16 logits
// (its kernels compute in f32) and its gradient comes out in bf16: no f32
// copy of the logits or of their gradient.
// BF16-LABEL: func.func @forward_backward(
// BF16-SAME: %[[WTE:[^:]*]]: tensor<16x8xf32> {tess.parameter = "wte"}
// BF16-SAME: -> (tensor<f32>, tensor<16x8xbf16> {tess.gradient = "wte"}, tensor<8x16xbf16> {tess.gradient = "head.weight"}, tensor<16xbf16> {tess.gradient = "head.bias"})
// BF16-SAME: attributes {tess.loss = "mlm", tess.precision = "bf16"}
// BF16: tess.cast %[[WTE]] : tensor<16x8xf32> to tensor<16x8xbf16>
// BF16: tess.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// BF16: %[[Y:.*]] = tess.linear {{.*}} -> tensor<2x4x16xbf16>
// BF16-NOT: tess.cast %[[Y]]
// BF16: tess.cross_entropy %[[Y]], %{{.*}} {ignore_index = 0 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi64>) -> tensor<f32>
// BF16: tess.cross_entropy_grad %[[Y]], {{.*}} {ignore_index = 0 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x16xbf16>
// BF16: tess.embedding_grad {{.*}} -> tensor<16x8xbf16>
// BF16-LABEL: func.func @optimizer_step(
// BF16: tess.adamw {{.*}} : (tensor<16x8xf32>, tensor<16x8xbf16>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %w = tess.parameter "head.weight" trainable : tensor<8x16xf32>
  %b = tess.parameter "head.bias" trainable : tensor<16xf32>
  %shift = tess.parameter "shift" : tensor<8xf32>
  %e = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %x = tess.add %e, %shift : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %y = tess.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Tests a tiny GPT block: attention and residual/MLP dropouts get seeds 0, 1,
// 2 in program order and their gradients reuse them; the residual stream
// accumulates its cotangents with tess.add; the tied embedding/LM head
// weight sums the head's and the lookup's gradients; the broadcast position
// embedding sums its cotangent over the batch.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[WTE:[^:]*]]: tensor<32x16xf32> {tess.parameter = "wte"}
// CHECK-SAME: %[[IDS:[^:]*]]: tensor<2x4xi64> {tess.input = "input_ids"}
// CHECK: %[[POS:.*]] = tess.constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK: %[[H0:.*]] = tess.add
// CHECK: %[[Q:.*]] = tess.transpose
// CHECK: %[[K:.*]] = tess.transpose
// CHECK: %[[V:.*]] = tess.transpose
// CHECK: tess.attention %[[Q]], %[[K]], %[[V]] {causal, dropout = 1.000000e-01 : f64, scale = 0.35355339059327379 : f64}
// CHECK: tess.dropout %{{.*}} {rate = 1.000000e-01 : f64, seed = 1 : i64}
// CHECK: %[[H1:.*]] = tess.add %[[H0]],
// CHECK: tess.dropout %{{.*}} {rate = 1.000000e-01 : f64, seed = 2 : i64}
// CHECK: %[[H2:.*]] = tess.add %[[H1]],
// CHECK: %[[LOGITS:.*]] = tess.linear %[[H2]], %[[WTE]] {transpose_weight}
// CHECK: %[[LOSS:.*]] = tess.cross_entropy %[[LOGITS]]
// CHECK: %[[DLOGITS:.*]] = tess.cross_entropy_grad %[[LOGITS]]
// CHECK: %[[DH2:.*]] = tess.linear %[[DLOGITS]], %[[WTE]] : (tensor<2x4x32xf32>, tensor<32x16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[DHEAD:.*]] = tess.linear_weight_grad %[[H2]], %[[DLOGITS]] {transpose_weight} : (tensor<2x4x16xf32>, tensor<2x4x32xf32>) -> tensor<32x16xf32>
// CHECK: tess.dropout %[[DH2]] {rate = 1.000000e-01 : f64, seed = 2 : i64}
// CHECK: tess.gelu_grad %{{.*}}, %{{.*}} {approximation = #tess<gelu_approximation tanh>}
// CHECK: %[[LN2:.*]]:3 = tess.layer_norm_grad %[[H1]] scale %{{.*}}, %{{.*}} {bias_grad}
// CHECK: %[[DH1:.*]] = tess.add %[[DH2]], %[[LN2]]#0
// CHECK: tess.dropout %[[DH1]] {rate = 1.000000e-01 : f64, seed = 1 : i64}
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = tess.attention_grad %[[Q]], %[[K]], %[[V]], %{{.*}} {causal, dropout = 1.000000e-01 : f64, scale = 0.35355339059327379 : f64}
// CHECK: %[[DQKV:.*]] = tess.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x48xf32>
// CHECK: %[[LN1:.*]]:3 = tess.layer_norm_grad %[[H0]] scale
// CHECK: %[[DH0:.*]] = tess.add %[[DH1]], %[[LN1]]#0
// CHECK: %[[DPOS:.*]] = tess.reduce_sum %[[DH0]] {dims = array<i64: 0>, keep_dims} : (tensor<2x4x16xf32>) -> tensor<1x4x16xf32>
// CHECK: %[[DWPE:.*]] = tess.embedding_grad %[[POS]], %[[DPOS]] : (tensor<1x4xi64>, tensor<1x4x16xf32>) -> tensor<4x16xf32>
// CHECK: %[[DLOOKUP:.*]] = tess.embedding_grad %[[IDS]], %[[DH0]]
// CHECK: %[[DWTE:.*]] = tess.add %[[DHEAD]], %[[DLOOKUP]]
// CHECK: return %[[LOSS]], %[[DWTE]], %[[DWPE]], %[[LN1]]#1, %[[LN1]]#2,
// CHECK-LABEL: func.func @optimizer_step(
// CHECK-COUNT-11: tess.adamw
// CHECK-NOT: tess.adamw
// CHECK: return
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x32xf32> {
  %pos = tess.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %wte = tess.parameter "wte" trainable : tensor<32x16xf32>
  %wpe = tess.parameter "wpe" trainable : tensor<4x16xf32>
  %g1 = tess.parameter "ln_1.weight" trainable : tensor<16xf32>
  %b1 = tess.parameter "ln_1.bias" trainable : tensor<16xf32>
  %wqkv = tess.parameter "attn.c_attn.weight" trainable : tensor<16x48xf32>
  %bqkv = tess.parameter "attn.c_attn.bias" trainable : tensor<48xf32>
  %wo = tess.parameter "attn.c_proj.weight" trainable : tensor<16x16xf32>
  %g2 = tess.parameter "ln_2.weight" trainable : tensor<16xf32>
  %b2 = tess.parameter "ln_2.bias" trainable : tensor<16xf32>
  %wfc = tess.parameter "mlp.c_fc.weight" trainable : tensor<16x64xf32>
  %wpr = tess.parameter "mlp.c_proj.weight" trainable : tensor<64x16xf32>
  %e = tess.embedding %wte, %ids : (tensor<32x16xf32>, tensor<2x4xi64>) -> tensor<2x4x16xf32>
  %p = tess.embedding %wpe, %pos : (tensor<4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x16xf32>
  %h0 = tess.add %e, %p : (tensor<2x4x16xf32>, tensor<1x4x16xf32>) -> tensor<2x4x16xf32>
  %n1 = tess.layer_norm %h0 scale %g1 bias %b1 : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %qkv = tess.linear %n1, %wqkv, %bqkv : (tensor<2x4x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
  %s:3 = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x4x48xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %q0 = tess.reshape %s#0 : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %k0 = tess.reshape %s#1 : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %v0 = tess.reshape %s#2 : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %q = tess.transpose %q0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %k = tess.transpose %k0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %v = tess.transpose %v0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %a = tess.attention %q, %k, %v {causal, dropout = 1.000000e-01 : f64, scale = 0.35355339059327379 : f64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %a1 = tess.transpose %a {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %a2 = tess.reshape %a1 : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  %o = tess.linear %a2, %wo : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %od = tess.dropout %o {rate = 1.000000e-01 : f64} : tensor<2x4x16xf32>
  %h1 = tess.add %h0, %od : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %n2 = tess.layer_norm %h1 scale %g2 bias %b2 : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %f = tess.linear %n2, %wfc : (tensor<2x4x16xf32>, tensor<16x64xf32>) -> tensor<2x4x64xf32>
  %gl = tess.gelu %f {approximation = #tess<gelu_approximation tanh>} : tensor<2x4x64xf32>
  %m = tess.linear %gl, %wpr : (tensor<2x4x64xf32>, tensor<64x16xf32>) -> tensor<2x4x16xf32>
  %md = tess.dropout %m {rate = 1.000000e-01 : f64} : tensor<2x4x16xf32>
  %h2 = tess.add %h1, %md : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %logits = tess.linear %h2, %wte {transpose_weight} : (tensor<2x4x16xf32>, tensor<32x16xf32>) -> tensor<2x4x32xf32>
  return %logits : tensor<2x4x32xf32>
}

// -----

// Tests that every differentiable op's VJP builds valid IR (the verifier
// runs after the pass), with broadcasting operands summed back to their
// shapes, a frozen buffer getting no gradient and an unused parameter a zero
// one. The numbers are checked against finite differences elsewhere.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: {tess.buffer = "frozen"}
// CHECK-SAME: -> (tensor<f32>, tensor<10x8xf32> {tess.gradient = "table"}, tensor<8xf32> {tess.gradient = "b"}, tensor<1x4x1xf32> {tess.gradient = "c"}, tensor<8x8xf32> {tess.gradient = "w"}, tensor<8xf32> {tess.gradient = "g"}, tensor<3xf32> {tess.gradient = "unused"})
// CHECK: tess.dropout %{{.*}} {rate = 1.000000e-01 : f64} : tensor<2x4x8xf32>
// CHECK: tess.attention {{.*}} mask {{.*}} {causal, dropout = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, seed = 1 : i64}
// CHECK: tess.gather_grad
// CHECK: tess.slice_grad
// CHECK: tess.attention_grad {{.*}} mask {{.*}} seed = 1 : i64
// CHECK: tess.softmax_grad
// CHECK: tess.rms_norm_grad
// CHECK: tess.silu_grad
// CHECK: tess.reduce_sum %{{.*}} {dims = array<i64: 0, 2>, keep_dims} : (tensor<2x4x8xf32>) -> tensor<1x4x1xf32>
// CHECK: tess.embedding_grad
// CHECK: %[[ZERO:.*]] = tess.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return {{.*}}, %[[ZERO]] :
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
  %table = tess.parameter "table" trainable : tensor<10x8xf32>
  %b = tess.parameter "b" trainable : tensor<8xf32>
  %c = tess.parameter "c" trainable : tensor<1x4x1xf32>
  %w = tess.parameter "w" trainable : tensor<8x8xf32>
  %g = tess.parameter "g" trainable : tensor<8xf32>
  %frozen = tess.parameter "frozen" : tensor<8xf32>
  %unused = tess.parameter "unused" trainable : tensor<3xf32>
  %zero = tess.constant dense<0.0> : tensor<f32>
  %mask = tess.constant dense<0.0> : tensor<4x4xf32>
  %pos = tess.constant dense<[1, 0]> : tensor<2xi64>
  %e = tess.embedding %table, %ids : (tensor<10x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %a0 = tess.add %e, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %a1 = tess.sub %a0, %c : (tensor<2x4x8xf32>, tensor<1x4x1xf32>) -> tensor<2x4x8xf32>
  %a2 = tess.mul %a1, %frozen : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %a3 = tess.div %a2, %c : (tensor<2x4x8xf32>, tensor<1x4x1xf32>) -> tensor<2x4x8xf32>
  %a4 = tess.pow %a3, %c : (tensor<2x4x8xf32>, tensor<1x4x1xf32>) -> tensor<2x4x8xf32>
  %a5 = tess.maximum %a4, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %a6 = tess.minimum %a5, %c : (tensor<2x4x8xf32>, tensor<1x4x1xf32>) -> tensor<2x4x8xf32>
  %u0 = tess.neg %a6 : tensor<2x4x8xf32>
  %u1 = tess.abs %u0 : tensor<2x4x8xf32>
  %u2 = tess.exp %u1 : tensor<2x4x8xf32>
  %u3 = tess.log %u2 : tensor<2x4x8xf32>
  %u4 = tess.sqrt %u3 : tensor<2x4x8xf32>
  %u5 = tess.rsqrt %u4 : tensor<2x4x8xf32>
  %u6 = tess.reciprocal %u5 : tensor<2x4x8xf32>
  %u7 = tess.tanh %u6 : tensor<2x4x8xf32>
  %u8 = tess.erf %u7 : tensor<2x4x8xf32>
  %u9 = tess.sigmoid %u8 : tensor<2x4x8xf32>
  %u10 = tess.relu %u9 : tensor<2x4x8xf32>
  %u11 = tess.silu %u10 : tensor<2x4x8xf32>
  %u12 = tess.gelu %u11 : tensor<2x4x8xf32>
  %u13 = tess.cos %u12 : tensor<2x4x8xf32>
  %u14 = tess.sin %u13 : tensor<2x4x8xf32>
  %cond = tess.compare gt, %u14, %zero : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xi1>
  %s0 = tess.where %cond, %u14, %c : (tensor<2x4x8xi1>, tensor<2x4x8xf32>, tensor<1x4x1xf32>) -> tensor<2x4x8xf32>
  %s1 = tess.cast %s0 : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %s2 = tess.cast %s1 : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %s3 = tess.dropout %s2 {rate = 1.000000e-01 : f64} : tensor<2x4x8xf32>
  %m0 = tess.matmul %s3, %s3 {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %m1 = tess.matmul %m0, %s3 {transpose_lhs} : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %m2 = tess.matmul %m1, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l0 = tess.linear %m2, %w, %b {transpose_weight} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l1 = tess.layer_norm %l0 scale %g bias %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l2 = tess.rms_norm %l1 scale %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %l3 = tess.layer_norm %l2 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l4 = tess.softmax %l3 {axis = -1 : i64} : tensor<2x4x8xf32>
  %r0 = tess.reshape %l4 : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  %q = tess.transpose %r0 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf32>) -> tensor<2x2x4x4xf32>
  %k = tess.slice %q {starts = array<i64: 0, 0, 0, 0>, limits = array<i64: 2, 1, 4, 4>, strides = array<i64: 1, 1, 1, 1>} : (tensor<2x2x4x4xf32>) -> tensor<2x1x4x4xf32>
  %v0 = tess.slice %q {starts = array<i64: 0, 1, 0, 0>, limits = array<i64: 2, 2, 4, 4>, strides = array<i64: 1, 1, 1, 1>} : (tensor<2x2x4x4xf32>) -> tensor<2x1x4x4xf32>
  %o = tess.attention %q, %k, %v0 mask %mask {causal, scale = 5.000000e-01 : f64, dropout = 1.000000e-01 : f64} : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %o1 = tess.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf32>) -> tensor<2x4x2x4xf32>
  %o2 = tess.reshape %o1 : (tensor<2x4x2x4xf32>) -> tensor<2x4x8xf32>
  %p0:2 = tess.split %o2 {axis = 2 : i64, sizes = array<i64: 3, 5>} : (tensor<2x4x8xf32>) -> (tensor<2x4x3xf32>, tensor<2x4x5xf32>)
  %p1 = tess.concat %p0#0, %p0#0 {axis = 2 : i64} : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x6xf32>
  %p2 = tess.slice %p1 {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 4, 6>, strides = array<i64: 1, 1, 3>} : (tensor<2x4x6xf32>) -> tensor<2x4x2xf32>
  %p3 = tess.gather %p2, %pos {axis = 2 : i64} : (tensor<2x4x2xf32>, tensor<2xi64>) -> tensor<2x4x2xf32>
  %d0 = tess.reduce_sum %p3 {dims = array<i64: -1>, keep_dims} : (tensor<2x4x2xf32>) -> tensor<2x4x1xf32>
  %d1 = tess.reduce_mean %p3 {dims = array<i64: 1>} : (tensor<2x4x2xf32>) -> tensor<2x2xf32>
  %d2 = tess.reduce_max %p3 {dims = array<i64: 0, 2>} : (tensor<2x4x2xf32>) -> tensor<4xf32>
  %d3 = tess.reduce_min %p3 {dims = array<i64: 2>, keep_dims} : (tensor<2x4x2xf32>) -> tensor<2x4x1xf32>
  %d4 = tess.reshape %d1 : (tensor<2x2xf32>) -> tensor<2x1x2xf32>
  %d5 = tess.broadcast %d4 : (tensor<2x1x2xf32>) -> tensor<2x4x2xf32>
  %d6 = tess.add %d5, %d0 : (tensor<2x4x2xf32>, tensor<2x4x1xf32>) -> tensor<2x4x2xf32>
  %d2r = tess.reshape %d2 : (tensor<4xf32>) -> tensor<4x1xf32>
  %d7 = tess.mul %d6, %d2r : (tensor<2x4x2xf32>, tensor<4x1xf32>) -> tensor<2x4x2xf32>
  %d8 = tess.sub %d7, %d3 : (tensor<2x4x2xf32>, tensor<2x4x1xf32>) -> tensor<2x4x2xf32>
  %logits = tess.concat %d8, %p0#1, %d0 {axis = 2 : i64} : (tensor<2x4x2xf32>, tensor<2x4x5xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  return %logits : tensor<2x4x8xf32>
}
