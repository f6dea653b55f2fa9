// RUN: tessera-opt %s --tess-build-training=vocabulary-multiple=1 --tess-expand-weight-grads --tess-lower-to-emitc | FileCheck %s
// RUN: tessera-opt %s --tess-build-training=vocabulary-multiple=1 --tess-expand-weight-grads --tess-lower-to-emitc=target=cuda | FileCheck %s --check-prefix=CUDA

// The smallest model with Gemma-2's attention: a softcapped local layer (a
// window of 3) and a softcapped global one, then the tied head.
func.func @forward(%ids: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %w = tess.parameter "wte" trainable : tensor<16x4xf32>
  %e = tess.embedding %w, %ids : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %h = tess.reshape %e : (tensor<2x8x4xf32>) -> tensor<2x1x8x4xf32>
  %a = tess.attention %h, %h, %h {causal, scale = 5.000000e-01 : f64, softcap = 5.000000e+00 : f64, window = 3 : i64} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %g = tess.attention %a, %a, %a {causal, scale = 5.000000e-01 : f64, softcap = 5.000000e+00 : f64} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %x = tess.reshape %g : (tensor<2x1x8x4xf32>) -> tensor<2x8x4xf32>
  %y = tess.linear %x, %w {transpose_weight} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// Tests that the CPU target calls the softcapped kernels with causal, the
// window (0 for none), the scale and the softcap, forward and backward.
// CHECK-NOT: call_opaque "tessera_cpu_attention"(
// CHECK-NOT: call_opaque "tessera_cpu_sliding_window_attention"(
// CHECK: call_opaque "tessera_cpu_softcapped_attention"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 1 : i32, 3, 5.000000e-01, 5.000000e+00, 0.000000e+00, 4 : index]
// CHECK: call_opaque "tessera_cpu_softcapped_attention"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 1 : i32, 0, 5.000000e-01, 5.000000e+00, 0.000000e+00, 4 : index]
// CHECK: call_opaque "tessera_cpu_softcapped_attention_grad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 4 : index, 5 : index, 6 : index, 1 : i32, 0, 5.000000e-01, 5.000000e+00, 0.000000e+00, 7 : index]
// CHECK: call_opaque "tessera_cpu_softcapped_attention_grad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"NULL">, 3 : index, 4 : index, 5 : index, 6 : index, 1 : i32, 3, 5.000000e-01, 5.000000e+00, 0.000000e+00, 7 : index]

// Tests that the CUDA target calls its softcapped kernels the same way (the
// stream last).
// CUDA-NOT: call_opaque "tessera_cuda_attention"(
// CUDA-COUNT-2: call_opaque "tessera_cuda_softcapped_attention"(
// CUDA-COUNT-2: call_opaque "tessera_cuda_softcapped_attention_grad"(
