// RUN: tessera-opt %s -split-input-file -tess-fuse-head-split | FileCheck %s

// Tests that GPT-2's split of the fused QKV into heads becomes one view, one
// transpose with the piece dim first and a split along it, each piece viewed
// back as the [B, H, T, Dh] the transposes gave, with every use kept.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[QKV:[^:]*]]: tensor<2x8x48xf32>
// CHECK-NOT: axis = 2
// CHECK: %[[PACKED:.*]] = tess.reshape %[[QKV]] : (tensor<2x8x48xf32>) -> tensor<2x8x3x2x8xf32>
// CHECK: %[[T:.*]] = tess.transpose %[[PACKED]] {permutation = array<i64: 2, 0, 3, 1, 4>} : (tensor<2x8x3x2x8xf32>) -> tensor<3x2x2x8x8xf32>
// CHECK: %[[P:.*]]:3 = tess.split %[[T]] {axis = 0 : i64, sizes = array<i64: 1, 1, 1>}
// CHECK: %[[Q:.*]] = tess.reshape %[[P]]#0 : (tensor<1x2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
// CHECK: %[[K:.*]] = tess.reshape %[[P]]#1
// CHECK: %[[V:.*]] = tess.reshape %[[P]]#2
// CHECK: tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 3.535500e-01 : f64}
// CHECK: tess.attention_grad %[[Q]], %[[K]], %[[V]]
module {
func.func @forward_backward(%qkv: tensor<2x8x48xf32> {tess.input = "input_ids"}, %dy: tensor<2x2x8x8xf32> {tess.input = "targets"}) -> (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %y = tess.attention %qh, %kh, %vh {causal, scale = 0.35355 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %dq, %dk, %dv = tess.attention_grad %qh, %kh, %vh, %dy {causal, scale = 0.35355 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
  %s = tess.add %dq, %dk : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %t = tess.add %s, %dv : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  return %y, %t : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>
}
}

// -----

// Tests that a split is left as it is when a piece has another use, when the
// pieces are transposed differently, or when the sizes differ.
// CHECK-LABEL: func.func @other_use(
// CHECK: tess.split %{{.*}} {axis = 2 : i64
// CHECK-NOT: axis = 0 : i64
func.func @other_use(%qkv: tensor<2x8x48xf32>) -> (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x8x16xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  return %qh, %kh, %vh, %v : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @different_transposes(
// CHECK: tess.split %{{.*}} {axis = 2 : i64
// CHECK-NOT: axis = 0 : i64
func.func @different_transposes(%qkv: tensor<2x8x32xf32>) -> (tensor<2x2x8x8xf32>, tensor<2x8x8x2xf32>) {
  %q, %k = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16>} : (tensor<2x8x32xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x8x2x8xf32>) -> tensor<2x8x8x2xf32>
  return %qh, %kh : tensor<2x2x8x8xf32>, tensor<2x8x8x2xf32>
}

// CHECK-LABEL: func.func @unequal_sizes(
// CHECK: tess.split %{{.*}} {axis = 2 : i64
// CHECK-NOT: axis = 0 : i64
func.func @unequal_sizes(%qkv: tensor<2x8x48xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>) {
  %q, %k = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 32, 16>} : (tensor<2x8x48xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  return %qh, %kh : tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>
}
