//===- PipelineExplain.h - tesserac --explain for a pipeline plan -*- C++ -*-===//
//
// `tesserac MODEL --dim batch=B --dim seq=S --explain --pipeline [--stages N]
// [--microbatches M] [--schedule gpipe|1f1b|interleaved[:V]]
// [--remat none|selective|full|auto] [--pipeline-devices N]
// [--trace FILE.json] --cluster NAME|FILE`: plans data, tensor and pipeline
// parallelism, ZeRO-1, micro-batches, schedule and remat over the cluster's
// devices for the global batch B (lib/Pipeline) and prints the plan. The
// flags live in PipelineExplain.cpp; with --explain any of them asks for the
// plan. --remat also means the same choice for the step that --target and
// --emit=cpp build: tess-rematerialize applies it to every layer.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_PIPELINEEXPLAIN_H
#define TESSERA_TOOLS_TESSERAC_PIPELINEEXPLAIN_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/Import/ONNX/Importer.h"
#include "tessera/Pipeline/Remat.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/Support/CommandLine.h"

#include <optional>

namespace tessera::tesserac {

/// The --help category of the flags above, for tesserac's
/// cl::HideUnrelatedOptions.
llvm::cl::OptionCategory &pipelineOptionCategory();

/// Whether --remat was given.
bool rematRequested();

/// --remat for the training step --target and --emit=cpp build: the mode
/// tess-rematerialize applies to every layer (None when the flag is absent).
/// Errors: "auto", which only --explain --pipeline's search resolves, or an
/// unknown mode.
llvm::Expected<pipeline::RematMode> stepRematMode();

/// Nothing when no pipeline flag was given (the ordinary --explain runs);
/// otherwise imports the model at two batch sizes, builds its training step
/// with `training` (tesserac's --loss, --precision, ...), plans it on
/// `cluster`,
/// prints the plan to `outputPath` ("-": stdout) and returns the exit
/// status (1 after printing "tesserac: error: ...").
std::optional<int> explainPipeline(llvm::StringRef inputPath,
                                   const onnx_import::ImportOptions &options,
                                   const cost::Cluster &cluster,
                                   const BuildTrainingOptions &training,
                                   llvm::StringRef outputPath);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_PIPELINEEXPLAIN_H
