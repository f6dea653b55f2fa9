//===- PipelineProgram.h - a stage-split step as the driver runs it -*- C++ -*-===//
//
// Internal to lib/Lowering. A module that tess-split-pipeline-stages cut
// into chunks (its tess.pipeline attribute, @stage{c}_forward and
// @stage{c}_backward) becomes a pipelined program (program.h's
// tessera_pipeline): every chunk function is lowered like the whole step,
// with a StepSignature that binds its arguments by role (tess.parameter and
// tess.buffer by name into the program's tables, tess.input, and the
// messages and saved values as the call's `inputs`) and its results
// (tess.loss, tess.gradient by name, the rest as `outputs`), and the tables
// say what each call receives, sends and saves and in which order each
// device runs them.
//
// preparePipelineProgram checks what the driver relies on and the split
// pass guarantees, so that a broken module is a compile-time error naming
// the function rather than a wrong run: the messages of neighbouring chunks
// agree in count, dtype and shape; a backward's saved values are its
// forward's; every parameter's gradient is returned by a chunk (by several
// when it is a sum of parts, a tied embedding's), once by each; exactly one
// forward returns the loss.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_LOWERING_PIPELINEPROGRAM_H
#define TESSERA_LIB_LOWERING_PIPELINEPROGRAM_H

#include "ProgramDefinition.h"
#include "StepSignature.h"

#include "tessera/Pipeline/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::lowering {

/// One entry of a call's inputs or outputs (program.h's tessera_stage_tensor).
struct StageTensor {
  int32_t role = 0; // tessera_stage_tensor_role
  int32_t dtype = 0;
  std::vector<int64_t> shape;
};

/// The three calls of a chunk: its once-a-step prepare, its forward and its
/// backward.
enum class StageKind { Prepare, Forward, Backward };

/// One chunk's prepare, forward or backward and its tessera_stage_function
/// row.
struct StageFunction {
  mlir::func::FuncOp function;
  StepSignature signature;
  std::vector<StageTensor> inputs, outputs;
  bool returnsLoss = false;
  std::vector<int32_t> readParameters, gradientParameters;
  /// Filled by the lowering: the emitted call and its model FLOPs.
  std::string call;
  double flops = 0;
};

struct PipelineProgram {
  int64_t stages = 1, virtualStages = 1, microBatches = 1;
  std::string schedule;
  /// Per chunk (stages * virtualStages).
  std::vector<StageFunction> prepares, forwards, backwards;
  /// Per device, its tasks in order (scheduleTaskOrder).
  std::vector<std::vector<pipeline::ScheduledTask>> tasks;
  /// A stage mesh's (MeshProgram.h): per parameter, the mesh axes its
  /// gradient is a pending partial sum over (a bit per axis); empty: none.
  std::vector<int32_t> gradientPartialAxes;
};

/// std::nullopt for a module without tess.pipeline. Otherwise the chunk
/// functions with their signatures and tables, checked as above against
/// `info` (the parameters and buffers of @forward_backward) and with the
/// task order of the schedule over the micro-batches of the module's
/// pipelined tess.plan, or without one of `schedule` over `microBatches`;
/// errors name the function.
mlir::FailureOr<std::optional<PipelineProgram>>
preparePipelineProgram(mlir::ModuleOp module, const ProgramInfo &info,
                       llvm::StringRef schedule, int64_t microBatches);

/// Appends the tables of `program` (every call's tensors and parameter
/// lists, the calls, the task lists) and `tessera_pipeline_definition` at
/// the builder's insertion point; returns the initializer of
/// tessera_program's `pipeline` field (its address).
std::string emitPipelineTables(mlir::OpBuilder &builder, mlir::Location loc,
                               const PipelineProgram &program);

} // namespace tessera::lowering

#endif // TESSERA_LIB_LOWERING_PIPELINEPROGRAM_H
