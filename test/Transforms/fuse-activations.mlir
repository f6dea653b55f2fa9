// RUN: tessera-opt %s -tess-fuse-activations -split-input-file | FileCheck %s

// Tests that GPT-2's tanh GELU, as torch exports it, becomes one tess.gelu.
// CHECK-LABEL: func.func @gelu_tanh_torch_order
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = tess.gelu %[[X]] {approximation = #tess<gelu_approximation tanh>} : tensor<2x8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh_torch_order(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %three = tess.constant dense<3.000000e+00> : tensor<f32>
  %c = tess.constant dense<4.471500e-02> : tensor<f32>
  %s = tess.constant dense<0.797884583> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %h = tess.mul %x, %half : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %p = tess.pow %x, %three : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %q = tess.mul %p, %c : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %a = tess.add %x, %q : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %t = tess.mul %a, %s : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %u = tess.tanh %t : tensor<2x8x16xf32>
  %v = tess.add %u, %one : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %y = tess.mul %h, %v : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that the tanh GELU is found in another association and operand order:
// 0.5 * (x * (1 + tanh)), x^3 as x * x * x, constants on the left, rank-1
// scalar constants.
// CHECK-LABEL: func.func @gelu_tanh_reassociated
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
// CHECK-NEXT: %[[Y:.*]] = tess.gelu %[[X]] {approximation = #tess<gelu_approximation tanh>} : tensor<4x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh_reassociated(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %half = tess.constant dense<5.000000e-01> : tensor<1xf32>
  %c = tess.constant dense<4.471500e-02> : tensor<1xf32>
  %s = tess.constant dense<0.797884583> : tensor<1xf32>
  %one = tess.constant dense<1.000000e+00> : tensor<1xf32>
  %xx = tess.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %xxx = tess.mul %xx, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %q = tess.mul %c, %xxx : (tensor<1xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %a = tess.add %q, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %t = tess.mul %s, %a : (tensor<1xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %u = tess.tanh %t : tensor<4x32xf32>
  %v = tess.add %one, %u : (tensor<1xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %w = tess.mul %x, %v : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %y = tess.mul %half, %w : (tensor<1xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// Tests that the exact GELU with a division by sqrt 2 becomes tess.gelu with
// no approximation.
// CHECK-LABEL: func.func @gelu_erf_div
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = tess.gelu %[[X]] : tensor<2x8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_erf_div(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %sqrt2 = tess.constant dense<1.41421354> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %d = tess.div %x, %sqrt2 : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %e = tess.erf %d : tensor<2x8x16xf32>
  %a = tess.add %e, %one : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %h = tess.mul %x, %half : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %y = tess.mul %h, %a : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that the exact GELU with a multiplication by 1/sqrt 2, and 0.5
// applied to (1 + erf) rather than to x, becomes tess.gelu.
// CHECK-LABEL: func.func @gelu_erf_mul
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
// CHECK-NEXT: %[[Y:.*]] = tess.gelu %[[X]] : tensor<2x8x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_erf_mul(%x: tensor<2x8x16xf32>) -> tensor<2x8x16xf32> {
  %inv = tess.constant dense<0.707106769> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %d = tess.mul %inv, %x : (tensor<f32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %e = tess.erf %d : tensor<2x8x16xf32>
  %a = tess.add %one, %e : (tensor<f32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %h = tess.mul %a, %half : (tensor<2x8x16xf32>, tensor<f32>) -> tensor<2x8x16xf32>
  %y = tess.mul %x, %h : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Tests that x * sigmoid(x), in either operand order, becomes tess.silu
// (and the product of the two silus one tess.swiglu gating the other).
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>, %[[Z:.*]]: tensor<2x8x32xf32>)
// CHECK-NEXT: %[[A:.*]] = tess.silu %[[X]] : tensor<2x8x32xf32>
// CHECK-NEXT: %[[Y:.*]] = tess.swiglu %[[Z]], %[[A]] : tensor<2x8x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @silu(%x: tensor<2x8x32xf32>, %z: tensor<2x8x32xf32>) -> tensor<2x8x32xf32> {
  %g = tess.sigmoid %x : tensor<2x8x32xf32>
  %a = tess.mul %x, %g : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %h = tess.sigmoid %z : tensor<2x8x32xf32>
  %b = tess.mul %h, %z : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %y = tess.mul %a, %b : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// Tests that a tanh GELU with a wrong constant (0.05 for 0.044715) is not
// fused.
// CHECK-LABEL: func.func @gelu_tanh_wrong_constant
// CHECK-NOT: tess.gelu
// CHECK: tess.tanh
func.func @gelu_tanh_wrong_constant(%x: tensor<8xf32>) -> tensor<8xf32> {
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %three = tess.constant dense<3.000000e+00> : tensor<f32>
  %c = tess.constant dense<5.000000e-02> : tensor<f32>
  %s = tess.constant dense<0.797884583> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %h = tess.mul %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %p = tess.pow %x, %three : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %q = tess.mul %p, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %a = tess.add %x, %q : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %t = tess.mul %a, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %u = tess.tanh %t : tensor<8xf32>
  %v = tess.add %u, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = tess.mul %h, %v : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Tests that an exact GELU whose erf result has another user is not fused:
// the erf would have to be computed anyway.
// CHECK-LABEL: func.func @gelu_erf_extra_user
// CHECK-NOT: tess.gelu
// CHECK: tess.erf
func.func @gelu_erf_extra_user(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %sqrt2 = tess.constant dense<1.41421354> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %d = tess.div %x, %sqrt2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e = tess.erf %d : tensor<8xf32>
  %a = tess.add %e, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %h = tess.mul %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = tess.mul %h, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y, %e : tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that the exact GELU with sqrt 2 multiplied instead of divided is not
// taken for a GELU.
// CHECK-LABEL: func.func @gelu_erf_multiplied_by_sqrt2
// CHECK-NOT: tess.gelu
func.func @gelu_erf_multiplied_by_sqrt2(%x: tensor<8xf32>) -> tensor<8xf32> {
  %sqrt2 = tess.constant dense<1.41421354> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %d = tess.mul %x, %sqrt2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %e = tess.erf %d : tensor<8xf32>
  %a = tess.add %e, %one : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %h = tess.mul %x, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %y = tess.mul %h, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// Tests that x * sigmoid(z) with z != x, and x * sigmoid(x) whose sigmoid has
// another user, stay unfused.
// CHECK-LABEL: func.func @silu_negative
// CHECK-NOT: tess.silu
func.func @silu_negative(%x: tensor<8xf32>, %z: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g = tess.sigmoid %z : tensor<8xf32>
  %a = tess.mul %x, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %h = tess.sigmoid %x : tensor<8xf32>
  %b = tess.mul %x, %h : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %a, %b, %h : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that SwiGLU's silu(gate) * up, in either order, becomes one
// tess.swiglu, and that a silu with another user stays (it would still be
// computed and stored).
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[G:.*]]: tensor<2x8xf32>, %[[U:.*]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[A:.*]] = tess.swiglu %[[G]], %[[U]] : tensor<2x8xf32>
// CHECK-NEXT: %[[B:.*]] = tess.swiglu %[[U]], %[[G]] : tensor<2x8xf32>
// CHECK-NEXT: %[[S:.*]] = tess.silu %[[G]] : tensor<2x8xf32>
// CHECK-NEXT: %[[C:.*]] = tess.mul %[[S]], %[[U]]
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]], %[[S]]
func.func @swiglu(%g: tensor<2x8xf32>, %u: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %s1 = tess.silu %g : tensor<2x8xf32>
  %a = tess.mul %s1, %u : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s2 = tess.silu %u : tensor<2x8xf32>
  %b = tess.mul %g, %s2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s3 = tess.silu %g : tensor<2x8xf32>
  %c = tess.mul %s3, %u : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %a, %b, %c, %s3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
