// RUN: not tessera-opt %s --tess-lower-to-emitc 2>&1 | FileCheck %s

// Without the training builder there is no step to lower.
// CHECK: error: tess-lower-to-emitc: no @forward_backward (run tess-build-training first)
func.func @forward(%ids: tensor<2x8xi64>) -> tensor<2x8xi64> {
  return %ids : tensor<2x8xi64>
}
