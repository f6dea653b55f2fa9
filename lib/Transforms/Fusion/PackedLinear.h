//===- PackedLinear.h - linears of one input as one GEMM -------*- C++ -*-===//
//
// tess-pack-qkv-projections and tess-pack-gate-up-projections both turn
// linears of one input into one linear of the concatenated weights (and
// biases), concatenated in the step so that the parameters stay the
// model's own tensors. The packing itself lives here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_FUSION_PACKEDLINEAR_H
#define TESSERA_LIB_TRANSFORMS_FUSION_PACKEDLINEAR_H

#include "Tess/IR/TessOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace tessera::fusion {

/// Whether `linears` (distinct ops) can be one linear: one input, one
/// weight orientation, all or none with a bias, one element type.
inline bool packableLinears(llvm::ArrayRef<tess::LinearOp> linears) {
  tess::LinearOp first = linears.front();
  mlir::Type element = first.getType().getElementType();
  for (size_t index = 0; index < linears.size(); ++index) {
    tess::LinearOp linear = linears[index];
    if (linear.getInput() != first.getInput() ||
        linear.getTransposeWeight() != first.getTransposeWeight() ||
        static_cast<bool>(linear.getBias()) !=
            static_cast<bool>(first.getBias()) ||
        linear.getType().getElementType() != element)
      return false;
    // N projections, not one linear seen twice.
    for (tess::LinearOp other : linears.take_front(index))
      if (other == linear)
        return false;
  }
  return true;
}

/// Makes `value` available before `point`: a value defined later by an op
/// without operands (a tess.parameter, a constant) moves up to it; anything
/// else must dominate it already.
inline bool makeAvailable(mlir::Value value, mlir::Operation *point,
                          mlir::DominanceInfo &dominance) {
  if (dominance.properlyDominates(value, point))
    return true;
  mlir::Operation *definition = value.getDefiningOp();
  if (!definition || definition->getNumOperands() != 0 ||
      definition->getNumRegions() != 0 ||
      definition->getBlock() != point->getBlock())
    return false;
  definition->moveBefore(point);
  return true;
}

/// One linear of `linears`' concatenated weights (and biases), in their
/// order, created before the first of them in the block; `builder` is set
/// there. Null where an operand cannot be made available there.
inline mlir::Value packLinears(llvm::ArrayRef<tess::LinearOp> linears,
                               mlir::DominanceInfo &dominance,
                               mlir::OpBuilder &builder) {
  // The first in the block: every use of any of them is after it.
  mlir::Operation *first = linears.front();
  for (tess::LinearOp linear : linears)
    if (linear->isBeforeInBlock(first))
      first = linear;
  for (tess::LinearOp linear : linears)
    for (mlir::Value operand : linear->getOperands())
      if (!makeAvailable(operand, first, dominance))
        return {};

  builder.setInsertionPoint(first);
  llvm::SmallVector<mlir::Location, 3> locations;
  llvm::SmallVector<mlir::Value, 3> weights, biases;
  for (tess::LinearOp linear : linears) {
    locations.push_back(linear.getLoc());
    weights.push_back(linear.getWeight());
    if (mlir::Value bias = linear.getBias())
      biases.push_back(bias);
  }
  mlir::Location loc = builder.getFusedLoc(locations);
  tess::LinearOp lead = linears.front();
  bool transposed = lead.getTransposeWeight();
  // [N, K] weights stack along N (dim 0); [K, N] ones along dim 1.
  mlir::Value weight =
      tess::ConcatOp::create(builder, loc, weights, transposed ? 0 : 1);
  mlir::Value bias =
      biases.empty()
          ? mlir::Value()
          : tess::ConcatOp::create(builder, loc, biases, 0).getResult();
  return tess::LinearOp::create(builder, loc, lead.getInput(), weight, bias,
                                transposed);
}

} // namespace tessera::fusion

#endif // TESSERA_LIB_TRANSFORMS_FUSION_PACKEDLINEAR_H
