// RUN: tessera-opt %s --tess-search-sharding='mesh=4 calibration=compute=10' | FileCheck %s
// RUN: tessera-opt %s --tess-search-sharding='mesh=4 calibration=compute=10' --tess-build-training | FileCheck %s --check-prefix=STEP
// RUN: tessera-opt %s --tess-search-sharding='calibration=compute=10' | FileCheck %s --check-prefix=ONE
// RUN: tessera-opt %s --tess-search-sharding='mesh=4 calibration=compute=10 zero=1 shard=head=dp' | FileCheck %s --check-prefix=PINNED
// RUN: tessera-opt %s --tess-fit-memory --tess-search-sharding='mesh=4' | FileCheck %s --check-prefix=MEASURED

// Tests that the search plans @forward in place and writes its decision as
// IR: the module's mesh and #tess.plan, on every op its strategy and the
// layouts it reads and leaves, on each parameter its state's layout and ZeRO
// stage, on the result the layout the loss reads it in. A step costed as 10 s
// of compute (calibration) is worth dividing over 4 devices. The head's
// weight is stored split as its row-parallel linear reads it: nothing left
// for ZeRO to shard, ZeRO-0 (as fast as ZeRO-3 of a whole weight sharded
// alike, and the lowest stage wins a tie).
// CHECK: module attributes {tess.mesh = #tess.mesh<dp = 4>, tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>>}
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<8x16x512xf32> {tess.planned = #tess.layout<[-, -, -]>})
// CHECK: tess.parameter "wte" trainable {tess.planned = #tess.planned<strategy = "[-, dp] ZeRO-0", results = [#tess.layout<[-, dp]>], state = #tess.layout<[-, dp]>, zero = 0>}
// CHECK: tess.parameter "head.weight" trainable {tess.planned = #tess.planned<strategy = "[dp, -] ZeRO-0", results = [#tess.layout<[dp, -]>], state = #tess.layout<[dp, -]>, zero = 0>}
// CHECK: tess.embedding %{{.*}} {tess.planned = #tess.planned<strategy = "dp: split hidden", operands = [#tess.layout<[-, dp]>, #tess.layout<[-, -]>], results = [#tess.layout<[-, -, dp]>]>}
// CHECK: tess.linear %{{.*}} {tess.planned = #tess.planned<strategy = "dp: row-parallel", operands = [#tess.layout<[-, -, dp]>, #tess.layout<[dp, -]>, #tess.layout<[-] partial(dp)>], results = [#tess.layout<[-, -, -] partial(dp)>]>}

// Tests that the training step's copies of the forward ops carry their plan:
// nothing is matched back; the loss and the backward have none.
// STEP-LABEL: func.func @forward_backward
// STEP: tess.embedding %{{.*}} {tess.planned = #tess.planned<strategy = "dp: split hidden", operands = [#tess.layout<[-, dp]>, #tess.layout<[-, -]>], results = [#tess.layout<[-, -, dp]>]>}
// STEP: tess.linear %{{.*}} {tess.planned = #tess.planned<strategy = "dp: row-parallel", {{.*}}>}
// STEP: tess.cross_entropy
// STEP-NOT: tess.planned

// Tests that one device writes the plan alone: every layout is replicated.
// ONE: module attributes {tess.plan = #tess.plan<>}
// ONE-NOT: tess.planned

// Tests that the pins are constraints on the same search: every parameter at
// ZeRO-1, the head's linear data-parallel (its weight whole).
// PINNED: tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>, zero = 1>
// PINNED: tess.parameter "head.weight" trainable {tess.planned = #tess.planned<strategy = "[-, -] ZeRO-1", results = [#tess.layout<[-, -]>], state = #tess.layout<[dp, -]>, zero = 1, zero_axes = [dp]>}
// PINNED: tess.linear %{{.*}} {tess.planned = #tess.planned<strategy = "dp: data-parallel", {{.*}}>}
// Tests that without `calibration` the search is calibrated by the module
// itself: the step built from @forward for one device (measured on a copy:
// the forward stays the forward), whose few microseconds of compute are not
// worth dividing over 4 devices: every op replicated.
// MEASURED: module attributes {tess.mesh = #tess.mesh<dp = 4>, tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>>}
// MEASURED-NOT: @forward_backward
// MEASURED: tess.embedding %{{.*}} {tess.planned = #tess.planned<strategy = "replicated"
// MEASURED: tess.linear %{{.*}} {tess.planned = #tess.planned<strategy = "replicated"
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x512xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %w = tess.parameter "head.weight" trainable : tensor<64x512xf32>
    %b = tess.parameter "head.bias" trainable : tensor<512xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    %y = tess.linear %x, %w, %b : (tensor<8x16x64xf32>, tensor<64x512xf32>, tensor<512xf32>) -> tensor<8x16x512xf32>
    return %y : tensor<8x16x512xf32>
  }
}
