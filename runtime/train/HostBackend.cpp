//===- HostBackend.cpp - Flat host buffers and the CPU kernels ------------===//
//
// The flat buffers are 256-byte aligned allocations (as cudaMalloc's are),
// zeroed, so the gaps between slices read as zeros. Gradient accumulation
// over K micro-batches: the program writes computeGradients; the first
// micro-batch's are cast into the f32 accumulators, each later one's cast
// into an f32 scratch and added (for f32 programs the scratch is the
// program's own output). The norm and AdamW then walk the parameters in
// order with tessera_cpu_sum_squares (one running f64 sum) and
// tessera_cpu_adamw. A pipelined step accumulates the same way, one
// parameter's slice at a time (accumulateGradient).
//
//===----------------------------------------------------------------------===//

#include "HostBackend.h"

#include "TrainError.h"

#include <cstdlib>
#include <cstring>
#include <sys/resource.h>

namespace tessera::train {
namespace {

/// A zeroed, 256-byte aligned host allocation.
class AlignedBuffer {
public:
  static constexpr size_t kAlignment = 256;
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t bytes) {
    size_t rounded =
        (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded == 0)
      rounded = kAlignment;
    memory.reset(std::aligned_alloc(kAlignment, rounded));
    if (!memory)
      throw std::bad_alloc();
    std::memset(memory.get(), 0, rounded);
  }
  void *get() const { return memory.get(); }

private:
  struct Free {
    void operator()(void *pointer) const { std::free(pointer); }
  };
  std::unique_ptr<void, Free> memory;
};

/// A flat 1-D view of `elements` elements of `dtype` at `data`.
tessera_tensor flatTensor(void *data, int32_t dtype, int64_t elements) {
  tessera_tensor tensor{};
  tensor.data = data;
  tensor.dtype = dtype;
  tensor.rank = 1;
  tensor.shape[0] = elements;
  return tensor;
}

void checkKernel(int status, const char *what) {
  if (status != 0)
    fail(std::string(what) + ": " + tessera_cpu_last_error());
}

class HostBackend final : public FlatStateBackend<AlignedBuffer>,
                          private comm::ShardedGradientSink {
public:
  HostBackend(const tessera_program &program, const TrainOptions &options,
              const ParameterLayout *plannedLayout);

  tessera_device_kind device() const override { return TESSERA_DEVICE_HOST; }
  void *stream() override { return nullptr; }

  void loadState(const TrainingState &state) override;
  void storeState(TrainingState &state) override;
  int64_t *tokens() override { return tokenValues.data(); }
  int64_t *targets() override { return targetValues.data(); }
  double runMicroBatch(int64_t micro, float lossScale, uint64_t seed) override;
  void *allocate(int64_t bytes, const char *) override {
    allocations.emplace_back(bytes);
    return allocations.back().get();
  }
  void reserveMicroBatches(int64_t count) override {
    size_t values = static_cast<size_t>(count) * tokenValues.size();
    slotTokens.assign(values, 0);
    slotTargets.assign(values, 0);
  }
  void storeMicroBatch(int64_t slot) override;
  void runStage(const tessera_stage_function &function, int64_t slot,
                const tessera_tensor *inputs, tessera_tensor *outputs,
                float lossScale, uint64_t seed) override;
  double finishStages() override {
    double sum = stageLossSum;
    stageLossSum = 0;
    return sum;
  }
  void accumulateGradients(int32_t begin, int32_t end, bool first) override;
  void addToAccumulator(int32_t parameter, const float *part) override {
    float *sum = static_cast<float *>(accumulators.get()) + layout.offset(parameter);
    for (int64_t e = 0; e < layout.count(parameter); ++e)
      sum[e] += part[e];
  }
  void sumsOfSquares(const std::vector<bool> *counted,
                     std::vector<double> &sums) override;
  void applyAdamW(const AdamWUpdate &update) override;
  void refreshComputeCopies() override;
  int32_t nonFiniteParameter() override {
    int32_t found = nonFinite;
    nonFinite = -1;
    return found;
  }
  void restrictOptimizer(
      const std::vector<ParameterLayout::Piece> &pieces) override;
  comm::ShardedGradientSink *gradientShardSink() override {
    return shardsGradients() ? this : nullptr;
  }
  void gatherState(const std::function<void(const FlatBuffer &)> &gather,
                   bool keep) override;
  void finishStep() override {}
  std::vector<std::vector<float>> copyOptimizerGradients() override {
    FlatBuffer source = optimizerGradients();
    return unflattenToF32(program, layout, source.data, source.dtype);
  }
  int64_t peakMemoryBytes() override {
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<int64_t>(usage.ru_maxrss) * 1024; // kilobytes on Linux
  }

private:
  // ZeRO-2's sink (gradient_reducer.h): synchronous, as the host comm is.
  tessera_tensor bucketForReduction(int32_t bucket, void *) override;
  tessera_tensor blockForReduction(int64_t elements) override {
    return flatView(reducedBlock.get(), gradientShardDtype(), 0, elements);
  }
  void foldBlock(int32_t bucket, const tessera_tensor &block,
                 void *) override;
  /// ZeRO-2 summing micro-batches: adds the gradients in no bucket, which
  /// the step wrote whole into the ring, into the shard.
  void foldWholeGradients();
  std::vector<float> wholeStaging;
  /// ZeRO-2: the micro-batch being run is the step's first (its reduced
  /// blocks replace the shard's sums instead of adding to them).
  bool firstMicroBatch = true;

  /// The per-parameter views of the optimizer's work: whole slices, or
  /// 1-D views of the pieces restrictOptimizer named.
  struct OptimizerViews {
    std::vector<tessera_tensor> parameters, gradients, first, second;
    /// Where each view's compute copy is (data null: none).
    std::vector<tessera_tensor> copies;
    std::vector<bool> decays;
    /// The parameter each view belongs to.
    std::vector<int32_t> owners;
  };
  OptimizerViews optimizerViews();

  AlignedBuffer scratch;
  /// What nonFiniteParameter returns next.
  int32_t nonFinite = -1;

  /// Whether every element of an f32 view is finite (the CPU's AdamW is a
  /// pass over the same memory; this one is cheap beside it).
  static bool allFinite(const tessera_tensor &view) {
    int64_t count = 1;
    for (int32_t d = 0; d < view.rank; ++d)
      count *= view.shape[d];
    return firstNonFinite(static_cast<const float *>(view.data), count) < 0;
  }
  std::vector<AlignedBuffer> allocations;
  /// A pipelined step's micro-batches, one [batch, sequence] after another.
  std::vector<int64_t> slotTokens, slotTargets;
  /// The losses of the stage calls since finishStages.
  double stageLossSum = 0;
  bool restricted = false;
  std::vector<ParameterLayout::Piece> restriction;
  /// Under a sharded state: the whole masters and moments gatherState
  /// kept for the next storeState (empty otherwise).
  std::vector<AlignedBuffer> gathered;
  std::vector<std::vector<unsigned char>> bufferValues;
  std::vector<int64_t> tokenValues, targetValues;
  /// The masters' slices (what AdamW updates) and what the program reads
  /// per parameter (the master or its compute copy).
  std::vector<tessera_tensor> masterTensors, stepTensors;
  std::vector<tessera_tensor> bufferTensors, gradientTensors;
};

HostBackend::HostBackend(const tessera_program &program,
                         const TrainOptions &options,
                         const ParameterLayout *plannedLayout)
    : FlatStateBackend(program, options, plannedLayout) {
  const int64_t stateBytes =
      layout.stateElements() * dtypeSize(TESSERA_F32);
  master = AlignedBuffer(stateBytes);
  firstMomentValues = AlignedBuffer(stateBytes);
  secondMomentValues = AlignedBuffer(stateBytes);
  if (shardsGradients()) {
    // The ring the step writes, the reduced shard and the reduction's room.
    const GradientRing &ring = layout.gradientRing();
    const int64_t shardBytes = dtypeSize(gradientShardDtype());
    gradients = AlignedBuffer(ringElements() * dtypeSize(computeDtype));
    gradientShard = AlignedBuffer(layout.gradientShardElements() * shardBytes);
    reducedBlock = AlignedBuffer(ring.largestBlock * shardBytes);
    if (stagingElements() > 0)
      reductionStaging =
          AlignedBuffer(stagingElements() * dtypeSize(TESSERA_F32));
  } else {
    gradients = AlignedBuffer(layout.totalBytes(computeDtype));
    if (accumulating()) {
      accumulators = AlignedBuffer(layout.totalBytes(TESSERA_F32));
      if (computeDtype != TESSERA_F32)
        scratch = AlignedBuffer(layout.totalBytes(TESSERA_F32));
    }
  }
  for (int32_t i = 0; i < program.buffer_count; ++i)
    bufferValues.emplace_back(
        static_cast<size_t>(elementCount(program.buffers[i]) *
                            dtypeSize(program.buffers[i].dtype)));
  for (int32_t i = 0; i < program.buffer_count; ++i)
    bufferTensors.push_back(makeTensor(bufferValues[static_cast<size_t>(i)].data(),
                                       program.buffers[i].dtype,
                                       program.buffers[i]));
  size_t tokenCount = static_cast<size_t>(program.batch * program.sequence);
  tokenValues.assign(tokenCount, 0);
  targetValues.assign(tokenCount, 0);
  if (computeCopyElements() > 0)
    computeCopies = AlignedBuffer(computeCopyElements() *
                                  static_cast<int64_t>(dtypeSize(computeDtype)));
  if (mirrorElements() > 0)
    mirror = AlignedBuffer(mirrorElements() * dtypeSize(TESSERA_F32));
  gradientTensors = stepGradientTensors(gradients.get(), wholeGradientsShard());
  if (holdsShardOnly()) {
    // The optimizer covers the shard from the start; the step reads the
    // mirrors where it would read masters (ZeRO-3: gathered into rings).
    restriction = layout.shard();
    restricted = true;
    if (layout.weightsSharded()) {
      const ParameterLayout::WeightShardPlacement &weights =
          layout.weightShard();
      copyRing = AlignedBuffer(weights.ringElements[0] * dtypeSize(computeDtype));
      mirrorRing = AlignedBuffer(weights.ringElements[1] * dtypeSize(TESSERA_F32));
      stepTensors = stepRingTensors(copyRing.get(), mirrorRing.get());
      return;
    }
    stepTensors = stepParameterTensors(mirror.get(), computeCopies.get(),
                                       master.get());
    return;
  }
  masterTensors = sliceTensors(master.get(), TESSERA_F32);
  stepTensors = stepParameterTensors(master.get(), computeCopies.get());
}

void HostBackend::restrictOptimizer(
    const std::vector<ParameterLayout::Piece> &pieces) {
  if (holdsShardOnly())
    return requireHeldShard(pieces);
  restriction = pieces;
  restricted = true;
}

void HostBackend::gatherState(
    const std::function<void(const FlatBuffer &)> &gather, bool keep) {
  if (!holdsShardOnly())
    fail("internal error: gathering the state of a backend that holds it "
         "whole");
  gathered.clear();
  const int64_t elements = layout.totalElements();
  for (AlignedBuffer *kind : {&master, &firstMomentValues,
                              &secondMomentValues}) {
    AlignedBuffer whole(layout.totalBytes(TESSERA_F32));
    auto *target = static_cast<float *>(whole.get());
    const auto *source = static_cast<const float *>(kind->get());
    for (const ParameterLayout::Piece &piece : layout.shard())
      std::memcpy(target + piece.offset, source + piece.stateOffset,
                  static_cast<size_t>(piece.count) * sizeof(float));
    gather({whole.get(), TESSERA_F32, elements});
    if (keep)
      gathered.push_back(std::move(whole));
  }
}

void HostBackend::loadState(const TrainingState &state) {
  bufferValues = state.buffers;
  for (size_t i = 0; i < bufferTensors.size(); ++i)
    bufferTensors[i].data = bufferValues[i].data();
  if (holdsShardOnly()) {
    // The shard's pieces of the whole tensors, and every step tensor.
    for (const ParameterLayout::Piece &piece : layout.shard()) {
      const auto at = static_cast<size_t>(piece.offset -
                                          layout.offset(piece.parameter));
      const auto bytes = static_cast<size_t>(piece.count) * sizeof(float);
      const auto p = static_cast<size_t>(piece.parameter);
      const auto place = static_cast<size_t>(piece.stateOffset);
      std::memcpy(static_cast<float *>(master.get()) + place,
                  state.parameters[p].data() + at, bytes);
      // Empty moments: a fresh start's zeros (TrainingState).
      float *moments[] = {static_cast<float *>(firstMomentValues.get()),
                          static_cast<float *>(secondMomentValues.get())};
      const std::vector<float> *sources[] = {&state.firstMoments[p],
                                             &state.secondMoments[p]};
      for (int k = 0; k < 2; ++k)
        if (sources[k]->empty())
          std::memset(moments[k] + place, 0, bytes);
        else
          std::memcpy(moments[k] + place, sources[k]->data() + at, bytes);
    }
    if (layout.weightsSharded()) {
      // ZeRO-3: only the shard's pieces of what the step reads.
      for (const ParameterLayout::Piece &piece : layout.shard()) {
        const bool copy = readsComputeCopy(piece.parameter);
        tessera_tensor master = flatTensor(
            const_cast<float *>(
                state.parameters[static_cast<size_t>(piece.parameter)].data()) +
                (piece.offset - layout.offset(piece.parameter)),
            TESSERA_F32, piece.count);
        const int32_t dtype = copy ? computeDtype : TESSERA_F32;
        tessera_tensor shard = flatTensor(
            static_cast<unsigned char *>(copy ? computeCopies.get()
                                              : mirror.get()) +
                stepCopyOffset(piece.parameter, piece.offset) * dtypeSize(dtype),
            dtype, piece.count);
        checkKernel(tessera_cpu_cast(&master, &shard),
                    "rounding the compute copies");
      }
      return;
    }
    for (int32_t i = 0; i < layout.size(); ++i) {
      tessera_tensor whole = makeTensor(
          const_cast<float *>(state.parameters[static_cast<size_t>(i)].data()),
          TESSERA_F32, program.parameters[i]);
      checkKernel(tessera_cpu_cast(&whole, &stepTensors[static_cast<size_t>(i)]),
                  "rounding the compute copies");
    }
    return;
  }
  flattenF32(layout, state.parameters, static_cast<float *>(master.get()));
  flattenF32(layout, state.firstMoments,
             static_cast<float *>(firstMomentValues.get()));
  flattenF32(layout, state.secondMoments,
             static_cast<float *>(secondMomentValues.get()));
  refreshComputeCopies();
}

void HostBackend::refreshComputeCopies() {
  if (holdsShardOnly())
    fail("internal error: a sharded state's compute copies are gathered, "
         "not rounded from masters this rank does not hold");
  for (int32_t i = 0; i < layout.size(); ++i)
    if (readsComputeCopy(i))
      checkKernel(tessera_cpu_cast(&masterTensors[static_cast<size_t>(i)],
                                   &stepTensors[static_cast<size_t>(i)]),
                  "rounding the compute copies");
}

void HostBackend::storeState(TrainingState &state) {
  state.buffers = bufferValues;
  if (holdsShardOnly()) {
    if (gathered.size() != 3)
      fail("internal error: storing a sharded state that was not gathered");
    state.parameters =
        unflattenToF32(program, layout, gathered[0].get(), TESSERA_F32);
    state.firstMoments =
        unflattenToF32(program, layout, gathered[1].get(), TESSERA_F32);
    state.secondMoments =
        unflattenToF32(program, layout, gathered[2].get(), TESSERA_F32);
    gathered.clear();
    return;
  }
  state.parameters =
      unflattenToF32(program, layout, master.get(), TESSERA_F32);
  state.firstMoments =
      unflattenToF32(program, layout, firstMomentValues.get(), TESSERA_F32);
  state.secondMoments =
      unflattenToF32(program, layout, secondMomentValues.get(), TESSERA_F32);
}

double HostBackend::runMicroBatch(int64_t micro, float lossScale,
                                  uint64_t seed) {
  tessera_tensor_info info = microBatchInfo(program);
  tessera_tensor tokenTensor = makeTensor(tokenValues.data(), TESSERA_I64, info);
  tessera_tensor targetTensor =
      makeTensor(targetValues.data(), TESSERA_I64, info);
  // ZeRO-2's reducer folds each bucket into the shard as the step
  // announces it (foldBlock).
  firstMicroBatch = micro == 0;
  double loss =
      callProgram(stepTensors.data(), bufferTensors.data(), &tokenTensor,
                  &targetTensor, lossScale, seed, gradientTensors.data());
  if (shardsGradients() && accumulating())
    foldWholeGradients();
  if (!accumulating() || shardsGradients())
    return loss;
  const int64_t elements = layout.totalElements();
  tessera_tensor computed = flatTensor(gradients.get(), computeDtype, elements);
  void *addend = computeDtype == TESSERA_F32 ? gradients.get() : scratch.get();
  tessera_tensor widened =
      flatTensor(micro == 0 ? accumulators.get() : addend, TESSERA_F32,
                 elements);
  if (computeDtype != TESSERA_F32 || micro == 0)
    checkKernel(tessera_cpu_cast(&computed, &widened),
                "converting gradients to f32");
  if (micro > 0) {
    auto *sum = static_cast<float *>(accumulators.get());
    const auto *add = static_cast<const float *>(addend);
    for (int64_t e = 0; e < elements; ++e)
      sum[e] += add[e];
  }
  return loss;
}

void HostBackend::storeMicroBatch(int64_t slot) {
  const size_t count = tokenValues.size();
  if (slotTokens.size() < (static_cast<size_t>(slot) + 1) * count)
    fail("internal error: micro-batch slot " + std::to_string(slot) +
         " was not reserved");
  std::memcpy(slotTokens.data() + static_cast<size_t>(slot) * count,
              tokenValues.data(), count * sizeof(int64_t));
  std::memcpy(slotTargets.data() + static_cast<size_t>(slot) * count,
              targetValues.data(), count * sizeof(int64_t));
}

void HostBackend::runStage(const tessera_stage_function &function,
                           int64_t slot, const tessera_tensor *inputs,
                           tessera_tensor *outputs, float lossScale,
                           uint64_t seed) {
  const size_t at = static_cast<size_t>(slot) * tokenValues.size();
  tessera_tensor_info info = microBatchInfo(program);
  tessera_tensor tokenTensor =
      makeTensor(slotTokens.data() + at, TESSERA_I64, info);
  tessera_tensor targetTensor =
      makeTensor(slotTargets.data() + at, TESSERA_I64, info);
  stageLossSum += callStage(function, stepTensors.data(),
                            bufferTensors.data(), &tokenTensor, &targetTensor,
                            inputs, lossScale, seed, gradientTensors.data(),
                            outputs);
}

void HostBackend::accumulateGradients(int32_t begin, int32_t end,
                                      bool first) {
  if (!accumulating() || begin >= end)
    return;
  // The whole-buffer arithmetic of runMicroBatch on one range.
  const int64_t offset = layout.offset(begin);
  const int64_t elements = layout.spanElements(begin, end);
  auto *sum = static_cast<float *>(accumulators.get()) + offset;
  tessera_tensor computed = flatTensor(
      static_cast<unsigned char *>(gradients.get()) +
          offset * dtypeSize(computeDtype),
      computeDtype, elements);
  float *addend =
      computeDtype == TESSERA_F32
          ? static_cast<float *>(computed.data)
          : static_cast<float *>(scratch.get()) + offset;
  tessera_tensor widened = flatTensor(first ? sum : addend, TESSERA_F32,
                                      elements);
  if (computeDtype != TESSERA_F32 || first)
    checkKernel(tessera_cpu_cast(&computed, &widened),
                "converting gradients to f32");
  if (!first)
    for (int64_t e = 0; e < elements; ++e)
      sum[e] += addend[e];
}

tessera_tensor HostBackend::bucketForReduction(int32_t bucket, void *) {
  if (tessera_tensor held = heldPlace(bucket); held.data)
    return held;
  tessera_tensor slot = ringPlace(bucket);
  if (stagingElements() == 0)
    return slot;
  // Summed over micro-batches in f32: reduced in f32 too.
  tessera_tensor widened =
      flatView(reductionStaging.get(), TESSERA_F32, 0, slot.shape[0]);
  checkKernel(tessera_cpu_cast(&slot, &widened),
              "widening a bucket of gradients to f32");
  return widened;
}

void HostBackend::foldWholeGradients() {
  auto *sums = static_cast<float *>(gradientShard.get());
  for (const GradientRing::WholeGradient &whole :
       layout.gradientRing().wholeGradients) {
    tessera_tensor written =
        flatView(gradients.get(), computeDtype, whole.ringOffset, whole.count);
    float *sum = sums + whole.shardOffset;
    // The first micro-batch's replaces the sum, a later one's is widened
    // and added, as the accumulators of an unsharded gradient are.
    wholeStaging.resize(static_cast<size_t>(whole.count));
    float *widenedValues = firstMicroBatch ? sum : wholeStaging.data();
    tessera_tensor widened =
        flatView(widenedValues, TESSERA_F32, 0, whole.count);
    checkKernel(tessera_cpu_cast(&written, &widened),
                "converting gradients to f32");
    if (!firstMicroBatch)
      for (int64_t e = 0; e < whole.count; ++e)
        sum[e] += widenedValues[e];
  }
}

void HostBackend::foldBlock(int32_t bucket, const tessera_tensor &reduced,
                            void *) {
  const int32_t dtype = gradientShardDtype();
  const auto bytes = static_cast<size_t>(dtypeSize(dtype));
  auto *block = static_cast<unsigned char *>(reduced.data);
  auto *shard = static_cast<unsigned char *>(gradientShard.get());
  for (const GradientRing::BlockPiece &piece :
       layout.gradientRing().buckets[static_cast<size_t>(bucket)].pieces) {
    if (!accumulating() || firstMicroBatch) {
      std::memcpy(shard + static_cast<size_t>(piece.shardOffset) * bytes,
                  block + static_cast<size_t>(piece.blockOffset) * bytes,
                  static_cast<size_t>(piece.count) * bytes);
      continue;
    }
    float *sum = reinterpret_cast<float *>(shard) + piece.shardOffset;
    const float *add = reinterpret_cast<const float *>(block) +
                       piece.blockOffset;
    for (int64_t e = 0; e < piece.count; ++e)
      sum[e] += add[e];
  }
}

HostBackend::OptimizerViews HostBackend::optimizerViews() {
  FlatBuffer source = optimizerGradients();
  OptimizerViews views;
  if (!restricted) {
    views.parameters = masterTensors;
    views.copies = stepTensors;
    for (int32_t i = 0; i < layout.size(); ++i)
      if (!readsComputeCopy(i))
        views.copies[static_cast<size_t>(i)].data = nullptr;
    views.gradients = sliceTensors(source.data, source.dtype);
    views.first = sliceTensors(firstMomentValues.get(), TESSERA_F32);
    views.second = sliceTensors(secondMomentValues.get(), TESSERA_F32);
    views.decays = getDecays();
    for (int32_t i = 0; i < layout.size(); ++i)
      views.owners.push_back(i);
    return views;
  }
  auto at = [](void *base, int32_t dtype, int64_t offset, int64_t count) {
    return flatTensor(static_cast<unsigned char *>(base) +
                          offset * dtypeSize(dtype),
                      dtype, count);
  };
  for (const ParameterLayout::Piece &piece : restriction) {
    // A sharded state's piece is at its stateOffset in the compact buffers.
    const int64_t state =
        piece.stateOffset >= 0 ? piece.stateOffset : piece.offset;
    views.parameters.push_back(
        at(master.get(), TESSERA_F32, state, piece.count));
    tessera_tensor copy{};
    const int64_t copyOffset = stepCopyOffset(piece.parameter, piece.offset);
    if (readsComputeCopy(piece.parameter))
      copy = at(computeCopies.get(), computeDtype, copyOffset, piece.count);
    else if (mirrored(piece.parameter))
      copy = at(mirror.get(), TESSERA_F32, copyOffset, piece.count);
    views.copies.push_back(copy);
    // ZeRO-2's gradient shard is packed as the masters are, but for the
    // buckets held whole.
    views.gradients.push_back(
        at(source.data, source.dtype,
           shardsGradients() ? layout.gradientShardOffset(piece.offset)
                             : piece.offset,
           piece.count));
    views.first.push_back(
        at(firstMomentValues.get(), TESSERA_F32, state, piece.count));
    views.second.push_back(
        at(secondMomentValues.get(), TESSERA_F32, state, piece.count));
    views.decays.push_back(getDecays()[static_cast<size_t>(piece.parameter)]);
    views.owners.push_back(piece.parameter);
  }
  return views;
}

void HostBackend::sumsOfSquares(const std::vector<bool> *counted,
                                std::vector<double> &sums) {
  OptimizerViews views = optimizerViews();
  for (size_t i = 0; i < views.gradients.size(); ++i) {
    const auto owner = static_cast<size_t>(views.owners[i]);
    if (!counted || (*counted)[owner])
      checkKernel(tessera_cpu_sum_squares(&views.gradients[i], &sums[owner]),
                  "gradient norm");
  }
}

void HostBackend::applyAdamW(const AdamWUpdate &update) {
  OptimizerViews views = optimizerViews();
  for (size_t i = 0; i < views.parameters.size(); ++i) {
    double weightDecay = views.decays[i] ? update.weightDecay : 0.0;
    checkKernel(tessera_cpu_adamw(&views.parameters[i], &views.gradients[i],
                                  &views.first[i], &views.second[i],
                                  update.step, update.learningRate,
                                  update.beta1, update.beta2, update.epsilon,
                                  weightDecay, update.gradientScale),
                "AdamW");
    if (views.copies[i].data)
      checkKernel(tessera_cpu_cast(&views.parameters[i], &views.copies[i]),
                  "rounding the compute copies");
    if (nonFinite < 0 &&
        !(allFinite(views.parameters[i]) && allFinite(views.second[i])))
      nonFinite = views.owners[i];
  }
}

} // namespace

std::unique_ptr<TrainingBackend>
makeHostBackend(const tessera_program &program, const TrainOptions &options,
                const ParameterLayout *layout) {
  if (program.device != TESSERA_DEVICE_HOST)
    fail("this program runs on device kind " + std::to_string(program.device) +
         ", which this executable's driver cannot run (a CUDA program calls "
         "tessera_cuda_train_main)");
  return std::make_unique<HostBackend>(program, options, layout);
}

} // namespace tessera::train
