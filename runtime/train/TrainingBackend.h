//===- TrainingBackend.h - Where a run's tensors live and AdamW runs -*- C++ -*-===//
//
// The driver's loop (TrainMain.cpp) is written once; what depends on the
// memory the program's tensors live in (program.h's `device`) is behind this
// interface, with one implementation per device: HostBackend (host memory,
// the CPU kernels) and CudaBackend (device memory, the CUDA kernels; in
// libtessera_runtime_train_cuda.a so that CPU executables never link CUDA).
//
// A backend allocates everything a step needs ONCE, when it is made: the
// fp32 master weights, AdamW's moments, the compute-precision gradients the
// program writes, fp32 accumulators when micro-batches are accumulated, the
// buffers, the micro-batch's tokens and targets. Nothing is allocated in the
// step loop (the program allocates its own arena on its first call).
//
// The per-parameter tensors are flat buffers laid out by ParameterLayout
// (one contiguous buffer per kind, 256-byte aligned slices in parameter
// order, the same element offsets for every kind). They are exposed below
// for the data-parallel layer: it reduces (or reduce-scatters, ZeRO-1)
// ranges of computeGradients() on stream(), hooking
// stepContext().gradient_ready to start while the backward pass runs, and
// shards ranges of masterWeights() and the moments.
//
// Arithmetic is the same on both devices, so a CUDA run matches a CPU run
// to rounding: gradients of K micro-batches are summed in fp32 (the first
// micro-batch's cast, then each later one's added), the norm is the sum of
// per-parameter sums of squares in f64, and AdamW is tessera_cpu_adamw's
// arithmetic with grad_scale = clip / (K * loss scale).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRAININGBACKEND_H
#define TESSERA_RUNTIME_TRAIN_TRAININGBACKEND_H

#include "Flags.h"
#include "ParameterLayout.h"
#include "TrainingState.h"

#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/weight_gatherer.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::train {

/// One flat buffer of per-parameter slices (ParameterLayout), in the
/// backend's memory (host or device).
struct FlatBuffer {
  void *data = nullptr;
  int32_t dtype = TESSERA_F32;
  /// ParameterLayout::totalElements(): the slices and the zero gaps.
  int64_t elements = 0;
  /// A sharded state's buffer of what the step reads
  /// (TrainingBackend::shardedStepBuffers): where each gradient bucket it
  /// holds is in it, which the shards' all-gather fills.
  std::vector<comm::BucketPlace> places;
};

/// Bytes of the training state a backend holds for the whole run, per kind
/// (what each data-parallel rank prints at start: ZeRO-1 shrinks masters
/// and moments to the rank's shard).
struct ResidentState {
  /// The fp32 master weights (whole, or the shard).
  int64_t masters = 0;
  /// AdamW's two moments together.
  int64_t moments = 0;
  /// What the step reads instead of the masters: the compute copies, and
  /// under a sharded state the f32 mirrors of parameters read as f32.
  int64_t stepCopies = 0;
  /// The compute-precision gradients.
  int64_t gradients = 0;
  /// The f32 accumulators (several micro-batches a step).
  int64_t accumulators = 0;
  /// ZeRO-2's transient room for whole gradients: the ring the step writes
  /// (gradient_ring.h), a bucket widened to f32 (16-bit gradients summed
  /// over micro-batches) and one reduced block. `gradients` is then the
  /// rank's shard of the reduced gradients.
  int64_t gradientRing = 0;
  /// ZeRO-3's transient room for whole weights: the rings the step reads
  /// its gathered copies and mirrors from (weight_ring.h). `stepCopies` is
  /// then the rank's shard of them.
  int64_t weightRing = 0;
  int64_t total() const {
    return masters + moments + stepCopies + gradients + accumulators +
           gradientRing + weightRing;
  }
};

/// One line: "resident training state: N bytes (masters N, moments N,
/// copies/mirrors N, gradients N, accumulators N, gradient ring N, weight
/// ring N)".
std::string describeResidentState(const ResidentState &resident);

