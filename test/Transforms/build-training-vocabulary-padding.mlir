// RUN: tessera-opt %s -tess-build-training="vocabulary-multiple=8" -split-input-file | FileCheck %s
// RUN: tessera-opt %s -tess-build-training="vocabulary-multiple=8 precision=bf16" -split-input-file | FileCheck %s --check-prefix=BF16
// RUN: tessera-opt %s -tess-build-training -split-input-file | FileCheck %s --check-prefix=DEFAULT

// Tests that a tied head of 20 classes is padded to 24: the weight gets 4
// zero rows (transpose_weight: [V, D]), a bias appears with the lowest
// finite value for the padded classes, the loss reads the padded logits,
// the weight's gradient is the padded one's first 20 rows, and the model's
// vocabulary stays recorded.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: -> (tensor<f32>, tensor<20x8xf32> {tess.gradient = "wte"})
// CHECK-SAME: tess.vocabulary = 20 : i64
// CHECK: %[[ZEROS:.*]] = tess.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK: %[[WP:.*]] = tess.concat %[[WTE:.*]], %[[ZEROS]] {axis = 0 : i64} : (tensor<20x8xf32>, tensor<4x8xf32>) -> tensor<24x8xf32>
// CHECK: %[[NOBIAS:.*]] = tess.constant dense<0.000000e+00> : tensor<20xf32>
// CHECK: %[[LOWEST:.*]] = tess.constant dense<-3.40282347E+38> : tensor<4xf32>
// CHECK: %[[BIAS:.*]] = tess.concat %[[NOBIAS]], %[[LOWEST]] {axis = 0 : i64} : (tensor<20xf32>, tensor<4xf32>) -> tensor<24xf32>
// CHECK: %[[Y:.*]] = tess.linear %{{.*}}, %[[WP]], %[[BIAS]] {transpose_weight} : (tensor<2x4x8xf32>, tensor<24x8xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
// CHECK: tess.cross_entropy %[[Y]], %{{.*}} : (tensor<2x4x24xf32>, tensor<2x4xi64>) -> tensor<f32>
// CHECK: %[[DY:.*]] = tess.cross_entropy_grad %[[Y]]
// CHECK: tess.linear %[[DY]], %[[WP]] : (tensor<2x4x24xf32>, tensor<24x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[DWP:.*]] = tess.linear_weight_grad {{.*}} -> tensor<24x8xf32>
// CHECK: tess.slice %[[DWP]] {limits = array<i64: 20, 8>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<24x8xf32>) -> tensor<20x8xf32>
// In bf16 the padding's logit is bf16's lowest finite value.
// BF16-LABEL: func.func @forward_backward(
// BF16: -3.389530e+38
// BF16: tess.linear {{.*}} -> tensor<2x4x24xbf16>
// The default multiple, 64: 20 classes become 64.
// DEFAULT-LABEL: func.func @forward_backward(
// DEFAULT-SAME: tess.vocabulary = 20 : i64
// DEFAULT: tess.cross_entropy {{.*}} : (tensor<2x4x64xf32>, tensor<2x4xi64>) -> tensor<f32>
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x20xf32> {
  %wte = tess.parameter "wte" trainable : tensor<20x8xf32>
  %e = tess.embedding %wte, %ids : (tensor<20x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = tess.linear %e, %wte {transpose_weight} : (tensor<2x4x8xf32>, tensor<20x8xf32>) -> tensor<2x4x20xf32>
  return %y : tensor<2x4x20xf32>
}

// -----

// Tests that a [D, V] head with its own bias gets zero columns and the bias
// the lowest value appended; the bias's gradient is the first 20 of the
// padded one's.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[W:[^:]*]]: tensor<8x20xf32> {tess.parameter = "head.weight"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<20xf32> {tess.parameter = "head.bias"}
// CHECK-SAME: -> (tensor<f32>, tensor<20x8xf32> {tess.gradient = "wte"}, tensor<8x20xf32> {tess.gradient = "head.weight"}, tensor<20xf32> {tess.gradient = "head.bias"})
// CHECK: %[[WP:.*]] = tess.concat %[[W]], %{{.*}} {axis = 1 : i64} : (tensor<8x20xf32>, tensor<8x4xf32>) -> tensor<8x24xf32>
// CHECK: %[[BP:.*]] = tess.concat %[[B]], %{{.*}} {axis = 0 : i64} : (tensor<20xf32>, tensor<4xf32>) -> tensor<24xf32>
// CHECK: tess.linear %{{.*}}, %[[WP]], %[[BP]] : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
// CHECK: tess.slice {{.*}} -> tensor<20xf32>
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x20xf32> {
  %wte = tess.parameter "wte" trainable : tensor<20x8xf32>
  %w = tess.parameter "head.weight" trainable : tensor<8x20xf32>
  %b = tess.parameter "head.bias" trainable : tensor<20xf32>
  %e = tess.embedding %wte, %ids : (tensor<20x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = tess.linear %e, %w, %b : (tensor<2x4x8xf32>, tensor<8x20xf32>, tensor<20xf32>) -> tensor<2x4x20xf32>
  return %y : tensor<2x4x20xf32>
}

// -----

// Tests that an aligned head (16 classes, multiple 8) and a head that is
// not a linear (here a matmul) are left as they are: no tess.vocabulary.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-NOT: tess.vocabulary
// CHECK-NOT: tess.concat
// CHECK: tess.cross_entropy {{.*}} : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %e = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = tess.linear %e, %wte {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// CHECK-LABEL: func.func @forward_backward(
// CHECK-NOT: tess.vocabulary
// CHECK-NOT: tess.concat
// CHECK: tess.cross_entropy {{.*}} : (tensor<2x4x20xf32>, tensor<2x4xi64>) -> tensor<f32>
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x20xf32> {
  %wte = tess.parameter "wte" trainable : tensor<20x8xf32>
  %w = tess.parameter "head.weight" trainable : tensor<8x20xf32>
  %e = tess.embedding %wte, %ids : (tensor<20x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
  %y = tess.matmul %e, %w : (tensor<2x4x8xf32>, tensor<8x20xf32>) -> tensor<2x4x20xf32>
  return %y : tensor<2x4x20xf32>
}
