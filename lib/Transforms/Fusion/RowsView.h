//===- RowsView.h - a tensor viewed as rows ---------------------*- C++ -*-===//
//
// Internal to lib/Transforms/Fusion. The GEMMs the kernels run read their
// operands as [rows, features]: a tensor's leading dims merged by a
// tess.reshape, which the arena plans as a view.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_FUSION_ROWSVIEW_H
#define TESSERA_LIB_TRANSFORMS_FUSION_ROWSVIEW_H

#include "Tess/IR/TessOps.h"

#include "mlir/IR/Builders.h"

namespace tessera {

/// `value` ([..., width]) as [rows, width]: itself when it has rank 2.
inline mlir::Value asRows(mlir::OpBuilder &builder, mlir::Location loc,
                          mlir::Value value) {
  auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
  if (type.getRank() == 2)
    return value;
  int64_t width = type.getShape().back();
  auto rowsType = mlir::RankedTensorType::get(
      {type.getNumElements() / width, width}, type.getElementType());
  return tess::ReshapeOp::create(builder, loc, rowsType, value);
}

} // namespace tessera

#endif // TESSERA_LIB_TRANSFORMS_FUSION_ROWSVIEW_H
