// RUN: tessera-opt %s -canonicalize -split-input-file | FileCheck %s

// The folds that remove ops doing nothing, and the canonicalization patterns
// of the tess dialect, each with the case it must leave alone. Evaluation of
// ops on constants is in constant-folding.mlir.

// Tests that a double negation cancels and a single one stays.
// CHECK-LABEL: func.func @neg_neg
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[N:.*]] = tess.neg %[[X]]
// CHECK-NEXT: return %[[X]], %[[N]]
func.func @neg_neg(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = tess.neg %x : tensor<4xf32>
  %1 = tess.neg %0 : tensor<4xf32>
  return %1, %0 : tensor<4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @logical_not_not
// CHECK-SAME: (%[[M:.*]]: tensor<4xi1>)
// CHECK-NEXT: %[[N:.*]] = tess.logical_not %[[M]]
// CHECK-NEXT: return %[[M]], %[[N]]
func.func @logical_not_not(%m: tensor<4xi1>) -> (tensor<4xi1>, tensor<4xi1>) {
  %0 = tess.logical_not %m : tensor<4xi1>
  %1 = tess.logical_not %0 : tensor<4xi1>
  return %1, %0 : tensor<4xi1>, tensor<4xi1>
}

// -----

// Tests that adding zero on either side is the identity, but not where the
// zero broadcasts the other operand to a larger shape.
// CHECK-LABEL: func.func @add_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[I:.*]]: tensor<4xi32>)
// CHECK-DAG: %[[ZERO:.*]] = tess.constant dense<0.000000e+00> : tensor<2x4xf32>
// CHECK-DAG: %[[B:.*]] = tess.add %[[X]], %[[ZERO]] : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK: return %[[X]], %[[X]], %[[I]], %[[B]]
func.func @add_zero(%x: tensor<4xf32>, %i: tensor<4xi32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<2x4xf32>) {
  %zero = tess.constant dense<0.0> : tensor<f32>
  %izero = tess.constant dense<0> : tensor<4xi32>
  %zero2 = tess.constant dense<0.0> : tensor<2x4xf32>
  %0 = tess.add %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = tess.add %zero, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = tess.add %izero, %i : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %3 = tess.add %x, %zero2 : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<2x4xf32>
}

// -----

// Tests that x - 0 is x, and 0 - x is not.
// CHECK-LABEL: func.func @sub_zero
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[ZERO:.*]] = tess.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[R:.*]] = tess.sub %[[ZERO]], %[[X]]
// CHECK: return %[[X]], %[[R]]
func.func @sub_zero(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = tess.constant dense<0.0> : tensor<f32>
  %0 = tess.sub %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = tess.sub %zero, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that multiplying by one on either side is the identity, and by two
// is not.
// CHECK-LABEL: func.func @mul_one
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[TWO:.*]] = tess.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[R:.*]] = tess.mul %[[X]], %[[TWO]]
// CHECK: return %[[X]], %[[X]], %[[R]]
func.func @mul_one(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %one = tess.constant dense<1.0> : tensor<f32>
  %two = tess.constant dense<2.0> : tensor<f32>
  %0 = tess.mul %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = tess.mul %one, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = tess.mul %two, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that x / 1 is x, and 1 / x is not.
// CHECK-LABEL: func.func @div_one
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[ONE:.*]] = tess.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[R:.*]] = tess.div %[[ONE]], %[[X]]
// CHECK: return %[[X]], %[[R]]
func.func @div_one(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %one = tess.constant dense<1.0> : tensor<f32>
  %0 = tess.div %x, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = tess.div %one, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that an idempotent op of one value with itself is that value.
// CHECK-LABEL: func.func @idempotent
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>, %[[M:.*]]: tensor<4xi1>)
// CHECK-NEXT: %[[MAX:.*]] = tess.maximum %[[X]], %[[Y]]
// CHECK-NEXT: return %[[X]], %[[X]], %[[M]], %[[M]], %[[MAX]]
func.func @idempotent(%x: tensor<4xf32>, %y: tensor<4xf32>, %m: tensor<4xi1>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>) {
  %0 = tess.maximum %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = tess.minimum %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = tess.logical_and %m, %m : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %3 = tess.logical_or %m, %m : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %4 = tess.maximum %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3, %4 : tensor<4xf32>, tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xf32>
}

// -----

