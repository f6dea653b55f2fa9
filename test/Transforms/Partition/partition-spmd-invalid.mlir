// RUN: tessera-opt %s -split-input-file -tess-partition-spmd -verify-diagnostics

// expected-error@+1 {{tess-partition-spmd needs a module with a tess.mesh}}
module {
  func.func @forward_backward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{C2: axis 'tp' of argument 0's layout is not an axis of the mesh #tess.mesh<dp = 2>}}
  func.func @forward_backward(%x: tensor<4xf32> {tess.layout = #tess.layout<[tp]>}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  // expected-error@+1 {{argument 0 cannot arrive as a partial sum}}
  func.func @forward_backward(%x: tensor<4xf32> {tess.layout = #tess.layout<[-] partial(dp)>}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// A piece-major region (PieceMajorRegion.h) whose plan reads the pieced dim
// whole: the input gradient's layout is replicated, so the partitioner
// would all-gather the concat's local blocks as contiguous ones, the wrong
// order. The check after the rewrite reports it instead of a silently
// wrong gradient.
module attributes {tess.mesh = #tess.mesh<tp = 2>} {
  func.func @forward_backward(%x: tensor<4x8xf32>,
                              %w: tensor<8x12xf32> {tess.parameter = "w", tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>})
      -> (tensor<4x8xf32>, tensor<8x12xf32> {tess.gradient = "w", tess.layout = #tess.layout<[-, tp]>, tess.pieces = array<i64: 1, 3>}) {
    %y = tess.linear %x, %w {tess.layouts = [#tess.layout<[-, tp]>]}
      : (tensor<4x8xf32>, tensor<8x12xf32>) -> tensor<4x12xf32>
    // expected-error@+1 {{tess-partition-spmd: the piece-major region of this op is broken (a compiler bug): tess.all_gather}}
    %q, %k, %v = tess.split %y {axis = 1 : i64, sizes = array<i64: 4, 4, 4>, tess.piece_major = "tp",
        tess.layouts = [#tess.layout<[-, tp]>, #tess.layout<[-, tp]>, #tess.layout<[-, tp]>]}
      : (tensor<4x12xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
    %c = tess.concat %q, %k, %v {axis = 1 : i64, tess.piece_major = "tp", tess.layouts = [#tess.layout<[-, tp]>]}
      : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x12xf32>
    %dx = tess.linear %c, %w {transpose_weight}
      : (tensor<4x12xf32>, tensor<8x12xf32>) -> tensor<4x8xf32>
    %g = tess.matmul %x, %c {transpose_lhs, tess.layouts = [#tess.layout<[-, tp]>]}
      : (tensor<4x8xf32>, tensor<4x12xf32>) -> tensor<8x12xf32>
    return %dx, %g : tensor<4x8xf32>, tensor<8x12xf32>
  }
}
