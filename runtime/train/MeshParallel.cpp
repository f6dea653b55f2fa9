//===- MeshParallel.cpp - Blocks of a partitioned program's tensors -------===//

#include "MeshParallel.h"

#include "TrainError.h"

#include "tessera/runtime/gradient_reducer.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace tessera::train {
namespace {

[[noreturn]] void programError(const std::string &message) {
  fail("malformed program (a compiler bug): " + message);
}

/// The splits of `count` tensors from `splits` (NULL: all whole), checked
/// against the mesh and the tensors' ranks: per tensor, per dim the mesh
/// axis or -1 (`axes`) and the number of pieces, 1 unless pieced
/// (`pieces`).
void readSplits(const tessera_tensor_split *splits,
                const tessera_tensor_info *infos, int32_t count,
                const comm::MeshShape &shape, const char *kind,
                std::vector<std::vector<int32_t>> &axes,
                std::vector<std::vector<int32_t>> &pieces) {
  for (int32_t i = 0; i < count; ++i) {
    const tessera_tensor_info &info = infos[i];
    std::vector<int32_t> split(static_cast<size_t>(info.rank), -1);
    std::vector<int32_t> counts(static_cast<size_t>(info.rank), 1);
    const std::string tensor = std::string(kind) + " '" + info.name + "'";
    for (int32_t d = 0; splits && d < TESSERA_MAX_RANK; ++d) {
      int32_t axis = splits[i].mesh_axis[d];
      if (axis == -1)
        continue;
      if (d >= info.rank || axis < 0 ||
          axis >= static_cast<int32_t>(shape.size()))
        programError(tensor + " is split over mesh axis " +
                     std::to_string(axis) + " at dim " + std::to_string(d));
      for (int32_t other = 0; other < d; ++other)
        if (split[static_cast<size_t>(other)] == axis)
          programError(tensor + " is split twice over mesh axis " +
                       std::to_string(axis));
      split[static_cast<size_t>(d)] = axis;
    }
    // Checked after every axis is known, so that a count on a dim the
    // tensor does not split is told apart from one on a split dim.
    for (int32_t d = 0; splits && d < TESSERA_MAX_RANK; ++d) {
      int32_t pieceCount = splits[i].pieces[d];
      if (pieceCount == 0 || pieceCount == 1)
        continue;
      const std::string at = tensor + " has " + std::to_string(pieceCount) +
                             " pieces at dim " + std::to_string(d);
      if (pieceCount < 0)
        programError(at);
      if (d >= info.rank || split[static_cast<size_t>(d)] < 0)
        programError(at + ", which is not split");
      // Every rank holds the same share of each piece, so the block is
      // whole pieces' shares: it divides by the count.
      if (info.shape[d] % pieceCount != 0)
        programError(at + ", which do not divide its block of " +
                     std::to_string(info.shape[d]));
      counts[static_cast<size_t>(d)] = pieceCount;
    }
    axes.push_back(std::move(split));
    pieces.push_back(std::move(counts));
  }
}

/// `info` with every split dim at its whole size.
tessera_tensor_info wholeInfo(tessera_tensor_info info,
                              const std::vector<int32_t> &split,
                              const comm::MeshShape &shape) {
  for (size_t d = 0; d < split.size(); ++d)
    if (split[d] >= 0)
      info.shape[d] *= shape[static_cast<size_t>(split[d])];
  return info;
}

/// A whole tensor and one rank's block of it seen as a tensor in which the
/// block is one box, so that one strided slice takes it. A pieced dim's
/// block is not a box (it is a share of every piece), so the dim is seen as
/// two: the P pieces, all taken, then a piece's elements, of which the
/// block takes its share. Every dim taken whole is folded into the one
/// before it, which leaves one dim per split dim plus one before the first:
/// within TESSERA_MAX_RANK unless a tensor of that rank is split on every
/// dim, its first pieced.
struct BlockView {
  tessera_tensor_info whole{}, block{};
  int64_t starts[TESSERA_MAX_RANK] = {};

