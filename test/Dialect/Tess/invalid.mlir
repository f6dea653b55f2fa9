// RUN: tessera-opt %s -split-input-file -verify-diagnostics

// One case per numbered rule (C1, C2, ...) of every op in TessOps.td, named
// after the rule it breaks; a suffix tells apart several ways of breaking one
// rule. Rules checked by shape inference also report "failed to infer
// returned types". Ops without numbered rules (the unary elementwise ops)
// are checked by their type constraints alone.

// -----

func.func @constant_c1() {
  // expected-error@+1 {{C1: value must be a ranked tensor, got 'vector<4xf32>'}}
  %0 = "tess.constant"() <{value = dense<1.0> : vector<4xf32>}> : () -> tensor<4xf32>
  return
}

// -----

func.func @constant_c1_custom_form() {
  // expected-error@+1 {{C1: value must be a ranked tensor, got 'vector<4xf32>'}}
  %0 = tess.constant dense<1.0> : vector<4xf32>
  return
}

// -----

func.func @constant_c1_type() {
  // expected-error@+1 {{C1: value of type 'tensor<4xf32>' does not match the result 'tensor<2x2xf32>'}}
  %0 = "tess.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<2x2xf32>
  return
}

// -----

func.func @parameter_c1() {
  // expected-error@+1 {{C1: a parameter needs a name}}
  %0 = tess.parameter "" : tensor<4xf32>
  return
}

// -----

func.func @parameter_c2() {
  // expected-error@+1 {{C2: value of type 'tensor<3xf32>' does not match the result 'tensor<4xf32>'}}
  %0 = tess.parameter "w" {value = dense<1.0> : tensor<3xf32>} : tensor<4xf32>
  return
}

// -----

func.func @add_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @add_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.add %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @sub_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.sub %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @sub_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.sub %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @mul_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.mul %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @mul_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.mul %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @div_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.div %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @div_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.div %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @pow_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.pow %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @pow_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.pow %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @maximum_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.maximum %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @maximum_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.maximum %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @minimum_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.minimum %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @minimum_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.minimum %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @logical_and_c1(%a: tensor<4xi1>, %b: tensor<4xi8>) {
  // Both operands are i1 by type, so the operand constraint catches C1 first.
  // expected-error@+1 {{operand #1 must be ranked tensor of 1-bit signless integer values}}
  %0 = tess.logical_and %a, %b : (tensor<4xi1>, tensor<4xi8>) -> tensor<4xi1>
  return
}

// -----

func.func @logical_and_c2(%a: tensor<2x4xi1>, %b: tensor<3xi1>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.logical_and %a, %b : (tensor<2x4xi1>, tensor<3xi1>) -> tensor<2x4xi1>
  return
}

// -----

func.func @logical_or_c1(%a: tensor<4xi1>, %b: tensor<4xi8>) {
  // Both operands are i1 by type, so the operand constraint catches C1 first.
  // expected-error@+1 {{operand #1 must be ranked tensor of 1-bit signless integer values}}
  %0 = tess.logical_or %a, %b : (tensor<4xi1>, tensor<4xi8>) -> tensor<4xi1>
  return
}

// -----

func.func @logical_or_c2(%a: tensor<2x4xi1>, %b: tensor<3xi1>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.logical_or %a, %b : (tensor<2x4xi1>, tensor<3xi1>) -> tensor<2x4xi1>
  return
}

// -----

func.func @compare_c1(%a: tensor<4xi64>, %b: tensor<4xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'i64' and 'i32'}}
  %0 = tess.compare eq, %a, %b : (tensor<4xi64>, tensor<4xi32>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_c2(%a: tensor<2x4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [2, 4] and [3] do not broadcast}}
  %0 = tess.compare lt, %a, %b : (tensor<2x4xf32>, tensor<3xf32>) -> tensor<2x4xi1>
  return
}

// -----

func.func @where_c1(%m: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<f16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands have different element types: 'f32' and 'f16'}}
  %0 = tess.where %m, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<f16>) -> tensor<4xf32>
  return
}

// -----

func.func @where_c2(%m: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: shapes [4] and [3] do not broadcast}}
  %0 = tess.where %m, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_c2_condition(%m: tensor<3xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: the condition's shape does not broadcast with the branches'}}
  %0 = tess.where %m, %a, %b : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @cast_c1(%x: tensor<2x8xf32>) {
  // expected-error@+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = tess.cast %x : tensor<2x8xf32> to tensor<16xbf16>
  return
}

// -----

