// RUN: split-file %s %t
// RUN: tessera-opt %t/devices.mlir --tess-search-plan='devices=1' -verify-diagnostics
// RUN: tessera-opt %t/zero.mlir --tess-search-plan='devices=8 zero=4' -verify-diagnostics
// RUN: tessera-opt %t/both.mlir --tess-search-plan='devices=8 zero=2 stages=2' -verify-diagnostics
// RUN: tessera-opt %t/schedule.mlir --tess-search-plan='devices=8 schedule=zigzag' -verify-diagnostics
// RUN: tessera-opt %t/cluster.mlir --tess-search-plan='devices=8 cluster=nosuch' -verify-diagnostics
// RUN: tessera-opt %t/remat.mlir --tess-search-plan='devices=8 remat=partial' -verify-diagnostics
// RUN: tessera-opt %t/forward.mlir --tess-search-plan='devices=8' -verify-diagnostics
// RUN: tessera-opt %t/mesh-axis.mlir --tess-search-plan='devices=8 mesh=pp=2' -verify-diagnostics
// RUN: tessera-opt %t/mesh-divides.mlir --tess-search-plan='devices=6 mesh=2x2' -verify-diagnostics
// RUN: tessera-opt %t/mesh-stages.mlir --tess-search-plan='devices=8 mesh=2x2 stages=4' -verify-diagnostics
// RUN: tessera-opt %t/mesh-parse.mlir --tess-search-plan='devices=8 mesh=2x' -verify-diagnostics
// RUN: tessera-opt %t/shard-mesh.mlir --tess-search-plan='devices=8 shard=h=dp' -verify-diagnostics
// RUN: tessera-opt %t/shard-stages.mlir --tess-search-plan='devices=8 mesh=2x2 shard=h=dp' -verify-diagnostics

// Each file is one error of tess-search-plan that its options or its module
// cause: its own (`devices`, `zero`, pins that leave no search), then those
// of the searches it runs, which name the option they share with it;
// search-plan.test has the decision itself.

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
// Tests that a ZeRO stage beyond 3 names the option.
// expected-error@below {{tess-search-plan: zero 4: expected a ZeRO stage 0 to 3 (-1: searched)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- both.mlir
// Tests that pins which leave out both searches name each: ZeRO-2, which no
// pipelined plan runs, and two stages, which no mesh plan has.
// expected-error@below {{tess-search-plan: zero 2: no pipelined plan runs ZeRO-2 or 3; stages 2 pins a pipeline's shape, which no one-stage mesh plan has: no plan takes both pins}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- schedule.mlir
// Tests that an unknown schedule pin names the option (the pipeline
// search's, which it pins).
// expected-error@below {{tess-search-pipeline: schedule 'zigzag': }}
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

//--- mesh-axis.mlir
// Tests that a pinned mesh with an axis a stage's mesh does not have names
// the axis: the pipeline search runs every stage on dp x tp.
// expected-error@below {{tess-search-plan: mesh pp=2: a stage's mesh has the axes dp and tp, not pp}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- mesh-divides.mlir
// Tests that devices a pinned mesh's do not divide are refused: every stage
// runs on the mesh.
// expected-error@below {{tess-search-plan: mesh 2x2 of 4 devices with devices 6: every stage runs on the mesh, so its devices divide them}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- mesh-stages.mlir
// Tests that a stage count the pinned mesh and the devices contradict names
// both: 8 devices are two stages of a 2x2 mesh.
// expected-error@below {{tess-search-plan: stages 4 with mesh 2x2: 8 devices are 2 stages of its 4}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- mesh-parse.mlir
// Tests that a mesh that does not parse names the option.
// expected-error@below {{tess-search-plan: mesh 2x: }}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- shard-mesh.mlir
// Tests that a layout pin without a pinned mesh is refused: it names the
// mesh's axes.
// expected-error@below {{tess-search-plan: shard h=dp: a pin names the axes of a pinned `mesh`}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- shard-stages.mlir
// Tests that layout pins on a mesh of fewer devices than the decision's
// leave out both searches: the pins are the mesh search's, the devices
// more than one stage.
// expected-error@below {{tess-search-plan: shard pins parameters' layouts on the mesh, which only the mesh search plans; mesh 2x2 is one stage's 4 devices, which no one-stage plan of 8 devices is: no plan takes both pins}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}
