// RUN: tessera-opt %s -split-input-file -tess-partition-spmd=function=optimizer_step | FileCheck %s

// tess.adamw is elementwise in param, grad, m and v: partitioned, each rank
// updates its block, and the scalars (lr, step, grad_scale) stay whole.

// ZeRO-1/2: the step reads the parameter whole, the gradient and moments
// are sharded over dp. The rank slices its block of the parameter, updates
// it, and all-gathers the parameter; the moments stay sharded.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: (%[[P:.*]]: tensor<16x8xf32>, %[[G:.*]]: tensor<8x8xf32> {tess.layout = #tess.layout<[dp, -]>}, %[[M:.*]]: tensor<8x8xf32> {tess.layout = #tess.layout<[dp, -]>}, %[[V:.*]]: tensor<8x8xf32> {tess.layout = #tess.layout<[dp, -]>}, %[[LR:.*]]: tensor<f32>, %[[STEP:.*]]: tensor<i64>, %[[GS:.*]]: tensor<f32>)
// CHECK-SAME: -> (tensor<16x8xf32>, tensor<8x8xf32> {tess.layout = #tess.layout<[dp, -]>}, tensor<8x8xf32> {tess.layout = #tess.layout<[dp, -]>})
// CHECK: %[[BLOCK:.*]] = tess.shard_slice %[[P]] {axis = "dp", dim = 0 : i64} : (tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK: %[[NP:[^,]*]], %[[NM:[^,]*]], %[[NV:[^ ]*]] = tess.adamw %[[BLOCK]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[STEP]], %[[GS]]
// CHECK-SAME: (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK: %[[FULL:.*]] = tess.all_gather %[[NP]] {axis = "dp", dim = 0 : i64} : (tensor<8x8xf32>) -> tensor<16x8xf32>
// CHECK: return %[[FULL]], %[[NM]], %[[NV]]
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @optimizer_step(
      %p: tensor<16x8xf32>,
      %g: tensor<16x8xf32> {tess.layout = #tess.layout<[dp, -]>},
      %m: tensor<16x8xf32> {tess.layout = #tess.layout<[dp, -]>},
      %v: tensor<16x8xf32> {tess.layout = #tess.layout<[dp, -]>},
      %lr: tensor<f32>, %step: tensor<i64>, %gs: tensor<f32>)
      -> (tensor<16x8xf32>, tensor<16x8xf32> {tess.layout = #tess.layout<[dp, -]>},
          tensor<16x8xf32> {tess.layout = #tess.layout<[dp, -]>}) {
    %np, %nm, %nv = tess.adamw %p, %g, %m, %v, %lr, %step, %gs
        {tess.layouts = [#tess.layout<[dp, -]>, #tess.layout<[dp, -]>, #tess.layout<[dp, -]>]}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>,
         tensor<f32>, tensor<i64>, tensor<f32>)
      -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
    return %np, %nm, %nv : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
  }
}

// -----

// Tensor parallelism: a column-parallel weight is read, updated and
// returned as the rank's slice; no collective.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NOT: tess.all_gather
// CHECK-NOT: tess.shard_slice
// CHECK: tess.adamw {{.*}} : (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>)
// CHECK-NOT: tess.all_gather
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @optimizer_step(
      %p: tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>},
      %g: tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>},
      %m: tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>},
      %v: tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>},
      %lr: tensor<f32>, %step: tensor<i64>, %gs: tensor<f32>)
      -> (tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>},
          tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>},
          tensor<16x8xf32> {tess.layout = #tess.layout<[-, tp]>}) {
    %np, %nm, %nv = tess.adamw %p, %g, %m, %v, %lr, %step, %gs
        {tess.layouts = [#tess.layout<[-, tp]>, #tess.layout<[-, tp]>, #tess.layout<[-, tp]>]}
      : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>,
         tensor<f32>, tensor<i64>, tensor<f32>)
      -> (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
    return %np, %nm, %nv : tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>
  }
}
