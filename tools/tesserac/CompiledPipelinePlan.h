//===- CompiledPipelinePlan.h - the searched pipeline plan as compiled -*- C++ -*-===//
//
// `tesserac MODEL --cluster C [--devices N] --pipeline --target cpu|cuda -o
// train` compiles the plan `--explain --pipeline` prints for the same flags
// (issue 22 items 4 and 5). lib/Pipeline's plan says, per stage, its units,
// its submesh's intra-op plan (DP d x TP t, ZeRO-1 or not) and its remat;
// the compiled driver runs every stage on one stage mesh with one forced
// strategy (tesserac --stages S --mesh M --strategy S'), the stage split
// given as the plan's chunks, each stage's recomputation on its chunks
// where the stages differ (#tess.chunk's remat, which tess-rematerialize
// applies to the chunk's layers; the plan's remat is the first stage
// with layers'). This file
// is that translation, one place for --explain (which prints the
// #tess.plan the compile writes) and the compile (which builds it), and
// its inverse for --explain --plan (a pipelined #tess.plan back into the
// search's pins, so that the search returns that plan and its prediction).
//
// ZeRO-1 inside the stage mesh (the search shards a stage's optimizer
// state over its dp replicas) compiles as the plan's zero = 1, which the
// executable runs by default: each stage's dp group shards the masters and
// moments of the parameters the stage owns (runtime/train/StageZero.h).
//
// What the driver cannot run is an error naming the flag that pins a plan
// it can: stages whose intra-op plans differ (--mesh, --stages,
// --devices), or of which some shard their optimizer state and others do
// not (--zero 0|1).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_COMPILEDPIPELINEPLAN_H
#define TESSERA_TOOLS_TESSERAC_COMPILEDPIPELINEPLAN_H

#include "PipelineExplain.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Pipeline/InterOpSearch.h"

#include "llvm/Support/Error.h"

#include <string>

namespace tessera::tesserac {

/// A searched pipeline plan as tesserac compiles it.
struct CompiledPipelinePlan {
  /// --stages, --microbatches and --schedule, with the chunks' units.
  StepPipeline step;
  /// The stage mesh as --mesh spells it ("dp=2,tp=2", "dp=4", "tp=2"), and
  /// its --strategy (dp, tp, dp-tp); both empty for one device a stage.
  std::string mesh, strategy;
  pipeline::RematMode remat = pipeline::RematMode::None;
};

/// The compiled form of `plan` (of the program `profile` describes);
/// errors: what the driver cannot run, with the flag that pins a plan it
/// can.
llvm::Expected<CompiledPipelinePlan>
compiledPipelinePlan(const pipeline::PipelinePlan &plan,
                     const pipeline::ProgramProfile &profile);

/// The #tess.chunk of each of `step`'s chunks (none without them).
llvm::SmallVector<tess::ChunkAttr> chunkAttributes(mlir::MLIRContext &context,
                                                   const StepPipeline &step);

/// The module's #tess.plan the compile writes for `plan` (its mesh, which
/// the partitioning adds there, included): what the executable prints.
tess::PlanAttr planAttribute(mlir::MLIRContext &context,
                             const CompiledPipelinePlan &plan);

/// The search's pins that make it return the plan `attribute` describes
/// (a pipelined #tess.plan): stages, micro-batches, schedule, remat (left
/// to the search where chunks say their own: with the stage boundaries
/// pinned it chooses the same per stage again), the
/// devices (stages x the stage mesh), the stage mesh's tensor-parallel
/// degree, ZeRO-1 or not, and the stage boundaries (the chunks' units per
/// device). Errors: a plan the compile never writes (mixed ZeRO, a chunk
/// split that is no stage split).
llvm::Expected<pipeline::SearchOptions>
searchPinsOf(tess::PlanAttr attribute);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_COMPILEDPIPELINEPLAN_H
