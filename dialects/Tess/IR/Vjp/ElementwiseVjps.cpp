//===- ElementwiseVjps.cpp - VJPs of the elementwise tess ops ------------===//
//
// Unary ops: dx = dy * f'(x), written with forward ops (reusing the result y
// where the derivative is cheapest in terms of it), except GELU and SiLU,
// whose derivatives have their own ops. Binary ops broadcast, so each
// operand's cotangent is summed back to its shape (VjpBuilder::sumToShape).
//
//===----------------------------------------------------------------------===//

#include "VjpBuilder.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::vjp;

namespace {

bool isFloatTensor(Value value) {
  return llvm::isa<FloatType>(tensorType(value).getElementType());
}

/// Runs `formula(builder, x, y, dy) -> dx` for a unary op when its result
/// has a cotangent.
template <typename Formula>
LogicalResult unaryVjp(Operation *op, OpBuilder &builder,
                       ArrayRef<Value> resultCotangents,
                       SmallVectorImpl<Value> &operandCotangents,
                       Formula formula) {
  operandCotangents.assign(1, Value());
  Value dy = resultCotangents[0];
  if (!dy)
    return success();
  Value x = op->getOperand(0);
  if (!isFloatTensor(x))
    return notDifferentiable(op, "its operand is not a float tensor");
  VjpBuilder b(builder, op->getLoc());
  operandCotangents[0] = formula(b, x, op->getResult(0), dy);
  return success();
}

/// Runs `formula(builder, lhs, rhs, y, dy) -> {dlhs, drhs}` (cotangents of
/// the broadcast shape) and sums each back to its operand's shape.
template <typename Formula>
LogicalResult binaryVjp(Operation *op, OpBuilder &builder,
                        ArrayRef<Value> resultCotangents,
                        SmallVectorImpl<Value> &operandCotangents,
                        Formula formula) {
  operandCotangents.assign(2, Value());
  Value dy = resultCotangents[0];
  if (!dy)
    return success();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  if (!isFloatTensor(lhs))
    return notDifferentiable(op, "its operands are not float tensors");
  VjpBuilder b(builder, op->getLoc());
  auto [dlhs, drhs] = formula(b, lhs, rhs, op->getResult(0), dy);
  operandCotangents[0] = b.sumToShape(dlhs, tensorType(lhs));
  operandCotangents[1] = b.sumToShape(drhs, tensorType(rhs));
  return success();
}

using Pair = std::pair<Value, Value>;

} // namespace

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

#define TESS_UNARY_VJP(OP, FORMULA)                                            \
  LogicalResult OP::buildVjp(OpBuilder &builder,                               \
                             ArrayRef<Value> resultCotangents,                 \
                             SmallVectorImpl<Value> &operandCotangents) {      \
    return unaryVjp(*this, builder, resultCotangents, operandCotangents,       \
                    [&](VjpBuilder &b, Value x, Value y, Value dy) -> Value {  \
                      (void)x;                                                 \
                      (void)y;                                                 \
                      FORMULA;                                                 \
                    });                                                        \
  }

TESS_UNARY_VJP(NegOp, return b.neg(dy))
// sign(x) * dy, with 0 at x = 0 as PyTorch's subgradient.
TESS_UNARY_VJP(AbsOp, {
  Value zero = b.scalarLike(x, 0.0);
  Value negative = b.selectOrZero(
      b.compare(ComparisonPredicate::lt, x, zero), b.neg(dy));
  return WhereOp::create(b.getBuilder(), b.getLocation(),
                         b.compare(ComparisonPredicate::gt, x, zero), dy,
                         negative);
})
TESS_UNARY_VJP(ExpOp, return b.mul(dy, y))
TESS_UNARY_VJP(LogOp, return b.div(dy, x))
// d sqrt(x) = 1 / (2 sqrt(x)).
TESS_UNARY_VJP(SqrtOp, return b.div(b.mul(dy, b.scalarLike(dy, 0.5)), y))
// d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3.
TESS_UNARY_VJP(RsqrtOp, return b.mul(b.mul(dy, b.scalarLike(dy, -0.5)),
                                     b.mul(b.mul(y, y), y)))
