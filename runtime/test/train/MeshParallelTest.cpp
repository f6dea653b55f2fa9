//===- MeshParallelTest.cpp - The driver's side of a partitioned program --===//
//
// MeshLayout (MeshParallel.h) over a hand-built program partitioned for a
// 2x2 mesh: the whole program's shapes, each coordinate's blocks of a whole
// state, which ranks count a block in the gradient norm, the blocks gathered
// back to whole tensors and the norm summed over 4 thread ranks
// (thread_comm.h), and the malformed programs it refuses. Then mesh_step.h's
// collectives, which look up the communicator of a mesh axis in the step's
// context: the missing-communicator error, shard_slice, and each collective
// over the right axis group of thread ranks.
//
//===----------------------------------------------------------------------===//

#include "MeshParallel.h"
#include "HostTestProgram.h"
#include "HostBackend.h"
#include "TrainError.h"
#include "TrainingState.h"

#include "../comm/CommTestUtil.h"

#include "tessera/runtime/lowering_support.h"
#include "tessera/runtime/mesh_step.h"
#include "tessera/runtime/thread_comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using namespace tessera::train;
using tessera::comm::RankComms;
using tessera::comm::ThreadWorld;

namespace {

/// A split whose dims are `axes` in order, every later dim whole (-1), in
/// contiguous blocks (no pieces).
tessera_tensor_split splitOf(std::initializer_list<int32_t> axes) {
  tessera_tensor_split split{};
  std::fill(std::begin(split.mesh_axis), std::end(split.mesh_axis), -1);
  std::copy(axes.begin(), axes.end(), std::begin(split.mesh_axis));
  return split;
}

/// splitOf(axes) with `pieces` per dim (0 for the dims past them).
tessera_tensor_split piecedSplitOf(std::initializer_list<int32_t> axes,
                                   std::initializer_list<int32_t> pieces) {
  tessera_tensor_split split = splitOf(axes);
  std::copy(pieces.begin(), pieces.end(), std::begin(split.pieces));
  return split;
}

/// A program partitioned for a 2x2 mesh {dp, tp}, its tensors one rank's
/// blocks:
/// - "attn.w" [2, 3] split {-1, 1}: whole [2, 6] (tp along dim 1);
/// - "mlp.b" [4] split {0}: whole [8] (dp along dim 0);
/// - "norm" [5] unsplit;
/// - "both" [3, 2] split {1, 0}: whole [6, 4];
/// - buffer "mask" (i64) [2, 3] split {0, -1}: whole [4, 3];
/// - buffer "table" (f32) [3] unsplit.
/// Owns everything the tessera_program points to; tests edit the vectors
/// and call refresh() to build malformed variants.
struct MeshProgram {
  MeshProgram() {
    parameters = {{"attn.w", TESSERA_F32, 2, {2, 3}},
                  {"mlp.b", TESSERA_F32, 1, {4}},
                  {"norm", TESSERA_F32, 1, {5}},
                  {"both", TESSERA_F32, 2, {3, 2}}};
    parameterSplits = {splitOf({-1, 1}), splitOf({0}), splitOf({}),
                       splitOf({1, 0})};
    buffers = {{"mask", TESSERA_I64, 2, {2, 3}},
               {"table", TESSERA_F32, 1, {3}}};
    bufferSplits = {splitOf({0, -1}), splitOf({})};
    refresh();
  }
  MeshProgram(const MeshProgram &) = delete;
  MeshProgram &operator=(const MeshProgram &) = delete;

  void refresh() {
    program = tessera_train_test::hostTestProgram("mesh.onnx");
    program.parameter_count = static_cast<int32_t>(parameters.size());
    program.parameters = parameters.data();
    program.buffer_count = static_cast<int32_t>(buffers.size());
    program.buffers = buffers.data();
    program.mesh_axis_count = static_cast<int32_t>(meshShape.size());
    program.mesh_shape = meshShape.data();
    program.mesh_axis_names = axisNames;
    program.parameter_splits = parameterSplits.data();
    program.buffer_splits = bufferSplits.data();
  }

