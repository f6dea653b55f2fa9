// RUN: tessera-opt %s -tess-build-training=vocabulary-multiple=1 -canonicalize -cse -tess-rematerialize -tess-split-pipeline-stages | FileCheck %s

// Tests that tess-rematerialize's clones (tess.recomputed) run in their
// stage's backward, recomputing from what the forward saves, rather than a
// second time in the forward: split-stages.mlir's model (embedding, h.0,
// h.1, head) on 2 stages, the first chunk recomputing everything of h.0
// (its chunk's remat, the pipeline search's per stage), the second nothing.

// Stage 0's forward saves the layer's input (the embedding) rather than
// its linear's output, which its backward recomputes; stage 1 saves its
// linear's output as without recomputation.
// CHECK-LABEL: func.func @stage0_forward(
// CHECK: %[[E:[0-9]+]] = tess.embedding
// CHECK: %[[Y:[0-9]+]] = tess.linear %[[E]]
// CHECK: %[[G:[0-9]+]] = tess.gelu %[[Y]]
// CHECK: %[[X:[0-9]+]] = tess.add %[[E]], %[[G]]
// CHECK: return %[[X]], %[[E]] :
// CHECK-LABEL: func.func @stage0_backward(%arg0: tensor<2x4x8xf32> {tess.saved}
// CHECK: tess.linear %arg0, {{.*}}{tess.recomputed}
// CHECK: tess.gelu_grad
// CHECK-LABEL: func.func @stage1_forward(
// CHECK: %[[Y1:[0-9]+]] = tess.linear %arg0
// CHECK: return {{.*}}%[[Y1]]
// CHECK-LABEL: func.func @stage1_backward(
// CHECK-NOT: tess.recomputed
// CHECK: return

module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b", microbatches = 2, chunks = [#tess.chunk<device = 0, units = 0 to 1, remat = "full">, #tess.chunk<device = 1, units = 2 to 3>]>} {
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
}