  /// Appends a dim of `wholeSize` of which the block takes `blockSize`
  /// from `start`.
  void add(int64_t wholeSize, int64_t blockSize, int64_t start) {
    const int32_t last = whole.rank - 1;
    if (blockSize == wholeSize && last >= 0) {
      // Taking every index of the inner dim keeps the block contiguous
      // along the two dims flattened: start and size scale by the inner.
      whole.shape[last] *= wholeSize;
      block.shape[last] *= wholeSize;
      starts[last] *= wholeSize;
      return;
    }
    if (whole.rank == TESSERA_MAX_RANK)
      fail(std::string("taking the block of '") + block.name +
           "': its pieced split needs more than " +
           std::to_string(TESSERA_MAX_RANK) + " dims");
    whole.shape[whole.rank] = wholeSize;
    block.shape[block.rank] = blockSize;
    starts[whole.rank] = start;
    ++whole.rank;
    ++block.rank;
  }
};

/// The block at `coordinates` of the whole tensor `source` (bytes of
/// `dtype`, shape `whole`) into `target` (shape `block`).
void sliceBlock(const void *source, void *target, int32_t dtype,
                const tessera_tensor_info &whole,
                const tessera_tensor_info &block,
                const std::vector<int32_t> &split,
                const std::vector<int32_t> &pieces,
                const std::vector<int32_t> &coordinates) {
  BlockView view;
  view.whole.name = view.block.name = block.name;
  view.whole.dtype = view.block.dtype = dtype;
  for (int32_t d = 0; d < block.rank; ++d) {
    const auto dim = static_cast<size_t>(d);
    const int64_t count = pieces[dim];
    const int64_t coordinate =
        split[dim] >= 0 ? coordinates[static_cast<size_t>(split[dim])] : 0;
    if (count > 1)
      view.add(count, count, 0);
    view.add(whole.shape[d] / count, block.shape[d] / count,
             coordinate * (block.shape[d] / count));
  }
  int64_t strides[TESSERA_MAX_RANK];
  std::fill(std::begin(strides), std::end(strides), 1);
  tessera_tensor from =
      makeTensor(const_cast<void *>(source), dtype, view.whole);
  tessera_tensor to = makeTensor(target, dtype, view.block);
  if (tessera_cpu_slice(&from, &to, view.starts, strides) != 0)
    fail(std::string("taking the block of '") + block.name +
         "': " + tessera_cpu_last_error());
}

} // namespace

MeshLayout::MeshLayout(const tessera_program &program)
    : program(program), whole(program) {
  if (program.mesh_axis_count <= 0 || !program.mesh_shape)
    programError("a partitioned program without a mesh shape");
  shape.assign(program.mesh_shape, program.mesh_shape + program.mesh_axis_count);
  for (int64_t size : shape)
    if (size < 1)
      programError("mesh axis of size " + std::to_string(size));
  readSplits(program.parameter_splits, program.parameters,
             program.parameter_count, shape, "parameter", parameterSplits,
             parameterPieces);
  readSplits(program.buffer_splits, program.buffers, program.buffer_count,
             shape, "buffer", bufferSplits, bufferPieces);
  for (int32_t i = 0; i < program.parameter_count; ++i)
    wholeParameters.push_back(wholeInfo(program.parameters[i],
                                        parameterSplits[static_cast<size_t>(i)],
                                        shape));
  for (int32_t i = 0; i < program.buffer_count; ++i)
    wholeBuffers.push_back(wholeInfo(program.buffers[i],
                                     bufferSplits[static_cast<size_t>(i)],
                                     shape));
  whole.parameters = wholeParameters.empty() ? nullptr : wholeParameters.data();
  whole.buffers = wholeBuffers.empty() ? nullptr : wholeBuffers.data();
  // The whole tensors are the single-device program's: no mesh, no splits
  // (a MeshLayout of `whole` must not multiply the split dims again).
  whole.mesh_axis_count = 0;
  whole.mesh_shape = nullptr;
  whole.mesh_axis_names = nullptr;
  whole.parameter_splits = nullptr;
  whole.buffer_splits = nullptr;
  whole.gradient_partial_axes = nullptr;
  whole.gradient_zero_stages = nullptr;
  whole.gradient_whole = nullptr;
}

