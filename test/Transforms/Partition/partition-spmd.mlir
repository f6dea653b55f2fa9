// RUN: tessera-opt %s -split-input-file -tess-partition-spmd | FileCheck %s

// One case per kind of collective the partitioner inserts, on hand-written
// plans (PlanAnnotation.h's attributes), plus the local form of the ops.

// A row-parallel linear layer: the bias becomes an equal addend of the
// partial sum (times 1/2), the plan's replicated result an all-reduce.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[H:.*]]: tensor<8x128xf32> {tess.layout = #tess.layout<[-, tp]>}, %[[W:.*]]: tensor<128x64xf32> {tess.layout = #tess.layout<[tp, -]>}, %[[B:.*]]: tensor<64xf32>)
// CHECK-SAME: attributes {tess.partitioned}
// CHECK: %[[HALF:.*]] = tess.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SHARE:.*]] = tess.mul %[[B]], %[[HALF]]
// CHECK: %[[Y:.*]] = tess.linear %[[H]], %[[W]], %[[SHARE]] : (tensor<8x128xf32>, tensor<128x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
// CHECK: %[[R:.*]] = tess.all_reduce %[[Y]] {axis = "tp"} : tensor<8x64xf32>
// CHECK: tess.gelu %[[R]] : tensor<8x64xf32>
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%h: tensor<8x256xf32> {tess.layout = #tess.layout<[-, tp]>},
                              %w: tensor<256x64xf32> {tess.layout = #tess.layout<[tp, -]>},
                              %b: tensor<64xf32>) -> tensor<8x64xf32> {
    %y = tess.linear %h, %w, %b {tess.layouts = [#tess.layout<[-, -] partial(tp)>]}
      : (tensor<8x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
    %z = tess.gelu %y : tensor<8x64xf32>
    return %z : tensor<8x64xf32>
  }
}

// -----

// A value kept as a partial sum (a tensor-parallel block's residual stream:
// the row-parallel output plus the residual, summed later) read whole by two
// ops, the second the return that saves it for the backward: completed by
// one all-reduce, which both read, not one per reader.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[Y:.*]] = tess.linear %{{.*}}, %{{.*}} : (tensor<8x128xf32>, tensor<128x64xf32>) -> tensor<8x64xf32>
// CHECK: %[[R:.*]] = tess.all_reduce %[[Y]] {axis = "tp"} : tensor<8x64xf32>
// CHECK-NOT: tess.all_reduce
// CHECK: %[[Z:.*]] = tess.gelu %[[R]] : tensor<8x64xf32>
// CHECK: return %[[Z]], %[[R]] : tensor<8x64xf32>, tensor<8x64xf32>
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%h: tensor<8x256xf32> {tess.layout = #tess.layout<[-, tp]>},
                              %w: tensor<256x64xf32> {tess.layout = #tess.layout<[tp, -]>})
      -> (tensor<8x64xf32>, tensor<8x64xf32>) {
    %y = tess.linear %h, %w {tess.layouts = [#tess.layout<[-, -] partial(tp)>]}
      : (tensor<8x256xf32>, tensor<256x64xf32>) -> tensor<8x64xf32>
    %z = tess.gelu %y : tensor<8x64xf32>
    return %z, %y : tensor<8x64xf32>, tensor<8x64xf32>
  }
}

// -----

// A value gathered whole for two readers is gathered for each (ZeRO-3's
// weights, gathered again for the backward): the larger whole value is not
// kept alive between them.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[G1:.*]] = tess.all_gather %[[W:.*]] {axis = "tp", dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK: tess.gelu %[[G1]]
// CHECK: %[[G2:.*]] = tess.all_gather %[[W]] {axis = "tp", dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK: tess.exp %[[G2]]
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%w: tensor<8x8xf32> {tess.layout = #tess.layout<[tp, -]>})
      -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %a = tess.gelu %w {tess.layouts = [#tess.layout<[-, -]>]} : tensor<8x8xf32>
    %b = tess.exp %w {tess.layouts = [#tess.layout<[-, -]>]} : tensor<8x8xf32>
    return %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// A data-parallel weight gradient (partial over dp) that the plan wants
// split over dp (ZeRO-2's gradient shard): a reduce-scatter.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[G:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<4x16xf32>, tensor<4x32xf32>) -> tensor<16x32xf32>
// CHECK: %[[S:.*]] = tess.reduce_scatter %[[G]] {axis = "dp", dim = 0 : i64} : (tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK: return %[[S]] : tensor<8x32xf32>
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @forward_backward(%x: tensor<8x16xf32> {tess.layout = #tess.layout<[dp, -]>},
                              %dy: tensor<8x32xf32> {tess.layout = #tess.layout<[dp, -]>})
      -> (tensor<16x32xf32> {tess.layout = #tess.layout<[dp, -]>}) {
    %g = tess.matmul %x, %dy {transpose_lhs, tess.layouts = [#tess.layout<[-, -] partial(dp)>]}
      : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    return %g : tensor<16x32xf32>
  }
}

// -----

// A linear's weight gradient whose rows arrive split on the samples over dp
// and on the tokens over tp (a sequence split): each rank sums its own
// rows, a partial sum over both axes, with no gather of either operand.
// The parameter's layout splits the gradient over tp: reduce-scattered
// over tp first, so the dp all-reduce moves the rank's block, not the
// whole gradient.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[G:.*]] = tess.linear_weight_grad %{{.*}}, %{{.*}} {transpose_weight} : (tensor<2x4x16xf32>, tensor<2x4x32xf32>) -> tensor<32x16xf32>
// CHECK-NEXT: %[[S:.*]] = tess.reduce_scatter %[[G]] {axis = "tp", dim = 1 : i64} : (tensor<32x16xf32>) -> tensor<32x8xf32>
// CHECK-NEXT: %[[R:.*]] = tess.all_reduce %[[S]] {axis = "dp"} : tensor<32x8xf32>
// CHECK-NEXT: return %[[R]] : tensor<32x8xf32>
// CHECK-NOT: tess.all_gather
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  func.func @forward_backward(%x: tensor<4x8x16xf32> {tess.layout = #tess.layout<[dp, tp, -]>},
                              %dy: tensor<4x8x32xf32> {tess.layout = #tess.layout<[dp, tp, -]>})
      -> (tensor<32x16xf32> {tess.layout = #tess.layout<[-, tp]>}) {
    %g = tess.linear_weight_grad %x, %dy {transpose_weight, tess.layouts = [#tess.layout<[-, -] partial(dp, tp)>]}
      : (tensor<4x8x16xf32>, tensor<4x8x32xf32>) -> tensor<32x16xf32>
    return %g : tensor<32x16xf32>
  }
}

// -----

// A gradient the driver completes over its ZeRO axes (tess.zero_stage)
// that the step computes whole (replicated compute): returned whole, not
// made a partial sum, its layout whole and its tess.zero_axes naming the
// axes the driver slices its shard over (no collective); the other
// result, pending without a ZeRO stage, is still made a partial sum
// (times 1/2) at the return.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<16x32xf32> {tess.layout = #tess.layout<[-, -]>, tess.zero_axes = ["dp"], tess.zero_stage = 2 : i64}
// CHECK: %[[G:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: %[[E:.*]] = tess.exp %{{.*}} : tensor<8x16xf32>
// CHECK-NEXT: %[[HALVES:.*]] = tess.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[OTHER:.*]] = tess.mul %[[E]], %[[HALVES]]
// CHECK-NEXT: return %[[G]], %[[OTHER]]
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @forward_backward(%x: tensor<8x16xf32>, %dy: tensor<8x32xf32>)
      -> (tensor<16x32xf32> {tess.layout = #tess.layout<[-, -] partial(dp)>, tess.zero_stage = 2 : i64},
          tensor<8x16xf32> {tess.layout = #tess.layout<[-, -] partial(dp)>}) {
    %g = tess.matmul %x, %dy {transpose_lhs, tess.layouts = [#tess.layout<[-, -]>]}
      : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    %e = tess.exp %x {tess.layouts = [#tess.layout<[-, -]>]} : tensor<8x16xf32>
    return %g, %e : tensor<16x32xf32>, tensor<8x16xf32>
  }
}

// -----

// A ZeRO-1/2 gradient summed from two reads that both compute it whole (a
// tied embedding read by a replicated lookup and LM head): the sum of whole
// addends is whole, returned whole with tess.zero_axes as for one read, no
// collective and no 1/2 scale: the driver slices it, as the search prices
// it (lib/Sharding/ShardingProblem.cpp, the edges' shares).
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<16x32xf32> {tess.layout = #tess.layout<[-, -]>, tess.zero_axes = ["dp"], tess.zero_stage = 1 : i64})
// CHECK: %[[G1:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK-NEXT: %[[G2:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs}
// CHECK-NEXT: %[[SUM:.*]] = tess.add %[[G1]], %[[G2]] : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: return %[[SUM]]
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @forward_backward(%x: tensor<8x16xf32>, %dy: tensor<8x32xf32>,
                              %h: tensor<8x16xf32>, %dz: tensor<8x32xf32>)
      -> (tensor<16x32xf32> {tess.layout = #tess.layout<[-, -] partial(dp)>, tess.zero_stage = 1 : i64}) {
    %g1 = tess.matmul %x, %dy {transpose_lhs, tess.layouts = [#tess.layout<[-, -]>]}
      : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    %g2 = tess.matmul %h, %dz {transpose_lhs, tess.layouts = [#tess.layout<[-, -]>]}
      : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    %g = tess.add %g1, %g2 {tess.layouts = [#tess.layout<[-, -]>]}
      : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    return %g : tensor<16x32xf32>
  }
}

// -----

// The same sum where one read splits its rows over dp (its gradient a
// partial sum): the sum is whole only after the partial addend's all-reduce,
// then returned whole and sliced. The search's per-edge shares price this
// mix as half a reduce-scatter (lib/Sharding/README.md: readers that
// disagree are under-priced).
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<16x32xf32> {tess.layout = #tess.layout<[-, -]>, tess.zero_axes = ["dp"], tess.zero_stage = 1 : i64})
// CHECK: %[[G1:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<8x16xf32>, tensor<8x32xf32>)
// CHECK-NEXT: %[[G2:.*]] = tess.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<4x16xf32>, tensor<4x32xf32>)
// CHECK-NEXT: %[[R:.*]] = tess.all_reduce %[[G2]] {axis = "dp"}
// CHECK-NEXT: %[[SUM:.*]] = tess.add %[[G1]], %[[R]] : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: return %[[SUM]]
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @forward_backward(%x: tensor<8x16xf32>, %dy: tensor<8x32xf32>,
                              %h: tensor<8x16xf32> {tess.layout = #tess.layout<[dp, -]>},
                              %dz: tensor<8x32xf32> {tess.layout = #tess.layout<[dp, -]>})
      -> (tensor<16x32xf32> {tess.layout = #tess.layout<[-, -] partial(dp)>, tess.zero_stage = 1 : i64}) {
    %g1 = tess.matmul %x, %dy {transpose_lhs, tess.layouts = [#tess.layout<[-, -]>]}
      : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    %g2 = tess.matmul %h, %dz {transpose_lhs, tess.layouts = [#tess.layout<[-, -] partial(dp)>]}
      : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
    %g = tess.add %g1, %g2 {tess.layouts = [#tess.layout<[-, -]>]}
      : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    return %g : tensor<16x32xf32>
  }
}

// -----

// A split value returned whole: an all-gather; split on another dim: an
// all-to-all.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<16x64xf32>, tensor<16x32xf32> {tess.layout = #tess.layout<[-, tp]>})
// CHECK: %[[E:.*]] = tess.exp %{{.*}} : tensor<8x64xf32>
// CHECK: %[[A:.*]] = tess.all_gather %[[E]] {axis = "tp", dim = 0 : i64} : (tensor<8x64xf32>) -> tensor<16x64xf32>
// CHECK: %[[T:.*]] = tess.all_to_all %[[E]] {axis = "tp", concat_dim = 0 : i64, split_dim = 1 : i64} : (tensor<8x64xf32>) -> tensor<16x32xf32>
// CHECK: return %[[A]], %[[T]]
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%x: tensor<16x64xf32> {tess.layout = #tess.layout<[tp, -]>})
      -> (tensor<16x64xf32>, tensor<16x64xf32> {tess.layout = #tess.layout<[-, tp]>}) {
    %e = tess.exp %x {tess.layouts = [#tess.layout<[tp, -]>]} : tensor<16x64xf32>
    return %e, %e : tensor<16x64xf32>, tensor<16x64xf32>
  }
}

// -----

// Attention split on heads while Q/K/V arrive replicated: each rank slices
// its heads (no communication).
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[Q:.*]] = tess.shard_slice %{{.*}} {axis = "tp", dim = 1 : i64} : (tensor<2x4x8x16xf32>) -> tensor<2x2x8x16xf32>
// CHECK: %[[O:.*]] = tess.attention %[[Q]], %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f64} : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x8x16xf32>
// CHECK: tess.all_gather %[[O]] {axis = "tp", dim = 1 : i64}
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>,
                              %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
    %o = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64, tess.layouts = [#tess.layout<[-, tp, -, -]>]}
      : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    return %o : tensor<2x4x8x16xf32>
  }
}

// -----

// The loss of a batch split over dp: the ranks' means weighted by their
// counted targets; the gradient scaled by the rank's share.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[L:.*]] = tess.cross_entropy %{{.*}}, %[[T:.*]] : (tensor<1x8x16xf32>, tensor<1x8xi64>) -> tensor<f32>
// CHECK: %[[NE:.*]] = tess.compare ne, %[[T]], %{{.*}} : (tensor<1x8xi64>, tensor<i64>) -> tensor<1x8xi1>
// CHECK: %[[COUNT:.*]] = tess.reduce_sum %{{.*}} {dims = array<i64: 0, 1>}
// CHECK: %[[TOTAL:.*]] = tess.all_reduce %[[COUNT]] {axis = "dp"} : tensor<f32>
// CHECK: %[[WEIGHTED:.*]] = tess.mul %[[L]], %[[COUNT]]
// CHECK: %[[SUM:.*]] = tess.all_reduce %[[WEIGHTED]] {axis = "dp"} : tensor<f32>
// CHECK: %[[MEAN:.*]] = tess.div %[[SUM]], %{{.*}}
// CHECK: tess.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x8x16xf32>, tensor<1x8xi64>, tensor<f32>) -> tensor<1x8x16xf32>
// CHECK: return %[[MEAN]]
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @forward_backward(%logits: tensor<2x8x16xf32> {tess.layout = #tess.layout<[dp, -, -]>},
                              %targets: tensor<2x8xi64> {tess.layout = #tess.layout<[dp, -]>},
                              %scale: tensor<f32>)
      -> (tensor<f32>, tensor<2x8x16xf32> {tess.layout = #tess.layout<[dp, -, -]>}) {
    %loss = tess.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi64>) -> tensor<f32>
    %d = tess.cross_entropy_grad %logits, %targets, %scale {tess.layouts = [#tess.layout<[dp, -, -]>]}
      : (tensor<2x8x16xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x16xf32>
    return %loss, %d : tensor<f32>, tensor<2x8x16xf32>
  }
}

// -----

// A fused projection laid out piece by piece (tess.piece_major, tess.pieces:
// Megatron's fused QKV): each rank's block of the weight is its columns of
// q, k and v, so the split cuts its local output into three local pieces
// and the backward's concat joins its local gradients; no collective but
// the input gradient's all-reduce.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x6xf32> {tess.layout = #tess.layout<[-, tp]>, tess.parameter = "w", tess.pieces = array<i64: 1, 3>})
// CHECK: %[[Y:.*]] = tess.linear %[[X]], %[[W]] : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[P:.*]]:3 = tess.split %[[Y]] {axis = 1 : i64, sizes = array<i64: 2, 2, 2>, tess.piece_major = "tp"} : (tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK-NEXT: %[[C:.*]] = tess.concat %[[P]]#2, %[[P]]#1, %[[P]]#0 {axis = 1 : i64, tess.piece_major = "tp"} : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: %[[DX:.*]] = tess.linear %[[C]], %[[W]] {transpose_weight} : (tensor<4x6xf32>, tensor<8x6xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[G:.*]] = tess.matmul %[[X]], %[[C]] {transpose_lhs} : (tensor<4x8xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
// CHECK-NEXT: %[[R:.*]] = tess.all_reduce %[[DX]] {axis = "tp"}
// CHECK-NEXT: return %[[R]], %[[G]]
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%x: tensor<4x8xf32>,
                              %w: tensor<8x12xf32> {tess.parameter = "w", tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>})
      -> (tensor<4x8xf32>, tensor<8x12xf32> {tess.gradient = "w", tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>}) {
    %y = tess.linear %x, %w {tess.layouts = [#tess.layout<[-, tp]>]}
      : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
    %q, %k, %v = tess.split %y {axis = 1 : i64, sizes = array<i64: 4, 4, 4>, tess.piece_major = "tp",
        tess.layouts = [#tess.layout<[-, tp]>, #tess.layout<[-, tp]>, #tess.layout<[-, tp]>]}
      : (tensor<4x12xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
    // A stand-in for the gradients of q, k and v, joined as the backward does.
    %c = tess.concat %v, %k, %q {axis = 1 : i64, tess.piece_major = "tp", tess.layouts = [#tess.layout<[-, tp]>]}
      : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x12xf32>
    %dx = tess.linear %c, %w {transpose_weight, tess.layouts = [#tess.layout<[-, -] partial(tp)>]}
      : (tensor<4x12xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
    %g = tess.matmul %x, %c {transpose_lhs, tess.layouts = [#tess.layout<[-, tp]>]}
      : (tensor<4x8xf32>, tensor<4x12xf32>) -> tensor<8x12xf32>
    return %dx, %g : tensor<4x8xf32>, tensor<8x12xf32>
  }
}
