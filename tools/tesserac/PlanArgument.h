//===- PlanArgument.h - tesserac --explain --plan ---------------*- C++ -*-===//
//
// `tesserac MODEL --explain --plan TEXT|FILE`: the plan a training executable
// was compiled for (program.h's `plan`, the module's #tess.plan as printed),
// given as its text, as the executable itself or as the log of a run (which
// prints `plan: ...` at start), becomes the pins that make --explain predict
// that plan's step: the mesh as --mesh, the ZeRO stage as --zero and the
// recomputation as --remat would.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_PLANARGUMENT_H
#define TESSERA_TOOLS_TESSERAC_PLANARGUMENT_H

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
};

/// Reads --plan's argument: a `#tess.plan<...>` text, else the first one in
/// the file it names. Errors: an unreadable file or one without a plan, text
/// that is no valid #tess.plan (its rule's message), and a pipelined plan
/// (the message gives the --explain --pipeline flags that predict it).
llvm::Expected<PlanPins> readPlanPins(llvm::StringRef argument);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_PLANARGUMENT_H
