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
