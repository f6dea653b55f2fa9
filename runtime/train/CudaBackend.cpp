//===- CudaBackend.cpp - Flat device buffers and the driver's GPU kernels -===//
//
// Made once before the first step, the backend allocates in device memory:
// the fp32 master weights, the AdamW moments, the compute-precision
// gradients (one flat buffer each, ParameterLayout), the compute copies the
// step reads (program.h's parameter_step_dtypes), the f32 accumulators
// when K > 1, the buffers, the micro-batch's tokens and targets, the chunk
// table and the per-chunk sums of squares; in pinned host memory the
// micro-batch the data loader fills and the sums' readback. The step loop
// then only enqueues work on one stream:
//
//   per micro-batch: tokens and targets host -> device (async, pinned);
//     forward_backward on the stream (it reads the loss back: the one
//     synchronization of a micro-batch); K > 1: accumulate in f32;
//   per step: sums of squares per chunk -> host (one small readback);
//     multi-tensor AdamW, which also rounds the compute copies; finishStep
//     waits for it.
//
// A pipelined program (PipelineParallel.h) asks for more, also before the
// first step: device memory for its messages and saved activations, and
// room for every micro-batch of a step. Its stage calls are deferred: a call
// only enqueues its kernels (from the second step on, as a CUDA graph
// recorded per set of buffers: CudaStageGraphs), its loss lands in
// pinned memory, and finishStages waits and checks for device errors once a
// step, so the host never stalls the GPU between a stage's calls and its
// sends. Its gradients are accumulated one range of parameters at a time.
//
// With --offload optimizer (CudaOffloadedOptimizer.h) the fp32 masters
// and the moments (both pinned) are host memory instead, and AdamW
// runs on the host:
// the norm's sums are read back as before, the gradients follow them to the
// host range by range, and each range's updated copies (and the f32 mirror
// of the weights the step reads as masters) come back on the same stream,
// ahead of the next step's forward.
//
// Memory is reported as what is in use on the device beyond what was when
// this process's first backend on it started (after the CUDA context was
// made), read from cudaMemGetInfo: our buffers, the program's arena, the
// kernels' scratch and cuBLASLt workspaces. Thread ranks sharing a GPU thus
// all report that GPU's total, not a share that would depend on which rank
// started first. Nothing is freed during a run, so the latest reading is
// the peak.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"

#include "CudaBuffers.h"
#include "CudaOffloadedOptimizer.h"
#include "CudaStageGraphs.h"
#include "CudaStepGraph.h"
#include "TrainCudaCheck.h"
#include "TrainError.h"
#include "tessera/runtime/cuda_lowering_support.h"
#include "tessera/runtime/cuda_optimizer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

