// RUN: tessera-opt %s -split-input-file -tess-pack-qkv-projections | FileCheck %s

// Tests Llama's attention input: three nn.Linear of one x (GQA: 4 query
// heads, 2 K/V heads of 8), q and k rotated after the head transpose,
// become one linear of the weights stacked along N and a split in q, k, v
// order; the heads chains read the pieces.
// CHECK-LABEL: func.func @llama(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8x32xf32>
// CHECK-DAG: %[[WQ:.*]] = tess.parameter "q_proj.weight"
// CHECK-DAG: %[[WK:.*]] = tess.parameter "k_proj.weight"
// CHECK-DAG: %[[WV:.*]] = tess.parameter "v_proj.weight"
// CHECK: %[[W:.*]] = tess.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<32x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
// CHECK-NEXT: %[[QKV:.*]] = tess.linear %[[X]], %[[W]] {transpose_weight} : (tensor<2x8x32xf32>, tensor<64x32xf32>) -> tensor<2x8x64xf32>
// CHECK-NEXT: %[[P:.*]]:3 = tess.split %[[QKV]] {axis = 2 : i64, sizes = array<i64: 32, 16, 16>}
// CHECK-NOT: tess.linear
// CHECK: tess.reshape %[[P]]#0
// CHECK: tess.reshape %[[P]]#1
// CHECK: tess.reshape %[[P]]#2
// CHECK: tess.attention
func.func @llama(%x: tensor<2x8x32xf32>, %cos: tensor<1x1x8x8xf32>, %sin: tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %wq = tess.parameter "q_proj.weight" trainable : tensor<32x32xf32>
  %q = tess.linear %x, %wq {transpose_weight} : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qt = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %qh = tess.rotary %qt, %cos, %sin : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %wk = tess.parameter "k_proj.weight" trainable : tensor<16x32xf32>
  %k = tess.linear %x, %wk {transpose_weight} : (tensor<2x8x32xf32>, tensor<16x32xf32>) -> tensor<2x8x16xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kt = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %kh = tess.rotary %kt, %cos, %sin : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %wv = tess.parameter "v_proj.weight" trainable : tensor<16x32xf32>
  %v = tess.linear %x, %wv {transpose_weight} : (tensor<2x8x32xf32>, tensor<16x32xf32>) -> tensor<2x8x16xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %y = tess.attention %qh, %kh, %vh {causal, scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

// -----

// Tests Qwen2's biased projections and [K, N] weights (no transpose_weight):
// the weights stack along dim 1, the biases along dim 0.
// CHECK-LABEL: func.func @biased(
// CHECK: %[[W:.*]] = tess.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<32x32xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<32x64xf32>
// CHECK: %[[B:.*]] = tess.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<32xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<64xf32>
// CHECK: tess.linear %{{.*}}, %[[W]], %[[B]] : (tensor<2x8x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK: tess.split
func.func @biased(%x: tensor<2x8x32xf32>, %wq: tensor<32x32xf32>, %bq: tensor<32xf32>, %wk: tensor<32x16xf32>, %bk: tensor<16xf32>, %wv: tensor<32x16xf32>, %bv: tensor<16xf32>) -> tensor<2x4x8x8xf32> {
  %q = tess.linear %x, %wq, %bq : (tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %k = tess.linear %x, %wk, %bk : (tensor<2x8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v = tess.linear %x, %wv, %bv : (tensor<2x8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %y = tess.attention %qh, %kh, %vh {scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

// -----

// Tests what stays three linears: a masked attention (BERT: the packed
// kernels do not take masks), a projection read by something else too (the
// split piece could not replace it alone), and projections of different
// inputs.
// CHECK-LABEL: func.func @not_packed(
// CHECK-NOT: tess.split
// CHECK-NOT: tess.concat
// CHECK-COUNT-9: tess.linear
// CHECK-NOT: tess.split
func.func @not_packed(%x: tensor<2x8x32xf32>, %x2: tensor<2x8x32xf32>, %m: tensor<1x1x8x8xf32>, %wq: tensor<32x32xf32>, %wk: tensor<32x32xf32>, %wv: tensor<32x32xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x8x32xf32>) {
  %q = tess.linear %x, %wq : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %k = tess.linear %x, %wk : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %k4 = tess.reshape %k : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %v = tess.linear %x, %wv : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %v4 = tess.reshape %v : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %masked = tess.attention %qh, %kh, %vh mask %m {scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>

  %q2 = tess.linear %x, %wq : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %q24 = tess.reshape %q2 : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %q2h = tess.transpose %q24 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %k2 = tess.linear %x, %wk : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %k24 = tess.reshape %k2 : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %k2h = tess.transpose %k24 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %v2 = tess.linear %x, %wv : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %v24 = tess.reshape %v2 : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %v2h = tess.transpose %v24 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %shared = tess.attention %q2h, %k2h, %v2h {scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>

  %q3 = tess.linear %x, %wq : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %q34 = tess.reshape %q3 : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %q3h = tess.transpose %q34 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %k3 = tess.linear %x2, %wk : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %k34 = tess.reshape %k3 : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %k3h = tess.transpose %k34 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %v3 = tess.linear %x, %wv : (tensor<2x8x32xf32>, tensor<32x32xf32>) -> tensor<2x8x32xf32>
  %v34 = tess.reshape %v3 : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %v3h = tess.transpose %v34 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %cross = tess.attention %q3h, %k3h, %v3h {scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %masked, %shared, %cross, %v2 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<2x8x32xf32>
}
