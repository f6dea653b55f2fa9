// What crosses a stage boundary in a GPT-style program: in bf16, with the
// tied head padded to 32 classes, each MLP's projection added straight to
// the residual stream. Per micro-batch, one activation should cross
// forward and one activation gradient back: the residual stream and its
// gradient.
// RUN: tessera-opt %s -tess-build-training="vocabulary-multiple=32 precision=bf16" -canonicalize -cse -tess-split-pipeline-stages=stages=2 | FileCheck %s

// Each stage's prepare computes, once a step, what it reads of values
// computed from parameters alone: the weights' bf16 casts and the head's
// weight, the cast tied embedding concatenated with zeros. Its forward and
// backward take them all as resident values, in the prepare's order: the
// head's 32x8 weight (50304x1024 in GPT-2) is the last stage's own rather
// than sent from the first stage with every micro-batch, and no cast is
// computed again or saved per micro-batch.
// Layer h.0's projection gradient is the residual stream's gradient; its
// reshape for the weight gradient is done by stage 0, which holds the
// weight, so that only the residual stream's gradient crosses back, and
// not its reshaped copy besides.
// CHECK-LABEL: func.func @stage0_prepare(
// CHECK-SAME: -> (tensor<16x8xbf16> {tess.resident}, tensor<8x8xbf16> {tess.resident}, tensor<8x8xbf16> {tess.resident})
// CHECK-NOT: tess.concat
// CHECK: return
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-SAME: %{{[^:]*}}: tensor<16x8xbf16> {tess.resident}, %{{[^:]*}}: tensor<8x8xbf16> {tess.resident}, %{{[^:]*}}: tensor<8x8xbf16> {tess.resident}, %{{[^:]*}}: tensor<2x4xi64> {tess.input = "input_ids"})
// CHECK-SAME: -> (tensor<2x4x8xbf16> {tess.activation}, {{[^{]*}} {tess.saved},
// CHECK-NOT: tess.activation}
// CHECK-NOT: tess.cast
// CHECK-LABEL: func.func @stage0_backward(
// CHECK-SAME: %[[DX:[^:]*]]: tensor<2x4x8xbf16> {tess.activation_gradient}, %{{[^:]*}}: tensor<2x4xi64> {tess.input = "input_ids"}
// CHECK: tess.linear_weight_grad %{{.*}}, %[[DX]] : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<8x8xbf16>
// CHECK-LABEL: func.func @stage1_prepare(
// CHECK-SAME: %[[WTE:[^:]*]]: tensor<16x8xf32> {tess.parameter = "wte"}
// CHECK-SAME: -> (tensor<8x8xbf16> {tess.resident}, tensor<8x8xbf16> {tess.resident}, tensor<32x8xbf16> {tess.resident}, tensor<32xbf16> {tess.resident})
// CHECK: %[[CAST:.*]] = tess.cast %[[WTE]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK: %[[HEAD:.*]] = tess.concat %[[CAST]]
// CHECK: return %{{.*}}, %{{.*}}, %[[HEAD]],
// CHECK-LABEL: func.func @stage1_forward(
// CHECK-SAME: %[[HEADW:[^:]*]]: tensor<32x8xbf16> {tess.resident}, %[[HEADB:[^:]*]]: tensor<32xbf16> {tess.resident}, %[[X:[^:]*]]: tensor<2x4x8xbf16> {tess.activation}, %{{[^:]*}}: tensor<2x4xi64> {tess.input = "targets"})
// CHECK-NOT: tess.activation}
// CHECK-NOT: tess.cast
// CHECK: tess.linear %{{.*}}, %[[HEADW]], %[[HEADB]] {transpose_weight}
// CHECK-LABEL: func.func @stage1_backward(
// CHECK-SAME: %[[BHEADW:[^:]*]]: tensor<32x8xbf16> {tess.resident}
// CHECK-SAME: -> (tensor<2x4x8xbf16> {tess.activation_gradient}, tensor<16x8xbf16> {tess.gradient = "wte"},
// CHECK-NOT: tess.activation_gradient}
// CHECK: tess.linear %{{.*}}, %[[BHEADW]] :
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
