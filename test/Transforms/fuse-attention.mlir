// RUN: tessera-opt %s -tess-fuse-attention -split-input-file | FileCheck %s

// Tests that GPT-2's attention (k transposed by a transpose op, scale as a
// mul, mask where(lower-triangular bool, lifted scalar parameter, -3.4e38))
// becomes one causal tess.attention: the kept value is an unknown scalar but
// the same for every kept entry, so it does not change the softmax.
// CHECK-LABEL: func.func @causal_where_unknown_kept_value
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.35355337{{[0-9]*}} : f64}
// CHECK-NEXT: return %[[O]]
func.func @causal_where_unknown_kept_value(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %tril = tess.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]], [[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<2x1x4x4xi1>
  %kept = tess.parameter "lifted_tensor_0" : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %tril, %kept, %lowest : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %scale = tess.constant dense<0.353553385> : tensor<f32>
  %kt = tess.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = tess.matmul %q, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %t = tess.mul %s, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %u = tess.add %t, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<2x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests that a constant f32 mask (0 keeps, -inf hides) is causal when fewer
// queries than keys see the keys up to their own position plus the offset,
// with the scale written as a division and K^T folded into transpose_rhs.
// CHECK-LABEL: func.func @causal_constant_mask_with_offset
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x2x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @causal_constant_mask_with_offset(%q: tensor<1x2x2x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x2x8xf32> {
  %mask = tess.constant dense<[[0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<2x4xf32>
  %four = tess.constant dense<4.000000e+00> : tensor<f32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x2x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x2x4xf32>
  %t = tess.div %s, %four : (tensor<1x2x2x4xf32>, tensor<f32>) -> tensor<1x2x2x4xf32>
  %u = tess.add %mask, %t : (tensor<2x4xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x2x4xf32>
  %p = tess.softmax %u {axis = 3 : i64} : tensor<1x2x2x4xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x2x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x2x8xf32>
  return %o : tensor<1x2x2x8xf32>
}

// -----

// Tests that BERT's mask, where(all true, lifted scalar, lowest), hides
// nothing and is dropped; with no scale op the scale is 1.
// CHECK-LABEL: func.func @mask_hides_nothing
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[O]]
func.func @mask_hides_nothing(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %all = tess.constant dense<true> : tensor<2x1x1x4xi1>
  %kept = tess.parameter "bert.lifted_tensor_0" : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %all, %kept, %lowest : (tensor<2x1x1x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x1x4xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %u = tess.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<2x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests that the repeat of grouped K heads is also folded where the
// exporter's decomposed SDPA (enable_gqa) flattens the repeated K to
// [B * H, S, D], transposes it as a batch of matrices and splits it again
// for Q K^T: the attention reads the 2 K/V heads as they are, and no
// broadcast (whose gradient would be a reduction) is left.
// CHECK-LABEL: func.func @grouped_query_batched_key_transpose
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x6x8xf32>, %[[K:.*]]: tensor<2x2x6x8xf32>, %[[V:.*]]: tensor<2x2x6x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.353553{{[0-9]*}} : f64}
// CHECK-SAME: (tensor<2x4x6x8xf32>, tensor<2x2x6x8xf32>, tensor<2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @grouped_query_batched_key_transpose(%q: tensor<2x4x6x8xf32>, %k: tensor<2x2x6x8xf32>, %v: tensor<2x2x6x8xf32>) -> tensor<2x4x6x8xf32> {
  %k5 = tess.reshape %k : (tensor<2x2x6x8xf32>) -> tensor<2x2x1x6x8xf32>
  %kb = tess.broadcast %k5 : (tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
  %v5 = tess.reshape %v : (tensor<2x2x6x8xf32>) -> tensor<2x2x1x6x8xf32>
  %vb = tess.broadcast %v5 : (tensor<2x2x1x6x8xf32>) -> tensor<2x2x2x6x8xf32>
  %vr = tess.reshape %vb : (tensor<2x2x2x6x8xf32>) -> tensor<2x4x6x8xf32>
  %kf = tess.reshape %kb : (tensor<2x2x2x6x8xf32>) -> tensor<8x6x8xf32>
  %kt = tess.transpose %kf {permutation = array<i64: 0, 2, 1>} : (tensor<8x6x8xf32>) -> tensor<8x8x6xf32>
  %kt4 = tess.reshape %kt : (tensor<8x8x6xf32>) -> tensor<2x4x8x6xf32>
  %s = tess.matmul %q, %kt4 : (tensor<2x4x6x8xf32>, tensor<2x4x8x6xf32>) -> tensor<2x4x6x6xf32>
  %c = tess.constant dense<0.353553385> : tensor<f32>
  %u = tess.mul %s, %c : (tensor<2x4x6x6xf32>, tensor<f32>) -> tensor<2x4x6x6xf32>
  %mask = tess.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<6x6xf32>
  %w = tess.add %u, %mask : (tensor<2x4x6x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6x6xf32>
  %p = tess.softmax %w {axis = -1 : i64} : tensor<2x4x6x6xf32>
  %o = tess.matmul %p, %vr : (tensor<2x4x6x6xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
  return %o : tensor<2x4x6x8xf32>
}

// -----

// Tests that Llama's repeated K/V heads (reshape, broadcast, reshape) are
// folded back to the 1 K/V head of x, and that a scale applied to q and k
// separately (8^-1/4 each) multiplies into one scale.
// CHECK-LABEL: func.func @grouped_query_scaled_operands
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x1x4x8xf32>, %[[V:.*]]: tensor<1x1x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.353553{{[0-9]*}} : f64}
// CHECK-SAME: (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @grouped_query_scaled_operands(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %k5 = tess.reshape %k : (tensor<1x1x4x8xf32>) -> tensor<1x1x1x4x8xf32>
  %kb = tess.broadcast %k5 : (tensor<1x1x1x4x8xf32>) -> tensor<1x1x2x4x8xf32>
  %kr = tess.reshape %kb : (tensor<1x1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %v5 = tess.reshape %v : (tensor<1x1x4x8xf32>) -> tensor<1x1x1x4x8xf32>
  %vb = tess.broadcast %v5 : (tensor<1x1x1x4x8xf32>) -> tensor<1x1x2x4x8xf32>
  %vr = tess.reshape %vb : (tensor<1x1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %quarter_root = tess.constant dense<0.594603539> : tensor<f32>
  %qs = tess.mul %q, %quarter_root : (tensor<1x2x4x8xf32>, tensor<f32>) -> tensor<1x2x4x8xf32>
  %ks = tess.mul %quarter_root, %kr : (tensor<f32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %mask = tess.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = tess.matmul %qs, %ks {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %u = tess.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %vr : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that K^T written as one transpose of the [B, S, H, D] projection
// (GPT-2's two transposes composed by canonicalization) gives K as the
// transpose [0, 2, 1, 3] of that projection.
// CHECK-LABEL: func.func @key_through_composed_transpose
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[X:.*]]: tensor<1x4x2x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NEXT: %[[K:.*]] = tess.transpose %[[X]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @key_through_composed_transpose(%q: tensor<1x2x4x8xf32>, %x: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %kt = tess.transpose %x {permutation = array<i64: 0, 2, 3, 1>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x8x4xf32>
  %eighth = tess.constant dense<1.250000e-01> : tensor<1xf32>
  %s = tess.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %t = tess.mul %eighth, %s : (tensor<1xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %t {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a constant mask that hides the keys before each query (not
// after) is not taken for causal: it stays an operand.
// CHECK-LABEL: func.func @anti_causal_mask_stays
// CHECK-SAME: (%[[Q:.*]]: tensor<1x1x2x8xf32>, %[[K:.*]]: tensor<1x1x2x8xf32>, %[[V:.*]]: tensor<1x1x2x8xf32>)
// CHECK: %[[M:.*]] = tess.constant
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {scale = 1.000000e+00 : f64}
// CHECK-NOT: causal
// CHECK-NEXT: return %[[O]]
func.func @anti_causal_mask_stays(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %mask = tess.constant dense<[[0.0, 0.0], [0xFF800000, 0.0]]> : tensor<2x2xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %u = tess.add %s, %mask : (tensor<1x1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2x2xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %o = tess.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// Tests that a causal pattern in one batch and not in the other is not
// causal: every batch slice of the constant is checked.
// CHECK-LABEL: func.func @causal_in_one_batch_only
// CHECK: tess.attention {{.*}} mask
// CHECK-NOT: causal
// CHECK: return
func.func @causal_in_one_batch_only(%q: tensor<2x1x2x8xf32>, %k: tensor<2x1x2x8xf32>, %v: tensor<2x1x2x8xf32>) -> tensor<2x1x2x8xf32> {
  %mask = tess.constant dense<[[[[0.0, 0xFF800000], [0.0, 0.0]]], [[[0.0, 0.0], [0.0, 0.0]]]]> : tensor<2x1x2x2xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<2x1x2x8xf32>, tensor<2x1x2x8xf32>) -> tensor<2x1x2x2xf32>
  %u = tess.add %s, %mask : (tensor<2x1x2x2xf32>, tensor<2x1x2x2xf32>) -> tensor<2x1x2x2xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<2x1x2x2xf32>
  %o = tess.matmul %p, %v : (tensor<2x1x2x2xf32>, tensor<2x1x2x8xf32>) -> tensor<2x1x2x8xf32>
  return %o : tensor<2x1x2x8xf32>
}

// -----

// Tests that a mask given as a function argument (padding mask), and a
// where on a condition not known at compile time, stay operands.
// CHECK-LABEL: func.func @runtime_masks_stay
// CHECK-SAME: (%[[Q:.*]]: tensor<1x1x2x8xf32>, %[[K:.*]]: tensor<1x1x2x8xf32>, %[[V:.*]]: tensor<1x1x2x8xf32>, %[[M:.*]]: tensor<1x1x2x2xf32>, %[[C:.*]]: tensor<1x1x2x2xi1>)
// CHECK: tess.attention %[[Q]], %[[K]], %[[V]] mask %[[M]] {scale
// CHECK: %[[W:.*]] = tess.where %[[C]]
// CHECK: tess.attention %[[Q]], %[[K]], %[[V]] mask %[[W]] {scale
func.func @runtime_masks_stay(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>, %m: tensor<1x1x2x2xf32>, %c: tensor<1x1x2x2xi1>) -> (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) {
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %u = tess.add %s, %m : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %o = tess.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  %zero = tess.constant dense<0.000000e+00> : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %w = tess.where %c, %zero, %lowest : (tensor<1x1x2x2xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x2x2xf32>
  %s2 = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %u2 = tess.add %s2, %w : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %p2 = tess.softmax %u2 {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %o2 = tess.matmul %p2, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o, %o2 : tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>
}

// -----

// Tests that kept entries of different values (0 and 1) make the mask more
// than causal: it stays an operand.
// CHECK-LABEL: func.func @kept_values_differ
// CHECK: tess.attention {{.*}} mask
// CHECK-NOT: causal
// CHECK: return
func.func @kept_values_differ(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %mask = tess.constant dense<[[0.0, 0xFF800000], [1.0, 0.0]]> : tensor<2x2xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %u = tess.add %s, %mask : (tensor<1x1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2x2xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %o = tess.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// Tests that a softmax outside attention stays: one returned directly, one
// whose input is not a Q K^T product, and one whose probabilities are also
// returned (output_attentions).
// CHECK-LABEL: func.func @softmax_outside_attention
// CHECK-NOT: tess.attention
// CHECK-COUNT-3: tess.softmax
// CHECK-NOT: tess.attention
func.func @softmax_outside_attention(%x: tensor<1x1x2x2xf32>, %q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>, tensor<1x1x2x2xf32>) {
  %a = tess.softmax %x {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %b = tess.softmax %x {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %o = tess.matmul %b, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %p = tess.softmax %s {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %o2 = tess.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %a, %o, %o2, %p : tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>, tensor<1x1x2x2xf32>
}

// -----

// Tests that a softmax over the query axis is not attention.
// CHECK-LABEL: func.func @softmax_wrong_axis
// CHECK-NOT: tess.attention
// CHECK: tess.softmax
func.func @softmax_wrong_axis(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %p = tess.softmax %s {axis = 2 : i64} : tensor<1x1x2x2xf32>
  %o = tess.matmul %p, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// Tests that dropout of the attention probabilities (a training graph)
// becomes the attention's dropout rate.
// CHECK-LABEL: func.func @dropout_on_probabilities
// CHECK-SAME: (%[[Q:.*]]: tensor<1x1x2x8xf32>, %[[K:.*]]: tensor<1x1x2x8xf32>, %[[V:.*]]: tensor<1x1x2x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {dropout = 1.000000e-01 : f64, scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[O]]
func.func @dropout_on_probabilities(%q: tensor<1x1x2x8xf32>, %k: tensor<1x1x2x8xf32>, %v: tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32> {
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x1x2x8xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x2xf32>
  %p = tess.softmax %s {axis = -1 : i64} : tensor<1x1x2x2xf32>
  %d = tess.dropout %p {rate = 1.000000e-01 : f64} : tensor<1x1x2x2xf32>
  %o = tess.matmul %d, %v : (tensor<1x1x2x2xf32>, tensor<1x1x2x8xf32>) -> tensor<1x1x2x8xf32>
  return %o : tensor<1x1x2x8xf32>
}

// -----

// Tests that PyTorch's decomposed scaled_dot_product_attention fuses: the
// scale's square root (a tess.sqrt of the constant scale, as imported)
// multiplies Q and K^T each, and the probabilities are
// guarded by where(isnan(p), 0, p) (isnan as compare ne, p, p), which
// tess.attention's weight 0 for fully hidden rows already gives.
// CHECK-LABEL: func.func @sdpa_nan_guard
// CHECK-SAME: (%[[Q:.*]]: tensor<2x2x4x8xf32>, %[[K:.*]]: tensor<2x2x4x8xf32>, %[[V:.*]]: tensor<2x2x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.35355{{[0-9]*}} : f64}
// CHECK-NEXT: return %[[O]]
func.func @sdpa_nan_guard(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %tril = tess.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %zero = tess.constant dense<0.000000e+00> : tensor<f32>
  %hidden = tess.constant dense<0xFF800000> : tensor<f32>
  %mask = tess.where %tril, %zero, %hidden : (tensor<4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %scale = tess.constant dense<0.353553385> : tensor<f32>
  %root = tess.sqrt %scale : tensor<f32>
  %kt = tess.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %qs = tess.mul %q, %root : (tensor<2x2x4x8xf32>, tensor<f32>) -> tensor<2x2x4x8xf32>
  %kts = tess.mul %kt, %root : (tensor<2x2x8x4xf32>, tensor<f32>) -> tensor<2x2x8x4xf32>
  %s = tess.matmul %qs, %kts : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %u = tess.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<2x2x4x4xf32>
  %nan = tess.compare ne, %p, %p : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xi1>
  %g = tess.where %nan, %zero, %p : (tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = tess.matmul %g, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests that a select on isnan(p) that does not put 0 in place of NaN is not
// taken for the guard: it changes the probabilities, so nothing fuses.
// CHECK-LABEL: func.func @nan_select_not_zero
// CHECK-NOT: tess.attention
// CHECK: tess.softmax
// CHECK: return
func.func @nan_select_not_zero(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %p = tess.softmax %s {axis = -1 : i64} : tensor<2x2x4x4xf32>
  %nan = tess.compare ne, %p, %p : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xi1>
  %g = tess.where %nan, %one, %p : (tensor<2x2x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %o = tess.matmul %g, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Tests that a constant band mask (each query sees itself and the 2 keys
// before it) becomes a causal attention with window 3.
// CHECK-LABEL: func.func @sliding_window_constant_mask
// CHECK-NEXT: %[[O:.*]] = tess.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f64, window = 3 : i64}
// CHECK-NEXT: return %[[O]]
func.func @sliding_window_constant_mask(%q: tensor<1x2x6x4xf32>, %k: tensor<1x2x6x4xf32>, %v: tensor<1x2x6x4xf32>) -> tensor<1x2x6x4xf32> {
  %mask = tess.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0xFF800000, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000], [0xFF800000, 0xFF800000, 0.0, 0.0, 0.0, 0xFF800000], [0xFF800000, 0xFF800000, 0xFF800000, 0.0, 0.0, 0.0]]> : tensor<6x6xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>) -> tensor<1x2x6x6xf32>
  %u = tess.add %s, %mask : (tensor<1x2x6x6xf32>, tensor<6x6xf32>) -> tensor<1x2x6x6xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x6x6xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x6x6xf32>, tensor<1x2x6x4xf32>) -> tensor<1x2x6x4xf32>
  return %o : tensor<1x2x6x4xf32>
}

// -----

// Tests that transformers' causal mask, left unfolded by the importer at long
// sequences, is read from its arithmetic: key positions <= query positions,
// and-ed with an all-true constant and with equal (here all-zero) packed
// sequence ids, selecting 0 or the lowest f32. The result is causal.
// CHECK-LABEL: func.func @causal_from_positions
// CHECK-NEXT: %[[O:.*]] = tess.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f64}
// CHECK-NEXT: return %[[O]]
func.func @causal_from_positions(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %q_pos = tess.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %kv_pos = tess.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %ids = tess.constant dense<0> : tensor<1x1x8x1xi64>
  %kv_ids = tess.constant dense<0> : tensor<1x1x1x8xi64>
  %true = tess.constant dense<true> : tensor<i1>
  %le = tess.compare le, %kv_pos, %q_pos : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %and = tess.logical_and %true, %le : (tensor<i1>, tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xi1>
  %same = tess.compare eq, %ids, %kv_ids : (tensor<1x1x8x1xi64>, tensor<1x1x1x8xi64>) -> tensor<1x1x8x8xi1>
  %cond = tess.logical_and %and, %same : (tensor<1x1x8x8xi1>, tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xi1>
  %zero = tess.constant dense<0.0> : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %cond, %zero, %lowest : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x8xf32>
  %u = tess.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x8x8xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that Mistral's sliding-window mask is read from its arithmetic:
// kv > q - 4 (the query positions minus the window, folded) and kv <= q is a
// band of 4 keys, the selection written with the hidden value first.
// CHECK-LABEL: func.func @sliding_window_from_positions
// CHECK-NEXT: %[[O:.*]] = tess.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f64, window = 4 : i64}
// CHECK-NEXT: return %[[O]]
func.func @sliding_window_from_positions(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %q_pos = tess.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %q_start = tess.constant dense<[[[[-4], [-3], [-2], [-1], [0], [1], [2], [3]]]]> : tensor<1x1x8x1xi64>
  %kv_pos = tess.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %after = tess.compare gt, %kv_pos, %q_start : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %le = tess.compare le, %kv_pos, %q_pos : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %band = tess.logical_and %after, %le : (tensor<1x1x8x8xi1>, tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xi1>
  %cond = tess.logical_not %band : tensor<1x1x8x8xi1>
  %zero = tess.constant dense<0.0> : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %cond, %lowest, %zero : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x8xf32>
  %u = tess.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x8x8xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that a band that stops before the diagonal (kv < q: a query does
// not see itself) is not causal: the mask stays an operand.
// CHECK-LABEL: func.func @strict_band_stays
// CHECK: tess.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 1.000000e+00 : f64}
func.func @strict_band_stays(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %q_pos = tess.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %kv_pos = tess.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %cond = tess.compare lt, %kv_pos, %q_pos : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %zero = tess.constant dense<0.0> : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %cond, %zero, %lowest : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x8xf32>
  %u = tess.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x8x8xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that packed sequences (ids 0 0 0 0 1 1 1 1: each token sees only its
// own sequence) are not a band of positions: the mask stays an operand.
// CHECK-LABEL: func.func @packed_sequences_stay
// CHECK: tess.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {scale = 1.000000e+00 : f64}
func.func @packed_sequences_stay(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
  %q_pos = tess.constant dense<[[[[0], [1], [2], [3], [4], [5], [6], [7]]]]> : tensor<1x1x8x1xi64>
  %kv_pos = tess.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %ids = tess.constant dense<[[[[0], [0], [0], [0], [1], [1], [1], [1]]]]> : tensor<1x1x8x1xi64>
  %kv_ids = tess.constant dense<[[[[0, 0, 0, 0, 1, 1, 1, 1]]]]> : tensor<1x1x1x8xi64>
  %le = tess.compare le, %kv_pos, %q_pos : (tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) -> tensor<1x1x8x8xi1>
  %same = tess.compare eq, %ids, %kv_ids : (tensor<1x1x8x1xi64>, tensor<1x1x1x8xi64>) -> tensor<1x1x8x8xi1>
  %cond = tess.logical_and %le, %same : (tensor<1x1x8x8xi1>, tensor<1x1x8x8xi1>) -> tensor<1x1x8x8xi1>
  %zero = tess.constant dense<0.0> : tensor<f32>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %cond, %zero, %lowest : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x8x8xf32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x8xf32>
  %u = tess.add %s, %mask : (tensor<1x2x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<1x2x8x8xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x8x8xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  return %o : tensor<1x2x8x4xf32>
}

// -----

// Tests that Gemma-2's logit softcapping, mul(tanh(div(s, 5)), 5) between
// the scale and the causal mask, becomes the op's softcap.
// CHECK-LABEL: func.func @softcap_between_scale_and_mask
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tess.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64, softcap = 5.000000e+00 : f64}
// CHECK-NEXT: return %[[O]]
func.func @softcap_between_scale_and_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %mask = tess.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %scale = tess.constant dense<2.500000e-01> : tensor<f32>
  %cap = tess.constant dense<5.000000e+00> : tensor<f32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %t = tess.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %d = tess.div %t, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %h = tess.tanh %d : tensor<1x2x4x4xf32>
  %c = tess.mul %h, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %u = tess.add %c, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a softcap with no mask fuses too, its inner division written
// as a multiplication by 1/c and the outer multiplication's operands swapped.
// CHECK-LABEL: func.func @softcap_without_mask
// CHECK-NEXT: %[[O:.*]] = tess.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.000000e+00 : f64, softcap = 5.000000e+01 : f64}
// CHECK-NEXT: return %[[O]]
func.func @softcap_without_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %reciprocal = tess.constant dense<2.000000e-02> : tensor<f32>
  %cap = tess.constant dense<5.000000e+01> : tensor<f32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %d = tess.mul %s, %reciprocal : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %h = tess.tanh %d : tensor<1x2x4x4xf32>
  %c = tess.mul %cap, %h : (tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %c {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that tanh between two different constants (2 * tanh(s / 5)) is not
// a softcap: the chain is some other function of the scores and stays.
// CHECK-LABEL: func.func @tanh_with_unequal_constants_is_not_softcap
// CHECK-NOT: tess.attention
// CHECK: tess.tanh
// CHECK: tess.softmax
func.func @tanh_with_unequal_constants_is_not_softcap(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %five = tess.constant dense<5.000000e+00> : tensor<f32>
  %two = tess.constant dense<2.000000e+00> : tensor<f32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %d = tess.div %s, %five : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %h = tess.tanh %d : tensor<1x2x4x4xf32>
  %c = tess.mul %h, %two : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %c {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Tests that a softcap whose capped scores are also read elsewhere stays
// unfused: the fused op would not produce them.
// CHECK-LABEL: func.func @softcap_with_second_use
// CHECK-NOT: tess.attention
// CHECK: tess.tanh
func.func @softcap_with_second_use(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %cap = tess.constant dense<5.000000e+00> : tensor<f32>
  %s = tess.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %d = tess.div %s, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %h = tess.tanh %d : tensor<1x2x4x4xf32>
  %c = tess.mul %h, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %c {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %h : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}
