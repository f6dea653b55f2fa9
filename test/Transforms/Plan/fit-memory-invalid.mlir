// RUN: split-file %s %t
// RUN: tessera-opt %t/nothing.mlir --tess-fit-memory='memory-limit=4194304' -verify-diagnostics
// RUN: tessera-opt %t/one-device.mlir --tess-fit-memory='memory-limit=4194304 offload=none cluster=%S/../../Analysis/Inputs/h200-4.5mib.json' -verify-diagnostics
// RUN: tessera-opt %t/resident.mlir --tess-fit-memory='memory-limit=6291456 offload=none' -verify-diagnostics
// RUN: tessera-opt %t/remat.mlir --tess-fit-memory='remat=partial' -verify-diagnostics
// RUN: tessera-opt %t/offload.mlir --tess-fit-memory='offload=host' -verify-diagnostics
// RUN: tessera-opt %t/mesh.mlir --tess-fit-memory='offload=optimizer mesh=4' -verify-diagnostics
// RUN: tessera-opt %t/devices.mlir --tess-fit-memory='offload=optimizer devices=4' -verify-diagnostics
// RUN: tessera-opt %t/devices-mesh.mlir --tess-fit-memory='devices=4 mesh=2x2' -verify-diagnostics
// RUN: tessera-opt %t/devices-count.mlir --tess-fit-memory='devices=-1' -verify-diagnostics
// RUN: tessera-opt %t/cluster.mlir --tess-fit-memory='cluster=nosuch' -verify-diagnostics
// RUN: tessera-opt %t/limit.mlir --tess-fit-memory='memory-limit=-1' -verify-diagnostics
// RUN: tessera-opt %t/forward.mlir --tess-fit-memory -verify-diagnostics

// Each file is one error of tess-fit-memory. The step of fit-memory.mlir
// needs 7.449 MiB without recomputation, 6.824 MiB with full, 4.693 MiB
// with full and the optimizer offloaded.

