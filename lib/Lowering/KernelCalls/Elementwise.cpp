//===- Elementwise.cpp - kernel calls of the elementwise ops --------------===//
//
// Elementwise arithmetic, comparisons, where, casts, dropout and the
// activations' gradients and SwiGLU (both forms): one kernel call each,
// the unary and binary families through one kernel that takes the op as a
// code (TESSERA_NEG, TESSERA_ADD, ...).
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
namespace tess = tessera::tess;

namespace tessera::lowering {
namespace {

const char *comparisonKind(tess::ComparisonPredicate predicate) {
  switch (predicate) {
  case tess::ComparisonPredicate::eq:
    return "TESSERA_EQ";
  case tess::ComparisonPredicate::ne:
    return "TESSERA_NE";
  case tess::ComparisonPredicate::lt:
    return "TESSERA_LT";
  case tess::ComparisonPredicate::le:
    return "TESSERA_LE";
  case tess::ComparisonPredicate::gt:
    return "TESSERA_GT";
  case tess::ComparisonPredicate::ge:
    return "TESSERA_GE";
  }
  return "TESSERA_EQ";
}

/// `tessera_*_unary(kind, x, y)`.
template <typename OpTy>
void addUnary(KernelCallPatterns &patterns, const char *kind) {
  patterns.add<OpTy>([kind](OpTy op, KernelCallContext &c) {
    return c.call("unary", [&](CallArguments &a) {
      a.literal(kind).value(c.in(op->getOperand(0))).value(c.out(op));
    });
  });
}

/// `tessera_*_binary(kind, a, b, y)` with the kind `kindOf(op)`.
template <typename OpTy, typename Kind>
void addBinary(KernelCallPatterns &patterns, Kind kindOf) {
  patterns.add<OpTy>([kindOf](OpTy op, KernelCallContext &c) {
    return c.call("binary", [&](CallArguments &a) {
      a.literal(kindOf(op))
          .value(c.in(op->getOperand(0)))
          .value(c.in(op->getOperand(1)))
          .value(c.out(op));
    });
  });
}

template <typename OpTy>
void addBinary(KernelCallPatterns &patterns, const char *kind) {
  addBinary<OpTy>(patterns, [kind](OpTy) { return kind; });
}

} // namespace

void populateElementwiseKernelCalls(KernelCallPatterns &patterns) {
  addUnary<tess::NegOp>(patterns, "TESSERA_NEG");
  addUnary<tess::AbsOp>(patterns, "TESSERA_ABS");
  addUnary<tess::ExpOp>(patterns, "TESSERA_EXP");
  addUnary<tess::LogOp>(patterns, "TESSERA_LOG");
  addUnary<tess::SqrtOp>(patterns, "TESSERA_SQRT");
  addUnary<tess::RsqrtOp>(patterns, "TESSERA_RSQRT");
  addUnary<tess::ReciprocalOp>(patterns, "TESSERA_RECIPROCAL");
  addUnary<tess::TanhOp>(patterns, "TESSERA_TANH");
  addUnary<tess::ErfOp>(patterns, "TESSERA_ERF");
  addUnary<tess::SigmoidOp>(patterns, "TESSERA_SIGMOID");
  addUnary<tess::ReluOp>(patterns, "TESSERA_RELU");
  addUnary<tess::SiluOp>(patterns, "TESSERA_SILU");
  addUnary<tess::CosOp>(patterns, "TESSERA_COS");
  addUnary<tess::SinOp>(patterns, "TESSERA_SIN");
  addUnary<tess::LogicalNotOp>(patterns, "TESSERA_LOGICAL_NOT");
  patterns.add<tess::GeluOp>([](tess::GeluOp gelu, KernelCallContext &c) {
    const char *kind = gelu.getApproximation() == tess::GeluApproximation::tanh
                           ? "TESSERA_GELU_TANH"
                           : "TESSERA_GELU_ERF";
    return c.call("unary", [&](CallArguments &a) {
      a.literal(kind).value(c.in(gelu->getOperand(0))).value(c.out(gelu));
    });
  });
  addBinary<tess::AddOp>(patterns, "TESSERA_ADD");
  addBinary<tess::SubOp>(patterns, "TESSERA_SUB");
  addBinary<tess::MulOp>(patterns, "TESSERA_MUL");
  addBinary<tess::DivOp>(patterns, "TESSERA_DIV");
  addBinary<tess::PowOp>(patterns, "TESSERA_POW");
  addBinary<tess::MaximumOp>(patterns, "TESSERA_MAXIMUM");
  addBinary<tess::MinimumOp>(patterns, "TESSERA_MINIMUM");
  addBinary<tess::LogicalAndOp>(patterns, "TESSERA_LOGICAL_AND");
  addBinary<tess::LogicalOrOp>(patterns, "TESSERA_LOGICAL_OR");
  addBinary<tess::CompareOp>(patterns, [](tess::CompareOp compare) {
    return comparisonKind(compare.getPredicate());
  });
  patterns.add<tess::WhereOp>([](tess::WhereOp where, KernelCallContext &c) {
    return c.call("where", [&](CallArguments &a) {
      a.value(c.in(where.getCondition()))
          .value(c.in(where.getOnTrue()))
          .value(c.in(where.getOnFalse()))
          .value(c.out(where));
    });
  });
  patterns.add<tess::CastOp>([](tess::CastOp cast, KernelCallContext &c) {
    return c.call("cast", [&](CallArguments &a) {
      a.value(c.in(cast.getOperand())).value(c.out(cast));
    });
  });
  patterns.add<tess::DropoutOp>(
      [](tess::DropoutOp dropout, KernelCallContext &c) {
        Value opSeed = c.streamedSeed(dropout, c.mixedSeed(dropout.getSeed()));
        return c.call("dropout", [&](CallArguments &a) {
          a.value(c.in(dropout.getOperand()))
              .value(c.out(dropout))
              .f64(dropout.getRate().convertToDouble())
              .value(opSeed);
        });
      });
  patterns.add<tess::GeluGradOp>([](tess::GeluGradOp grad,
                                    KernelCallContext &c) {
    const char *kind = grad.getApproximation() == tess::GeluApproximation::tanh
                           ? "TESSERA_GELU_TANH"
                           : "TESSERA_GELU_ERF";
    return c.call("unary_grad", [&](CallArguments &a) {
      a.literal(kind)
          .value(c.in(grad->getOperand(0)))
          .value(c.in(grad->getOperand(1)))
          .value(c.out(grad));
    });
  });
  patterns.add<tess::SwigluOp>([](tess::SwigluOp swiglu, KernelCallContext &c) {
    return c.call("swiglu", [&](CallArguments &a) {
      a.value(c.in(swiglu.getGate()))
          .value(c.in(swiglu.getUp()))
          .value(c.out(swiglu));
    });
  });
  patterns.add<tess::SwigluGradOp>(
      [](tess::SwigluGradOp grad, KernelCallContext &c) {
        return c.call("swiglu_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getGate()))
              .value(c.in(grad.getUp()))
              .value(c.in(grad.getDy()))
              .value(c.out(grad, 0))
              .value(c.out(grad, 1));
        });
      });
  patterns.add<tess::PackedSwigluOp>(
      [](tess::PackedSwigluOp swiglu, KernelCallContext &c) {
        return c.call("packed_swiglu", [&](CallArguments &a) {
          a.value(c.in(swiglu.getInput())).value(c.out(swiglu));
        });
      });
  patterns.add<tess::PackedSwigluGradOp>(
      [](tess::PackedSwigluGradOp grad, KernelCallContext &c) {
        return c.call("packed_swiglu_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getInput()))
              .value(c.in(grad.getDy()))
              .value(c.out(grad));
        });
      });
  patterns.add<tess::SiluGradOp>([](tess::SiluGradOp op, KernelCallContext &c) {
    return c.call("unary_grad", [&](CallArguments &a) {
      a.literal("TESSERA_SILU")
          .value(c.in(op->getOperand(0)))
          .value(c.in(op->getOperand(1)))
          .value(c.out(op));
    });
  });
}

} // namespace tessera::lowering