/// The arguments of one AdamW update of every parameter.
struct AdamWUpdate {
  /// AdamW updates applied so far, this one included (bias correction).
  int64_t step = 1;
  double learningRate = 0;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  /// Applied to the parameters whose decay flag is set (--no-decay).
  double weightDecay = 0;
  /// Multiplies every gradient: clip / (K * loss scale).
  double gradientScale = 1;
};

class TrainingBackend {
public:
  virtual ~TrainingBackend() = default;

  virtual tessera_device_kind device() const = 0;
  const ParameterLayout &getLayout() const { return layout; }

  /// The flat buffers. masterWeights: f32, like the moments laid out by
  /// the layout's stateElements() (a ZeRO-1 shard is compact: its pieces'
  /// stateOffset). computeGradients: the compute
  /// precision, written by forward_backward (scaled by the loss scale).
  /// optimizerGradients: what the norm and AdamW read, the f32 sums over
  /// the step's micro-batches when there are several, else
  /// computeGradients itself (a bf16/fp16 gradient widens exactly to f32,
  /// so a copy would change nothing).
  virtual FlatBuffer masterWeights() = 0;
  virtual FlatBuffer computeGradients() = 0;
  virtual FlatBuffer optimizerGradients() = 0;
  /// AdamW's moments, f32 (ZeRO-1 gathers their shards for a checkpoint).
  virtual FlatBuffer firstMoments() = 0;
  virtual FlatBuffer secondMoments() = 0;
  /// The cudaStream_t every step's work is enqueued on (nullptr: host).
  virtual void *stream() = 0;
  /// What forward_backward is called with: the stream, and the hook of a
  /// data-parallel driver (gradient_ready, mesh comms; left empty here).
  tessera_step_context &stepContext() { return context; }

  /// Copies the parameters, moments and buffers of `state` into the
  /// backend (start, --resume); the reverse (checkpoints, --dump-params).
  virtual void loadState(const TrainingState &state) = 0;
  virtual void storeState(TrainingState &state) = 0;

  /// Host memory the data loader writes the next micro-batch into ([batch,
  /// sequence] each; pinned on the GPU, so the upload is asynchronous).
  virtual int64_t *tokens() = 0;
  virtual int64_t *targets() = 0;

  /// Runs forward_backward on the micro-batch in tokens()/targets() (micro
  /// = 0 .. K-1 within the step) and accumulates its gradients. Returns the
  /// loss; throws TrainError with the program's message when it fails.
  virtual double runMicroBatch(int64_t micro, float lossScale,
                               uint64_t seed) = 0;

  /// What a pipelined program's driver (PipelineParallel.h) needs besides:
  /// memory for its messages and saved activations, every micro-batch of
  /// the step at once (a stage's forward and backward of micro-batch k run
  /// far apart), the stage calls, and accumulation per parameter (a chunk
  /// completes only its own parameters' gradients). All allocation is
  /// before the first step.
  ///
  /// `bytes` of zeroed memory where the program's tensors live (device
  /// memory for CUDA), held until the backend is destroyed.
  virtual void *allocate(int64_t bytes, const char *what) = 0;
  /// Makes room for `count` micro-batches of tokens and targets.
  virtual void reserveMicroBatches(int64_t count) = 0;
  /// Copies tokens()/targets() into micro-batch slot `slot` (< the count
  /// reserved); tokens() may be refilled when it returns.
  virtual void storeMicroBatch(int64_t slot) = 0;
  /// Calls `function` (a chunk's forward or backward) on the micro-batch
  /// in slot `slot` with the backend's parameters, buffers and gradients
  /// and the given inputs and outputs (in the backend's memory). The GPU
  /// only enqueues it on stream(), so a step's calls and sends run without
  /// a host wait between them; the host runs it before returning. Throws
  /// TrainError with the program's message for what the call finds wrong
  /// before it runs.
  virtual void runStage(const tessera_stage_function &function, int64_t slot,
                        const tessera_tensor *inputs, tessera_tensor *outputs,
                        float lossScale, uint64_t seed) = 0;
  /// Waits for the stage calls since the last finishStages and returns the
  /// sum of the losses they wrote (those of functions that returns_loss);
  /// throws TrainError with the message of an error a kernel found.
  virtual double finishStages() = 0;
  /// Adds the gradients of parameters [begin, end) (computeGradients, just
  /// written) into their f32 accumulators, one contiguous range of the flat
  /// buffers (their slices and the zero gaps between them); `first`: the
  /// step's first contribution, which replaces the accumulators instead.
  /// Nothing to do when the step has one micro-batch (the optimizer reads
  /// computeGradients then).
  virtual void accumulateGradients(int32_t begin, int32_t end, bool first) = 0;
  /// Adds `part` (f32, in the backend's memory, parameter `parameter`'s
  /// element count) into its f32 accumulator: another device's part of a
  /// gradient (a pipelined tied embedding's). Needs the accumulators.
  virtual void addToAccumulator(int32_t parameter, const float *part) = 0;

