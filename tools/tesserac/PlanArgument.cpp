//===- PlanArgument.cpp - tesserac --explain --plan -----------------------===//

#include "PlanArgument.h"
#include "tessera/Transforms/PipelinePlan.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Sharding/PlanAnnotation.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace llvm;

namespace tessera::tesserac {

namespace {

/// --plan's text: the argument when it is a #tess.plan, else the first one
/// in the file it names, up to the NUL that ends it in an executable (the
/// program table's string) or the end of its line in a log.
Expected<std::string> planText(StringRef argument) {
  constexpr StringLiteral prefix = "#tess.plan<";
  if (argument.trim().starts_with(prefix))
    return argument.trim().str();
  auto buffer = MemoryBuffer::getFile(argument, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError("--plan " + argument + ": " +
                             buffer.getError().message() +
                             " (expected #tess.plan<...> or a file holding "
                             "one, such as a training executable)");
  StringRef contents = (*buffer)->getBuffer();
  size_t at = contents.find(prefix);
  if (at == StringRef::npos)
    return createStringError("--plan " + argument +
                             ": holds no #tess.plan<...> (an executable "
                             "built by tesserac carries the plan it was "
                             "compiled for)");
  return contents.substr(at)
      .take_until([](char c) { return c == '\0' || c == '\n'; })
      .str();
}

} // namespace

Expected<PlanPins> readPlanPins(StringRef argument) {
  Expected<std::string> text = planText(argument);
  if (!text)
    return text.takeError();
  mlir::MLIRContext context;
  context.loadDialect<tess::TessDialect>();
  std::string message;
  // The parser's and the verifier's message (a rule such as C2) goes into
  // the one error line, not to stderr on its own.
  auto keep = [&](mlir::Diagnostic &diagnostic) {
    message = diagnostic.str();
    return mlir::success();
  };
  mlir::ScopedDiagnosticHandler handler(&context, keep);
  auto plan =
      dyn_cast_or_null<tess::PlanAttr>(mlir::parseAttribute(*text, &context));
  if (!plan)
    return createStringError(
        "--plan " + *text + ": " +
        (message.empty() ? "expected a #tess.plan<...>" : message));
  PlanPins pins;
  if (plan.isPipelined()) {
    Expected<pipeline::SearchOptions> search = pipelineSearchPins(plan);
    if (!search)
      return createStringError("--plan " + *text + ": " +
                               toString(search.takeError()));
    pins.pipeline = std::move(*search);
    return pins;
  }
  if (plan.getMesh())
    pins.mesh = sharding::deviceMesh(plan.getMesh()).describe();
  if (plan.getZero() != tess::PlanAttr::kMixedZero)
    pins.zero = plan.getZero();
  pins.remat = *pipeline::parseRematName(plan.getRemat());
  return pins;
}

} // namespace tessera::tesserac