func.func @matmul_c1(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands must have rank >= 2}}
  %0 = tess.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_c2(%a: tensor<2x8xf32>, %b: tensor<8x4xbf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: operands have different element types}}
  %0 = tess.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_c3(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: contracted dims differ: 8 vs 4}}
  %0 = tess.matmul %a, %b {transpose_rhs} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_c4(%a: tensor<3x2x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: batch dims do not broadcast}}
  %0 = tess.matmul %a, %b : (tensor<3x2x8xf32>, tensor<2x8x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @linear_c1(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: input must have rank >= 1 and weight rank 2}}
  %0 = tess.linear %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @linear_c2(%x: tensor<2x8xf32>, %w: tensor<8x4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: input and weight have different element types}}
  %0 = tess.linear %x, %w : (tensor<2x8xf32>, tensor<8x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_c3(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: input features 8 != weight's 4}}
  %0 = tess.linear %x, %w {transpose_weight} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @linear_c4(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: bias must be [4] of 'f32'}}
  %0 = tess.linear %x, %w, %b : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_c4_element_type(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: bias must be [4] of 'f32'}}
  %0 = tess.linear %x, %w, %b : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_c1(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: axis 2 is out of range for rank 2}}
  %0 = tess.layer_norm %x scale %g {axis = 2 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_c2(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: scale must be 'tensor<2x4xf32>', got 'tensor<4xf32>'}}
  %0 = tess.layer_norm %x scale %g {axis = 0 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_c2_element_type(%x: tensor<2x4xf32>, %g: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: scale must be 'tensor<4xf32>', got 'tensor<4xf16>'}}
  %0 = tess.layer_norm %x scale %g : (tensor<2x4xf32>, tensor<4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_c3(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{C3: epsilon must be >= 0, got -1.000000e-05}}
  %0 = tess.layer_norm %x {epsilon = -1.0e-05 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_c3_nan(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{C3: epsilon must be >= 0, got nan}}
  %0 = tess.layer_norm %x {epsilon = 0x7FF8000000000000 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_c1(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: axis 2 is out of range for rank 2}}
  %0 = tess.rms_norm %x scale %g {axis = 2 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_c2(%x: tensor<2x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: scale must be 'tensor<2x4xf32>', got 'tensor<4xf32>'}}
  %0 = tess.rms_norm %x scale %g {axis = 0 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_c2_element_type(%x: tensor<2x4xf32>, %g: tensor<4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: scale must be 'tensor<4xf32>', got 'tensor<4xf16>'}}
  %0 = tess.rms_norm %x scale %g : (tensor<2x4xf32>, tensor<4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_c3(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{C3: epsilon must be >= 0, got -1.000000e-05}}
  %0 = tess.rms_norm %x {epsilon = -1.0e-05 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_c3_nan(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{C3: epsilon must be >= 0, got nan}}
  %0 = tess.rms_norm %x {epsilon = 0x7FF8000000000000 : f64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_c2_bias(%x: tensor<2x4xf32>, %b: tensor<2xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: bias must be 'tensor<4xf32>', got 'tensor<2xf32>'}}
  %0 = tess.layer_norm %x bias %b : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @softmax_c1(%x: tensor<2x4xf32>) {
  // expected-error@+1 {{C1: axis -3 is out of range for rank 2}}
  %0 = tess.softmax %x {axis = -3 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @embedding_c1(%t: tensor<4x8x2xf32>, %i: tensor<3xi64>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: the table must have rank 2}}
  %0 = tess.embedding %t, %i : (tensor<4x8x2xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  return
}

// -----

func.func @embedding_c2(%t: tensor<4x8xf32>, %i: tensor<3xf32>) {
  // Integer indices are the operand's type constraint.
  // expected-error@+1 {{operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = tess.embedding %t, %i : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @embedding_c3(%t: tensor<4x8xf32>, %i: tensor<i64>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: indices must have rank >= 1; look one id up with tess.gather}}
  %0 = tess.embedding %t, %i : (tensor<4x8xf32>, tensor<i64>) -> tensor<8xf32>
  return
}

// -----

func.func @packed_attention_c1(%qkv: tensor<64x96xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: qkv must have rank 3 ([batch, seq, (Hq + 2 Hkv) head_dim]), got 'tensor<64x96xf32>'}}
  %0:2 = tess.packed_attention %qkv {key_heads = 2 : i64, query_heads = 2 : i64, scale = 1.0 : f64} : (tensor<64x96xf32>) -> (tensor<64x32xf32>, tensor<2x32xf32>)
  return
}

// -----

func.func @packed_attention_c2(%qkv: tensor<2x32x96xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: 3 query heads are not a positive multiple of 2 key/value heads}}
  %0:2 = tess.packed_attention %qkv {key_heads = 2 : i64, query_heads = 3 : i64, scale = 1.0 : f64} : (tensor<2x32x96xf32>) -> (tensor<2x32x32xf32>, tensor<2x3x32xf32>)
  return
}

// -----

func.func @packed_attention_c2_zero(%qkv: tensor<2x32x96xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: 2 query heads are not a positive multiple of 0 key/value heads}}
  %0:2 = tess.packed_attention %qkv {key_heads = 0 : i64, query_heads = 2 : i64, scale = 1.0 : f64} : (tensor<2x32x96xf32>) -> (tensor<2x32x32xf32>, tensor<2x2x32xf32>)
  return
}

// -----

func.func @packed_attention_c3(%qkv: tensor<2x32x92xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: qkv's last dim 92 is not a multiple of 6 heads (query_heads + 2 key_heads)}}
  %0:2 = tess.packed_attention %qkv {key_heads = 2 : i64, query_heads = 2 : i64, scale = 1.0 : f64} : (tensor<2x32x92xf32>) -> (tensor<2x32x30xf32>, tensor<2x2x32xf32>)
  return
}

// -----

func.func @packed_attention_c4(%qkv: tensor<2x32x96xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: scale must be positive and finite, got 0.000000e+00}}
  %0:2 = tess.packed_attention %qkv {key_heads = 2 : i64, query_heads = 2 : i64, scale = 0.0 : f64} : (tensor<2x32x96xf32>) -> (tensor<2x32x32xf32>, tensor<2x2x32xf32>)
  return
}

// -----

