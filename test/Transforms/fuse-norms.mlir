// RUN: tessera-opt %s -tess-fuse-norms -split-input-file | FileCheck %s

// Tests that a decomposed LayerNorm with gamma and beta becomes one
// tess.layer_norm; epsilon, exported as the f32 nearest 1e-5, reads back as
// 1e-5, the op's default, so it is not printed.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[G:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[Y:.*]] = tess.layer_norm %[[X]] scale %[[G]] bias %[[B]] : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm(%x: tensor<2x8x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<2x8x16xf32> {
  %two = tess.constant dense<2.000000e+00> : tensor<f32>
  %eps = tess.constant dense<9.99999974E-6> : tensor<f32>
  %m = tess.reduce_mean %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %c = tess.sub %x, %m : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %p = tess.pow %c, %two : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %v = tess.reduce_mean %p {dims = array<i64: -1>, keep_dims} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %e = tess.add %v, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %s = tess.sqrt %e : tensor<2x8x1xf32>
  %n = tess.div %c, %s : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %w = tess.mul %n, %g : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %y = tess.add %w, %b : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that a LayerNorm over the last two dims, squared by c * c, normalized
// by c * reciprocal(sqrt), without gamma or beta, is fused with axis -2.
// CHECK-LABEL: func.func @layer_norm_two_dims_no_affine
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = tess.layer_norm %[[X]] {axis = -2 : i64, epsilon = 1.000000e-03 : f64}
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_two_dims_no_affine(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %eps = tess.constant dense<1.000000e-03> : tensor<f32>
  %m = tess.reduce_mean %x {dims = array<i64: 1, 2>, keep_dims} : (tensor<2x8x16xf32>) -> tensor<2x1x1xf32>
  %c = tess.sub %x, %m : (tensor<2x8x16xf32>, tensor<2x1x1xf32>) -> tensor<2x8x16xf32>
  %p = tess.mul %c, %c : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %v = tess.reduce_mean %p {dims = array<i64: -2, -1>, keep_dims} : (tensor<2x8x16xf32>) -> tensor<2x1x1xf32>
  %e = tess.add %eps, %v : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %s = tess.sqrt %e : tensor<2x1x1xf32>
  %r = tess.reciprocal %s : tensor<2x1x1xf32>
  %y = tess.mul %r, %c : (tensor<2x1x1xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that Llama's RMSNorm (Sqrt then Reciprocal, weight first) becomes
// tess.rms_norm with the weight as scale and epsilon read from the constant.
// CHECK-LABEL: func.func @rms_norm_reciprocal
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
// CHECK-NEXT: %[[W:.*]] = tess.parameter "norm.weight"
// CHECK-NEXT: %[[Y:.*]] = tess.rms_norm %[[X]] scale %[[W]] {epsilon = 1.000000e-05 : f64}
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_reciprocal(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %w = tess.parameter "norm.weight" trainable : tensor<16xf32>
  %two = tess.constant dense<2.000000e+00> : tensor<f32>
  %eps = tess.constant dense<9.99999974E-6> : tensor<f32>
  %p = tess.pow %x, %two : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %m = tess.reduce_mean %p {dims = array<i64: -1>, keep_dims} : (tensor<2x8x16xf32>) -> tensor<2x8x1xf32>
  %e = tess.add %m, %eps : (tensor<2x8x1xf32>, tensor<f32>) -> tensor<2x8x1xf32>
  %s = tess.sqrt %e : tensor<2x8x1xf32>
  %r = tess.reciprocal %s : tensor<2x8x1xf32>
  %n = tess.mul %x, %r : (tensor<2x8x16xf32>, tensor<2x8x1xf32>) -> tensor<2x8x16xf32>
  %y = tess.mul %w, %n : (tensor<16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that the other RMSNorm spellings fuse: 1 / sqrt, rsqrt, division by sqrt, the
// square as x * x, and no weight.
// CHECK-LABEL: func.func @rms_norm_spellings
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>)
// CHECK-NEXT: %[[A:.*]] = tess.rms_norm %[[X]] : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[B:.*]] = tess.rms_norm %[[X]] : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[C:.*]] = tess.rms_norm %[[X]] : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]]
func.func @rms_norm_spellings(%x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %eps = tess.constant dense<9.99999997E-7> : tensor<f32>
  %p1 = tess.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %m1 = tess.reduce_mean %p1 {dims = array<i64: 1>, keep_dims} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %e1 = tess.add %m1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s1 = tess.sqrt %e1 : tensor<4x1xf32>
  %r1 = tess.div %one, %s1 : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %a = tess.mul %x, %r1 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %p2 = tess.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %m2 = tess.reduce_mean %p2 {dims = array<i64: -1>, keep_dims} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %e2 = tess.add %m2, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r2 = tess.rsqrt %e2 : tensor<4x1xf32>
  %b = tess.mul %r2, %x : (tensor<4x1xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %p3 = tess.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %m3 = tess.reduce_mean %p3 {dims = array<i64: -1>, keep_dims} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %e3 = tess.add %m3, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s3 = tess.sqrt %e3 : tensor<4x1xf32>
  %c = tess.div %x, %s3 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %a, %b, %c : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Tests that Llama's casts to f32 and back stay outside the fused op: the
// norm is fused on the f32 value and the bf16 weight stays a separate mul.
// CHECK-LABEL: func.func @rms_norm_llama_casts
// CHECK-SAME: (%[[X:.*]]: tensor<2x16xbf16>, %[[W:.*]]: tensor<16xbf16>)
// CHECK-NEXT: %[[F:.*]] = tess.cast %[[X]] : tensor<2x16xbf16> to tensor<2x16xf32>
// CHECK-NEXT: %[[N:.*]] = tess.rms_norm %[[F]] : (tensor<2x16xf32>) -> tensor<2x16xf32>
// CHECK-NEXT: %[[H:.*]] = tess.cast %[[N]] : tensor<2x16xf32> to tensor<2x16xbf16>
// CHECK-NEXT: %[[Y:.*]] = tess.mul %[[W]], %[[H]]
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm_llama_casts(%x: tensor<2x16xbf16>, %w: tensor<16xbf16>) -> tensor<2x16xbf16> {
  %two = tess.constant dense<2.000000e+00> : tensor<f32>
  %eps = tess.constant dense<9.99999997E-7> : tensor<f32>
  %f = tess.cast %x : tensor<2x16xbf16> to tensor<2x16xf32>
  %p = tess.pow %f, %two : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %m = tess.reduce_mean %p {dims = array<i64: -1>, keep_dims} : (tensor<2x16xf32>) -> tensor<2x1xf32>
  %e = tess.add %m, %eps : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %r = tess.rsqrt %e : tensor<2x1xf32>
  %n = tess.mul %f, %r : (tensor<2x16xf32>, tensor<2x1xf32>) -> tensor<2x16xf32>
  %h = tess.cast %n : tensor<2x16xf32> to tensor<2x16xbf16>
  %y = tess.mul %w, %h : (tensor<16xbf16>, tensor<2x16xbf16>) -> tensor<2x16xbf16>
  return %y : tensor<2x16xbf16>
}

// -----

// Tests that a mean over a leading dim is not a norm over trailing dims.
// CHECK-LABEL: func.func @rms_norm_leading_dim
// CHECK-NOT: tess.rms_norm
// CHECK: tess.reduce_mean
func.func @rms_norm_leading_dim(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %eps = tess.constant dense<9.99999997E-7> : tensor<f32>
  %p = tess.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %m = tess.reduce_mean %p {dims = array<i64: 0>, keep_dims} : (tensor<4x16xf32>) -> tensor<1x16xf32>
  %e = tess.add %m, %eps : (tensor<1x16xf32>, tensor<f32>) -> tensor<1x16xf32>
  %r = tess.rsqrt %e : tensor<1x16xf32>
  %y = tess.mul %x, %r : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Tests that a LayerNorm whose variance is also returned is not fused, and
// that the RMSNorm reading of its tail is not taken either (the squared value
// feeds the returned variance).
// CHECK-LABEL: func.func @layer_norm_extra_user
// CHECK-NOT: tess.layer_norm
// CHECK-NOT: tess.rms_norm
// CHECK: return
func.func @layer_norm_extra_user(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x1xf32>) {
  %two = tess.constant dense<2.000000e+00> : tensor<f32>
  %eps = tess.constant dense<1.000000e-05> : tensor<f32>
  %m = tess.reduce_mean %x {dims = array<i64: -1>, keep_dims} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %c = tess.sub %x, %m : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %p = tess.pow %c, %two : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  %v = tess.reduce_mean %p {dims = array<i64: -1>, keep_dims} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %e = tess.add %v, %eps : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32>
  %s = tess.sqrt %e : tensor<8x1xf32>
  %y = tess.div %c, %s : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  return %y, %v : tensor<8x16xf32>, tensor<8x1xf32>
}

// -----

// Tests that squaring with the wrong power (3) is not taken for a norm.
// CHECK-LABEL: func.func @rms_norm_wrong_power
// CHECK-NOT: tess.rms_norm
func.func @rms_norm_wrong_power(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %three = tess.constant dense<3.000000e+00> : tensor<f32>
  %eps = tess.constant dense<9.99999997E-7> : tensor<f32>
  %p = tess.pow %x, %three : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
  %m = tess.reduce_mean %p {dims = array<i64: -1>, keep_dims} : (tensor<4x16xf32>) -> tensor<4x1xf32>
  %e = tess.add %m, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = tess.rsqrt %e : tensor<4x1xf32>
  %y = tess.mul %x, %r : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