namespace tessera::train {
namespace {

void checkKernel(int status, const char *what) {
  if (status != 0)
    fail(std::string(what) + ": " + tessera_cuda_last_error());
}

/// Each of `tensors` (one kind of a TrainingState) at its layout offset in
/// the device buffer `flat`, straight from its host vector: no flat host
/// copy of the whole kind beside the state (32 GB for an 8B model's
/// masters, which a resumed run's host memory could not also hold). An
/// empty tensor (a fresh start's moment) is zeros; the padding between
/// tensors is left as it is (zero since allocation). Synchronous: the
/// vectors are pageable memory.
void uploadFlat(const ParameterLayout &layout,
                const std::vector<std::vector<float>> &tensors, float *flat) {
  for (int32_t i = 0; i < layout.size(); ++i) {
    const std::vector<float> &values = tensors[static_cast<size_t>(i)];
    const auto bytes = static_cast<size_t>(layout.count(i)) * sizeof(float);
    float *at = flat + layout.offset(i);
    if (values.empty())
      checkCuda(cudaMemset(at, 0, bytes), "clearing the fresh moments");
    else
      checkCuda(cudaMemcpy(at, values.data(), bytes, cudaMemcpyHostToDevice),
                "uploading the training state");
  }
}

/// `table` in device memory (a synchronous copy: before the step loop).
DeviceBuffer uploadChunkTable(const std::vector<tessera_tensor_chunk> &table,
                              const char *what) {
  const int64_t bytes =
      static_cast<int64_t>(table.size() * sizeof(tessera_tensor_chunk));
  DeviceBuffer buffer(bytes, what);
  if (!table.empty())
    checkCuda(cudaMemcpy(buffer.get(), table.data(), static_cast<size_t>(bytes),
                         cudaMemcpyHostToDevice),
              std::string("uploading ") + what);
  return buffer;
}

int64_t deviceBytesInUse() {
  size_t free = 0, total = 0;
  checkCuda(cudaMemGetInfo(&free, &total), "reading the GPU's memory use");
  return static_cast<int64_t>(total - free);
}

/// The current device's memory in use when this process's first backend on
/// it started: every backend on the device measures from there.
int64_t deviceBaselineBytes() {
  static std::mutex mutex;
  static std::map<int, int64_t> baselines;
  int device = 0;
  checkCuda(cudaGetDevice(&device), "reading the current GPU");
  std::lock_guard<std::mutex> lock(mutex);
  auto [found, first] = baselines.try_emplace(device, 0);
  if (first)
    found->second = deviceBytesInUse();
  return found->second;
}

class CudaBackend final : public FlatStateBackend<DeviceBuffer>,
                          private comm::ShardedGradientSink {
public:
  CudaBackend(const tessera_program &program, const TrainOptions &options,
              const ParameterLayout *plannedLayout);
  ~CudaBackend() override {
    stepGraph.reset();
    // What the offloaded run measured: the host and PCIe numbers the cost
    // model's cluster file wants (issue 23).
    if (offload && !offload->measurements().empty())
      std::printf("%s\n", offload->measurements().c_str());
    offload.reset();
    if (sumsReady)
      cudaEventDestroy(sumsReady);
    if (streamHandle)
      cudaStreamDestroy(streamHandle);
  }

  tessera_device_kind device() const override { return TESSERA_DEVICE_CUDA; }
  // Offloaded, the masters and moments are host memory, which no caller of
  // these (data parallelism, pipelines, meshes: all refused) may get.
  FlatBuffer masterWeights() override {
    requireResident("master weights");
    return FlatStateBackend::masterWeights();
  }
  FlatBuffer firstMoments() override {
    requireResident("first moments");
    return FlatStateBackend::firstMoments();
  }
  FlatBuffer secondMoments() override {
    requireResident("second moments");
    return FlatStateBackend::secondMoments();
  }
  void *stream() override { return streamHandle; }

  void loadState(const TrainingState &state) override;
  void storeState(TrainingState &state) override;
  int64_t *tokens() override { return static_cast<int64_t *>(hostTokens.get()); }
  int64_t *targets() override {
    return static_cast<int64_t *>(hostTargets.get());
  }
  double runMicroBatch(int64_t micro, float lossScale, uint64_t seed) override;
  void *allocate(int64_t bytes, const char *what) override {
    allocations.emplace_back(bytes, what);
    return allocations.back().get();
  }
  void reserveMicroBatches(int64_t count) override {
    microBatchSlots = count;
    // A loss per micro-batch, twice over for room; more just waits early.
    stageLossCapacity = 2 * std::max<int64_t>(count, 1);
    stageLosses = PinnedBuffer(stageLossCapacity * sizeof(float));
    slotTokens = DeviceBuffer(count * microBatchBytes, "the step's tokens");
    slotTargets = DeviceBuffer(count * microBatchBytes, "the step's targets");
    checkCuda(cudaDeviceSynchronize(), "preparing the micro-batches");
  }
  void storeMicroBatch(int64_t slot) override;
  void runStage(const tessera_stage_function &function, int64_t slot,
                const tessera_tensor *inputs, tessera_tensor *outputs,
                float lossScale, uint64_t seed) override;
  double finishStages() override;
  void accumulateGradients(int32_t begin, int32_t end, bool first) override;
  void addToAccumulator(int32_t parameter, const float *part) override {
    checkKernel(tessera_cuda_accumulate_gradients(
                    static_cast<float *>(accumulators.get()) +
                        layout.offset(parameter),
                    part, TESSERA_F32, layout.count(parameter), 0,
                    streamHandle),
                "adding another stage's part of a gradient");
  }
  void sumsOfSquares(const std::vector<bool> *counted,
                     std::vector<double> &sums) override;
  void applyAdamW(const AdamWUpdate &update) override;
  void refreshComputeCopies() override;
  int32_t nonFiniteParameter() override;
  void restrictOptimizer(
      const std::vector<ParameterLayout::Piece> &pieces) override {
    requireResident("master weights and moments");
    if (holdsShardOnly())
      return requireHeldShard(pieces);
    useChunks(ParameterLayout::chunksOf(pieces, getDecays()));
  }
  void gatherState(const std::function<void(const FlatBuffer &)> &gather,
                   bool keep) override;
  comm::ShardedGradientSink *gradientShardSink() override {
    return shardsGradients() ? this : nullptr;
  }
  void finishStep() override {
    checkCuda(cudaStreamSynchronize(streamHandle), "finishing the step");
    if (offload)
      offload->endStep();
  }
  std::vector<std::vector<float>> copyOptimizerGradients() override;
  int64_t peakMemoryBytes() override {
    return deviceBytesInUse() - baselineBytes;
  }

private:
  // ZeRO-2's sink (gradient_reducer.h): enqueued on the comm stream, which
  // runs one bucket's widening, reduce-scatter and fold after another.
  tessera_tensor bucketForReduction(int32_t bucket, void *stream) override;
  tessera_tensor blockForReduction(int64_t elements) override {
    return flatView(reducedBlock.get(), gradientShardDtype(), 0, elements);
  }
  void foldBlock(int32_t bucket, const tessera_tensor &block,
                 void *stream) override;
  /// ZeRO-2: the micro-batch being enqueued is the step's first (its
  /// reduced blocks replace the shard's sums instead of adding to them).
  bool firstMicroBatch = true;

  void requireResident(const char *what) const {
    if (offload)
      fail(std::string("internal error: the ") + what +
           " of an offloaded optimizer are in host memory");
  }
  /// loadState's masters and moments, whole (device buffers) or the
  /// shard's (returns the transient whole buffer their pieces come from,
  /// still read on the stream).
  void loadWholeState(const TrainingState &state);
  DeviceBuffer loadShardedState(const TrainingState &state);
  /// A host copy of a whole flat device buffer.
  std::vector<unsigned char> download(const FlatBuffer &buffer);
  /// Waits for the deferred stage calls and adds their losses into
  /// foldedStageLoss.
  void foldStagedLosses();
  /// The chunks the norm and AdamW work on, and their sums' buffers.
  void useChunks(std::vector<tessera_tensor_chunk> table);
  /// Under a sharded state: copies `pieces`' elements between a whole flat
  /// f32 buffer (at their offsets) and a compact state buffer (at their
  /// stateOffset), on the stream.
  void copyPieces(const std::vector<ParameterLayout::Piece> &pieces,
                  float *whole, float *compact, bool toCompact);

  cudaStream_t streamHandle = nullptr;
  /// --offload optimizer: the masters and moments on the host, AdamW there;
  /// null when they are device buffers here.
  std::unique_ptr<CudaOffloadedOptimizer> offload;
  /// Offloaded: the norm's sums have landed (the gradients' download is
  /// enqueued behind them, not waited for).
  cudaEvent_t sumsReady = nullptr;
  /// The step replayed as a CUDA graph (--cuda-graphs).
  std::unique_ptr<CudaStepGraph> stepGraph;
  /// A pipeline's stage calls, each replayed as a CUDA graph.
  std::unique_ptr<CudaStageGraphs> stageGraphs;
  int64_t baselineBytes = 0;
  int64_t microBatchBytes = 0;
  int32_t chunkCount = 0;
  DeviceBuffer deviceTokens, deviceTargets, chunks, partialSums;
  /// Every chunk of the copied parameters, whatever AdamW's chunks are
  /// (ZeRO-1 restricts those): refreshComputeCopies' table.
  DeviceBuffer copyChunks;
  int32_t copyChunkCount = 0;
  std::vector<DeviceBuffer> bufferStorage;
  /// A pipelined run's messages and saved activations (allocate), and its
  /// step's micro-batches, one [batch, sequence] after another.
  std::vector<DeviceBuffer> allocations;
  DeviceBuffer slotTokens, slotTargets;
  int64_t microBatchSlots = 0;
  /// The losses of stage calls not yet waited for (pinned, written by the
  /// calls' copies), and the sum of those already waited for.
  PinnedBuffer stageLosses;
  int64_t stageLossCapacity = 0, stagedLosses = 0;
  double foldedStageLoss = 0;
  PinnedBuffer hostTokens, hostTargets, hostPartialSums;
  /// AdamW's non-finite flag (tessera_cuda_multi_tensor_adamw) and its
  /// host copy, read after the step's sync; whether an update ran since
  /// nonFiniteParameter last looked.
  DeviceBuffer nonFiniteFlag;
  PinnedBuffer hostNonFiniteFlag;
  bool updated = false;
  /// Under a sharded state: the shard's pieces of parameters the step
  /// reads as f32 (AdamW's result is copied into their mirrors), and the
  /// whole masters and moments gatherState kept for storeState (host).
  std::vector<ParameterLayout::Piece> mirroredPieces;
  std::vector<std::vector<float>> gathered;
  std::vector<int32_t> chunkTensors;
  /// What the program reads per parameter: its master or compute copy.
  std::vector<tessera_tensor> stepTensors, bufferTensors, gradientTensors;
};

CudaBackend::CudaBackend(const tessera_program &program,
                         const TrainOptions &options,
                         const ParameterLayout *plannedLayout)
    : FlatStateBackend(program, options, plannedLayout) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    fail("this executable trains on a GPU, and the CUDA driver sees none");
  // Makes the CUDA context first, so that the baseline excludes it.
  checkCuda(cudaFree(nullptr), "starting CUDA");
  baselineBytes = deviceBaselineBytes();
  checkCuda(cudaStreamCreateWithFlags(&streamHandle, cudaStreamNonBlocking),
            "creating the training stream");
  context.stream = streamHandle;
  tessera_cuda_set_gemm_autotune(options.gemmAutotune ? 1 : 0);
  tessera_cuda_set_attention_autotune(options.attentionAutotune ? 1 : 0);
  tessera_cuda_set_deterministic(options.deterministic ? 1 : 0);
  stepGraph = std::make_unique<CudaStepGraph>(streamHandle, options.cudaGraphs);
  stageGraphs =
      std::make_unique<CudaStageGraphs>(streamHandle, options.cudaGraphs);