func.func @packed_attention_grad_c5(%qkv: tensor<2x32x96xf32>, %y: tensor<2x32x32xf32>, %lse: tensor<2x32x2xf32>, %dy: tensor<2x32x32xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C5: y 'tensor<2x32x32xf32>' and lse 'tensor<2x32x2xf32>' must be the forward's 'tensor<2x32x32xf32>' and 'tensor<2x2x32xf32>'}}
  %0 = tess.packed_attention_grad %qkv, %y, %lse, %dy {key_heads = 2 : i64, query_heads = 2 : i64, scale = 1.0 : f64} : (tensor<2x32x96xf32>, tensor<2x32x32xf32>, tensor<2x32x2xf32>, tensor<2x32x32xf32>) -> tensor<2x32x96xf32>
  return
}

// -----

func.func @packed_attention_grad_c6(%qkv: tensor<2x32x96xf32>, %y: tensor<2x32x32xf32>, %lse: tensor<2x2x32xf32>, %dy: tensor<2x32x32xbf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C6: dy 'tensor<2x32x32xbf16>' must have y's type 'tensor<2x32x32xf32>'}}
  %0 = tess.packed_attention_grad %qkv, %y, %lse, %dy {key_heads = 2 : i64, query_heads = 2 : i64, scale = 1.0 : f64} : (tensor<2x32x96xf32>, tensor<2x32x32xf32>, tensor<2x2x32xf32>, tensor<2x32x32xbf16>) -> tensor<2x32x96xf32>
  return
}

// -----

func.func @attention_c1(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: query, key and value must be rank-4 tensors of one element type}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf16>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c1_rank(%q: tensor<4x8x16xf32>, %k: tensor<4x8x16xf32>, %v: tensor<4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: query, key and value must be rank-4 tensors of one element type}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return
}

// -----

