// RUN: tessera-opt %s -tess-chunk-loss-head="max-block-bytes=256" -split-input-file | FileCheck %s
// RUN: tessera-opt %s -tess-chunk-loss-head="max-block-bytes=128" -split-input-file | FileCheck %s --check-prefix=FOUR
// RUN: tessera-opt %s -tess-chunk-loss-head -split-input-file | FileCheck %s --check-prefix=WHOLE
// RUN: tessera-opt %s -tess-chunk-loss-head="max-block-bytes=0" -split-input-file | FileCheck %s --check-prefix=WHOLE

// Tests that a tied head (logits [2, 4, 16] f32, 512 bytes) with its fused
// loss, dl W and dl^T h becomes blocks of rows: at 256 bytes, 2 blocks of 4
// rows, each with its logits, loss and gradient over the whole batch's count
// (count_over the original targets), dx rows and a dW partial; dW is summed
// right after each block's matmul, the losses add up, and the dx rows are
// concatenated back to the input's shape. At 128 bytes it takes 4 blocks;
// under the default limit (1 GiB) or with 0 the head stays whole.
// CHECK-LABEL: func.func @tied_head
// CHECK-SAME: (%[[H:.*]]: tensor<2x4x8xf32>, %[[T:.*]]: tensor<2x4xi64>, %[[S:.*]]: tensor<f32>)
// CHECK: %[[W:.*]] = tess.parameter "embed.weight"
// CHECK: %[[HR:.*]] = tess.reshape %[[H]] : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[TR:.*]] = tess.reshape %[[T]] : (tensor<2x4xi64>) -> tensor<8xi64>
// CHECK: %[[HB:.*]]:2 = tess.split %[[HR]] {axis = 0 : i64, sizes = array<i64: 4, 4>}
// CHECK: %[[TB:.*]]:2 = tess.split %[[TR]] {axis = 0 : i64, sizes = array<i64: 4, 4>}
// CHECK: %[[L0:.*]] = tess.linear %[[HB]]#0, %[[W]] {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK: %[[LOSS0:.*]] = tess.cross_entropy %[[L0]], %[[TB]]#0 count_over %[[T]] : (tensor<4x16xf32>, tensor<4xi64>, tensor<2x4xi64>) -> tensor<f32>
// CHECK: %[[DL0:.*]] = tess.cross_entropy_grad %[[L0]], %[[TB]]#0, %[[S]] count_over %[[T]]
// CHECK: %[[DX0:.*]] = tess.linear %[[DL0]], %[[W]] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[DW0:.*]] = tess.matmul %[[DL0]], %[[HB]]#0 {transpose_lhs} : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK: %[[L1:.*]] = tess.linear %[[HB]]#1, %[[W]] {transpose_weight}
// CHECK: %[[LOSS1:.*]] = tess.cross_entropy %[[L1]], %[[TB]]#1 count_over %[[T]]
// CHECK: %[[DL1:.*]] = tess.cross_entropy_grad %[[L1]], %[[TB]]#1, %[[S]] count_over %[[T]]
// CHECK: %[[DX1:.*]] = tess.linear %[[DL1]], %[[W]]
// CHECK: %[[DW1:.*]] = tess.matmul %[[DL1]], %[[HB]]#1 {transpose_lhs}
// CHECK-NEXT: %[[DW:.*]] = tess.add %[[DW0]], %[[DW1]] : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[LOSS:.*]] = tess.add %[[LOSS0]], %[[LOSS1]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[DX:.*]] = tess.concat %[[DX0]], %[[DX1]] {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[DXS:.*]] = tess.reshape %[[DX]] : (tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: return %[[LOSS]], %[[DXS]], %[[DW]]
// CHECK-NOT: tess.cross_entropy

// FOUR-LABEL: func.func @tied_head
// FOUR: tess.split {{.*}} sizes = array<i64: 2, 2, 2, 2>
// FOUR-COUNT-4: tess.cross_entropy_grad
// FOUR-NOT: tess.cross_entropy