// Tests that a where with a constant condition picks its branch, and one
// whose branches are the same value is that value; a branch that would need
// a broadcast stays a where.
// CHECK-LABEL: func.func @where_select
// CHECK-SAME: (%[[C:.*]]: tensor<4xi1>, %[[A:.*]]: tensor<4xf32>, %[[B:.*]]: tensor<4xf32>, %[[S:.*]]: tensor<f32>)
// CHECK: %[[W:.*]] = tess.where %{{.*}}, %[[S]], %[[A]]
// CHECK: return %[[A]], %[[B]], %[[A]], %[[W]]
func.func @where_select(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>, %s: tensor<f32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %true = tess.constant dense<true> : tensor<i1>
  %false = tess.constant dense<false> : tensor<4xi1>
  %0 = tess.where %true, %a, %b : (tensor<i1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = tess.where %false, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = tess.where %c, %a, %a : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = tess.where %true, %s, %a : (tensor<i1>, tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that a cast to the same type disappears, and a round trip through a
// type that holds every value exactly cancels.
// CHECK-LABEL: func.func @cast_lossless
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[H:.*]]: tensor<4xf16>, %[[I:.*]]: tensor<4xi32>, %[[M:.*]]: tensor<4xi1>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[H]], %[[I]], %[[M]]
func.func @cast_lossless(%x: tensor<4xf32>, %h: tensor<4xf16>, %i: tensor<4xi32>, %m: tensor<4xi1>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xi32>, tensor<4xi1>) {
  %0 = tess.cast %x : tensor<4xf32> to tensor<4xf32>
  %1 = tess.cast %x : tensor<4xf32> to tensor<4xf64>
  %2 = tess.cast %1 : tensor<4xf64> to tensor<4xf32>
  %3 = tess.cast %h : tensor<4xf16> to tensor<4xf32>
  %4 = tess.cast %3 : tensor<4xf32> to tensor<4xf16>
  %5 = tess.cast %i : tensor<4xi32> to tensor<4xi64>
  %6 = tess.cast %5 : tensor<4xi64> to tensor<4xi32>
  %7 = tess.cast %m : tensor<4xi1> to tensor<4xi8>
  %8 = tess.cast %7 : tensor<4xi8> to tensor<4xi1>
  return %0, %2, %4, %6, %8 : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xi32>, tensor<4xi1>
}

// -----

// Tests that round trips which lose values stay: bf16 has fewer bits of
// precision than f32; f16 has more precision than bf16 but not its exponent
// range (bf16 1e30 is f16 infinity); i32 drops the high bits of i64; a float
// to integer and back drops the fraction.
// CHECK-LABEL: func.func @cast_lossy
// CHECK-COUNT-8: tess.cast
// CHECK-NOT: tess.cast
func.func @cast_lossy(%x: tensor<4xf32>, %b: tensor<4xbf16>, %i: tensor<4xi64>)
    -> (tensor<4xf32>, tensor<4xbf16>, tensor<4xi64>, tensor<4xf32>) {
  %0 = tess.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = tess.cast %0 : tensor<4xbf16> to tensor<4xf32>
  %2 = tess.cast %b : tensor<4xbf16> to tensor<4xf16>
  %3 = tess.cast %2 : tensor<4xf16> to tensor<4xbf16>
  %4 = tess.cast %i : tensor<4xi64> to tensor<4xi32>
  %5 = tess.cast %4 : tensor<4xi32> to tensor<4xi64>
  %6 = tess.cast %x : tensor<4xf32> to tensor<4xi64>
  %7 = tess.cast %6 : tensor<4xi64> to tensor<4xf32>
  return %1, %3, %5, %7 : tensor<4xf32>, tensor<4xbf16>, tensor<4xi64>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.*]] = tess.reshape %[[X]] : (tensor<2x3x4xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: return %[[X]], %[[R]]
func.func @reshape(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x6xf32>) {
  %0 = tess.reshape %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = tess.reshape %x : (tensor<2x3x4xf32>) -> tensor<24xf32>
  %2 = tess.reshape %1 : (tensor<24xf32>) -> tensor<4x6xf32>
  return %0, %2 : tensor<2x3x4xf32>, tensor<4x6xf32>
}

// -----

// Tests that transposes compose, that the identity permutation disappears,
// and that a chain composing to the identity disappears with it.
// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = tess.transpose %[[X]] {permutation = array<i64: 2, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK-NEXT: return %[[X]], %[[T]], %[[X]]
func.func @transpose(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x3x2xf32>, tensor<2x3x4xf32>) {
  %0 = tess.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = tess.transpose %x {permutation = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %2 = tess.transpose %1 {permutation = array<i64: 1, 0, 2>} : (tensor<3x4x2xf32>) -> tensor<4x3x2xf32>
  %3 = tess.transpose %1 {permutation = array<i64: 2, 0, 1>} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  return %0, %2, %3 : tensor<2x3x4xf32>, tensor<4x3x2xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that a transpose of a matmul operand's two inner dims becomes the
// matmul's flag (clearing a flag already set), and that other transposes
// stay.
// CHECK-LABEL: func.func @matmul_transpose
// CHECK-SAME: (%[[A:.*]]: tensor<2x8x4xf32>, %[[B:.*]]: tensor<2x8x4xf32>, %[[C:.*]]: tensor<8x2x4xf32>)
// CHECK: %[[M0:.*]] = tess.matmul %[[A]], %[[B]] {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[M1:.*]] = tess.matmul %[[A]], %[[B]] {transpose_lhs} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[T:.*]] = tess.transpose %[[C]] {permutation = array<i64: 1, 0, 2>}
// CHECK: %[[M2:.*]] = tess.matmul %[[T]], %[[B]] {transpose_rhs}
// CHECK: return %[[M0]], %[[M1]], %[[M2]]
func.func @matmul_transpose(%a: tensor<2x8x4xf32>, %b: tensor<2x8x4xf32>, %c: tensor<8x2x4xf32>)
    -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x8x8xf32>) {
  %at = tess.transpose %a {permutation = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %0 = tess.matmul %at, %b : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  %bt = tess.transpose %b {permutation = array<i64: 0, 2, 1>} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
  %1 = tess.matmul %at, %bt {transpose_rhs} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %ct = tess.transpose %c {permutation = array<i64: 1, 0, 2>} : (tensor<8x2x4xf32>) -> tensor<2x8x4xf32>
  %2 = tess.matmul %ct, %b {transpose_rhs} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x8xf32>
  return %0, %1, %2 : tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<1x4xf32>)
// CHECK-NEXT: %[[B:.*]] = tess.broadcast %[[X]] : (tensor<1x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: return %[[X]], %[[B]]
func.func @broadcast(%x: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<2x3x4xf32>) {
  %0 = tess.broadcast %x : (tensor<1x4xf32>) -> tensor<1x4xf32>
  %1 = tess.broadcast %x : (tensor<1x4xf32>) -> tensor<3x4xf32>
  %2 = tess.broadcast %1 : (tensor<3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %2 : tensor<1x4xf32>, tensor<2x3x4xf32>
}

// -----

// Tests that a slice of the whole tensor disappears and a strict window
// stays.
// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[S:.*]] = tess.slice %[[X]]
// CHECK-NEXT: return %[[X]], %[[S]]
func.func @slice(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x2xf32>) {
  %0 = tess.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, strides = array<i64: 1, 1>}
    : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = tess.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, strides = array<i64: 1, 2>}
    : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x2xf32>
}

// -----

// CHECK-LABEL: func.func @split_concat_single
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[S:.*]]:2 = tess.split %[[X]]
// CHECK-NEXT: return %[[X]], %[[X]], %[[S]]#0
func.func @split_concat_single(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x1xf32>) {
  %0 = tess.split %x {axis = 1 : i64, sizes = array<i64: 3>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = tess.concat %x {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2:2 = tess.split %x {axis = 1 : i64, sizes = array<i64: 1, 2>} : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
  return %0, %1, %2#0 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x1xf32>
}

// -----

// Tests that concatenating every piece of a split, in order and along the
// split's axis, is the split's input, and that another order, another axis
// or a missing piece keeps the concat.
// CHECK-LABEL: func.func @concat_of_split
// CHECK-SAME: (%[[X:.*]]: tensor<2x6xf32>)
// CHECK: %[[S:.*]]:3 = tess.split %[[X]]
// CHECK: %[[SWAP:.*]] = tess.concat %[[S]]#1, %[[S]]#0, %[[S]]#2 {axis = 1 : i64}
// CHECK: %[[ROWS:.*]] = tess.concat %[[S]]#0, %[[S]]#1, %[[S]]#2 {axis = 0 : i64}
// CHECK: %[[PART:.*]] = tess.concat %[[S]]#0, %[[S]]#1 {axis = 1 : i64}
// CHECK: return %[[X]], %[[SWAP]], %[[ROWS]], %[[PART]]
func.func @concat_of_split(%x: tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x6xf32>, tensor<6x2xf32>, tensor<2x4xf32>) {
  %s:3 = tess.split %x {axis = -1 : i64, sizes = array<i64: 2, 2, 2>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
  %0 = tess.concat %s#0, %s#1, %s#2 {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  %1 = tess.concat %s#1, %s#0, %s#2 {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  %2 = tess.concat %s#0, %s#1, %s#2 {axis = 0 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<6x2xf32>
  %3 = tess.concat %s#0, %s#1 {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3 : tensor<2x6xf32>, tensor<2x6xf32>, tensor<6x2xf32>, tensor<2x4xf32>
}

// -----

// Tests that a reduction over no dims, or over kept dims of size 1, is the
// identity, and that dropping a size-1 dim is not.
// CHECK-LABEL: func.func @reduce_identity
// CHECK-SAME: (%[[X:.*]]: tensor<2x1x4xf32>)
// CHECK-NEXT: %[[R:.*]] = tess.reduce_min %[[X]] {dims = array<i64: 1>} : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[R]]
func.func @reduce_identity(%x: tensor<2x1x4xf32>)
    -> (tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x4xf32>) {
  %0 = tess.reduce_sum %x {dims = array<i64>} : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %1 = tess.reduce_mean %x {dims = array<i64: 1>, keep_dims} : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %2 = tess.reduce_max %x {dims = array<i64: -2>, keep_dims} : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %3 = tess.reduce_min %x {dims = array<i64>, keep_dims} : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %4 = tess.reduce_min %x {dims = array<i64: 1>} : (tensor<2x1x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3, %4 : tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x1x4xf32>, tensor<2x4xf32>
}
