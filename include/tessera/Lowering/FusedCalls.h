//===- FusedCalls.h - Adjacent ops the lowering runs as one call -*- C++ -*-===//
//
// A tess.linear and the tanh GELU right after it on its result run as one
// tessera_*_linear_gelu call (one GEMM with cuBLASLt's GELU_AUX epilogue on
// the GPU); a bias-free tess.linear and the tanh gelu_grad right after it,
// whose dy is the linear's result and its only use, run as one
// tessera_*_linear_dgelu call (the DGELU epilogue); a tess.linear and the
// tess.add right after it of its result (its only use) and a residual of
// the same type run as one tessera_*_linear_add call (the residual as the
// GEMM's C). In the backward, a layer_norm_grad or rms_norm_grad and the
// residual-stream add right after it of its dx (dx's only use) and the
// gradient arriving through the residual run as one
// tessera_*_{layer,rms}_norm_grad_add call (dx = residual + the gradient,
// rounded once). A weight gradient's tess.matmul (x^T dy) and the bias
// gradient's reduce_sum of the same dy right after it run as one
// tessera_*_matmul_bias_grad call (cuBLASLt's BGRADA epilogue sums dy as
// the GEMM reads it). A tess.matmul and the add right after it of its
// result (its only use) and a partial sum of the same type run as one
// tessera_*_matmul_add call (the partial sum as the GEMM's C): the weight
// gradient of a head computed a block of rows at a time
// (tess-chunk-loss-head), accumulated in place. The arena planner gives
// such a pair one position, so the second op's results never take the
// storage of the first op's operands, which the one call still reads.
// tess-schedule-gelu-grad puts each gelu_grad right after its linear.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LOWERING_FUSEDCALLS_H
#define TESSERA_LOWERING_FUSEDCALLS_H

#include "Tess/IR/TessOps.h"

namespace tessera::lowering {

/// The tanh GELU of `linear`'s result right after it, or null.
tess::GeluOp geluAfterLinear(tess::LinearOp linear);

/// The tanh gelu_grad right after the bias-free `linear` whose result is
/// its dy and has no other use, or null.
tess::GeluGradOp geluGradAfterLinear(tess::LinearOp linear);

/// The residual add right after `linear` whose one operand is `linear`'s
/// result (its only use) and the other of the same type, or null.
tess::AddOp residualAddAfterLinear(tess::LinearOp linear);
/// That add's other operand.
mlir::Value residualOf(tess::AddOp add, tess::LinearOp linear);

/// The residual add right after a layer_norm_grad or rms_norm_grad `grad`
/// whose one operand is its dx (dx's only use) and the other of the same
/// type, or null (also when `grad` is neither).
tess::AddOp residualAddAfterNormGrad(mlir::Operation *grad);
/// That add's other operand.
mlir::Value residualOf(tess::AddOp add, mlir::Operation *grad);

/// The bias gradient right after the weight gradient `matmul`: a
/// reduce_sum over all but the last dim of dy, where `matmul`'s b is dy (or
/// dy with its leading dims flattened), not transposed; or null.
tess::ReduceSumOp biasGradAfterMatmul(tess::MatmulOp matmul);

/// The add right after `matmul` whose one operand is `matmul`'s result
/// (its only use) and the other of the same type, or null.
tess::AddOp residualAddAfterMatmul(tess::MatmulOp matmul);
/// That add's other operand.
mlir::Value residualOf(tess::AddOp add, tess::MatmulOp matmul);
/// Whether `op` is the second op of such a pair.
bool joinsPreviousCall(mlir::Operation &op);

} // namespace tessera::lowering

#endif // TESSERA_LOWERING_FUSEDCALLS_H
