// RUN: tessera-opt %s -tess-build-training -canonicalize -cse -tess-rematerialize=mode=selective | FileCheck %s --check-prefix=SEL
// RUN: tessera-opt %s -tess-build-training -canonicalize -cse -tess-rematerialize=mode=selective | FileCheck %s --check-prefix=SELUSE
// RUN: tessera-opt %s -tess-build-training -canonicalize -cse -tess-rematerialize=mode=full | FileCheck %s --check-prefix=FULL
// RUN: tessera-opt %s -tess-build-training -canonicalize -cse -tess-rematerialize='mode=full layers=h\.1' | FileCheck %s --check-prefix=LAYER1
// RUN: tessera-opt %s -tess-build-training -canonicalize -cse -tess-rematerialize=mode=none | FileCheck %s --check-prefix=NONE
// A module's tess.plan decides the mode over the option: selective here.
// RUN: sed -e '1i module attributes {tess.plan = #tess.plan<remat = "selective">} {' -e '$a }' %s \
// RUN:   | tessera-opt -tess-build-training -canonicalize -cse -tess-rematerialize=mode=none | FileCheck %s --check-prefix=SEL
// A chunk that says its own remat (the pipeline search's per stage) decides
// for its layers: layer 0 (unit 1) full, layer 1 the plan's none.
// RUN: sed -e '1i module attributes {tess.plan = #tess.plan<stages = 2, schedule = "1f1b", microbatches = 2, chunks = [#tess.chunk<device = 0, units = 0 to 1, remat = "full">, #tess.chunk<device = 1, units = 2 to 3>]>} {' -e '$a }' %s \
// RUN:   | tessera-opt -tess-build-training -canonicalize -cse -tess-rematerialize | FileCheck %s --check-prefix=CHUNK

// A two-layer pre-norm MLP stack (layer norm, linear, GELU, dropout,
// linear, residual) between an embedding and a final norm with a tied head. The backward
// reads, per layer: the layer's input (layer_norm_grad), the norm's output
// (the first linear's weight gradient), the first linear's output
// (gelu_grad) and the dropout's output (the second linear's weight
// gradient).

// Selective: the norm's output and the dropout's output (with the GELU under
// it) are recomputed right before the layer's backward, from the layer's
// input and the first linear's output, which stay kept; the dropout keeps
// its seed, so it draws the same mask. Layer 1's clones come after the
// head's backward, layer 0's after layer 1's.
// SEL-LABEL: func.func @forward_backward(
// SEL: %[[X0:[0-9]+]] = tess.embedding
// SEL: %[[N0:[0-9]+]] = tess.layer_norm %[[X0]]
// SEL: %[[F0:[0-9]+]] = tess.linear %[[N0]]
// SEL: %[[D0:[0-9]+]] = tess.dropout %{{[0-9]+}} {rate = 1.000000e-01 : f64}
// SEL: %[[X1:[0-9]+]] = tess.add %[[X0]],
// SEL: %[[N1:[0-9]+]] = tess.layer_norm %[[X1]]
// SEL: %[[F1:[0-9]+]] = tess.linear %[[N1]]
// SEL: %[[D1:[0-9]+]] = tess.dropout %{{[0-9]+}} {rate = 1.000000e-01 : f64, seed = 1 : i64}
// SEL: tess.cross_entropy_grad
// SEL: tess.linear_weight_grad
// SEL: %[[N1B:[0-9]+]] = tess.layer_norm %[[X1]] scale
// SEL-NEXT: %[[A1B:[0-9]+]] = tess.gelu %[[F1]]
// SEL-NEXT: %[[D1B:[0-9]+]] = tess.dropout %[[A1B]] {rate = 1.000000e-01 : f64, seed = 1 : i64, tess.recomputed}
// SEL-NEXT: tess.linear_weight_grad %[[D1B]]
// SEL: tess.gelu_grad %[[F1]],
// SEL: tess.linear_weight_grad %[[N1B]]
// SEL: tess.layer_norm_grad %[[X1]]
// SEL: %[[N0B:[0-9]+]] = tess.layer_norm %[[X0]] scale
// SEL-NEXT: %[[A0B:[0-9]+]] = tess.gelu %[[F0]]
// SEL-NEXT: %[[D0B:[0-9]+]] = tess.dropout %[[A0B]] {rate = 1.000000e-01 : f64, tess.recomputed}
// SEL-NEXT: tess.linear_weight_grad %[[D0B]]
// SEL: tess.gelu_grad %[[F0]],
// SEL: tess.linear_weight_grad %[[N0B]]
// SEL: tess.layer_norm_grad %[[X0]]
// SEL: return

// The originals are read by the forward alone.
// SELUSE-LABEL: func.func @forward_backward(
// SELUSE: %[[N0:[0-9]+]] = tess.layer_norm
// SELUSE: %[[D0:[0-9]+]] = tess.dropout
// SELUSE: %[[N1:[0-9]+]] = tess.layer_norm
// SELUSE: %[[D1:[0-9]+]] = tess.dropout
// SELUSE: tess.cross_entropy_grad
// SELUSE-NOT: %[[N0]]{{[^0-9]}}
// SELUSE-NOT: %[[D0]]{{[^0-9]}}
// SELUSE-NOT: %[[N1]]{{[^0-9]}}
// SELUSE-NOT: %[[D1]]{{[^0-9]}}
// SELUSE: return

