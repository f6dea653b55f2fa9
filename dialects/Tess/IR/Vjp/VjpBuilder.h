//===- VjpBuilder.h - building blocks of the tess VJPs ---------*- C++ -*-===//
//
// Every VJP is a few tess ops built at one place; this helper keeps the
// location, the builder and the recurring pieces (scalar constants, the
// adjoint of broadcasting) in one object so that each VJP reads like its
// formula. Private to the dialect's implementation.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_TESS_VJP_VJPBUILDER_H
#define TESSERA_DIALECT_TESS_VJP_VJPBUILDER_H

#include "Tess/IR/TessOps.h"

namespace tessera::tess::vjp {

class VjpBuilder {
public:
  VjpBuilder(mlir::OpBuilder &builder, mlir::Location location)
      : builder(builder), location(location) {}

  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::Location getLocation() { return location; }

  /// A rank-0 constant of `elementType`; it broadcasts against any tensor.
  mlir::Value scalar(mlir::Type elementType, double value);
  /// A tensor of zeros of `type`.
  mlir::Value zeros(mlir::RankedTensorType type);
  /// A rank-0 constant of `like`'s element type.
  mlir::Value scalarLike(mlir::Value like, double value);

  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);
  mlir::Value neg(mlir::Value value);
  /// `condition ? value : 0`, broadcast to the common shape.
  mlir::Value selectOrZero(mlir::Value condition, mlir::Value value);
  /// `condition ? 0 : value`, broadcast to the common shape.
  mlir::Value zeroOrSelect(mlir::Value condition, mlir::Value value);
  mlir::Value compare(ComparisonPredicate predicate, mlir::Value lhs,
                      mlir::Value rhs);
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  /// `op(lhs) @ op(rhs)`, op transposing the last two dims where asked.
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs,
                     bool transposeLhs = false, bool transposeRhs = false);

  /// The adjoint of numpy broadcasting: sums `gradient` (of the broadcast
  /// shape) over the dims that broadcasting added or stretched so that it
  /// has `target`'s shape. Returns `gradient` itself when nothing was
  /// broadcast.
  mlir::Value sumToShape(mlir::Value gradient, mlir::RankedTensorType target);

private:
  mlir::OpBuilder &builder;
  mlir::Location location;
};

/// The tensor type of `value`.
inline mlir::RankedTensorType tensorType(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType());
}

/// Starts the VJP of an op with one result: one null cotangent per operand
/// (those the VJP does not set, such as indices or a mask, stay null), and
/// the result's cotangent is returned. When that is null, nothing flows back
/// and the VJP has nothing to build.
mlir::Value beginVjp(mlir::Operation *op,
                     llvm::ArrayRef<mlir::Value> resultCotangents,
                     llvm::SmallVectorImpl<mlir::Value> &operandCotangents);

/// Emits the error of a VJP asked for an op whose types it cannot
/// differentiate (integer tensors).
mlir::LogicalResult notDifferentiable(mlir::Operation *op,
                                      llvm::StringRef reason);

} // namespace tessera::tess::vjp

#endif // TESSERA_DIALECT_TESS_VJP_VJPBUILDER_H
