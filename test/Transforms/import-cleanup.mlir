// RUN: tessera-opt %s -tess-import-cleanup -split-input-file | FileCheck %s

// Tests that a GPT-2 block as the importer writes it (Gemms between views,
// split QKV, heads moved by transposes, causal where-mask with the lifted
// scalar, tanh GELU written out) becomes Transformer-level ops: one causal
// attention, four linears on [B, S, *] inputs, one tanh GELU, and no softmax
// or view around a linear left.
// CHECK-LABEL: func.func @gpt2_block
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x16xf32>)
// CHECK-NOT: tess.softmax
// CHECK: %[[QKV:.*]] = tess.linear %[[X]], %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<2x4x48xf32>
// CHECK: tess.split %[[QKV]]
// CHECK: %[[O:.*]] = tess.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.35355337{{[0-9]*}} : f64}
// CHECK-SAME: (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
// CHECK: %[[P:.*]] = tess.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[H:.*]] = tess.add %[[X]], %[[P]]
// CHECK-NEXT: %[[FC:.*]] = tess.linear %[[H]], %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x4x64xf32>
// CHECK-NEXT: %[[G:.*]] = tess.gelu %[[FC]] {approximation = #tess<gelu_approximation tanh>} : tensor<2x4x64xf32>
// CHECK-NEXT: %[[OUT:.*]] = tess.linear %[[G]], %{{.*}}, %{{.*}} : (tensor<2x4x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[Y:.*]] = tess.add %[[H]], %[[OUT]]
// CHECK-NEXT: return %[[Y]]
func.func @gpt2_block(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %w_attn = tess.parameter "h.0.attn.c_attn.weight" trainable : tensor<16x48xf32>
  %b_attn = tess.parameter "h.0.attn.c_attn.bias" trainable : tensor<48xf32>
  %w_proj = tess.parameter "h.0.attn.c_proj.weight" trainable : tensor<16x16xf32>
  %b_proj = tess.parameter "h.0.attn.c_proj.bias" trainable : tensor<16xf32>
  %w_fc = tess.parameter "h.0.mlp.c_fc.weight" trainable : tensor<16x64xf32>
  %b_fc = tess.parameter "h.0.mlp.c_fc.bias" trainable : tensor<64xf32>
  %w_out = tess.parameter "h.0.mlp.c_proj.weight" trainable : tensor<64x16xf32>
  %b_out = tess.parameter "h.0.mlp.c_proj.bias" trainable : tensor<16xf32>
  %lifted = tess.parameter "lifted_tensor_0" : tensor<f32>
  %tril = tess.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]], [[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<2x1x4x4xi1>
  %lowest = tess.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = tess.where %tril, %lifted, %lowest : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>

  %flat = tess.reshape %x : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %qkv = tess.linear %flat, %w_attn, %b_attn : (tensor<8x16xf32>, tensor<16x48xf32>, tensor<48xf32>) -> tensor<8x48xf32>
  %qkv3 = tess.reshape %qkv : (tensor<8x48xf32>) -> tensor<2x4x48xf32>
  %q, %k, %v = tess.split %qkv3 {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : (tensor<2x4x48xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %k4 = tess.reshape %k : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %v4 = tess.reshape %v : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %q4 = tess.reshape %q : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x8xf32>) -> tensor<2x2x4x8xf32>
  %kt = tess.transpose %kh {permutation = array<i64: 0, 1, 3, 2>} : (tensor<2x2x4x8xf32>) -> tensor<2x2x8x4xf32>
  %s = tess.matmul %qh, %kt : (tensor<2x2x4x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x4x4xf32>
  %scale = tess.constant dense<0.353553385> : tensor<f32>
  %t = tess.mul %s, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %u = tess.add %t, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<2x2x4x4xf32>
  %o = tess.matmul %p, %vh : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %ot = tess.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
  %o3 = tess.reshape %ot : (tensor<2x4x2x8xf32>) -> tensor<2x4x16xf32>
  %of = tess.reshape %o3 : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %proj = tess.linear %of, %w_proj, %b_proj : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %proj3 = tess.reshape %proj : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %h = tess.add %x, %proj3 : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>

  %hf = tess.reshape %h : (tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %fc = tess.linear %hf, %w_fc, %b_fc : (tensor<8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %fc3 = tess.reshape %fc : (tensor<8x64xf32>) -> tensor<2x4x64xf32>
  %half = tess.constant dense<5.000000e-01> : tensor<f32>
  %three = tess.constant dense<3.000000e+00> : tensor<f32>
  %c = tess.constant dense<4.471500e-02> : tensor<f32>
  %sq = tess.constant dense<0.797884583> : tensor<f32>
  %one = tess.constant dense<1.000000e+00> : tensor<f32>
  %g0 = tess.mul %fc3, %half : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %g1 = tess.pow %fc3, %three : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %g2 = tess.mul %g1, %c : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %g3 = tess.add %fc3, %g2 : (tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %g4 = tess.mul %g3, %sq : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %g5 = tess.tanh %g4 : tensor<2x4x64xf32>
  %g6 = tess.add %g5, %one : (tensor<2x4x64xf32>, tensor<f32>) -> tensor<2x4x64xf32>
  %g = tess.mul %g0, %g6 : (tensor<2x4x64xf32>, tensor<2x4x64xf32>) -> tensor<2x4x64xf32>
  %gf = tess.reshape %g : (tensor<2x4x64xf32>) -> tensor<8x64xf32>
  %out = tess.linear %gf, %w_out, %b_out : (tensor<8x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %out3 = tess.reshape %out : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %y = tess.add %h, %out3 : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Tests that a Llama block as the importer writes it (decomposed RMSNorm,
// nn.Linear as MatMul by Transpose(W), grouped-query attention with repeated
// K/V heads and a constant causal mask, SwiGLU with x * sigmoid(x)) becomes
// rms_norm, linears with transpose_weight, grouped causal attention, swiglu.
// CHECK-LABEL: func.func @llama_block
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x16xf32>)
// CHECK-NOT: tess.softmax
// CHECK-NOT: tess.broadcast
// CHECK: %[[N:.*]] = tess.rms_norm %[[X]] scale %{{.*}} : (tensor<1x4x16xf32>, tensor<16xf32>) -> tensor<1x4x16xf32>
// CHECK: tess.linear %[[N]], %{{.*}} {transpose_weight} : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
// CHECK: tess.linear %[[N]], %{{.*}} {transpose_weight} : (tensor<1x4x16xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
// CHECK: tess.linear %[[N]], %{{.*}} {transpose_weight} : (tensor<1x4x16xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
// CHECK: tess.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.35355337{{[0-9]*}} : f64}
// CHECK-SAME: (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK: %[[GATE:.*]] = tess.linear %{{.*}}, %{{.*}} {transpose_weight} : (tensor<1x4x16xf32>, tensor<32x16xf32>) -> tensor<1x4x32xf32>
// CHECK: tess.swiglu %[[GATE]]
func.func @llama_block(%x: tensor<1x4x16xf32>) -> tensor<1x4x16xf32> {
  %norm_w = tess.parameter "norm.weight" trainable : tensor<16xf32>
  %wq = tess.parameter "q_proj.weight" trainable : tensor<16x16xf32>
  %wk = tess.parameter "k_proj.weight" trainable : tensor<8x16xf32>
  %wv = tess.parameter "v_proj.weight" trainable : tensor<8x16xf32>
  %wo = tess.parameter "o_proj.weight" trainable : tensor<16x16xf32>
  %wg = tess.parameter "gate_proj.weight" trainable : tensor<32x16xf32>
  %wu = tess.parameter "up_proj.weight" trainable : tensor<32x16xf32>
  %wd = tess.parameter "down_proj.weight" trainable : tensor<16x32xf32>

  %two = tess.constant dense<2.000000e+00> : tensor<f32>
  %eps = tess.constant dense<9.99999997E-7> : tensor<f32>
  %sq = tess.pow %x, %two : (tensor<1x4x16xf32>, tensor<f32>) -> tensor<1x4x16xf32>
  %ms = tess.reduce_mean %sq {dims = array<i64: -1>, keep_dims} : (tensor<1x4x16xf32>) -> tensor<1x4x1xf32>
  %mse = tess.add %ms, %eps : (tensor<1x4x1xf32>, tensor<f32>) -> tensor<1x4x1xf32>
  %rt = tess.sqrt %mse : tensor<1x4x1xf32>
  %inv = tess.reciprocal %rt : tensor<1x4x1xf32>
  %xn = tess.mul %x, %inv : (tensor<1x4x16xf32>, tensor<1x4x1xf32>) -> tensor<1x4x16xf32>
  %n = tess.mul %norm_w, %xn : (tensor<16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>

  %wqt = tess.transpose %wq {permutation = array<i64: 1, 0>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %q = tess.matmul %n, %wqt : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
  %wkt = tess.transpose %wk {permutation = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %k = tess.matmul %n, %wkt : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %wvt = tess.transpose %wv {permutation = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %v = tess.matmul %n, %wvt : (tensor<1x4x16xf32>, tensor<16x8xf32>) -> tensor<1x4x8xf32>
  %q4 = tess.reshape %q : (tensor<1x4x16xf32>) -> tensor<1x4x2x8xf32>
  %qh = tess.transpose %q4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
  %k4 = tess.reshape %k : (tensor<1x4x8xf32>) -> tensor<1x4x1x8xf32>
  %kh = tess.transpose %k4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x1x8xf32>) -> tensor<1x1x4x8xf32>
  %v4 = tess.reshape %v : (tensor<1x4x8xf32>) -> tensor<1x4x1x8xf32>
  %vh = tess.transpose %v4 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x1x8xf32>) -> tensor<1x1x4x8xf32>
  %k5 = tess.reshape %kh : (tensor<1x1x4x8xf32>) -> tensor<1x1x1x4x8xf32>
  %kb = tess.broadcast %k5 : (tensor<1x1x1x4x8xf32>) -> tensor<1x1x2x4x8xf32>
  %kr = tess.reshape %kb : (tensor<1x1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %v5 = tess.reshape %vh : (tensor<1x1x4x8xf32>) -> tensor<1x1x1x4x8xf32>
  %vb = tess.broadcast %v5 : (tensor<1x1x1x4x8xf32>) -> tensor<1x1x2x4x8xf32>
  %vr = tess.reshape %vb : (tensor<1x1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %krt = tess.transpose %kr {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = tess.matmul %qh, %krt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %scale = tess.constant dense<0.353553385> : tensor<f32>
  %t = tess.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %mask = tess.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %u = tess.add %t, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = tess.softmax %u {axis = -1 : i64} : tensor<1x2x4x4xf32>
  %o = tess.matmul %p, %vr : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %ot = tess.transpose %o {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32>
  %o3 = tess.reshape %ot : (tensor<1x4x2x8xf32>) -> tensor<1x4x16xf32>
  %wot = tess.transpose %wo {permutation = array<i64: 1, 0>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %attn = tess.matmul %o3, %wot : (tensor<1x4x16xf32>, tensor<16x16xf32>) -> tensor<1x4x16xf32>
  %h = tess.add %x, %attn : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>

  %wgt = tess.transpose %wg {permutation = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %gate = tess.matmul %h, %wgt : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
  %sig = tess.sigmoid %gate : tensor<1x4x32xf32>
  %silu = tess.mul %gate, %sig : (tensor<1x4x32xf32>, tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  %wut = tess.transpose %wu {permutation = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %up = tess.matmul %h, %wut : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
  %gu = tess.mul %silu, %up : (tensor<1x4x32xf32>, tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  %wdt = tess.transpose %wd {permutation = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %down = tess.matmul %gu, %wdt : (tensor<1x4x32xf32>, tensor<32x16xf32>) -> tensor<1x4x16xf32>
  %y = tess.add %h, %down : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}