// d 1/x = -1/x^2 = -y^2.
TESS_UNARY_VJP(ReciprocalOp, return b.neg(b.mul(dy, b.mul(y, y))))
TESS_UNARY_VJP(TanhOp,
               return b.mul(dy, b.sub(b.scalarLike(y, 1.0), b.mul(y, y))))
// d erf(x) = 2 / sqrt(pi) e^(-x^2).
TESS_UNARY_VJP(ErfOp, {
  Value gaussian =
      ExpOp::create(b.getBuilder(), b.getLocation(), b.neg(b.mul(x, x)));
  return b.mul(b.mul(dy, b.scalarLike(dy, 2.0 * llvm::numbers::inv_sqrtpi)), gaussian);
})
TESS_UNARY_VJP(SigmoidOp, return b.mul(b.mul(dy, y),
                                       b.sub(b.scalarLike(y, 1.0), y)))
TESS_UNARY_VJP(ReluOp,
               return b.selectOrZero(b.compare(ComparisonPredicate::gt, x,
                                               b.scalarLike(x, 0.0)),
                                     dy))
TESS_UNARY_VJP(CosOp, return b.neg(b.mul(dy, SinOp::create(b.getBuilder(),
                                                           b.getLocation(),
                                                           x))))
TESS_UNARY_VJP(SinOp, return b.mul(dy, CosOp::create(b.getBuilder(),
                                                     b.getLocation(), x)))
TESS_UNARY_VJP(SiluOp,
               return SiluGradOp::create(b.getBuilder(), b.getLocation(), x,
                                         dy))
#undef TESS_UNARY_VJP

LogicalResult GeluOp::buildVjp(OpBuilder &builder,
                               ArrayRef<Value> resultCotangents,
                               SmallVectorImpl<Value> &operandCotangents) {
  GeluApproximation approximation = getApproximation();
  return unaryVjp(*this, builder, resultCotangents, operandCotangents,
                  [&](VjpBuilder &b, Value x, Value, Value dy) -> Value {
                    return GeluGradOp::create(b.getBuilder(), b.getLocation(),
                                              x, dy, approximation);
                  });
}

// silu(gate) * up: one gradient op for both operands, which recomputes
// silu(gate) from gate instead of keeping it.
LogicalResult SwigluOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultCotangents,
                                 SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  Type type = getGate().getType();
  auto gradient = SwigluGradOp::create(builder, getLoc(), type, type,
                                       getGate(), getUp(), dy);
  operandCotangents[0] = gradient.getDgate();
  operandCotangents[1] = gradient.getDup();
  return success();
}

