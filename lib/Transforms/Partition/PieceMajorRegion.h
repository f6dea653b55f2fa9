//===- PieceMajorRegion.h - where a fused projection's pieces run -*- C++ -*-===//
//
// Internal to lib/Transforms/Partition. A fused projection (GPT-2's c_attn:
// one [D, 3D] weight whose output a tess.split cuts into q, k, v) splits
// over tensor parallelism only piece-major (Megatron-LM's fused QKV): rank r
// holds block r of each piece, its columns q_r k_r v_r, so that the split of
// its local output gives its heads of q, k and v. The partitioner's layouts
// are contiguous blocks; piece-major is a different order of the same dim,
// sound only if every op that touches that dim keeps positions as they are.
//
// The region of a split's pieced dim is the set of (value, dim) that hold
// the same index, found through the ops' sharding labels: from the split
// back through the linear layer to its weight and bias (and their casts to
// the compute precision), and from those forward to every reader (the
// backward's GEMMs that contract or produce the dim, its bias gradient's
// reduction, the gradients the step returns), ending at the splits that cut
// the dim into pieces and the concats that join their gradients. It is
// piece-major-able when:
//  - every op keeps the dim's positions: a label of kind batch, parallel,
//    contracted or reduced shared by dims of the same size (elementwise ops,
//    casts, a GEMM's N or K, a reshape that leaves the dim and all inner dims
//    alone, transposes), and an all-reduce; never a whole dim, an indexed,
//    positional, streamed or averaged one, nor a collective along the dim;
//  - the boundaries (splits and concats along the dim) cut it into equal
//    pieces, the same count for all;
//  - the function arguments in it are parameters or buffers, and every
//    returned value in it is the gradient of a parameter in it (a parameter
//    and its gradient share the order the driver's AdamW updates).
// Then the parameters are stored piece-major (the program's
// tessera_tensor_split says so; the driver takes and gathers blocks in that
// order) and every op in the region runs on its local block as it is.
//
// AnnotateFromPlan walks the global step to decide; PartitionSpmd walks the
// local one again after the rewrite to check that no reshard broke the
// region (a compiler bug, reported, not a silently wrong order).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_PARTITION_PIECEMAJORREGION_H
#define TESSERA_LIB_TRANSFORMS_PARTITION_PIECEMAJORREGION_H

#include "tessera/Analysis/MegatronPartition.h"
#include "tessera/Sharding/TensorLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace tessera::partition {

struct PieceMajorRegion {
  /// The splits and concats that cut or join the dim into pieces.
  llvm::SmallVector<mlir::Operation *> boundaries;
  /// Function arguments in the region (parameters, buffers) and their dim.
  llvm::SmallVector<std::pair<unsigned, unsigned>> arguments;
  /// Function results in the region (gradients) and their dim.
  llvm::SmallVector<std::pair<unsigned, unsigned>> results;
  /// Every value of the region and its dim (the boundaries' whole sides
  /// included, not their pieces).
  llvm::SmallVector<std::pair<mlir::Value, unsigned>> values;
  /// How many equal pieces the boundaries cut the dim into.
  int64_t pieces = 0;
  /// The dim's size (every value of the region has it).
  int64_t size = 0;
};

/// The region of `boundary`'s axis (a tess.split or tess.concat in `step`'s
/// body), or an error naming the op that reads or writes the dim in an order
/// other than its positions.
llvm::Expected<PieceMajorRegion> findPieceMajorRegion(mlir::func::FuncOp step,
                                                      mlir::Operation *boundary);

/// The `tess.parameter` argument a value is (MegatronPartition.h).
using tessera::parameterArgument;

/// A split the plan reads piece by piece: its axis split over mesh axis
/// `meshAxis`.
struct PiecedSplit {
  mlir::Operation *split;
  unsigned meshAxis;
};

/// Which pieced splits run piece-major and which keep their dim whole.
struct PieceMajorDecision {
  /// The regions laid out piece by piece, with their mesh axis.
  std::vector<std::pair<PieceMajorRegion, unsigned>> regions;
  /// The splits that are not, and why.
  std::vector<std::pair<mlir::Operation *, std::string>> refused;
  /// Arguments (parameters) that stay whole on the refused splits' axis:
  /// those of the linear layer whose output a refused split reads.
  llvm::DenseSet<unsigned> wholeArguments;
};

/// Decides `splits`: each one's region (shared by the splits of one fused
/// weight, its remat copies) is piece-major when it has one and every
/// argument in it is split on its dim over the split's mesh axis
/// (`argumentSplit(number, dim, meshAxis)`), unless a parameter of it stays
/// whole for a refused split. `broken` refuses the regions of those splits
/// outright, with their reasons (a partitioner's layout that does not keep
/// the dim split, found on an earlier try).
PieceMajorDecision decidePieceMajor(
    mlir::func::FuncOp step, llvm::ArrayRef<PiecedSplit> splits,
    llvm::function_ref<bool(unsigned, unsigned, unsigned)> argumentSplit,
    const llvm::DenseMap<mlir::Operation *, std::string> *broken = nullptr);

/// Marks each region's boundaries tess.piece_major (the axis's name, from
/// `axisNames`) and writes tess.pieces on its arguments and results.
void markPieceMajor(mlir::func::FuncOp step, const PieceMajorDecision &decision,
                    llvm::ArrayRef<std::string> axisNames);

/// A try's decided regions, against which its layouts are checked: every
/// value of a region must stay split on its dim over the region's axis
/// wherever it is read or written, or a reshard would move contiguous
/// blocks (the try is then redone with that region's dim whole).
class PieceMajorLayoutCheck {
public:
  explicit PieceMajorLayoutCheck(
      std::vector<std::pair<PieceMajorRegion, unsigned>> regions);
  /// Records in `broken` the boundaries of each region that `value`, in
  /// `layout`, leaves, with the reason `why(meshAxis)`.
  void check(mlir::Value value, const sharding::TensorLayout &layout,
             llvm::function_ref<std::string(unsigned)> why,
             llvm::DenseMap<mlir::Operation *, std::string> &broken) const;

private:
  std::vector<std::pair<PieceMajorRegion, unsigned>> regions;
  /// Per value of a region: its dim and the region's index.
  llvm::DenseMap<mlir::Value, llvm::SmallVector<std::pair<unsigned, size_t>, 1>>
      pieces;
};

/// Erases every mark markPieceMajor writes (a try redone).
void clearPieceMajor(mlir::func::FuncOp step);

} // namespace tessera::partition

#endif // TESSERA_LIB_TRANSFORMS_PARTITION_PIECEMAJORREGION_H
