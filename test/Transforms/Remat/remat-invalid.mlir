// RUN: tessera-opt %s -tess-build-training -tess-rematerialize='mode=full layers=encoder\.layer\.[0-9]+' -verify-diagnostics
// RUN: not tessera-opt %s -tess-build-training -tess-rematerialize=mode=partial 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not tessera-opt %s -tess-build-training -tess-rematerialize='layers=h\.(' 2>&1 | FileCheck %s --check-prefix=REGEX
// RUN: not tessera-opt %s -tess-rematerialize=mode=full 2>&1 | FileCheck %s --check-prefix=UNBUILT

// MODE: error: tess-rematerialize: mode 'partial': expected none, selective or full
// REGEX: error: tess-rematerialize: layers 'h\.(': parentheses not balanced
// UNBUILT: error: tess-rematerialize: pipeline: the module has no @forward_backward and @optimizer_step (run tess-build-training first)

// Tests that a layer pattern matching none of the model's layers is an
// error naming the layers there are (on @forward_backward, which
// tess-build-training locates at @forward).
// expected-error@+1 {{tess-rematerialize: layers 'encoder\.layer\.[0-9]+' matches none of the 2 layers (keys h.0 to h.1)}}
func.func @forward(%ids: tensor<1x4xi64>) -> tensor<1x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %w0 = tess.parameter "h.0.fc.weight" trainable : tensor<8x8xf32>
  %w1 = tess.parameter "h.1.fc.weight" trainable : tensor<8x8xf32>
  %gf = tess.parameter "ln_f.weight" trainable : tensor<8xf32>
  %x0 = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %x1 = tess.linear %x0, %w0 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %x2 = tess.linear %x1, %w1 : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %nf = tess.layer_norm %x2 scale %gf {epsilon = 1.0e-5 : f64} : (tensor<1x4x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %y = tess.linear %nf, %wte {transpose_weight} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}
