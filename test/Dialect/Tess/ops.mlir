// RUN: tessera-opt %s | tessera-opt | FileCheck %s
// RUN: tessera-opt %s --mlir-print-op-generic | tessera-opt | FileCheck %s

// Round trip of every tess op, through the custom and the generic form.

// CHECK-LABEL: func.func @values
func.func @values() -> (tensor<2xf32>, tensor<4x8xf32>, tensor<3xf32>, tensor<8xi64>) {
  // CHECK: tess.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
  %c = tess.constant dense<[1.0, 2.0]> : tensor<2xf32>
  // CHECK: tess.parameter "h.0.w" trainable {location = #tess.weight_location<file = "m.onnx.data", offset = 128, length = 128>} : tensor<4x8xf32>
  %w = tess.parameter "h.0.w" trainable {location = #tess.weight_location<file = "m.onnx.data", offset = 128, length = 128>} : tensor<4x8xf32>
  // CHECK: tess.parameter "b" {location = #tess.weight_location<file = "m.onnx">, value = dense<5.000000e-01> : tensor<3xf32>} : tensor<3xf32>
  %b = tess.parameter "b" {location = #tess.weight_location<file = "m.onnx">, value = dense<0.5> : tensor<3xf32>} : tensor<3xf32>
  // CHECK: tess.parameter "rotary" : tensor<8xi64>
  %r = tess.parameter "rotary" : tensor<8xi64>
  return %c, %w, %b, %r : tensor<2xf32>, tensor<4x8xf32>, tensor<3xf32>, tensor<8xi64>
}

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[M:.*]]: tensor<4xi1>, %[[I:.*]]: tensor<4xi32>)
func.func @unary(%x: tensor<4xf32>, %m: tensor<4xi1>, %i: tensor<4xi32>) {
  // CHECK: tess.neg %[[X]] : tensor<4xf32>
  %0 = tess.neg %x : tensor<4xf32>
  // CHECK: tess.neg %[[I]] : tensor<4xi32>
  %1 = tess.neg %i : tensor<4xi32>
  // CHECK: tess.abs %[[I]] : tensor<4xi32>
  %2 = tess.abs %i : tensor<4xi32>
  // CHECK: tess.exp %[[X]] : tensor<4xf32>
  %3 = tess.exp %x : tensor<4xf32>
  // CHECK: tess.log %[[X]] : tensor<4xf32>
  %4 = tess.log %x : tensor<4xf32>
  // CHECK: tess.sqrt %[[X]] : tensor<4xf32>
  %5 = tess.sqrt %x : tensor<4xf32>
  // CHECK: tess.rsqrt %[[X]] : tensor<4xf32>
  %6 = tess.rsqrt %x : tensor<4xf32>
  // CHECK: tess.reciprocal %[[X]] : tensor<4xf32>
  %7 = tess.reciprocal %x : tensor<4xf32>
  // CHECK: tess.tanh %[[X]] : tensor<4xf32>
  %8 = tess.tanh %x : tensor<4xf32>
  // CHECK: tess.erf %[[X]] : tensor<4xf32>
  %9 = tess.erf %x : tensor<4xf32>
  // CHECK: tess.sigmoid %[[X]] : tensor<4xf32>
  %10 = tess.sigmoid %x : tensor<4xf32>
  // CHECK: tess.relu %[[X]] : tensor<4xf32>
  %11 = tess.relu %x : tensor<4xf32>
  // CHECK: tess.silu %[[X]] : tensor<4xf32>
  %12 = tess.silu %x : tensor<4xf32>
  // CHECK: tess.logical_not %[[M]] : tensor<4xi1>
  %13 = tess.logical_not %m : tensor<4xi1>
  // CHECK: tess.gelu %[[X]] : tensor<4xf32>
  %14 = tess.gelu %x : tensor<4xf32>
  // CHECK: tess.gelu %[[X]] {approximation = #tess<gelu_approximation tanh>} : tensor<4xf32>
  %15 = tess.gelu %x {approximation = #tess<gelu_approximation tanh>} : tensor<4xf32>
  // The default is not printed.
  // CHECK: tess.gelu %[[X]] : tensor<4xf32>
  %16 = tess.gelu %x {approximation = #tess<gelu_approximation none>} : tensor<4xf32>
  // CHECK: tess.dropout %[[X]] {rate = 2.500000e-01 : f64} : tensor<4xf32>
  %17 = tess.dropout %x {rate = 0.25 : f64} : tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[X:.*]]: tensor<2x8xf32>, %[[S:.*]]: tensor<f32>, %[[A:.*]]: tensor<8x1xi1>, %[[B:.*]]: tensor<8xi1>, %[[I:.*]]: tensor<8x1xi64>, %[[J:.*]]: tensor<1x8xi64>)
func.func @binary(%x: tensor<2x8xf32>, %s: tensor<f32>, %a: tensor<8x1xi1>, %b: tensor<8xi1>,
                  %i: tensor<8x1xi64>, %j: tensor<1x8xi64>) {
  // CHECK: tess.add %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %0 = tess.add %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: tess.sub %[[S]], %[[X]] : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %1 = tess.sub %s, %x : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: tess.mul %[[X]], %[[X]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = tess.mul %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  // CHECK: tess.div %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = tess.div %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: tess.pow %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %4 = tess.pow %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: tess.maximum %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %5 = tess.maximum %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: tess.minimum %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %6 = tess.minimum %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: tess.logical_and %[[A]], %[[B]] : (tensor<8x1xi1>, tensor<8xi1>) -> tensor<8x8xi1>
  %7 = tess.logical_and %a, %b : (tensor<8x1xi1>, tensor<8xi1>) -> tensor<8x8xi1>
  // CHECK: tess.logical_or %[[A]], %[[B]] : (tensor<8x1xi1>, tensor<8xi1>) -> tensor<8x8xi1>
  %8 = tess.logical_or %a, %b : (tensor<8x1xi1>, tensor<8xi1>) -> tensor<8x8xi1>
  // CHECK: tess.compare le, %[[I]], %[[J]] : (tensor<8x1xi64>, tensor<1x8xi64>) -> tensor<8x8xi1>
  %9 = tess.compare le, %i, %j : (tensor<8x1xi64>, tensor<1x8xi64>) -> tensor<8x8xi1>
  // CHECK: tess.compare ne, %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
  %10 = tess.compare ne, %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
  // CHECK: tess.where %[[B]], %[[X]], %[[S]] : (tensor<8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %11 = tess.where %b, %x, %s : (tensor<8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  // CHECK: tess.cast %[[X]] : tensor<2x8xf32> to tensor<2x8xbf16>
  %12 = tess.cast %x : tensor<2x8xf32> to tensor<2x8xbf16>
  // CHECK: tess.cast %[[I]] : tensor<8x1xi64> to tensor<8x1xi1>
  %13 = tess.cast %i : tensor<8x1xi64> to tensor<8x1xi1>
  return
}

// CHECK-LABEL: func.func @contractions
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x32x16xf32>, %[[K:.*]]: tensor<1x4x16x32xf32>, %[[X:.*]]: tensor<2x32x64xf32>, %[[W:.*]]: tensor<64x192xf32>, %[[B:.*]]: tensor<192xf32>, %[[WT:.*]]: tensor<192x64xf32>)
func.func @contractions(%q: tensor<2x4x32x16xf32>, %k: tensor<1x4x16x32xf32>, %x: tensor<2x32x64xf32>,
                        %w: tensor<64x192xf32>, %b: tensor<192xf32>, %wt: tensor<192x64xf32>) {
  // CHECK: tess.matmul %[[Q]], %[[K]] : (tensor<2x4x32x16xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x32x32xf32>
  %0 = tess.matmul %q, %k : (tensor<2x4x32x16xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x32x32xf32>
  // CHECK: tess.matmul %[[Q]], %[[K]] {transpose_lhs, transpose_rhs} : (tensor<2x4x32x16xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x16x16xf32>
  %1 = tess.matmul %q, %k {transpose_lhs, transpose_rhs} : (tensor<2x4x32x16xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x16x16xf32>
  // CHECK: tess.linear %[[X]], %[[W]], %[[B]] : (tensor<2x32x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<2x32x192xf32>
  %2 = tess.linear %x, %w, %b : (tensor<2x32x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<2x32x192xf32>
  // CHECK: tess.linear %[[X]], %[[WT]] {transpose_weight} : (tensor<2x32x64xf32>, tensor<192x64xf32>) -> tensor<2x32x192xf32>
  %3 = tess.linear %x, %wt {transpose_weight} : (tensor<2x32x64xf32>, tensor<192x64xf32>) -> tensor<2x32x192xf32>
  return
}

// CHECK-LABEL: func.func @layers
// CHECK-SAME: (%[[X:.*]]: tensor<2x32x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[G2:.*]]: tensor<32x64xf32>, %[[T:.*]]: tensor<512x64xf32>, %[[IDS:.*]]: tensor<2x32xi32>)
func.func @layers(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>, %g2: tensor<32x64xf32>,
                  %table: tensor<512x64xf32>, %ids: tensor<2x32xi32>) {
  // CHECK: tess.layer_norm %[[X]] scale %[[G]] bias %[[G]] : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  %0 = tess.layer_norm %x scale %g bias %g : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  // CHECK: tess.layer_norm %[[X]] bias %[[G2]] {axis = 1 : i64, epsilon = 0.000000e+00 : f64} : (tensor<2x32x64xf32>, tensor<32x64xf32>) -> tensor<2x32x64xf32>
  %1 = tess.layer_norm %x bias %g2 {axis = 1 : i64, epsilon = 0.0 : f64} : (tensor<2x32x64xf32>, tensor<32x64xf32>) -> tensor<2x32x64xf32>
  // CHECK: tess.layer_norm %[[X]] : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %2 = tess.layer_norm %x : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  // CHECK: tess.rms_norm %[[X]] scale %[[G]] : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  %3 = tess.rms_norm %x scale %g : (tensor<2x32x64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  // CHECK: tess.rms_norm %[[X]] {axis = -2 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %4 = tess.rms_norm %x {axis = -2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  // CHECK: tess.softmax %[[X]] : tensor<2x32x64xf32>
  %5 = tess.softmax %x : tensor<2x32x64xf32>
  // CHECK: tess.softmax %[[X]] {axis = 0 : i64} : tensor<2x32x64xf32>
  %6 = tess.softmax %x {axis = 0 : i64} : tensor<2x32x64xf32>
  // CHECK: tess.embedding %[[T]], %[[IDS]] : (tensor<512x64xf32>, tensor<2x32xi32>) -> tensor<2x32x64xf32>
  %7 = tess.embedding %table, %ids : (tensor<512x64xf32>, tensor<2x32xi32>) -> tensor<2x32x64xf32>
  return
}

// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x16x32xf16>, %[[K:.*]]: tensor<2x2x24x32xf16>, %[[V:.*]]: tensor<2x2x24x8xf16>, %[[M:.*]]: tensor<16x24xf16>)
func.func @attention(%q: tensor<2x8x16x32xf16>, %k: tensor<2x2x24x32xf16>, %v: tensor<2x2x24x8xf16>,
                     %mask: tensor<16x24xf16>) {
  // Grouped-query attention with a mask and fewer queries than keys.
  // CHECK: tess.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {causal, scale = 1.250000e-01 : f64} : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>, tensor<16x24xf16>) -> tensor<2x8x16x8xf16>
  %0 = tess.attention %q, %k, %v mask %mask {causal, scale = 0.125 : f64}
    : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>, tensor<16x24xf16>) -> tensor<2x8x16x8xf16>
  // CHECK: tess.attention %[[Q]], %[[K]], %[[V]] {scale = 1.000000e+00 : f64} : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  %1 = tess.attention %q, %k, %v {scale = 1.0 : f64}
    : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  // CHECK: tess.attention %[[Q]], %[[K]], %[[V]] {dropout = 1.000000e-01 : f64, scale = 1.000000e+00 : f64} : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  %2 = tess.attention %q, %k, %v {dropout = 0.1 : f64, scale = 1.0 : f64}
    : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  // A sliding window: each query sees its 4 most recent keys.
  // CHECK: tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 1.000000e+00 : f64, window = 4 : i64} : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  %3 = tess.attention %q, %k, %v {causal, scale = 1.0 : f64, window = 4 : i64}
    : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  // Gemma-2's softcap, with a window as its local layers have.
  // CHECK: tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 1.000000e+00 : f64, softcap = 5.000000e+01 : f64, window = 4 : i64} : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  %4 = tess.attention %q, %k, %v {causal, scale = 1.0 : f64, softcap = 50.0 : f64, window = 4 : i64}
    : (tensor<2x8x16x32xf16>, tensor<2x2x24x32xf16>, tensor<2x2x24x8xf16>) -> tensor<2x8x16x8xf16>
  return
}

// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:.*]]: tensor<2x32x192xf32>, %[[Y:.*]]: tensor<1x32x1xf32>, %[[I:.*]]: tensor<3x5xi64>)
func.func @data_movement(%x: tensor<2x32x192xf32>, %y: tensor<1x32x1xf32>, %i: tensor<3x5xi64>) {
  // CHECK: tess.reshape %[[X]] : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
  %0 = tess.reshape %x : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
  // CHECK: tess.transpose %[[X]] {permutation = array<i64: 2, 0, 1>} : (tensor<2x32x192xf32>) -> tensor<192x2x32xf32>
  %1 = tess.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x32x192xf32>) -> tensor<192x2x32xf32>
  // CHECK: tess.broadcast %[[Y]] : (tensor<1x32x1xf32>) -> tensor<4x2x32x192xf32>
  %2 = tess.broadcast %y : (tensor<1x32x1xf32>) -> tensor<4x2x32x192xf32>
  // CHECK: tess.slice %[[X]] {limits = array<i64: 2, 32, 192>, starts = array<i64: 1, 0, 1>, strides = array<i64: 1, 3, 2>} : (tensor<2x32x192xf32>) -> tensor<1x11x96xf32>
  %3 = tess.slice %x {starts = array<i64: 1, 0, 1>, limits = array<i64: 2, 32, 192>, strides = array<i64: 1, 3, 2>}
    : (tensor<2x32x192xf32>) -> tensor<1x11x96xf32>
  // CHECK: tess.split %[[X]] {axis = -1 : i64, sizes = array<i64: 64, 128>} : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x128xf32>)
  %4:2 = tess.split %x {axis = -1 : i64, sizes = array<i64: 64, 128>}
    : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x128xf32>)
  // CHECK: tess.concat %[[X]], %[[X]], %[[X]] {axis = 0 : i64} : (tensor<2x32x192xf32>, tensor<2x32x192xf32>, tensor<2x32x192xf32>) -> tensor<6x32x192xf32>
  %5 = tess.concat %x, %x, %x {axis = 0 : i64}
    : (tensor<2x32x192xf32>, tensor<2x32x192xf32>, tensor<2x32x192xf32>) -> tensor<6x32x192xf32>
  // CHECK: tess.gather %[[X]], %[[I]] {axis = -2 : i64} : (tensor<2x32x192xf32>, tensor<3x5xi64>) -> tensor<2x3x5x192xf32>
  %6 = tess.gather %x, %i {axis = -2 : i64} : (tensor<2x32x192xf32>, tensor<3x5xi64>) -> tensor<2x3x5x192xf32>
  return
}

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x64xf32>)
func.func @reductions(%x: tensor<2x8x64xf32>) {
  // CHECK: tess.reduce_sum %[[X]] {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>
  %0 = tess.reduce_sum %x {dims = array<i64: -1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x8x1xf32>
  // CHECK: tess.reduce_mean %[[X]] {dims = array<i64: 0, 2>} : (tensor<2x8x64xf32>) -> tensor<8xf32>
  %1 = tess.reduce_mean %x {dims = array<i64: 0, 2>} : (tensor<2x8x64xf32>) -> tensor<8xf32>
  // CHECK: tess.reduce_max %[[X]] {dims = array<i64: 0, 1, 2>} : (tensor<2x8x64xf32>) -> tensor<f32>
  %2 = tess.reduce_max %x {dims = array<i64: 0, 1, 2>} : (tensor<2x8x64xf32>) -> tensor<f32>
  // CHECK: tess.reduce_min %[[X]] {dims = array<i64: 1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x1x64xf32>
  %3 = tess.reduce_min %x {dims = array<i64: 1>, keep_dims} : (tensor<2x8x64xf32>) -> tensor<2x1x64xf32>
  return
}
