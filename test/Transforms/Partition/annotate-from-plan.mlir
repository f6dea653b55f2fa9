// RUN: tessera-opt %s --tess-search-sharding='mesh=4 calibration=compute=10 zero=1 shard=head=dp' --tess-build-training --tess-annotate-from-plan | FileCheck %s
// RUN: tessera-opt %s --tess-search-sharding='mesh=4 calibration=compute=10 zero=1 shard=head=dp' --tess-build-training --tess-annotate-from-plan --tess-partition-spmd | FileCheck %s --check-prefix=PARTITIONED
// RUN: tessera-opt %s --tess-search-sharding='mesh=4 calibration=compute=10 zero=2 shard=head=dp' --tess-build-training --tess-annotate-from-plan --tess-partition-spmd | FileCheck %s --check-prefix=ZERO2

// Tests that the plan the step's ops carry from tess-search-sharding becomes
// the partitioner's layouts, nothing matched by name or shape: the token ids
// split as the embedding's planned operand, the planned forward ops leave
// their planned layouts, the backward follows them, the wishes are erased
// (from @forward too).
// CHECK: module attributes {tess.mesh = #tess.mesh<dp = 4>, tess.plan = #tess.plan<mesh = #tess.mesh<dp = 4>, zero = 1>}
// CHECK-LABEL: func.func @forward(
// CHECK-NOT: tess.planned
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: {tess.input = "input_ids", tess.layout = #tess.layout<[dp, -]>}
// CHECK-SAME: {tess.gradient = "head.weight", tess.layout = #tess.layout<[-, -] partial(dp)>, tess.zero_stage = 1 : i64}
// CHECK: tess.embedding %{{.*}} {tess.layouts = [#tess.layout<[dp, -, -]>]}
// CHECK: tess.linear %{{.*}} {tess.layouts = [#tess.layout<[dp, -, -]>]}
// CHECK: tess.cross_entropy
// CHECK: tess.linear_weight_grad %{{.*}} {tess.layouts = [#tess.layout<[-, -] partial(dp)>]}
// CHECK-NOT: tess.planned

// Tests that the annotation is one tess-partition-spmd runs.
// PARTITIONED: tess.partitioned

// Tests that a pending gradient carries its parameter's ZeRO stage, through
// the partitioner, for the driver (ZeRO-2: it keeps only the gradient's
// shard).
// ZERO2-LABEL: func.func @forward_backward(
// ZERO2-SAME: {tess.gradient = "head.weight", tess.layout = #tess.layout<[-, -] partial(dp)>, tess.zero_stage = 2 : i64}
// ZERO2-SAME: {tess.gradient = "head.bias", tess.layout = #tess.layout<[-] partial(dp)>, tess.zero_stage = 2 : i64}
// ZERO2-SAME: tess.partitioned
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
