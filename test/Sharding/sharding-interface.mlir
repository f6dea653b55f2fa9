// RUN: tessera-opt %s -split-input-file -tess-print-sharding-labels=mesh=2x2 -o /dev/null | FileCheck %s

// The sharding interface's answer for every tess op kind that has one: the
// labels of each operand and result dim (`-`: kept whole) and their kinds,
// the labels summed into each result, the operand groups the op is linear
// in, the splits the intra-op search offers, and, for operands arriving as
// `tess.arriving` says, the layouts the partition rewrite runs the op in.

// Tests that elementwise ops label every dim alike and offer each result dim
// to the search; neg, cast and swiglu's `up` pass partial sums through; a
// dropout with a rate splits only its dim 0 (streamed); gradients and AdamW are partitioned but
// not searched.
// CHECK: tess.gelu
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [dp, tp] -> results [dp, tp]
// CHECK-NEXT: tess.neg
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [-, -] partial(tp) -> results [-, -] partial(tp)
// CHECK-NEXT: tess.cast
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT: tess.swiglu
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {1}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [-, -] [-, -] partial(tp) -> results [-, -] partial(tp)
// CHECK-NEXT: tess.dropout
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT: tess.dropout
// CHECK-NEXT:   labels: 0 streamed
// CHECK-NEXT:   operand 0: [0, -]
// CHECK-NEXT:   result 0: [0, -]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 = 0
// CHECK-NEXT:   runs in: operands [dp, -] -> results [dp, -]
// CHECK-NEXT: tess.gelu_grad
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {1}
// CHECK-NEXT: tess.silu_grad
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {1}
// CHECK-NEXT: tess.swiglu_grad
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   operand 2: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   result 1: [0, 1]
// CHECK-NEXT:   linear in: {2}
// CHECK-NEXT: tess.adamw
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   operand 2: [0, 1]
// CHECK-NEXT:   operand 3: [0, 1]
// CHECK-NEXT:   operand 4: []
// CHECK-NEXT:   operand 5: []
// CHECK-NEXT:   operand 6: []
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   result 1: [0, 1]
// CHECK-NEXT:   result 2: [0, 1]
func.func @elementwise(%x: tensor<4x8xf32>, %dy: tensor<4x8xf32>, %p: tensor<4x8xbf16>, %m: tensor<4x8xf32>, %lr: tensor<f32>, %step: tensor<i64>, %scale: tensor<f32>) {
  %0 = tess.gelu %x {tess.arriving = [#tess.layout<[dp, tp]>]} : tensor<4x8xf32>
  %1 = tess.neg %x {tess.arriving = [#tess.layout<[-, -] partial(tp)>]} : tensor<4x8xf32>
  %2 = tess.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  %3 = tess.swiglu %x, %dy {tess.arriving = [#tess.layout<[-, -]>, #tess.layout<[-, -] partial(tp)>]} : tensor<4x8xf32>
  %4 = tess.dropout %x {rate = 0.0 : f64} : tensor<4x8xf32>
  %5 = tess.dropout %x {rate = 0.25 : f64, tess.arriving = [#tess.layout<[dp, tp]>]} : tensor<4x8xf32>
  %6 = tess.gelu_grad %x, %dy : tensor<4x8xf32>
  %7 = tess.silu_grad %x, %dy : tensor<4x8xf32>
  %8:2 = tess.swiglu_grad %x, %x, %dy : tensor<4x8xf32>
  %9:3 = tess.adamw %p, %p, %m, %m, %lr, %step, %scale
    : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>)
    -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

// Tests that broadcasting ops share a label only where an operand dim is
// not stretched; add is linear in both terms jointly, mul in each factor,
// div in its numerator, where in its branches.
// CHECK: tess.add
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [-, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0, 1}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [dp, tp] [-, tp] -> results [dp, tp]
// CHECK-NEXT: tess.add
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0, 1}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [-, -] partial(tp) [-, -] partial(tp) -> results [-, -] partial(tp)
// CHECK-NEXT: tess.sub
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: []
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0, 1}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT: tess.mul
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [-, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0} {1}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [-, -] partial(tp) [-, -] -> results [-, -] partial(tp)
// CHECK-NEXT: tess.div
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: []
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT: tess.maximum
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [-, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT: tess.compare
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: []
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT: tess.where
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [1]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   operand 2: []
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {1, 2}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
func.func @broadcasting(%x: tensor<2x8xf32>, %row: tensor<1x8xf32>, %s: tensor<f32>, %b: tensor<8xi1>) {
  %0 = tess.add %x, %row {tess.arriving = [#tess.layout<[dp, tp]>, #tess.layout<[-, tp]>]} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %1 = tess.add %x, %x {tess.arriving = [#tess.layout<[-, -] partial(tp)>, #tess.layout<[-, -] partial(tp)>]} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %2 = tess.sub %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = tess.mul %x, %row {tess.arriving = [#tess.layout<[-, -] partial(tp)>, #tess.layout<[-, -]>]} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %4 = tess.div %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %5 = tess.maximum %x, %row : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  %6 = tess.compare ne, %x, %s : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
  %7 = tess.where %b, %x, %s : (tensor<8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that a linear layer's output features are parallel and its input
// features contracted: column-parallel splits the weight's columns and the
// bias, row-parallel leaves the result and the bias it needs partial sums,
// data-parallel splits the first token dim only; with transpose_weight the
// weight's dims swap. A matmul contracts K and shares only batch dims both
// operands have at full size.
// CHECK: tess.linear
// CHECK-NEXT:   labels: 0 batch, 1 batch, 2 parallel, 3 contracted
// CHECK-NEXT:   operand 0: [0, 1, 3]
// CHECK-NEXT:   operand 1: [3, 2]
// CHECK-NEXT:   operand 2: [2]
// CHECK-NEXT:   result 0: [0, 1, 2] summed [3]
// CHECK-NEXT:   added to the sum: 2
// CHECK-NEXT:   linear in: {0, 2} {1, 2}
// CHECK-NEXT:   splits: column-parallel = 2, row-parallel = 3, data-parallel = 0
// CHECK-NEXT:   runs in: operands [-, -, -] [-, tp] [tp] -> results [-, -, tp]
// CHECK-NEXT: tess.linear
// CHECK-NEXT:   labels: 0 batch, 1 batch, 2 parallel, 3 contracted
// CHECK-NEXT:   operand 0: [0, 1, 3]
// CHECK-NEXT:   operand 1: [3, 2]
// CHECK-NEXT:   operand 2: [2]
// CHECK-NEXT:   result 0: [0, 1, 2] summed [3]
// CHECK-NEXT:   added to the sum: 2
// CHECK-NEXT:   linear in: {0, 2} {1, 2}
// CHECK-NEXT:   splits: column-parallel = 2, row-parallel = 3, data-parallel = 0
// CHECK-NEXT:   runs in: operands [dp, -, tp] [tp, -] [-] partial(tp) -> results [dp, -, -] partial(tp)
// CHECK-NEXT: tess.linear
// CHECK-NEXT:   labels: 0 batch, 1 batch, 2 parallel, 3 contracted
// CHECK-NEXT:   operand 0: [0, 1, 3]
// CHECK-NEXT:   operand 1: [2, 3]
// CHECK-NEXT:   result 0: [0, 1, 2] summed [3]
// CHECK-NEXT:   linear in: {0} {1}
// CHECK-NEXT:   splits: column-parallel = 2, row-parallel = 3, data-parallel = 0
// CHECK-NEXT: tess.matmul
// CHECK-NEXT:   labels: 0 batch, 1 batch, 2 parallel, 3 parallel, 4 contracted
// CHECK-NEXT:   operand 0: [0, 1, 2, 4]
// CHECK-NEXT:   operand 1: [-, 1, 4, 3]
// CHECK-NEXT:   result 0: [0, 1, 2, 3] summed [4]
// CHECK-NEXT:   linear in: {0} {1}
// CHECK-NEXT:   splits: split M = 2, split N = 3, split K = 4, split batch dim 1 = 1
// CHECK-NEXT:   runs in: operands [-, tp, -, dp] [-, tp, dp, -] -> results [-, tp, -, -] partial(dp)
// CHECK-NEXT: tess.matmul
// CHECK-NEXT:   labels: 0 batch, 1 batch, 2 parallel, 3 parallel, 4 contracted
// CHECK-NEXT:   operand 0: [0, 1, 4, 2]
// CHECK-NEXT:   operand 1: [-, 1, 3, 4]
// CHECK-NEXT:   result 0: [0, 1, 2, 3] summed [4]
// CHECK-NEXT:   linear in: {0} {1}
// CHECK-NEXT:   splits: split M = 2, split N = 3, split K = 4, split batch dim 1 = 1
func.func @gemm(%x: tensor<8x32x64xf32>, %w: tensor<64x128xf32>, %wt: tensor<128x64xf32>, %b: tensor<128xf32>, %q: tensor<2x4x32x16xf32>, %k: tensor<1x4x16x32xf32>) {
  %0 = tess.linear %x, %w, %b {tess.arriving = [#tess.layout<[-, -, -]>, #tess.layout<[-, tp]>, #tess.layout<[tp]>]} : (tensor<8x32x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<8x32x128xf32>
  %1 = tess.linear %x, %w, %b {tess.arriving = [#tess.layout<[dp, -, tp]>, #tess.layout<[tp, -]>, #tess.layout<[-]>]} : (tensor<8x32x64xf32>, tensor<64x128xf32>, tensor<128xf32>) -> tensor<8x32x128xf32>
  %2 = tess.linear %x, %wt {transpose_weight} : (tensor<8x32x64xf32>, tensor<128x64xf32>) -> tensor<8x32x128xf32>
  %3 = tess.matmul %q, %k {tess.arriving = [#tess.layout<[-, tp, -, dp]>, #tess.layout<[-, tp, dp, -]>]} : (tensor<2x4x32x16xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x32x32xf32>
  %4 = tess.matmul %q, %k {transpose_lhs, transpose_rhs} : (tensor<2x4x32x16xf32>, tensor<1x4x16x32xf32>) -> tensor<2x4x16x16xf32>
  return
}

// -----

// Tests that a linear's weight gradient sums every row dim of both operands
// into its result: a split of the tokens (a sequence split, over tp here)
// is a partial sum as the samples' (over dp) is, never a gather; its
// features are the result's dims (swapped with transpose_weight). A
// gradient: partitioned, not searched.
// CHECK: tess.linear_weight_grad
// CHECK-NEXT:   labels: 0 reduced, 1 reduced, 2 parallel, 3 parallel
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   operand 1: [0, 1, 3]
// CHECK-NEXT:   result 0: [2, 3] summed [0, 1]
// CHECK-NEXT:   linear in: {0} {1}
// CHECK-NEXT:   runs in: operands [dp, tp, -] [dp, tp, -] -> results [-, -] partial(dp, tp)
// CHECK-NEXT: tess.linear_weight_grad
// CHECK-NEXT:   labels: 0 reduced, 1 reduced, 2 parallel, 3 parallel
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   operand 1: [0, 1, 3]
// CHECK-NEXT:   result 0: [3, 2] summed [0, 1]
// CHECK-NEXT:   linear in: {0} {1}
// CHECK-NEXT:   runs in: operands [dp, -, tp] [dp, -, -] -> results [-, tp] partial(dp)
func.func @linear_weight_grad(%x: tensor<8x32x64xf32>, %dy: tensor<8x32x128xf32>) {
  %0 = tess.linear_weight_grad %x, %dy {tess.arriving = [#tess.layout<[dp, tp, -]>, #tess.layout<[dp, tp, -]>]} : (tensor<8x32x64xf32>, tensor<8x32x128xf32>) -> tensor<64x128xf32>
  %1 = tess.linear_weight_grad %x, %dy {transpose_weight, tess.arriving = [#tess.layout<[-, -, tp]>, #tess.layout<[dp, -, -]>]} : (tensor<8x32x64xf32>, tensor<8x32x128xf32>) -> tensor<128x64xf32>
  return
}

// -----

// Tests that norms, softmax and rotary keep the dims they normalize or pair
// whole (the scale and bias too); a norm's gradient sums its leading dims
// into the scale and bias gradients.
// CHECK: tess.layer_norm
// CHECK-NEXT:   labels: 0 batch, 1 batch
// CHECK-NEXT:   operand 0: [0, 1, -]
// CHECK-NEXT:   operand 1: [-]
// CHECK-NEXT:   operand 2: [-]
// CHECK-NEXT:   result 0: [0, 1, -]
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT:   runs in: operands [dp, -, -] [-] [-] -> results [dp, -, -]
// CHECK-NEXT: tess.rms_norm
// CHECK-NEXT:   labels: 0 batch
// CHECK-NEXT:   operand 0: [0, -, -]
// CHECK-NEXT:   result 0: [0, -, -]
// CHECK-NEXT:   splits: split dim 0 = 0
// CHECK-NEXT: tess.softmax
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, -, 1]
// CHECK-NEXT:   result 0: [0, -, 1]
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 2 = 1
// CHECK-NEXT: tess.softmax_grad
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, -, 1]
// CHECK-NEXT:   operand 1: [0, -, 1]
// CHECK-NEXT:   result 0: [0, -, 1]
// CHECK-NEXT:   linear in: {1}
// CHECK-NEXT: tess.rotary
// CHECK-NEXT:   labels: 0 batch, 1 batch
// CHECK-NEXT:   operand 0: [0, 1, -, -]
// CHECK-NEXT:   operand 1: [-, -, -, -]
// CHECK-NEXT:   operand 2: [-, -, -, -]
// CHECK-NEXT:   result 0: [0, 1, -, -]
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1
// CHECK-NEXT: tess.layer_norm_grad
// CHECK-NEXT:   labels: 0 batch, 1 batch
// CHECK-NEXT:   operand 0: [0, 1, -]
// CHECK-NEXT:   operand 1: [-]
// CHECK-NEXT:   operand 2: [0, 1, -]
// CHECK-NEXT:   result 0: [0, 1, -]
// CHECK-NEXT:   result 1: [-] summed [0, 1]
// CHECK-NEXT:   result 2: [-] summed [0, 1]
// CHECK-NEXT: tess.rms_norm_grad
// CHECK-NEXT:   labels: 0 batch, 1 batch
// CHECK-NEXT:   operand 0: [0, 1, -]
// CHECK-NEXT:   operand 1: [-]
// CHECK-NEXT:   operand 2: [0, 1, -]
// CHECK-NEXT:   result 0: [0, 1, -]
// CHECK-NEXT:   result 1: [-] summed [0, 1]
func.func @norms(%x: tensor<2x32x64xf32>, %g: tensor<64xf32>, %r: tensor<2x4x8x16xf32>, %c: tensor<1x1x8x16xf32>, %y: tensor<2x4x8xf32>, %h: tensor<8xf32>, %dy: tensor<2x4x8xf32>) {
  %0 = tess.layer_norm %x scale %g bias %g {tess.arriving = [#tess.layout<[dp, -, -]>, #tess.layout<[-]>, #tess.layout<[-]>]} : (tensor<2x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x32x64xf32>
  %1 = tess.rms_norm %x {axis = -2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x32x64xf32>) -> tensor<2x32x64xf32>
  %2 = tess.softmax %x {axis = 1 : i64} : tensor<2x32x64xf32>
  %3 = tess.softmax_grad %x, %x {axis = 1 : i64} : tensor<2x32x64xf32>
  %4 = tess.rotary %r, %c, %c : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %5:3 = tess.layer_norm_grad %y scale %h, %dy {bias_grad, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %6:2 = tess.rms_norm_grad %y scale %h, %dy {epsilon = 2.0e-06 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  return
}

// -----

// Tests that attention splits over batch and heads (grouped K/V heads with
// Q's label, the mask by broadcasting) and contracts head_dim and the key
// positions inside its softmax; with dropout batch and heads are streamed
// (the dropout index's fixed head stride puts a rank's block of either at a
// fixed offset of the stream: stream_axis, head_stream_axis).
// CHECK: tess.attention
// CHECK-NEXT:   labels: 0 batch, 1 parallel, 2 contracted, 3 contracted
// CHECK-NEXT:   operand 0: [0, 1, -, 2]
// CHECK-NEXT:   operand 1: [0, 1, 3, 2]
// CHECK-NEXT:   operand 2: [0, 1, 3, -]
// CHECK-NEXT:   operand 3: [-, -, -, -]
// CHECK-NEXT:   result 0: [0, 1, -, -]
// CHECK-NEXT:   splits: split batch = 0, split heads = 1
// CHECK-NEXT:   runs in: operands [dp, tp, -, -] [dp, tp, -, -] [dp, tp, -, -] [-, -, -, -] -> results [dp, tp, -, -]
// CHECK-NEXT: tess.attention
// CHECK-NEXT:   labels: 0 streamed, 1 streamed, 2 contracted, 3 contracted
// CHECK-NEXT:   operand 0: [0, 1, -, 2]
// CHECK-NEXT:   operand 1: [0, 1, 3, 2]
// CHECK-NEXT:   operand 2: [0, 1, 3, -]
// CHECK-NEXT:   result 0: [0, 1, -, -]
// CHECK-NEXT:   splits: split batch = 0, split heads = 1
// CHECK-NEXT:   runs in: operands [-, tp, -, -] [-, tp, -, -] [-, tp, -, -] -> results [-, tp, -, -]
// CHECK-NEXT: tess.attention_grad
// CHECK-NEXT:   labels: 0 batch, 1 parallel, 2 contracted, 3 contracted
// CHECK-NEXT:   operand 0: [0, 1, -, 2]
// CHECK-NEXT:   operand 1: [0, 1, 3, 2]
// CHECK-NEXT:   operand 2: [0, 1, 3, -]
// CHECK-NEXT:   operand 3: [0, 1, -, -]
// CHECK-NEXT:   result 0: [0, 1, -, -]
// CHECK-NEXT:   result 1: [0, 1, -, -]
// CHECK-NEXT:   result 2: [0, 1, -, -]
func.func @attention(%q: tensor<2x4x32x16xf32>, %k: tensor<2x2x32x16xf32>, %v: tensor<2x2x32x16xf32>, %mask: tensor<1x1x32x32xf32>, %dy: tensor<2x4x32x16xf32>) {
  %0 = tess.attention %q, %k, %v mask %mask {scale = 0.25 : f64, tess.arriving = [#tess.layout<[dp, tp, -, -]>, #tess.layout<[dp, tp, -, -]>, #tess.layout<[dp, tp, -, -]>, #tess.layout<[-, -, -, -]>]} : (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<1x1x32x32xf32>) -> tensor<2x4x32x16xf32>
  %1 = tess.attention %q, %k, %v {causal, dropout = 0.1 : f64, scale = 0.25 : f64, tess.arriving = [#tess.layout<[-, tp, -, -]>, #tess.layout<[-, tp, -, -]>, #tess.layout<[-, -, -, -]>]} : (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>) -> tensor<2x4x32x16xf32>
  %2:3 = tess.attention_grad %q, %k, %v, %dy {causal, scale = 0.25 : f64} : (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x4x32x16xf32>) -> (tensor<2x4x32x16xf32>, tensor<2x2x32x16xf32>, tensor<2x2x32x16xf32>)
  return
}

// -----

// Tests that the embedding's vocabulary is indexed (vocabulary-parallel: a
// table split on its rows leaves a partial sum, each rank looking up its
// block, rows_axis) while its tokens and width split; its gradient sums the
// tokens into the table's rows, indexed by the ids; the loss averages its
// rows.
// CHECK: tess.embedding
// CHECK-NEXT:   labels: 0 batch, 1 batch, 2 parallel, 3 indexed
// CHECK-NEXT:   operand 0: [3, 2]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   result 0: [0, 1, 2] summed [3]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: vocabulary-parallel = 3, split hidden = 2, split tokens = 0
// CHECK-NEXT:   runs in: operands [-, tp] [dp, -] -> results [dp, -, tp]
// CHECK-NEXT: tess.embedding
// CHECK:        runs in: operands [tp, -] [-, -] -> results [-, -, -] partial(tp)
// CHECK-NEXT: tess.embedding_grad
// CHECK-NEXT:   labels: 0 reduced, 1 reduced, 2 parallel, 3 indexed
// CHECK-NEXT:   operand 0: [0, 1]
// CHECK-NEXT:   operand 1: [0, 1, 2]
// CHECK-NEXT:   result 0: [3, 2] summed [0, 1]
// CHECK-NEXT:   linear in: {1}
// CHECK-NEXT:   runs in: operands [dp, -] [dp, -, -] -> results [-, -] partial(dp)
// The loss's classes split only where its logits arrive split (a
// vocabulary-parallel head): here they arrive whole.
// CHECK-NEXT: tess.cross_entropy
// CHECK-NEXT:   labels: 0 averaged, 1 averaged, 2 classes
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   result 0: [] averaged [0, 1]
// CHECK-NEXT:   runs in: operands [dp, -, -] [dp, -] -> results []
// CHECK-NEXT: tess.cross_entropy_grad
// CHECK-NEXT:   labels: 0 averaged, 1 averaged, 2 classes
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   operand 1: [0, 1]
// CHECK-NEXT:   operand 2: []
// CHECK-NEXT:   result 0: [0, 1, 2] averaged [0, 1]
// CHECK-NEXT:   linear in: {2}
func.func @embedding(%t: tensor<100x16xf32>, %ids: tensor<2x8xi64>, %dy: tensor<2x8x16xf32>, %logits: tensor<2x8x100xf32>, %dloss: tensor<f32>) {
  %0 = tess.embedding %t, %ids {tess.arriving = [#tess.layout<[-, tp]>, #tess.layout<[dp, -]>]} : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %v = tess.embedding %t, %ids {tess.arriving = [#tess.layout<[tp, -]>, #tess.layout<[-, -]>]} : (tensor<100x16xf32>, tensor<2x8xi64>) -> tensor<2x8x16xf32>
  %1 = tess.embedding_grad %ids, %dy {tess.arriving = [#tess.layout<[dp, -]>, #tess.layout<[dp, -, -]>]} : (tensor<2x8xi64>, tensor<2x8x16xf32>) -> tensor<100x16xf32>
  %2 = tess.cross_entropy %logits, %ids {tess.arriving = [#tess.layout<[dp, -, -]>, #tess.layout<[dp, -]>]} : (tensor<2x8x100xf32>, tensor<2x8xi64>) -> tensor<f32>
  %3 = tess.cross_entropy_grad %logits, %ids, %dloss : (tensor<2x8x100xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x100xf32>
  return
}

// -----

// Tests that views keep a dim's label where it survives: a reshape the
// outermost dim of each group of equal products, a transpose by its
// permutation (both offer a partial sum through); a split's axis is pieced
// (the search splits it, each rank holding 1/n of every piece); a slice
// shares the dims it takes whole, a gather the dims outside its axis;
// reduce_sum sums what it reduces, reduce_max needs it whole.
// CHECK: tess.reshape
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, -, 1]
// CHECK-NEXT:   result 0: [0, 1]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 -> 0 = 0, split dim 2 -> 1 = 1, partial sum
// CHECK-NEXT:   runs in: operands [dp, -, tp] -> results [dp, tp]
// CHECK-NEXT: tess.reshape
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 parallel
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   result 0: [0, 1, 2, -]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 -> 0 = 0, split dim 1 -> 1 = 1, split dim 2 -> 2 = 2, partial sum
// CHECK-NEXT: tess.transpose
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 parallel
// CHECK-NEXT:   operand 0: [1, 2, 0]
// CHECK-NEXT:   result 0: [0, 1, 2]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 2 -> 0 = 0, split dim 0 -> 1 = 1, split dim 1 -> 2 = 2, partial sum
// CHECK-NEXT: tess.broadcast
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 parallel, 3 parallel
// CHECK-NEXT:   operand 0: [-, 2, -]
// CHECK-NEXT:   result 0: [0, 1, 2, 3]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1, split dim 2 = 2, split dim 3 = 3
// CHECK-NEXT: tess.slice
// CHECK-NEXT:   labels: 0 parallel, 1 parallel
// CHECK-NEXT:   operand 0: [0, 1, -]
// CHECK-NEXT:   result 0: [0, 1, -]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT: tess.slice_grad
// CHECK-NEXT:   labels: none (replicated)
// CHECK-NEXT:   operand 0: [-, -]
// CHECK-NEXT:   result 0: [-, -]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT: tess.split
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 pieced
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   result 0: [0, 1, 2]
// CHECK-NEXT:   result 1: [0, 1, 2]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   splits: split dim 0 = 0, split dim 1 = 1, split dim 2 = 2
// CHECK-NEXT: tess.concat
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 pieced
// CHECK-NEXT:   operand 0: [2, 0, 1]
// CHECK-NEXT:   operand 1: [2, 0, 1]
// CHECK-NEXT:   result 0: [2, 0, 1]
// CHECK-NEXT:   linear in: {0, 1}
// CHECK-NEXT: tess.gather
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 parallel, 3 parallel
// CHECK-NEXT:   operand 0: [0, -, 1]
// CHECK-NEXT:   operand 1: [2, 3]
// CHECK-NEXT:   result 0: [0, 2, 3, 1]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT: tess.gather_grad
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 reduced
// CHECK-NEXT:   operand 0: [2]
// CHECK-NEXT:   operand 1: [0, 2, 1]
// CHECK-NEXT:   result 0: [0, -, 1] summed [2]
// CHECK-NEXT:   linear in: {1}
// CHECK-NEXT: tess.reduce_sum
// CHECK-NEXT:   labels: 0 parallel, 1 parallel, 2 reduced
// CHECK-NEXT:   operand 0: [0, 1, 2]
// CHECK-NEXT:   result 0: [0, 1, -] summed [2]
// CHECK-NEXT:   linear in: {0}
// CHECK-NEXT:   runs in: operands [dp, -, tp] -> results [dp, -, -] partial(tp)
// CHECK-NEXT: tess.reduce_max
// CHECK-NEXT:   labels: 0 parallel, 2 parallel
// CHECK-NEXT:   operand 0: [0, -, 2]
// CHECK-NEXT:   result 0: [0, 2]
func.func @data_movement(%x: tensor<2x32x192xf32>, %y: tensor<1x32x1xf32>, %i: tensor<3x5xi64>, %j: tensor<3xi32>, %dg: tensor<4x3x8xf32>, %ds: tensor<2x4xf32>) {
  %0 = tess.reshape %x {tess.arriving = [#tess.layout<[dp, -, tp]>]} : (tensor<2x32x192xf32>) -> tensor<64x192xf32>
  %1 = tess.reshape %x : (tensor<2x32x192xf32>) -> tensor<2x32x3x64xf32>
  %2 = tess.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x32x192xf32>) -> tensor<192x2x32xf32>
  %3 = tess.broadcast %y : (tensor<1x32x1xf32>) -> tensor<4x2x32x192xf32>
  %4 = tess.slice %x {starts = array<i64: 0, 0, 1>, limits = array<i64: 2, 32, 192>, strides = array<i64: 1, 1, 2>} : (tensor<2x32x192xf32>) -> tensor<2x32x96xf32>
  %5 = tess.slice_grad %ds {starts = array<i64: 1, 0>, strides = array<i64: 1, 3>} : (tensor<2x4xf32>) -> tensor<3x12xf32>
  %6:2 = tess.split %x {axis = -1 : i64, sizes = array<i64: 64, 128>} : (tensor<2x32x192xf32>) -> (tensor<2x32x64xf32>, tensor<2x32x128xf32>)
  %7 = tess.concat %x, %x {axis = 0 : i64} : (tensor<2x32x192xf32>, tensor<2x32x192xf32>) -> tensor<4x32x192xf32>
  %8 = tess.gather %x, %i {axis = -2 : i64} : (tensor<2x32x192xf32>, tensor<3x5xi64>) -> tensor<2x3x5x192xf32>
  %9 = tess.gather_grad %j, %dg {axis = -2 : i64} : (tensor<3xi32>, tensor<4x3x8xf32>) -> tensor<4x10x8xf32>
  %10 = tess.reduce_sum %x {dims = array<i64: -1>, keep_dims, tess.arriving = [#tess.layout<[dp, -, tp]>]} : (tensor<2x32x192xf32>) -> tensor<2x32x1xf32>
  %11 = tess.reduce_max %x {dims = array<i64: 1>} : (tensor<2x32x192xf32>) -> tensor<2x192xf32>
  return
}
