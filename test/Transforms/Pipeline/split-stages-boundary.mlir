// What crosses a stage boundary in a GPT-style program: in bf16, with the
// tied head padded to 32 classes, each MLP's projection added straight to
// the residual stream. Per micro-batch, one activation should cross
// forward and one activation gradient back: the residual stream and its
// gradient.
// RUN: tessera-opt %s -tess-build-training="vocabulary-multiple=32 precision=bf16" -canonicalize -cse -tess-split-pipeline-stages=stages=2 | FileCheck %s

// The head's weight is the cast tied embedding concatenated with zeros,
// computed from parameters alone: the last stage computes it itself, from
// its own wte argument, instead of receiving 32x8 (50304x1024 in GPT-2)
// with every micro-batch, and the first stage does not compute it at all.
// Layer h.0's projection gradient is the residual stream's gradient; its
// reshape for the weight gradient is done by stage 0, which holds the
// weight, so that only the residual stream's gradient crosses back, and
// not its reshaped copy besides.
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-SAME: -> (tensor<2x4x8xbf16> {tess.activation}, {{[^{]*}} {tess.saved},
// CHECK-NOT: tess.activation}
// CHECK-NOT: tess.concat
// CHECK-LABEL: func.func @stage0_backward(
// CHECK-SAME: %[[DX:[^:]*]]: tensor<2x4x8xbf16> {tess.activation_gradient}, %{{[^:]*}}: tensor<2x4xi64> {tess.input = "input_ids"}
// CHECK: %[[ROWS:.*]] = tess.reshape %[[DX]] : (tensor<2x4x8xbf16>) -> tensor<8x8xbf16>
// CHECK: tess.matmul %{{.*}}, %[[ROWS]] {transpose_lhs}
// CHECK-LABEL: func.func @stage1_forward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xbf16> {tess.activation}, %[[WTE:[^:]*]]: tensor<16x8xf32> {tess.parameter = "wte"}
// CHECK-NOT: tess.activation}
// CHECK: %[[CAST:.*]] = tess.cast %[[WTE]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[HEAD:.*]] = tess.concat %[[CAST]]
// CHECK: tess.linear %{{.*}}, %[[HEAD]], %{{.*}} {transpose_weight}
// CHECK-LABEL: func.func @stage1_backward(
// CHECK-SAME: -> (tensor<2x4x8xbf16> {tess.activation_gradient}, tensor<16x8xbf16> {tess.gradient = "wte"},
// CHECK-NOT: tess.activation_gradient}
// CHECK-LABEL: func.func @optimizer_step(
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %u0 = tess.parameter "h.0.mlp.fc.weight" trainable : tensor<8x8xf32>
  %w0 = tess.parameter "h.0.mlp.proj.weight" trainable : tensor<8x8xf32>
  %u1 = tess.parameter "h.1.mlp.fc.weight" trainable : tensor<8x8xf32>
  %w1 = tess.parameter "h.1.mlp.proj.weight" trainable : tensor<8x8xf32>
  %hb = tess.parameter "head.bias" trainable : tensor<16xf32>
  %e = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %a0 = tess.linear %e, %u0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g0 = tess.gelu %a0 : tensor<2x4x8xf32>
  %y0 = tess.linear %g0, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %x1 = tess.add %e, %y0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a1 = tess.linear %x1, %u1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g1 = tess.gelu %a1 : tensor<2x4x8xf32>
  %y1 = tess.linear %g1, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %x2 = tess.add %x1, %y1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = tess.linear %x2, %wte, %hb {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