  const int64_t f32Bytes = layout.totalBytes(TESSERA_F32);
  if (!options.offloadOptimizer) {
    // A ZeRO-1 shard's alone under a sharded state.
    const int64_t stateBytes =
        layout.stateElements() * dtypeSize(TESSERA_F32);
    master = DeviceBuffer(stateBytes, "the fp32 master weights");
    firstMomentValues = DeviceBuffer(stateBytes, "AdamW's first moments");
    secondMomentValues = DeviceBuffer(stateBytes, "AdamW's second moments");
  }
  if (mirrorElements() > 0)
    mirror = DeviceBuffer(mirrorElements() * dtypeSize(TESSERA_F32),
                          "the f32 mirrors of the weights");
  if (shardsGradients()) {
    // The ring the step writes, the reduced shard and the reduction's room.
    const GradientRing &ring = layout.gradientRing();
    const int64_t shardBytes = dtypeSize(gradientShardDtype());
    gradients = DeviceBuffer(ringElements() * dtypeSize(computeDtype),
                             "the ring of whole gradients");
    gradientShard = DeviceBuffer(layout.gradientShardElements() * shardBytes,
                                 "the rank's shard of the gradients");
    reducedBlock = DeviceBuffer(ring.largestBlock * shardBytes,
                                "a reduced block of gradients");
    if (stagingElements() > 0)
      reductionStaging =
          DeviceBuffer(stagingElements() * dtypeSize(TESSERA_F32),
                       "a bucket of gradients widened to f32");
  } else {
    gradients =
        DeviceBuffer(layout.totalBytes(computeDtype), "the gradients");
    if (accumulating())
      accumulators = DeviceBuffer(f32Bytes, "the gradient accumulators");
  }
  if (computeCopyElements() > 0)
    computeCopies = DeviceBuffer(
        computeCopyElements() * dtypeSize(computeDtype),
        "the compute copies of the weights");
  for (int32_t i = 0; i < program.buffer_count; ++i) {
    const tessera_tensor_info &info = program.buffers[i];
    bufferStorage.emplace_back(elementCount(info) * dtypeSize(info.dtype),
                               info.name);
    bufferTensors.push_back(
        makeTensor(bufferStorage.back().get(), info.dtype, info));
  }
  microBatchBytes =
      program.batch * program.sequence * static_cast<int64_t>(sizeof(int64_t));
  deviceTokens = DeviceBuffer(microBatchBytes, "the tokens");
  deviceTargets = DeviceBuffer(microBatchBytes, "the targets");
  hostTokens = PinnedBuffer(microBatchBytes);
  hostTargets = PinnedBuffer(microBatchBytes);

