//===- TensorLayout.h - how one tensor lies on a device mesh ----*- C++ -*-===//
//
// The layout of a tensor on a DeviceMesh: for every tensor dim, the mesh axis
// it is split over (in equal contiguous blocks) or none, and the mesh axes
// over which the tensor is a pending partial sum (each device of a group holds
// an addend; the tensor is their sum). A row-parallel linear layer (Megatron)
// produces such a partial sum: every device multiplies its slice of the
// contraction dim, and the all-reduce that completes the sum is a separate,
// priced, step that the search may move or merge (e.g. into a
// reduce-scatter).
//
// Why not upstream MLIR's `shard` dialect: its sharding attribute records
// only which grid axes split which tensor dims (plus halo and offset
// details); it has no state for "this value is an unreduced sum", which is
// exactly what a row-parallel layer and a vocabulary-parallel embedding
// produce, and its propagation picks layouts greedily op by op. The search
// needs both the partial state and a global choice, so the representation is
// ours. A later partitioning pass can still emit `shard` ops for the
// split-only part of a layout.
//
// Text form, for tests and reports: one entry per tensor dim, the axis name
// or `-` for an unsplit dim, then optionally the partial axes:
//   "[tp, -]"            dim 0 split over `tp`, dim 1 whole
//   "[-, -] partial(dp)" whole on every device, a partial sum over `dp`
//   "[]"                 a scalar, replicated
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_TENSORLAYOUT_H
#define TESSERA_SHARDING_TENSORLAYOUT_H

#include "tessera/CostModel/DeviceMesh.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tessera::sharding {

/// Marks a tensor dim that is not split.
constexpr int kUnsplit = -1;

struct TensorLayout {
  /// Per tensor dim: the index of the mesh axis it is split over, or
  /// kUnsplit.
  llvm::SmallVector<int, 4> dimAxes;
  /// Mesh axes over which the tensor is a pending partial sum, ascending.
  llvm::SmallVector<unsigned, 2> partialAxes;

  /// Whole on every device: no split, no partial sum.
  static TensorLayout replicated(unsigned rank);
  /// Replicated except that `dim` is split over `axis`.
  static TensorLayout splitDim(unsigned rank, unsigned dim, unsigned axis);
  /// Replicated shape, partial sum over `axis`.
  static TensorLayout partial(unsigned rank, unsigned axis);

  unsigned rank() const { return dimAxes.size(); }
  bool isReplicated() const;
  /// The tensor dim split over `axis`, or kUnsplit.
  int dimSplitOver(unsigned axis) const;
  bool isPartialOver(unsigned axis) const;
  /// The number of pieces the tensor's elements are divided into per device:
  /// the product of the sizes of the axes that split a dim.
  int64_t splitFactor(const cost::DeviceMesh &mesh) const;
  /// Elements each device holds for a tensor of `shape`.
  double localElements(llvm::ArrayRef<int64_t> shape,
                       const cost::DeviceMesh &mesh) const;

  /// The text form (see the file comment), with `mesh`'s axis names.
  std::string print(const cost::DeviceMesh &mesh) const;

  bool operator==(const TensorLayout &other) const {
    return dimAxes == other.dimAxes && partialAxes == other.partialAxes;
  }
  bool operator!=(const TensorLayout &other) const { return !(*this == other); }
};

/// Parses the text form against `mesh`. Errors: an unknown axis name, an
/// axis used twice (two dims, or a dim and a partial sum), malformed text.
llvm::Expected<TensorLayout> parseTensorLayout(llvm::StringRef text,
                                               const cost::DeviceMesh &mesh);

/// Whether `layout` can lie on a tensor of `shape`: one entry per dim and
/// every split dim divisible by its axis's size.
bool fitsShape(const TensorLayout &layout, llvm::ArrayRef<int64_t> shape,
               const cost::DeviceMesh &mesh);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_TENSORLAYOUT_H
