//===- Passes.td - Tessera's lowering passes ----------------*- tablegen -*-===//
//
// From the training program in `tess` ops to code the host compiler builds.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LOWERING_PASSES_TD
#define TESSERA_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def LowerToEmitC : Pass<"tess-lower-to-emitc", "::mlir::ModuleOp"> {
  let summary = "Lower @forward_backward to C++ (EmitC) over the runtime's "
                "CPU or CUDA kernels";
  let description = [{
    Turns the module that `tess-build-training` produced into one EmitC
    translation unit: the training executable's program for
    `tessera_train_main` (runtime/include/tessera/runtime/program.h).

    - `@forward_backward` becomes `tessera_forward_backward`, an
      `emitc.func` with exactly the `forward_backward` signature of
      `tessera_program` (step context, parameters, buffers, tokens, targets,
      loss scale, seed, loss, gradients). Its body acquires the arena once
      (`tessera_arena_acquire`) and calls `tessera_forward_backward_steps`:
      one `emitc.call_opaque` per `tess` op to the `tessera_cpu_*` kernel
      the interpreter (lib/Execution/Interpreter.cpp) calls for it, with the
      same attributes, each under `if (status == 0)` so the first failing
      kernel's status is returned and nothing after it runs.
    - Tensors live in one static arena planned from liveness
      (ArenaPlanning.h); the layout table `tessera_layouts` (offset, dtype,
      rank, dims per descriptor) and the arena size are `emitc.global`s.
      Reshapes alias their input; results returned once are written straight
      into the caller's loss and gradient buffers; others are copied there.
      Right after the last kernel writing gradient i, the step calls
      `tessera_gradient_ready(context, i)` (the driver's hook for reducing
      gradients while the backward pass goes on).
    - Constants are `emitc.global` byte tables copied into their block.
    - The `tessera_program` table (names, dtypes and shapes of the
      parameters and buffers in argument order; batch, sequence, vocabulary,
      loss kind, precision, ignore index, weights file, device, the model
      FLOPs of one call counted from the step's contractions) and
      `int main(argc, argv)` calling `tessera_train_main`
      (`tessera_cuda_train_main` for `target=cuda`).

    Every other function (`@forward`, `@optimizer_step`) is removed: the
    runtime applies AdamW itself. An op without a kernel is an error
    naming it.

    `target=cuda` keeps the same op -> kernel mapping and calls
    `tessera_cuda_*` (cuda_kernels.h) with a stream last (the context's, or
    the program's own), over an arena in device memory
    (`tessera_cuda_arena_acquire`). The program's tensors are device memory
    (`TESSERA_DEVICE_CUDA`): parameters, buffers, tokens and targets are read
    in place and gradients written into the driver's device tensors; the
    loss scale is splatted into a device scalar and the loss read back at
    the end, where `tessera_cuda_finish_step` synchronizes once, checks the
    kernels' device errors and makes the first failure the returned status
    and `tessera_cpu_last_error()` (cuda_lowering_support.h).

    A module that `tess-split-pipeline-stages` cut into stages (its
    `tess.pipeline` attribute) becomes a pipelined program instead: each
    `@stage{c}_forward` and `@stage{c}_backward` is lowered like the whole
    step into `tessera_stage{c}_forward` etc. (program.h's
    `tessera_stage_function` call, which also takes the activations, saved
    values and activation gradients it receives as `inputs` and fills what
    it sends and saves as `outputs`), each with tables named after it and
    all of a pipeline device's chunk functions with one thread-local arena
    (`tessera_device{d}_arena`, the largest of theirs: they run one after
    another on the device's stream, and an arena holds only a call's
    temporaries); `tessera_pipeline` describes every call's
    inputs, outputs, parameters read and gradients completed, and each
    device's task order for the schedule over the micro-batches of the
    module's `tess.plan` (TessPlanAttrs.td), or of `pipeline-schedule` over
    `micro-batches` in a module without a plan (lib/Pipeline's
    scheduleTaskOrder). The messages of neighbouring chunks
    are checked to agree in dtype and shape, and every parameter's gradient
    to be completed by exactly one chunk. `@forward_backward` then only
    describes the program (parameters, buffers, micro-batch shape, loss,
    precision) and is not emitted: `forward_backward` is NULL.

    ```mlir
    // tessera-opt -tess-split-pipeline-stages=stages=2
    //   -tess-lower-to-emitc="pipeline-schedule=1f1b micro-batches=4"
    // emits tessera_stage0_forward ... tessera_stage1_backward and
    //   static const tessera_pipeline tessera_pipeline = {
    //     /*stages=*/2, /*virtual_stages=*/1, /*micro_batches=*/4, "1f1b", ...};
    ```
  }];
  let options = [
    Option<"modelName", "model-name", "std::string", /*default=*/"\"\"",
           "The model the program was compiled from (for messages)">,
    Option<"weightsFile", "weights-file", "std::string", /*default=*/"\"\"",
           "The safetensors file of the initial weights the executable "
           "reads by default (none when empty)">,
    Option<"targetName", "target", "std::string", /*default=*/"\"cpu\"",
           "The kernels the step calls: cpu (tessera_cpu_*, host arena) or "
           "cuda (tessera_cuda_*, device arena)">,
    Option<"printArenaPlan", "print-arena-plan", "bool", /*default=*/"false",
           "Print the arena plan of @forward_backward to stderr">,
    Option<"pipelineSchedule", "pipeline-schedule", "std::string",
           /*default=*/"\"1f1b\"",
           "A pipelined module's schedule: gpipe, 1f1b or interleaved:V">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "A pipelined module's micro-batches per step">,
  ];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

#endif // TESSERA_LOWERING_PASSES_TD
