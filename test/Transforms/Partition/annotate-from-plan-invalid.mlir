// RUN: split-file %s %t
// RUN: tessera-opt %t/unsearched.mlir --tess-build-training --tess-annotate-from-plan -verify-diagnostics
// RUN: tessera-opt %t/no-step.mlir --tess-annotate-from-plan -verify-diagnostics

//--- unsearched.mlir
// Tests that a step whose forward was never searched is an error, not a
// replicated plan.
// expected-error@below {{tess-annotate-from-plan: the module has no searched plan: tess-search-sharding writes it (tess.mesh, and tess.planned on @forward's ops) before the step is built}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- no-step.mlir
// Tests that the pass needs the training step.
// expected-error@below {{tess-annotate-from-plan: the module has no @forward_backward (build it with tess-build-training)}}
module {
}
