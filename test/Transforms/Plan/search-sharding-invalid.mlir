// RUN: split-file %s %t
// RUN: tessera-opt %t/cluster.mlir --tess-search-sharding='cluster=nosuch mesh=4' -verify-diagnostics
// RUN: tessera-opt %t/pin.mlir --tess-search-sharding='mesh=4 shard=wte=[tp,-]' -verify-diagnostics
// RUN: tessera-opt %t/mesh.mlir --tess-search-sharding='mesh=3x3' -verify-diagnostics
// RUN: tessera-opt %t/fit.mlir --tess-search-sharding='mesh=4 memory-limit=1000' -verify-diagnostics
// RUN: tessera-opt %t/options.mlir --tess-search-sharding='mesh=4 zero=5' -verify-diagnostics
// RUN: tessera-opt %t/forward.mlir --tess-search-sharding='mesh=4' -verify-diagnostics
// RUN: tessera-opt %t/calibration.mlir --tess-search-sharding='mesh=4 calibration=compute=x' -verify-diagnostics
// RUN: tessera-opt %t/step.mlir --tess-search-sharding='mesh=4 loss=ctc' -verify-diagnostics
// RUN: tessera-opt %t/devices-mesh.mlir --tess-search-sharding='devices=4 mesh=2x2' -verify-diagnostics
// RUN: tessera-opt %t/devices-count.mlir --tess-search-sharding='devices=-2' -verify-diagnostics
// RUN: tessera-opt %t/devices-cluster.mlir --tess-search-sharding='devices=16' -verify-diagnostics
// RUN: tessera-opt %t/devices-fit.mlir --tess-search-sharding='devices=4 memory-limit=1000' -verify-diagnostics
// RUN: not tessera-opt %t/devices-fit.mlir --tess-search-sharding='devices=4 memory-limit=1000' 2>&1 | FileCheck %s --check-prefix=REASONS

// Each file is one error of tess-search-sharding, each naming what is wrong.

//--- cluster.mlir
// Tests that a cluster that is neither built in nor a file is an error.
// expected-error@below {{tess-search-sharding: --cluster nosuch: not a built-in cluster (h200, h200-multinode, a100-megatron) and not a readable file}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- pin.mlir
// Tests that a pin naming an axis the mesh has not contradicts the mesh.
// expected-error@below {{tess-search-sharding: --shard 'wte=[tp,-]': invalid tensor layout '[tp,-]': no mesh axis named 'tp' in dp=4}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- mesh.mlir
// Tests that a mesh larger than the cluster is an error.
// expected-error@below {{tess-search-sharding: --mesh dp=3,tp=3: needs 9 devices, but cluster 'h200' has 8}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- fit.mlir
// Tests that no plan within the memory limit is an error with the least
// memory any plan needs.
// expected-error@below {{tess-search-sharding: no sharding plan fits 0.001 MiB per device on mesh dp=4: the smallest plan the search can build needs 0.133 MiB per device}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- options.mlir
// Tests that a ZeRO stage outside 0-3 is an error.
// expected-error@below {{tess-search-sharding: zero 5: expected a ZeRO stage 0, 1, 2 or 3 (-1: searched)}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- forward.mlir
// Tests that the search needs the forward function: after
// tess-build-training it is too late to plan.
// expected-error@below {{tess-search-sharding: the module has no @forward with a body}}
module {
}

//--- calibration.mlir
// Tests that a calibration given as text must be the four numbers.
// expected-error@below {{tess-search-sharding: calibration 'compute=x': expected compute=S,optimizer=S,activations=B,saved=B,fixed=B with numbers >= 0, got 'compute=x'}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- step.mlir
// Tests that without a calibration the search measures the step it builds
// from @forward with its options: a loss tess-build-training does not know
// fails there, with its error.
// expected-error@below {{tess-build-training: loss must be causal-lm or mlm, got 'ctc'}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices-mesh.mlir
// Tests that `devices` and `mesh` together are an error: `devices` chooses
// the mesh that `mesh` pins.
// expected-error@below {{tess-search-sharding: devices 4 with mesh 2x2: `devices` chooses the mesh, which `mesh` pins; give one of them}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices-count.mlir
// Tests that a negative device count is an error.
// expected-error@below {{tess-search-sharding: devices -2: expected a device count >= 0 (0: `mesh`)}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices-cluster.mlir
// Tests that more devices than the cluster has is an error naming the
// option and the first mesh that does not fit.
// expected-error@below {{tess-search-sharding: devices 16: --mesh dp=16: needs 16 devices, but cluster 'h200' has 8}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices-fit.mlir
// Tests that no mesh of `devices` with a plan that fits is an error giving
// each mesh's reason, from the most data-parallel.
// REASONS:      error: tess-search-sharding: devices 4: no mesh of 4 devices fits a plan on cluster 'h200':
// REASONS-NEXT: dp=4: no sharding plan fits {{[0-9.]+}} MiB per device on mesh dp=4:
// REASONS-NEXT: dp=2,tp=2: no sharding plan fits {{[0-9.]+}} MiB per device on mesh dp=2,tp=2:
// REASONS-NEXT: tp=4: no sharding plan fits {{[0-9.]+}} MiB per device on mesh tp=4:
// expected-error@below {{tess-search-sharding: devices 4: no mesh of 4 devices fits a plan on cluster 'h200':}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}
