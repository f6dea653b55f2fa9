//===- TrainingBackend.cpp - What every backend shares --------------------===//

#include "TrainingBackend.h"

#include "TrainError.h"

#include <cstring>
#include <regex>

namespace tessera::train {

int32_t computeDtypeOf(const tessera_program &program) {
  switch (program.precision) {
  case TESSERA_PRECISION_BF16:
    return TESSERA_BF16;
  case TESSERA_PRECISION_FP16:
    return TESSERA_F16;
  default:
    return TESSERA_F32;
  }
}

TrainingBackend::TrainingBackend(const tessera_program &program,
                                 const TrainOptions &options,
                                 const ParameterLayout *plannedLayout)
    : program(program), options(options),
      layout(plannedLayout ? *plannedLayout : ParameterLayout(program)),
      computeDtype(computeDtypeOf(program)) {
  std::regex noDecay(options.noDecayPattern.empty() ? "$^"
                                                    : options.noDecayPattern);
  for (int32_t i = 0; i < program.parameter_count; ++i)
    decays.push_back(options.noDecayPattern.empty() ||
                     !std::regex_search(program.parameters[i].name, noDecay));
}

std::vector<tessera_tensor> TrainingBackend::sliceTensors(void *base,
                                                          int32_t dtype) const {
  std::vector<tessera_tensor> tensors;
  auto *bytes = static_cast<unsigned char *>(base);
  for (int32_t i = 0; i < program.parameter_count; ++i)
    tensors.push_back(makeTensor(bytes + layout.offset(i) * dtypeSize(dtype),
                                 dtype, program.parameters[i]));
  return tensors;
}

double TrainingBackend::callProgram(const tessera_tensor *parameters,
                                    const tessera_tensor *buffers,
                                    const tessera_tensor *tokenTensor,
                                    const tessera_tensor *targetTensor,
                                    float lossScale, uint64_t seed,
                                    tessera_tensor *gradients) {
  float loss = 0;
  if (program.forward_backward(&context, parameters, buffers, tokenTensor,
                               targetTensor, lossScale, seed, &loss,
                               gradients) != 0)
    fail(tessera_cpu_last_error());
  return loss;
}

double TrainingBackend::callStage(const tessera_stage_function &function,
                                  const tessera_tensor *parameters,
                                  const tessera_tensor *buffers,
                                  const tessera_tensor *tokenTensor,
                                  const tessera_tensor *targetTensor,
                                  const tessera_tensor *inputs,
                                  float lossScale, uint64_t seed,
                                  tessera_tensor *gradients,
                                  tessera_tensor *outputs) {
  float loss = 0;
  if (function.call(&context, parameters, buffers, tokenTensor, targetTensor,
                    inputs, lossScale, seed, &loss, gradients, outputs) != 0)
    fail(tessera_cpu_last_error());
  return function.returns_loss ? loss : 0.0;
}

tessera_tensor_info microBatchInfo(const tessera_program &program) {
  tessera_tensor_info info{};
  info.dtype = TESSERA_I64;
  info.rank = 2;
  info.shape[0] = program.batch;
  info.shape[1] = program.sequence;
  return info;
}

std::vector<std::vector<float>> unflattenToF32(const tessera_program &program,
                                               const ParameterLayout &layout,
                                               const void *flat,
                                               int32_t dtype) {
  std::vector<std::vector<float>> tensors;
  const auto *bytes = static_cast<const unsigned char *>(flat);
  for (int32_t i = 0; i < layout.size(); ++i) {
    tensors.emplace_back(static_cast<size_t>(layout.count(i)));
    tessera_tensor source = makeTensor(
        const_cast<unsigned char *>(bytes + layout.offset(i) * dtypeSize(dtype)),
        dtype, program.parameters[i]);
    tessera_tensor target =
        makeTensor(tensors.back().data(), TESSERA_F32, program.parameters[i]);
    if (tessera_cpu_cast(&source, &target) != 0)
      fail(std::string("converting gradients to f32: ") +
           tessera_cpu_last_error());
  }
  return tensors;
}

void flattenF32(const ParameterLayout &layout,
                const std::vector<std::vector<float>> &tensors, float *flat) {
  for (int32_t i = 0; i < layout.size(); ++i)
    std::memcpy(flat + layout.offset(i), tensors[static_cast<size_t>(i)].data(),
                static_cast<size_t>(layout.count(i)) * sizeof(float));
}

} // namespace tessera::train
