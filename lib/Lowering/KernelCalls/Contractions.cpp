//===- Contractions.cpp - kernel calls of the GEMMs -----------------------===//
//
// tess.matmul and tess.linear, and the fused ops built on them (tess-fuse-
// epilogues): each one GEMM call, its epilogue (the residual as C, GELU,
// DGELU, the bias-gradient column sum) in the same call.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
namespace tess = tessera::tess;

namespace tessera::lowering {

void populateContractionKernelCalls(KernelCallPatterns &patterns) {
  patterns.add<tess::MatmulOp>([](tess::MatmulOp matmul, KernelCallContext &c) {
    return c.call("matmul", [&](CallArguments &a) {
      a.value(c.in(matmul.getLhs()))
          .value(c.in(matmul.getRhs()))
          .value(c.out(matmul))
          .i32(matmul.getTransposeLhs())
          .i32(matmul.getTransposeRhs());
    });
  });
  patterns.add<tess::MatmulBiasGradOp>(
      [](tess::MatmulBiasGradOp matmul, KernelCallContext &c) {
        return c.call("matmul_bias_grad", [&](CallArguments &a) {
          a.value(c.in(matmul.getLhs()))
              .value(c.in(matmul.getRhs()))
              .value(c.out(matmul, 0))
              .value(c.out(matmul, 1))
              .i32(matmul.getTransposeLhs())
              .i32(0);
        });
      });
  patterns.add<tess::MatmulAddOp>(
      [](tess::MatmulAddOp matmul, KernelCallContext &c) {
        return c.call("matmul_add", [&](CallArguments &a) {
          a.value(c.in(matmul.getLhs()))
              .value(c.in(matmul.getRhs()))
              .value(c.in(matmul.getAddend()))
              .value(c.out(matmul))
              .i32(matmul.getTransposeLhs())
              .i32(matmul.getTransposeRhs());
        });
      });
  patterns.add<tess::LinearOp>([](tess::LinearOp linear, KernelCallContext &c) {
    return c.call("linear", [&](CallArguments &a) {
      a.value(c.in(linear.getInput()))
          .value(c.in(linear.getWeight()))
          .optional(c.in(linear.getBias()))
          .value(c.out(linear))
          .i32(linear.getTransposeWeight());
    });
  });
  patterns.add<tess::LinearGeluOp>(
      [](tess::LinearGeluOp linear, KernelCallContext &c) {
        return c.call("linear_gelu", [&](CallArguments &a) {
          a.value(c.in(linear.getInput()))
              .value(c.in(linear.getWeight()))
              .optional(c.in(linear.getBias()))
              .value(c.out(linear, 0))
              .value(c.out(linear, 1))
              .i32(linear.getTransposeWeight());
        });
      });
  patterns.add<tess::LinearAddOp>(
      [](tess::LinearAddOp linear, KernelCallContext &c) {
        return c.call("linear_add", [&](CallArguments &a) {
          a.value(c.in(linear.getInput()))
              .value(c.in(linear.getWeight()))
              .optional(c.in(linear.getBias()))
              .value(c.in(linear.getAddend()))
              .value(c.out(linear))
              .i32(linear.getTransposeWeight());
        });
      });
  patterns.add<tess::LinearGeluGradOp>(
      [](tess::LinearGeluGradOp linear, KernelCallContext &c) {
        return c.call("linear_dgelu", [&](CallArguments &a) {
          a.value(c.in(linear.getInput()))
              .value(c.in(linear.getWeight()))
              .value(c.in(linear.getPreactivation()))
              .value(c.out(linear))
              .i32(linear.getTransposeWeight());
        });
      });
}

} // namespace tessera::lowering
