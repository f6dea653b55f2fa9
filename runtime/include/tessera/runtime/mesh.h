//===- mesh.h - Ranks arranged in a device mesh -----------------*- C++ -*-===//
//
// A run on N = d0 x d1 x ... ranks places rank r at the row-major coordinates
// of r in the mesh shape (the last axis varies fastest, so a 2x4 mesh
// {dp, tp} puts the 4 tensor-parallel ranks of one data-parallel replica on
// consecutive ranks, i.e. on one node's NVLink island). Along axis a, the
// ranks that share every other coordinate form one group; a rank's index in
// that group is its coordinate on a. Both comm backends build their per-axis
// groups from these functions, so they agree on who talks to whom.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_MESH_H
#define TESSERA_RUNTIME_MESH_H

#include "tessera/runtime/comm.h"
#include "tessera/runtime/comm_error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::comm {

using MeshShape = std::vector<int64_t>;

/// Product of the dims; throws CommError naming the shape if a dim is < 1.
int64_t meshRankCount(const MeshShape &shape);
/// Row-major coordinates of `rank` in `shape`.
std::vector<int32_t> meshCoordinates(const MeshShape &shape, int64_t rank);
/// The world ranks of the group along `axis` that contains `rank`, ordered
/// by their coordinate on `axis`.
std::vector<int32_t> meshAxisGroup(const MeshShape &shape, int64_t rank,
                                   size_t axis);
/// A number that is equal for exactly the ranks of one axis group: the
/// row-major index of the coordinates with `axis` removed (NCCL's split
/// color).
int32_t meshAxisGroupIndex(const MeshShape &shape, int64_t rank, size_t axis);
/// "2x2".
std::string formatMesh(const MeshShape &shape);

/// One rank's handles: the whole world, one comm per mesh axis, and its
/// coordinates. The pointers stay owned by the world that made them; the
/// vectors are laid out the way tessera_step_context wants them.
struct RankComms {
  int32_t rank = 0;
  tessera_comm *world = nullptr;
  std::vector<tessera_comm *> axes;
  std::vector<int32_t> coordinates;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_MESH_H
