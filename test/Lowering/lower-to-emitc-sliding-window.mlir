// RUN: tessera-opt %s --tess-build-training=vocabulary-multiple=1 --tess-expand-weight-grads --tess-lower-to-emitc | FileCheck %s
// RUN: tessera-opt %s --tess-build-training=vocabulary-multiple=1 --tess-expand-weight-grads --tess-lower-to-emitc=target=cuda | FileCheck %s --check-prefix=CUDA

// The smallest model with a sliding-window attention (each token sees itself
// and the 2 before it): an embedding attending to itself, then the tied head.
func.func @forward(%ids: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %w = tess.parameter "wte" trainable : tensor<16x4xf32>
  %e = tess.embedding %w, %ids : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %h = tess.reshape %e : (tensor<2x8x4xf32>) -> tensor<2x1x8x4xf32>
  %a = tess.attention %h, %h, %h {causal, scale = 5.000000e-01 : f64, window = 3 : i64} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %x = tess.reshape %a : (tensor<2x1x8x4xf32>) -> tensor<2x8x4xf32>
  %y = tess.linear %x, %w {transpose_weight} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// Tests that the CPU target calls the windowed kernels, the window (an i64)
// in place of the causal flag, forward and backward.
// CHECK-NOT: call_opaque "tessera_cpu_attention"(
// CHECK: call_opaque "tessera_cpu_sliding_window_attention"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 3, 5.000000e-01, 0.000000e+00, 4 : index]
// CHECK: call_opaque "tessera_cpu_sliding_window_attention_grad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 4 : index, 5 : index, 6 : index, 3, 5.000000e-01, 0.000000e+00, 7 : index]

// Tests that the CUDA target calls its windowed kernels the same way (the
// stream last).
// CUDA-NOT: call_opaque "tessera_cuda_attention"(
// CUDA: call_opaque "tessera_cuda_sliding_window_attention"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 3, 5.000000e-01, 0.000000e+00
// CUDA: call_opaque "tessera_cuda_sliding_window_attention_grad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 4 : index, 5 : index, 6 : index, 3, 5.000000e-01, 0.000000e+00
