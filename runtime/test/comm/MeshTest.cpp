//===- MeshTest.cpp - Ranks, coordinates and axis groups of a mesh --------===//

#include "tessera/runtime/mesh.h"

#include <gtest/gtest.h>

using namespace tessera::comm;

// Tests that the last axis varies fastest, as in a row-major array.
TEST(MeshTest, CoordinatesAreRowMajor) {
  MeshShape mesh{2, 3};
  EXPECT_EQ(meshRankCount(mesh), 6);
  EXPECT_EQ(meshCoordinates(mesh, 0), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(meshCoordinates(mesh, 4), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(meshCoordinates(mesh, 5), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(formatMesh(mesh), "2x3");
  EXPECT_EQ(formatMesh({}), "1");
}

// Tests that an axis group holds the ranks differing only on that axis.
TEST(MeshTest, AxisGroups) {
  MeshShape mesh{2, 3};
  EXPECT_EQ(meshAxisGroup(mesh, 4, 0), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(meshAxisGroup(mesh, 4, 1), (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(meshAxisGroupIndex(mesh, 4, 0), 1);
  EXPECT_EQ(meshAxisGroupIndex(mesh, 1, 0), 1);
  EXPECT_EQ(meshAxisGroupIndex(mesh, 4, 1), 1);
  EXPECT_EQ(meshAxisGroupIndex(mesh, 0, 1), 0);
}

TEST(MeshTest, RejectsEmptyAxis) {
  EXPECT_THROW(meshRankCount({2, 0}), CommError);
}