  std::vector<tessera_tensor_chunk> whole = layout.chunks(getDecays());
  useChunks(holdsShardOnly()
                ? ParameterLayout::chunksOf(layout.shard(), getDecays())
                : whole);
  for (ParameterLayout::Piece piece : layout.shard())
    if (mirrored(piece.parameter)) {
      // copyPieces writes a mirror at the piece's `offset`: its place in
      // the mirrors (packed, or ZeRO-3's shard of them).
      piece.offset = stepCopyOffset(piece.parameter, piece.offset);
      mirroredPieces.push_back(piece);
    }
  // ZeRO-3's copies are the shard's, rounded by AdamW through the shard's
  // chunks: no whole table to round them from.
  if (layout.weightsSharded())
    whole.clear();
  placeComputeCopies(whole);
  if (options.offloadOptimizer) {
    offload = std::make_unique<CudaOffloadedOptimizer>(
        layout, whole, computeDtype, computeCopies.get(),
        computeCopyElements(), optimizerGradients().dtype, streamHandle);
    checkCuda(cudaEventCreateWithFlags(&sumsReady, cudaEventDisableTiming),
              "creating the gradient norm's event");
    std::printf("%s; AdamW on %d host threads\n",
                describeOffload(offloadFootprint(
                                    layout, computeDtype, computeCopyElements(),
                                    offload->getPlan(), accumulating()))
                    .c_str(),
                offload->threads());
    std::fflush(stdout);
  }
  whole.erase(std::remove_if(whole.begin(), whole.end(),
                             [](const tessera_tensor_chunk &chunk) {
                               return chunk.copy_offset < 0;
                             }),
              whole.end());
  copyChunkCount = static_cast<int32_t>(whole.size());
  copyChunks = uploadChunkTable(whole, "the compute copies' chunk table");

