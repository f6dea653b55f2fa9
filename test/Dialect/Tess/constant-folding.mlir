// RUN: tessera-opt %s -canonicalize -split-input-file | FileCheck %s

// Evaluation of tess ops on constants. Floats of at most 32 bits compute in
// fp32 and round once to their type; integers are two's complement, signed
// except i1. Results over 4096 elements are left alone unless they are
// splats.

// CHECK-LABEL: func.func @add
// CHECK-DAG: %[[F:.*]] = tess.constant dense<{{\[}}[1.100000e+01, 2.200000e+01], [1.300000e+01, 2.400000e+01]]> : tensor<2x2xf32>
// CHECK-DAG: %[[S:.*]] = tess.constant dense<5.000000e+00> : tensor<8x8xf32>
// CHECK-DAG: %[[I:.*]] = tess.constant dense<[-2147483648, 3]> : tensor<2xi32>
// CHECK: return %[[F]], %[[S]], %[[I]]
func.func @add() -> (tensor<2x2xf32>, tensor<8x8xf32>, tensor<2xi32>) {
  %a = tess.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = tess.constant dense<[[10.0], [20.0]]> : tensor<2x1xf32>
  %bt = tess.transpose %b {permutation = array<i64: 1, 0>} : (tensor<2x1xf32>) -> tensor<1x2xf32>
  %0 = tess.add %a, %bt : (tensor<2x2xf32>, tensor<1x2xf32>) -> tensor<2x2xf32>
  %two = tess.constant dense<2.0> : tensor<8x1xf32>
  %three = tess.constant dense<3.0> : tensor<8xf32>
  %1 = tess.add %two, %three : (tensor<8x1xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  // Integer addition wraps around.
  %max = tess.constant dense<[2147483647, 1]> : tensor<2xi32>
  %c = tess.constant dense<[1, 2]> : tensor<2xi32>
  %2 = tess.add %max, %c : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  return %0, %1, %2 : tensor<2x2xf32>, tensor<8x8xf32>, tensor<2xi32>
}

// -----

// Tests that 16-bit floats compute in fp32 and round to their own type:
// 1 + 2^-8 is exact in f16 and rounds to 1 (ties to even) in bf16.
// CHECK-LABEL: func.func @add_half_precision
// CHECK-DAG: %[[H:.*]] = tess.constant dense<1.003910e+00> : tensor<2xf16>
// CHECK-DAG: %[[B:.*]] = tess.constant dense<1.000000e+00> : tensor<2xbf16>
// CHECK: return %[[H]], %[[B]]
func.func @add_half_precision() -> (tensor<2xf16>, tensor<2xbf16>) {
  %one_h = tess.constant dense<1.0> : tensor<2xf16>
  %eps_h = tess.constant dense<[0.00390625, 0.00390625]> : tensor<2xf16>
  %0 = tess.add %one_h, %eps_h : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  %one_b = tess.constant dense<[1.0, 1.0]> : tensor<2xbf16>
  %eps_b = tess.constant dense<0.00390625> : tensor<bf16>
  %1 = tess.add %one_b, %eps_b : (tensor<2xbf16>, tensor<bf16>) -> tensor<2xbf16>
  return %0, %1 : tensor<2xf16>, tensor<2xbf16>
}

// -----

// CHECK-LABEL: func.func @sub_mul_div
// CHECK-DAG: tess.constant dense<[-1.000000e+00, 5.000000e-01]> : tensor<2xf32>
// CHECK-DAG: tess.constant dense<[0.000000e+00, -7.500000e+00]> : tensor<2xf32>
// CHECK-DAG: tess.constant dense<[0x7F800000, -1.000000e+00]> : tensor<2xf32>
// CHECK-DAG: tess.constant dense<[7, -3, -2]> : tensor<3xi64>
// CHECK-NOT: tess.sub
// CHECK-NOT: tess.mul
// CHECK-NOT: tess.div
func.func @sub_mul_div() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3xi64>) {
  %a = tess.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %b = tess.constant dense<[3.0, 2.5]> : tensor<2xf32>
  %c = tess.constant dense<[0.0, -2.5]> : tensor<2xf32>
  %0 = tess.sub %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = tess.mul %a, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  // Float division by zero is IEEE's infinity.
  %6 = tess.div %b, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  // Integer division truncates toward zero.
  %i = tess.constant dense<[14, 7, -7]> : tensor<3xi64>
  %j = tess.constant dense<[2, -2, 3]> : tensor<3xi64>
  %7 = tess.div %i, %j : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %0, %1, %6, %7 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3xi64>
}

