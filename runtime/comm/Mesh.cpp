//===- Mesh.cpp - Ranks arranged in a device mesh -------------------------===//

#include "tessera/runtime/mesh.h"

namespace tessera::comm {

int64_t meshRankCount(const MeshShape &shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 1)
      throw CommError("mesh " + formatMesh(shape) +
                      ": every axis needs at least one rank");
    count *= dim;
  }
  return count;
}

std::string formatMesh(const MeshShape &shape) {
  if (shape.empty())
    return "1";
  std::string text;
  for (size_t a = 0; a < shape.size(); ++a)
    text += (a ? "x" : "") + std::to_string(shape[a]);
  return text;
}

std::vector<int32_t> meshCoordinates(const MeshShape &shape, int64_t rank) {
  std::vector<int32_t> coordinates(shape.size(), 0);
  for (size_t a = shape.size(); a-- > 0;) {
    coordinates[a] = static_cast<int32_t>(rank % shape[a]);
    rank /= shape[a];
  }
  return coordinates;
}

static int64_t rankOf(const MeshShape &shape,
                      const std::vector<int32_t> &coordinates) {
  int64_t rank = 0;
  for (size_t a = 0; a < shape.size(); ++a)
    rank = rank * shape[a] + coordinates[a];
  return rank;
}

std::vector<int32_t> meshAxisGroup(const MeshShape &shape, int64_t rank,
                                   size_t axis) {
  std::vector<int32_t> coordinates = meshCoordinates(shape, rank);
  std::vector<int32_t> group;
  for (int32_t c = 0; c < shape[axis]; ++c) {
    coordinates[axis] = c;
    group.push_back(static_cast<int32_t>(rankOf(shape, coordinates)));
  }
  return group;
}

int32_t meshAxisGroupIndex(const MeshShape &shape, int64_t rank, size_t axis) {
  std::vector<int32_t> coordinates = meshCoordinates(shape, rank);
  int64_t index = 0;
  for (size_t a = 0; a < shape.size(); ++a)
    if (a != axis)
      index = index * shape[a] + coordinates[a];
  return static_cast<int32_t>(index);
}

} // namespace tessera::comm
