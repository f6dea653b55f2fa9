//===- gradient_reducer.h - Data-parallel gradient reduction ----*- C++ -*-===//
//
// Data parallelism reduces every gradient over the data-parallel ranks. The
// GradientReducer does it the way PyTorch's DDP does, so that the reduction
// hides behind the backward pass:
//
// - The gradients live in ONE contiguous buffer (a GradientLayout gives
//   each parameter its element range). Parameters are grouped into buckets
//   of about --bucket-mb in REVERSE parameter order, the order in which the
//   backward pass finishes them.
// - The step calls onGradientReady(i) (tessera_step_context's
//   gradient_ready) right after enqueuing the last kernel that writes
//   gradient i. When every gradient of the next bucket is ready, the reducer
//   records an event on the compute stream, makes the communication stream
//   wait for it and enqueues the bucket's collective there; the compute
//   stream runs on with the rest of the backward. Buckets are launched in
//   bucket order on every rank, whatever order the gradients arrive in, so
//   the ranks' collectives always match.
// - finish() launches what is left and makes the compute stream wait for
//   all of it: after finish(), kernels on the compute stream see reduced
//   gradients.
//
// The reduction is a SUM: the driver folds 1/world-size into AdamW's
// grad_scale (clip / (micro_batches * loss_scale * world_size)) and into the
// norm it reports, instead of spending a pass over the buffer on a divide.
//
// ZeRO-1 (ReduceMode::ReduceScatter): each bucket is reduce-scattered
// instead, so rank r ends with the reduced sum of its shard of every bucket
// (GradientLayout::shardSegments(r)); it updates only those elements of the
// master weights, then allGatherShards() gives every rank every updated
// element. This needs a layout planned with shardCount = world size, where
// every bucket is padded to a multiple of shardCount * kShardAlignment
// elements.
//
// ZeRO-2 (ReduceMode::ReduceScatterToShards): the step writes the whole
// gradients into a ring of bucket-sized slots (gradient_ring.h), and each
// bucket is reduce-scattered out of its slot into a block the backend folds
// into the rank's own gradient shard (a ShardedGradientSink); its place in
// the ring is then free for a later bucket, the compute stream waiting for
// it where the ring says. A bucket the ring holds whole (a mesh plan's
// ZeRO-1 parameters beside its ZeRO-2 ones) is reduce-scattered in place
// instead, where the sink keeps it, as ZeRO-1 does: the rank's block of
// it then holds the sum, and nothing is folded. Summing micro-batches in
// f32, such buckets are reduced once a step, after the last micro-batch
// (finishHeldBuckets), as ZeRO-1 reduces its f32 sums.
//
// A bucket whose gradients every rank computed whole and alike (a mesh
// plan's replicated layers' ZeRO-1/2 gradients: setWholeBuckets) needs no
// collective: each rank takes its block of it where a reduce-scatter would
// have left the sum (folded into the shard under ZeRO-2, in place
// otherwise), and an all-reduce leaves it as it is.
//
// On a host comm (the CPU backend's thread ranks) the same class runs
// synchronously: streams are ignored and a bucket is reduced inside the
// onGradientReady call that completes it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_GRADIENT_REDUCER_H
#define TESSERA_RUNTIME_GRADIENT_REDUCER_H

#include "tessera/runtime/comm.h"
#include "tessera/runtime/comm_error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::comm {

/// One parameter's gradient: elements [offset, offset + elements) of the
/// buffer.
struct GradientSlot {
  int64_t offset = 0;
  int64_t elements = 0;
};

/// Parameters [firstParameter, lastParameter] and the buffer range
/// [offset, offset + elements) that holds them (with padding when sharded).
struct GradientBucket {
  int32_t firstParameter = 0;
  int32_t lastParameter = 0;
  int64_t offset = 0;
  int64_t elements = 0;
};

/// A piece of parameter `parameter` inside one rank's shard: its elements
/// [parameterOffset, parameterOffset + elements) are buffer elements
/// [bufferOffset, bufferOffset + elements).
struct ShardSegment {
  int32_t parameter = 0;
  int64_t parameterOffset = 0;
  int64_t bufferOffset = 0;
  int64_t elements = 0;
};

/// Where a bucket is in a buffer that holds only some of them: its first
/// element in the layout (GradientBucket::offset) and in the buffer.
struct BucketPlace {
  int64_t bucketOffset = 0;
  int64_t bufferOffset = 0;
};

/// Blocks of a sharded bucket start at multiples of this many elements (256
/// bytes of f32), which keeps every rank's block aligned for NCCL and vector
/// loads.
constexpr int64_t kShardAlignment = 64;

