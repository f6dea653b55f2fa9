//===- ReadComputeCopies.cpp - tess-read-compute-copies --------------------===//
//
// A bf16 step casts each f32 master weight at its start and keeps the copy
// until the weight's last use in the backward. The copy only changes when
// the optimizer writes the master, once a step, in a pass that already
// reads and writes every weight: writing the rounded copy there costs two
// bytes an element, where the step's casts read four and write two and
// launch once per parameter (147 launches for Llama 3.2 1B). So the driver
// keeps the copies (runtime/train/TrainingBackend.h) and the step takes
// them as its parameters.
//
// Only @forward_backward: a pipelined program's chunks already cast once a
// step in their prepare, and one parameter read by several chunk functions
// would need one decision for all of them.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_READCOMPUTECOPIES
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The compute element type of a step built with `precision`, or null for
/// fp32 (nothing to copy).
Type computeElementType(MLIRContext *context, StringRef precision) {
  if (precision == "bf16")
    return BFloat16Type::get(context);
  if (precision == "fp16")
    return Float16Type::get(context);
  return {};
}

struct ReadComputeCopiesPass
    : tessera::impl::ReadComputeCopiesBase<ReadComputeCopiesPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.getSymName() != "forward_backward" || function.isExternal())
      return;
    // A pipelined program's @forward_backward only describes it; its chunk
    // functions are what runs.
    if (auto module = function->getParentOfType<ModuleOp>();
        module && module->hasAttr("tess.pipeline"))
      return;
    auto precision = function->getAttrOfType<StringAttr>("tess.precision");
    Type compute =
        precision ? computeElementType(&getContext(), precision.getValue())
                  : Type();
    if (!compute)
      return;

    bool changed = false;
    for (BlockArgument argument : function.getArguments()) {
      if (!function.getArgAttr(argument.getArgNumber(), "tess.parameter"))
        continue;
      auto master = dyn_cast<RankedTensorType>(argument.getType());
      if (!master || !master.getElementType().isF32() || argument.use_empty())
        continue;
      auto copy = master.clone(compute);
      bool onlyCasts = llvm::all_of(argument.getUsers(), [&](Operation *user) {
        auto cast = dyn_cast<tess::CastOp>(user);
        return cast && cast.getType() == copy;
      });
      if (!onlyCasts)
        continue;
      argument.setType(copy);
      for (Operation *user : llvm::make_early_inc_range(argument.getUsers())) {
        user->getResult(0).replaceAllUsesWith(argument);
        user->erase();
      }
      changed = true;
    }
    if (changed)
      function.setFunctionType(FunctionType::get(
          &getContext(), function.getBody().front().getArgumentTypes(),
          function.getResultTypes()));
  }
};

} // namespace
