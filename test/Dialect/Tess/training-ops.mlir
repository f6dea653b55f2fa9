// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// RUN: tessera-opt %s --mlir-print-op-generic | tessera-opt | FileCheck %s

// Round trip of the training ops (TessTrainingOps.td) and of the `seed` of
// the random ops, through the custom and the generic form.

// CHECK-LABEL: func.func @loss
func.func @loss(%logits: tensor<2x8x16xf32>, %targets: tensor<2x8xi64>, %dloss: tensor<f32>,
                %flat: tensor<4x16xbf16>, %ids32: tensor<4xi32>) {
  // CHECK: tess.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  %0 = tess.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
  // CHECK: tess.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64} : (tensor<4x16xbf16>, tensor<4xi32>) -> tensor<f32>
  %1 = tess.cross_entropy %flat, %ids32 {ignore_index = 0 : i64} : (tensor<4x16xbf16>, tensor<4xi32>) -> tensor<f32>
  // CHECK: tess.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
  %2 = tess.cross_entropy_grad %logits, %targets, %dloss : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
  return
}

// CHECK-LABEL: func.func @activations
func.func @activations(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>) {
  // CHECK: tess.gelu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %0 = tess.gelu_grad %x, %dy : tensor<4x8xf32>
  // CHECK: tess.gelu_grad %{{.*}}, %{{.*}} {approximation = #tess<gelu_approximation tanh>} : tensor<4x8xf32>
  %1 = tess.gelu_grad %x, %dy {approximation = #tess<gelu_approximation tanh>} : tensor<4x8xf32>
  // CHECK: tess.silu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
  %2 = tess.silu_grad %x, %dy : tensor<4x8xf32>
  // CHECK: tess.softmax_grad %{{.*}}, %{{.*}} {axis = 0 : i64} : tensor<4x8xf32>
  %3 = tess.softmax_grad %x, %dy {axis = 0 : i64} : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @norms
func.func @norms(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %g2: tensor<4x8xf32>, %dy: tensor<2x4x8xf32>) {
  // CHECK: tess.layer_norm_grad %{{.*}} scale %{{.*}}, %{{.*}} {bias_grad} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %0:3 = tess.layer_norm_grad %x scale %g, %dy {bias_grad, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: tess.layer_norm_grad %{{.*}} scale %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<4x8xf32>)
  %1:2 = tess.layer_norm_grad %x scale %g2, %dy {axis = 1 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<4x8xf32>)
  // CHECK: tess.layer_norm_grad %{{.*}}, %{{.*}} {bias_grad} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %2:2 = tess.layer_norm_grad %x, %dy {bias_grad} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: tess.layer_norm_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %3 = tess.layer_norm_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK: tess.rms_norm_grad %{{.*}} scale %{{.*}}, %{{.*}} {epsilon = 2.000000e-06 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %4:2 = tess.rms_norm_grad %x scale %g, %dy {epsilon = 2.0e-06 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: tess.rms_norm_grad %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %5 = tess.rms_norm_grad %x, %dy : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>,
                     %m: tensor<1x1x8x8xf32>, %dy: tensor<2x4x8x16xf32>) {
  // CHECK: tess.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  %0:3 = tess.attention_grad %q, %k, %v, %dy {causal, scale = 2.500000e-01 : f64}
    : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  // CHECK: tess.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, mask %{{.*}}, %{{.*}} {dropout = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, seed = 7 : i64}
  %1:3 = tess.attention_grad %q, %k, %v, mask %m, %dy {dropout = 0.1 : f64, scale = 2.500000e-01 : f64, seed = 7 : i64}
    : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<1x1x8x8xf32>, tensor<2x4x8x16xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  // CHECK: tess.attention %{{.*}}, %{{.*}}, %{{.*}} {dropout = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, seed = 3 : i64}
  %2 = tess.attention %q, %k, %v {dropout = 0.1 : f64, scale = 2.500000e-01 : f64, seed = 3 : i64}
    : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// CHECK-LABEL: func.func @dropout_seed
func.func @dropout_seed(%x: tensor<4xf32>) {
  // CHECK: tess.dropout %{{.*}} {rate = 2.500000e-01 : f64, seed = 5 : i64} : tensor<4xf32>
  %0 = tess.dropout %x {rate = 2.500000e-01 : f64, seed = 5 : i64} : tensor<4xf32>
  // CHECK: tess.dropout %{{.*}} {rate = 2.500000e-01 : f64} : tensor<4xf32>
  %1 = tess.dropout %x {rate = 2.500000e-01 : f64, seed = 0 : i64} : tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%ids: tensor<2x8xi64>, %dy: tensor<2x8x16xf32>, %i: tensor<3xi32>,
                         %dg: tensor<4x3x8xbf16>, %ds: tensor<2x4xf32>) {
  // CHECK: tess.embedding_grad %{{.*}}, %{{.*}} : (tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
  %0 = tess.embedding_grad %ids, %dy : (tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
  // CHECK: tess.gather_grad %{{.*}}, %{{.*}} {axis = -2 : i64} : (tensor<3xi32>, tensor<4x3x8xbf16>) -> tensor<4x10x8xbf16>
  %1 = tess.gather_grad %i, %dg {axis = -2 : i64} : (tensor<3xi32>, tensor<4x3x8xbf16>) -> tensor<4x10x8xbf16>
  // CHECK: tess.slice_grad %{{.*}} {starts = array<i64: 1, 0>, strides = array<i64: 1, 3>} : (tensor<2x4xf32>) -> tensor<3x12xf32>
  %2 = tess.slice_grad %ds {starts = array<i64: 1, 0>, strides = array<i64: 1, 3>} : (tensor<2x4xf32>) -> tensor<3x12xf32>
  return
}

// CHECK-LABEL: func.func @optimizer
func.func @optimizer(%p: tensor<4x8xbf16>, %g: tensor<4x8xbf16>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>,
                     %lr: tensor<f32>, %step: tensor<i64>, %scale: tensor<f32>) {
  // CHECK: tess.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>)
  %0:3 = tess.adamw %p, %g, %m, %v, %lr, %step, %scale
    : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>)
    -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>)
  // CHECK: tess.adamw {{.*}} {beta1 = 8.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, epsilon = 9.9999999999999995E-7 : f64, weight_decay = 0.000000e+00 : f64}
  %1:3 = tess.adamw %p, %g, %m, %v, %lr, %step, %scale
      {beta1 = 0.8 : f64, beta2 = 0.95 : f64, epsilon = 1.0e-6 : f64, weight_decay = 0.0 : f64}
    : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>)
    -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}