// -----

// Tests that integer divisions the executable does not define are left to
// it: by zero, and INT_MIN / -1.
// CHECK-LABEL: func.func @div_undefined
// CHECK-COUNT-2: tess.div
func.func @div_undefined() -> (tensor<2xi32>, tensor<i8>) {
  %a = tess.constant dense<[4, 5]> : tensor<2xi32>
  %b = tess.constant dense<[2, 0]> : tensor<2xi32>
  %0 = tess.div %a, %b : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
  %min = tess.constant dense<-128> : tensor<i8>
  %minus_one = tess.constant dense<-1> : tensor<i8>
  %1 = tess.div %min, %minus_one : (tensor<i8>, tensor<i8>) -> tensor<i8>
  return %0, %1 : tensor<2xi32>, tensor<i8>
}

// -----

// CHECK-LABEL: func.func @neg
// CHECK-DAG: tess.constant dense<[-1.500000e+00, 0.000000e+00, -0.000000e+00]> : tensor<3xf32>
// CHECK-DAG: tess.constant dense<[-3, -128]> : tensor<2xi8>
// CHECK-NOT: tess.neg
func.func @neg() -> (tensor<3xf32>, tensor<2xi8>) {
  %a = tess.constant dense<[1.5, -0.0, 0.0]> : tensor<3xf32>
  %0 = tess.neg %a : tensor<3xf32>
  %b = tess.constant dense<[3, -128]> : tensor<2xi8>
  %1 = tess.neg %b : tensor<2xi8>
  return %0, %1 : tensor<3xf32>, tensor<2xi8>
}

// -----

// Tests maximum and minimum, which propagate NaN as ONNX Max and Min do.
// CHECK-LABEL: func.func @maximum_minimum
// CHECK-DAG: tess.constant dense<[2.000000e+00, 0x7FC00000]> : tensor<2xf32>
// CHECK-DAG: tess.constant dense<[1.000000e+00, 0x7FC00000]> : tensor<2xf32>
// CHECK-DAG: tess.constant dense<[3, -1]> : tensor<2xi32>
// CHECK-NOT: tess.maximum
// CHECK-NOT: tess.minimum
func.func @maximum_minimum() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xi32>) {
  %a = tess.constant dense<[1.0, 0x7FC00000]> : tensor<2xf32>
  %b = tess.constant dense<[2.0, 1.0]> : tensor<2xf32>
  %0 = tess.maximum %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = tess.minimum %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %i = tess.constant dense<[3, -5]> : tensor<2xi32>
  %j = tess.constant dense<-1> : tensor<i32>
  %2 = tess.maximum %i, %j : (tensor<2xi32>, tensor<i32>) -> tensor<2xi32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2xf32>, tensor<2xi32>
}

// -----

