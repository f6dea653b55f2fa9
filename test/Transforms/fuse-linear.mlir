// RUN: tessera-opt %s -tess-fuse-linear -split-input-file | FileCheck %s

// Tests that nn.Linear as exported (MatMul by Transpose(W) + bias) becomes
// tess.linear with transpose_weight and the bias absorbed.
// CHECK-LABEL: func.func @matmul_transposed_weight_bias
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>)
// CHECK-DAG: %[[W:.*]] = tess.parameter "linear.weight"
// CHECK-DAG: %[[B:.*]] = tess.parameter "linear.bias"
// CHECK: %[[Y:.*]] = tess.linear %[[X]], %[[W]], %[[B]] {transpose_weight} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @matmul_transposed_weight_bias(%x: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  %w = tess.parameter "linear.weight" trainable : tensor<32x16xf32>
  %b = tess.parameter "linear.bias" trainable : tensor<32xf32>
  %wt = tess.transpose %w {permutation = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %m = tess.matmul %x, %wt : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %y = tess.add %m, %b : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// Tests that a matmul by a [in, out] weight with the bias added on the left,
// and one already flagged transpose_rhs by canonicalization, both fuse.
// CHECK-LABEL: func.func @matmul_weight_forms
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
// CHECK-DAG: %[[W:.*]] = tess.parameter "w"
// CHECK-DAG: %[[V:.*]] = tess.parameter "v"
// CHECK-DAG: %[[B:.*]] = tess.parameter "b"
// CHECK-DAG: %[[Y:.*]] = tess.linear %[[X]], %[[W]], %[[B]] : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK-DAG: %[[Z:.*]] = tess.linear %[[X]], %[[V]] {transpose_weight} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
// CHECK: return %[[Y]], %[[Z]]
func.func @matmul_weight_forms(%x: tensor<8x16xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %w = tess.parameter "w" trainable : tensor<16x32xf32>
  %v = tess.parameter "v" trainable : tensor<32x16xf32>
  %b = tess.parameter "b" trainable : tensor<32xf32>
  %m = tess.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = tess.add %b, %m : (tensor<32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %z = tess.matmul %x, %v {transpose_rhs} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  return %y, %z : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Tests that GPT-2's Conv1D (view to [B*S, K], linear, view back to
// [B, S, N]) loses its reshapes, and that a bias-less linear followed by an
// add of a [N] bias absorbs it.
// CHECK-LABEL: func.func @gpt2_views_around_linear
// CHECK-SAME: (%[[X:.*]]: tensor<2x32x64xf32>)
// CHECK-DAG: %[[W:.*]] = tess.parameter "c_attn.weight"
// CHECK-DAG: %[[B:.*]] = tess.parameter "c_attn.bias"
// CHECK: %[[Y:.*]] = tess.linear %[[X]], %[[W]], %[[B]] : (tensor<2x32x64xf32>, tensor<64x192xf32>, tensor<192xf32>) -> tensor<2x32x192xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gpt2_views_around_linear(%x: tensor<2x32x64xf32>) -> tensor<2x32x192xf32> {
  %w = tess.parameter "c_attn.weight" trainable : tensor<64x192xf32>
  %b = tess.parameter "c_attn.bias" trainable : tensor<192xf32>
  %flat = tess.reshape %x : (tensor<2x32x64xf32>) -> tensor<64x64xf32>
  %l = tess.linear %flat, %w : (tensor<64x64xf32>, tensor<64x192xf32>) -> tensor<64x192xf32>
  %lb = tess.add %l, %b : (tensor<64x192xf32>, tensor<192xf32>) -> tensor<64x192xf32>
  %y = tess.reshape %lb : (tensor<64x192xf32>) -> tensor<2x32x192xf32>
  return %y : tensor<2x32x192xf32>
}

// -----

// Tests that a matmul of two activations (no parameter) stays a matmul, and
// that a matmul by a rank-3 parameter is not a dense layer.
// CHECK-LABEL: func.func @matmul_not_by_weight
// CHECK-NOT: tess.linear
// CHECK: tess.matmul
// CHECK: tess.matmul
func.func @matmul_not_by_weight(%x: tensor<8x16xf32>, %a: tensor<16x32xf32>) -> (tensor<8x32xf32>, tensor<4x8x32xf32>) {
  %w = tess.parameter "stacked" trainable : tensor<4x16x32xf32>
  %m = tess.matmul %x, %a : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %n = tess.matmul %x, %w : (tensor<8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  return %m, %n : tensor<8x32xf32>, tensor<4x8x32xf32>
}

// -----

// Tests that an add that is not a [N] bias (a residual of the full shape) is
// not absorbed, and that a matmul result with two users keeps the add
// separate.
// CHECK-LABEL: func.func @add_not_bias
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[R:.*]]: tensor<8x32xf32>)
// CHECK: %[[L:.*]] = tess.linear %[[X]], %{{.*}} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %[[Y:.*]] = tess.add %[[L]], %[[R]]
// CHECK: %[[M:.*]] = tess.linear %[[X]], %{{.*}} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: %[[Z:.*]] = tess.add %[[M]], %{{.*}}
// CHECK-NEXT: return %[[Y]], %[[Z]], %[[M]]
func.func @add_not_bias(%x: tensor<8x16xf32>, %r: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) {
  %w = tess.parameter "w" trainable : tensor<16x32xf32>
  %b = tess.parameter "b" trainable : tensor<32xf32>
  %m = tess.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %y = tess.add %m, %r : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %n = tess.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %z = tess.add %n, %b : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %y, %z, %n : tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// Tests that reshapes that move the contracted dim are kept.
// CHECK-LABEL: func.func @reshape_moves_last_dim
// CHECK: tess.reshape
// CHECK: tess.linear
// CHECK: tess.reshape
func.func @reshape_moves_last_dim(%x: tensor<2x32x64xf32>) -> tensor<2x32x64xf32> {
  %w = tess.parameter "w" trainable : tensor<128x128xf32>
  %flat = tess.reshape %x : (tensor<2x32x64xf32>) -> tensor<32x128xf32>
  %l = tess.linear %flat, %w : (tensor<32x128xf32>, tensor<128x128xf32>) -> tensor<32x128xf32>
  %y = tess.reshape %l : (tensor<32x128xf32>) -> tensor<2x32x64xf32>
  return %y : tensor<2x32x64xf32>
}

// -----

// Tests that GPT-2's c_proj after attention ([B, S, H, D] viewed as
// [B * S, H * D], linear, viewed back as [B, S, N]) becomes one reshape to
// [B, S, H * D] and a linear on it.
// CHECK-LABEL: func.func @gpt2_attention_output_projection
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x2x8xf32>)
// CHECK: %[[R:.*]] = tess.reshape %[[X]] : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[Y:.*]] = tess.linear %[[R]], %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gpt2_attention_output_projection(%x: tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32> {
  %w = tess.parameter "c_proj.weight" trainable : tensor<16x16xf32>
  %b = tess.parameter "c_proj.bias" trainable : tensor<16xf32>
  %flat = tess.reshape %x : (tensor<2x4x2x8xf32>) -> tensor<8x16xf32>
  %l = tess.linear %flat, %w, %b : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %y = tess.reshape %l : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}