func.func @attention_c2(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x6x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: query 'tensor<2x4x8x16xf32>', key 'tensor<2x4x8x16xf32>' and value 'tensor<2x4x6x16xf32>' do not agree}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c2_head_dim(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x32xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: query 'tensor<2x4x8x16xf32>', key 'tensor<2x4x8x32xf32>' and value 'tensor<2x4x8x16xf32>' do not agree}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c3(%q: tensor<2x4x8x16xf32>, %k: tensor<2x3x8x16xf32>, %v: tensor<2x3x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: 4 query heads are not a multiple of 3 key/value heads (at least one)}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c3_no_heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x0x8x16xf32>, %v: tensor<2x0x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: 4 query heads are not a multiple of 0 key/value heads (at least one)}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x0x8x16xf32>, tensor<2x0x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c4(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<8x7xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: mask 'tensor<8x7xf32>' does not broadcast to the scores [2, 4, 8, 8]}}
  %0 = tess.attention %q, %k, %v mask %m {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8x7xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c4_rank(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<1x2x4x8x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: mask 'tensor<1x2x4x8x8xf32>' does not broadcast to the scores [2, 4, 8, 8]}}
  %0 = tess.attention %q, %k, %v mask %m {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1x2x4x8x8xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c4_element_type(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<8x8xbf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: mask element type 'bf16' differs from the query's 'f32'}}
  %0 = tess.attention %q, %k, %v mask %m {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<8x8xbf16>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c5(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C5: scale must be positive and finite, got 0.000000e+00}}
  %0 = tess.attention %q, %k, %v {scale = 0.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c5_infinite(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C5: scale must be positive and finite, got INF}}
  %0 = tess.attention %q, %k, %v {scale = 0x7FF0000000000000 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c6(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x4x16xf32>, %v: tensor<2x4x4x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C6: a causal attention needs no more queries than keys}}
  %0 = tess.attention %q, %k, %v {causal, scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c7(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C7: dropout must be in [0, 1), got 1.000000e+00}}
  %0 = tess.attention %q, %k, %v {dropout = 1.0 : f64, scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c8_negative(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C8: window -1 must be 0 (none) or positive with causal}}
  %0 = tess.attention %q, %k, %v {causal, scale = 1.0 : f64, window = -1 : i64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c8_not_causal(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C8: window 4 must be 0 (none) or positive with causal}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64, window = 4 : i64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_grad_c8(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %dy: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C8: window 2 must be 0 (none) or positive with causal}}
  %0:3 = tess.attention_grad %q, %k, %v, %dy {scale = 1.0 : f64, window = 2 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

// -----

func.func @attention_c9_negative(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C9: softcap -5.000000e+00 must be 0 (none) or positive and finite}}
  %0 = tess.attention %q, %k, %v {causal, scale = 1.0 : f64, softcap = -5.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_c9_infinite(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C9: softcap INF must be 0 (none) or positive and finite}}
  %0 = tess.attention %q, %k, %v {scale = 1.0 : f64, softcap = 0x7FF0000000000000 : f64} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}

// -----

func.func @attention_grad_c9(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %dy: tensor<2x4x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C9: softcap -1.000000e+00 must be 0 (none) or positive and finite}}
  %0:3 = tess.attention_grad %q, %k, %v, %dy {scale = 1.0 : f64, softcap = -1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

// -----

func.func @dropout_c1(%x: tensor<4xf32>) {
  // expected-error@+1 {{C1: rate must be in [0, 1), got -1.000000e-01}}
  %0 = tess.dropout %x {rate = -0.1 : f64} : tensor<4xf32>
  return
}

// -----

func.func @dropout_c1_one(%x: tensor<4xf32>) {
  // expected-error@+1 {{C1: rate must be in [0, 1), got 1.000000e+00}}
  %0 = tess.dropout %x {rate = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @dropout_c2_rate(%x: tensor<4xf32>) {
  // expected-error@+1 {{C2: stream_axis 'dp' on an op that draws no random numbers (rate 0)}}
  %0 = tess.dropout %x {rate = 0.0 : f64, stream_axis = "dp"} : tensor<4xf32>
  return
}
}

// -----

func.func @dropout_c2_no_mesh(%x: tensor<4xf32>) {
  // expected-error@+1 {{C2: stream_axis 'dp' needs a module with a tess.mesh attribute}}
  %0 = tess.dropout %x {rate = 0.1 : f64, stream_axis = "dp"} : tensor<4xf32>
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @dropout_c2_axis(%x: tensor<4xf32>) {
  // expected-error@+1 {{C2: stream_axis 'tp' is not an axis of the mesh #tess.mesh<dp = 2>}}
  %0 = tess.dropout %x {rate = 0.1 : f64, stream_axis = "tp"} : tensor<4xf32>
  return
}
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @attention_c10(%q: tensor<2x4x8x16xf32>) {
  // expected-error@+1 {{C10: stream_axis 'dp' on an op that draws no random numbers (rate 0)}}
  %0 = tess.attention %q, %q, %q {scale = 1.0 : f64, stream_axis = "dp"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}
}

// -----

func.func @attention_grad_c10(%q: tensor<2x4x8x16xf32>) {
  // expected-error@+1 {{C10: stream_axis 'dp' needs a module with a tess.mesh attribute}}
  %0:3 = tess.attention_grad %q, %q, %q, %q {dropout = 0.1 : f64, scale = 1.0 : f64, stream_axis = "dp"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
func.func @attention_c10_heads(%q: tensor<2x4x8x16xf32>) {
  // expected-error@+1 {{C10: head_stream_axis 'tp' on an op that draws no random numbers (rate 0)}}
  %0 = tess.attention %q, %q, %q {scale = 1.0 : f64, head_stream_axis = "tp"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return
}
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @attention_grad_c10_heads(%q: tensor<2x4x8x16xf32>) {
  // expected-error@+1 {{C10: head_stream_axis 'tp' is not an axis of the mesh #tess.mesh<dp = 2>}}
  %0:3 = tess.attention_grad %q, %q, %q, %q {dropout = 0.1 : f64, scale = 1.0 : f64, head_stream_axis = "tp"} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  return
}
}

// -----

// The dropout index's head stride bounds the heads of a dropping attention.
func.func @attention_c7_heads(%q: tensor<1x65537x1x1xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C7: dropout over 65537 query heads: at most 65536 (the head stride of the dropout index)}}
  %0 = tess.attention %q, %q, %q {dropout = 0.1 : f64, scale = 1.0 : f64} : (tensor<1x65537x1x1xf32>, tensor<1x65537x1x1xf32>, tensor<1x65537x1x1xf32>) -> tensor<1x65537x1x1xf32>
  return
}

// -----

func.func @reshape_c1(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{C1: cannot reshape 'tensor<2x3xf32>' to 'tensor<7xf32>'}}
  %0 = tess.reshape %x : (tensor<2x3xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @reshape_c1_element_type(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{C1: cannot reshape 'tensor<2x3xf32>' to 'tensor<6xf16>'}}
  %0 = tess.reshape %x : (tensor<2x3xf32>) -> tensor<6xf16>
  return
}

// -----

func.func @transpose_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: [0, 0] is not a permutation of [0, 2)}}
  %0 = tess.transpose %x {permutation = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_c1_size(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: permutation has 3 entries for rank 2}}
  %0 = tess.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_c1(%x: tensor<1x3xf32>) {
  // expected-error@+1 {{C1: element types differ}}
  %0 = tess.broadcast %x : (tensor<1x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @broadcast_c2(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{C2: 'tensor<2x3xf32>' does not broadcast to 'tensor<4x3xf32>'}}
  %0 = tess.broadcast %x : (tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @broadcast_c2_rank(%x: tensor<1x2x3xf32>) {
  // expected-error@+1 {{C2: 'tensor<1x2x3xf32>' does not broadcast to 'tensor<2x3xf32>'}}
  %0 = tess.broadcast %x : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: starts, limits and strides need 2 entries each}}
  %0 = tess.slice %x {starts = array<i64: 0>, limits = array<i64: 2>, strides = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_c2(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: dim 1 window [1, 4) is not inside [0, 3]}}
  %0 = tess.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 2, 4>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_c2_reversed(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: dim 0 window [2, 1) is not inside [0, 2]}}
  %0 = tess.slice %x {starts = array<i64: 2, 0>, limits = array<i64: 1, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<0x3xf32>
  return
}

// -----

func.func @slice_c3(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: stride of dim 1 must be >= 1}}
  %0 = tess.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, strides = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @split_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: axis 2 is out of range for rank 2}}
  %0:2 = tess.split %x {axis = 2 : i64, sizes = array<i64: 1, 1>} : (tensor<2x3xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>)
  return
}

// -----

func.func @split_c2(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: split sizes must be positive}}
  %0:2 = tess.split %x {axis = 1 : i64, sizes = array<i64: 3, 0>} : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x0xf32>)
  return
}

// -----

