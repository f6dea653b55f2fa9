// RUN: tessera-opt %s -split-input-file -tess-schedule-residual-adds | FileCheck %s

// Tests that the sums of the input gradients of three linears that read one
// tensor (q, k, v) each move up to right after the later linear, ahead of
// the weight gradient autodiff put between them.
// CHECK-LABEL: func.func @qkv_input_gradient(
// CHECK: %[[Q:.*]] = tess.linear %arg1
// CHECK-NEXT: tess.matmul
// CHECK-NEXT: %[[K:.*]] = tess.linear %arg2
// CHECK-NEXT: %[[QK:.*]] = tess.add %[[Q]], %[[K]]
// CHECK-NEXT: tess.matmul
// CHECK-NEXT: %[[V:.*]] = tess.linear %arg3
// CHECK-NEXT: tess.add %[[QK]], %[[V]]
// CHECK-NEXT: tess.matmul
func.func @qkv_input_gradient(%x: tensor<8x16xf32>, %dq: tensor<8x16xf32>, %dk: tensor<8x4xf32>, %dv: tensor<8x4xf32>,
                              %wq: tensor<16x16xf32>, %wk: tensor<4x16xf32>, %wv: tensor<4x16xf32>)
    -> (tensor<8x16xf32>, tensor<16x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %a = tess.linear %dq, %wq {transpose_weight} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %dwq = tess.matmul %dq, %x {transpose_lhs} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %b = tess.linear %dk, %wk : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %dwk = tess.matmul %dk, %x {transpose_lhs} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %ab = tess.add %a, %b : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = tess.linear %dv, %wv : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %dwv = tess.matmul %dv, %x {transpose_lhs} : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %dx = tess.add %ab, %c : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %dx, %dwq, %dwk, %dwv : tensor<8x16xf32>, tensor<16x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that an add stays where it is when the linear's result has another
// use, when the other operand is defined after the linear, when it sums a
// norm gradient's dx right after that norm gradient (one call already), and
// when it broadcasts.
// CHECK-LABEL: func.func @not_moved(
// CHECK: tess.linear
// CHECK-NEXT: tess.exp
// CHECK-NEXT: tess.add
// CHECK-NEXT: tess.linear
// CHECK-NEXT: tess.exp
// CHECK-NEXT: tess.add
// CHECK-NEXT: tess.linear
// CHECK-NEXT: tess.rms_norm_grad
// CHECK-NEXT: tess.add
// CHECK-NEXT: tess.linear
// CHECK-NEXT: tess.exp
// CHECK-NEXT: tess.add
func.func @not_moved(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %s: tensor<16xf32>, %r: tensor<16xf32>)
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>) {
  %a = tess.linear %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %e = tess.exp %a : tensor<8x16xf32>
  %ae = tess.add %a, %x : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %b = tess.linear %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %late = tess.exp %x : tensor<8x16xf32>
  %bl = tess.add %b, %late : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = tess.linear %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %dx, %ds = tess.rms_norm_grad %x scale %s, %x {epsilon = 1.000000e-06 : f64} : (tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<16xf32>)
  %cd = tess.add %c, %dx : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %d = tess.linear %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %f = tess.exp %x : tensor<8x16xf32>
  %dr = tess.add %d, %r : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %ae, %bl, %cd, %dr, %e, %ds : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16xf32>
}