  /// The sum over parameters of the sum of squares of optimizerGradients
  /// (one small readback on the GPU). Not finite when a gradient is not.
  double gradientSumOfSquares() { return computeSumsOfSquares(nullptr); }
  /// The same over the parameters whose flag in `counted` is set: a mesh
  /// rank counts only the blocks it holds the first replica of
  /// (MeshLayout::countedInNorm), so that the world's sum counts each once.
  double gradientSumOfSquares(const std::vector<bool> &counted) {
    return computeSumsOfSquares(&counted);
  }
  /// Per parameter (program order), the sums of squares the last
  /// gradientSumOfSquares added (of the pieces restrictOptimizer named; 0
  /// for a parameter it did not count): what --grad-norms-every reports,
  /// with no second pass over the gradients.
  const std::vector<double> &lastParameterSumsOfSquares() const {
    return lastSums;
  }
  /// Updates master weights and moments in place, and the compute copies
  /// of the parameters it updates (readsComputeCopy).
  virtual void applyAdamW(const AdamWUpdate &update) = 0;
  /// Rewrites every compute copy from its master: after the masters changed
  /// other than by applyAdamW over every element (ZeRO-1's all-gather of
  /// the other ranks' shards). loadState makes the copies itself.
  virtual void refreshComputeCopies() = 0;
  /// Whether forward_backward reads parameter `index` as the compute copy
  /// the backend keeps (program.h's parameter_step_dtypes), not the master.
  bool readsComputeCopy(int32_t index) const {
    return copyOffsets[static_cast<size_t>(index)] >= 0;
  }
  /// After finishStep: the first parameter whose master weights or moments
  /// the last applyAdamW left non-finite (an update too large for f32: a
  /// huge --lr), or -1 when all are finite or no update ran since the last
  /// call. The GPU's AdamW raises a flag as it writes (no second pass).
  virtual int32_t nonFiniteParameter() = 0;
  /// Whether the masters and moments are this rank's shard only
  /// (getLayout().sharded()): the step then reads whole buffers of its
  /// own (shardedStepBuffers), which applyAdamW rewrites for the shard and
  /// the data-parallel layer all-gathers; never the masters.
  bool holdsShardOnly() const { return layout.sharded(); }
  /// Under a sharded state (ZeRO-3 aside), the buffers the step reads (the
  /// compute copies, the f32 mirrors), each holding the gradient buckets
  /// of the parameters it serves (FlatBuffer::places) so that the shards'
  /// all-gather completes them; empty otherwise.
  virtual std::vector<FlatBuffer> shardedStepBuffers() { return {}; }
  /// Under a sharded state, the whole masters and moments for the next
  /// storeState: each kind is written into a transient whole f32 buffer at
  /// its shard's places (zeros elsewhere) and `gather` all-gathers the
  /// shards of it in place. Every rank calls it (collective); `keep`: this
  /// rank stores the state next (rank 0's checkpoint), the others drop it.
  virtual void
  gatherState(const std::function<void(const FlatBuffer &)> &gather,
              bool keep) = 0;
  /// What this backend holds for the run, per kind.
  virtual ResidentState residentState() = 0;
  /// ZeRO-2 (getLayout().gradientsSharded()): what folds the reduced
  /// blocks of the ring's buckets into the gradient shard; nullptr
  /// otherwise.
  virtual comm::ShardedGradientSink *gradientShardSink() { return nullptr; }
  /// ZeRO-3 (getLayout().weightsSharded()): per kind of weights the step
  /// reads (compute copies, f32 mirrors), the rank's shard and the ring it
  /// is gathered into; empty buffers otherwise.
  virtual std::array<comm::WeightGatherer::KindBuffers,
                     comm::WeightRing::kKinds>
  weightShardBuffers() {
    return {};
  }
  /// The compute precision's dtype (f32, bf16, f16).
  int32_t computePrecision() const { return computeDtype; }
  /// From now on gradientSumOfSquares and applyAdamW cover only these
  /// pieces of the slices (ZeRO-1: this rank's shard), not every element.
  virtual void
  restrictOptimizer(const std::vector<ParameterLayout::Piece> &pieces) = 0;
  /// Waits until the step's work is done (the step's time is honest).
  virtual void finishStep() = 0;
  /// Where flat element `flatOffset` of parameter `parameter` is in the
  /// buffer AdamW rounds it into: the compute copies (readsComputeCopy) or
  /// the f32 mirrors of a sharded state, or ZeRO-3's shard of either.
  int64_t stepCopyOffset(int32_t parameter, int64_t flatOffset) const;

