//===- Reshard.h - collectives that move a value between layouts -*- C++ -*-===//
//
// Emits the per-rank ops that turn a value held in one layout into another:
//   partial -> whole            tess.all_reduce
//   partial -> split on a dim   tess.reduce_scatter
//   split   -> whole            tess.all_gather
//   split on d1 -> split on d2  tess.all_to_all (same axis)
//   whole   -> split            tess.shard_slice (no communication)
//   whole   -> partial          multiply by 1/n (each rank an equal addend;
//                               exact for a power-of-two axis)
// in that order, axis by axis.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PARTITION_RESHARD_H
#define TESSERA_TRANSFORMS_PARTITION_RESHARD_H

#include "tessera/Sharding/TensorLayout.h"

#include "mlir/IR/Builders.h"

namespace tessera::partition {

/// `value` is a rank's local tensor in layout `from`; returns it in layout
/// `to` (`value` itself when they are equal). Fails, with a diagnostic at
/// `location`, for a partial sum of a non-float tensor.
mlir::FailureOr<mlir::Value> reshard(mlir::OpBuilder &builder,
                                     mlir::Location location,
                                     mlir::Value value,
                                     const sharding::TensorLayout &from,
                                     const sharding::TensorLayout &to,
                                     const cost::DeviceMesh &mesh);

/// The type one rank holds of a tensor of `type` in `layout`.
mlir::RankedTensorType localType(mlir::RankedTensorType type,
                                 const sharding::TensorLayout &layout,
                                 const cost::DeviceMesh &mesh);

} // namespace tessera::partition

#endif // TESSERA_TRANSFORMS_PARTITION_RESHARD_H
