// RUN: tessera-opt %s -split-input-file -tess-schedule-loss-gradient | FileCheck %s

// Tests that a data-parallel rank's loss moves down to its gradient, past
// the all-reduced count of targets that scales the gradient, and that what
// reads the loss's value (its all-reduce and mean) moves after the gradient,
// in order: the pair is then adjacent, as tess-fuse-epilogues and
// tess-chunk-loss-head take it.
// CHECK-LABEL: func.func @data_parallel_loss(
// CHECK:      %[[COUNT:.*]] = tess.all_reduce %{{.*}} {axis = "dp"}
// CHECK-NEXT: %[[SCALE:.*]] = tess.div %{{.*}}, %[[COUNT]]
// CHECK-NEXT: %[[LOSS:.*]] = tess.cross_entropy %arg0, %arg1
// CHECK-NEXT: %[[GRAD:.*]] = tess.cross_entropy_grad %arg0, %arg1, %[[SCALE]]
// CHECK-NEXT: %[[SUM:.*]] = tess.all_reduce %[[LOSS]] {axis = "dp"}
// CHECK-NEXT: %[[MEAN:.*]] = tess.div %[[SUM]], %[[COUNT]]
// CHECK-NEXT: return %[[MEAN]], %[[GRAD]]
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @data_parallel_loss(%logits: tensor<4x16xf32>, %targets: tensor<4xi64>, %count: tensor<f32>, %seed: tensor<f32>)
    -> (tensor<f32>, tensor<4x16xf32>) {
  %loss = tess.cross_entropy %logits, %targets : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  %sum = tess.all_reduce %loss {axis = "dp"} : tensor<f32>
  %all = tess.all_reduce %count {axis = "dp"} : tensor<f32>
  %mean = tess.div %sum, %all : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %scale = tess.div %seed, %all : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %targets, %scale : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  return %mean, %dl : tensor<f32>, tensor<4x16xf32>
}
}

// -----

// Tests that the order stays when the gradient's scale reads the loss's
// value (nothing to fuse then; a later gradient of the same pair does not
// count) or when the gradient is of other targets.
// CHECK-LABEL: func.func @not_moved(
// CHECK:      tess.cross_entropy %arg0, %arg1
// CHECK-NEXT: tess.div
// CHECK-NEXT: tess.cross_entropy_grad %arg0, %arg1
// CHECK-NEXT: tess.cross_entropy %arg0, %arg2
// CHECK-NEXT: tess.mul
// CHECK-NEXT: tess.cross_entropy_grad %arg0, %arg1
func.func @not_moved(%logits: tensor<4x16xf32>, %targets: tensor<4xi64>, %other: tensor<4xi64>, %seed: tensor<f32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>) {
  %loss = tess.cross_entropy %logits, %targets : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  %scale = tess.div %seed, %loss : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %targets, %scale : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  %loss2 = tess.cross_entropy %logits, %other : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  %twice = tess.mul %seed, %seed : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %dl2 = tess.cross_entropy_grad %logits, %targets, %twice : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
  return %dl, %dl2, %loss2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<f32>
}
