// RUN: tessera-opt %s --tess-fit-memory='memory-limit=8388608' | FileCheck %s --check-prefix=NONE
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=7759462' | FileCheck %s --check-prefix=SELECTIVE
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=7340032' | FileCheck %s --check-prefix=FULL
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=6291456' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=OFFLOAD
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=5242880' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=OFFLOAD-FULL
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=8388608 remat=full' | FileCheck %s --check-prefix=PINNED
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=7340032 remat=selective' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=PINNED-OFFLOAD
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=8388608 offload=optimizer' -mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=OFFLOAD-PINNED
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=1 mesh=4' | FileCheck %s --check-prefix=MESH
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=1 mesh=4 remat=selective' | FileCheck %s --check-prefix=MESH-PINNED
// RUN: tessera-opt %s --tess-fit-memory='memory-limit=7759462' --tess-search-sharding | FileCheck %s --check-prefix=SEARCHED

// A two-layer pre-norm MLP stack (test/Transforms/Remat/remat.mlir's, at
// 4 x 64 tokens, width 128): the step compiled for one device needs
// 7.449 MiB without recomputation, 7.324 MiB with selective and 6.824 MiB
// with full; offloading the optimizer state (AdamW's moments, 2.131 MiB)
// saves what recomputation cannot.

// Tests that a step that fits as it is recomputes nothing: the plan decides
// nothing, and the forward is left as it was (the step was measured on a
// copy).
// NONE: module attributes {tess.plan = #tess.plan<>}
// NONE-NOT: @forward_backward

// Tests that the least recomputation that fits is the plan: selective under
// 7.4 MiB, full under 7 MiB.
// SELECTIVE: module attributes {tess.plan = #tess.plan<remat = "selective">}
// FULL: module attributes {tess.plan = #tess.plan<remat = "full">}

// Tests that when no recomputation fits with the optimizer state on the
// device the plan offloads it, with the least recomputation that fits so
// (none at 6 MiB, full at 5 MiB), and a remark says why.
// OFFLOAD: remark: no recomputation fits 6.000 MiB with the optimizer state on the device (7.449 MiB with --remat none, 7.324 MiB with --remat selective, 6.824 MiB with --remat full); the plan offloads it (the executable's --offload optimizer)
// OFFLOAD: module attributes {tess.plan = #tess.plan<offload = "optimizer">}
// OFFLOAD-FULL: remark: no recomputation fits 5.000 MiB with the optimizer state on the device (7.449 MiB with --remat none, 7.324 MiB with --remat selective, 6.824 MiB with --remat full); the plan offloads it
// OFFLOAD-FULL: module attributes {tess.plan = #tess.plan<remat = "full", offload = "optimizer">}

// Tests that the pins hold: full recomputation where none is needed;
// selective, which does not fit 7 MiB resident, offloaded; the offload
// where the state fits on the device, without a remark (nothing was
// decided against the user).
// PINNED: module attributes {tess.plan = #tess.plan<remat = "full">}
// PINNED-OFFLOAD: remark: no recomputation fits 7.000 MiB with the optimizer state on the device (7.324 MiB with --remat selective); the plan offloads it
// PINNED-OFFLOAD: module attributes {tess.plan = #tess.plan<remat = "selective", offload = "optimizer">}
// OFFLOAD-PINNED-NOT: remark
// OFFLOAD-PINNED: module attributes {tess.plan = #tess.plan<offload = "optimizer">}

// Tests that a mesh decides nothing here, whatever the limit (the search
// divides the step and checks its own bound): no recomputation, or the
// pinned one.
// MESH: module attributes {tess.plan = #tess.plan<>}
// MESH-PINNED: module attributes {tess.plan = #tess.plan<remat = "selective">}

// Tests that the search keeps the fit's decision in the plan it writes.
// SEARCHED: module attributes {tess.plan = #tess.plan<remat = "selective">}

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
