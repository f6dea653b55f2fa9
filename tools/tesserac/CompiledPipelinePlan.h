//===- CompiledPipelinePlan.h - a pipelined #tess.plan as flags -*- C++ -*-===//
//
// `tesserac MODEL --cluster C [--devices N] --pipeline --target cpu|cuda -o
// train` compiles the plan `--explain --pipeline` prints for the same flags
// (issue 22 items 4 and 5). The search and the plan are lib's
// (tessera/Transforms/PipelinePlan.h, tess-search-pipeline); what the
// compile builds from a pipelined #tess.plan is here: the stage mesh every
// stage is partitioned over with one forced strategy (as --mesh M
// --strategy S would give), the stages cut as the plan's chunks say (as
// --stages, --microbatches and --schedule would), and the plan's remat.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_COMPILEDPIPELINEPLAN_H
#define TESSERA_TOOLS_TESSERAC_COMPILEDPIPELINEPLAN_H

#include "PipelineExplain.h"

#include "Tess/IR/TessOps.h"

#include <string>

namespace tessera::tesserac {

/// A pipelined #tess.plan as tesserac compiles it.
struct CompiledPipelinePlan {
  /// --stages, --microbatches and --schedule, with the chunks' units.
  StepPipeline step;
  /// The stage mesh as --mesh spells it ("dp=2,tp=2", "dp=4", "tp=2"), and
  /// its --strategy (dp, tp, dp-tp); both empty for one device a stage.
  std::string mesh, strategy;
  pipeline::RematMode remat = pipeline::RematMode::None;
};

/// The compiled form of `plan`, a pipelined #tess.plan as
/// tess-search-pipeline writes it.
CompiledPipelinePlan compiledPipelinePlan(tess::PlanAttr plan);

/// The #tess.chunk of each of `step`'s chunks (none without them).
llvm::SmallVector<tess::ChunkAttr> chunkAttributes(mlir::MLIRContext &context,
                                                   const StepPipeline &step);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_COMPILEDPIPELINEPLAN_H
