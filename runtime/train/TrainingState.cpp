//===- TrainingState.cpp - Shapes and storage of the run's tensors --------===//
//
// Small helpers shared by weight loading, checkpoints and the step loop, so
// that each computes sizes and builds tessera_tensor views the same way.
//
//===----------------------------------------------------------------------===//

#include "TrainingState.h"

#include "TrainError.h"

#include <cmath>

namespace tessera::train {

int64_t elementCount(const tessera_tensor_info &info) {
  int64_t count = 1;
  for (int32_t i = 0; i < info.rank; ++i)
    count *= info.shape[i];
  return count;
}

std::vector<int64_t> shapeOf(const tessera_tensor_info &info) {
  return std::vector<int64_t>(info.shape, info.shape + info.rank);
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

tessera_tensor makeTensor(void *data, int32_t dtype,
                          const tessera_tensor_info &info) {
  tessera_tensor tensor{};
  tensor.data = data;
  tensor.dtype = dtype;
  tensor.rank = info.rank;
  for (int32_t i = 0; i < info.rank; ++i)
    tensor.shape[i] = info.shape[i];
  return tensor;
}

int64_t firstNonFinite(const float *values, int64_t count) {
  for (int64_t e = 0; e < count; ++e)
    if (!std::isfinite(values[e]))
      return e;
  return -1;
}

int64_t dtypeSize(int32_t dtype) {
  switch (dtype) {
  case TESSERA_F64:
  case TESSERA_I64:
    return 8;
  case TESSERA_F32:
  case TESSERA_I32:
    return 4;
  case TESSERA_BF16:
  case TESSERA_F16:
  case TESSERA_I16:
    return 2;
  case TESSERA_I8:
  case TESSERA_BOOL:
    return 1;
  default:
    fail("unknown dtype " + std::to_string(dtype));
  }
}

void allocateState(const tessera_program &program, TrainingState &state,
                   bool withMoments) {
  size_t parameters = static_cast<size_t>(program.parameter_count);
  state.parameters.assign(parameters, {});
  state.firstMoments.assign(parameters, {});
  state.secondMoments.assign(parameters, {});
  for (size_t i = 0; i < parameters; ++i) {
    auto count = static_cast<size_t>(elementCount(program.parameters[i]));
    state.parameters[i].assign(count, 0.0f);
    if (!withMoments)
      continue;
    state.firstMoments[i].assign(count, 0.0f);
    state.secondMoments[i].assign(count, 0.0f);
  }
  state.buffers.assign(static_cast<size_t>(program.buffer_count), {});
  for (size_t i = 0; i < state.buffers.size(); ++i)
    state.buffers[i].assign(
        static_cast<size_t>(elementCount(program.buffers[i]) *
                            dtypeSize(program.buffers[i].dtype)),
        0);
}

void releaseTensors(TrainingState &state) {
  for (auto *kind : {&state.parameters, &state.firstMoments,
                     &state.secondMoments})
    for (std::vector<float> &values : *kind)
      std::vector<float>().swap(values);
}

} // namespace tessera::train