TrainingState
MeshLayout::takeBlocks(const TrainingState &state,
                       const std::vector<int32_t> &coordinates) const {
  TrainingState blocks;
  allocateState(program, blocks);
  blocks.step = state.step;
  blocks.optimizerStep = state.optimizerStep;
  blocks.seed = state.seed;
  blocks.dataPosition = state.dataPosition;
  blocks.lossScale = state.lossScale;
  blocks.cleanSteps = state.cleanSteps;
  for (size_t i = 0; i < parameterSplits.size(); ++i) {
    const tessera_tensor_info &block = program.parameters[i];
    const std::vector<int32_t> &split = parameterSplits[i];
    const std::vector<int32_t> &pieces = parameterPieces[i];
    sliceBlock(state.parameters[i].data(), blocks.parameters[i].data(),
               TESSERA_F32, wholeParameters[i], block, split, pieces,
               coordinates);
    // Empty moments (a fresh start's zeros) stay empty.
    for (auto kind : {&TrainingState::firstMoments,
                      &TrainingState::secondMoments}) {
      const std::vector<float> &whole = (state.*kind)[i];
      std::vector<float> &part = (blocks.*kind)[i];
      if (whole.empty())
        std::vector<float>().swap(part);
      else
        sliceBlock(whole.data(), part.data(), TESSERA_F32, wholeParameters[i],
                   block, split, pieces, coordinates);
    }
  }
  for (size_t i = 0; i < bufferSplits.size(); ++i)
    sliceBlock(state.buffers[i].data(), blocks.buffers[i].data(),
               program.buffers[i].dtype, wholeBuffers[i], program.buffers[i],
               bufferSplits[i], bufferPieces[i], coordinates);
  return blocks;
}

std::vector<bool>
MeshLayout::countedInNorm(const std::vector<int32_t> &coordinates) const {
  std::vector<bool> counted;
  for (const std::vector<int32_t> &split : parameterSplits) {
    bool first = true;
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      bool splits = false;
      for (int32_t a : split)
        splits = splits || a == static_cast<int32_t>(axis);
      if (!splits && coordinates[axis] != 0)
        first = false;
    }
    counted.push_back(first);
  }
  return counted;
}

std::vector<std::vector<float>>
MeshLayout::gatherParameters(const std::vector<std::vector<float>> &blocks,
                             const comm::RankComms &comms, void *stream) const {
  std::vector<std::vector<float>> tensors;
  for (size_t i = 0; i < parameterSplits.size(); ++i) {
    const std::vector<int32_t> &split = parameterSplits[i];
    tessera_tensor_info info = program.parameters[i];
    std::vector<float> current = blocks[i];
    // One all-gather per split dim, along its axis: after the gather over
    // dim d's axis every rank of that group holds the tensor whole along d.
    // The gather concatenates the ranks' blocks in rank order, which for P
    // pieces would give each rank's shares of all pieces one after another;
    // seen as [outer, P, block / P, inner] and gathered along the share
    // dim, it lays every piece's shares together instead: [outer, P,
    // whole / P, inner], the dim whole in its true order (contiguous blocks
    // are the case P = 1).
    for (size_t d = 0; d < split.size(); ++d) {
      if (split[d] < 0)
        continue;
      auto axis = static_cast<size_t>(split[d]);
      const int64_t pieces = parameterPieces[i][d];
      tessera_tensor_info gathered = info;
      gathered.shape[d] *= shape[axis];
      tessera_tensor_info blockView = info;
      blockView.rank = 4;
      blockView.shape[0] = blockView.shape[3] = 1;
      for (size_t other = 0; other < split.size(); ++other)
        if (other != d)
          blockView.shape[other < d ? 0 : 3] *= info.shape[other];
      blockView.shape[1] = pieces;
      blockView.shape[2] = info.shape[d] / pieces;
      tessera_tensor_info gatheredView = blockView;
      gatheredView.shape[2] *= shape[axis];
      std::vector<float> next(static_cast<size_t>(elementCount(gathered)));
      tessera_tensor x = makeTensor(current.data(), TESSERA_F32, blockView);
      tessera_tensor y = makeTensor(next.data(), TESSERA_F32, gatheredView);
      try {
        comm::allGatherHostTensors(comms.axes[axis], x, y, 2, stream);
      } catch (const comm::CommError &error) {
        fail(std::string("gathering '") + info.name + "': " + error.what());
      }
      current = std::move(next);
      info = gathered;
    }
    tensors.push_back(std::move(current));
  }
  return tensors;
}

double meshGradientSumOfSquares(TrainingBackend &backend,
                                const std::vector<bool> &counted,
                                comm::ScalarAgreement &world) {
  return world.sum(backend.gradientSumOfSquares(counted));
}

std::vector<double> meshParameterSumsOfSquares(TrainingBackend &backend,
                                               comm::ScalarAgreement &world) {
  std::vector<double> sums = backend.lastParameterSumsOfSquares();
  world.sumEach(sums);
  return sums;
}

} // namespace tessera::train
