//===- TessInterfaces.td - op interfaces of tess ------------*- tablegen -*-===//
//
// The interfaces that passes query instead of switching on op kinds. An op
// opts in with DeclareOpInterfaceMethods in TessOps.td and implements the
// methods in C++.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_INTERFACES_TD
#define TESS_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Tess_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::tessera::tess";
  let description = [{
    An op that reverse-mode automatic differentiation (`tess-build-training`)
    can walk through: it knows its vector-Jacobian product (VJP). Given the
    cotangent of each result (the gradient of the loss with respect to that
    result), it builds the cotangent of each operand out of tess ops.

    Operands that carry no gradient (indices, conditions, attention masks,
    targets) get a null cotangent; so do operands whose cotangent would be
    zero because every result cotangent is null. The builder's insertion
    point is where the backward ops go; the op's own results and operands
    may be used (the forward values are still live there).
  }];

  let methods = [
    InterfaceMethod<[{
        Builds the operand cotangents of this op with `builder`.
        `resultCotangents` has one entry per result, each null (no gradient
        reaches that result) or of that result's type. On success,
        `operandCotangents` holds one entry per operand, null or of that
        operand's type. Fails (after emitting an error) only when the op's
        types make it not differentiable, e.g. an integer tensor.
      }],
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultCotangents,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandCotangents)
    >,
  ];
}

/// Shorthand for the ops that implement the interface above.
defvar Tess_Differentiable =
    DeclareOpInterfaceMethods<Tess_DifferentiableOpInterface>;

#endif // TESS_INTERFACES_TD
