// RUN: tessera-opt %s -split-input-file -verify-diagnostics

// One case per numbered rule of the mesh attribute and of every op in
// TessCollectiveOps.td, named after the rule it breaks.

// expected-error@+1 {{C1: a mesh needs at least one axis}}
module attributes {tess.mesh = #tess.mesh<>} {}

// -----

// expected-error@+1 {{C2: mesh axis names must be non-empty and distinct}}
module attributes {tess.mesh = #tess.mesh<dp = 2, dp = 2>} {}

// -----

// expected-error@+1 {{C3: mesh axis 'tp' must have size >= 1, got 0}}
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 0>} {}

// -----

func.func @all_reduce_c1_no_mesh(%x: tensor<4xf32>) {
  // expected-error@+1 {{C1: needs a module with a tess.mesh attribute}}
  %0 = tess.all_reduce %x {axis = "dp"} : tensor<4xf32>
  return
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_reduce_c1(%x: tensor<4xf32>) {
    // expected-error@+1 {{C1: axis 'tp' is not an axis of the mesh #tess.mesh<dp = 2>}}
    %0 = tess.all_reduce %x {axis = "tp"} : tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_gather_c1(%x: tensor<4xf32>) {
    // expected-error@+1 {{C1: axis 'tp' is not an axis}}
    %0 = tess.all_gather %x {axis = "tp", dim = 0 : i64} : (tensor<4xf32>) -> tensor<8xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_gather_c2(%x: tensor<4xf32>) {
    // expected-error@+1 {{C2: dim 1 is not in [0, 1)}}
    %0 = tess.all_gather %x {axis = "dp", dim = 1 : i64} : (tensor<4xf32>) -> tensor<8xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_gather_c3(%x: tensor<4xf32>) {
    // expected-error@+1 {{C3: result must be [8] of 'f32', got 'tensor<4xf32>'}}
    %0 = tess.all_gather %x {axis = "dp", dim = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @reduce_scatter_c1(%x: tensor<4xf32>) {
    // expected-error@+1 {{C1: axis 'tp' is not an axis}}
    %0 = tess.reduce_scatter %x {axis = "tp", dim = 0 : i64} : (tensor<4xf32>) -> tensor<2xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @reduce_scatter_c2(%x: tensor<4xf32>) {
    // expected-error@+1 {{C2: dim -1 is not in [0, 1)}}
    %0 = tess.reduce_scatter %x {axis = "dp", dim = -1 : i64} : (tensor<4xf32>) -> tensor<2xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @reduce_scatter_c3(%x: tensor<3xf32>) {
    // expected-error@+1 {{C3: dim 0 of size 3 does not divide by the axis size 2}}
    %0 = tess.reduce_scatter %x {axis = "dp", dim = 0 : i64} : (tensor<3xf32>) -> tensor<1xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_to_all_c1(%x: tensor<4x4xf32>) {
    // expected-error@+1 {{C1: axis 'tp' is not an axis}}
    %0 = tess.all_to_all %x {axis = "tp", split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<4x4xf32>) -> tensor<8x2xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_to_all_c2(%x: tensor<4x4xf32>) {
    // expected-error@+1 {{C2: concat_dim 2 is not in [0, 2)}}
    %0 = tess.all_to_all %x {axis = "dp", split_dim = 1 : i64, concat_dim = 2 : i64} : (tensor<4x4xf32>) -> tensor<8x2xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @all_to_all_c3(%x: tensor<4x4xf32>) {
    // expected-error@+1 {{C3: result must be [8, 2] of 'f32', got 'tensor<4x4xf32>'}}
    %0 = tess.all_to_all %x {axis = "dp", split_dim = 1 : i64, concat_dim = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @shard_slice_c1(%x: tensor<4xf32>) {
    // expected-error@+1 {{C1: axis 'tp' is not an axis}}
    %0 = tess.shard_slice %x {axis = "tp", dim = 0 : i64} : (tensor<4xf32>) -> tensor<2xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @shard_slice_c2(%x: tensor<4xf32>) {
    // expected-error@+1 {{C2: dim 3 is not in [0, 1)}}
    %0 = tess.shard_slice %x {axis = "dp", dim = 3 : i64} : (tensor<4xf32>) -> tensor<2xf32>
    return
  }
}

// -----

module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @shard_slice_c3(%x: tensor<4xf32>) {
    // expected-error@+1 {{C3: result must be [2] of 'f32', got 'tensor<4xf32>'}}
    %0 = tess.shard_slice %x {axis = "dp", dim = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
    return
  }
}
