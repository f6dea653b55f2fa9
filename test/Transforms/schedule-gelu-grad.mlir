// RUN: tessera-opt %s -split-input-file -tess-schedule-gelu-grad | FileCheck %s

// Tests that the GELU's gradient moves up to right after the linear that
// computes its dy (the MLP output projection's input gradient), ahead of the
// weight and bias gradients autodiff put between them.
// CHECK-LABEL: func.func @mlp_backward(
// CHECK: %[[G:.*]] = tess.linear
// CHECK-NEXT: tess.gelu_grad %{{.*}}, %[[G]]
// CHECK-NEXT: tess.matmul
// CHECK-NEXT: tess.reduce_sum
func.func @mlp_backward(%pre: tensor<8x16xf32>, %h: tensor<8x16xf32>, %dy: tensor<8x4xf32>, %w: tensor<16x4xf32>)
    -> (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) {
  %g = tess.linear %dy, %w {transpose_weight} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %dw = tess.matmul %h, %dy {transpose_lhs} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  %db = tess.reduce_sum %dy {dims = array<i64: 0>} : (tensor<8x4xf32>) -> tensor<4xf32>
  %dx = tess.gelu_grad %pre, %g {approximation = #tess<gelu_approximation tanh>} : tensor<8x16xf32>
  return %dx, %dw, %db : tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>
}

// -----

// Tests that a gelu_grad stays where it is when its dy has another use or
// comes from a linear with a bias, which one call could not compute.
// CHECK-LABEL: func.func @not_moved(
// CHECK: tess.linear
// CHECK-NEXT: tess.linear
// CHECK-NEXT: tess.reduce_sum
// CHECK-NEXT: tess.gelu_grad
// CHECK-NEXT: tess.gelu_grad
func.func @not_moved(%pre: tensor<8x16xf32>, %dy: tensor<8x4xf32>, %w: tensor<16x4xf32>, %b: tensor<16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>) {
  %g = tess.linear %dy, %w {transpose_weight} : (tensor<8x4xf32>, tensor<16x4xf32>) -> tensor<8x16xf32>
  %h = tess.linear %dy, %w, %b {transpose_weight} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %s = tess.reduce_sum %g {dims = array<i64: 0>} : (tensor<8x16xf32>) -> tensor<16xf32>
  %dx = tess.gelu_grad %pre, %g {approximation = #tess<gelu_approximation tanh>} : tensor<8x16xf32>
  %dx2 = tess.gelu_grad %pre, %h {approximation = #tess<gelu_approximation tanh>} : tensor<8x16xf32>
  return %dx, %dx2, %s : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>
}