//--- nothing.mlir
// Tests that a limit below every plan, the offloaded one included, is an
// error with what each mode needs and what offloading would leave on the
// device.
// expected-error@below {{no plan fits 4.000 MiB on one device: the compiled step needs 7.449 MiB with --remat none, 7.324 MiB with --remat selective, 6.824 MiB with --remat full (its arena planned from liveness and the training state); with the executable's --offload optimizer (--remat full) the GPU would hold 4.693 MiB and host memory 3.196 MiB, which does not fit either; raise --memory-limit, lower --dim batch or plan several of cluster 'h200''s 8 devices (--devices N)}}
module {
  func.func @forward(%ids: tensor<4x64xi64>) -> tensor<4x64x128xf32> {
    %wte = tess.parameter "wte" trainable : tensor<128x128xf32>
    %g0 = tess.parameter "h.0.ln.weight" trainable : tensor<128xf32>
    %b0 = tess.parameter "h.0.ln.bias" trainable : tensor<128xf32>
    %w0 = tess.parameter "h.0.fc.weight" trainable : tensor<128x512xf32>
    %p0 = tess.parameter "h.0.proj.weight" trainable : tensor<512x128xf32>
    %g1 = tess.parameter "h.1.ln.weight" trainable : tensor<128xf32>
    %b1 = tess.parameter "h.1.ln.bias" trainable : tensor<128xf32>
    %w1 = tess.parameter "h.1.fc.weight" trainable : tensor<128x512xf32>
    %p1 = tess.parameter "h.1.proj.weight" trainable : tensor<512x128xf32>
    %gf = tess.parameter "ln_f.weight" trainable : tensor<128xf32>
    %bf = tess.parameter "ln_f.bias" trainable : tensor<128xf32>
    %x0 = tess.embedding %wte, %ids : (tensor<128x128xf32>, tensor<4x64xi64>) -> tensor<4x64x128xf32>
    %n0 = tess.layer_norm %x0 scale %g0 bias %b0 {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %f0 = tess.linear %n0, %w0 : (tensor<4x64x128xf32>, tensor<128x512xf32>) -> tensor<4x64x512xf32>
    %a0 = tess.gelu %f0 : tensor<4x64x512xf32>
    %d0 = tess.dropout %a0 {rate = 1.000000e-01 : f64} : tensor<4x64x512xf32>
    %o0 = tess.linear %d0, %p0 : (tensor<4x64x512xf32>, tensor<512x128xf32>) -> tensor<4x64x128xf32>
    %x1 = tess.add %x0, %o0 : (tensor<4x64x128xf32>, tensor<4x64x128xf32>) -> tensor<4x64x128xf32>
    %n1 = tess.layer_norm %x1 scale %g1 bias %b1 {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %f1 = tess.linear %n1, %w1 : (tensor<4x64x128xf32>, tensor<128x512xf32>) -> tensor<4x64x512xf32>
    %a1 = tess.gelu %f1 : tensor<4x64x512xf32>
    %d1 = tess.dropout %a1 {rate = 1.000000e-01 : f64} : tensor<4x64x512xf32>
    %o1 = tess.linear %d1, %p1 : (tensor<4x64x512xf32>, tensor<512x128xf32>) -> tensor<4x64x128xf32>
    %x2 = tess.add %x1, %o1 : (tensor<4x64x128xf32>, tensor<4x64x128xf32>) -> tensor<4x64x128xf32>
    %nf = tess.layer_norm %x2 scale %gf bias %bf {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %y = tess.linear %nf, %wte {transpose_weight} : (tensor<4x64x128xf32>, tensor<128x128xf32>) -> tensor<4x64x128xf32>
    return %y : tensor<4x64x128xf32>
  }
}

//--- one-device.mlir
// Tests that on a cluster of one device the error points at another
// cluster, not at --devices.
// expected-error@below {{no plan fits 4.000 MiB on one device: the compiled step needs 7.449 MiB with --remat none, 7.324 MiB with --remat selective, 6.824 MiB with --remat full (its arena planned from liveness and the training state); raise --memory-limit, lower --dim batch or use a cluster of more devices (--cluster)}}
module {
  func.func @forward(%ids: tensor<4x64xi64>) -> tensor<4x64x128xf32> {
    %wte = tess.parameter "wte" trainable : tensor<128x128xf32>
    %g0 = tess.parameter "h.0.ln.weight" trainable : tensor<128xf32>
    %b0 = tess.parameter "h.0.ln.bias" trainable : tensor<128xf32>
    %w0 = tess.parameter "h.0.fc.weight" trainable : tensor<128x512xf32>
    %p0 = tess.parameter "h.0.proj.weight" trainable : tensor<512x128xf32>
    %g1 = tess.parameter "h.1.ln.weight" trainable : tensor<128xf32>
    %b1 = tess.parameter "h.1.ln.bias" trainable : tensor<128xf32>
    %w1 = tess.parameter "h.1.fc.weight" trainable : tensor<128x512xf32>
    %p1 = tess.parameter "h.1.proj.weight" trainable : tensor<512x128xf32>
    %gf = tess.parameter "ln_f.weight" trainable : tensor<128xf32>
    %bf = tess.parameter "ln_f.bias" trainable : tensor<128xf32>
    %x0 = tess.embedding %wte, %ids : (tensor<128x128xf32>, tensor<4x64xi64>) -> tensor<4x64x128xf32>
    %n0 = tess.layer_norm %x0 scale %g0 bias %b0 {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %f0 = tess.linear %n0, %w0 : (tensor<4x64x128xf32>, tensor<128x512xf32>) -> tensor<4x64x512xf32>
    %a0 = tess.gelu %f0 : tensor<4x64x512xf32>
    %d0 = tess.dropout %a0 {rate = 1.000000e-01 : f64} : tensor<4x64x512xf32>
    %o0 = tess.linear %d0, %p0 : (tensor<4x64x512xf32>, tensor<512x128xf32>) -> tensor<4x64x128xf32>
    %x1 = tess.add %x0, %o0 : (tensor<4x64x128xf32>, tensor<4x64x128xf32>) -> tensor<4x64x128xf32>
    %n1 = tess.layer_norm %x1 scale %g1 bias %b1 {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %f1 = tess.linear %n1, %w1 : (tensor<4x64x128xf32>, tensor<128x512xf32>) -> tensor<4x64x512xf32>
    %a1 = tess.gelu %f1 : tensor<4x64x512xf32>
    %d1 = tess.dropout %a1 {rate = 1.000000e-01 : f64} : tensor<4x64x512xf32>
    %o1 = tess.linear %d1, %p1 : (tensor<4x64x512xf32>, tensor<512x128xf32>) -> tensor<4x64x128xf32>
    %x2 = tess.add %x1, %o1 : (tensor<4x64x128xf32>, tensor<4x64x128xf32>) -> tensor<4x64x128xf32>
    %nf = tess.layer_norm %x2 scale %gf bias %bf {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %y = tess.linear %nf, %wte {transpose_weight} : (tensor<4x64x128xf32>, tensor<128x128xf32>) -> tensor<4x64x128xf32>
    return %y : tensor<4x64x128xf32>
  }
}

//--- resident.mlir
// Tests that an offload pinned off leaves the plans with the state on the
// device, none of which fits 6 MiB.
// expected-error@below {{no plan fits 6.000 MiB on one device: the compiled step needs 7.449 MiB with --remat none, 7.324 MiB with --remat selective, 6.824 MiB with --remat full (its arena planned from liveness and the training state); raise --memory-limit, lower --dim batch or plan several of cluster 'h200''s 8 devices (--devices N)}}
module {
  func.func @forward(%ids: tensor<4x64xi64>) -> tensor<4x64x128xf32> {
    %wte = tess.parameter "wte" trainable : tensor<128x128xf32>
    %g0 = tess.parameter "h.0.ln.weight" trainable : tensor<128xf32>
    %b0 = tess.parameter "h.0.ln.bias" trainable : tensor<128xf32>
    %w0 = tess.parameter "h.0.fc.weight" trainable : tensor<128x512xf32>
    %p0 = tess.parameter "h.0.proj.weight" trainable : tensor<512x128xf32>
    %g1 = tess.parameter "h.1.ln.weight" trainable : tensor<128xf32>
    %b1 = tess.parameter "h.1.ln.bias" trainable : tensor<128xf32>
    %w1 = tess.parameter "h.1.fc.weight" trainable : tensor<128x512xf32>
    %p1 = tess.parameter "h.1.proj.weight" trainable : tensor<512x128xf32>
    %gf = tess.parameter "ln_f.weight" trainable : tensor<128xf32>
    %bf = tess.parameter "ln_f.bias" trainable : tensor<128xf32>
    %x0 = tess.embedding %wte, %ids : (tensor<128x128xf32>, tensor<4x64xi64>) -> tensor<4x64x128xf32>
    %n0 = tess.layer_norm %x0 scale %g0 bias %b0 {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %f0 = tess.linear %n0, %w0 : (tensor<4x64x128xf32>, tensor<128x512xf32>) -> tensor<4x64x512xf32>
    %a0 = tess.gelu %f0 : tensor<4x64x512xf32>
    %d0 = tess.dropout %a0 {rate = 1.000000e-01 : f64} : tensor<4x64x512xf32>
    %o0 = tess.linear %d0, %p0 : (tensor<4x64x512xf32>, tensor<512x128xf32>) -> tensor<4x64x128xf32>
    %x1 = tess.add %x0, %o0 : (tensor<4x64x128xf32>, tensor<4x64x128xf32>) -> tensor<4x64x128xf32>
    %n1 = tess.layer_norm %x1 scale %g1 bias %b1 {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %f1 = tess.linear %n1, %w1 : (tensor<4x64x128xf32>, tensor<128x512xf32>) -> tensor<4x64x512xf32>
    %a1 = tess.gelu %f1 : tensor<4x64x512xf32>
    %d1 = tess.dropout %a1 {rate = 1.000000e-01 : f64} : tensor<4x64x512xf32>
    %o1 = tess.linear %d1, %p1 : (tensor<4x64x512xf32>, tensor<512x128xf32>) -> tensor<4x64x128xf32>
    %x2 = tess.add %x1, %o1 : (tensor<4x64x128xf32>, tensor<4x64x128xf32>) -> tensor<4x64x128xf32>
    %nf = tess.layer_norm %x2 scale %gf bias %bf {epsilon = 1.0e-5 : f64} : (tensor<4x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<4x64x128xf32>
    %y = tess.linear %nf, %wte {transpose_weight} : (tensor<4x64x128xf32>, tensor<128x128xf32>) -> tensor<4x64x128xf32>
    return %y : tensor<4x64x128xf32>
  }
}

//--- remat.mlir
// Tests that a recomputation that is no mode is an error naming the option.
// expected-error@below {{tess-fit-memory: remat 'partial': expected none, selective or full (empty: the least that fits)}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- offload.mlir
// Tests that an offload other than the optimizer's is an error.
// expected-error@below {{tess-fit-memory: offload 'host': expected optimizer or none (empty: offloaded only when nothing else fits)}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- mesh.mlir
// Tests that an offload pinned on a mesh is an error: the executable
// offloads one device's whole optimizer state (#tess.plan's C7).
// expected-error@below {{tess-fit-memory: offload=optimizer on mesh dp=4: an offloaded plan is one device's}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices.mlir
// Tests that an offload pinned for the mesh of several devices the search
// chooses (`devices`) is an error, as on a mesh.
// expected-error@below {{tess-fit-memory: offload=optimizer on 4 devices: an offloaded plan is one device's}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices-mesh.mlir
// Tests that `devices` and `mesh` together are an error: the search
// chooses the mesh that `mesh` pins.
// expected-error@below {{tess-fit-memory: devices 4 with mesh dp=2,tp=2: the search chooses the mesh of `devices`, which `mesh` pins; give one of them}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- devices-count.mlir
// Tests that a negative device count is an error.
// expected-error@below {{tess-fit-memory: devices -1: expected a device count >= 0 (0: the mesh's)}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- cluster.mlir
// Tests that a cluster that is neither built in nor a file is an error.
// expected-error@below {{tess-fit-memory: --cluster nosuch: not a built-in cluster (h200, h200-multinode, a100-megatron) and not a readable file}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- limit.mlir
// Tests that a negative limit is an error.
// expected-error@below {{tess-fit-memory: memory-limit -1: expected bytes >= 0}}
module {
  func.func @forward(%ids: tensor<8x16xi64>) -> tensor<8x16x64xf32> {
    %wte = tess.parameter "wte" trainable : tensor<512x64xf32>
    %x = tess.embedding %wte, %ids : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
    return %x : tensor<8x16x64xf32>
  }
}

//--- forward.mlir
// Tests that the fit needs the forward function the step is built from.
// expected-error@below {{tess-fit-memory: the module has no @forward (the fit measures the step built from it, before tess-build-training)}}
module {
}
