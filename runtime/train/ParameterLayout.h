//===- ParameterLayout.h - Every parameter as a slice of one buffer -*- C++ -*-===//
//
// The driver stores each kind of per-parameter tensor (fp32 master weights,
// AdamW's moments, compute-precision gradients, fp32 accumulators) as ONE
// contiguous buffer holding a slice per parameter, in program order. The
// slices of every kind share one element layout:
//
//   slice i starts at offset(i) elements, a multiple of kSliceAlignment
//   (128 elements: 256 bytes of a 2-byte dtype, 512 of f32), and the gaps
//   between slices are zero and stay zero.
//
// Why flat: a data-parallel reducer (runtime/comm) reduces or
// reduce-scatters contiguous ranges of the gradient buffer in a few large
// collectives instead of one per tensor, ZeRO-1 shards contiguous ranges of
// the master weights and moments, and whole-buffer kernels (casting and
// adding gradients) run as one launch. Why one element layout for every
// dtype: range i of the bf16 gradients and range i of the fp32 weights name
// the same parameters, so a shard is one [begin, end) of elements.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_PARAMETERLAYOUT_H
#define TESSERA_RUNTIME_TRAIN_PARAMETERLAYOUT_H

#include "tessera/runtime/program.h"
#include "tessera/runtime/tensor_chunks.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::train {