  /// optimizerGradients in f32 per parameter, on the host (--dump-grads).
  virtual std::vector<std::vector<float>> copyOptimizerGradients() = 0;
  /// The most memory the run has held so far on its device, in bytes: on
  /// the GPU what this process allocated there (state, the program's arena,
  /// kernel scratch, cuBLASLt workspaces; the CUDA context excluded), on
  /// the host the process's peak resident set.
  virtual int64_t peakMemoryBytes() = 0;

protected:
  /// `plannedLayout`: the flat buffers' placement (ZeRO-1 plans its own);
  /// nullptr: ParameterLayout(program).
  TrainingBackend(const tessera_program &program, const TrainOptions &options,
                  const ParameterLayout *plannedLayout);

  /// Adds each parameter's sum of squares into `sums` (sized to the
  /// parameters, zeroed), every parameter (`counted` nullptr) or the
  /// flagged ones.
  virtual void sumsOfSquares(const std::vector<bool> *counted,
                             std::vector<double> &sums) = 0;
  /// Program-order descriptors of the slices of a flat buffer at `base`.
  std::vector<tessera_tensor> sliceTensors(void *base, int32_t dtype) const;
  /// What forward_backward writes per parameter: its slice of the flat
  /// gradients at `base`, or under ZeRO-2 its place in the ring at `base`,
  /// a gradient in no bucket at its place in the gradient shard at `shard`
  /// instead (nullptr: in the ring too, GradientRingPlacement's
  /// WholeGradient).
  std::vector<tessera_tensor> stepGradientTensors(void *base,
                                                  void *shard = nullptr) const;
  /// What forward_backward reads per parameter: its slice of the masters at
  /// `masters` (f32; the mirrors under a sharded state, where a packed
  /// replicated parameter reads its master in the shard's at
  /// `shardMasters`), or of the compute copies at `copies`.
  std::vector<tessera_tensor>
  stepParameterTensors(void *masters, void *copies,
                       void *shardMasters = nullptr) const;
  /// ZeRO-3: what forward_backward reads per parameter, its place in the
  /// ring of its kind (`copyRing` of the compute dtype, `mirrorRing` f32).
  std::vector<tessera_tensor> stepRingTensors(void *copyRing,
                                              void *mirrorRing) const;
  /// Elements of the compute copies' flat buffer: the copied parameters
  /// only, each slice starting at a multiple of
  /// ParameterLayout::kSliceAlignment (0: the step reads every master);
  /// under a sharded state the gradient buckets of the copied parameters,
  /// packed (copyPlaces), then the copied parameters in no bucket.
  int64_t computeCopyElements() const { return copyElements; }
  /// Under a sharded state, elements of the f32 mirrors' flat buffer: the
  /// gradient buckets of the parameters it reads as f32, packed
  /// (mirrorPlaces); 0 when every parameter is read as a copy or the state
  /// is whole.
  int64_t mirrorElements() const { return mirrors; }
  /// Whether the f32 mirrors are placed by buckets: a sharded state, ZeRO-3
  /// aside.
  bool packsMirrors() const { return !mirrorOffsets.empty(); }
  /// Under a sharded state, where the buckets of the compute copies and of
  /// the f32 mirrors are in their buffers.
  const std::vector<comm::BucketPlace> &copyBucketPlaces() const {
    return copyPlaces;
  }
  const std::vector<comm::BucketPlace> &mirrorBucketPlaces() const {
    return mirrorPlaces;
  }
  /// Whether the step reads parameter `index` from the f32 mirrors (read
  /// as f32 under a sharded state, and not replicated when packed).
  bool mirrored(int32_t index) const {
    if (readsComputeCopy(index) || mirrors == 0)
      return false;
    return !packsMirrors() || mirrorOffsets[static_cast<size_t>(index)] >= 0;
  }
  /// Parameter `index`'s first element in that buffer (readsComputeCopy).
  int64_t computeCopyOffset(int32_t index) const {
    return copyOffsets[static_cast<size_t>(index)];
  }
  /// Sets each chunk's copy_offset (tensor_chunks.h) from its place in its
  /// parameter's slice, -1 for parameters read as masters.
  void placeComputeCopies(std::vector<tessera_tensor_chunk> &chunks) const;
  /// Under a sharded state: fails unless `pieces` are the shard the state
  /// was allocated for (another would read elements this rank does not
  /// hold).
  void requireHeldShard(const std::vector<ParameterLayout::Piece> &pieces) const;
  /// Per parameter weight decay applies (not matched by --no-decay).
  const std::vector<bool> &getDecays() const { return decays; }
  /// forward_backward over the backend's tensors; throws TrainError with
  /// the program's message (tessera_cpu_last_error) on failure.
  double callProgram(const tessera_tensor *parameters,
                     const tessera_tensor *buffers,
                     const tessera_tensor *tokenTensor,
                     const tessera_tensor *targetTensor, float lossScale,
                     uint64_t seed, tessera_tensor *gradients);
  /// A stage function over the backend's tensors, likewise.
  double callStage(const tessera_stage_function &function,
                   const tessera_tensor *parameters,
                   const tessera_tensor *buffers,
                   const tessera_tensor *tokenTensor,
                   const tessera_tensor *targetTensor,
                   const tessera_tensor *inputs, float lossScale,
                   uint64_t seed, tessera_tensor *gradients,
                   tessera_tensor *outputs);

