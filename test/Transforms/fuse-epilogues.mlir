// RUN: tessera-opt %s -split-input-file -tess-fuse-epilogues | FileCheck %s
// RUN: tessera-opt %s -split-input-file -tess-fuse-epilogues | tessera-opt -split-input-file | FileCheck %s --check-prefix=ROUNDTRIP

// Tests that GPT-2's MLP forward becomes two fused ops: the input projection
// with its tanh GELU (both results kept) and the output projection with the
// residual add.
// CHECK-LABEL: func.func @mlp_forward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x4xf32>, %[[W1:[^:]*]]: tensor<4x16xf32>, %[[B1:[^:]*]]: tensor<16xf32>, %[[W2:[^:]*]]: tensor<16x4xf32>, %[[B2:[^:]*]]: tensor<4xf32>
// CHECK: %[[PRE:.*]], %[[H:.*]] = tess.linear_gelu %[[X]], %[[W1]], %[[B1]] :
// CHECK-NEXT: %[[Y:.*]] = tess.linear_add %[[H]], %[[W2]], %[[B2]] add %[[X]] :
// CHECK-NEXT: return %[[Y]], %[[PRE]]
// ROUNDTRIP-LABEL: func.func @mlp_forward(
// ROUNDTRIP: tess.linear_gelu
// ROUNDTRIP: tess.linear_add
func.func @mlp_forward(%x: tensor<8x4xf32>, %w1: tensor<4x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x4xf32>, %b2: tensor<4xf32>)
    -> (tensor<8x4xf32>, tensor<8x16xf32>) {
  %pre = tess.linear %x, %w1, %b1 : (tensor<8x4xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = tess.gelu %pre {approximation = #tess<gelu_approximation tanh>} : tensor<8x16xf32>
  %m = tess.linear %h, %w2, %b2 : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %y = tess.add %x, %m : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y, %pre : tensor<8x4xf32>, tensor<8x16xf32>
}

// -----

// Tests the MLP backward as tess-schedule-gelu-grad leaves it: the output
// projection's input gradient with the GELU's gradient (one DGELU GEMM), the
// weight gradient with its bias gradient over the reshaped dy, and the
// pieces the fusion must not take: a reduce over another value, and an add
// whose operand is used again.
// CHECK-LABEL: func.func @mlp_backward(
// CHECK-SAME: %[[PRE:[^:]*]]: tensor<8x16xf32>, %[[H:[^:]*]]: tensor<8x16xf32>, %[[DY:[^:]*]]: tensor<2x4x4xf32>, %[[W:[^:]*]]: tensor<16x4xf32>
// CHECK: %[[DY2:.*]] = tess.reshape %[[DY]]
// CHECK-NEXT: %[[DPRE:.*]] = tess.linear_gelu_grad %[[DY2]], %[[W]], %[[PRE]] {transpose_weight} :
// CHECK-NEXT: %[[DW:.*]], %[[DB:.*]] = tess.matmul_bias_grad %[[H]], %[[DY2]] {transpose_lhs} : (tensor<8x16xf32>, tensor<8x4xf32>) -> (tensor<16x4xf32>, tensor<4xf32>)
// CHECK-NEXT: return %[[DPRE]], %[[DW]], %[[DB]]
func.func @mlp_backward(%pre: tensor<8x16xf32>, %h: tensor<8x16xf32>, %dy: tensor<2x4x4xf32>, %w: tensor<16x4xf32>)
    -> (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) {
  %dy2 = tess.reshape %dy : (tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %g = tess.linear %dy2, %w {transpose_weight} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %dpre = tess.gelu_grad %pre, %g {approximation = #tess<gelu_approximation tanh>} : tensor<8x16xf32>
  %dw = tess.matmul %h, %dy2 {transpose_lhs} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %db = tess.reduce_sum %dy {dims = array<i64: 0, 1>} : (tensor<2x4x4xf32>) -> tensor<4xf32>
  return %dpre, %dw, %db : tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>
}

// -----

// Tests the pairs that stay apart: GELU erf (no such epilogue), a linear
// whose result has a second use, an add that is not next to its linear,
// and a reduce over other dims than a bias gradient's.
// CHECK-LABEL: func.func @not_fused(
// CHECK-NOT: tess.linear_
// CHECK-NOT: tess.matmul_
// CHECK: return
func.func @not_fused(%x: tensor<8x4xf32>, %w: tensor<4x4xf32>, %r: tensor<8x4xf32>, %h: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<8xf32>, tensor<8x4xf32>) {
  %a = tess.linear %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %ga = tess.gelu %a {approximation = #tess<gelu_approximation none>} : tensor<8x4xf32>
  %b = tess.linear %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %sb = tess.add %b, %r : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %tb = tess.add %b, %sb : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %c = tess.linear %x, %w : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %n = tess.neg %x : tensor<8x4xf32>
  %sc = tess.add %c, %r : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %dw = tess.matmul %h, %x {transpose_lhs} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %rows = tess.reduce_sum %x {dims = array<i64: 1>} : (tensor<8x4xf32>) -> tensor<8xf32>
  return %ga, %tb, %sc, %n, %dw, %rows, %sb : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<8xf32>, tensor<8x4xf32>
}

// -----

// Tests the weight gradient of a head computed a block of rows at a time
// (tess-chunk-loss-head): each block's product and the running sum are one
// tess.matmul_add, the sum as the GEMM's C.
// CHECK-LABEL: func.func @blocked_weight_gradient(
// CHECK: %[[D0:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK-NEXT: %[[D1:.*]] = tess.matmul_add %{{.*}}, %{{.*}}, %[[D0]] {transpose_lhs}
// CHECK-NEXT: return %[[D1]]
func.func @blocked_weight_gradient(%g0: tensor<4x10xf32>, %h0: tensor<4x6xf32>, %g1: tensor<4x10xf32>, %h1: tensor<4x6xf32>) -> tensor<10x6xf32> {
  %d0 = tess.matmul %g0, %h0 {transpose_lhs} : (tensor<4x10xf32>, tensor<4x6xf32>) -> tensor<10x6xf32>
  %p1 = tess.matmul %g1, %h1 {transpose_lhs} : (tensor<4x10xf32>, tensor<4x6xf32>) -> tensor<10x6xf32>
  %d1 = tess.add %d0, %p1 : (tensor<10x6xf32>, tensor<10x6xf32>) -> tensor<10x6xf32>
  return %d1 : tensor<10x6xf32>
}

// -----

// Tests that a norm gradient takes the residual stream's add of its dx as
// its `residual` operand, for LayerNorm (with the scale and bias gradients)
// and RMSNorm alike, and that an add of dx used twice stays.
// CHECK-LABEL: func.func @norm_gradients(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8x4xf32>, %[[G:[^:]*]]: tensor<4xf32>, %[[DY:[^:]*]]: tensor<2x8x4xf32>, %[[R:[^:]*]]: tensor<2x8x4xf32>
// CHECK: %[[LN:.*]]:3 = tess.layer_norm_grad %[[X]] scale %[[G]], %[[DY]] residual %[[R]] {bias_grad}
// CHECK-NEXT: %[[RMS:.*]]:2 = tess.rms_norm_grad %[[X]] scale %[[G]], %[[LN]]#0 residual %[[R]]
// CHECK-NEXT: %[[KEPT:.*]] = tess.rms_norm_grad %[[X]], %[[DY]]
// CHECK-NEXT: tess.add %[[KEPT]], %[[R]]
// ROUNDTRIP-LABEL: func.func @norm_gradients(
// ROUNDTRIP: tess.layer_norm_grad {{.*}} residual
func.func @norm_gradients(%x: tensor<2x8x4xf32>, %g: tensor<4xf32>, %dy: tensor<2x8x4xf32>, %r: tensor<2x8x4xf32>)
    -> (tensor<2x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  %dx, %dg, %db = tess.layer_norm_grad %x scale %g, %dy {bias_grad, epsilon = 1.0e-05 : f64}
    : (tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %sum = tess.add %r, %dx : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %dx2, %dg2 = tess.rms_norm_grad %x scale %g, %sum : (tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<4xf32>)
  %sum2 = tess.add %dx2, %r : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %dx3 = tess.rms_norm_grad %x, %dy : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %sum3 = tess.add %dx3, %r : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %sum, %dg, %db, %sum2, %dg2, %sum3, %dx3 : tensor<2x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x8x4xf32>, tensor<4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>
}

// -----

// Tests that the loss and its gradient on the same logits become one pass
// over them, with the block's count_over kept; and that a gradient on other
// targets stays apart.
// CHECK-LABEL: func.func @loss_and_gradient(
// CHECK-SAME: %[[L:[^:]*]]: tensor<4x10xf32>, %[[T:[^:]*]]: tensor<4xi64>, %[[ALL:[^:]*]]: tensor<8xi64>, %[[D:[^:]*]]: tensor<f32>, %[[T2:[^:]*]]: tensor<4xi64>
// CHECK: %[[LOSS:.*]], %[[DL:.*]] = tess.cross_entropy_with_grad %[[L]], %[[T]], %[[D]] count_over %[[ALL]] {ignore_index = -1 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>, tensor<8xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: tess.cross_entropy %[[L]], %[[T2]]
// CHECK-NEXT: tess.cross_entropy_grad %[[L]], %[[T]], %[[D]]
// ROUNDTRIP-LABEL: func.func @loss_and_gradient(
// ROUNDTRIP: tess.cross_entropy_with_grad
func.func @loss_and_gradient(%logits: tensor<4x10xf32>, %t: tensor<4xi64>, %all: tensor<8xi64>, %dloss: tensor<f32>, %t2: tensor<4xi64>)
    -> (tensor<f32>, tensor<4x10xf32>, tensor<f32>, tensor<4x10xf32>) {
  %loss = tess.cross_entropy %logits, %t count_over %all {ignore_index = -1 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<8xi64>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %t, %dloss count_over %all {ignore_index = -1 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>, tensor<8xi64>) -> tensor<4x10xf32>
  %loss2 = tess.cross_entropy %logits, %t2 : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %dl2 = tess.cross_entropy_grad %logits, %t, %dloss : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  return %loss, %dl, %loss2, %dl2 : tensor<f32>, tensor<4x10xf32>, tensor<f32>, tensor<4x10xf32>
}
