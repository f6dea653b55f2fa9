// RUN: tessera-opt %s -split-input-file -tess-expand-weight-grads | FileCheck %s

// Tests that a weight gradient becomes the GEMM of its rows: both operands
// viewed as [rows, features], x^T dy for a [in, out] weight, dy^T x for an
// nn.Linear's [out, in] one.
// CHECK-LABEL: func.func @rows
// CHECK-SAME: (%[[X:.*]]: tensor<2x32x64xf32>, %[[DY:.*]]: tensor<2x32x192xf32>)
// CHECK:      %[[XR:.*]] = tess.reshape %[[X]] : (tensor<2x32x64xf32>) -> tensor<64x64xf32>
// CHECK-NEXT: %[[DYR:.*]] = tess.reshape %[[DY]] : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
// CHECK-NEXT: %[[DW:.*]] = tess.matmul %[[XR]], %[[DYR]] {transpose_lhs} : (tensor<64x64xf32>, tensor<64x192xf32>) -> tensor<64x192xf32>
// CHECK:      %[[XT:.*]] = tess.reshape %[[X]]
// CHECK-NEXT: %[[DYT:.*]] = tess.reshape %[[DY]]
// CHECK-NEXT: %[[DWT:.*]] = tess.matmul %[[DYT]], %[[XT]] {transpose_lhs} : (tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<192x64xf32>
// CHECK-NEXT: return %[[DW]], %[[DWT]]
// CHECK-NOT:  tess.linear_weight_grad
func.func @rows(%x: tensor<2x32x64xf32>, %dy: tensor<2x32x192xf32>) -> (tensor<64x192xf32>, tensor<192x64xf32>) {
  %0 = tess.linear_weight_grad %x, %dy : (tensor<2x32x64xf32>, tensor<2x32x192xf32>) -> tensor<64x192xf32>
  %1 = tess.linear_weight_grad %x, %dy {transpose_weight} : (tensor<2x32x64xf32>, tensor<2x32x192xf32>) -> tensor<192x64xf32>
  return %0, %1 : tensor<64x192xf32>, tensor<192x64xf32>
}

// -----

// Tests that rows already flat are read as they are, and that one row (a
// rank-1 input) is a [1, features] view: the outer product.
// CHECK-LABEL: func.func @flat
// CHECK-SAME: (%[[X:.*]]: tensor<64x16xf32>, %[[DY:.*]]: tensor<64x8xf32>, %[[V:.*]]: tensor<16xf32>, %[[DV:.*]]: tensor<8xf32>)
// CHECK-NEXT: %[[DW:.*]] = tess.matmul %[[X]], %[[DY]] {transpose_lhs} : (tensor<64x16xf32>, tensor<64x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[VR:.*]] = tess.reshape %[[V]] : (tensor<16xf32>) -> tensor<1x16xf32>
// CHECK-NEXT: %[[DVR:.*]] = tess.reshape %[[DV]] : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: %[[OUTER:.*]] = tess.matmul %[[VR]], %[[DVR]] {transpose_lhs} : (tensor<1x16xf32>, tensor<1x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: return %[[DW]], %[[OUTER]]
func.func @flat(%x: tensor<64x16xf32>, %dy: tensor<64x8xf32>, %v: tensor<16xf32>, %dv: tensor<8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %0 = tess.linear_weight_grad %x, %dy : (tensor<64x16xf32>, tensor<64x8xf32>) -> tensor<16x8xf32>
  %1 = tess.linear_weight_grad %v, %dv : (tensor<16xf32>, tensor<8xf32>) -> tensor<16x8xf32>
  return %0, %1 : tensor<16x8xf32>, tensor<16x8xf32>
}
