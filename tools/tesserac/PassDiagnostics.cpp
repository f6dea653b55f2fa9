//===- PassDiagnostics.cpp - tesserac's printing of MLIR diagnostics ------===//
//
// See PassDiagnostics.h. The importer builds ops with locations named after
// the ONNX nodes (or initializers) they come from, and the module's own
// location is the model file at 0:0: the name is worth printing, the
// file:0:0 is not (the file starts the line anyway).
//
//===----------------------------------------------------------------------===//

#include "PassDiagnostics.h"

#include "mlir/IR/Location.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <utility>

using namespace llvm;

namespace tessera::tesserac {
namespace {

/// Errors printed by every PassDiagnostics of the process (a pass manager
/// may emit from its worker threads; the engine serializes the handler).
std::atomic<unsigned> printedErrors{0};

raw_ostream &prefix(mlir::DiagnosticSeverity severity) {
  switch (severity) {
  case mlir::DiagnosticSeverity::Error:
    return WithColor::error(errs(), "tesserac");
  case mlir::DiagnosticSeverity::Warning:
    return WithColor::warning(errs(), "tesserac");
  case mlir::DiagnosticSeverity::Remark:
    return WithColor::remark(errs(), "tesserac");
  case mlir::DiagnosticSeverity::Note:
    break;
  }
  return WithColor::note(errs(), "tesserac");
}

/// "node 'NAME': " for a location that names where the op came from.
std::string origin(mlir::Location location) {
  if (auto name = location->findInstanceOf<mlir::NameLoc>())
    return "node '" + name.getName().str() + "': ";
  return "";
}

} // namespace

PassDiagnostics::PassDiagnostics(mlir::MLIRContext &context,
                                 std::string inputPath)
    : ScopedDiagnosticHandler(&context) {
  // A failing pass's error would otherwise carry the whole function it ran
  // on as a "see current operation" note: IR dumps are for tessera-opt.
  context.printOpOnDiagnostic(false);
  context.printStackTraceOnDiagnostic(false);
  setHandler([inputPath](mlir::Diagnostic &diagnostic) {
    mlir::DiagnosticSeverity severity = diagnostic.getSeverity();
    if (severity == mlir::DiagnosticSeverity::Error)
      ++printedErrors;
    // A remark is about the plan (tess-annotate-from-plan's `partition:`
    // lines name the op), not a fault of the file.
    raw_ostream &os = prefix(severity);
    if (severity != mlir::DiagnosticSeverity::Remark)
      os << inputPath << ": ";
    os << origin(diagnostic.getLocation()) << diagnostic.str() << "\n";
    for (const mlir::Diagnostic &note : diagnostic.getNotes())
      WithColor::note(errs(), "tesserac")
          << origin(note.getLocation()) << note.str() << "\n";
    return mlir::success();
  });
}

unsigned printedErrorCount() { return printedErrors; }

int failUnlessReported(unsigned before, const Twine &failure) {
  if (printedErrors == before)
    WithColor::error(errs(), "tesserac") << failure << "\n";
  return 1;
}

int runPasses(mlir::PassManager &passes, mlir::ModuleOp module,
              const Twine &failure) {
  unsigned before = printedErrors;
  if (mlir::succeeded(passes.run(module)))
    return 0;
  return failUnlessReported(before, failure);
}

} // namespace tessera::tesserac