  if (layout.weightsSharded()) {
    // ZeRO-3: the step reads the buckets the gatherer fills.
    const ParameterLayout::WeightShardPlacement &weights =
        layout.weightShard();
    copyRing = DeviceBuffer(weights.ringElements[0] * dtypeSize(computeDtype),
                            "the ring of gathered compute copies");
    mirrorRing = DeviceBuffer(weights.ringElements[1] * dtypeSize(TESSERA_F32),
                              "the ring of gathered f32 mirrors");
    stepTensors = stepRingTensors(copyRing.get(), mirrorRing.get());
  } else {
    stepTensors = stepParameterTensors(
        holdsShardOnly() ? mirror.get() : master.get(), computeCopies.get(),
        master.get());
  }
  if (offload)
    for (int32_t i = 0; i < program.parameter_count; ++i)
      if (!readsComputeCopy(i))
        stepTensors[static_cast<size_t>(i)] = makeTensor(
            offload->mirrorOf(i), TESSERA_F32, program.parameters[i]);
  gradientTensors = stepGradientTensors(gradients.get(), wholeGradientsShard());
  // The clearing and the table's copy ran on the legacy default stream,
  // which the non-blocking training stream does not wait for.
  checkCuda(cudaDeviceSynchronize(), "preparing the training state");
}

void CudaBackend::useChunks(std::vector<tessera_tensor_chunk> table) {
  // Not in the step loop: once at the start, and once more for ZeRO-1.
  checkCuda(cudaStreamSynchronize(streamHandle), "waiting for the GPU");
  placeComputeCopies(table);
  // ZeRO-2's gradient shard is packed as the masters are, but for the
  // buckets held whole: the kernels read a chunk's gradient at its
  // `offset`, so that becomes its place in the shard (after its
  // copy_offset was placed from the whole layout's).
  if (shardsGradients())
    for (tessera_tensor_chunk &chunk : table)
      chunk.offset = layout.gradientShardOffset(chunk.offset);
  chunkCount = static_cast<int32_t>(table.size());
  chunkTensors.clear();
  for (const tessera_tensor_chunk &chunk : table)
    chunkTensors.push_back(chunk.tensor);
  chunks = uploadChunkTable(table, "the parameter chunk table");
  const int64_t sumBytes = chunkCount * static_cast<int64_t>(sizeof(double));
  partialSums = DeviceBuffer(sumBytes, "the gradient's sums of squares");
  hostPartialSums = PinnedBuffer(sumBytes);
  nonFiniteFlag = DeviceBuffer(sizeof(int32_t), "AdamW's non-finite flag");
  hostNonFiniteFlag = PinnedBuffer(sizeof(int32_t));
  // The clearing and the table's copy ran on the legacy default stream.
  checkCuda(cudaDeviceSynchronize(), "preparing the parameter chunks");
}

void CudaBackend::copyPieces(const std::vector<ParameterLayout::Piece> &pieces,
                             float *whole, float *compact, bool toCompact) {
  for (const ParameterLayout::Piece &piece : pieces) {
    float *atWhole = whole + piece.offset;
    float *atCompact = compact + piece.stateOffset;
    checkCuda(cudaMemcpyAsync(toCompact ? atCompact : atWhole,
                              toCompact ? atWhole : atCompact,
                              static_cast<size_t>(piece.count) * sizeof(float),
                              cudaMemcpyDeviceToDevice, streamHandle),
              "copying a shard of the training state");
  }
}

void CudaBackend::gatherState(
    const std::function<void(const FlatBuffer &)> &gather, bool keep) {
  if (!holdsShardOnly())
    fail("internal error: gathering the state of a backend that holds it "
         "whole");
  gathered.clear();
  // One transient whole buffer on the device at a time; rank 0 keeps the
  // gathered kinds on the host, where the checkpoint is written from.
  DeviceBuffer whole(layout.totalBytes(TESSERA_F32),
                     "gathering the training state");
  checkCuda(cudaDeviceSynchronize(), "clearing device memory");
  const FlatBuffer wholeBuffer{whole.get(), TESSERA_F32,
                               layout.totalElements()};
  for (DeviceBuffer *kind : {&master, &firstMomentValues,
                             &secondMomentValues}) {
    checkCuda(cudaMemsetAsync(whole.get(), 0,
                              static_cast<size_t>(
                                  layout.totalBytes(TESSERA_F32)),
                              streamHandle),
              "clearing device memory");
    copyPieces(layout.shard(), static_cast<float *>(whole.get()),
               static_cast<float *>(kind->get()), /*toCompact=*/false);
    gather(wholeBuffer);
    if (!keep)
      continue;
    std::vector<unsigned char> bytes = download(wholeBuffer);
    gathered.emplace_back(static_cast<size_t>(layout.totalElements()));
    std::memcpy(gathered.back().data(), bytes.data(), bytes.size());
  }
  checkCuda(cudaStreamSynchronize(streamHandle),
            "gathering the training state");
}

void CudaBackend::loadState(const TrainingState &state) {
  // The masters and moments go where this backend keeps them; a sharded
  // state's transient whole buffer lives until the wait below.
  DeviceBuffer staging;
  if (offload) {
    flattenF32(layout, state.parameters, offload->masters());
    // The moments are fresh zero pages (HostBuffer): a fresh start's empty
    // moments leave them unbacked until the first step writes them.
    flattenF32(layout, state.firstMoments, offload->firstMoments(),
               /*flatIsZero=*/true);
    flattenF32(layout, state.secondMoments, offload->secondMoments(),
               /*flatIsZero=*/true);
  } else if (holdsShardOnly()) {
    staging = loadShardedState(state);
  } else {
    loadWholeState(state);
  }
  for (size_t i = 0; i < bufferStorage.size(); ++i)
    checkCuda(cudaMemcpy(bufferStorage[i].get(), state.buffers[i].data(),
                         state.buffers[i].size(), cudaMemcpyHostToDevice),
              "uploading the buffers");
  // One wait for every copy: one from pageable memory may still be in
  // flight when it returns, and the shard's pieces are on the stream.
  checkCuda(cudaDeviceSynchronize(), "uploading the training state");
  // A sharded state wrote what the step reads from the whole parameters.
  if (holdsShardOnly())
    return;
  refreshComputeCopies();
  checkCuda(cudaStreamSynchronize(streamHandle), "rounding the compute copies");
}

void CudaBackend::loadWholeState(const TrainingState &state) {
  uploadFlat(layout, state.parameters, static_cast<float *>(master.get()));
  uploadFlat(layout, state.firstMoments,
             static_cast<float *>(firstMomentValues.get()));
  uploadFlat(layout, state.secondMoments,
             static_cast<float *>(secondMomentValues.get()));
}

DeviceBuffer CudaBackend::loadShardedState(const TrainingState &state) {
  // Each kind whole through one transient device buffer: the shard's
  // pieces into the compact state, the parameters also into what the step
  // reads (rounded into the copies, whole into the mirrors).
  DeviceBuffer whole(layout.totalBytes(TESSERA_F32),
                     "loading the training state");
  const std::vector<std::vector<float>> *sources[] = {
      &state.parameters, &state.firstMoments, &state.secondMoments};
  DeviceBuffer *targets[] = {&master, &firstMomentValues, &secondMomentValues};
  for (int k = 0; k < 3; ++k) {
    // The previous kind's pieces are read from `whole` on the stream.
    checkCuda(cudaStreamSynchronize(streamHandle), "waiting for the GPU");
    uploadFlat(layout, *sources[k], static_cast<float *>(whole.get()));
    copyPieces(layout.shard(), static_cast<float *>(whole.get()),
               static_cast<float *>(targets[k]->get()), /*toCompact=*/true);
    if (k != 0)
      continue;
    if (layout.weightsSharded()) {
      // ZeRO-3: the shard's copies and mirrors, from its masters (the
      // chunks read them at their state offsets), as AdamW writes them.
      copyPieces(mirroredPieces, static_cast<float *>(mirror.get()),
                 static_cast<float *>(master.get()), /*toCompact=*/false);
      // An fp32 program has no copies: every weight is read as its master.
      // (Not copyChunkCount: ZeRO-3 has no whole table of copies, its
      // copies are the shard's, rounded here through the shard's chunks.)
      if (computeCopyElements() > 0)
        checkKernel(tessera_cuda_round_chunk_copies(
                        static_cast<const float *>(master.get()),
                        computeCopies.get(), computeDtype,
                        static_cast<const tessera_tensor_chunk *>(chunks.get()),
                        chunkCount, streamHandle),
                    "rounding the compute copies");
      continue;
    }
    if (packsMirrors()) {
      // Each parameter read as f32 at its packed place.
      for (int32_t i = 0; i < program.parameter_count; ++i)
        if (mirrored(i))
          checkCuda(cudaMemcpyAsync(
                        static_cast<float *>(mirror.get()) +
                            stepCopyOffset(i, layout.offset(i)),
                        static_cast<const float *>(whole.get()) +
                            layout.offset(i),
                        static_cast<size_t>(layout.count(i)) * sizeof(float),
                        cudaMemcpyDeviceToDevice, streamHandle),
                    "uploading the weights read as f32");
    }
    if (copyChunkCount > 0)
      checkKernel(tessera_cuda_round_chunk_copies(
                      static_cast<const float *>(whole.get()),
                      computeCopies.get(), computeDtype,
                      static_cast<const tessera_tensor_chunk *>(
                          copyChunks.get()),
                      copyChunkCount, streamHandle),
                  "rounding the compute copies");
  }
  return whole;
}

std::vector<unsigned char> CudaBackend::download(const FlatBuffer &buffer) {
  std::vector<unsigned char> bytes(
      static_cast<size_t>(buffer.elements * dtypeSize(buffer.dtype)));
  checkCuda(cudaStreamSynchronize(streamHandle), "waiting for the GPU");
  checkCuda(cudaMemcpy(bytes.data(), buffer.data, bytes.size(),
                       cudaMemcpyDeviceToHost),
            "downloading the training state");
  return bytes;
}

void CudaBackend::storeState(TrainingState &state) {
  std::vector<std::vector<float>> *targets[] = {
      &state.parameters, &state.firstMoments, &state.secondMoments};
  if (offload) {
    // applyAdamW updated them before it returned.
    const float *hostState[] = {offload->masters(), offload->firstMoments(),
                                offload->secondMoments()};
    for (int k = 0; k < 3; ++k)
      *targets[k] = unflattenToF32(program, layout, hostState[k], TESSERA_F32);
  } else if (holdsShardOnly()) {
    if (gathered.size() != 3)
      fail("internal error: storing a sharded state that was not gathered");
    for (int k = 0; k < 3; ++k)
      *targets[k] = unflattenToF32(program, layout,
                                   gathered[static_cast<size_t>(k)].data(),
                                   TESSERA_F32);
    gathered.clear();
  } else {
    FlatBuffer kinds[] = {masterWeights(), firstMoments(), secondMoments()};
    for (int k = 0; k < 3; ++k)
      *targets[k] = unflattenToF32(program, layout, download(kinds[k]).data(),
                                   TESSERA_F32);
  }
  for (size_t i = 0; i < bufferStorage.size(); ++i)
    checkCuda(cudaMemcpy(state.buffers[i].data(), bufferStorage[i].get(),
                         state.buffers[i].size(), cudaMemcpyDeviceToHost),
              "downloading the buffers");
}

double CudaBackend::runMicroBatch(int64_t micro, float lossScale,
                                  uint64_t seed) {
  // The pinned batch may be refilled as soon as this call returns:
  // forward_backward waits for its stream, and with it for these copies.
  checkCuda(cudaMemcpyAsync(deviceTokens.get(), hostTokens.get(),
                            static_cast<size_t>(microBatchBytes),
                            cudaMemcpyHostToDevice, streamHandle),
            "uploading the tokens");
  checkCuda(cudaMemcpyAsync(deviceTargets.get(), hostTargets.get(),
                            static_cast<size_t>(microBatchBytes),
                            cudaMemcpyHostToDevice, streamHandle),
            "uploading the targets");
  tessera_tensor_info info = microBatchInfo(program);
  tessera_tensor tokenTensor = makeTensor(deviceTokens.get(), TESSERA_I64, info);
  tessera_tensor targetTensor =
      makeTensor(deviceTargets.get(), TESSERA_I64, info);
  // ZeRO-2's reducer folds each bucket into the shard as the step
  // announces it (foldBlock).
  firstMicroBatch = micro == 0;
  // A step that hands gradients to a reducer or talks to peers while it
  // runs has host work between its kernels: that one runs eagerly.
  bool recordable = context.gradient_ready == nullptr &&
                    context.weights_needed == nullptr &&
                    context.mesh_axis_count == 0;
  double loss =
      recordable
          ? stepGraph->run(lossScale,
                           [&](float *lossOut) {
                             return program.forward_backward(
                                 &context, stepTensors.data(),
                                 bufferTensors.data(), &tokenTensor,
                                 &targetTensor, lossScale, seed, lossOut,
                                 gradientTensors.data());
                           })
          : callProgram(stepTensors.data(), bufferTensors.data(),
                        &tokenTensor, &targetTensor, lossScale, seed,
                        gradientTensors.data());
  if (accumulating() && !shardsGradients())
    checkKernel(tessera_cuda_accumulate_gradients(
                    static_cast<float *>(accumulators.get()), gradients.get(),
                    computeDtype, layout.totalElements(), micro == 0,
                    streamHandle),
                "accumulating gradients");
  // ZeRO-2 summing micro-batches: the gradients in no bucket, written whole
  // into the ring, are added into the shard as accumulators would be.
  if (accumulating() && shardsGradients()) {
    auto *sums = static_cast<float *>(gradientShard.get());
    auto *ring = static_cast<unsigned char *>(gradients.get());
    for (const GradientRing::WholeGradient &whole :
         layout.gradientRing().wholeGradients)
      checkKernel(tessera_cuda_accumulate_gradients(
                      sums + whole.shardOffset,
                      ring + whole.ringOffset * dtypeSize(computeDtype),
                      computeDtype, whole.count, micro == 0, streamHandle),
                  "adding whole gradients into the shard");
  }
  return loss;
}

tessera_tensor CudaBackend::bucketForReduction(int32_t bucket, void *stream) {
  if (tessera_tensor held = heldPlace(bucket); held.data)
    return held;
  tessera_tensor slot = ringPlace(bucket);
  if (stagingElements() == 0)
    return slot;
  // Summed over micro-batches in f32: reduced in f32 too (the
  // accumulation kernel's first pass is a cast).
  checkKernel(tessera_cuda_accumulate_gradients(
                  static_cast<float *>(reductionStaging.get()), slot.data,
                  computeDtype, slot.shape[0], 1,
                  static_cast<cudaStream_t>(stream)),
              "widening a bucket of gradients to f32");
  return flatView(reductionStaging.get(), TESSERA_F32, 0, slot.shape[0]);
}

void CudaBackend::foldBlock(int32_t bucket, const tessera_tensor &reduced,
                            void *stream) {
  const int32_t dtype = gradientShardDtype();
  const int64_t bytes = dtypeSize(dtype);
  auto *block = static_cast<unsigned char *>(reduced.data);
  auto *shard = static_cast<unsigned char *>(gradientShard.get());
  auto *commStream = static_cast<cudaStream_t>(stream);
  for (const GradientRing::BlockPiece &piece :
       layout.gradientRing().buckets[static_cast<size_t>(bucket)].pieces) {
    if (!accumulating()) {
      checkCuda(cudaMemcpyAsync(shard + piece.shardOffset * bytes,
                                block + piece.blockOffset * bytes,
                                static_cast<size_t>(piece.count * bytes),
                                cudaMemcpyDeviceToDevice, commStream),
                "folding reduced gradients into the shard");
      continue;
    }
    checkKernel(tessera_cuda_accumulate_gradients(
                    reinterpret_cast<float *>(shard) + piece.shardOffset,
                    block + piece.blockOffset * bytes, TESSERA_F32,
                    piece.count, firstMicroBatch ? 1 : 0, commStream),
                "adding reduced gradients into the shard");
  }
}

void CudaBackend::storeMicroBatch(int64_t slot) {
  if (slot < 0 || slot >= microBatchSlots)
    fail("internal error: micro-batch slot " + std::to_string(slot) +
         " was not reserved");
  auto at = [&](const DeviceBuffer &buffer) {
    return static_cast<unsigned char *>(buffer.get()) + slot * microBatchBytes;
  };
  checkCuda(cudaMemcpyAsync(at(slotTokens), hostTokens.get(),
                            static_cast<size_t>(microBatchBytes),
                            cudaMemcpyHostToDevice, streamHandle),
            "uploading the tokens");
  checkCuda(cudaMemcpyAsync(at(slotTargets), hostTargets.get(),
                            static_cast<size_t>(microBatchBytes),
                            cudaMemcpyHostToDevice, streamHandle),
            "uploading the targets");
  // The data loader refills the pinned batch next.
  checkCuda(cudaStreamSynchronize(streamHandle), "uploading the micro-batch");
}

void CudaBackend::runStage(const tessera_stage_function &function,
                           int64_t slot, const tessera_tensor *inputs,
                           tessera_tensor *outputs, float lossScale,
                           uint64_t seed) {
  tessera_tensor_info info = microBatchInfo(program);
  auto at = [&](const DeviceBuffer &buffer) {
    return static_cast<unsigned char *>(buffer.get()) + slot * microBatchBytes;
  };
  tessera_tensor tokenTensor = makeTensor(at(slotTokens), TESSERA_I64, info);
  tessera_tensor targetTensor = makeTensor(at(slotTargets), TESSERA_I64, info);
  if (stagedLosses == stageLossCapacity)
    foldStagedLosses();
  // Deferred (a stage's call sits between the pipeline's sends and
  // receives): the host goes on to the next sends and calls while this one
  // runs; finishStages waits once a step. Replayed as a graph per key: all
  // the call passes to its kernels.
  float *lossStaging = static_cast<float *>(stageLosses.get()) + stagedLosses;
  // Not the seed: a call drawing dropout seeds is never replayed.
  std::vector<uintptr_t> key = {reinterpret_cast<uintptr_t>(&function),
                                reinterpret_cast<uintptr_t>(lossStaging),
                                static_cast<uintptr_t>(slot)};
  uint32_t scaleBits = 0;
  std::memcpy(&scaleBits, &lossScale, sizeof(scaleBits));
  key.push_back(scaleBits);
  for (int32_t i = 0; i < function.input_count; ++i)
    key.push_back(reinterpret_cast<uintptr_t>(inputs[i].data));
  for (int32_t i = 0; i < function.output_count; ++i)
    key.push_back(reinterpret_cast<uintptr_t>(outputs[i].data));
  tessera_step_context *callContext = &stepContext();
  stageGraphs->run(key, lossStaging, [&](float *loss) {
    return function.call(callContext, stepTensors.data(),
                         bufferTensors.data(), &tokenTensor, &targetTensor,
                         inputs, lossScale, seed, loss, gradientTensors.data(),
                         outputs);
  });
  if (function.returns_loss)
    ++stagedLosses;
}

void CudaBackend::foldStagedLosses() {
  checkKernel(tessera_cuda_check_device_errors(streamHandle),
              "the step's stage calls");
  const auto *losses = static_cast<const float *>(stageLosses.get());
  for (int64_t i = 0; i < stagedLosses; ++i)
    foldedStageLoss += losses[i];
  stagedLosses = 0;
}

double CudaBackend::finishStages() {
  foldStagedLosses();
  stageGraphs->finishStep();
  double sum = foldedStageLoss;
  foldedStageLoss = 0;
  return sum;
}

void CudaBackend::accumulateGradients(int32_t begin, int32_t end,
                                      bool first) {
  if (!accumulating() || begin >= end)
    return;
  const int64_t offset = layout.offset(begin);
  const int64_t elements = layout.spanElements(begin, end);
  checkKernel(tessera_cuda_accumulate_gradients(
                  static_cast<float *>(accumulators.get()) + offset,
                  static_cast<unsigned char *>(gradients.get()) +
                      offset * dtypeSize(computeDtype),
                  computeDtype, elements, first ? 1 : 0,
                  streamHandle),
              "accumulating gradients");
}

void CudaBackend::sumsOfSquares(const std::vector<bool> *counted,
                                std::vector<double> &sums) {
  FlatBuffer source = optimizerGradients();
  checkKernel(tessera_cuda_chunk_sum_squares(
                  source.data, source.dtype,
                  static_cast<const tessera_tensor_chunk *>(chunks.get()),
                  chunkCount, static_cast<double *>(partialSums.get()),
                  streamHandle),
              "gradient norm");
  const size_t bytes = static_cast<size_t>(chunkCount) * sizeof(double);
  if (bytes)
    checkCuda(cudaMemcpyAsync(hostPartialSums.get(), partialSums.get(), bytes,
                              cudaMemcpyDeviceToHost, streamHandle),
              "reading the gradient norm");
  if (offload) {
    // The gradients start for the host while it reads the sums and
    // decides the step.
    checkCuda(cudaEventRecord(sumsReady, streamHandle),
              "marking the gradient norm");
    offload->startGradientDownload(source.data);
    checkCuda(cudaEventSynchronize(sumsReady), "computing the gradient norm");
  } else {
    checkCuda(cudaStreamSynchronize(streamHandle),
              "computing the gradient norm");
  }
  // Each parameter's chunks in order (the host backend adds its one sum the
  // same way; TrainingBackend::computeSumsOfSquares adds over parameters).
  const auto *partial = static_cast<const double *>(hostPartialSums.get());
  for (int32_t c = 0; c < chunkCount; ++c) {
    const auto tensor =
        static_cast<size_t>(chunkTensors[static_cast<size_t>(c)]);
    if (!counted || (*counted)[tensor])
      sums[tensor] += partial[c];
  }
}

void CudaBackend::applyAdamW(const AdamWUpdate &update) {
  FlatBuffer source = optimizerGradients();
  if (offload) {
    offload->update(update, source.data);
    updated = true;
    return;
  }
  checkKernel(tessera_cuda_multi_tensor_adamw(
                  static_cast<float *>(master.get()), source.data, source.dtype,
                  static_cast<float *>(firstMomentValues.get()),
                  static_cast<float *>(secondMomentValues.get()),
                  computeCopies.get(), computeDtype,
                  static_cast<const tessera_tensor_chunk *>(chunks.get()),
                  chunkCount, update.step, update.learningRate, update.beta1,
                  update.beta2, update.epsilon, update.weightDecay,
                  update.gradientScale,
                  static_cast<int32_t *>(nonFiniteFlag.get()), streamHandle),
              "AdamW");
  checkCuda(cudaMemcpyAsync(hostNonFiniteFlag.get(), nonFiniteFlag.get(),
                            sizeof(int32_t), cudaMemcpyDeviceToHost,
                            streamHandle),
            "reading AdamW's non-finite flag");
  // The kernel rounded the shard's copies; the f32 mirrors are the
  // updated masters themselves.
  copyPieces(mirroredPieces, static_cast<float *>(mirror.get()),
             static_cast<float *>(master.get()), /*toCompact=*/false);
  updated = true;
}

void CudaBackend::refreshComputeCopies() {
  if (holdsShardOnly())
    fail("internal error: a sharded state's compute copies are gathered, "
         "not rounded from masters this rank does not hold");
  if (offload)
    return offload->uploadWeights();
  if (copyChunkCount == 0)
    return;
  checkKernel(tessera_cuda_round_chunk_copies(
                  static_cast<const float *>(master.get()), computeCopies.get(),
                  computeDtype,
                  static_cast<const tessera_tensor_chunk *>(copyChunks.get()),
                  copyChunkCount, streamHandle),
              "rounding the compute copies");
}

int32_t CudaBackend::nonFiniteParameter() {
  if (!updated)
    return -1;
  updated = false;
  if (offload)
    return offload->nonFiniteParameter();
  const int32_t flag = *static_cast<const int32_t *>(hostNonFiniteFlag.get());
  if (flag <= 0 || flag > chunkCount)
    return -1;
  return chunkTensors[static_cast<size_t>(chunkCount - flag)];
}

std::vector<std::vector<float>> CudaBackend::copyOptimizerGradients() {
  FlatBuffer source = optimizerGradients();
  return unflattenToF32(program, layout, download(source).data(),
                        source.dtype);
}

} // namespace

std::unique_ptr<TrainingBackend>
makeCudaBackend(const tessera_program &program, const TrainOptions &options,
                const ParameterLayout *layout) {
  if (program.device != TESSERA_DEVICE_CUDA)
    fail("tessera_cuda_train_main runs CUDA programs; this one's tensors are "
         "in host memory (device kind " +
         std::to_string(program.device) + ")");
  return std::make_unique<CudaBackend>(program, options, layout);
}

} // namespace tessera::train