/// Where each parameter's gradient sits in the contiguous buffer, and the
/// buckets. Counted in elements, so one layout serves buffers of different
/// dtypes (bf16 gradients, f32 accumulators, f32 master weights).
class GradientLayout {
public:
  /// Parameters in order, each starting at a multiple of sliceAlignment
  /// (the driver's ParameterLayout uses 128); buckets of at least
  /// `bucketElements` (the last one may be smaller), built from the last
  /// parameter backwards, each padded to a multiple of sliceAlignment. With
  /// shardCount N > 1 each bucket is padded to a multiple of N * max(
  /// sliceAlignment, kShardAlignment), so it splits into N aligned blocks.
  /// `groups` (empty, or one per parameter, -1 for none): a bucket never
  /// holds parameters of two groups, so every rank's block of a bucket is
  /// one group's (a pipeline device shards only the parameters it owns,
  /// group 0, and each rank's share of them stays 1/N). A parameter of
  /// group kUnreduced is in no bucket: placed between them, it is never
  /// reduced nor sharded (a mesh program's gradient the step completed
  /// itself, beside the ones it leaves to the driver).
  static constexpr int32_t kUnreduced = -2;
  static GradientLayout plan(const std::vector<int64_t> &parameterElements,
                             int64_t bucketElements, int32_t shardCount = 1,
                             int64_t sliceAlignment = 1,
                             const std::vector<int32_t> &groups = {});
  /// The driver's own placement (slots in parameter order, increasing,
  /// non-overlapping); buckets as in plan, unsharded.
  static GradientLayout fromSlots(std::vector<GradientSlot> slots,
                                  int64_t bucketElements);

  const std::vector<GradientSlot> &parameters() const { return slots; }
  /// In launch order: buckets[0] holds the last parameters.
  const std::vector<GradientBucket> &buckets() const { return bucketList; }
  /// Elements the buffer must have (padding included).
  int64_t totalElements() const { return total; }
  int32_t shardCount() const { return shards; }
  /// What rank `rank` owns after a reduce-scatter, in buffer order, split
  /// at parameter boundaries (padding left out).
  std::vector<ShardSegment> shardSegments(int32_t rank) const;
  /// Whether parameter `parameter` is in a bucket (not kUnreduced).
  bool isReduced(int32_t parameter) const;

private:
  std::vector<GradientSlot> slots;
  std::vector<GradientBucket> bucketList;
  int64_t total = 0;
  int32_t shards = 1;
};

enum class ReduceMode { AllReduce, ReduceScatter, ReduceScatterToShards };

class GradientRing;

/// ZeRO-2: what becomes of a bucket's whole gradients and of this rank's
/// reduced block of them, implemented by the backend with its kernels. The
/// calls for one bucket come in the order below, enqueued on `stream` (the
/// comm stream; the host runs them at once), bucket after bucket, so one
/// staging buffer serves them all.
class ShardedGradientSink {
public:
  virtual ~ShardedGradientSink() = default;
  /// What the reduce-scatter of bucket `bucket` (the layout's, in launch
  /// order) reads: its place in the ring, or that widened to f32 when
  /// micro-batches are summed in f32; for a bucket held whole, where it is
  /// held (the reduce-scatter leaves this rank's block of it there).
  virtual tessera_tensor bucketForReduction(int32_t bucket, void *stream) = 0;
  /// Where this rank's reduced block of `elements` lands.
  virtual tessera_tensor blockForReduction(int64_t elements) = 0;
  /// Folds `block`, this rank's reduced block of bucket `bucket` (the one
  /// blockForReduction gave, or for a whole bucket its place in what
  /// bucketForReduction gave), into the rank's gradient shard: a copy, or
  /// an add into the micro-batches' f32 sum.
  virtual void foldBlock(int32_t bucket, const tessera_tensor &block,
                         void *stream) = 0;
};

class GradientReducer {
public:
  /// `gradients` (device or host memory, matching the comm) has
  /// layout.totalElements() elements of `dtype`. Streams are cudaStream_t
  /// (NULL: the default stream) and ignored on a host comm.
  GradientReducer(tessera_comm *comm, GradientLayout layout, void *gradients,
                  int32_t dtype, ReduceMode mode, void *computeStream,
                  void *commStream);
  /// ZeRO-2: the gradients are in `ring`'s slots (planned for `layout`,
  /// sharded for the comm's size), reduced in `dtype` and folded by `sink`.
  /// `heldOncePerStep`: the ring's held buckets are reduced by
  /// finishHeldBuckets only, not as the step writes them.
  GradientReducer(tessera_comm *comm, GradientLayout layout,
                  const GradientRing &ring, ShardedGradientSink &sink,
                  int32_t dtype, void *computeStream, void *commStream,
                  bool heldOncePerStep = false);
  ~GradientReducer();
  GradientReducer(const GradientReducer &) = delete;
  GradientReducer &operator=(const GradientReducer &) = delete;

