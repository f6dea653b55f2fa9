//===- MeshParallel.cpp - Blocks of a partitioned program's tensors -------===//

#include "MeshParallel.h"

#include "TrainError.h"

#include "tessera/runtime/gradient_reducer.h"

#include <cstring>

namespace tessera::train {
namespace {

[[noreturn]] void programError(const std::string &message) {
  fail("malformed program (a compiler bug): " + message);
}

/// The splits of `count` tensors from `splits` (NULL: all whole), checked
/// against the mesh and the tensors' ranks.
std::vector<std::vector<int32_t>>
readSplits(const tessera_tensor_split *splits, const tessera_tensor_info *infos,
           int32_t count, const comm::MeshShape &shape, const char *kind) {
  std::vector<std::vector<int32_t>> result;
  for (int32_t i = 0; i < count; ++i) {
    const tessera_tensor_info &info = infos[i];
    std::vector<int32_t> split(static_cast<size_t>(info.rank), -1);
    for (int32_t d = 0; splits && d < TESSERA_MAX_RANK; ++d) {
      int32_t axis = splits[i].mesh_axis[d];
      if (axis == -1)
        continue;
      if (d >= info.rank || axis < 0 ||
          axis >= static_cast<int32_t>(shape.size()))
        programError(std::string(kind) + " '" + info.name + "' is split over "
                     "mesh axis " + std::to_string(axis) + " at dim " +
                     std::to_string(d));
      for (int32_t other = 0; other < d; ++other)
        if (split[static_cast<size_t>(other)] == axis)
          programError(std::string(kind) + " '" + info.name +
                       "' is split twice over mesh axis " +
                       std::to_string(axis));
      split[static_cast<size_t>(d)] = axis;
    }
    result.push_back(std::move(split));
  }
  return result;
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

/// The block at `coordinates` of the whole tensor `source` (bytes of
/// `dtype`, shape `whole`) into `target` (shape `block`).
void sliceBlock(const void *source, void *target, int32_t dtype,
                const tessera_tensor_info &whole,
                const tessera_tensor_info &block,
                const std::vector<int32_t> &split,
                const std::vector<int32_t> &coordinates) {
  int64_t starts[TESSERA_MAX_RANK] = {}, strides[TESSERA_MAX_RANK];
  for (int32_t d = 0; d < block.rank; ++d) {
    strides[d] = 1;
    int32_t axis = split[static_cast<size_t>(d)];
    if (axis >= 0)
      starts[d] = coordinates[static_cast<size_t>(axis)] * block.shape[d];
  }
  tessera_tensor from = makeTensor(const_cast<void *>(source), dtype, whole);
  tessera_tensor to = makeTensor(target, dtype, block);
  if (tessera_cpu_slice(&from, &to, starts, strides) != 0)
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
  parameterSplits =
      readSplits(program.parameter_splits, program.parameters,
                 program.parameter_count, shape, "parameter");
  bufferSplits = readSplits(program.buffer_splits, program.buffers,
                            program.buffer_count, shape, "buffer");
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
    sliceBlock(state.parameters[i].data(), blocks.parameters[i].data(),
               TESSERA_F32, wholeParameters[i], block, split, coordinates);
    // Empty moments (a fresh start's zeros) stay empty.
    for (auto kind : {&TrainingState::firstMoments,
                      &TrainingState::secondMoments}) {
      const std::vector<float> &whole = (state.*kind)[i];
      std::vector<float> &part = (blocks.*kind)[i];
      if (whole.empty())
        std::vector<float>().swap(part);
      else
        sliceBlock(whole.data(), part.data(), TESSERA_F32, wholeParameters[i],
                   block, split, coordinates);
    }
  }
  for (size_t i = 0; i < bufferSplits.size(); ++i)
    sliceBlock(state.buffers[i].data(), blocks.buffers[i].data(),
               program.buffers[i].dtype, wholeBuffers[i], program.buffers[i],
               bufferSplits[i], coordinates);
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
    for (size_t d = 0; d < split.size(); ++d) {
      if (split[d] < 0)
        continue;
      auto axis = static_cast<size_t>(split[d]);
      tessera_tensor_info gathered = info;
      gathered.shape[d] *= shape[axis];
      std::vector<float> next(static_cast<size_t>(elementCount(gathered)));
      tessera_tensor x = makeTensor(current.data(), TESSERA_F32, info);
      tessera_tensor y = makeTensor(next.data(), TESSERA_F32, gathered);
      try {
        comm::allGatherHostTensors(comms.axes[axis], x, y,
                                   static_cast<int32_t>(d), stream);
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