func.func @split_c2_sum(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: split sizes sum to 2, the dim is 3}}
  %0:2 = tess.split %x {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @split_c2_overflow(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: split sizes sum to more than the dim, 3}}
  %0:2 = tess.split %x {axis = 1 : i64, sizes = array<i64: 9223372036854775807, 2>} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @split_c3(%x: tensor<2x3xf32>) {
  // expected-error@+1 {{C3: 3 sizes need as many results, got 2}}
  %0:2 = tess.split %x {axis = 1 : i64, sizes = array<i64: 1, 1, 1>} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @concat_c1() {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: concat needs at least one input}}
  %0 = "tess.concat"() <{axis = 0 : i64}> : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_c2(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: inputs differ in rank or element type}}
  %0 = tess.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_c2_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: inputs differ in rank or element type}}
  %0 = tess.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_c3(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: axis -3 is out of range for rank 2}}
  %0 = tess.concat %a, %b {axis = -3 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_c4(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: inputs differ in dim 1}}
  %0 = tess.concat %a, %b {axis = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_c1(%x: tensor<2x3xf32>, %i: tensor<4xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: axis 2 is out of range for rank 2}}
  %0 = tess.gather %x, %i {axis = 2 : i64} : (tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reduce_sum_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim 2 is out of range or repeated for rank 2}}
  %0 = tess.reduce_sum %x {dims = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_sum_c1_repeated(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim -1 is out of range or repeated for rank 2}}
  %0 = tess.reduce_sum %x {dims = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_mean_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim 2 is out of range or repeated for rank 2}}
  %0 = tess.reduce_mean %x {dims = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_mean_c1_repeated(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim -1 is out of range or repeated for rank 2}}
  %0 = tess.reduce_mean %x {dims = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_max_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim 2 is out of range or repeated for rank 2}}
  %0 = tess.reduce_max %x {dims = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_max_c1_repeated(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim -1 is out of range or repeated for rank 2}}
  %0 = tess.reduce_max %x {dims = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_min_c1(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim 2 is out of range or repeated for rank 2}}
  %0 = tess.reduce_min %x {dims = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_min_c1_repeated(%x: tensor<2x3xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: dim -1 is out of range or repeated for rank 2}}
  %0 = tess.reduce_min %x {dims = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----
// Training ops (TessTrainingOps.td)
// -----

func.func @cross_entropy_c1(%l: tensor<f32>, %t: tensor<i64>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: logits must have rank >= 1}}
  %0 = tess.cross_entropy %l, %t : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_c2(%l: tensor<2x8x16xf32>, %t: tensor<2x16xi64>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: targets of shape [2, 16] do not match the logits' rows [2, 8]}}
  %0 = tess.cross_entropy %l, %t : (tensor<2x8x16xf32>, tensor<2x16xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_c1(%l: tensor<f32>, %t: tensor<i64>, %d: tensor<f32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: logits must have rank >= 1}}
  %0 = tess.cross_entropy_grad %l, %t, %d : (tensor<f32>, tensor<i64>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_c2(%l: tensor<8x16xf32>, %t: tensor<16xi64>, %d: tensor<f32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: targets of shape [16] do not match the logits' rows [8]}}
  %0 = tess.cross_entropy_grad %l, %t, %d : (tensor<8x16xf32>, tensor<16xi64>, tensor<f32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @cross_entropy_grad_c3(%l: tensor<8x16xf32>, %t: tensor<8xi64>, %d: tensor<1xf32>) {
  // expected-error@+1 {{operand #2 must be 0D tensor of 32-bit float values}}
  %0 = tess.cross_entropy_grad %l, %t, %d : (tensor<8x16xf32>, tensor<8xi64>, tensor<1xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @cross_entropy_c3_type(%l: tensor<4x16xf32>, %t: tensor<4xi64>, %all: tensor<8xi32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: count_over targets of type 'tensor<8xi32>' must have the targets' element type 'i64'}}
  %0 = tess.cross_entropy %l, %t count_over %all : (tensor<4x16xf32>, tensor<4xi64>, tensor<8xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_c3_count(%l: tensor<4x16xf32>, %t: tensor<4xi64>, %d: tensor<f32>, %all: tensor<3xi64>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: count_over targets of shape [3] have fewer elements than the targets [4]}}
  %0 = tess.cross_entropy_grad %l, %t, %d count_over %all : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>, tensor<3xi64>) -> tensor<4x16xf32>
  return
}

// -----

func.func @layer_norm_grad_c1(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: axis 2 is out of range for rank 2}}
  %0 = tess.layer_norm_grad %x, %dy {axis = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_c2(%x: tensor<2x8xf32>, %g: tensor<4xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: scale must be 'tensor<8xf32>', got 'tensor<4xf32>'}}
  %0:2 = tess.layer_norm_grad %x scale %g, %dy : (tensor<2x8xf32>, tensor<4xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @layer_norm_grad_c3(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+1 {{C3: epsilon must be >= 0, got -1.000000e+00}}
  %0 = tess.layer_norm_grad %x, %dy {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_c4(%x: tensor<2x8xf32>, %dy: tensor<2x8xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: dy 'tensor<2x8xf16>' must have the input's type 'tensor<2x8xf32>'}}
  %0 = tess.layer_norm_grad %x, %dy : (tensor<2x8xf32>, tensor<2x8xf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_c5(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+1 {{C5: expected 3 results (dx, then dscale with a scale, then dbias with bias_grad), got 2}}
  %0:2 = tess.layer_norm_grad %x scale %g, %dy {bias_grad} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @rms_norm_grad_c1(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: axis -3 is out of range for rank 2}}
  %0 = tess.rms_norm_grad %x, %dy {axis = -3 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_grad_c2(%x: tensor<2x8xf32>, %g: tensor<8xf16>, %dy: tensor<2x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: scale must be 'tensor<8xf32>', got 'tensor<8xf16>'}}
  %0:2 = tess.rms_norm_grad %x scale %g, %dy : (tensor<2x8xf32>, tensor<8xf16>, tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf16>)
  return
}

// -----

func.func @rms_norm_grad_c3(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+1 {{C3: epsilon must be >= 0, got -1.000000e+00}}
  %0 = tess.rms_norm_grad %x, %dy {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_grad_c4(%x: tensor<2x8xf32>, %dy: tensor<4x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: dy 'tensor<4x8xf32>' must have the input's type 'tensor<2x8xf32>'}}
  %0 = tess.rms_norm_grad %x, %dy : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_grad_c5(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+1 {{C5: expected 2 results (dx, then dscale with a scale), got 1}}
  %0 = tess.rms_norm_grad %x scale %g, %dy : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_grad_c6(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>, %r: tensor<2x8xbf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C6: residual 'tensor<2x8xbf16>' must have the input's type 'tensor<2x8xf32>'}}
  %0 = tess.layer_norm_grad %x, %dy residual %r : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @rms_norm_grad_c6(%x: tensor<2x8xf32>, %dy: tensor<2x8xf32>, %r: tensor<8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C6: residual 'tensor<8xf32>' must have the input's type 'tensor<2x8xf32>'}}
  %0 = tess.rms_norm_grad %x, %dy residual %r : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax_grad_c1(%y: tensor<2x8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+1 {{C1: axis 2 is out of range for rank 2}}
  %0 = tess.softmax_grad %y, %dy {axis = 2 : i64} : tensor<2x8xf32>
  return
}

// -----

func.func @attention_grad_c3(%q: tensor<2x3x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %dy: tensor<2x3x8x16xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: 3 query heads are not a multiple of 2 key/value heads (at least one)}}
  %0:3 = tess.attention_grad %q, %k, %v, %dy {scale = 1.0 : f64} : (tensor<2x3x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x3x8x16xf32>) -> (tensor<2x3x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

// -----

func.func @attention_grad_c11(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %dy: tensor<2x4x8x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C11: dy 'tensor<2x4x8x8xf32>' must have the attention's result type 'tensor<2x4x8x16xf32>'}}
  %0:3 = tess.attention_grad %q, %k, %v, %dy {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
func.func @embedding_c4(%table: tensor<8x4xf32>, %ids: tensor<2x3xi64>) {
  // expected-error@+1 {{C4: rows_axis 'tp' is not an axis of the mesh #tess.mesh<dp = 2>}}
  %0 = tess.embedding %table, %ids {rows_axis = "tp"} : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return
}
}

// -----

func.func @linear_weight_grad_c1(%x: tensor<2x8x16xf32>, %dy: tensor<2x4x32xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: the input 'tensor<2x8x16xf32>' and dy 'tensor<2x4x32xf32>' must have rank >= 1 and the same leading dims (the rows)}}
  %0 = tess.linear_weight_grad %x, %dy : (tensor<2x8x16xf32>, tensor<2x4x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @linear_weight_grad_c1_rank(%x: tensor<16x16xf32>, %dy: tensor<2x8x32xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: the input 'tensor<16x16xf32>' and dy 'tensor<2x8x32xf32>' must have rank >= 1 and the same leading dims (the rows)}}
  %0 = tess.linear_weight_grad %x, %dy : (tensor<16x16xf32>, tensor<2x8x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @linear_weight_grad_c2(%x: tensor<2x8x16xbf16>, %dy: tensor<2x8x32xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: the input 'tensor<2x8x16xbf16>' and dy 'tensor<2x8x32xf32>' must have one element type}}
  %0 = tess.linear_weight_grad %x, %dy : (tensor<2x8x16xbf16>, tensor<2x8x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @embedding_grad_c3(%ids: tensor<2x3xi64>, %dy: tensor<2x3x4xf32>) {
  // expected-error@+1 {{C3: rows_axis 'dp' needs a module with a tess.mesh attribute}}
  %0 = tess.embedding_grad %ids, %dy {rows_axis = "dp"} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @embedding_grad_c1(%ids: tensor<2x8xi64>, %dy: tensor<2x8x16xf32>) {
  // expected-error@+1 {{C1: the result must be a rank-2 table of 'f32', got 'tensor<100x16xf16>'}}
  %0 = tess.embedding_grad %ids, %dy : (tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf16>
  return
}

// -----

func.func @embedding_grad_c2(%ids: tensor<2x8xi64>, %dy: tensor<2x8x16xf32>) {
  // expected-error@+1 {{C2: dy must have shape [2, 8, 32] (ids, then the row width), got [2, 8, 16]}}
  %0 = tess.embedding_grad %ids, %dy : (tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x32xf32>
  return
}

// -----

func.func @gather_grad_c1(%i: tensor<3xi64>, %dy: tensor<4x3x8xf32>) {
  // expected-error@+1 {{C1: axis 3 is out of range for rank 3}}
  %0 = tess.gather_grad %i, %dy {axis = 3 : i64} : (tensor<3xi64>, tensor<4x3x8xf32>) -> tensor<4x10x8xf32>
  return
}

// -----

func.func @gather_grad_c2(%i: tensor<3xi64>, %dy: tensor<4x3x8xf32>) {
  // expected-error@+1 {{C2: dy must be 'tensor<3x10x8xf32>', got 'tensor<4x3x8xf32>'}}
  %0 = tess.gather_grad %i, %dy {axis = 0 : i64} : (tensor<3xi64>, tensor<4x3x8xf32>) -> tensor<4x10x8xf32>
  return
}

// -----

func.func @slice_grad_c1(%dy: tensor<2x4xf32>) {
  // expected-error@+1 {{C1: dy, starts and strides need the result's rank 2 and dy its element type}}
  %0 = tess.slice_grad %dy {starts = array<i64: 0>, strides = array<i64: 1, 1>} : (tensor<2x4xf32>) -> tensor<3x12xf32>
  return
}

// -----

func.func @slice_grad_c2(%dy: tensor<2x4xf32>) {
  // expected-error@+1 {{C2: dim 1 needs start >= 0 and stride >= 1}}
  %0 = tess.slice_grad %dy {starts = array<i64: 0, 0>, strides = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<3x12xf32>
  return
}

// -----

func.func @slice_grad_c3(%dy: tensor<2x4xf32>) {
  // expected-error@+1 {{C3: dim 1: 4 elements from 3 by 3 do not fit in 12}}
  %0 = tess.slice_grad %dy {starts = array<i64: 0, 3>, strides = array<i64: 1, 3>} : (tensor<2x4xf32>) -> tensor<3x12xf32>
  return
}

// -----

func.func @adamw_c1(%p: tensor<4x8xf32>, %g: tensor<8x4xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>) {
  // expected-error@+1 {{C1: grad, m and v must have the parameter's shape [4, 8], got [8, 4]}}
  %0:3 = tess.adamw %p, %g, %m, %v, %lr, %step, %s : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @adamw_c2(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<f32>, %s: tensor<f32>) {
  // expected-error@+1 {{operand #5 must be 0D tensor of 64-bit signless integer values}}
  %0:3 = tess.adamw %p, %g, %m, %v, %lr, %step, %s : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @adamw_c3(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>) {
  // expected-error@+1 {{C3: beta1 and beta2 must be in [0, 1), got 1.000000e+00}}
  %0:3 = tess.adamw %p, %g, %m, %v, %lr, %step, %s {beta2 = 1.0 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @adamw_c4(%p: tensor<4x8xf32>, %g: tensor<4x8xf32>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<i64>, %s: tensor<f32>) {
  // expected-error@+1 {{C4: epsilon must be positive and weight_decay >= 0, got 0.000000e+00 and 1.000000e-02}}
  %0:3 = tess.adamw %p, %g, %m, %v, %lr, %step, %s {epsilon = 0.0 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @rotary_c1(%x: tensor<2x4x7xf32>, %c: tensor<1x4x7xf32>) {
  // expected-error@+1 {{C1: the last dim of 'tensor<2x4x7xf32>' must be even and at least 2}}
  %0 = tess.rotary %x, %c, %c : (tensor<2x4x7xf32>, tensor<1x4x7xf32>, tensor<1x4x7xf32>) -> tensor<2x4x7xf32>
  return
}

// -----

func.func @rotary_c2(%x: tensor<2x4x8xf32>, %c: tensor<1x4x8xf32>, %s: tensor<1x3x8xf32>) {
  // expected-error@+1 {{C2: 'tensor<1x3x8xf32>' does not broadcast to 'tensor<2x4x8xf32>'}}
  %0 = tess.rotary %x, %c, %s : (tensor<2x4x8xf32>, tensor<1x4x8xf32>, tensor<1x3x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @rotary_c2_rank(%x: tensor<2x4x8xf32>, %c: tensor<4x8xf32>) {
  // expected-error@+1 {{C2: 'tensor<4x8xf32>' does not broadcast to 'tensor<2x4x8xf32>'}}
  %0 = tess.rotary %x, %c, %c : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @rotary_c3(%x: tensor<2x4x8xf32>, %c: tensor<1x4x8xf32>) {
  // expected-error@+1 {{C3: the result type 'tensor<2x4x8xbf16>' is not the input's 'tensor<2x4x8xf32>'}}
  %0 = tess.rotary %x, %c, %c : (tensor<2x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xbf16>
  return
}

// -----

func.func @rotary_c4_too_many(%x: tensor<2x4x8xf32>, %c: tensor<1x4x8xf32>) {
  // expected-error@+1 {{C4: rotated_heads 5 must be 0 or in [1, dim(-2)] of 'tensor<2x4x8xf32>'}}
  %0 = tess.rotary %x, %c, %c {rotated_heads = 5 : i64} : (tensor<2x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @rotary_c4_negative(%x: tensor<2x4x8xf32>, %c: tensor<1x4x8xf32>) {
  // expected-error@+1 {{C4: rotated_heads -1 must be 0 or in [1, dim(-2)] of 'tensor<2x4x8xf32>'}}
  %0 = tess.rotary %x, %c, %c {rotated_heads = -1 : i64} : (tensor<2x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @rotary_c4_rank(%x: tensor<8xf32>, %c: tensor<8xf32>) {
  // expected-error@+1 {{C4: rotated_heads 1 must be 0 or in [1, dim(-2)] of 'tensor<8xf32>'}}
  %0 = tess.rotary %x, %c, %c {rotated_heads = 1 : i64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// The fused ops (TessFusedOps.td): the rules of the ops they fuse, then the
// rule that ties the pair.

func.func @linear_add_c3(%x: tensor<2x8xf32>, %w: tensor<4x4xf32>, %r: tensor<2x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: input features 8 != weight's 4}}
  %0 = tess.linear_add %x, %w add %r : (tensor<2x8xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_add_c4(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>, %r: tensor<2x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: bias must be [4] of 'f32'}}
  %0 = tess.linear_add %x, %w, %b add %r : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32>, tensor<8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_add_c5(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %r: tensor<2x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C5: addend 'tensor<2x8xf32>' must have the product's type 'tensor<2x4xf32>'}}
  %0 = tess.linear_add %x, %w add %r : (tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_gelu_c2(%x: tensor<2x8xf32>, %w: tensor<8x4xf16>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: input and weight have different element types}}
  %0:2 = tess.linear_gelu %x, %w : (tensor<2x8xf32>, tensor<8x4xf16>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @linear_gelu_results(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{'tess.linear_gelu' op inferred type(s) 'tensor<2x4xf32>', 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>', 'tensor<2x8xf32>'}}
  %0:2 = tess.linear_gelu %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> (tensor<2x4xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @linear_gelu_grad_c1(%dy: tensor<2x4xf32>, %w: tensor<4xf32>, %pre: tensor<2x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: input must have rank >= 1 and weight rank 2}}
  %0 = tess.linear_gelu_grad %dy, %w, %pre : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_gelu_grad_c4(%dy: tensor<2x4xf32>, %w: tensor<16x4xf32>, %pre: tensor<2x4xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C4: preactivation 'tensor<2x4xf32>' must have the product's type 'tensor<2x16xf32>'}}
  %0 = tess.linear_gelu_grad %dy, %w, %pre {transpose_weight} : (tensor<2x4xf32>, tensor<16x4xf32>, tensor<2x4xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @matmul_add_c3(%a: tensor<4x8xf32>, %b: tensor<4x6xf32>, %c: tensor<4x6xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: contracted dims differ: 8 vs 4}}
  %0 = tess.matmul_add %a, %b, %c : (tensor<4x8xf32>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @matmul_add_c5(%a: tensor<4x8xf32>, %b: tensor<4x6xf32>, %c: tensor<6x8xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C5: addend 'tensor<6x8xf32>' must have the product's type 'tensor<8x6xf32>'}}
  %0 = tess.matmul_add %a, %b, %c {transpose_lhs} : (tensor<4x8xf32>, tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<8x6xf32>
  return
}

// -----

func.func @matmul_bias_grad_c1(%a: tensor<2x4x8xf32>, %b: tensor<2x4x6xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C1: operands must have rank 2}}
  %0:2 = tess.matmul_bias_grad %a, %b {transpose_lhs} : (tensor<2x4x8xf32>, tensor<2x4x6xf32>) -> (tensor<2x8x6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @matmul_bias_grad_c3(%a: tensor<5x8xf32>, %b: tensor<4x6xf32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: contracted dims differ: 5 vs 4}}
  %0:2 = tess.matmul_bias_grad %a, %b {transpose_lhs} : (tensor<5x8xf32>, tensor<4x6xf32>) -> (tensor<8x6xf32>, tensor<6xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_c2(%logits: tensor<4x10xf32>, %t: tensor<5xi64>, %d: tensor<f32>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C2: targets of shape [5] do not match the logits' rows [4]}}
  %0:2 = tess.cross_entropy_with_grad %logits, %t, %d : (tensor<4x10xf32>, tensor<5xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_c3(%logits: tensor<4x10xf32>, %t: tensor<4xi64>, %d: tensor<f32>, %all: tensor<2xi64>) {
  // expected-error@+2 {{failed to infer returned types}}
  // expected-error@+1 {{C3: count_over targets of shape [2] have fewer elements than the targets [4]}}
  %0:2 = tess.cross_entropy_with_grad %logits, %t, %d count_over %all : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>, tensor<2xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @packed_swiglu_c1(%gu: tensor<2x8x95xf32>) {
  // expected-error@+1 {{C1: the last dim of 'tensor<2x8x95xf32>' must be static and even}}
  %0 = tess.packed_swiglu %gu : (tensor<2x8x95xf32>) -> tensor<2x8x47xf32>
  return
}

// -----

func.func @packed_swiglu_c1_dynamic(%gu: tensor<2x?xf32>) {
  // expected-error@+1 {{C1: the last dim of 'tensor<2x?xf32>' must be static and even}}
  %0 = tess.packed_swiglu %gu : (tensor<2x?xf32>) -> tensor<2x?xf32>
  return
}

// -----

func.func @packed_swiglu_c2(%gu: tensor<2x8x96xf32>) {
  // expected-error@+1 {{C2: the result 'tensor<2x8x96xf32>' must be 'tensor<2x8x48xf32>': the input's type with the last dim halved}}
  %0 = tess.packed_swiglu %gu : (tensor<2x8x96xf32>) -> tensor<2x8x96xf32>
  return
}

// -----

func.func @packed_swiglu_c2_element_type(%gu: tensor<2x8x96xf32>) {
  // expected-error@+1 {{C2: the result 'tensor<2x8x48xbf16>' must be 'tensor<2x8x48xf32>'}}
  %0 = tess.packed_swiglu %gu : (tensor<2x8x96xf32>) -> tensor<2x8x48xbf16>
  return
}

// -----

func.func @packed_swiglu_grad_c1(%gu: tensor<2x7xf32>, %dy: tensor<2x3xf32>) {
  // expected-error@+1 {{C1: the last dim of 'tensor<2x7xf32>' must be static and even}}
  %0 = tess.packed_swiglu_grad %gu, %dy : (tensor<2x7xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
  return
}

// -----

func.func @packed_swiglu_grad_c2(%gu: tensor<2x8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error@+1 {{C2: dy 'tensor<2x8xf32>' must be 'tensor<2x4xf32>': the input's type with the last dim halved}}
  %0 = tess.packed_swiglu_grad %gu, %dy : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @packed_swiglu_grad_c3(%gu: tensor<2x8xf32>, %dy: tensor<2x4xf32>) {
  // expected-error@+1 {{C3: the result type 'tensor<2x4xf32>' is not the input's 'tensor<2x8xf32>'}}
  %0 = tess.packed_swiglu_grad %gu, %dy : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}
