// RUN: tessera-opt %s -split-input-file -tess-build-training=vocabulary-multiple=1 -canonicalize -cse -tess-split-pipeline-stages=stages=3 | FileCheck %s

// Tests that a module's tess.plan, not the pass's options (stages=3 here),
// says how tess-split-pipeline-stages cuts split-stages.mlir's model (four
// units: embedding, h.0, h.1, head).

// Interleaved over 2 devices: 2 x 2 chunks of one unit each, written into
// the plan.
// CHECK: module attributes {tess.pipeline = {stages = 2 : i64, virtual = 2 : i64}, tess.plan = #tess.plan<stages = 2, schedule = "interleaved:2", microbatches = 4, chunks = [#tess.chunk<device = 0, units = 0 to 0>, #tess.chunk<device = 1, units = 1 to 1>, #tess.chunk<device = 0, units = 2 to 2>, #tess.chunk<device = 1, units = 3 to 3>]>}
// CHECK: func.func @stage3_forward({{.*}}tensor<f32> {tess.loss}) attributes {tess.pipeline_device = 1 : i64, tess.pipeline_stage = 3 : i64}
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "interleaved:2", microbatches = 4>} {
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

// -----

// The plan's own chunks, uneven: the embedding alone, then both layers and
// the head; stage 0's forward has no linear layer.
// CHECK: module attributes {tess.pipeline = {stages = 2 : i64, virtual = 1 : i64}, tess.plan = #tess.plan<stages = 2, schedule = "1f1b", microbatches = 2, chunks = [#tess.chunk<device = 0, units = 0 to 0>, #tess.chunk<device = 1, units = 1 to 3>]>}
// CHECK: func.func @stage0_forward(
// CHECK-NOT: tess.linear
// CHECK: tess.embedding
// CHECK-NOT: tess.linear
// CHECK: func.func @stage0_backward(
// CHECK: func.func @stage1_forward(
// CHECK-COUNT-3: tess.linear
module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b", microbatches = 2,
    chunks = [#tess.chunk<device = 0, units = 0 to 0>, #tess.chunk<device = 1, units = 1 to 3>]>} {
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