// Tests comparisons: a NaN is unordered (only `ne` holds), integers are
// signed, and the causal-mask idiom i <= j folds to a triangle.
// CHECK-LABEL: func.func @compare
// CHECK-DAG: %[[LT:.*]] = tess.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: %[[NE:.*]] = tess.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-DAG: %[[GE:.*]] = tess.constant dense<[false, true, true]> : tensor<3xi1>
// CHECK-DAG: %[[TRI:.*]] = tess.constant dense<{{\[}}[true, true, true], [false, true, true], [false, false, true]]> : tensor<3x3xi1>
// CHECK: return %[[LT]], %[[NE]], %[[GE]], %[[TRI]]
func.func @compare() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3x3xi1>) {
  %a = tess.constant dense<[1.0, 2.0, 0x7FC00000]> : tensor<3xf32>
  %b = tess.constant dense<[2.0, 2.0, 1.0]> : tensor<3xf32>
  %0 = tess.compare lt, %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %1 = tess.compare ne, %a, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %i = tess.constant dense<[-1, 0, 1]> : tensor<3xi64>
  %zero = tess.constant dense<0> : tensor<i64>
  %2 = tess.compare ge, %i, %zero : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %rows = tess.constant dense<[[0], [1], [2]]> : tensor<3x1xi64>
  %cols = tess.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  %3 = tess.compare le, %rows, %cols : (tensor<3x1xi64>, tensor<1x3xi64>) -> tensor<3x3xi1>
  return %0, %1, %2, %3 : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3x3xi1>
}

// -----

// CHECK-LABEL: func.func @eq_gt_le
// CHECK-DAG: tess.constant dense<[false, true, false]> : tensor<3xi1>
// CHECK-DAG: tess.constant dense<[false, false, true]> : tensor<3xi1>
// CHECK-DAG: tess.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-NOT: tess.compare
func.func @eq_gt_le() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = tess.constant dense<[1, 2, 3]> : tensor<3xi32>
  %b = tess.constant dense<2> : tensor<i32>
  %0 = tess.compare eq, %a, %b : (tensor<3xi32>, tensor<i32>) -> tensor<3xi1>
  %1 = tess.compare gt, %a, %b : (tensor<3xi32>, tensor<i32>) -> tensor<3xi1>
  %2 = tess.compare le, %a, %b : (tensor<3xi32>, tensor<i32>) -> tensor<3xi1>
  return %0, %1, %2 : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// Tests a where of constants, as the importer's mask arithmetic produces.
