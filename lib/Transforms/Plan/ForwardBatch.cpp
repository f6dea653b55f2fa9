//===- ForwardBatch.cpp - @forward at another batch -----------------------===//
//
// See ForwardBatch.h.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/ForwardBatch.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Sharding/PlanAnnotation.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace tessera;

namespace {

/// `module`'s copy with @forward's values computed from its inputs at
/// `batch` samples instead of `own`, and, with `splats`, its splat
/// constants of `own` leading rows too (an input folded into a constant: a
/// BERT's token types). Null after an error on the op at fault when
/// `report`, silently otherwise.
OwningOpRef<ModuleOp> rebatchForward(ModuleOp module, int64_t own,
                                     int64_t batch, bool splats, bool report) {
  OwningOpRef<ModuleOp> copy(module.clone());
  (*copy)->removeAttr(sharding::kPlanAttrName);
  auto forward = copy->lookupSymbol<func::FuncOp>("forward");
  auto rebatched = [&](Value value) -> LogicalResult {
    auto tensor = llvm::dyn_cast<RankedTensorType>(value.getType());
    if (!tensor || tensor.getRank() == 0 || tensor.getDimSize(0) != own)
      return failure();
    SmallVector<int64_t> shape(tensor.getShape());
    shape[0] = batch;
    value.setType(tensor.clone(shape));
    return success();
  };
  // A value computed from the inputs carries their batch; the weights and
  // constants (rotary tables, masks) do not.
  llvm::DenseSet<Value> batched;
  for (BlockArgument argument : forward.getArguments()) {
    (void)rebatched(argument);
    batched.insert(argument);
  }
  WalkResult walk = forward.walk([&](Operation *op) {
    if (auto constant = llvm::dyn_cast<tess::ConstantOp>(op)) {
      auto splat =
          llvm::dyn_cast<SplatElementsAttr>(Attribute(constant.getValueAttr()));
      auto type = llvm::dyn_cast<RankedTensorType>(constant.getType());
      if (splats && splat && type && type.getRank() > 0 &&
          type.getDimSize(0) == own) {
        (void)rebatched(constant.getResult());
        constant.setValueAttr(splat.resizeSplat(
            llvm::cast<ShapedType>(constant.getResult().getType())));
        batched.insert(constant.getResult());
      }
      return WalkResult::advance();
    }
    if (llvm::none_of(op->getOperands(),
                      [&](Value operand) { return batched.contains(operand); }))
      return WalkResult::advance();
    for (Value result : op->getResults()) {
      if (failed(rebatched(result))) {
        if (report)
          op->emitError() << "cannot plan @forward at batch " << batch
                          << ": this op's result, computed from the inputs, "
                             "has no leading batch dim of "
                          << own;
        return WalkResult::interrupt();
      }
      batched.insert(result);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return nullptr;
  forward.setType(FunctionType::get(
      copy->getContext(), forward.getBody().getArgumentTypes(),
      forward.getBody().back().getTerminator()->getOperandTypes()));
  if (report) {
    if (failed(verify(*copy)))
      return nullptr;
  } else {
    ScopedDiagnosticHandler silent(copy->getContext(),
                                   [](Diagnostic &) { return success(); });
    if (failed(verify(*copy)))
      return nullptr;
  }
  return copy;
}

} // namespace

FailureOr<int64_t> tessera::forwardBatch(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return module.emitError()
           << "the module has no @forward (the pipeline search plans the "
              "forward, before tess-build-training)";
  // The forward's arguments are its inputs (the parameters are ops): each
  // has the step's batch as its leading dim.
  int64_t batch = 0;
  for (Type type : forward.getArgumentTypes()) {
    auto tensor = llvm::dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() == 0 || tensor.isDynamicDim(0) ||
        (batch != 0 && tensor.getDimSize(0) != batch))
      return module.emitError()
             << "@forward's inputs do not share a leading batch dim (input "
                "type "
             << type << ")";
    batch = tensor.getDimSize(0);
  }
  if (batch == 0)
    return module.emitError() << "@forward has no inputs: no batch to plan";
  return batch;
}

FailureOr<OwningOpRef<ModuleOp>> tessera::forwardAtBatch(ModuleOp module,
                                                         int64_t batch) {
  FailureOr<int64_t> own = forwardBatch(module);
  if (failed(own))
    return failure();
  if (*own == batch) {
    OwningOpRef<ModuleOp> copy(module.clone());
    (*copy)->removeAttr(sharding::kPlanAttrName);
    return copy;
  }
  // The inputs' values alone first: a splat constant of as many rows as
  // the batch is the batch's only where the forward needs it to be.
  if (OwningOpRef<ModuleOp> copy = rebatchForward(
          module, *own, batch, /*splats=*/false, /*report=*/false))
    return copy;
  if (OwningOpRef<ModuleOp> copy =
          rebatchForward(module, *own, batch, /*splats=*/true, /*report=*/true))
    return copy;
  return module.emitError() << "cannot take @forward to batch " << batch;
}

