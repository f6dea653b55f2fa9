// RUN: tessera-opt %s -split-input-file | tessera-opt -split-input-file | FileCheck %s
// RUN: tessera-opt %s -split-input-file --mlir-print-op-generic | tessera-opt -split-input-file | FileCheck %s

// Round trip of the plan's attributes (TessPlanAttrs.td) through the custom
// and the generic form: a value's layout where it may sit, and the module's
// plan with and without a pipeline.

// CHECK: module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>}
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @layouts
  // CHECK-SAME: (%{{.*}}: tensor<4x8xf32> {tess.layout = #tess.layout<[dp, -]>}, %{{.*}}: tensor<f32> {tess.layout = #tess.layout<[]>})
  // CHECK-SAME: -> (tensor<4x8xf32> {tess.layout = #tess.layout<[-, tp] partial(dp)>})
  func.func @layouts(%x: tensor<4x8xf32> {tess.layout = #tess.layout<[dp, -]>},
                     %s: tensor<f32> {tess.layout = #tess.layout<[]>})
      -> (tensor<4x8xf32> {tess.layout = #tess.layout<[-, tp] partial(dp)>}) {
    // CHECK: tess.exp %{{.*}} {tess.layouts = [#tess.layout<[dp, tp]>]}
    %y = tess.exp %x {tess.layouts = [#tess.layout<[dp, tp]>]} : tensor<4x8xf32>
    // CHECK: tess.exp %{{.*}} {tess.layouts = [#tess.layout<[-, -] partial(tp, dp)>]}
    %z = tess.exp %y {tess.layouts = [#tess.layout<[-, -] partial(tp, dp)>]} : tensor<4x8xf32>
    return %z : tensor<4x8xf32>
  }
}

// -----

// A fused projection's weight and gradient stored piece by piece (C5): its
// q, k and v columns, each rank holding its block of each.
// CHECK-LABEL: func.func @pieces
// CHECK-SAME: (%{{.*}}: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>})
// CHECK-SAME: -> (tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>})
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @pieces(%w: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>})
      -> (tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>}) {
    return %w : tensor<8x12xf32>
  }
}

// -----

// One device: every field at its default prints as nothing.
// CHECK: module attributes {tess.plan = #tess.plan<>}
module attributes {tess.plan = #tess.plan<zero = 0, remat = "none", stages = 1, microbatches = 1>} {}

// -----

// One device whose optimizer state is offloaded to the host (tesserac's
// choice when nothing else fits), with full recomputation.
// CHECK: module attributes {tess.plan = #tess.plan<remat = "full", offload = "optimizer">}
module attributes {tess.plan = #tess.plan<offload = "optimizer", remat = "full">} {}

// -----

// A mesh plan: the same mesh as the module's.
// CHECK: module attributes {tess.mesh = #tess.mesh<dp = 4>, tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>, zero = mixed, remat = "full">}
module attributes {tess.mesh = #tess.mesh<dp = 4>,
                   tess.plan = #tess.plan<remat = "full", zero = mixed, mesh = #tess.mesh<dp = 4>>} {}

// -----

// A pipeline before tess-split-pipeline-stages has chunked it.
// CHECK: module attributes {tess.plan = #tess.plan<zero = 1, stages = 4, schedule = "gpipe", microbatches = 8>}
module attributes {tess.plan = #tess.plan<zero = 1, stages = 4, schedule = "gpipe", microbatches = 8>} {}

// -----

// A chunk that says its own remat (the pipeline search's per stage); the
// plan's is the other chunks'.
// CHECK: module attributes {tess.plan = #tess.plan<remat = "full", stages = 2, schedule = "1f1b", microbatches = 2,
// CHECK-SAME: chunks = [#tess.chunk<device = 0, units = 0 to 1>, #tess.chunk<device = 1, units = 2 to 3, remat = "none">]>}
module attributes {tess.plan = #tess.plan<remat = "full", stages = 2,
    schedule = "1f1b", microbatches = 2,
    chunks = [#tess.chunk<device = 0, units = 0 to 1>,
              #tess.chunk<device = 1, units = 2 to 3, remat = "none">]>} {}

// -----

// The example of the description: an interleaved pipeline, chunked.
// CHECK: module attributes {tess.plan = #tess.plan<zero = 1, remat = "selective", stages = 2, schedule = "interleaved:2", microbatches = 4,
// CHECK-SAME: chunks = [#tess.chunk<device = 0, units = 0 to 1>, #tess.chunk<device = 1, units = 2 to 2>, #tess.chunk<device = 0, units = 3 to 3>, #tess.chunk<device = 1, units = 4 to 5>]>}
module attributes {tess.plan = #tess.plan<zero = 1, remat = "selective",
    stages = 2, schedule = "interleaved:2", microbatches = 4,
    chunks = [#tess.chunk<device = 0, units = 0 to 1>,
              #tess.chunk<device = 1, units = 2 to 2>,
              #tess.chunk<device = 0, units = 3 to 3>,
              #tess.chunk<device = 1, units = 4 to 5>]>} {}

// -----

// The example of #tess.layout's description.
// CHECK-LABEL: func.func @step
// CHECK-SAME: tess.layout = #tess.layout<[dp, -]>
// CHECK: tess.exp %{{.*}} {tess.layouts = [#tess.layout<[dp, tp]>]}
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  func.func @step(%x: tensor<4x8xf32> {tess.layout = #tess.layout<[dp, -]>})
      -> (tensor<4x8xf32> {tess.layout = #tess.layout<[-, tp] partial(dp)>}) {
    %y = tess.exp %x {tess.layouts = [#tess.layout<[dp, tp]>]} : tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}

// -----

// The sharding search's decision per op (#tess.planned): an op's, with and
// without a layer, a parameter's (with and without ZeRO axes), a result's.
// Empty lists print as nothing; a parameter's zero always prints.
// CHECK-LABEL: func.func @planned
// CHECK-SAME: -> (tensor<8x16x512xf32> {tess.planned = #tess.layout<[dp, -, -]>})
// CHECK: tess.parameter "wte" trainable {tess.planned = #tess.planned<strategy = "[-, tp] ZeRO-0", results = [#tess.layout<[-, tp]>], state = #tess.layout<[-, tp]>, zero = 0>}
// CHECK: tess.parameter "head.weight" trainable {tess.planned = #tess.planned<strategy = "[-, -] ZeRO-3", results = [#tess.layout<[dp, -]>], state = #tess.layout<[dp, -]>, zero = 3, zero_axes = [dp, tp]>}
// CHECK: tess.parameter "head.bias" trainable {tess.planned = #tess.planned<strategy = "[tp] ZeRO-1", results = [#tess.layout<[tp]>], state = #tess.layout<[tp]>, zero = 1>}
// CHECK: tess.embedding %{{.*}} {tess.planned = #tess.planned<strategy = "dp: split tokens", operands = [#tess.layout<[-, tp]>, #tess.layout<[dp, -]>], results = [#tess.layout<[dp, -, tp]>]>}
// CHECK: tess.linear %{{.*}} {tess.planned = #tess.planned<strategy = "tp: row-parallel", layer = "transformer.h.0", operands = [#tess.layout<[dp, -, tp]>, #tess.layout<[tp, -]>, #tess.layout<[-] partial(tp)>], results = [#tess.layout<[dp, -, -] partial(tp)>]>}
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  func.func @planned(%ids: tensor<8x16xi64>)
      -> (tensor<8x16x512xf32> {tess.planned = #tess.layout<[dp, -, -]>}) {
    %wte = tess.parameter "wte" trainable {tess.planned = #tess.planned<
        results = [#tess.layout<[-, tp]>], strategy = "[-, tp] ZeRO-0",
        state = #tess.layout<[-, tp]>>} : tensor<512x64xf32>
    %w = tess.parameter "head.weight" trainable {tess.planned = #tess.planned<
        strategy = "[-, -] ZeRO-3", results = [#tess.layout<[dp, -]>],
        state = #tess.layout<[dp, -]>, zero = 3, zero_axes = [dp, "tp"]>} : tensor<64x512xf32>
    %b = tess.parameter "head.bias" trainable {tess.planned = #tess.planned<
        strategy = "[tp] ZeRO-1", results = [#tess.layout<[tp]>],
        state = #tess.layout<[tp]>, zero = 1, zero_axes = []>} : tensor<512xf32>
    %x = tess.embedding %wte, %ids {tess.planned = #tess.planned<
        strategy = "dp: split tokens", operands = [#tess.layout<[-, tp]>, #tess.layout<[dp, -]>],
        results = [#tess.layout<[dp, -, tp]>]>} : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    %y = tess.linear %x, %w, %b {tess.planned = #tess.planned<
        strategy = "tp: row-parallel", layer = "transformer.h.0",
        operands = [#tess.layout<[dp, -, tp]>, #tess.layout<[tp, -]>, #tess.layout<[-] partial(tp)>],
        results = [#tess.layout<[dp, -, -] partial(tp)>]>} : (tensor<8x16x64xf32>, tensor<64x512xf32>, tensor<512xf32>) -> tensor<8x16x512xf32>
    return %y : tensor<8x16x512xf32>
  }
}

// -----

// The example of #tess.planned's description.
// CHECK-LABEL: func.func @forward
// CHECK: tess.parameter "wte" trainable {tess.planned = #tess.planned<strategy = "[-, -] ZeRO-3", results = [#tess.layout<[dp, -]>], state = #tess.layout<[dp, -]>, zero = 3, zero_axes = [dp]>}
// CHECK: tess.embedding %{{.*}} {tess.planned = #tess.planned<strategy = "dp: data-parallel", layer = "transformer.wte", operands = [#tess.layout<[-, -]>, #tess.layout<[dp, -]>], results = [#tess.layout<[dp, -, -]>]>}
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @forward(%ids: tensor<8x16xi64>)
      -> (tensor<8x16x64xf32> {tess.planned = #tess.layout<[dp, -, -]>}) {
    %wte = tess.parameter "wte" trainable {tess.planned = #tess.planned<
        strategy = "[-, -] ZeRO-3", results = [#tess.layout<[dp, -]>],
        state = #tess.layout<[dp, -]>, zero = 3, zero_axes = [dp]>}
        : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids {tess.planned = #tess.planned<
        strategy = "dp: data-parallel", layer = "transformer.wte",
        operands = [#tess.layout<[-, -]>, #tess.layout<[dp, -]>],
        results = [#tess.layout<[dp, -, -]>]>}
        : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}
