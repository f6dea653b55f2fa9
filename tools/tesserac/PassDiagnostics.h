//===- PassDiagnostics.h - tesserac's printing of MLIR diagnostics -*- C++ -*-===//
//
// A pass that fails says why through MLIR's diagnostics. Without a handler
// MLIR prints them raw (`loc("m.onnx":0:0): error: ...`) and tesserac then
// adds its own generic line, so the user reads the reason twice over in two
// styles. PassDiagnostics prints each diagnostic once, as tesserac prints
// every other error (`tesserac: error: FILE: MESSAGE`, naming the node the
// op came from when its location has one), and runPasses prints the
// generic line only for a pipeline that failed without saying why.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_PASSDIAGNOSTICS_H
#define TESSERA_TOOLS_TESSERAC_PASSDIAGNOSTICS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/Twine.h"

#include <string>
#include <vector>

namespace tessera::tesserac {

/// While alive, prints every diagnostic emitted on `context` as one
/// `tesserac: error|warning|remark: FILE: [node 'NAME': ]MESSAGE` line (and
/// its notes as `tesserac: note: ...` lines), FILE being the model.
class PassDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  PassDiagnostics(mlir::MLIRContext &context, std::string inputPath);
};

/// The errors every PassDiagnostics has printed so far.
unsigned printedErrorCount();

/// Prints `failure` (`tesserac: error: FAILURE`) unless an error was printed
/// since printedErrorCount() was `before`, which then said why. Returns 1.
int failUnlessReported(unsigned before, const llvm::Twine &failure);

/// Runs `passes` on `module`. Returns 0, or 1 after the error is printed:
/// the passes' own errors, or `failure` (`tesserac: error: FAILURE`) when
/// the pipeline failed without emitting one.
int runPasses(mlir::PassManager &passes, mlir::ModuleOp module,
              const llvm::Twine &failure);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_PASSDIAGNOSTICS_H
