// RUN: split-file %s %t
// RUN: tessera-opt %t/devices.mlir --tess-search-plan='devices=1' -verify-diagnostics
// RUN: tessera-opt %t/zero.mlir --tess-search-plan='devices=8 zero=2' -verify-diagnostics
// RUN: tessera-opt %t/cluster.mlir --tess-search-plan='devices=8 cluster=nosuch' -verify-diagnostics
// RUN: tessera-opt %t/remat.mlir --tess-search-plan='devices=8 remat=partial' -verify-diagnostics
// RUN: tessera-opt %t/forward.mlir --tess-search-plan='devices=8' -verify-diagnostics

// Each file is one error of tess-search-plan that its options or its module
// cause: its own (`devices`, `zero`), then those of the searches it runs,
// which name the option they share with it; search-plan.test has the
// decision itself.

//--- devices.mlir
// Tests that fewer than two devices name the option: one device has no
// plan to choose.
// expected-error@below {{tess-search-plan: devices 1: expected at least 2 (one device has no mesh or pipeline to choose: tess-fit-memory fits it)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- zero.mlir
// Tests that ZeRO-2, which no pipelined plan runs, names the option and the
// search that takes it.
// expected-error@below {{tess-search-plan: zero 2: expected 0 or 1 (-1: searched); no pipelined plan runs ZeRO-2 or 3, which tess-search-sharding searches alone}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- cluster.mlir
// Tests that a cluster neither built in nor a file names the option.
// expected-error@below {{tess-search-pipeline: cluster 'nosuch': }}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- remat.mlir
// Tests that an unknown recomputation names the option.
// expected-error@below {{tess-search-pipeline: remat 'partial': expected none, selective or full}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- forward.mlir
// Tests that a module without @forward (a training step already built) is
// an error: both searches plan the forward.
// expected-error@below {{the module has no @forward}}
module {
  func.func @forward_backward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}
