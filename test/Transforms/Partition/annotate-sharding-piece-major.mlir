// RUN: tessera-opt %s -split-input-file --tess-annotate-sharding='mesh=1x2 strategy=tp' | FileCheck %s
// RUN: tessera-opt %s -split-input-file --tess-annotate-sharding='mesh=1x2 strategy=tp' --tess-partition-spmd | FileCheck %s --check-prefix=LOCAL
// A split left whole says why (a remark), as tess-annotate-from-plan's do.
// RUN: tessera-opt %s -split-input-file --tess-annotate-sharding='mesh=1x2 strategy=tp' -verify-diagnostics -o /dev/null

// Megatron's forced TP on a fused projection cut by a tess.split (GPT-2's
// c_attn): column-parallel piece by piece (PieceMajorRegion.h), the split
// marked tess.piece_major and the weight tess.pieces; each rank's split
// cuts its local columns into three local pieces.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>, tess.parameter = "w", tess.pieces = array<i64: 1, 3>}
// CHECK: tess.split {{.*}}tess.piece_major = "tp"
// LOCAL-LABEL: func.func @forward_backward
// LOCAL: tess.linear {{.*}} -> tensor<2x6xf32>
// LOCAL-NEXT: tess.split {{.*}}sizes = array<i64: 2, 2, 2>, tess.piece_major = "tp"} : (tensor<2x6xf32>)
// LOCAL-NOT: tess.all_gather
module {
  func.func @forward_backward(%x: tensor<2x8xf32> {tess.buffer = "x"},
                              %w: tensor<8x12xf32> {tess.parameter = "w"},
                              %w2: tensor<4x8xf32> {tess.parameter = "w2"})
      -> tensor<2x8xf32> {
    %y = tess.linear %x, %w : (tensor<2x8xf32>, tensor<8x12xf32>) -> tensor<2x12xf32>
    %q, %k, %v = tess.split %y {axis = 1 : i64, sizes = array<i64: 4, 4, 4>}
      : (tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    %m = tess.mul %q, %k : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %o = tess.linear %m, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    return %o : tensor<2x8xf32>
  }
}

// -----

// The same projection, also read by a max over the pieced dim, which reads
// that dim whole (its sharding labels say so): no piece-major region, so
// the weight stays replicated, nothing is marked, and each rank computes
// the whole projection (the heads' readers slice theirs).
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: tensor<8x12xf32> {tess.parameter = "w"}
// CHECK-NOT: tess.piece_major
// CHECK-NOT: tess.pieces
// CHECK: return
// LOCAL-LABEL: func.func @forward_backward
// LOCAL: tess.linear {{.*}} -> tensor<2x12xf32>
// LOCAL-NEXT: tess.split {{.*}}sizes = array<i64: 4, 4, 4>} : (tensor<2x12xf32>)
module {
  func.func @forward_backward(%x: tensor<2x8xf32> {tess.buffer = "x"},
                              %w: tensor<8x12xf32> {tess.parameter = "w"},
                              %w2: tensor<4x8xf32> {tess.parameter = "w2"})
      -> (tensor<2x8xf32>, tensor<2xf32>) {
    %y = tess.linear %x, %w : (tensor<2x8xf32>, tensor<8x12xf32>) -> tensor<2x12xf32>
    // expected-remark@+1 {{tess-annotate-sharding: the fused projection this split cuts stays whole on 'tp' (its readers slice their heads), not column-parallel piece by piece: }}
    %q, %k, %v = tess.split %y {axis = 1 : i64, sizes = array<i64: 4, 4, 4>}
      : (tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
    %m = tess.mul %q, %k : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %o = tess.linear %m, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = tess.reduce_max %y {dims = array<i64: 1>} : (tensor<2x12xf32>) -> tensor<2xf32>
    return %o, %r : tensor<2x8xf32>, tensor<2xf32>
  }
}

// -----

// A grouped-query fused projection (q | k | v of 4, 2 and 2 columns, as
// Phi-3's qkv_proj): its pieces are unequal, so no rank's columns are one
// block of each piece; the weight stays replicated and the remark says why.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: tensor<8x8xf32> {tess.parameter = "w"}
// CHECK-NOT: tess.piece_major
module {
  func.func @forward_backward(%x: tensor<2x8xf32> {tess.buffer = "x"},
                              %w: tensor<8x8xf32> {tess.parameter = "w"},
                              %w2: tensor<4x8xf32> {tess.parameter = "w2"})
      -> tensor<2x8xf32> {
    %y = tess.linear %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    // expected-remark@+1 {{cuts the dim into unequal pieces}}
    %q, %k, %v = tess.split %y {axis = 1 : i64, sizes = array<i64: 4, 2, 2>}
      : (tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
    %o = tess.linear %q, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    return %o : tensor<2x8xf32>
  }
}