// The same on the packed gate/up halves: one [.., 2F] gradient, so the
// packed projection's backward is one dx GEMM and one dW GEMM.
LogicalResult PackedSwigluOp::buildVjp(OpBuilder &builder,
                                       ArrayRef<Value> resultCotangents,
                                       SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  operandCotangents[0] = PackedSwigluGradOp::create(
      builder, getLoc(), getInput().getType(), getInput(), dy);
  return success();
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

#define TESS_BINARY_VJP(OP, FORMULA)                                           \
  LogicalResult OP::buildVjp(OpBuilder &builder,                               \
                             ArrayRef<Value> resultCotangents,                 \
                             SmallVectorImpl<Value> &operandCotangents) {      \
    return binaryVjp(                                                          \
        *this, builder, resultCotangents, operandCotangents,                   \
        [&](VjpBuilder &b, Value lhs, Value rhs, Value y, Value dy) -> Pair {  \
          (void)lhs;                                                           \
          (void)rhs;                                                           \
          (void)y;                                                             \
          FORMULA;                                                             \
        });                                                                    \
  }

TESS_BINARY_VJP(AddOp, return Pair(dy, dy))
TESS_BINARY_VJP(SubOp, return Pair(dy, b.neg(dy)))
TESS_BINARY_VJP(MulOp, return Pair(b.mul(dy, rhs), b.mul(dy, lhs)))
// d(a/b)/db = -a/b^2 = -y/b.
TESS_BINARY_VJP(DivOp,
                return Pair(b.div(dy, rhs), b.neg(b.div(b.mul(dy, y), rhs))))
// d a^b/da = b a^(b-1); d a^b/db = a^b log(a), taken as 0 where a = 0 (as
// PyTorch does) so that a zero base with a constant exponent gives no NaN.
TESS_BINARY_VJP(PowOp, {
  Value exponentMinusOne = b.sub(rhs, b.scalarLike(rhs, 1.0));
  Value power =
      PowOp::create(b.getBuilder(), b.getLocation(), lhs, exponentMinusOne);
  Value dlhs = b.mul(b.mul(dy, rhs), power);
  Value logBase = LogOp::create(b.getBuilder(), b.getLocation(), lhs);
  Value baseIsZero =
      b.compare(ComparisonPredicate::eq, lhs, b.scalarLike(lhs, 0.0));
  Value drhs = b.zeroOrSelect(baseIsZero, b.mul(b.mul(dy, y), logBase));
  return Pair(dlhs, drhs);
})
// Ties send the whole cotangent to the lhs (a subgradient).
TESS_BINARY_VJP(MaximumOp, {
  Value lhsWins = b.compare(ComparisonPredicate::ge, lhs, rhs);
  return Pair(b.selectOrZero(lhsWins, dy), b.zeroOrSelect(lhsWins, dy));
})
TESS_BINARY_VJP(MinimumOp, {
  Value lhsWins = b.compare(ComparisonPredicate::le, lhs, rhs);
  return Pair(b.selectOrZero(lhsWins, dy), b.zeroOrSelect(lhsWins, dy));
})
#undef TESS_BINARY_VJP

//===----------------------------------------------------------------------===//
// Select, cast, dropout
//===----------------------------------------------------------------------===//

LogicalResult WhereOp::buildVjp(OpBuilder &builder,
                                ArrayRef<Value> resultCotangents,
                                SmallVectorImpl<Value> &operandCotangents) {
  // The condition is a constant of the derivative.
  operandCotangents.assign(3, Value());
  Value dy = resultCotangents[0];
  if (!dy)
    return success();
  if (!isFloatTensor(getOnTrue()))
    return notDifferentiable(*this, "its branches are not float tensors");
  VjpBuilder b(builder, getLoc());
  Value condition = getCondition();
  operandCotangents[1] =
      b.sumToShape(b.selectOrZero(condition, dy), getOnTrue().getType());
  operandCotangents[2] =
      b.sumToShape(b.zeroOrSelect(condition, dy), getOnFalse().getType());
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &builder,
                               ArrayRef<Value> resultCotangents,
                               SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(1, Value());
  Value dy = resultCotangents[0];
  // Integers carry no gradient: a cast from or to one ends the chain.
  if (!dy || !isFloatTensor(getInput()) || !isFloatTensor(getResult()))
    return success();
  operandCotangents[0] =
      CastOp::create(builder, getLoc(), getInput().getType(), dy);
  return success();
}

LogicalResult DropoutOp::buildVjp(OpBuilder &builder,
                                  ArrayRef<Value> resultCotangents,
                                  SmallVectorImpl<Value> &operandCotangents) {
  // The same seed draws the same mask: dx = dy * mask / (1 - rate).
  operandCotangents.assign(1, Value());
  if (Value dy = resultCotangents[0])
    operandCotangents[0] =
        DropoutOp::create(builder, getLoc(), dy, getRate(), getSeed(),
                          getStreamAxisAttr());
  return success();
}
