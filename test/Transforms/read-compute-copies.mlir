// RUN: tessera-opt %s -split-input-file -tess-read-compute-copies | FileCheck %s

// Tests a bf16 step: a weight the step only casts (twice: remat's clone in
// the backward) is read as its bf16 copy and both casts go; a table a
// lookup reads as the master (tess-look-up-before-cast) stays f32 with its
// rows' cast; buffers and inputs are not parameters.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x64xbf16> {tess.parameter = "w"}
// CHECK-SAME: %[[T:[^:]*]]: tensor<512x64xf32> {tess.parameter = "table"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<64xf32> {tess.buffer = "b"}
// CHECK-NOT: tess.cast %[[W]]
// CHECK: %[[ROWS:.*]] = tess.embedding %[[T]]
// CHECK: %[[E:.*]] = tess.cast %[[ROWS]]
// CHECK: tess.linear %[[E]], %[[W]]
// CHECK: tess.linear %{{.*}}, %[[W]]
// CHECK: tess.cast %[[B]]
module {
  func.func @forward_backward(%w: tensor<64x64xf32> {tess.parameter = "w"},
                              %table: tensor<512x64xf32> {tess.parameter = "table"},
                              %b: tensor<64xf32> {tess.buffer = "b"},
                              %ids: tensor<2x32xi64> {tess.input = "input_ids"})
      -> (tensor<2x32x64xbf16>, tensor<2x32x64xbf16>, tensor<64xbf16>)
      attributes {tess.precision = "bf16"} {
    %rows = tess.embedding %table, %ids : (tensor<512x64xf32>, tensor<2x32xi64>) -> tensor<2x32x64xf32>
    %e = tess.cast %rows : tensor<2x32x64xf32> to tensor<2x32x64xbf16>
    %c = tess.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
    %y = tess.linear %e, %c : (tensor<2x32x64xbf16>, tensor<64x64xbf16>) -> tensor<2x32x64xbf16>
    %c2 = tess.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
    %z = tess.linear %y, %c2 : (tensor<2x32x64xbf16>, tensor<64x64xbf16>) -> tensor<2x32x64xbf16>
    %bc = tess.cast %b : tensor<64xf32> to tensor<64xbf16>
    return %y, %z, %bc : tensor<2x32x64xbf16>, tensor<2x32x64xbf16>, tensor<64xbf16>
  }
}

// -----

// Tests a parameter cast to two types (an f16 copy in a bf16 step) and one
// also read as f32 (a norm weight read in f32 beside its cast): both stay
// masters, and their casts stay.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: tensor<64x64xf32> {tess.parameter = "w"}
// CHECK-SAME: tensor<64xf32> {tess.parameter = "g"}
// CHECK-COUNT-3: tess.cast
module {
  func.func @forward_backward(%w: tensor<64x64xf32> {tess.parameter = "w"},
                              %g: tensor<64xf32> {tess.parameter = "g"})
      -> (tensor<64x64xbf16>, tensor<64x64xf16>, tensor<64xbf16>, tensor<64xf32>)
      attributes {tess.precision = "bf16"} {
    %a = tess.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
    %h = tess.cast %w : tensor<64x64xf32> to tensor<64x64xf16>
    %gc = tess.cast %g : tensor<64xf32> to tensor<64xbf16>
    %g2 = tess.add %g, %g : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    return %a, %h, %gc, %g2 : tensor<64x64xbf16>, tensor<64x64xf16>, tensor<64xbf16>, tensor<64xf32>
  }
}

// -----

// Tests an fp16 step: the copies are f16.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[W:[^:]*]]: tensor<64x64xf16> {tess.parameter = "w"}
// CHECK-NOT: tess.cast
// CHECK: return %[[W]]
module {
  func.func @forward_backward(%w: tensor<64x64xf32> {tess.parameter = "w"}) -> tensor<64x64xf16>
      attributes {tess.precision = "fp16"} {
    %c = tess.cast %w : tensor<64x64xf32> to tensor<64x64xf16>
    return %c : tensor<64x64xf16>
  }
}

// -----

// Tests what is left alone: an fp32 step, a function other than
// @forward_backward (a pipeline chunk), and the @forward_backward of a
// pipelined program (it only describes the program; its chunks run).
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: tensor<64x64xf32> {tess.parameter = "w"}
// CHECK: tess.cast
// CHECK-LABEL: func.func @chunk0_forward(
// CHECK-SAME: tensor<64x64xf32> {tess.parameter = "w"}
// CHECK: tess.cast
module attributes {tess.pipeline} {
  func.func @forward_backward(%w: tensor<64x64xf32> {tess.parameter = "w"}) -> tensor<64x64xbf16>
      attributes {tess.precision = "bf16"} {
    %c = tess.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
    return %c : tensor<64x64xbf16>
  }
  func.func @chunk0_forward(%w: tensor<64x64xf32> {tess.parameter = "w"}) -> tensor<64x64xbf16>
      attributes {tess.precision = "bf16"} {
    %c = tess.cast %w : tensor<64x64xf32> to tensor<64x64xbf16>
    return %c : tensor<64x64xbf16>
  }
}

// -----

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: tensor<64x64xf32> {tess.parameter = "w"}
module {
  func.func @forward_backward(%w: tensor<64x64xf32> {tess.parameter = "w"}) -> tensor<64x64xf32>
      attributes {tess.precision = "fp32"} {
    %c = tess.add %w, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    return %c : tensor<64x64xf32>
  }
}