  const tessera_program &program;
  const TrainOptions &options;
  ParameterLayout layout;
  tessera_step_context context{};
  /// The compute precision's dtype (f32, bf16, f16).
  int32_t computeDtype;

private:
  std::vector<bool> decays;
  std::vector<double> lastSums;
  /// Per parameter its compute copy's offset, or -1 (read as the master).
  std::vector<int64_t> copyOffsets;
  int64_t copyElements = 0;
  int64_t mirrors = 0;
  /// Under packsMirrors, per parameter read as f32 its packed mirror's
  /// offset (-1 for the others); empty otherwise.
  std::vector<int64_t> mirrorOffsets;
  /// Under packsMirrors, per replicated parameter read as f32 its master's
  /// offset in the shard's masters (-1 for the others).
  std::vector<int64_t> masterReads;
  std::vector<comm::BucketPlace> copyPlaces, mirrorPlaces;

  /// Under a sharded state (ZeRO-3 aside): the copies' and mirrors' places
  /// by the gradient buckets (the constructor's).
  void placeGatheredWeights();

  /// sumsOfSquares into lastSums, then their total in program order: the
  /// norm's grouping on either device, per parameter and then over
  /// parameters.
  double computeSumsOfSquares(const std::vector<bool> *counted) {
    lastSums.assign(static_cast<size_t>(layout.size()), 0.0);
    sumsOfSquares(counted, lastSums);
    double total = 0;
    for (double sum : lastSums)
      total += sum;
    return total;
  }
};

