// The 16-class head is left unpadded (vocabulary-multiple=1): these cases
// look at the stage split, not at tess-build-training's head padding.
// RUN: tessera-opt %s -tess-build-training=vocabulary-multiple=1 -canonicalize -cse -tess-split-pipeline-stages=stages=2 | FileCheck %s
// RUN: tessera-opt %s -tess-build-training=vocabulary-multiple=1 -canonicalize -cse -tess-split-pipeline-stages="stages=2 virtual=2" | FileCheck %s --check-prefix=VIRTUAL

// A tied embedding, two residual MLP layers (h.0, h.1) and a head: four
// units. Two stages: embedding + h.0 | h.1 + head. The residual stream is
// the one activation crossing forward and its gradient the one crossing
// back. The tied embedding's gradient comes in two parts, each stage
// returning its own under tess.gradient = "wte" (the embedding's and the
// head's; the driver adds them once a step) instead of the head's part
// crossing with every micro-batch; each layer's weight gradient is computed
// by the stage that holds the weight;
// the last stage holds the loss; the loss scale reaches the cross-entropy's
// gradient.
// CHECK: module attributes {tess.pipeline = {stages = 2 : i64, virtual = 1 : i64}}
// CHECK-LABEL: func.func @stage0_forward(
// CHECK-SAME: {tess.parameter = "wte"}
// CHECK-SAME: {tess.input = "input_ids"}
// CHECK-SAME: {tess.parameter = "h.0.mlp.weight"}
// CHECK-SAME: {tess.parameter = "h.0.mlp.bias"}
// CHECK-SAME: -> (tensor<2x4x8xf32> {tess.activation}, tensor<2x4x8xf32> {tess.saved}, tensor<2x4x8xf32> {tess.saved})
// CHECK-SAME: attributes {tess.pipeline_device = 0 : i64, tess.pipeline_stage = 0 : i64}
// CHECK: %[[X0:.*]] = tess.embedding
// CHECK: %[[Y0:.*]] = tess.linear %[[X0]]
// CHECK: tess.gelu %[[Y0]]
// CHECK: %[[X1:.*]] = tess.add
// CHECK: return %[[X1]], %[[X0]], %[[Y0]]

// CHECK-LABEL: func.func @stage0_backward(
// CHECK-SAME: %[[SAVEDX0:[^:]*]]: tensor<2x4x8xf32> {tess.saved}
// CHECK-SAME: %[[SAVEDY0:[^:]*]]: tensor<2x4x8xf32> {tess.saved}
// CHECK-SAME: %[[DX1:[^:]*]]: tensor<2x4x8xf32> {tess.activation_gradient}
// CHECK-SAME: {tess.parameter = "h.0.mlp.weight"}
// CHECK-SAME: {tess.input = "input_ids"}
// CHECK-SAME: -> (tensor<16x8xf32> {tess.gradient = "wte"}, tensor<8x8xf32> {tess.gradient = "h.0.mlp.weight"}, tensor<8xf32> {tess.gradient = "h.0.mlp.bias"})
// CHECK: %[[DY0:.*]] = tess.gelu_grad %[[SAVEDY0]], %[[DX1]]
// CHECK: tess.linear_weight_grad %[[SAVEDX0]], %[[DY0]]
// CHECK: %[[DWTE:.*]] = tess.embedding_grad
// CHECK-NOT: tess.add
// CHECK: return %[[DWTE]]

// CHECK-LABEL: func.func @stage1_forward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4x8xf32> {tess.activation}
// CHECK-SAME: {tess.parameter = "h.1.mlp.weight"}
// CHECK-SAME: {tess.input = "targets"}
// CHECK-SAME: tensor<f32> {tess.loss})
// CHECK-SAME: attributes {tess.pipeline_device = 1 : i64, tess.pipeline_stage = 1 : i64}
// CHECK: tess.linear %[[X]]
// CHECK: tess.cross_entropy

// CHECK-LABEL: func.func @stage1_backward(
// CHECK-SAME: {tess.input = "loss_scale"}
// CHECK-SAME: -> (tensor<2x4x8xf32> {tess.activation_gradient}, tensor<16x8xf32> {tess.gradient = "wte"}, {{.*}}{tess.gradient = "h.1.mlp.weight"}, {{.*}}{tess.gradient = "h.1.mlp.bias"}, {{.*}}{tess.gradient = "head.bias"})
// CHECK: tess.cross_entropy_grad
// CHECK-NOT: tess.embedding_grad
// CHECK: return
// CHECK-LABEL: func.func @optimizer_step(

// Interleaved, 2 devices x 2: one unit per stage, stage c on device c mod 2;
// the activation passes through every stage, the embedding's stage does
// the embedding's backward.
// VIRTUAL: module attributes {tess.pipeline = {stages = 2 : i64, virtual = 2 : i64}}
// VIRTUAL: func.func @stage0_forward({{.*}}-> (tensor<2x4x8xf32> {tess.activation}) attributes {tess.pipeline_device = 0 : i64, tess.pipeline_stage = 0 : i64}
// VIRTUAL: func.func @stage0_backward({{.*}} -> (tensor<16x8xf32> {tess.gradient = "wte"})
// VIRTUAL: tess.embedding_grad
// VIRTUAL: func.func @stage1_forward({{.*}}tess.pipeline_device = 1 : i64, tess.pipeline_stage = 1 : i64}
// VIRTUAL: func.func @stage1_backward({{.*}}{tess.gradient = "h.0.mlp.weight"}
// VIRTUAL: func.func @stage2_forward({{.*}}tess.pipeline_device = 0 : i64, tess.pipeline_stage = 2 : i64}
// VIRTUAL: func.func @stage2_backward({{.*}}{tess.gradient = "h.1.mlp.weight"}
// VIRTUAL: func.func @stage3_forward({{.*}}tensor<f32> {tess.loss}) attributes {tess.pipeline_device = 1 : i64, tess.pipeline_stage = 3 : i64}
// VIRTUAL: func.func @stage3_backward({{.*}}{tess.gradient = "head.bias"}
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %w0 = tess.parameter "h.0.mlp.weight" trainable : tensor<8x8xf32>
  %b0 = tess.parameter "h.0.mlp.bias" trainable : tensor<8xf32>
  %w1 = tess.parameter "h.1.mlp.weight" trainable : tensor<8x8xf32>
  %b1 = tess.parameter "h.1.mlp.bias" trainable : tensor<8xf32>
  %hb = tess.parameter "head.bias" trainable : tensor<16xf32>
  %e = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y0 = tess.linear %e, %w0, %b0 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g0 = tess.gelu %y0 : tensor<2x4x8xf32>
  %x1 = tess.add %e, %g0 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y1 = tess.linear %x1, %w1, %b1 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g1 = tess.gelu %y1 : tensor<2x4x8xf32>
  %x2 = tess.add %x1, %g1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = tess.linear %x2, %wte, %hb {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
