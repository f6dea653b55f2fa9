// RUN: tessera-opt %s -split-input-file -tess-build-training -tess-split-pipeline-stages -verify-diagnostics

// Tests that tess-split-pipeline-stages refuses a tess.plan it cannot
// follow: one without a pipeline, and chunks that do not cover the program
// (four units: embedding, h.0, h.1, head).

// expected-error@+1 {{tess-split-pipeline-stages: the module's tess.plan has no pipeline schedule}}
module attributes {tess.plan = #tess.plan<remat = "full">} {
  func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
    %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
    %e = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %y = tess.linear %e, %wte {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    return %y : tensor<2x4x16xf32>
  }
}

// -----

module attributes {tess.plan = #tess.plan<stages = 2, schedule = "gpipe",
    chunks = [#tess.chunk<device = 0, units = 0 to 1>, #tess.chunk<device = 1, units = 2 to 2>]>} {
  // expected-error@+1 {{tess-split-pipeline-stages: the plan's chunks cover units 0 to 2, the program has 4 units (embedding, 2 layers, head)}}
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
