// RUN: tessera-opt %s -tess-fuse-rotary -split-input-file | FileCheck %s

// Tests that Llama's `q * cos + rotate_half(q) * sin` becomes one
// tess.rotary, cos and sin of lower rank reshaped to the input's rank, when
// the table is computed from a buffer (the rotary frequencies).
// CHECK-LABEL: func.func @llama_rotate_half
// CHECK-DAG: %[[COS:.*]] = tess.reshape %{{.*}} : (tensor<4x8xf32>) -> tensor<1x1x4x8xf32>
// CHECK-DAG: %[[SIN:.*]] = tess.reshape %{{.*}} : (tensor<4x8xf32>) -> tensor<1x1x4x8xf32>
// CHECK: %[[Y:.*]] = tess.rotary %arg0, %[[COS]], %[[SIN]] : (tensor<2x3x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<2x3x4x8xf32>
// CHECK-NOT: tess.concat
// CHECK-NOT: tess.neg
// CHECK: return %[[Y]]
func.func @llama_rotate_half(%x: tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32> {
  %freq = tess.parameter "model.rotary_emb.inv_freq" : tensor<4x8xf32>
  %cos = tess.cos %freq : tensor<4x8xf32>
  %sin = tess.sin %freq : tensor<4x8xf32>
  %xc = tess.mul %x, %cos : (tensor<2x3x4x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4x8xf32>
  %lo = tess.slice %x {limits = array<i64: 2, 3, 4, 4>, starts = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1, 1, 1>} : (tensor<2x3x4x8xf32>) -> tensor<2x3x4x4xf32>
  %hi = tess.slice %x {limits = array<i64: 2, 3, 4, 8>, starts = array<i64: 0, 0, 0, 4>, strides = array<i64: 1, 1, 1, 1>} : (tensor<2x3x4x8xf32>) -> tensor<2x3x4x4xf32>
  %n = tess.neg %hi : tensor<2x3x4x4xf32>
  %r = tess.concat %n, %lo {axis = -1 : i64} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x8xf32>
  %rs = tess.mul %sin, %r : (tensor<4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %y = tess.add %rs, %xc : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  return %y : tensor<2x3x4x8xf32>
}

// -----

// Tests that a table that depends on a trainable parameter stays unfused:
// tess.rotary gives cos and sin no gradient.
// CHECK-LABEL: func.func @trainable_table_stays
// CHECK-NOT: tess.rotary
// CHECK: tess.concat
func.func @trainable_table_stays(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %angle = tess.parameter "learned.angles" trainable : tensor<2x8xf32>
  %cos = tess.cos %angle : tensor<2x8xf32>
  %sin = tess.sin %angle : tensor<2x8xf32>
  %xc = tess.mul %x, %cos : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %lo = tess.slice %x {limits = array<i64: 2, 4>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %hi = tess.slice %x {limits = array<i64: 2, 8>, starts = array<i64: 0, 4>, strides = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %n = tess.neg %hi : tensor<2x4xf32>
  %r = tess.concat %n, %lo {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %rs = tess.mul %r, %sin : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = tess.add %xc, %rs : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that a concat of the halves in the other order (not rotate_half)
// stays unfused.
// CHECK-LABEL: func.func @swapped_halves_stay
// CHECK-NOT: tess.rotary
func.func @swapped_halves_stay(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %cos = tess.parameter "cos_cached" : tensor<2x8xf32>
  %sin = tess.parameter "sin_cached" : tensor<2x8xf32>
  %xc = tess.mul %x, %cos : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %lo = tess.slice %x {limits = array<i64: 2, 4>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %hi = tess.slice %x {limits = array<i64: 2, 8>, starts = array<i64: 0, 4>, strides = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  %n = tess.neg %lo : tensor<2x4xf32>
  %r = tess.concat %n, %hi {axis = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %rs = tess.mul %r, %sin : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %y = tess.add %xc, %rs : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
