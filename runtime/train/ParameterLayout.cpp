//===- ParameterLayout.cpp - Offsets of the flat parameter buffers --------===//

#include "ParameterLayout.h"

#include "TrainError.h"
#include "TrainingState.h"

#include <algorithm>

namespace tessera::train {

ParameterLayout::ParameterLayout(const tessera_program &program) {
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    int64_t elements = elementCount(program.parameters[i]);
    offsets.push_back(total);
    counts.push_back(elements);
    total = aligned(total + elements);
  }
}

ParameterLayout::ParameterLayout(const tessera_program &program,
                                 const std::vector<int64_t> &plannedOffsets,
                                 int64_t totalElements)
    : offsets(plannedOffsets), total(totalElements) {
  if (plannedOffsets.size() != static_cast<size_t>(program.parameter_count))
    fail("internal error: a layout of " +
         std::to_string(plannedOffsets.size()) + " slices for " +
         std::to_string(program.parameter_count) + " parameters");
  int64_t end = 0;
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    int64_t offset = plannedOffsets[static_cast<size_t>(i)];
    if (offset < end || offset % kSliceAlignment != 0)
      fail("internal error: slice " + std::to_string(i) + " at element " +
           std::to_string(offset) + " overlaps or is misaligned");
    counts.push_back(elementCount(program.parameters[i]));
    end = offset + counts.back();
  }
  if (end > total || total % kSliceAlignment != 0)
    fail("internal error: the slices end at element " + std::to_string(end) +
         ", beyond the layout's " + std::to_string(total));
}

int64_t ParameterLayout::totalBytes(int32_t dtype) const {
  return total * dtypeSize(dtype);
}

std::vector<tessera_tensor_chunk>
ParameterLayout::chunks(const std::vector<bool> &decays,
                        int64_t chunkElements) const {
  if (decays.size() != offsets.size())
    fail("internal error: chunks of " + std::to_string(offsets.size()) +
         " parameters with " + std::to_string(decays.size()) + " decay flags");
  std::vector<Piece> slices;
  for (size_t i = 0; i < offsets.size(); ++i)
    slices.push_back({static_cast<int32_t>(i), offsets[i], counts[i]});
  return chunksOf(slices, decays, chunkElements);
}

std::vector<tessera_tensor_chunk>
ParameterLayout::chunksOf(const std::vector<Piece> &pieces,
                          const std::vector<bool> &decays,
                          int64_t chunkElements) {
  if (chunkElements <= 0)
    fail("internal error: chunks of " + std::to_string(chunkElements) +
         " elements");
  std::vector<tessera_tensor_chunk> table;
  for (const Piece &piece : pieces) {
    if (piece.parameter < 0 ||
        static_cast<size_t>(piece.parameter) >= decays.size())
      fail("internal error: a piece of parameter " +
           std::to_string(piece.parameter) + " of " +
           std::to_string(decays.size()));
    for (int64_t start = 0; start < piece.count; start += chunkElements) {
      tessera_tensor_chunk chunk{};
      chunk.offset = piece.offset + start;
      chunk.count = std::min(chunkElements, piece.count - start);
      chunk.tensor = piece.parameter;
      chunk.weight_decay = decays[static_cast<size_t>(piece.parameter)] ? 1 : 0;
      chunk.copy_offset = -1; // TrainingBackend::placeComputeCopies
      chunk.state_offset =
          (piece.stateOffset >= 0 ? piece.stateOffset : piece.offset) + start;
      table.push_back(chunk);
    }
  }
  return table;
}

void ParameterLayout::holdShard(std::vector<Piece> pieces,
                                std::vector<Span> gathered) {
  int64_t end = 0;
  for (const Span &span : gathered) {
    if (span.offset < end || span.elements < 0 ||
        span.offset + span.elements > total)
      fail("internal error: the gathered spans overlap, are out of order "
           "or leave the flat buffers");
    end = span.offset + span.elements;
  }
  spans = std::move(gathered);
  int64_t next = 0;
  for (Piece &piece : pieces) {
    if (piece.parameter < 0 || piece.parameter >= size() ||
        piece.offset < offset(piece.parameter) ||
        piece.offset + piece.count >
            offset(piece.parameter) + count(piece.parameter))
      fail("internal error: a shard piece outside parameter " +
           std::to_string(piece.parameter) + "'s slice");
    if (!piece.replicated && piece.count > 0 && spanOf(piece.parameter) < 0)
      fail("internal error: parameter " + std::to_string(piece.parameter) +
           "'s shard piece is in no gathered span");
    piece.stateOffset = next;
    next += aligned(piece.count);
  }
  shardPieces = std::move(pieces);
  shardTotal = next;
  holdsShard = true;
}