  std::vector<tessera_tensor_info> parameters, buffers;
  std::vector<tessera_tensor_split> parameterSplits, bufferSplits;
  std::vector<int64_t> meshShape = {2, 2};
  const char *axisNames[2] = {"dp", "tp"};
  tessera_program program{};
};

/// The whole shapes of MeshProgram's parameters and buffers.
const std::vector<std::vector<int64_t>> kWholeParameterShapes = {
    {2, 6}, {8}, {5}, {6, 4}};
const std::vector<std::vector<int64_t>> kWholeBufferShapes = {{4, 3}, {3}};

int64_t product(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

/// The row-major index into a tensor of `whole` shape of element `index` of
/// the block at `coordinates`: along a dim split over axis a the block
/// starts at coordinates[a] * block size; split in P > 1 pieces, the block
/// is P shares of block size / P, share k starting at k * whole size / P +
/// coordinates[a] * block size / P.
int64_t wholeIndexOf(int64_t index, const tessera_tensor_info &block,
                     const std::vector<int64_t> &whole,
                     const tessera_tensor_split &split,
                     const std::vector<int32_t> &coordinates) {
  std::vector<int64_t> position(static_cast<size_t>(block.rank));
  for (int32_t d = block.rank - 1; d >= 0; --d) {
    position[static_cast<size_t>(d)] = index % block.shape[d];
    index /= block.shape[d];
  }
  int64_t result = 0;
  for (int32_t d = 0; d < block.rank; ++d) {
    int64_t at = position[static_cast<size_t>(d)];
    if (split.mesh_axis[d] >= 0) {
      const int64_t pieces = std::max(split.pieces[d], 1);
      const int64_t share = block.shape[d] / pieces;
      at = at / share * (whole[static_cast<size_t>(d)] / pieces) +
           coordinates[static_cast<size_t>(split.mesh_axis[d])] * share +
           at % share;
    }
    result = result * whole[static_cast<size_t>(d)] + at;
  }
  return result;
}

/// A whole state of MeshProgram with distinct values: parameter element e
/// is e (first moment 1000 + e, second 2000 + e, plus 100 per parameter),
/// buffer "mask" element e is 7 + e, "table" element e is 0.5 + e.
TrainingState wholeStateOf(const MeshLayout &layout) {
  TrainingState state;
  allocateState(layout.wholeProgram(), state);
  for (size_t i = 0; i < state.parameters.size(); ++i)
    for (size_t e = 0; e < state.parameters[i].size(); ++e) {
      auto value = static_cast<float>(100 * i + e);
      state.parameters[i][e] = value;
      state.firstMoments[i][e] = 1000 + value;
      state.secondMoments[i][e] = 2000 + value;
    }
  auto *mask = reinterpret_cast<int64_t *>(state.buffers[0].data());
  for (int64_t e = 0; e < 12; ++e)
    mask[e] = 7 + e;
  auto *table = reinterpret_cast<float *>(state.buffers[1].data());
  for (int64_t e = 0; e < 3; ++e)
    table[e] = 0.5f + static_cast<float>(e);
  state.step = 12;
  state.optimizerStep = 11;
  state.seed = 0x5eed1234abcdULL;
  state.dataPosition = 345;
  state.lossScale = 1024;
  state.cleanSteps = 3;
  return state;
}

/// Adds to MeshProgram tensors split piece-major over tp (axis 1):
/// - "c_attn.w" [4, 6] split {-1, 1} in 3 pieces along dim 1: whole
///   [4, 12], q|k|v of 4 columns each (GPT-2's fused projection);
/// - "rows" [4, 2] split {1, 0} in 2 pieces along dim 0: whole [8, 4], each
///   rank 2 rows of each piece of 4 and its dp half of the columns;
/// - buffer "qkv.bias" (f32) [6] split {1} in 3 pieces: whole [12].
void addPiecedTensors(MeshProgram &mesh) {
  mesh.parameters.push_back({"c_attn.w", TESSERA_F32, 2, {4, 6}});
  mesh.parameterSplits.push_back(piecedSplitOf({-1, 1}, {0, 3}));
  mesh.parameters.push_back({"rows", TESSERA_F32, 2, {4, 2}});
  mesh.parameterSplits.push_back(piecedSplitOf({1, 0}, {2, 1}));
  mesh.buffers.push_back({"qkv.bias", TESSERA_F32, 1, {6}});
  mesh.bufferSplits.push_back(piecedSplitOf({1}, {3}));
  mesh.refresh();
}

/// The whole shapes of MeshProgram's parameters after addPiecedTensors.
const std::vector<std::vector<int64_t>> kWholePiecedParameterShapes = {
    {2, 6}, {8}, {5}, {6, 4}, {4, 12}, {8, 4}};

/// The message of the TrainError `body` throws ("" and a failure if none).
template <typename Body> std::string trainErrorOf(Body &&body) {
  try {
    body();
  } catch (const TrainError &error) {
    return error.what();
  }
  ADD_FAILURE() << "no TrainError thrown";
  return "";
}

/// Runs body on every rank; fails the test with the error if any rank fails.
void runAll(ThreadWorld &world,
            const std::function<void(const RankComms &)> &body) {
  tessera::comm::runThreadRanks(world, [&](const RankComms &comms) {
    body(comms);
    return 0;
  });
}

/// The step context the driver gives rank `comms` of a mesh.
tessera_step_context contextOf(const RankComms &comms) {
  tessera_step_context context{};
  context.mesh_axis_count = static_cast<int32_t>(comms.axes.size());
  context.axis_comms = comms.axes.data();
  context.mesh_coordinates = comms.coordinates.data();
  return context;
}

using tessera::comm::test::view;

#define MESH_OK(call) ASSERT_EQ((call), 0) << tessera_cpu_last_error()

const std::vector<std::vector<int32_t>> kCoordinates = {
    {0, 0}, {0, 1}, {1, 0}, {1, 1}};

// Tests that the whole program multiplies each split dim by the size of its
// mesh axis, leaves unsplit dims and tensors as they are, keeps names,
// dtypes and ranks, drops the mesh, and leaves the program itself untouched.
TEST(MeshLayout, WholeProgramHasTheWholeShapes) {
  MeshProgram mesh;
  MeshLayout layout(mesh.program);
  EXPECT_TRUE(MeshLayout::isPartitioned(mesh.program));
  EXPECT_EQ(layout.getShape(), (tessera::comm::MeshShape{2, 2}));
  const tessera_program &whole = layout.wholeProgram();
  ASSERT_EQ(whole.parameter_count, 4);
  ASSERT_EQ(whole.buffer_count, 2);
  for (int32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(mesh.parameters[static_cast<size_t>(i)].name);
    EXPECT_STREQ(whole.parameters[i].name,
                 mesh.parameters[static_cast<size_t>(i)].name);
    EXPECT_EQ(whole.parameters[i].dtype, TESSERA_F32);
    EXPECT_EQ(shapeOf(whole.parameters[i]),
              kWholeParameterShapes[static_cast<size_t>(i)]);
  }
  for (int32_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(mesh.buffers[static_cast<size_t>(i)].name);
    EXPECT_STREQ(whole.buffers[i].name,
                 mesh.buffers[static_cast<size_t>(i)].name);
    EXPECT_EQ(whole.buffers[i].dtype,
              mesh.buffers[static_cast<size_t>(i)].dtype);
    EXPECT_EQ(shapeOf(whole.buffers[i]),
              kWholeBufferShapes[static_cast<size_t>(i)]);
  }
  // The blocks' program still describes the blocks.
  EXPECT_EQ(shapeOf(mesh.program.parameters[0]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(shapeOf(mesh.program.parameters[3]), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(whole.model_name, mesh.program.model_name);
  EXPECT_EQ(whole.batch, mesh.program.batch);
  // The whole tensors are a single device's: no mesh and no splits left.
  EXPECT_FALSE(MeshLayout::isPartitioned(whole));
  EXPECT_EQ(whole.mesh_shape, nullptr);
  EXPECT_EQ(whole.parameter_splits, nullptr);
  EXPECT_EQ(whole.buffer_splits, nullptr);
}

// Tests that a partitioned program without splits (NULL) holds every tensor
// whole: the whole program has the blocks' shapes.
TEST(MeshLayout, NoSplitsMeansEveryTensorIsWhole) {
  MeshProgram mesh;
  mesh.program.parameter_splits = nullptr;
  mesh.program.buffer_splits = nullptr;
  MeshLayout layout(mesh.program);
  for (int32_t i = 0; i < 4; ++i)
    EXPECT_EQ(shapeOf(layout.wholeProgram().parameters[i]),
              shapeOf(mesh.program.parameters[i]));
  for (int32_t i = 0; i < 2; ++i)
    EXPECT_EQ(shapeOf(layout.wholeProgram().buffers[i]),
              shapeOf(mesh.program.buffers[i]));
  for (const std::vector<int32_t> &coordinates : kCoordinates)
    EXPECT_EQ(layout.countedInNorm(coordinates),
              (std::vector<bool>{coordinates[0] == 0 && coordinates[1] == 0,
                                 coordinates[0] == 0 && coordinates[1] == 0,
                                 coordinates[0] == 0 && coordinates[1] == 0,
                                 coordinates[0] == 0 && coordinates[1] == 0}));
}

// Tests that takeBlocks gives every coordinate of the 2x2 mesh its own block
// of each parameter, first and second moment (f32) and buffer (i64 and f32
// bytes), at the blocks' sizes, and carries the counters over unchanged.
TEST(MeshLayout, TakeBlocksGivesEachCoordinateItsBlock) {
  MeshProgram mesh;
  MeshLayout layout(mesh.program);
  TrainingState whole = wholeStateOf(layout);
  for (const std::vector<int32_t> &coordinates : kCoordinates) {
    SCOPED_TRACE("coordinates (" + std::to_string(coordinates[0]) + ", " +
                 std::to_string(coordinates[1]) + ")");
    TrainingState blocks = layout.takeBlocks(whole, coordinates);
    ASSERT_EQ(blocks.parameters.size(), 4u);
    ASSERT_EQ(blocks.buffers.size(), 2u);
    for (size_t i = 0; i < 4; ++i) {
      SCOPED_TRACE(mesh.parameters[i].name);
      const tessera_tensor_info &block = mesh.parameters[i];
      ASSERT_EQ(static_cast<int64_t>(blocks.parameters[i].size()),
                elementCount(block));
      ASSERT_EQ(blocks.firstMoments[i].size(), blocks.parameters[i].size());
      ASSERT_EQ(blocks.secondMoments[i].size(), blocks.parameters[i].size());
      for (int64_t e = 0; e < elementCount(block); ++e) {
        auto source = static_cast<size_t>(
            wholeIndexOf(e, block, kWholeParameterShapes[i],
                         mesh.parameterSplits[i], coordinates));
        auto at = static_cast<size_t>(e);
        EXPECT_EQ(blocks.parameters[i][at], whole.parameters[i][source])
            << "element " << e;
        EXPECT_EQ(blocks.firstMoments[i][at], whole.firstMoments[i][source])
            << "element " << e;
        EXPECT_EQ(blocks.secondMoments[i][at], whole.secondMoments[i][source])
            << "element " << e;
      }
    }
    // "mask" (i64, split over dp along dim 0): rows 2 c0, 2 c0 + 1.
    ASSERT_EQ(blocks.buffers[0].size(), 6u * sizeof(int64_t));
    const auto *mask =
        reinterpret_cast<const int64_t *>(blocks.buffers[0].data());
    for (int64_t e = 0; e < 6; ++e)
      EXPECT_EQ(mask[e], 7 + 6 * coordinates[0] + e) << "mask element " << e;
    EXPECT_EQ(blocks.buffers[1], whole.buffers[1]);
    EXPECT_EQ(blocks.step, 12);
    EXPECT_EQ(blocks.optimizerStep, 11);
    EXPECT_EQ(blocks.seed, 0x5eed1234abcdULL);
    EXPECT_EQ(blocks.dataPosition, 345);
    EXPECT_EQ(blocks.lossScale, 1024);
    EXPECT_EQ(blocks.cleanSteps, 3);
  }
  // Spelled out for two blocks: "attn.w" is [[0..5], [6..11]], so tp
  // coordinate 1 holds columns 3..5; "both" is [6, 4] and coordinates
  // (1, 0) hold rows 0..2 (tp 0) and columns 2..3 (dp 1).
  TrainingState blocks = layout.takeBlocks(whole, {1, 0});
  EXPECT_EQ(layout.takeBlocks(whole, {0, 1}).parameters[0],
            (std::vector<float>{3, 4, 5, 9, 10, 11}));
  EXPECT_EQ(blocks.parameters[3],
            (std::vector<float>{302, 303, 306, 307, 310, 311}));
  EXPECT_EQ(blocks.parameters[1], (std::vector<float>{104, 105, 106, 107}));
  EXPECT_EQ(blocks.parameters[2], whole.parameters[2]);
}

// Tests that a block is counted in the norm by exactly one rank of those
// holding it: split over tp only by dp coordinate 0 (both tp blocks), split
// over dp only by tp coordinate 0, unsplit by (0, 0) alone, split over both
// axes by every rank.
TEST(MeshLayout, CountedInNormOnceByTheFirstReplica) {
  MeshProgram mesh;
  MeshLayout layout(mesh.program);
  for (const std::vector<int32_t> &coordinates : kCoordinates) {
    SCOPED_TRACE("coordinates (" + std::to_string(coordinates[0]) + ", " +
                 std::to_string(coordinates[1]) + ")");
    std::vector<bool> counted = layout.countedInNorm(coordinates);
    ASSERT_EQ(counted.size(), 4u);
    EXPECT_EQ(counted[0], coordinates[0] == 0);                        // attn.w
    EXPECT_EQ(counted[1], coordinates[1] == 0);                        // mlp.b
    EXPECT_EQ(counted[2], coordinates[0] == 0 && coordinates[1] == 0); // norm
    EXPECT_TRUE(counted[3]);                                           // both
  }
  // Each whole tensor is covered exactly once over the mesh.
  for (size_t i = 0; i < 4; ++i) {
    int64_t elements = 0;
    for (const std::vector<int32_t> &coordinates : kCoordinates)
      if (layout.countedInNorm(coordinates)[i])
        elements += elementCount(mesh.parameters[i]);
    EXPECT_EQ(elements, product(kWholeParameterShapes[i]))
        << mesh.parameters[i].name;
  }
}

/// Per rank of `layout`'s mesh (thread ranks): the parameters it gathers
/// back from its blocks of `whole`.
std::vector<std::vector<std::vector<float>>>
takeAndGatherOnEveryRank(const MeshLayout &layout, const TrainingState &whole) {
  ThreadWorld world(layout.getShape(), 30);
  std::vector<std::vector<std::vector<float>>> gathered(
      static_cast<size_t>(world.size()));
  runAll(world, [&](const RankComms &comms) {
    TrainingState blocks = layout.takeBlocks(whole, comms.coordinates);
    gathered[static_cast<size_t>(comms.rank)] =
        layout.gatherParameters(blocks.parameters, comms, nullptr);
  });
  return gathered;
}

// Tests that on 4 thread ranks of the 2x2 mesh every rank's blocks (from
// takeBlocks) gather back to exactly the whole parameters, on every rank,
// including the tensor split over both axes.
TEST(MeshLayout, GatherParametersRebuildsTheWholeTensorsOnEveryRank) {
  MeshProgram mesh;
  MeshLayout layout(mesh.program);
  TrainingState whole = wholeStateOf(layout);
  std::vector<std::vector<std::vector<float>>> gathered =
      takeAndGatherOnEveryRank(layout, whole);
  for (size_t rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(gathered[rank].size(), 4u);
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(gathered[rank][i], whole.parameters[i])
          << mesh.parameters[i].name;
  }
}

// Tests that a pieced dim gives each rank its share of every piece, in piece
// order, of the parameters, their moments and a buffer: GPT-2's c_attn
// weight [4, 12] (q|k|v of 4 columns) gives tp coordinate 0 columns 0-1,
// 4-5, 8-9 and tp coordinate 1 columns 2-3, 6-7, 10-11, not the
// contiguous halves; the whole shapes are the blocks' times the axis, as
// for contiguous blocks.
TEST(MeshLayout, TakeBlocksGivesEachCoordinateItsShareOfEveryPiece) {
  MeshProgram mesh;
  addPiecedTensors(mesh);
  MeshLayout layout(mesh.program);
  const tessera_program &wholeProgram = layout.wholeProgram();
  ASSERT_EQ(wholeProgram.parameter_count, 6);
  EXPECT_EQ(shapeOf(wholeProgram.parameters[4]),
            (std::vector<int64_t>{4, 12}));
  EXPECT_EQ(shapeOf(wholeProgram.parameters[5]), (std::vector<int64_t>{8, 4}));
  ASSERT_EQ(wholeProgram.buffer_count, 3);
  EXPECT_EQ(shapeOf(wholeProgram.buffers[2]), (std::vector<int64_t>{12}));

  // "c_attn.w" element (row, column) is 400 + 12 row + column; "qkv.bias"
  // element e is 50 + e.
  TrainingState whole = wholeStateOf(layout);
  auto *bias = reinterpret_cast<float *>(whole.buffers[2].data());
  for (int64_t e = 0; e < 12; ++e)
    bias[e] = 50 + static_cast<float>(e);
  const std::vector<float> kAttention[2] = {
      {400, 401, 404, 405, 408, 409, 412, 413, 416, 417, 420, 421,
       424, 425, 428, 429, 432, 433, 436, 437, 440, 441, 444, 445},
      {402, 403, 406, 407, 410, 411, 414, 415, 418, 419, 422, 423,
       426, 427, 430, 431, 434, 435, 438, 439, 442, 443, 446, 447}};
  const std::vector<float> kBias[2] = {{50, 51, 54, 55, 58, 59},
                                       {52, 53, 56, 57, 60, 61}};
  for (const std::vector<int32_t> &coordinates : kCoordinates) {
    SCOPED_TRACE("coordinates (" + std::to_string(coordinates[0]) + ", " +
                 std::to_string(coordinates[1]) + ")");
    TrainingState blocks = layout.takeBlocks(whole, coordinates);
    const auto tp = static_cast<size_t>(coordinates[1]);
    EXPECT_EQ(blocks.parameters[4], kAttention[tp]);
    std::vector<float> first = kAttention[tp], second = kAttention[tp];
    for (float &value : first)
      value += 1000;
    for (float &value : second)
      value += 2000;
    EXPECT_EQ(blocks.firstMoments[4], first);
    EXPECT_EQ(blocks.secondMoments[4], second);
    ASSERT_EQ(blocks.buffers[2].size(), 6u * sizeof(float));
    const auto *blockBias =
        reinterpret_cast<const float *>(blocks.buffers[2].data());
    EXPECT_EQ(std::vector<float>(blockBias, blockBias + 6), kBias[tp]);
    // Every parameter, pieced (dim 0 of "rows", with dim 1 split
    // contiguously over dp) or not, against the index arithmetic.
    for (size_t i = 0; i < 6; ++i) {
      SCOPED_TRACE(mesh.parameters[i].name);
      const tessera_tensor_info &block = mesh.parameters[i];
      ASSERT_EQ(static_cast<int64_t>(blocks.parameters[i].size()),
                elementCount(block));
      for (int64_t e = 0; e < elementCount(block); ++e) {
        auto source = static_cast<size_t>(
            wholeIndexOf(e, block, kWholePiecedParameterShapes[i],
                         mesh.parameterSplits[i], coordinates));
        auto at = static_cast<size_t>(e);
        EXPECT_EQ(blocks.parameters[i][at], whole.parameters[i][source])
            << "element " << e;
        EXPECT_EQ(blocks.secondMoments[i][at], whole.secondMoments[i][source])
            << "element " << e;
      }
    }
  }
  // Spelled out for "rows" ([8, 4], element (row, column) 500 + 4 row +
  // column) at (dp 1, tp 0): rows 0-1 of each piece of 4 (rows 0, 1, 4,
  // 5), columns 2-3.
  EXPECT_EQ(layout.takeBlocks(whole, {1, 0}).parameters[5],
            (std::vector<float>{502, 503, 506, 507, 518, 519, 522, 523}));
}

// Tests that on 4 thread ranks of the 2x2 mesh the blocks of pieced
// parameters (along dim 1, and along dim 0 beside a contiguous split over
// the other axis) gather back bit for bit to the whole tensors in their
// true order, among the contiguous ones, on every rank; and that the
// pieced blocks are counted in the norm as contiguous ones are, covering
// each whole tensor once.
TEST(MeshLayout, GatherParametersRebuildsPiecedTensorsInTheirOrder) {
  MeshProgram mesh;
  addPiecedTensors(mesh);
  MeshLayout layout(mesh.program);
  // Values of every magnitude and sign, so that a misplaced or converted
  // element cannot compare equal.
  TrainingState whole = wholeStateOf(layout);
  for (size_t i = 0; i < whole.parameters.size(); ++i)
    for (size_t e = 0; e < whole.parameters[i].size(); ++e)
      whole.parameters[i][e] =
          static_cast<float>(e % 2 ? -1.0 : 1.0) *
          (static_cast<float>(i) + 0.1f * static_cast<float>(e + 1)) /
          (3.0f + static_cast<float>(e));
  std::vector<std::vector<std::vector<float>>> gathered =
      takeAndGatherOnEveryRank(layout, whole);
  for (size_t rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(gathered[rank].size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      ASSERT_EQ(gathered[rank][i].size(), whole.parameters[i].size())
          << mesh.parameters[i].name;
      EXPECT_EQ(std::memcmp(gathered[rank][i].data(),
                            whole.parameters[i].data(),
                            whole.parameters[i].size() * sizeof(float)),
                0)
          << mesh.parameters[i].name;
    }
  }
  for (size_t i = 4; i < 6; ++i) {
    int64_t elements = 0;
    for (const std::vector<int32_t> &coordinates : kCoordinates)
      if (layout.countedInNorm(coordinates)[i])
        elements += elementCount(mesh.parameters[i]);
    EXPECT_EQ(elements, product(kWholePiecedParameterShapes[i]))
        << mesh.parameters[i].name;
  }
}

// Tests that the mesh's gradient sum of squares, each block counted by the
// ranks countedInNorm names and summed over the world, is the whole
// gradient's, on every rank.
TEST(MeshLayout, GradientSumOfSquaresIsTheWholeGradients) {
  MeshProgram mesh;
  MeshLayout layout(mesh.program);
  // The whole gradient: the whole state's parameters (small integers, so
  // every order of the sum is exact).
  TrainingState whole = wholeStateOf(layout);
  double expected = 0;
  for (const std::vector<float> &tensor : whole.parameters)
    for (float value : tensor)
      expected += static_cast<double>(value) * value;
  TrainOptions options;
  ThreadWorld world(layout.getShape(), 30);
  std::vector<double> sums(4, -1);
  runAll(world, [&](const RankComms &comms) {
    std::unique_ptr<TrainingBackend> backend =
        makeHostBackend(mesh.program, options);
    TrainingState blocks = layout.takeBlocks(whole, comms.coordinates);
    const ParameterLayout &flat = backend->getLayout();
    FlatBuffer gradients = backend->optimizerGradients();
    ASSERT_EQ(gradients.dtype, TESSERA_F32);
    auto *values = static_cast<float *>(gradients.data);
    for (int32_t i = 0; i < flat.size(); ++i)
      std::copy(blocks.parameters[static_cast<size_t>(i)].begin(),
                blocks.parameters[static_cast<size_t>(i)].end(),
                values + flat.offset(i));
    tessera::comm::ScalarAgreement agreement(comms.world, nullptr);
    sums[static_cast<size_t>(comms.rank)] = meshGradientSumOfSquares(
        *backend, layout.countedInNorm(comms.coordinates), agreement);
  });
  for (size_t rank = 0; rank < 4; ++rank)
    EXPECT_EQ(sums[rank], expected) << "rank " << rank;
}

// Tests that a split naming a mesh axis the program does not have is a
// malformed program naming the tensor, the axis and the dim.
TEST(MeshLayout, SplitOverAMissingAxisIsMalformed) {
  MeshProgram mesh;
  mesh.parameterSplits[0] = splitOf({-1, 2});
  mesh.refresh();
  std::string message = trainErrorOf([&] { MeshLayout layout(mesh.program); });
  EXPECT_NE(message.find("malformed program"), std::string::npos) << message;
  EXPECT_NE(
      message.find("parameter 'attn.w' is split over mesh axis 2 at dim 1"),
      std::string::npos)
      << message;
}

// Tests that a split below -1 is malformed too.
TEST(MeshLayout, NegativeAxisIsMalformed) {
  MeshProgram mesh;
  mesh.parameterSplits[1] = splitOf({-2});
  mesh.refresh();
  std::string message = trainErrorOf([&] { MeshLayout layout(mesh.program); });
  EXPECT_NE(message.find("malformed program"), std::string::npos) << message;
  EXPECT_NE(message.find("parameter 'mlp.b'"), std::string::npos) << message;
}

// Tests that a split of a dim the tensor does not have (dim 1 of a rank-1
// parameter, or a zero-filled split, which names axis 0 on every dim) is
// malformed, naming the tensor.
TEST(MeshLayout, SplitBeyondTheTensorsRankIsMalformed) {
  MeshProgram mesh;
  mesh.parameterSplits[2] = splitOf({-1, 0});
  mesh.refresh();
  std::string message = trainErrorOf([&] { MeshLayout layout(mesh.program); });
  EXPECT_NE(message.find("malformed program"), std::string::npos) << message;
  EXPECT_NE(message.find("parameter 'norm' is split over mesh axis 0 at dim 1"),
            std::string::npos)
      << message;

  MeshProgram zeroed;
  zeroed.parameterSplits[2] = tessera_tensor_split{};
  zeroed.refresh();
  message = trainErrorOf([&] { MeshLayout layout(zeroed.program); });
  EXPECT_NE(message.find("parameter 'norm'"), std::string::npos) << message;
}

// Tests that one tensor split twice over the same axis is malformed, naming
// the tensor and the axis, for parameters and buffers alike.
TEST(MeshLayout, SameAxisTwiceInOneTensorIsMalformed) {
  MeshProgram mesh;
  mesh.parameterSplits[3] = splitOf({1, 1});
  mesh.refresh();
  std::string message = trainErrorOf([&] { MeshLayout layout(mesh.program); });
  EXPECT_NE(message.find("malformed program"), std::string::npos) << message;
  EXPECT_NE(message.find("parameter 'both' is split twice over mesh axis 1"),
            std::string::npos)
      << message;

  MeshProgram buffers;
  buffers.bufferSplits[0] = splitOf({0, 0});
  buffers.refresh();
  message = trainErrorOf([&] { MeshLayout layout(buffers.program); });
  EXPECT_NE(message.find("buffer 'mask' is split twice over mesh axis 0"),
            std::string::npos)
      << message;
}

// Tests that a negative piece count, pieces on a dim the tensor does not
// split (or does not have), and pieces that do not divide the rank's block
// are malformed programs naming the tensor and the dim.
TEST(MeshLayout, MalformedPiecesAreRefused) {
  struct Case {
    tessera_tensor_split split;
    const char *message;
  };
  const Case cases[] = {
      {piecedSplitOf({-1, 1}, {0, -3}),
       "parameter 'attn.w' has -3 pieces at dim 1"},
      {piecedSplitOf({-1, 1}, {2, 0}),
       "parameter 'attn.w' has 2 pieces at dim 0, which is not split"},
      {piecedSplitOf({-1, 1}, {0, 1, 3}),
       "parameter 'attn.w' has 3 pieces at dim 2, which is not split"},
      {piecedSplitOf({-1, 1}, {0, 2}),
       "parameter 'attn.w' has 2 pieces at dim 1, which do not divide its "
       "block of 3"}};
  for (const Case &test : cases) {
    SCOPED_TRACE(test.message);
    MeshProgram mesh;
    mesh.parameterSplits[0] = test.split;
    mesh.refresh();
    std::string message =
        trainErrorOf([&] { MeshLayout layout(mesh.program); });
    EXPECT_NE(message.find("malformed program (a compiler bug)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(test.message), std::string::npos) << message;
  }

  MeshProgram buffers;
  buffers.bufferSplits[1] = piecedSplitOf({}, {3});
  buffers.refresh();
  std::string message =
      trainErrorOf([&] { MeshLayout layout(buffers.program); });
  EXPECT_NE(message.find("buffer 'table' has 3 pieces at dim 0, which is not "
                         "split"),
            std::string::npos)
      << message;
}

// Tests that a mesh axis of size 0, and a "partitioned" program without a
// mesh shape, are malformed programs.
TEST(MeshLayout, BadMeshShapeIsMalformed) {
  MeshProgram mesh;
  mesh.meshShape = {2, 0};
  mesh.refresh();
  std::string message = trainErrorOf([&] { MeshLayout layout(mesh.program); });
  EXPECT_NE(message.find("malformed program"), std::string::npos) << message;
  EXPECT_NE(message.find("mesh axis of size 0"), std::string::npos) << message;

  MeshProgram noShape;
  noShape.program.mesh_shape = nullptr;
  message = trainErrorOf([&] { MeshLayout layout(noShape.program); });
  EXPECT_NE(message.find("malformed program"), std::string::npos) << message;
  EXPECT_NE(message.find("without a mesh shape"), std::string::npos) << message;

  MeshProgram single;
  single.program.mesh_axis_count = 0;
  EXPECT_FALSE(MeshLayout::isPartitioned(single.program));
  message = trainErrorOf([&] { MeshLayout layout(single.program); });
  EXPECT_NE(message.find("without a mesh shape"), std::string::npos) << message;
}

// Tests that a mesh collective called with a context that has no
// communicators (a driver running the program as one device), a NULL
// context, or an axis past the mesh fails with a message naming the
// collective and the axis instead of crashing.
TEST(MeshStep, MissingCommunicatorIsAnError) {
  float data[2] = {1, 2};
  tessera_tensor x = view(data, TESSERA_F32, {2});
  float out[4] = {};
  tessera_tensor y = view(out, TESSERA_F32, {4});
  tessera_step_context none{};
  EXPECT_NE(tessera_mesh_all_reduce(&none, 0, &x, TESSERA_REDUCE_SUM, nullptr),
            0);
  std::string message = tessera_cpu_last_error();
  EXPECT_EQ(message.rfind("all_reduce: the step needs the communicator of "
                          "mesh axis 0",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("the driver gave 0"), std::string::npos) << message;
  EXPECT_EQ(data[0], 1);
  EXPECT_EQ(data[1], 2);

  EXPECT_NE(tessera_mesh_all_gather(nullptr, 1, &x, &y, 0, nullptr), 0);
  EXPECT_EQ(std::string(tessera_cpu_last_error())
                .rfind("all_gather: the step needs the communicator of mesh "
                       "axis 1",
                       0),
            0u)
      << tessera_cpu_last_error();
  EXPECT_NE(tessera_mesh_reduce_scatter(&none, 0, &y, &x, 0, nullptr), 0);
  EXPECT_EQ(std::string(tessera_cpu_last_error()).rfind("reduce_scatter: ", 0),
            0u)
      << tessera_cpu_last_error();
  EXPECT_NE(tessera_mesh_all_to_all(&none, 0, &x, &x, 0, 0, nullptr), 0);
  EXPECT_EQ(std::string(tessera_cpu_last_error()).rfind("all_to_all: ", 0), 0u)
      << tessera_cpu_last_error();
  EXPECT_NE(tessera_mesh_shard_slice(&none, 0, &y, &x, 0), 0);
  EXPECT_EQ(std::string(tessera_cpu_last_error()).rfind("shard_slice: ", 0), 0u)
      << tessera_cpu_last_error();

  // A 2-axis mesh has no axis 2 nor -1.
  ThreadWorld world({2, 2});
  tessera_step_context context = contextOf(world.rank(0));
  EXPECT_NE(
      tessera_mesh_all_reduce(&context, 2, &x, TESSERA_REDUCE_SUM, nullptr), 0);
  message = tessera_cpu_last_error();
  EXPECT_NE(message.find("mesh axis 2, and the driver gave 2"),
            std::string::npos)
      << message;
  EXPECT_NE(
      tessera_mesh_all_reduce(&context, -1, &x, TESSERA_REDUCE_SUM, nullptr),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("mesh axis -1"),
            std::string::npos)
      << tessera_cpu_last_error();
}

// Tests that shard_slice writes block mesh_coordinates[axis] of x along dim
// into y on every rank of a 2x2 mesh, along either axis and dim, without
// communicating.
TEST(MeshStep, ShardSliceTakesTheCoordinatesBlock) {
  ThreadWorld world({2, 2});
  // x: [4, 6], element (i, j) = 10 i + j.
  std::vector<float> x(24);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      x[static_cast<size_t>(i * 6 + j)] = static_cast<float>(10 * i + j);
  tessera_tensor input = view(x.data(), TESSERA_F32, {4, 6});
  for (int32_t rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankComms &comms = world.rank(rank);
    tessera_step_context context = contextOf(comms);
    int32_t c0 = comms.coordinates[0], c1 = comms.coordinates[1];
    // Axis 1 (tp) along dim 1: columns [3 c1, 3 c1 + 3).
    std::vector<float> columns(12, -1);
    tessera_tensor byColumns = view(columns.data(), TESSERA_F32, {4, 3});
    MESH_OK(tessera_mesh_shard_slice(&context, 1, &input, &byColumns, 1));
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(columns[static_cast<size_t>(i * 3 + j)],
                  static_cast<float>(10 * i + 3 * c1 + j));
    // Axis 0 (dp) along dim 0: rows [2 c0, 2 c0 + 2).
    std::vector<float> rows(12, -1);
    tessera_tensor byRows = view(rows.data(), TESSERA_F32, {2, 6});
    MESH_OK(tessera_mesh_shard_slice(&context, 0, &input, &byRows, 0));
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 6; ++j)
        EXPECT_EQ(rows[static_cast<size_t>(i * 6 + j)],
                  static_cast<float>(10 * (2 * c0 + i) + j));
  }
}

// Tests that stream_seed advances a seed to the rank's block along an axis
// (coordinate * block elements of the stream), and refuses an axis the
// context lacks.
TEST(MeshStep, StreamSeedAdvancesToTheCoordinatesBlock) {
  ThreadWorld world({2, 2});
  for (int32_t rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const RankComms &comms = world.rank(rank);
    tessera_step_context context = contextOf(comms);
    for (int32_t axis : {0, 1}) {
      uint64_t seed = 1234;
      MESH_OK(tessera_mesh_stream_seed(&context, axis, &seed, 60));
      EXPECT_EQ(seed,
                tessera_advance_seed(
                    1234, static_cast<uint64_t>(comms.coordinates[axis]) * 60));
    }
    for (int32_t axis : {0, 1}) {
      int64_t start = -1;
      MESH_OK(tessera_mesh_block_start(&context, axis, &start, 256));
      EXPECT_EQ(start, int64_t{comms.coordinates[axis]} * 256);
    }
  }
  tessera_step_context context = contextOf(world.rank(3));
  uint64_t seed = 5;
  EXPECT_NE(tessera_mesh_stream_seed(&context, 2, &seed, 60), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("stream_seed over mesh axis 2: the step needs the "
                      "rank's coordinate on it, and the driver gave 2 axes"),
            std::string::npos)
      << tessera_cpu_last_error();
  EXPECT_EQ(seed, 5u);
}

// Tests that shard_slice refuses a context without coordinates, a dim past
// y's rank, and a block that does not lie inside x.
TEST(MeshStep, ShardSliceRefusesBadArguments) {
  ThreadWorld world({2, 2});
  tessera_step_context context = contextOf(world.rank(3)); // (1, 1)
  std::vector<float> x(8), y(4);
  tessera_tensor input = view(x.data(), TESSERA_F32, {2, 4});
  tessera_tensor output = view(y.data(), TESSERA_F32, {2, 2});

  tessera_step_context noCoordinates = context;
  noCoordinates.mesh_coordinates = nullptr;
  EXPECT_NE(tessera_mesh_shard_slice(&noCoordinates, 1, &input, &output, 1), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("shard_slice over mesh axis 1: no coordinates"),
            std::string::npos)
      << tessera_cpu_last_error();

  EXPECT_NE(tessera_mesh_shard_slice(&context, 1, &input, &output, 2), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("dim 2"),
            std::string::npos)
      << tessera_cpu_last_error();

  // Block 1 of [2, 3] along dim 1 is columns 3..5 of a 4-column x.
  std::vector<float> wide(6);
  tessera_tensor tooWide = view(wide.data(), TESSERA_F32, {2, 3});
  EXPECT_NE(tessera_mesh_shard_slice(&context, 1, &input, &tooWide, 1), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("tessera_cpu_slice"),
            std::string::npos)
      << tessera_cpu_last_error();
}

// Tests that all_reduce over the one axis of 2 thread ranks sums in place,
// and the maximum too.
TEST(MeshStep, AllReduceSumsInPlaceOverTwoRanks) {
  ThreadWorld world({2}, 30);
  runAll(world, [&](const RankComms &comms) {
    tessera_step_context context = contextOf(comms);
    float data[3];
    for (int i = 0; i < 3; ++i)
      data[i] = static_cast<float>(10 * (comms.rank + 1) + i);
    tessera_tensor x = view(data, TESSERA_F32, {3});
    MESH_OK(
        tessera_mesh_all_reduce(&context, 0, &x, TESSERA_REDUCE_SUM, nullptr));
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(data[i], static_cast<float>(30 + 2 * i));
    float flag = static_cast<float>(comms.rank == 1 ? 5 : -5);
    tessera_tensor f = view(&flag, TESSERA_F32, {1});
    MESH_OK(
        tessera_mesh_all_reduce(&context, 0, &f, TESSERA_REDUCE_MAX, nullptr));
    EXPECT_EQ(flag, 5);
  });
}

// Tests that on a 2x2 mesh each collective talks to the group of its axis
// only: all_reduce over either axis, all_gather, reduce_scatter and
// all_to_all over one.
TEST(MeshStep, CollectivesUseTheGroupOfTheirAxis) {
  ThreadWorld world({2, 2}, 30);
  runAll(world, [&](const RankComms &comms) {
    tessera_step_context context = contextOf(comms);
    int32_t c0 = comms.coordinates[0], c1 = comms.coordinates[1];
    auto rankValue = static_cast<float>(comms.rank + 1);

    // all_reduce over tp (axis 1): ranks 2 c0 and 2 c0 + 1.
    float value = rankValue;
    tessera_tensor v = view(&value, TESSERA_F32, {1});
    MESH_OK(
        tessera_mesh_all_reduce(&context, 1, &v, TESSERA_REDUCE_SUM, nullptr));
    EXPECT_EQ(value, static_cast<float>(4 * c0 + 3));
    // over dp (axis 0): ranks c1 and 2 + c1.
    value = rankValue;
    MESH_OK(
        tessera_mesh_all_reduce(&context, 0, &v, TESSERA_REDUCE_SUM, nullptr));
    EXPECT_EQ(value, static_cast<float>(2 * c1 + 4));

    // all_gather over dp along dim 0: the dp group's [1, 2] rows in order.
    float row[2] = {static_cast<float>(comms.rank),
                    static_cast<float>(10 + comms.rank)};
    float rows[4] = {};
    tessera_tensor x = view(row, TESSERA_F32, {1, 2});
    tessera_tensor y = view(rows, TESSERA_F32, {2, 2});
    MESH_OK(tessera_mesh_all_gather(&context, 0, &x, &y, 0, nullptr));
    for (int32_t r = 0; r < 2; ++r) {
      EXPECT_EQ(rows[2 * r], static_cast<float>(2 * r + c1));
      EXPECT_EQ(rows[2 * r + 1], static_cast<float>(10 + 2 * r + c1));
    }

    // reduce_scatter over tp along dim 0: block c1 of the tp group's sum.
    float whole[4], block[2] = {};
    for (int i = 0; i < 4; ++i)
      whole[i] = static_cast<float>(100 * comms.rank + i);
    tessera_tensor in = view(whole, TESSERA_F32, {4});
    tessera_tensor out = view(block, TESSERA_F32, {2});
    MESH_OK(tessera_mesh_reduce_scatter(&context, 1, &in, &out, 0, nullptr));
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(block[i],
                static_cast<float>(100 * (4 * c0 + 1) + 2 * (2 * c1 + i)));

    // all_to_all over tp: x [2 (split), 1], block j to tp coordinate j,
    // concatenated along dim 1: y [1, 2] = (from tp 0, from tp 1).
    float send[2] = {static_cast<float>(10 * comms.rank),
                     static_cast<float>(10 * comms.rank + 1)};
    float received[2] = {};
    tessera_tensor sx = view(send, TESSERA_F32, {2, 1});
    tessera_tensor ry = view(received, TESSERA_F32, {1, 2});
    MESH_OK(tessera_mesh_all_to_all(&context, 1, &sx, &ry, 0, 1, nullptr));
    for (int32_t j = 0; j < 2; ++j)
      EXPECT_EQ(received[j], static_cast<float>(10 * (2 * c0 + j) + c1));
  });
}

// Tests that a collective that fails in comm.h (ranks calling it with
// different shapes) is reported through tessera_cpu_last_error() as
// "<collective> over mesh axis A: <why>" on every rank.
TEST(MeshStep, CommFailureIsReportedOverTheAxis) {
  ThreadWorld world({2}, 5);
  std::mutex mutex;
  std::vector<std::string> messages(2);
  std::vector<int> codes(2, 0);
  runAll(world, [&](const RankComms &comms) {
    tessera_step_context context = contextOf(comms);
    float data[3] = {1, 2, 3};
    tessera_tensor x = view(data, TESSERA_F32, {comms.rank == 0 ? 2 : 3});
    int code =
        tessera_mesh_all_reduce(&context, 0, &x, TESSERA_REDUCE_SUM, nullptr);
    std::lock_guard<std::mutex> guard(mutex);
    codes[static_cast<size_t>(comms.rank)] = code;
    messages[static_cast<size_t>(comms.rank)] = tessera_cpu_last_error();
  });
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_NE(codes[rank], 0) << "rank " << rank;
    EXPECT_EQ(messages[rank].rfind("all_reduce over mesh axis 0: ", 0), 0u)
        << messages[rank];
    EXPECT_NE(messages[rank].find("rank 1 calls all_reduce(f32[3], sum)"),
              std::string::npos)
        << messages[rank];
  }
}

} // namespace