// WHOLE-LABEL: func.func @tied_head
// WHOLE-NOT: count_over
// WHOLE-NOT: tess.split
func.func @tied_head(%h: tensor<2x4x8xf32>, %t: tensor<2x4xi64>, %scale: tensor<f32>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
  %w = tess.parameter "embed.weight" trainable : tensor<16x8xf32>
  %logits = tess.linear %h, %w {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = tess.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %t, %scale : (tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x16xf32>
  %dh = tess.linear %dl, %w : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %dlr = tess.reshape %dl : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %hr = tess.reshape %h : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dw = tess.matmul %dlr, %hr {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
}

// -----

// Tests that a head whose loss gradient has another user (here its sum, a
// bias gradient) is left whole: the rewrite would need that user per block.
// CHECK-LABEL: func.func @gradient_with_bias_user
// FOUR-LABEL: func.func @gradient_with_bias_user
// FOUR-NOT: count_over
// CHECK-NOT: count_over
// CHECK: tess.cross_entropy %{{.*}} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
func.func @gradient_with_bias_user(%h: tensor<8x8xf32>, %t: tensor<8xi64>, %scale: tensor<f32>) -> (tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<16xf32>) {
  %w = tess.parameter "head.weight" trainable : tensor<16x8xf32>
  %b = tess.parameter "head.bias" trainable : tensor<16xf32>
  %logits = tess.linear %h, %w, %b {transpose_weight} : (tensor<8x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %loss = tess.cross_entropy %logits, %t : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %t, %scale : (tensor<8x16xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x16xf32>
  %dh = tess.linear %dl, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %dlr = tess.reshape %dl : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %dw = tess.matmul %dlr, %h {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %db = tess.reduce_sum %dl {dims = array<i64: 0>} : (tensor<8x16xf32>) -> tensor<16xf32>
  return %loss, %dh, %dw, %db : tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<16xf32>
}

// -----

// Tests a data-parallel rank's head whose weight is stored split over dp: it
// gathers the weight for the logits and again, after the loss's gradient,
// for dl W. The blocks read one gathered copy for both (not two at once),
// and the second gather goes away.
// CHECK-LABEL: func.func @gathered_head
// FOUR-LABEL: func.func @gathered_head
// CHECK: %[[GW:.*]] = tess.all_gather %arg3 {axis = "dp", dim = 1 : i64}
// CHECK-NOT: tess.all_gather
// CHECK: tess.cross_entropy_grad
// CHECK-NEXT: tess.linear %{{.*}}, %[[GW]] : (tensor<4x16xf32>, tensor<16x8xf32>)
// CHECK: tess.cross_entropy_grad
// CHECK-NEXT: tess.linear %{{.*}}, %[[GW]] : (tensor<4x16xf32>, tensor<16x8xf32>)
// CHECK-NOT: tess.all_gather
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @gathered_head(%h: tensor<2x4x8xf32>, %t: tensor<2x4xi64>, %scale: tensor<f32>, %ws: tensor<16x4xf32>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
  %w = tess.all_gather %ws {axis = "dp", dim = 1 : i64} : (tensor<16x4xf32>) -> tensor<16x8xf32>
  %logits = tess.linear %h, %w {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = tess.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %t, %scale : (tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x16xf32>
  %again = tess.all_gather %ws {axis = "dp", dim = 1 : i64} : (tensor<16x4xf32>) -> tensor<16x8xf32>
  %dh = tess.linear %dl, %again : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %dlr = tess.reshape %dl : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %hr = tess.reshape %h : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dw = tess.matmul %dlr, %hr {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
}
}

// -----

// Tests that a weight made after the loss's gradient from what exists before
// the loss (here a cast of a gathered shard) moves up before the loss: the
// first block reads it.
// CHECK-LABEL: func.func @weight_made_after
// FOUR-LABEL: func.func @weight_made_after
// CHECK: %[[CW:.*]] = tess.cast %arg3
// CHECK: tess.cross_entropy_grad
// CHECK-NEXT: tess.linear %{{.*}}, %[[CW]] : (tensor<4x16xf32>, tensor<16x8xf32>)
func.func @weight_made_after(%h: tensor<2x4x8xf32>, %t: tensor<2x4xi64>, %scale: tensor<f32>, %wb: tensor<16x8xbf16>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
  %w = tess.parameter "embed.weight" trainable : tensor<16x8xf32>
  %logits = tess.linear %h, %w {transpose_weight} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = tess.cross_entropy %logits, %t : (tensor<2x4x16xf32>, tensor<2x4xi64>) -> tensor<f32>
  %dl = tess.cross_entropy_grad %logits, %t, %scale : (tensor<2x4x16xf32>, tensor<2x4xi64>, tensor<f32>) -> tensor<2x4x16xf32>
  %cw = tess.cast %wb : tensor<16x8xbf16> to tensor<16x8xf32>
  %dh = tess.linear %dl, %cw : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %dlr = tess.reshape %dl : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %hr = tess.reshape %h : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dw = tess.matmul %dlr, %hr {transpose_lhs} : (tensor<8x16xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
}
