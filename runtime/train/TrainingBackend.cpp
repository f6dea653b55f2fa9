//===- TrainingBackend.cpp - What every backend shares --------------------===//

#include "TrainingBackend.h"

#include "TrainError.h"

#include "../cpu/DataTypes.h"

#include <algorithm>
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
  if (program.pipeline && program.parameter_step_dtypes)
    fail("internal error: a pipelined program's chunks read the masters, "
         "but its parameter_step_dtypes is set");
  // The copies get their own packed buffer, so a parameter the step reads
  // as its master (an untied embedding table: 1 GiB for Llama 3 8B) costs
  // no copy memory.
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const int32_t dtype = program.parameter_step_dtypes
                              ? program.parameter_step_dtypes[i]
                              : TESSERA_F32;
    if (dtype == TESSERA_F32) {
      copyOffsets.push_back(-1);
      continue;
    }
    if (dtype != computeDtype)
      fail(std::string("the program reads parameter '") +
           program.parameters[i].name + "' as " + cpu::dtypeName(dtype) +
           ", neither its f32 master nor the " + cpu::dtypeName(computeDtype) +
           " compute precision");
    copyOffsets.push_back(copyElements);
    copyElements += ParameterLayout::aligned(layout.count(i));
  }
  // A sharded state all-gathers what the step reads by the buckets of the
  // gradients' layout, so the copies are placed by them (and the
  // parameters read as f32 get mirrors, the masters being the shard's
  // only).
  if (layout.weightsSharded()) {
    // ZeRO-3: the copies and mirrors are the rank's shards of them.
    copyElements = layout.weightShard().shardElements[0];
    mirrors = layout.weightShard().shardElements[1];
  } else if (layout.sharded()) {
    placeGatheredWeights();
  }
}

void TrainingBackend::placeGatheredWeights() {
  // AdamW writes the rank's blocks of the buckets into what the step reads,
  // and the shards' all-gather completes them bucket by bucket
  // (shardedStepBuffers). Each buffer (the compute copies, the f32 mirrors)
  // holds the buckets of the parameters it serves only, packed: no bucket
  // mixes the two kinds (DataParallel's buckets), so neither keeps room for
  // the other's parameters (an untied embedding table read in f32: 1 GiB
  // of bf16 copies on Llama 3 8B).
  const std::vector<ParameterLayout::Span> &spans = layout.gatheredSpans();
  const auto parameters = static_cast<size_t>(program.parameter_count);
  std::vector<bool> copySpans(spans.size(), false),
      mirrorSpans(spans.size(), false);
  for (int32_t i = 0; i < program.parameter_count; ++i)
    if (const int32_t span = layout.spanOf(i); span >= 0)
      (readsComputeCopy(i) ? copySpans
                           : mirrorSpans)[static_cast<size_t>(span)] = true;
  auto pack = [&](const std::vector<bool> &kept,
                  std::vector<comm::BucketPlace> &places, int64_t &elements) {
    std::vector<int64_t> at(spans.size(), -1);
    elements = 0;
    for (size_t s = 0; s < spans.size(); ++s)
      if (kept[s]) {
        at[s] = elements;
        places.push_back({spans[s].offset, elements});
        elements += spans[s].elements;
      }
    return at;
  };
  const std::vector<int64_t> copyAt = pack(copySpans, copyPlaces, copyElements);
  const std::vector<int64_t> mirrorAt = pack(mirrorSpans, mirrorPlaces, mirrors);
  // A parameter every rank holds whole (a mesh plan's ZeRO-0 parameter, its
  // gradient reduced in the step) is in no bucket and updated alike on
  // every rank: read in f32 it is read from its master, which no gather
  // touches; as a copy it has a place past the buckets, which each rank's
  // AdamW rounds.
  masterReads.assign(parameters, -1);
  for (const ParameterLayout::Piece &piece : layout.shard())
    if (piece.replicated)
      masterReads[static_cast<size_t>(piece.parameter)] = piece.stateOffset;
  mirrorOffsets.assign(parameters, -1);
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const auto at = static_cast<size_t>(i);
    const int32_t span = layout.spanOf(i);
    const int64_t inSpan =
        span < 0 ? 0 : layout.offset(i) - spans[static_cast<size_t>(span)].offset;
    if (readsComputeCopy(i) && span >= 0) {
      copyOffsets[at] = copyAt[static_cast<size_t>(span)] + inSpan;
    } else if (readsComputeCopy(i)) {
      copyOffsets[at] = copyElements;
      copyElements += ParameterLayout::aligned(layout.count(i));
    } else if (span >= 0) {
      mirrorOffsets[at] = mirrorAt[static_cast<size_t>(span)] + inSpan;
    } else if (layout.count(i) == 0) {
      mirrorOffsets[at] = 0; // reads nothing
    } else if (masterReads[at] < 0) {
      fail("internal error: parameter '" +
           std::string(program.parameters[i].name) +
           "' is read in f32, but is neither in a gathered bucket nor held "
           "whole by every rank");
    }
  }
}