// CHECK-LABEL: func.func @where
// CHECK: %[[W:.*]] = tess.constant dense<{{\[}}[0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK: return %[[W]]
func.func @where() -> tensor<2x2xf32> {
  %m = tess.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %zero = tess.constant dense<0.0> : tensor<f32>
  %neg = tess.constant dense<-1.0e9> : tensor<f32>
  %0 = tess.where %m, %zero, %neg : (tensor<2x2xi1>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// CHECK-LABEL: func.func @logical
// CHECK-DAG: tess.constant dense<[false, true, false, false]> : tensor<4xi1>
// CHECK-DAG: tess.constant dense<[false, true, true, true]> : tensor<4xi1>
// CHECK-DAG: tess.constant dense<[true, false, true, false]> : tensor<4xi1>
// CHECK-NOT: tess.logical
func.func @logical() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = tess.constant dense<[false, true, false, true]> : tensor<4xi1>
  %b = tess.constant dense<[false, true, true, false]> : tensor<4xi1>
  %nb = tess.logical_not %b : tensor<4xi1>
  %0 = tess.logical_and %a, %nb : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %and = tess.logical_and %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %1 = tess.logical_or %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %2 = tess.logical_not %a : tensor<4xi1>
  return %and, %1, %2 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// Tests casts of constants: floats round to nearest even, float to integer
// truncates toward zero, integers are signed except i1 (0 or 1), and to i1
// means "not zero".
// CHECK-LABEL: func.func @cast
// CHECK-DAG: tess.constant dense<[1.000000e+00, 1.007810e+00, -2.703130e+00]> : tensor<3xbf16>
// CHECK-DAG: tess.constant dense<[1, 1, -2]> : tensor<3xi32>
// CHECK-DAG: tess.constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-DAG: tess.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-DAG: tess.constant dense<[1, 0]> : tensor<2xi64>
// CHECK-DAG: tess.constant dense<[-1, 127]> : tensor<2xi32>
// CHECK-DAG: tess.constant dense<[-1.000000e+00, 1.270000e+02]> : tensor<2xf64>
// CHECK-DAG: tess.constant dense<[-1, 1]> : tensor<2xi8>
// CHECK-NOT: tess.cast
func.func @cast() -> (tensor<3xbf16>, tensor<3xi32>, tensor<4xi1>, tensor<2xf32>, tensor<2xi64>,
                      tensor<2xi32>, tensor<2xf64>, tensor<2xi8>) {
  %f = tess.constant dense<[1.0, 1.01, -2.7]> : tensor<3xf32>
  %0 = tess.cast %f : tensor<3xf32> to tensor<3xbf16>
  %1 = tess.cast %f : tensor<3xf32> to tensor<3xi32>
  %g = tess.constant dense<[1.0, 0x7FC00000, -0.5, -0.0]> : tensor<4xf32>
  %2 = tess.cast %g : tensor<4xf32> to tensor<4xi1>
  %m = tess.constant dense<[true, false]> : tensor<2xi1>
  %3 = tess.cast %m : tensor<2xi1> to tensor<2xf32>
  %4 = tess.cast %m : tensor<2xi1> to tensor<2xi64>
  %i = tess.constant dense<[-1, 127]> : tensor<2xi8>
  %5 = tess.cast %i : tensor<2xi8> to tensor<2xi32>
  %6 = tess.cast %i : tensor<2xi8> to tensor<2xf64>
  %j = tess.constant dense<[511, 257]> : tensor<2xi64>
  %7 = tess.cast %j : tensor<2xi64> to tensor<2xi8>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<3xbf16>, tensor<3xi32>, tensor<4xi1>, tensor<2xf32>,
                                          tensor<2xi64>, tensor<2xi32>, tensor<2xf64>, tensor<2xi8>
}

// -----

// Tests that a float no integer of the type holds (NaN, out of range) is
// left to the executable.
// CHECK-LABEL: func.func @cast_undefined
// CHECK-COUNT-2: tess.cast
func.func @cast_undefined() -> (tensor<i32>, tensor<i8>) {
  %nan = tess.constant dense<0x7FC00000> : tensor<f32>
  %0 = tess.cast %nan : tensor<f32> to tensor<i32>
  %big = tess.constant dense<300.0> : tensor<f32>
  %1 = tess.cast %big : tensor<f32> to tensor<i8>
  return %0, %1 : tensor<i32>, tensor<i8>
}

// -----

// CHECK-LABEL: func.func @data_movement
// CHECK-DAG: %[[R:.*]] = tess.constant dense<{{\[}}[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>
// CHECK-DAG: %[[T:.*]] = tess.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi32>
// CHECK-DAG: %[[B:.*]] = tess.constant dense<{{\[}}{{\[}}[1, 2, 3]], {{\[}}[1, 2, 3]]]> : tensor<2x1x3xi32>
// CHECK-DAG: %[[S:.*]] = tess.constant dense<{{\[}}[4, 6]]> : tensor<1x2xi32>
// CHECK-DAG: %[[C:.*]] = tess.constant dense<{{\[}}[1, 2, 3, 1, 4], [4, 5, 6, 2, 5]]> : tensor<2x5xi32>
// CHECK: return %[[R]], %[[T]], %[[B]], %[[S]], %[[C]]
func.func @data_movement() -> (tensor<2x3xi32>, tensor<3x2xi32>, tensor<2x1x3xi32>, tensor<1x2xi32>, tensor<2x5xi32>) {
  %flat = tess.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi32>
  %0 = tess.reshape %flat : (tensor<6xi32>) -> tensor<2x3xi32>
  %1 = tess.transpose %0 {permutation = array<i64: 1, 0>} : (tensor<2x3xi32>) -> tensor<3x2xi32>
  %row = tess.slice %0 {starts = array<i64: 0, 0>, limits = array<i64: 1, 3>, strides = array<i64: 1, 1>}
    : (tensor<2x3xi32>) -> tensor<1x3xi32>
  %2 = tess.broadcast %row : (tensor<1x3xi32>) -> tensor<2x1x3xi32>
  %3 = tess.slice %0 {starts = array<i64: 1, 0>, limits = array<i64: 2, 3>, strides = array<i64: 1, 2>}
    : (tensor<2x3xi32>) -> tensor<1x2xi32>
  %cols = tess.slice %1 {starts = array<i64: 0, 0>, limits = array<i64: 2, 2>, strides = array<i64: 1, 1>}
    : (tensor<3x2xi32>) -> tensor<2x2xi32>
  %empty = tess.constant dense<> : tensor<2x0xi32>
  %4 = tess.concat %0, %empty, %cols {axis = 1 : i64}
    : (tensor<2x3xi32>, tensor<2x0xi32>, tensor<2x2xi32>) -> tensor<2x5xi32>
  return %0, %1, %2, %3, %4 : tensor<2x3xi32>, tensor<3x2xi32>, tensor<2x1x3xi32>, tensor<1x2xi32>, tensor<2x5xi32>
}

// -----

// CHECK-LABEL: func.func @split
// CHECK-DAG: %[[A:.*]] = tess.constant dense<{{\[}}[1.000000e+00], [4.000000e+00]]> : tensor<2x1xf32>
// CHECK-DAG: %[[B:.*]] = tess.constant dense<{{\[}}[2.000000e+00, 3.000000e+00], [5.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[S:.*]] = tess.constant dense<7.000000e+00> : tensor<1x3xf32>
// CHECK: return %[[A]], %[[B]], %[[S]], %[[S]]
func.func @split() -> (tensor<2x1xf32>, tensor<2x2xf32>, tensor<1x3xf32>, tensor<1x3xf32>) {
  %x = tess.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %0:2 = tess.split %x {axis = -1 : i64, sizes = array<i64: 1, 2>}
    : (tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<2x2xf32>)
  %seven = tess.constant dense<7.0> : tensor<2x3xf32>
  %1:2 = tess.split %seven {axis = 0 : i64, sizes = array<i64: 1, 1>}
    : (tensor<2x3xf32>) -> (tensor<1x3xf32>, tensor<1x3xf32>)
  return %0#0, %0#1, %1#0, %1#1 : tensor<2x1xf32>, tensor<2x2xf32>, tensor<1x3xf32>, tensor<1x3xf32>
}

// -----

// Tests that results over 4096 elements are not built unless they are
// splats: a splat of any size folds, a broadcast or add that would spell out
// 8192 elements does not.
// CHECK-LABEL: func.func @too_large
// CHECK-DAG: tess.constant dense<3.000000e+00> : tensor<4096x2xf32>
// CHECK-DAG: tess.broadcast
// CHECK-DAG: tess.add
func.func @too_large() -> (tensor<4096x2xf32>, tensor<4096x2xf32>, tensor<4096x2xf32>) {
  %one = tess.constant dense<1.0> : tensor<4096x2xf32>
  %two = tess.constant dense<2.0> : tensor<f32>
  %0 = tess.add %one, %two : (tensor<4096x2xf32>, tensor<f32>) -> tensor<4096x2xf32>
  %pair = tess.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = tess.broadcast %pair : (tensor<2xf32>) -> tensor<4096x2xf32>
  %2 = tess.add %one, %pair : (tensor<4096x2xf32>, tensor<2xf32>) -> tensor<4096x2xf32>
  return %0, %1, %2 : tensor<4096x2xf32>, tensor<4096x2xf32>, tensor<4096x2xf32>
}

// -----

// Tests that a constant that is not spelled out (dense_resource) is left
// alone.
// CHECK-LABEL: func.func @resource
// CHECK: tess.neg
func.func @resource() -> tensor<2xf32> {
  %x = tess.constant dense_resource<blob> : tensor<2xf32>
  %0 = tess.neg %x : tensor<2xf32>
  return %0 : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