int32_t ParameterLayout::spanOf(int32_t index) const {
  if (count(index) == 0)
    return -1;
  auto after = std::upper_bound(
      spans.begin(), spans.end(), offset(index),
      [](int64_t at, const Span &span) { return at < span.offset; });
  if (after == spans.begin())
    return -1;
  const Span &span = *std::prev(after);
  if (offset(index) + count(index) > span.offset + span.elements)
    return -1;
  return static_cast<int32_t>(std::prev(after) - spans.begin());
}

void ParameterLayout::holdGradientShard(GradientRingPlacement ring) {
  if (!holdsShard || ring.offsets.size() != offsets.size())
    fail("internal error: a gradient shard without the state's shard, or a "
         "ring of " + std::to_string(ring.offsets.size()) + " gradients for " +
         std::to_string(offsets.size()) + " parameters");
  if (ring.pieceGradientOffsets.empty()) {
    for (const Piece &piece : shardPieces)
      ring.pieceGradientOffsets.push_back(piece.stateOffset);
    ring.gradientShardElements = shardTotal;
  }
  if (ring.pieceGradientOffsets.size() != shardPieces.size())
    fail("internal error: gradient places of " +
         std::to_string(ring.pieceGradientOffsets.size()) + " pieces for " +
         std::to_string(shardPieces.size()));
  ringPlacement = std::move(ring);
  holdsGradientShard = true;
}

/// The index of the piece of `pieces` (in buffer order) holding flat
/// element `flatOffset`; throws naming `what` when none does.
static size_t pieceHolding(const std::vector<ParameterLayout::Piece> &pieces,
                           int64_t flatOffset, const char *what) {
  auto after = std::upper_bound(
      pieces.begin(), pieces.end(), flatOffset,
      [](int64_t offset, const ParameterLayout::Piece &piece) {
        return offset < piece.offset;
      });
  if (after == pieces.begin() ||
      flatOffset >= std::prev(after)->offset + std::prev(after)->count)
    fail("internal error: element " + std::to_string(flatOffset) +
         " is in no piece of this rank's " + what);
  return static_cast<size_t>(after - pieces.begin()) - 1;
}

int64_t ParameterLayout::gradientShardOffset(int64_t flatOffset) const {
  const size_t piece = pieceHolding(shardPieces, flatOffset, "gradient shard");
  return ringPlacement.pieceGradientOffsets[piece] + flatOffset -
         shardPieces[piece].offset;
}

void ParameterLayout::holdWeightShard(WeightShardPlacement placement) {
  if (!holdsGradientShard || placement.ringOffsets.size() != offsets.size() ||
      placement.pieceOffsets.size() != shardPieces.size())
    fail("internal error: a weight shard without the gradients' shard, or "
         "one of " + std::to_string(placement.ringOffsets.size()) +
         " parameters and " + std::to_string(placement.pieceOffsets.size()) +
         " pieces for " + std::to_string(offsets.size()) + " and " +
         std::to_string(shardPieces.size()));
  weightPlacement = std::move(placement);
  holdsWeightShard = true;
}

int64_t ParameterLayout::weightShardOffset(int64_t flatOffset) const {
  const size_t piece = pieceHolding(shardPieces, flatOffset, "weight shard");
  return weightPlacement.pieceOffsets[piece] + flatOffset -
         shardPieces[piece].offset;
}

ParameterLayout ParameterLayout::withoutShard() const {
  ParameterLayout whole = *this;
  whole.holdsWeightShard = false;
  whole.weightPlacement = {};
  whole.holdsGradientShard = false;
  whole.ringPlacement = {};
  whole.holdsShard = false;
  whole.shardPieces.clear();
  whole.spans.clear();
  whole.shardTotal = 0;
  return whole;
}

} // namespace tessera::train
