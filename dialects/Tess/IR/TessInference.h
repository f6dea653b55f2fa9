//===- TessInference.h - shape rules shared by forward and gradient ops ---===//
//
// A gradient op checks the rules of its forward op (a layer_norm_grad is only
// valid where the layer_norm was), so the two share these checks. Private to
// the dialect's implementation.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_TESS_TESSINFERENCE_H
#define TESSERA_DIALECT_TESS_TESSINFERENCE_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

#include <optional>
#include <string>

namespace tessera::tess::detail {

/// "[2, 4, 8]", as the rule messages print shapes.
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// Rules C1 and C2 of tess.layer_norm / tess.rms_norm; pushes the input's
/// type. `scale` and `bias` may be null.
mlir::LogicalResult inferNorm(std::optional<mlir::Location> location,
                              mlir::Value input, int64_t axis,
                              mlir::Value scale, mlir::Value bias,
                              llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Rules C1 and C2 of tess.packed_swiglu (C1 and C2 of its gradient, with
/// `halved` its dy): `input` has a static, even last dim and `halved` is its
/// type with that dim halved.
mlir::LogicalResult checkPackedGating(std::optional<mlir::Location> location,
                                      mlir::Type input, mlir::Type halved,
                                      llvm::StringRef halvedName);

/// Rules C1 to C3 of the cross-entropy ops: targets index the logits'
/// rows, and `allTargets` (may be null) can count them.
mlir::LogicalResult checkLogitsAndTargets(std::optional<mlir::Location> location,
                                          mlir::Value logits,
                                          mlir::Value targets,
                                          mlir::Value allTargets);

/// Rules C1 to C3 of tess.cross_entropy; pushes its f32 scalar loss.
mlir::LogicalResult inferCrossEntropy(std::optional<mlir::Location> location,
                                      mlir::Value logits, mlir::Value targets,
                                      mlir::Value allTargets,
                                      llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Rules C1 to C4 of tess.matmul; pushes its result type.
mlir::LogicalResult inferMatmul(std::optional<mlir::Location> location,
                                mlir::Value lhs, mlir::Value rhs,
                                bool transposeLhs, bool transposeRhs,
                                llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Rules C1 to C4 of tess.linear; pushes its result type. `bias` may be
/// null.
mlir::LogicalResult inferLinear(std::optional<mlir::Location> location,
                                mlir::Value input, mlir::Value weight,
                                mlir::Value bias, bool transposeWeight,
                                llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Rules C1 to C9 of tess.attention; pushes its result type. `mask` may be
/// null; `window` and `softcap` 0 are none.
mlir::LogicalResult inferAttention(std::optional<mlir::Location> location,
                                   mlir::Value query, mlir::Value key,
                                   mlir::Value value, mlir::Value mask,
                                   bool causal, double scale, double dropout,
                                   int64_t window, double softcap,
                                   llvm::SmallVectorImpl<mlir::Type> &inferred);

/// Rules C1 to C4 of tess.packed_attention; pushes its two result types.
mlir::LogicalResult
inferPackedAttention(std::optional<mlir::Location> location, mlir::Value qkv,
                     int64_t queryHeads, int64_t keyHeads, double scale,
                     llvm::SmallVectorImpl<mlir::Type> &inferred);

} // namespace tessera::tess::detail

#endif // TESSERA_DIALECT_TESS_TESSINFERENCE_H
