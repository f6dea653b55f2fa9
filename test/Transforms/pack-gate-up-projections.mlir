// RUN: tessera-opt %s -split-input-file -tess-pack-gate-up-projections | FileCheck %s
// RUN: tesserac %models/llama-tiny.raw.dyn.onnx --dim batch=2 --dim seq=32 --emit=mlir \
// RUN:   | tessera-opt -tess-pack-gate-up-projections | FileCheck %s --check-prefix=TINY

// Tests llama-tiny's forward (d=64, intermediate 128, two layers): each
// layer's gate and up projections become one linear of the weights stacked
// along N, [256, 64], and the swiglu reads its [.., 256] result packed.
// TINY-LABEL: func.func @forward(
// TINY-DAG: %[[G0:.*]] = tess.parameter "model.layers.0.mlp.gate_proj.weight"
// TINY-DAG: %[[U0:.*]] = tess.parameter "model.layers.0.mlp.up_proj.weight"
// TINY: %[[W0:.*]] = tess.concat %[[G0]], %[[U0]] {axis = 0 : i64} : (tensor<128x64xf32>, tensor<128x64xf32>) -> tensor<256x64xf32>
// TINY-NEXT: %[[GU0:.*]] = tess.linear %{{.*}}, %[[W0]] {transpose_weight} : (tensor<2x32x64xf32>, tensor<256x64xf32>) -> tensor<2x32x256xf32>
// TINY-NEXT: %[[Y0:.*]] = tess.packed_swiglu %[[GU0]] : (tensor<2x32x256xf32>) -> tensor<2x32x128xf32>
// TINY-NEXT: tess.linear %[[Y0]]
// TINY-NOT: tess.swiglu
// TINY-NOT: tess.linear {{.*}} -> tensor<2x32x128xf32>
// TINY: tess.concat {{.*}} -> tensor<256x64xf32>
// TINY-NEXT: tess.linear {{.*}} -> tensor<2x32x256xf32>
// TINY-NEXT: tess.packed_swiglu
// TINY-NOT: tess.swiglu
// TINY-NOT: tess.linear {{.*}} -> tensor<2x32x128xf32>
// TINY: return

// -----

// Tests the Llama MLP: two nn.Linear of one x gated by swiglu become one
// linear of the weights stacked along N (gate first) and a packed swiglu.
// CHECK-LABEL: func.func @llama(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x8x32xf32>
// CHECK-DAG: %[[WG:.*]] = tess.parameter "gate_proj.weight"
// CHECK-DAG: %[[WU:.*]] = tess.parameter "up_proj.weight"
// CHECK: %[[W:.*]] = tess.concat %[[WG]], %[[WU]] {axis = 0 : i64} : (tensor<48x32xf32>, tensor<48x32xf32>) -> tensor<96x32xf32>
// CHECK-NEXT: %[[GU:.*]] = tess.linear %[[X]], %[[W]] {transpose_weight} : (tensor<2x8x32xf32>, tensor<96x32xf32>) -> tensor<2x8x96xf32>
// CHECK-NEXT: %[[Y:.*]] = tess.packed_swiglu %[[GU]] : (tensor<2x8x96xf32>) -> tensor<2x8x48xf32>
// CHECK-NEXT: return %[[Y]]
func.func @llama(%x: tensor<2x8x32xf32>) -> tensor<2x8x48xf32> {
  %wg = tess.parameter "gate_proj.weight" trainable : tensor<48x32xf32>
  %g = tess.linear %x, %wg {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %wu = tess.parameter "up_proj.weight" trainable : tensor<48x32xf32>
  %u = tess.linear %x, %wu {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %y = tess.swiglu %g, %u : tensor<2x8x48xf32>
  return %y : tensor<2x8x48xf32>
}

// -----

// Tests biased projections with [K, N] weights: the weights stack along
// dim 1, the biases along dim 0.
// CHECK-LABEL: func.func @biased(
// CHECK: %[[W:.*]] = tess.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<32x48xf32>, tensor<32x48xf32>) -> tensor<32x96xf32>
// CHECK: %[[B:.*]] = tess.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<48xf32>, tensor<48xf32>) -> tensor<96xf32>
// CHECK: %[[GU:.*]] = tess.linear %{{.*}}, %[[W]], %[[B]] : (tensor<2x8x32xf32>, tensor<32x96xf32>, tensor<96xf32>) -> tensor<2x8x96xf32>
// CHECK: tess.packed_swiglu %[[GU]]
func.func @biased(%x: tensor<2x8x32xf32>, %wg: tensor<32x48xf32>, %bg: tensor<48xf32>, %wu: tensor<32x48xf32>, %bu: tensor<48xf32>) -> tensor<2x8x48xf32> {
  %g = tess.linear %x, %wg, %bg : (tensor<2x8x32xf32>, tensor<32x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %u = tess.linear %x, %wu, %bu : (tensor<2x8x32xf32>, tensor<32x48xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %y = tess.swiglu %g, %u : tensor<2x8x48xf32>
  return %y : tensor<2x8x48xf32>
}

// -----

// Tests that what cannot be one linear stays: a gate read elsewhere too,
// linears of different inputs, one linear as both gate and up, and a bias
// on one of the two.
// CHECK-LABEL: func.func @unpackable(
// CHECK-NOT: tess.concat
// CHECK-NOT: tess.packed_swiglu
// CHECK: return
func.func @unpackable(%x: tensor<2x8x32xf32>, %z: tensor<2x8x32xf32>, %wg: tensor<48x32xf32>, %wu: tensor<48x32xf32>, %b: tensor<48xf32>) -> (tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>) {
  %g = tess.linear %x, %wg {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %u = tess.linear %x, %wu {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %y0 = tess.swiglu %g, %u : tensor<2x8x48xf32>
  %g1 = tess.linear %x, %wg {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %u1 = tess.linear %z, %wu {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %y1 = tess.swiglu %g1, %u1 : tensor<2x8x48xf32>
  %s = tess.linear %x, %wg {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %y2 = tess.swiglu %s, %s : tensor<2x8x48xf32>
  %g3 = tess.linear %x, %wg, %b {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>, tensor<48xf32>) -> tensor<2x8x48xf32>
  %u3 = tess.linear %x, %wu {transpose_weight} : (tensor<2x8x32xf32>, tensor<48x32xf32>) -> tensor<2x8x48xf32>
  %y3 = tess.swiglu %g3, %u3 : tensor<2x8x48xf32>
  return %y0, %y1, %y2, %y3, %g : tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>
}