void TrainingBackend::requireHeldShard(
    const std::vector<ParameterLayout::Piece> &pieces) const {
  const std::vector<ParameterLayout::Piece> &held = layout.shard();
  bool same = pieces.size() == held.size();
  for (size_t i = 0; same && i < pieces.size(); ++i)
    same = pieces[i].parameter == held[i].parameter &&
           pieces[i].offset == held[i].offset &&
           pieces[i].count == held[i].count;
  if (!same)
    fail("internal error: the optimizer's shard is not the one the backend "
         "holds the state of");
}

std::string describeResidentState(const ResidentState &resident) {
  auto bytes = [](int64_t value) { return std::to_string(value); };
  return "resident training state: " + bytes(resident.total()) +
         " bytes (masters " + bytes(resident.masters) + ", moments " +
         bytes(resident.moments) + ", copies/mirrors " +
         bytes(resident.stepCopies) + ", gradients " +
         bytes(resident.gradients) + ", accumulators " +
         bytes(resident.accumulators) + ", gradient ring " +
         bytes(resident.gradientRing) + ", weight ring " +
         bytes(resident.weightRing) + ")";
}

std::vector<tessera_tensor>
TrainingBackend::stepParameterTensors(void *masters, void *copies,
                                      void *shardMasters) const {
  std::vector<tessera_tensor> tensors = sliceTensors(masters, TESSERA_F32);
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const auto at = static_cast<size_t>(i);
    const tessera_tensor_info &info = program.parameters[i];
    if (readsComputeCopy(i))
      tensors[at] = makeTensor(
          static_cast<unsigned char *>(copies) +
              computeCopyOffset(i) * dtypeSize(computeDtype),
          computeDtype, info);
    else if (packsMirrors() && mirrorOffsets[at] >= 0)
      tensors[at] = makeTensor(
          static_cast<float *>(masters) + mirrorOffsets[at], TESSERA_F32, info);
    else if (packsMirrors())
      tensors[at] = makeTensor(
          static_cast<float *>(shardMasters) + masterReads[at], TESSERA_F32,
          info);
  }
  return tensors;
}

std::vector<tessera_tensor>
TrainingBackend::stepRingTensors(void *copyRing, void *mirrorRing) const {
  std::vector<tessera_tensor> tensors;
  const std::vector<int64_t> &offsets = layout.weightShard().ringOffsets;
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const bool copy = readsComputeCopy(i);
    const int32_t dtype = copy ? computeDtype : TESSERA_F32;
    tensors.push_back(makeTensor(
        static_cast<unsigned char *>(copy ? copyRing : mirrorRing) +
            offsets[static_cast<size_t>(i)] * dtypeSize(dtype),
        dtype, program.parameters[i]));
  }
  return tensors;
}

int64_t TrainingBackend::stepCopyOffset(int32_t parameter,
                                        int64_t flatOffset) const {
  if (layout.weightsSharded())
    return layout.weightShardOffset(flatOffset);
  if (readsComputeCopy(parameter))
    return computeCopyOffset(parameter) + flatOffset - layout.offset(parameter);
  if (packsMirrors())
    return mirrorOffsets[static_cast<size_t>(parameter)] + flatOffset -
           layout.offset(parameter);
  return flatOffset;
}

std::vector<tessera_tensor>
TrainingBackend::stepGradientTensors(void *base, void *shard) const {
  if (!layout.gradientsSharded())
    return sliceTensors(base, computeDtype);
  std::vector<tessera_tensor> tensors;
  auto *bytes = static_cast<unsigned char *>(base);
  const std::vector<int64_t> &offsets = layout.gradientRing().offsets;
  // An empty parameter has no place anywhere (offset -1): nothing is
  // written through it.
  for (int32_t i = 0; i < program.parameter_count; ++i)
    tensors.push_back(makeTensor(
        bytes + std::max<int64_t>(offsets[static_cast<size_t>(i)], 0) *
                    dtypeSize(computeDtype),
        computeDtype, program.parameters[i]));
  if (shard)
    for (const ParameterLayout::GradientRingPlacement::WholeGradient &whole :
         layout.gradientRing().wholeGradients)
      tensors[static_cast<size_t>(whole.parameter)].data =
          static_cast<unsigned char *>(shard) +
          whole.shardOffset * dtypeSize(computeDtype);
  return tensors;
}

void TrainingBackend::placeComputeCopies(
    std::vector<tessera_tensor_chunk> &chunks) const {
  for (tessera_tensor_chunk &chunk : chunks)
    chunk.copy_offset = readsComputeCopy(chunk.tensor)
                            ? stepCopyOffset(chunk.tensor, chunk.offset)
                            : -1;
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
                const std::vector<std::vector<float>> &tensors, float *flat,
                bool flatIsZero) {
  for (int32_t i = 0; i < layout.size(); ++i) {
    const std::vector<float> &values = tensors[static_cast<size_t>(i)];
    auto bytes = static_cast<size_t>(layout.count(i)) * sizeof(float);
    // Empty: a fresh start's moments (TrainingState), zeros, unless `flat`
    // is known zero already (then its pages stay untouched).
    if (values.empty()) {
      if (!flatIsZero)
        std::memset(flat + layout.offset(i), 0, bytes);
    } else {
      std::memcpy(flat + layout.offset(i), values.data(), bytes);
    }
  }
}

} // namespace tessera::train