class ParameterLayout {
public:
  /// Slice starts are multiples of this many elements.
  static constexpr int64_t kSliceAlignment = 128;
  /// `count` elements rounded up to a multiple of kSliceAlignment: what a
  /// slice or a piece takes in a packed buffer.
  static constexpr int64_t aligned(int64_t count) {
    return (count + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment;
  }
  /// The largest chunk chunks() cuts (2^16 elements: a few hundred
  /// thousand bytes of work per GPU block).
  static constexpr int64_t kChunkElements = int64_t(1) << 16;

  explicit ParameterLayout(const tessera_program &program);
  /// A placement planned elsewhere (ZeRO-1's buckets pad between slices):
  /// `offsets` in parameter order, increasing, each a multiple of
  /// kSliceAlignment, the slices within `totalElements`. Throws TrainError
  /// (an internal error) when they are not.
  ParameterLayout(const tessera_program &program,
                  const std::vector<int64_t> &offsets, int64_t totalElements);

  int32_t size() const { return static_cast<int32_t>(offsets.size()); }
  /// First element of parameter `index`'s slice.
  int64_t offset(int32_t index) const {
    return offsets[static_cast<size_t>(index)];
  }
  /// Elements of parameter `index`.
  int64_t count(int32_t index) const {
    return counts[static_cast<size_t>(index)];
  }
  /// Elements from the start of parameter `begin`'s slice to the end of
  /// parameter `end - 1`'s, the gaps between them included.
  int64_t spanElements(int32_t begin, int32_t end) const {
    return offset(end - 1) + count(end - 1) - offset(begin);
  }
  /// Elements of a flat buffer, gaps included (the end of the last slice,
  /// rounded up to kSliceAlignment).
  int64_t totalElements() const { return total; }
  /// Bytes of a flat buffer of `dtype`.
  int64_t totalBytes(int32_t dtype) const;

  /// The slices cut into chunks of at most `chunkElements`, in order;
  /// `decays[i]` is whether weight decay applies to parameter i.
  std::vector<tessera_tensor_chunk>
  chunks(const std::vector<bool> &decays,
         int64_t chunkElements = kChunkElements) const;

  /// One contiguous piece of a parameter's slice: elements [offset, offset +
  /// count) of the flat buffers, of parameter `parameter`.
  struct Piece {
    int32_t parameter = 0;
    int64_t offset = 0;
    int64_t count = 0;
    /// Where the piece's master weights and moments start in their
    /// buffers: its place in a compact shard (holdShard), or -1 when the
    /// state is whole (at `offset`).
    int64_t stateOffset = -1;
    /// Every rank of the group holds the piece, whole (a parameter whose
    /// gradient the step reduced itself): each updates it alike.
    bool replicated = false;
  };
  /// Pieces (in buffer order, within one parameter's slice each) cut into
  /// chunks of at most `chunkElements`: what chunks() cuts from every whole
  /// slice, for a part of the parameters (a ZeRO-1 shard).
  static std::vector<tessera_tensor_chunk>
  chunksOf(const std::vector<Piece> &pieces, const std::vector<bool> &decays,
           int64_t chunkElements = kChunkElements);

  /// Elements [offset, offset + elements) of the flat buffers.
  struct Span {
    int64_t offset = 0;
    int64_t elements = 0;
  };
  /// Makes the master weights and moments hold only `pieces` (a ZeRO-1
  /// rank's shard, in buffer order): packed one after another into
  /// compact buffers of stateElements(), each piece starting at a multiple
  /// of kSliceAlignment. The other kinds stay whole. `gathered`: the spans
  /// whose equal blocks are the ranks' shards (the gradient buckets, in
  /// buffer order), which the shards' all-gather completes; every piece
  /// but a replicated one lies in one of them.
  void holdShard(std::vector<Piece> pieces, std::vector<Span> gathered);
  /// The spans holdShard was given (empty unless sharded()).
  const std::vector<Span> &gatheredSpans() const { return spans; }
  /// The index of the span holding parameter `index`'s slice, or -1 (a
  /// replicated or empty parameter's).
  int32_t spanOf(int32_t index) const;
  /// The same placement, every rank's state whole (a backend that keeps
  /// the whole state under ZeRO-1).
  ParameterLayout withoutShard() const;
  /// Whether holdShard was called: masters and moments are the shard's.
  bool sharded() const { return holdsShard; }
  /// The shard's pieces, their stateOffset set (empty unless sharded()).
  const std::vector<Piece> &shard() const { return shardPieces; }
  /// Elements of the masters' and moments' buffers: the shard's, or
  /// totalElements().
  int64_t stateElements() const { return holdsShard ? shardTotal : total; }

  /// ZeRO-2: where the step's whole gradients go (gradient_ring.h) and the
  /// transient room the reduction needs besides, in elements. The gradient
  /// shard buffer holds the reduced shard, its pieces packed as the
  /// masters' are, then the buckets held whole (`heldElements`: a mesh
  /// plan's ZeRO-1 parameters beside its ZeRO-2 ones, MeshZero.h), each
  /// reduce-scattered in place, so that the rank's pieces of them are in
  /// its block of the bucket. Without held buckets the shard is placed
  /// like the masters.
  struct GradientRingPlacement {
    /// Per parameter, its gradient's first element in the ring (a whole
    /// gradient's: its place past the buckets' slots, below).
    std::vector<int64_t> offsets;
    /// The ring: its slots together.
    int64_t elements = 0;
    /// A gradient in no bucket (a mesh program's complete one, beside the
    /// pending ones the ring's buckets reduce: MeshZero.h), whole in the
    /// shard at `shardOffset` (its piece's place), or one of a held bucket
    /// (at its place there). The step writes it
    /// there itself when one micro-batch's gradients are what the optimizer
    /// reads; when the shard sums micro-batches in f32 the step writes it
    /// at `ringOffset`, past the buckets' slots (`wholeElements` more ring
    /// elements, never reused), and the backend adds it into the shard
    /// after every micro-batch.
    struct WholeGradient {
      int32_t parameter = 0;
      int64_t ringOffset = 0, shardOffset = 0, count = 0;
    };
    std::vector<WholeGradient> wholeGradients;
    int64_t wholeElements = 0;
    /// The largest bucket in the ring (what a bucket widened to f32 takes)
    /// and the largest block of one rank (what a reduce-scatter writes).
    int64_t largestBucket = 0;
    int64_t largestBlock = 0;
    /// Elements of the held buckets, and of the whole gradient shard
    /// buffer (the pieces' and theirs).
    int64_t heldElements = 0;
    int64_t gradientShardElements = 0;
    /// Per piece of the state's shard (shard() order), where its gradient
    /// is in the gradient shard buffer (empty: at its stateOffset, the
    /// buffer of stateElements()).
    std::vector<int64_t> pieceGradientOffsets;
    /// One piece of the shard in a bucket's reduced block: `count`
    /// elements at `blockOffset` of the block, at `shardOffset` of the
    /// gradient shard (the piece's place, pieceGradientOffsets).
    struct BlockPiece {
      int64_t blockOffset = 0, shardOffset = 0, count = 0;
    };
    /// Per bucket, in launch order: where it is in the ring (-1: held),
    /// where it is held in the gradient shard buffer (-1: in the ring),
    /// its elements and the shard's pieces in this rank's block of it.
    struct Bucket {
      int64_t ringOffset = 0, heldOffset = -1, elements = 0;
      std::vector<BlockPiece> pieces;
    };
    std::vector<Bucket> buckets;
  };
  /// Makes the gradients the shard's too (after holdShard): the reduced
  /// gradients in a compact buffer (`ring`'s pieceGradientOffsets and
  /// gradientShardElements; by default placed like the masters), the
  /// whole ones the step writes in `ring`.
  void holdGradientShard(GradientRingPlacement ring);
  /// Whether holdGradientShard was called.
  bool gradientsSharded() const { return holdsGradientShard; }
  const GradientRingPlacement &gradientRing() const { return ringPlacement; }
  /// Elements of the gradient shard buffer: the shard's and the held
  /// buckets'.
  int64_t gradientShardElements() const {
    return ringPlacement.gradientShardElements;
  }
  /// ZeRO-2: where flat element `flatOffset`, in a piece of the shard, has
  /// its gradient in the gradient shard buffer.
  int64_t gradientShardOffset(int64_t flatOffset) const;

  /// ZeRO-3: where the weights the step reads are (weight_ring.h), in
  /// elements. Kind 0 is the compute copies (the compute dtype), kind 1
  /// the f32 mirrors of the parameters read as f32.
  struct WeightShardPlacement {
    /// Per parameter, where the step reads it in its kind's ring.
    std::vector<int64_t> ringOffsets;
    /// Per kind, elements of its ring and of this rank's shard of it.
    std::array<int64_t, 2> ringElements{}, shardElements{};
    /// Per piece of the state's shard (shard() order), its first element
    /// in its parameter's kind's shard.
    std::vector<int64_t> pieceOffsets;
  };
  /// Makes the step's weights the shard's too (after holdGradientShard).
  void holdWeightShard(WeightShardPlacement placement);
  bool weightsSharded() const { return holdsWeightShard; }
  const WeightShardPlacement &weightShard() const { return weightPlacement; }
  /// ZeRO-3: where flat element `flatOffset`, in a piece of the shard, is in
  /// its kind's weight shard.
  int64_t weightShardOffset(int64_t flatOffset) const;

private:
  std::vector<int64_t> offsets;
  std::vector<int64_t> counts;
  int64_t total = 0;
  bool holdsShard = false;
  std::vector<Piece> shardPieces;
  std::vector<Span> spans;
  int64_t shardTotal = 0;
  bool holdsGradientShard = false;
  GradientRingPlacement ringPlacement;
  bool holdsWeightShard = false;
  WeightShardPlacement weightPlacement;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_PARAMETERLAYOUT_H
