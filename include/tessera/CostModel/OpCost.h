//===- OpCost.h - FLOPs, bytes and time of one tess op ---------*- C++ -*-===//
//
// The work of one op as the kernel it lowers to does it: floating-point
// operations, bytes read and written in device memory, and which matrix or
// vector unit runs it. Its time on a device is the roofline of the two.
//
// Why a table in lib/CostModel rather than an op interface in the dialect:
// an op's cost is a property of the kernel chosen for it (FlashAttention's
// backward recomputes the scores, a reshape is a view, norms are fused into
// one pass), not of the op's semantics, and the dialect should not change
// when a kernel does. One TypeSwitch over the ops keeps every constant of
// the calibrated model in one file a reviewer can read against the kernels.
// The op interface of the sharding search (per-op strategies) is where
// per-op knowledge belongs in the dialect; it will call back into this file
// for the compute cost of each strategy's local shapes.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_OPCOST_H
#define TESSERA_COSTMODEL_OPCOST_H

#include "tessera/CostModel/DeviceModel.h"

#include "mlir/IR/Operation.h"

#include <array>

namespace tessera::cost {

/// The groups `tesserac --explain` reports time by.
enum class OpKind {
  /// tess.linear and tess.matmul: GEMMs on the matrix units.
  Linear,
  /// tess.attention and tess.attention_grad (fused, FlashAttention-style).
  Attention,
  /// layer_norm, rms_norm, softmax and their gradients.
  Norm,
  /// Unary, binary, cast, dropout, where, compare, reductions, activation
  /// gradients.
  Elementwise,
  /// embedding, gather, transpose, slice, split, concat, broadcast and their
  /// gradients: copies.
  DataMovement,
  /// cross_entropy and cross_entropy_grad.
  Loss,
  /// adamw.
  Optimizer,
  /// constants, parameters, reshapes (views) and non-tess ops: no kernel.
  Free,
};
constexpr size_t kOpKindCount = 8;

/// "linear", "attention", "norms", "elementwise", "data movement", "loss",
/// "optimizer", "free".
llvm::StringRef opKindName(OpKind kind);

struct OpCost {
  OpKind kind = OpKind::Free;
  /// Floating-point operations the kernel executes (a multiply-add is 2).
  double flops = 0;
  /// The FLOPs a model-FLOPs count credits the op with: `flops` less any
  /// recomputation (attention's backward recomputes its forward scores).
  /// MFU is computed from these.
  double modelFlops = 0;
  /// Bytes read plus bytes written in device memory.
  double bytes = 0;
  /// Whether the arithmetic runs on the matrix units (contractions) at
  /// `precision`'s rate, or on the vector units.
  bool usesMatrixUnits = false;
  Precision precision = Precision::FP32;
  /// A linear's or matmul's GEMM: C[m, n] = A[m, k] @ B[k, n] (a batched
  /// matmul's batch folded into m); 0 for other ops.
  double m = 0, n = 0, k = 0;
  /// False for a tess op the table does not know (a new op): it is priced
  /// as a memory-bound copy of its operands and results, and reports list
  /// it so the gap is seen rather than silently mispriced.
  bool modelled = true;

  /// Roofline seconds on `device`.
  double time(const DeviceModel &device) const;
};

/// Seconds of one kernel on `device`: the roofline of `flops` and `bytes` at
/// the rate its units reach (attention's own; a contraction's, by its GEMM
/// shape m x n x k when known; the vector rate otherwise) plus the
/// device's per-kernel cost. 0 for a Free op. OpCost::time, and the
/// pipeline planner's per-batch profiles, time ops with it.
double kernelTime(const DeviceModel &device, OpKind kind, bool usesMatrixUnits,
                  Precision precision, double flops, double bytes, double m,
                  double n, double k);

/// The cost of `op`. Ops of other dialects (func.return, ...) are Free.
OpCost estimateOpCost(mlir::Operation *op);

/// The precision a float element type computes in: bf16, f16 and f32 map to
/// their own; any other float (f64, f8 types) is priced as fp32.
Precision precisionOf(mlir::Type elementType);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_OPCOST_H