  /// Per bucket in launch order (empty: none), whether its gradients are
  /// whole and the same on every rank: it is taken, not reduced.
  void setWholeBuckets(std::vector<bool> whole);

  /// Gradient `parameter`'s kernels are enqueued on the compute stream.
  void onGradientReady(int32_t parameter);
  /// For tessera_step_context::gradient_ready (user = the reducer).
  static void gradientReady(void *user, int32_t parameter);
  /// Launches the buckets not launched yet; the compute stream then waits
  /// for every bucket. Resets the readiness for the next step.
  void finish();
  /// ZeRO-2 with `heldOncePerStep`, after the step's last micro-batch:
  /// launches the held buckets in bucket order; the compute stream then
  /// waits for them. Nothing otherwise.
  void finishHeldBuckets();

  /// ZeRO-1, after the sharded update: each rank's shard of every bucket of
  /// `buffer` (same layout, `dtype`, e.g. the f32 master weights or the
  /// compute copies) goes to every rank; the compute stream waits for it.
  void allGatherShards(void *buffer, int32_t dtype);
  /// The same for a buffer that holds only some buckets, packed (the
  /// weights a mixed-precision step reads in bf16, apart from those it
  /// reads in f32): the buckets `places` names (in buffer order: increasing
  /// bucketOffset, else CommError), each where it says; the others are not
  /// the buffer's.
  void allGatherShards(void *buffer, int32_t dtype,
                       const std::vector<BucketPlace> &places);

  const GradientLayout &layout() const { return bucketLayout; }

private:
  /// allGatherShards over every bucket at its own offset (`places` null)
  /// or the buckets `places` names.
  void gatherShards(void *buffer, int32_t dtype,
                    const std::vector<BucketPlace> *places);

  tessera_comm *comm;
  GradientLayout bucketLayout;
  void *gradients;
  int32_t dtype;
  ReduceMode mode;
  void *computeStream;
  void *commStream;
  std::vector<int32_t> bucketOfParameter;
  std::vector<int32_t> pendingInBucket;
  std::vector<bool> parameterReady;
  std::vector<bool> wholeBuckets;
  size_t launchedBuckets = 0;
  void *bucketEvent = nullptr;
  void *doneEvent = nullptr;
  /// ZeRO-2: the ring, the sink, an event per bucket (recorded when its
  /// place in the ring is free again), the gradients still to come per
  /// write position and the latest position announced.
  std::unique_ptr<GradientRing> ring;
  ShardedGradientSink *sink = nullptr;
  std::vector<void *> bucketFreed;
  std::vector<int32_t> pendingAtPosition;
  int32_t currentPosition = 0;
  bool heldOncePerStep = false;

  void launchReadyBuckets();
  void launchBucket(size_t index);
  /// Whether bucket `index` waits for finishHeldBuckets.
  bool reducedOncePerStep(size_t index) const;
  /// ZeRO-2, after gradient `parameter` was announced: checks the write
  /// order and, once its position is complete, makes the compute stream
  /// wait for the slots the next position's writes reuse.
  void followRing(int32_t parameter);
  void resetStep();
};

/// Agreement on a host scalar across the ranks of `comm` (the global
/// gradient norm from per-shard sums of squares, an fp16 overflow flag), or
/// on a short vector of them (per-parameter sums of squares). On a device
/// comm the values travel through a small device buffer on `stream` and the
/// call waits for them.
class ScalarAgreement {
public:
  ScalarAgreement(tessera_comm *comm, void *stream);
  ~ScalarAgreement();
  ScalarAgreement(const ScalarAgreement &) = delete;
  ScalarAgreement &operator=(const ScalarAgreement &) = delete;

  /// The sum over ranks, added in rank order on a host comm.
  double sum(double value);
  /// The largest value over ranks (an overflow flag: 0 or 1).
  double max(double value);
  /// Each element's sum over ranks, in place (every rank passes as many).
  /// The device buffer grows to the longest vector seen and is kept, so
  /// only the first call of a length allocates.
  void sumEach(std::vector<double> &values);

private:
  tessera_comm *comm;
  void *stream;
  void *deviceScalars = nullptr;
  size_t capacity = 1;

  void reduce(double *values, size_t count, int32_t op);
};

/// all_gather of tensors in host memory over `comm` (comm.h's semantics),
/// whatever memory the comm works in: on a device comm x and y travel
/// through device buffers on `stream`, and y is complete when the call
/// returns. For the whole tensors a mesh run writes to files. Throws
/// CommError when the collective fails.
void allGatherHostTensors(tessera_comm *comm, const tessera_tensor &x,
                          tessera_tensor &y, int32_t axis, void *stream);

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_GRADIENT_REDUCER_H
