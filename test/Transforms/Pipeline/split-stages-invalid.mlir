// RUN: tessera-opt %s -split-input-file -tess-build-training -tess-split-pipeline-stages="stages=3 virtual=2" -verify-diagnostics
// RUN: not tessera-opt %s -split-input-file -tess-split-pipeline-stages=stages=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not tessera-opt %s -split-input-file -tess-split-pipeline-stages=stages=2 2>&1 | FileCheck %s --check-prefix=UNTRAINED

// ZERO: stages and virtual must be at least 1, got stages=0 virtual=1
// UNTRAINED: the module has no @forward_backward and @optimizer_step (run tess-build-training first)

// More pipeline stages than units (embedding, 1 layer, head).
// expected-error@+1 {{tess-split-pipeline-stages: 3 stages x 2 virtual = 6 pipeline stages, but the program has only 3 units to cut (embedding, 1 layers, head)}}
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %w0 = tess.parameter "h.0.mlp.weight" trainable : tensor<8x8xf32>
  %e = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y0 = tess.linear %e, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %y = tess.linear %y0, %wte {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
