//===- PlanArgument.h - tesserac --explain --plan ---------------*- C++ -*-===//
//
// `tesserac MODEL --explain --plan TEXT|FILE`: the plan a training executable
// was compiled for (program.h's `plan`, the module's #tess.plan as printed),
// given as its text, as the executable itself or as the log of a run (which
// prints `plan: ...` at start), becomes the pins that make --explain predict
// that plan's step: the mesh as --mesh, the ZeRO stage as --zero and the
// recomputation as --remat would; a pipelined plan pins every choice of
// --explain --pipeline's search (its stages, devices, stage mesh, schedule,
// micro-batches, remat and stage boundaries), which then returns it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_PLANARGUMENT_H
#define TESSERA_TOOLS_TESSERAC_PLANARGUMENT_H

#include "tessera/Pipeline/InterOpSearch.h"
#include "tessera/Pipeline/Remat.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace tessera::tesserac {

/// What --explain --plan pins.
struct PlanPins {
  /// --mesh's text ("dp=2,tp=2"); empty for one device.
  std::string mesh;
  /// The ZeRO stage of every parameter; none when the search chose per
  /// parameter (`zero = mixed`), which the search is then left to choose.
  std::optional<int> zero;
  pipeline::RematMode remat = pipeline::RematMode::None;
  /// A pipelined plan: the pipeline search's pins that return it (the
  /// fields above are then unused).
  std::optional<pipeline::SearchOptions> pipeline;
};

/// Reads --plan's argument: a `#tess.plan<...>` text, else the first one in
/// the file it names. Errors: an unreadable file or one without a plan, text
/// that is no valid #tess.plan (its rule's message), and a pipelined plan
/// the compile never writes (PipelinePlan.h's pipelineSearchPins).
llvm::Expected<PlanPins> readPlanPins(llvm::StringRef argument);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_PLANARGUMENT_H
