// RUN: tessera-opt %s -split-input-file -tess-fuse-packed-attention | FileCheck %s

// Tests that GPT-2's attention over its fused QKV, forward and backward as
// autodiff writes them, becomes the packed pair: the forward reads qkv as it
// is, the backward reads the forward's y and lse and the cotangent of the
// projection's input, and its dqkv is the concat's value. No transpose,
// split or concat is left.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[QKV:[^:]*]]: tensor<2x8x48xf32>
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x8x16xf32>
// CHECK-NOT: tess.transpose
// CHECK-NOT: tess.split
// CHECK: %[[Y:.*]], %[[LSE:.*]] = tess.packed_attention %[[QKV]] {causal, key_heads = 2 : i64, query_heads = 2 : i64, scale = 3.535500e-01 : f64} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x2x8xf32>)
// CHECK-NEXT: %[[DQKV:.*]] = tess.packed_attention_grad %[[QKV]], %[[Y]], %[[LSE]], %[[DY]] {causal, key_heads = 2 : i64, query_heads = 2 : i64, scale = 3.535500e-01 : f64}
// CHECK-NOT: tess.transpose
// CHECK-NOT: tess.concat
// CHECK: return %[[Y]], %[[DQKV]]
func.func @forward_backward(%qkv: tensor<2x8x48xf32>, %dY: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x48xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %y = tess.attention %qh, %kh, %vh {causal, scale = 0.35355 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %yt = tess.transpose %y {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %y3 = tess.reshape %yt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dY4 = tess.reshape %dY : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %dYh = tess.transpose %dY4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %dq, %dk, %dv = tess.attention_grad %qh, %kh, %vh, %dYh {causal, scale = 0.35355 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
  %dqt = tess.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dq3 = tess.reshape %dqt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dkt = tess.transpose %dk {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dk3 = tess.reshape %dkt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dvt = tess.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dv3 = tess.reshape %dvt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dqkv = tess.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x48xf32>
  return %y3, %dqkv : tensor<2x8x16xf32>, tensor<2x8x48xf32>
}

// -----

// Tests grouped K/V heads (4 query heads, 2 K/V heads: qkv is 4 + 2 + 2
// heads wide) and a backward without its forward in the function, which
// gets its own packed forward right before the gradient.
// CHECK-LABEL: func.func @grouped_backward_only(
// CHECK-SAME: %[[QKV:[^:]*]]: tensor<2x8x64xf32>
// CHECK: %[[Y:.*]], %[[LSE:.*]] = tess.packed_attention %[[QKV]] {key_heads = 2 : i64, query_heads = 4 : i64, scale = 5.000000e-01 : f64}
// CHECK: tess.packed_attention_grad %[[QKV]], %[[Y]], %[[LSE]], %{{.*}} {key_heads = 2 : i64, query_heads = 4 : i64, scale = 5.000000e-01 : f64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x4x8xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
// CHECK-NOT: tess.attention_grad
func.func @grouped_backward_only(%qkv: tensor<2x8x64xf32>, %dYh: tensor<2x4x8x8xf32>) -> tensor<2x8x64xf32> {
  %q, %k, %v = tess.split %qkv {axis = -1 : i64, sizes = array<i64: 32, 16, 16>} : (tensor<2x8x64xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %dq, %dk, %dv = tess.attention_grad %qh, %kh, %vh, %dYh {scale = 0.5 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
  %dqt = tess.transpose %dq {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
  %dq3 = tess.reshape %dqt : (tensor<2x8x4x8xf32>) -> tensor<2x8x32xf32>
  %dkt = tess.transpose %dk {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dk3 = tess.reshape %dkt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dvt = tess.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dv3 = tess.reshape %dvt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dqkv = tess.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  return %dqkv : tensor<2x8x64xf32>
}

// -----

// Tests that attention is left as it is with a mask, with dropout, with a
// sliding window or a softcap (the packed kernels have neither), or when
// q, k and v are not the pieces of one split in order.
// CHECK-LABEL: func.func @not_packed(
// CHECK-NOT: tess.packed_attention
// CHECK: tess.attention %{{.*}} mask
// CHECK: tess.attention %{{.*}} {dropout
// CHECK: tess.attention %[[K:.*]], %[[Q:.*]], %{{.*}} {scale
// CHECK: tess.attention %{{.*}} {causal, scale = 5.000000e-01 : f64, window = 4 : i64}
// CHECK: tess.attention %{{.*}} {causal, scale = 5.000000e-01 : f64, softcap = 5.000000e+01 : f64}
// CHECK-NOT: tess.packed_attention
func.func @not_packed(%qkv: tensor<2x8x48xf32>, %m: tensor<1x1x8x8xf32>) -> (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x8x48xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %0 = tess.attention %qh, %kh, %vh mask %m {scale = 0.5 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %1 = tess.attention %qh, %kh, %vh {dropout = 0.1 : f64, scale = 0.5 : f64, seed = 3 : i64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %2 = tess.attention %kh, %qh, %vh {scale = 0.5 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %3 = tess.attention %qh, %kh, %vh {causal, scale = 0.5 : f64, window = 4 : i64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  %4 = tess.attention %qh, %kh, %vh {causal, scale = 0.5 : f64, softcap = 50.0 : f64} : (tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x2x8x8xf32>
  return %0, %1, %2, %3, %4 : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>
}

// -----

// Tests Llama's form: q and k rotated in [B, H, T, Dh] by one [1, 1, T, Dh]
// table pair (GQA, 4 query and 2 K/V heads). The packed input is the
// projection rotated in its own layout ([B, T, 8, Dh], the tables viewed as
// [1, T, 1, Dh], rotated_heads = 6: the value heads pass through), and the
// projection's gradient is one adjoint rotation of the packed gradient; no
// transpose, split or concat is left.
// CHECK-LABEL: func.func @rotary_forward_backward(
// CHECK-SAME: %[[QKV:[^:]*]]: tensor<2x8x64xf32>
// CHECK-SAME: %[[COS:[^:]*]]: tensor<1x1x8x8xf32>
// CHECK-SAME: %[[SIN:[^:]*]]: tensor<1x1x8x8xf32>
// CHECK-SAME: %[[DY:[^:]*]]: tensor<2x8x32xf32>
// CHECK-NOT: tess.transpose
// CHECK-NOT: tess.split
// CHECK-DAG: %[[ROWS:.*]] = tess.reshape %[[QKV]] : (tensor<2x8x64xf32>) -> tensor<2x8x8x8xf32>
// CHECK-DAG: %[[C:.*]] = tess.reshape %[[COS]] : (tensor<1x1x8x8xf32>) -> tensor<1x8x1x8xf32>
// CHECK-DAG: %[[S:.*]] = tess.reshape %[[SIN]] : (tensor<1x1x8x8xf32>) -> tensor<1x8x1x8xf32>
// CHECK: %[[R:.*]] = tess.rotary %[[ROWS]], %[[C]], %[[S]] {rotated_heads = 6 : i64}
// CHECK: %[[P:.*]] = tess.reshape %[[R]] : (tensor<2x8x8x8xf32>) -> tensor<2x8x64xf32>
// CHECK: %[[Y:.*]], %[[LSE:.*]] = tess.packed_attention %[[P]] {causal, key_heads = 2 : i64, query_heads = 4 : i64
// CHECK: %[[DP:.*]] = tess.packed_attention_grad %[[P]], %[[Y]], %[[LSE]], %[[DY]]
// CHECK: %[[DROWS:.*]] = tess.reshape %[[DP]] : (tensor<2x8x64xf32>) -> tensor<2x8x8x8xf32>
// CHECK: %[[DR:.*]] = tess.rotary %[[DROWS]], %[[C]], %[[S]] {adjoint, rotated_heads = 6 : i64}
// CHECK: %[[DQKV:.*]] = tess.reshape %[[DR]] : (tensor<2x8x8x8xf32>) -> tensor<2x8x64xf32>
// CHECK-NOT: tess.transpose
// CHECK-NOT: tess.concat
// CHECK: return %[[Y]], %[[DQKV]]
func.func @rotary_forward_backward(%qkv: tensor<2x8x64xf32>, %cos: tensor<1x1x8x8xf32>, %sin: tensor<1x1x8x8xf32>, %dY: tensor<2x8x32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x64xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 32, 16, 16>} : (tensor<2x8x64xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qt = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %qh = tess.rotary %qt, %cos, %sin : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kt = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %kh = tess.rotary %kt, %cos, %sin : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %y = tess.attention %qh, %kh, %vh {causal, scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  %yt = tess.transpose %y {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
  %y3 = tess.reshape %yt : (tensor<2x8x4x8xf32>) -> tensor<2x8x32xf32>
  %dY4 = tess.reshape %dY : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %dYh = tess.transpose %dY4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %dq, %dk, %dv = tess.attention_grad %qh, %kh, %vh, %dYh {causal, scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
  %dqr = tess.rotary %dq, %cos, %sin {adjoint} : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %dqt = tess.transpose %dqr {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
  %dq3 = tess.reshape %dqt : (tensor<2x8x4x8xf32>) -> tensor<2x8x32xf32>
  %dkr = tess.rotary %dk, %cos, %sin {adjoint} : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %dkt = tess.transpose %dkr {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dk3 = tess.reshape %dkt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dvt = tess.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dv3 = tess.reshape %dvt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dqkv = tess.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  return %y3, %dqkv : tensor<2x8x32xf32>, tensor<2x8x64xf32>
}

// -----

// Tests a rotated q whose cotangent is also summed from elsewhere (here q
// is returned too): the backward chain is not the plain one, so the
// gradient's pieces are views of the packed gradient and the old adjoint
// rotations stay; the forward is packed all the same. And q and k rotated
// by different tables are not packed at all.
// CHECK-LABEL: func.func @rotary_partial(
// CHECK: tess.rotary %{{.*}} {rotated_heads = 6 : i64}
// CHECK: tess.packed_attention_grad
// CHECK: tess.rotary %{{.*}} {adjoint}
// CHECK: tess.concat
// CHECK-LABEL: func.func @rotary_other_tables(
// CHECK-NOT: tess.packed_attention
// CHECK: tess.attention
func.func @rotary_partial(%qkv: tensor<2x8x64xf32>, %cos: tensor<1x1x8x8xf32>, %sin: tensor<1x1x8x8xf32>, %dYh: tensor<2x4x8x8xf32>, %dextra: tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x8x64xf32>) {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 32, 16, 16>} : (tensor<2x8x64xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qt = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %qh = tess.rotary %qt, %cos, %sin : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kt = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %kh = tess.rotary %kt, %cos, %sin : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %dq, %dk, %dv = tess.attention_grad %qh, %kh, %vh, %dYh {causal, scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>)
  %dqsum = tess.add %dq, %dextra : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %dqr = tess.rotary %dqsum, %cos, %sin {adjoint} : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %dqt = tess.transpose %dqr {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x8x8xf32>) -> tensor<2x8x4x8xf32>
  %dq3 = tess.reshape %dqt : (tensor<2x8x4x8xf32>) -> tensor<2x8x32xf32>
  %dkr = tess.rotary %dk, %cos, %sin {adjoint} : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %dkt = tess.transpose %dkr {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dk3 = tess.reshape %dkt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dvt = tess.transpose %dv {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x8x8xf32>) -> tensor<2x8x2x8xf32>
  %dv3 = tess.reshape %dvt : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %dqkv = tess.concat %dq3, %dk3, %dv3 {axis = 2 : i64} : (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x64xf32>
  return %qh, %dqkv : tensor<2x4x8x8xf32>, tensor<2x8x64xf32>
}

func.func @rotary_other_tables(%qkv: tensor<2x8x64xf32>, %cos: tensor<1x1x8x8xf32>, %sin: tensor<1x1x8x8xf32>, %sin2: tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %q, %k, %v = tess.split %qkv {axis = 2 : i64, sizes = array<i64: 32, 16, 16>} : (tensor<2x8x64xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>)
  %q4 = tess.reshape %q : (tensor<2x8x32xf32>) -> tensor<2x8x4x8xf32>
  %qt = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x8xf32>) -> tensor<2x4x8x8xf32>
  %qh = tess.rotary %qt, %cos, %sin : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %k4 = tess.reshape %k : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %kt = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %kh = tess.rotary %kt, %cos, %sin2 : (tensor<2x2x8x8xf32>, tensor<1x1x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x2x8x8xf32>
  %v4 = tess.reshape %v : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x8x2x8xf32>) -> tensor<2x2x8x8xf32>
  %y = tess.attention %qh, %kh, %vh {causal, scale = 0.35355 : f64} : (tensor<2x4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}