/// The training state both backends keep the same way: five flat buffers
/// placed by the ParameterLayout (fp32 master weights and moments, the
/// compute-precision gradients, fp32 accumulators when a step has several
/// micro-batches), and the compute copies the step reads (their own flat
/// buffer of the copied parameters only), owned by `Buffer` (host or device
/// memory; `get()` is the pointer).
template <typename Buffer>
class FlatStateBackend : public TrainingBackend {
public:
  using TrainingBackend::TrainingBackend;

  FlatBuffer masterWeights() override { return state(master); }
  /// ZeRO-2: the ring the step writes (its own element layout).
  FlatBuffer computeGradients() override {
    return {gradients.get(), computeDtype,
            shardsGradients() ? ringElements() : layout.totalElements()};
  }
  /// ZeRO-2: the rank's shard of the reduced gradients, packed as the
  /// masters are, then the buckets it holds whole (gradientShardOffset).
  FlatBuffer optimizerGradients() override {
    if (shardsGradients())
      return {gradientShard.get(), gradientShardDtype(),
              layout.gradientShardElements()};
    return accumulating() ? f32(accumulators) : computeGradients();
  }
  FlatBuffer firstMoments() override { return state(firstMomentValues); }
  FlatBuffer secondMoments() override { return state(secondMomentValues); }
  std::vector<FlatBuffer> shardedStepBuffers() override {
    std::vector<FlatBuffer> buffers;
    // ZeRO-3's are gathered as the step reads them.
    if (!holdsShardOnly() || layout.weightsSharded())
      return buffers;
    if (computeCopyElements() > 0)
      buffers.push_back({computeCopies.get(), computeDtype,
                         computeCopyElements(), copyBucketPlaces()});
    if (mirrorElements() > 0)
      buffers.push_back(
          {mirror.get(), TESSERA_F32, mirrorElements(), mirrorBucketPlaces()});
    return buffers;
  }
  std::array<comm::WeightGatherer::KindBuffers, comm::WeightRing::kKinds>
  weightShardBuffers() override {
    if (!layout.weightsSharded())
      return {};
    return {{{computeCopies.get(), copyRing.get(), computeDtype},
             {mirror.get(), mirrorRing.get(), TESSERA_F32}}};
  }
  ResidentState residentState() override {
    ResidentState resident;
    const int64_t f32Bytes = dtypeSize(TESSERA_F32);
    resident.masters = layout.stateElements() * f32Bytes;
    resident.moments = 2 * resident.masters;
    resident.stepCopies = computeCopyElements() * dtypeSize(computeDtype) +
                          mirrorElements() * f32Bytes;
    if (layout.weightsSharded())
      resident.weightRing =
          layout.weightShard().ringElements[0] * dtypeSize(computeDtype) +
          layout.weightShard().ringElements[1] * f32Bytes;
    if (shardsGradients()) {
      const GradientRing &ring = layout.gradientRing();
      resident.gradients =
          layout.gradientShardElements() * dtypeSize(gradientShardDtype());
      resident.gradientRing = ringElements() * dtypeSize(computeDtype) +
                              stagingElements() * f32Bytes +
                              ring.largestBlock *
                                  dtypeSize(gradientShardDtype());
      return resident;
    }
    resident.gradients = layout.totalBytes(computeDtype);
    resident.accumulators =
        accumulating() ? layout.totalBytes(TESSERA_F32) : 0;
    return resident;
  }

protected:
  using GradientRing = ParameterLayout::GradientRingPlacement;