// Full: everything the backward reads but the layer's input is recomputed
// from the input, the first linear included.
// FULL-LABEL: func.func @forward_backward(
// FULL: %[[X0:[0-9]+]] = tess.embedding
// FULL: %[[X1:[0-9]+]] = tess.add %[[X0]],
// FULL: tess.cross_entropy_grad
// FULL: %[[N1B:[0-9]+]] = tess.layer_norm %[[X1]] scale
// FULL-NEXT: %[[F1B:[0-9]+]] = tess.linear %[[N1B]]
// FULL-NEXT: %[[A1B:[0-9]+]] = tess.gelu %[[F1B]]
// FULL-NEXT: %[[D1B:[0-9]+]] = tess.dropout %[[A1B]] {rate = 1.000000e-01 : f64, seed = 1 : i64, tess.recomputed}
// FULL: tess.gelu_grad %[[F1B]],
// FULL: tess.layer_norm_grad %[[X1]]
// FULL: %[[N0B:[0-9]+]] = tess.layer_norm %[[X0]] scale
// FULL-NEXT: %[[F0B:[0-9]+]] = tess.linear %[[N0B]]
// FULL-NEXT: %[[A0B:[0-9]+]] = tess.gelu %[[F0B]]
// FULL-NEXT: %[[D0B:[0-9]+]] = tess.dropout %[[A0B]] {rate = 1.000000e-01 : f64, tess.recomputed}
// FULL: tess.gelu_grad %[[F0B]],
// FULL: tess.layer_norm_grad %[[X0]]
// FULL: return

// layers=h\.1: only layer 1 is recomputed.
// LAYER1-LABEL: func.func @forward_backward(
// LAYER1: tess.cross_entropy_grad
// LAYER1: = tess.layer_norm %
// LAYER1-NOT: = tess.layer_norm %
// LAYER1: return

// None: the backward recomputes nothing.
// NONE-LABEL: func.func @forward_backward(
// NONE: tess.cross_entropy_grad
// NONE-NOT: = tess.layer_norm %
// NONE-NOT: = tess.gelu %
// NONE: return

func.func @forward(%ids: tensor<1x4xi64>) -> tensor<1x4x16xf32> {
  %wte = tess.parameter "wte" trainable : tensor<16x8xf32>
  %g0 = tess.parameter "h.0.ln.weight" trainable : tensor<8xf32>
  %b0 = tess.parameter "h.0.ln.bias" trainable : tensor<8xf32>
  %w0 = tess.parameter "h.0.fc.weight" trainable : tensor<8x32xf32>
  %p0 = tess.parameter "h.0.proj.weight" trainable : tensor<32x8xf32>
  %g1 = tess.parameter "h.1.ln.weight" trainable : tensor<8xf32>
  %b1 = tess.parameter "h.1.ln.bias" trainable : tensor<8xf32>
  %w1 = tess.parameter "h.1.fc.weight" trainable : tensor<8x32xf32>
  %p1 = tess.parameter "h.1.proj.weight" trainable : tensor<32x8xf32>
  %gf = tess.parameter "ln_f.weight" trainable : tensor<8xf32>
  %bf = tess.parameter "ln_f.bias" trainable : tensor<8xf32>
  %x0 = tess.embedding %wte, %ids : (tensor<16x8xf32>, tensor<1x4xi64>) -> tensor<1x4x8xf32>
  %n0 = tess.layer_norm %x0 scale %g0 bias %b0 {epsilon = 1.0e-5 : f64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %f0 = tess.linear %n0, %w0 : (tensor<1x4x8xf32>, tensor<8x32xf32>) -> tensor<1x4x32xf32>
  %a0 = tess.gelu %f0 : tensor<1x4x32xf32>
  %d0 = tess.dropout %a0 {rate = 1.000000e-01 : f64} : tensor<1x4x32xf32>
  %o0 = tess.linear %d0, %p0 : (tensor<1x4x32xf32>, tensor<32x8xf32>) -> tensor<1x4x8xf32>
  %x1 = tess.add %x0, %o0 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %n1 = tess.layer_norm %x1 scale %g1 bias %b1 {epsilon = 1.0e-5 : f64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %f1 = tess.linear %n1, %w1 : (tensor<1x4x8xf32>, tensor<8x32xf32>) -> tensor<1x4x32xf32>
  %a1 = tess.gelu %f1 : tensor<1x4x32xf32>
  %d1 = tess.dropout %a1 {rate = 1.000000e-01 : f64} : tensor<1x4x32xf32>
  %o1 = tess.linear %d1, %p1 : (tensor<1x4x32xf32>, tensor<32x8xf32>) -> tensor<1x4x8xf32>
  %x2 = tess.add %x1, %o1 : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %nf = tess.layer_norm %x2 scale %gf bias %bf {epsilon = 1.0e-5 : f64} : (tensor<1x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %y = tess.linear %nf, %wte {transpose_weight} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  return %y : tensor<1x4x16xf32>
}

// Layer 1's backward reads its kept values; layer 0's recomputes all but
// its input, each clone marked tess.recomputed (tess-split-pipeline-stages
// puts it in its stage's backward).
// CHUNK-LABEL: func.func @forward_backward(
// CHUNK: %[[X0:[0-9]+]] = tess.embedding
// CHUNK: %[[X1:[0-9]+]] = tess.add %[[X0]],
// CHUNK: tess.cross_entropy_grad
// CHUNK-NOT: tess.recomputed
// CHUNK: tess.layer_norm_grad %[[X1]]
// CHUNK: tess.layer_norm %[[X0]] {{.*}}tess.recomputed
// CHUNK: tess.linear {{.*}}tess.recomputed
// CHUNK: tess.layer_norm_grad %[[X0]]
