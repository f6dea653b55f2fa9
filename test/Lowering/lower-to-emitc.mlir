// RUN: tessera-opt %s --tess-build-training=vocabulary-multiple=1 --tess-expand-weight-grads --tess-fuse-epilogues --tess-lower-to-emitc=weights-file=/w.safetensors | FileCheck %s
// The lowering takes the step as tess-lowering-preparation leaves it: each
// pair one kernel call computes is one op (tess-fuse-epilogues).
// With the head padded to 64 classes the program still names the model's
// 16 (tess.vocabulary): the driver checks token ids against it.
// RUN: tessera-opt %s --tess-build-training --tess-expand-weight-grads --tess-fuse-epilogues --tess-lower-to-emitc=weights-file=/w.safetensors | FileCheck %s --check-prefix=PADDEDHEAD
// RUN: tessera-opt %s --tess-build-training=vocabulary-multiple=1 --tess-expand-weight-grads --tess-fuse-epilogues --tess-lower-to-emitc=print-arena-plan -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAN

// A tied embedding / output projection: the smallest forward with a loss,
// both gradient paths and a sum of cotangents.
func.func @forward(%ids: tensor<2x8xi64>) -> tensor<2x8x16xf32> {
  %w = tess.parameter "wte" trainable : tensor<16x4xf32>
  %e = tess.embedding %w, %ids : (tensor<16x4xf32>, tensor<2x8xi64>) -> tensor<2x8x4xf32>
  %y = tess.linear %e, %w {transpose_weight} : (tensor<2x8x4xf32>, tensor<16x4xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// CHECK: emitc.include "tessera/runtime/program.h"
// CHECK: emitc.include "tessera/runtime/lowering_support.h"
// The layout table: one row of 3 + 8 int64 per descriptor.
// CHECK: emitc.global static const @tessera_layouts : !emitc.array<{{[0-9]+}}xi64>
// CHECK: emitc.global static const @tessera_arena_bytes : i64 = [[BYTES:[0-9]+]]
// A host program's arena is thread_local: its data-parallel ranks may be threads.
// CHECK: emitc.verbatim "static thread_local uint8_t* tessera_arena = NULL;"

// CHECK-LABEL: emitc.func @tessera_forward_backward_steps(
// CHECK-SAME: %[[ARENA:[a-z0-9]+]]: !emitc.ptr<ui8>, %[[CONTEXT:[a-z0-9]+]]: !emitc.ptr<!emitc.opaque<"const tessera_step_context">>, %[[PARAMS:[a-z0-9]+]]: !emitc.ptr<!emitc.opaque<"const tessera_tensor">>,
// CHECK-SAME: %{{[a-z0-9]+}}: !emitc.ptr<!emitc.opaque<"const tessera_tensor">>, %[[TOKENS:[a-z0-9]+]]: !emitc.ptr<!emitc.opaque<"const tessera_tensor">>,
// CHECK-SAME: %[[TARGETS:[a-z0-9]+]]: !emitc.ptr<!emitc.opaque<"const tessera_tensor">>, %{{[a-z0-9]+}}: f32, %[[SEED:[a-z0-9]+]]: ui64,
// CHECK-SAME: %[[LOSS:[a-z0-9]+]]: !emitc.ptr<f32>, %[[GRADS:[a-z0-9]+]]: !emitc.ptr<!emitc.opaque<"tessera_tensor">>) -> i32
// CHECK-SAME: specifiers = ["static"]
// CHECK: %[[STATUS:.*]] = "emitc.variable"() <{value = 0 : i32}> : () -> !emitc.lvalue<i32>
// CHECK: %[[LAYOUTS:.*]] = get_global @tessera_layouts
// The parameter, by index into the caller's array.
// CHECK: %[[WTE:.*]] = subscript %[[PARAMS]]
// CHECK: %[[WTEP:.*]] = address_of %[[WTE]]
// An intermediate: a descriptor into the arena, from layout row 1.
// CHECK: call_opaque "tessera_layout_tensor"(%[[ARENA]], %[[LAYOUTS]]) {args = [0 : index, 1 : index, 1 : i32]}
// Each kernel call runs only while every earlier one succeeded.
// CHECK: %[[CURRENT:.*]] = load %[[STATUS]]
// CHECK: %[[OK:.*]] = cmp eq, %[[CURRENT]]
// CHECK: if %[[OK]] {
// CHECK: %[[S:.*]] = call_opaque "tessera_cpu_embedding"(%[[WTEP]], %[[TOKENS]], %{{.*}})
// CHECK: assign %[[S]] : i32 to %[[STATUS]]
// CHECK: call_opaque "tessera_cpu_linear"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"NULL">, 2 : index, 1 : i32]}
// The loss is written straight into *loss; the kernel reads rows views.
// The loss and its gradient, the backward's first op, are one call: the
// logits, the targets, the loss scale, the loss and the gradient.
// CHECK: call_opaque "tessera_layout_tensor"(%[[LOSS]],
// CHECK: call_opaque "tessera_view_tensor"
// CHECK: call_opaque "tessera_view_tensor"(%[[TARGETS]],
// CHECK-NOT: call_opaque "tessera_cpu_cross_entropy"(
// CHECK: call_opaque "tessera_cpu_cross_entropy_with_grad"({{.*}}) {args = [0 : index, 1 : index, #emitc.opaque<"NULL">, 2 : index, 3 : index, 4 : index, -100]}
// CHECK-NOT: call_opaque "tessera_cpu_cross_entropy_grad"
// CHECK: call_opaque "tessera_cpu_matmul"
// CHECK: call_opaque "tessera_cpu_embedding_grad"
// The gradient (the sum of both paths) lands in the caller's gradient 0.
// CHECK: subscript %[[GRADS]]
// CHECK: call_opaque "tessera_view_tensor"
// CHECK: call_opaque "tessera_cpu_binary"({{.*}}) {args = [#emitc.opaque<"TESSERA_ADD">, 0 : index, 1 : index, 2 : index]}
// ...and is announced to the driver right away (parameter 0).
// CHECK: call_opaque "tessera_gradient_ready"(%[[CONTEXT]]) {args = [0 : index, 0 : i32]}
// CHECK: %[[RESULT:.*]] = load %[[STATUS]]
// CHECK: return %[[RESULT]] : i32

// The function of program.h: acquire the arena once, then run the steps.
// CHECK-LABEL: emitc.func @tessera_forward_backward(
// CHECK: get_global @tessera_arena
// CHECK: call_opaque "tessera_arena_acquire"
// CHECK: call @tessera_forward_backward_steps

// CHECK: emitc.global static const @tessera_parameters : !emitc.array<1x!emitc.opaque<"tessera_tensor_info">> = #emitc.opaque<"{
// CHECK-SAME: {\22wte\22, TESSERA_F32, 2, {16, 4}}}">
// CHECK: emitc.global static @tessera_program_definition : !emitc.opaque<"tessera_program">
// CHECK-SAME: /*weights_file=*/\22/w.safetensors\22
// CHECK-SAME: /*loss_kind=*/TESSERA_LOSS_CAUSAL_LM
// CHECK-SAME: /*batch=*/2,
// CHECK-SAME: /*sequence=*/8,
// CHECK-SAME: /*vocabulary=*/16,
// CHECK-SAME: /*forward_backward=*/tessera_forward_backward,
// CHECK-SAME: /*device=*/TESSERA_DEVICE_HOST,
// One linear forward (2 x 2*8*4*16) and its two gradient matmuls.
// CHECK-SAME: /*flops_per_micro_batch=*/6144,\0A /*parameter_splits=*/NULL,\0A /*buffer_splits=*/NULL,\0A /*pipeline=*/NULL,\0A /*parameter_step_dtypes=*/NULL,\0A /*plan=*/NULL,\0A /*offload_optimizer=*/0,\0A /*gradient_write_positions=*/tessera_gradient_write_positions,\0A /*parameter_read_intervals=*/tessera_parameter_read_intervals,\0A /*gradient_partial_axes=*/NULL,\0A /*gradient_zero_stages=*/NULL,\0A /*gradient_whole=*/NULL}">
// PADDEDHEAD: call_opaque "tessera_cpu_cross_entropy_with_grad"
// PADDEDHEAD: emitc.global static @tessera_program_definition
// PADDEDHEAD-SAME: /*vocabulary=*/16,
// CHECK-LABEL: emitc.func @main(
// CHECK: call_opaque "tessera_train_main"
// The training builder's functions are gone: the runtime runs AdamW.
// CHECK-NOT: func.func

// PLAN: arena: {{[0-9]+}} buffers, {{[0-9]+}} bytes ({{[0-9]+}} without reuse)
// PLAN: buffer {{ *}}0  offset {{ *}}{{[0-9]+}}  bytes {{ *}}256  live [0, {{[0-9]+}}]  tensor<2x8x4xf32>
// The logits' block is also the loss gradient's (written in place): one
// [2, 8, 16] buffer, live until the gradient's reader.
// PLAN: bytes {{ *}}1024  live [1, 6]  tensor<2x8x16xf32>
// PLAN-NOT: tensor<2x8x16xf32>
