// RUN: split-file %s %t
// RUN: tessera-opt %t/cluster.mlir --tess-search-pipeline='cluster=nosuch' -verify-diagnostics
// RUN: tessera-opt %t/limit.mlir --tess-search-pipeline='memory-limit=-1' -verify-diagnostics
// RUN: tessera-opt %t/devices.mlir --tess-search-pipeline='devices=9' -verify-diagnostics
// RUN: tessera-opt %t/stages.mlir --tess-search-pipeline='stages=-1' -verify-diagnostics
// RUN: tessera-opt %t/micro-batches.mlir --tess-search-pipeline='micro-batches=-2' -verify-diagnostics
// RUN: tessera-opt %t/tensor-parallel.mlir --tess-search-pipeline='tensor-parallel=-1' -verify-diagnostics
// RUN: tessera-opt %t/schedule.mlir --tess-search-pipeline='schedule=zb' -verify-diagnostics
// RUN: tessera-opt %t/remat.mlir --tess-search-pipeline='remat=partial' -verify-diagnostics
// RUN: tessera-opt %t/zero.mlir --tess-search-pipeline='zero=2' -verify-diagnostics
// RUN: tessera-opt %t/stage-units.mlir --tess-search-pipeline='stage-units=2,2' -verify-diagnostics
// RUN: tessera-opt %t/stage-units-empty.mlir --tess-search-pipeline='stages=2 stage-units=0,4' -verify-diagnostics
// RUN: tessera-opt %t/forward.mlir --tess-search-pipeline -verify-diagnostics
// RUN: tessera-opt %t/inputs.mlir --tess-search-pipeline -verify-diagnostics
// RUN: tessera-opt %t/no-inputs.mlir --tess-search-pipeline -verify-diagnostics
// RUN: tessera-opt %t/batch.mlir --tess-search-pipeline -verify-diagnostics

// Each file is one error of tess-search-pipeline that its options or its
// module cause; search-pipeline.test has the search's own (a pin the
// program cannot take, no plan that fits).

//--- cluster.mlir
// Tests that a cluster neither built in nor a file names the option.
// expected-error@below {{tess-search-pipeline: cluster 'nosuch': }}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- limit.mlir
// Tests that a negative memory limit names the option.
// expected-error@below {{tess-search-pipeline: memory-limit -1: expected bytes >= 0 (0: the cluster's device memory)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- devices.mlir
// Tests that more devices than the cluster has name the option.
// expected-error@below {{tess-search-pipeline: devices 9: cluster 'h200' has 8 devices (0: all of them)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- stages.mlir
// Tests that a negative stage count names the option.
// expected-error@below {{tess-search-pipeline: stages -1: expected a positive count (0: searched)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- micro-batches.mlir
// Tests that a negative micro-batch count names the option.
// expected-error@below {{tess-search-pipeline: micro-batches -2: expected a positive count (0: searched)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- tensor-parallel.mlir
// Tests that a negative tensor-parallel degree names the option.
// expected-error@below {{tess-search-pipeline: tensor-parallel -1: expected a positive count (0: searched)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- schedule.mlir
// Tests that an unknown schedule names the option.
// expected-error@below {{tess-search-pipeline: schedule 'zb': }}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- remat.mlir
// Tests that an unknown recomputation names the option.
// expected-error@below {{tess-search-pipeline: remat 'partial': expected none, selective or full (empty: searched per stage)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- zero.mlir
// Tests that a ZeRO stage beyond ZeRO-1 names the option: a pipeline's
// stages shard their optimizer state over their dp replicas or not.
// expected-error@below {{tess-search-pipeline: zero 2: expected 0 or 1 (ZeRO-1 inside the stage mesh; -1: searched)}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- stage-units.mlir
// Tests that stage boundaries without the stage count name the option.
// expected-error@below {{tess-search-pipeline: stage-units: 2 counts for unpinned stages; pin stages and give each one's units}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- stage-units-empty.mlir
// Tests that a stage of no units names the option.
// expected-error@below {{tess-search-pipeline: stage-units: a stage of 0 units; expected at least 1}}
module {
  func.func @forward(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- forward.mlir
// Tests that the pass needs the forward: it plans before the training step
// is built.
// expected-error@below {{the module has no @forward (the pipeline search plans the forward, before tess-build-training)}}
module {
  func.func @step(%ids: tensor<4x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- inputs.mlir
// Tests that inputs of different leading dims leave no batch to plan.
// expected-error@below {{@forward's inputs do not share a leading batch dim (input type 'tensor<2x8xi64>')}}
module {
  func.func @forward(%ids: tensor<4x8xi64>, %mask: tensor<2x8xi64>) -> tensor<4x8xi64> {
    return %ids : tensor<4x8xi64>
  }
}

//--- no-inputs.mlir
// Tests that a forward without inputs has no batch to plan.
// expected-error@below {{@forward has no inputs: no batch to plan}}
module {
  func.func @forward() -> tensor<4x8xf32> {
    %w = tess.parameter "w" trainable : tensor<4x8xf32>
    return %w : tensor<4x8xf32>
  }
}

//--- batch.mlir
// Tests that a forward whose values do not keep the batch leading cannot be
// taken to the batches the search profiles, and says which op.
// expected-error@below {{cannot take @forward to batch 2}}
module {
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
    // expected-error@below {{cannot plan @forward at batch 2: this op's result, computed from the inputs, has no leading batch dim of 4}}
    %t = tess.transpose %x {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    return %t : tensor<8x4xf32>
  }
}