  bool accumulating() const {
    return options.gradientAccumulation > 1 || options.accumulateInF32;
  }
  bool shardsGradients() const { return layout.gradientsSharded(); }
  /// ZeRO-2's shard holds what the optimizer reads: the f32 sum over
  /// micro-batches, or the one micro-batch's compute-precision gradients.
  int32_t gradientShardDtype() const {
    return accumulating() ? TESSERA_F32 : computeDtype;
  }
  /// ZeRO-2: elements of the f32 copy a 16-bit bucket is widened into
  /// before its reduction when micro-batches are summed in f32 (0: none).
  int64_t stagingElements() const {
    return accumulating() && computeDtype != TESSERA_F32
               ? layout.gradientRing().largestBucket
               : 0;
  }
  /// ZeRO-2: elements of the ring the step writes: the buckets' slots, and
  /// when the shard sums micro-batches the whole gradients' places past
  /// them (GradientRingPlacement::WholeGradient).
  int64_t ringElements() const {
    const GradientRing &ring = layout.gradientRing();
    return ring.elements + (accumulating() ? ring.wholeElements : 0);
  }
  /// ZeRO-2: where the step writes the gradients in no bucket: into the
  /// shard (nullptr when in the ring: stepGradientTensors).
  void *wholeGradientsShard() {
    return shardsGradients() && !accumulating() ? gradientShard.get()
                                                : nullptr;
  }
  /// ZeRO-2: where bucket `bucket` is held whole in the gradient shard
  /// (reduced in place), or nothing (data null) for a bucket of the ring.
  tessera_tensor heldPlace(int32_t bucket) {
    const GradientRing::Bucket &placed =
        layout.gradientRing().buckets[static_cast<size_t>(bucket)];
    if (placed.heldOffset < 0)
      return {};
    return flatView(gradientShard.get(), gradientShardDtype(),
                    placed.heldOffset, placed.elements);
  }
  /// ZeRO-2: bucket `bucket`'s whole gradients, its place in the ring.
  tessera_tensor ringPlace(int32_t bucket) {
    const GradientRing::Bucket &placed =
        layout.gradientRing().buckets[static_cast<size_t>(bucket)];
    return flatView(gradients.get(), computeDtype, placed.ringOffset,
                    placed.elements);
  }
  /// ZeRO-2: element `offset` of `buffer` (of `dtype`) as a 1-D tensor of
  /// `elements`: what the sink hands the reducer.
  static tessera_tensor flatView(void *buffer, int32_t dtype, int64_t offset,
                                 int64_t elements) {
    tessera_tensor view{};
    view.data = static_cast<unsigned char *>(buffer) + offset * dtypeSize(dtype);
    view.dtype = dtype;
    view.rank = 1;
    view.shape[0] = elements;
    return view;
  }
  FlatBuffer f32(Buffer &buffer) {
    return {buffer.get(), TESSERA_F32, layout.totalElements()};
  }
  /// A master or moment buffer: the shard's compact one, or whole.
  FlatBuffer state(Buffer &buffer) {
    return {buffer.get(), TESSERA_F32, layout.stateElements()};
  }

  /// `mirror`: the f32 mirrors of a sharded state (mirrorElements).
  /// ZeRO-2: `gradients` is the ring, `gradientShard` the reduced shard,
  /// `reductionStaging` a bucket widened to f32 (stagingElements) and
  /// `reducedBlock` the block a reduce-scatter writes.
  /// ZeRO-3: `computeCopies` and `mirror` are the rank's shards of the
  /// weights, `copyRing` and `mirrorRing` what they are gathered into.
  Buffer master, firstMomentValues, secondMomentValues, gradients,
      accumulators, computeCopies, mirror, gradientShard, reductionStaging,
      reducedBlock, copyRing, mirrorRing;
};

/// Makes the backend of `program` (its device must be the one the factory
/// serves; it checks), its flat buffers placed by `layout` (nullptr: the
/// program's ParameterLayout).
using BackendFactory = std::function<std::unique_ptr<TrainingBackend>(
    const tessera_program &program, const TrainOptions &options,
    const ParameterLayout *layout)>;

/// The compute precision's dtype of `program` (f32, bf16, f16).
int32_t computeDtypeOf(const tessera_program &program);

/// The tensor_info of one micro-batch's tokens or targets: [batch, sequence].
tessera_tensor_info microBatchInfo(const tessera_program &program);

/// Gathers the slices of a flat host buffer (dtype `dtype`) into per-parameter
/// f32 vectors, and the reverse for f32.
std::vector<std::vector<float>> unflattenToF32(const tessera_program &program,
                                               const ParameterLayout &layout,
                                               const void *flat,
                                               int32_t dtype);
/// An empty tensor (a fresh start's moments) is zeros: written as such
/// unless `flatIsZero` says `flat` holds zeros already.
void flattenF32(const ParameterLayout &layout,
                const std::vector<std::vector<float>> &tensors, float *flat,
                bool flatIsZero = false);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRAININGBACKEND_H
