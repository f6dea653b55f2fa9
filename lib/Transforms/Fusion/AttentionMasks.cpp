//===- AttentionMasks.cpp - what an additive attention mask does ----------===//
//
// Exporters build the attention mask from token positions: transformers'
// masking_utils gathers each query's and each key's position ([batch, 1,
// seq, 1] and [batch, 1, 1, seq]) and compares them (`kv <= q` for causal,
// `kv > q - window` for a sliding window, equal sequence ids for packed
// sequences), then selects 0 or the dtype's lowest value. Folded, that is a
// [batch, 1, seq, seq] tensor: 8 GiB of host memory at seq 32768, and a
// read of every entry to classify it. Read from the comparisons instead,
// the mask is a band of d = j - i, found from the position vectors alone.
//
//===----------------------------------------------------------------------===//

#include "AttentionMasks.h"

#include "FusionMatchers.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <optional>
#include <variant>

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

/// An additive mask entry at or below this hides its key: softmax gives it a
/// weight of at most e^-10000 relative to a kept entry, i.e. exactly zero in
/// any float format. Exporters use -inf, the dtype's lowest value
/// (-3.4e38 for f32) or -10000 (older BERT code).
constexpr double kHidingThreshold = -1.0e4;

/// Positions are integers; a double holds them exactly below 2^53.
constexpr double kLargestExactInteger = 9007199254740992.0;

//===----------------------------------------------------------------------===//
// Constant leaves
//===----------------------------------------------------------------------===//

/// A mask or mask leaf without the broadcasts and leading-unit reshapes
/// that only stretch it to the scores' shape.
Value stripMaskBroadcasts(Value value) {
  while (true) {
    value = stripLeadingUnitReshapes(value);
    auto broadcast = value.getDefiningOp<tess::BroadcastOp>();
    if (!broadcast)
      return value;
    value = broadcast.getInput();
  }
}

/// The constant data of `value` as doubles (i1 as 0/1), when `value` is a
/// `tess.constant` or a buffer (a non-trainable `tess.parameter` carrying its
/// bytes: the optimizer never changes it, so its imported value is the one
/// the model computes with).
std::optional<std::vector<double>> readConstant(Value value) {
  Attribute attribute;
  if (!matchPattern(value, m_Constant(&attribute)))
    if (auto parameter = value.getDefiningOp<tess::ParameterOp>();
        parameter && !parameter.getTrainable() && parameter.getValue())
      attribute = *parameter.getValue();
  auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(attribute);
  if (!dense)
    return std::nullopt;
  Type element = dense.getElementType();
  std::vector<double> values;
  values.reserve(dense.isSplat() ? 1 : dense.getNumElements());
  if (element.isInteger(1)) {
    if (dense.isSplat())
      return std::vector<double>{dense.getSplatValue<bool>() ? 1.0 : 0.0};
    for (bool bit : dense.getValues<bool>())
      values.push_back(bit ? 1.0 : 0.0);
    return values;
  }
  // Positions (the arithmetic reading) are integers.
  if (element.isInteger()) {
    if (dense.isSplat())
      return std::vector<double>{
          static_cast<double>(dense.getSplatValue<APInt>().getSExtValue())};
    for (const APInt &number : dense.getValues<APInt>())
      values.push_back(static_cast<double>(number.getSExtValue()));
    return values;
  }
  if (!llvm::isa<FloatType>(element))
    return std::nullopt;
  if (dense.isSplat())
    return std::vector<double>{
        dense.getSplatValue<APFloat>().convertToDouble()};
  for (const APFloat &number : dense.getValues<APFloat>())
    values.push_back(number.convertToDouble());
  return values;
}

/// One input of the mask expression, readable at any index of the scores:
/// either constant data (with its own shape, broadcast numpy-style) or one
/// scalar value not known at compile time.
struct MaskLeaf {
  SmallVector<int64_t> shape;
  /// Row-major constant data; for an i1 condition 0 or 1.
  std::vector<double> values;
  /// The scalar when the leaf is not constant.
  Value unknownScalar;
  /// Strides into `values` for each dim of the scores, 0 where broadcast.
  SmallVector<int64_t> strides;

  bool isSplat() const { return !unknownScalar && values.size() == 1; }
  double at(ArrayRef<int64_t> index) const {
    if (values.size() == 1)
      return values.front();
    int64_t offset = 0;
    for (auto [position, stride] : llvm::zip(index, strides))
      offset += position * stride;
    return values[offset];
  }
};

/// Reads `value` as a mask leaf, looking through broadcasts and
/// leading-unit reshapes (the leaf broadcasts against the scores anyway).
std::optional<MaskLeaf> readLeaf(Value value) {
  value = stripMaskBroadcasts(value);
  MaskLeaf leaf;
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (std::optional<std::vector<double>> values = readConstant(value)) {
    leaf.values = std::move(*values);
    // A splat holds one value: read it as a scalar.
    if (leaf.values.size() == 1)
      return leaf;
    leaf.shape.assign(type.getShape().begin(), type.getShape().end());
    return leaf;
  }
  if (isScalarShaped(type)) {
    leaf.unknownScalar = value;
    return leaf;
  }
  return std::nullopt;
}

/// Fills `leaf.strides` for reading it at an index of `scoresShape`; false
/// when the leaf does not broadcast to it.
bool computeStrides(MaskLeaf &leaf, ArrayRef<int64_t> scoresShape) {
  int64_t rank = scoresShape.size();
  int64_t leafRank = leaf.shape.size();
  if (leafRank > rank)
    return false;
  leaf.strides.assign(rank, 0);
  int64_t stride = 1;
  for (int64_t dim = leafRank - 1; dim >= 0; --dim) {
    int64_t scoresDim = rank - leafRank + dim;
    if (leaf.shape[dim] != 1) {
      if (leaf.shape[dim] != scoresShape[scoresDim])
        return false;
      leaf.strides[scoresDim] = stride;
    }
    stride *= leaf.shape[dim];
  }
  return true;
}

/// Whether `value` hides its key.
bool hides(double value) { return value <= kHidingThreshold; }

//===----------------------------------------------------------------------===//
// Reading the mask's arithmetic
//===----------------------------------------------------------------------===//

/// An integer function of the query index i and the key index j of the
/// scores, `query * i + key * j + offset`, the same in every batch and head:
/// a position vector (query or key positions are i or j plus a constant),
/// or a difference of two.
struct AffinePositions {
  int64_t query = 0, key = 0, offset = 0;
};

/// `value` as an AffinePositions, when it is one: a constant whose entries
/// fit one exactly, or the sum or difference of two.
std::optional<AffinePositions>
readAffinePositions(Value value, ArrayRef<int64_t> scoresShape) {
  value = stripMaskBroadcasts(value);
  auto combine = [&](Value lhs, Value rhs,
                     int64_t sign) -> std::optional<AffinePositions> {
    std::optional<AffinePositions> a = readAffinePositions(lhs, scoresShape);
    std::optional<AffinePositions> b = readAffinePositions(rhs, scoresShape);
    if (!a || !b)
      return std::nullopt;
    return AffinePositions{a->query + sign * b->query, a->key + sign * b->key,
                           a->offset + sign * b->offset};
  };
  if (auto add = value.getDefiningOp<tess::AddOp>())
    return combine(add.getLhs(), add.getRhs(), 1);
  if (auto sub = value.getDefiningOp<tess::SubOp>())
    return combine(sub.getLhs(), sub.getRhs(), -1);

  std::optional<MaskLeaf> leaf = readLeaf(value);
  if (!leaf || leaf->unknownScalar)
    return std::nullopt;
  for (double number : leaf->values)
    if (number != std::floor(number) ||
        std::fabs(number) >= kLargestExactInteger)
      return std::nullopt;
  if (leaf->isSplat())
    return AffinePositions{0, 0, static_cast<int64_t>(leaf->values.front())};
  if (scoresShape.size() != 4 || !computeStrides(*leaf, scoresShape))
    return std::nullopt;
  // Fit from the first entries, then check every entry against the fit.
  auto at = [&](int64_t i, int64_t j) {
    return static_cast<int64_t>(leaf->at({0, 0, i, j}));
  };
  AffinePositions fit;
  fit.offset = at(0, 0);
  if (leaf->strides[2] != 0)
    fit.query = at(1, 0) - fit.offset;
  if (leaf->strides[3] != 0)
    fit.key = at(0, 1) - fit.offset;
  // Walk the leaf's own entries, each with its index in the scores.
  int64_t leafRank = leaf->shape.size();
  SmallVector<int64_t, 4> index(leafRank, 0);
  for (double number : leaf->values) {
    int64_t i = 0, j = 0;
    if (leafRank >= 2)
      i = index[leafRank - 2];
    if (leafRank >= 1)
      j = index[leafRank - 1];
    if (static_cast<int64_t>(number) !=
        fit.query * i + fit.key * j + fit.offset)
      return std::nullopt;
    for (int64_t dim = leafRank - 1; dim >= 0; --dim) {
      if (++index[dim] < leaf->shape[dim])
        break;
      index[dim] = 0;
    }
  }
  return fit;
}

/// The keys a condition lets query i see, as the offsets d = j - i from
/// `lowest` to `highest` (each unbounded when absent), or none at all.
struct KeyBand {
  std::optional<int64_t> lowest, highest;
  bool empty = false;

  static KeyBand all() { return KeyBand{}; }
  static KeyBand none() { return KeyBand{std::nullopt, std::nullopt, true}; }
  bool isAll() const { return !empty && !lowest && !highest; }

  KeyBand intersect(const KeyBand &other) const {
    if (empty || other.empty)
      return none();
    KeyBand result;
    result.lowest = !lowest         ? other.lowest
                    : !other.lowest ? lowest
                                    : std::max(*lowest, *other.lowest);
    result.highest = !highest         ? other.highest
                     : !other.highest ? highest
                                      : std::min(*highest, *other.highest);
    if (result.lowest && result.highest && *result.lowest > *result.highest)
      return none();
    return result;
  }
  /// The union, when it is one band (the two overlap or touch).
  std::optional<KeyBand> unite(const KeyBand &other) const {
    if (empty)
      return other;
    if (other.empty)
      return *this;
    // Overlap or touch: neither starts after the other ends (+1).
    auto startsAfter = [](const KeyBand &a, const KeyBand &b) {
      return a.lowest && b.highest && *a.lowest > *b.highest + 1;
    };
    if (startsAfter(*this, other) || startsAfter(other, *this))
      return std::nullopt;
    KeyBand result;
    if (lowest && other.lowest)
      result.lowest = std::min(*lowest, *other.lowest);
    if (highest && other.highest)
      result.highest = std::max(*highest, *other.highest);
    return result;
  }
  /// The complement, when it is one band (this one is unbounded on a side).
  std::optional<KeyBand> complement() const {
    if (empty)
      return all();
    if (isAll())
      return none();
    if (lowest && highest)
      return std::nullopt;
    if (highest)
      return KeyBand{*highest + 1, std::nullopt, false};
    return KeyBand{std::nullopt, *lowest - 1, false};
  }
};

/// The band of d where `d predicate bound` holds.
std::optional<KeyBand> bandWhere(tess::ComparisonPredicate predicate,
                                 int64_t bound) {
  switch (predicate) {
  case tess::ComparisonPredicate::eq:
    return KeyBand{bound, bound, false};
  case tess::ComparisonPredicate::lt:
    return KeyBand{std::nullopt, bound - 1, false};
  case tess::ComparisonPredicate::le:
    return KeyBand{std::nullopt, bound, false};
  case tess::ComparisonPredicate::gt:
    return KeyBand{bound + 1, std::nullopt, false};
  case tess::ComparisonPredicate::ge:
    return KeyBand{bound, std::nullopt, false};
  case tess::ComparisonPredicate::ne:
    return std::nullopt;
  }
  return std::nullopt;
}

/// `predicate` with its operands swapped: a < b is b > a.
tess::ComparisonPredicate swapped(tess::ComparisonPredicate predicate) {
  switch (predicate) {
  case tess::ComparisonPredicate::lt:
    return tess::ComparisonPredicate::gt;
  case tess::ComparisonPredicate::le:
    return tess::ComparisonPredicate::ge;
  case tess::ComparisonPredicate::gt:
    return tess::ComparisonPredicate::lt;
  case tess::ComparisonPredicate::ge:
    return tess::ComparisonPredicate::le;
  default:
    return predicate;
  }
}

/// Whether `value predicate 0` holds.
bool holds(tess::ComparisonPredicate predicate, int64_t value) {
  switch (predicate) {
  case tess::ComparisonPredicate::eq:
    return value == 0;
  case tess::ComparisonPredicate::ne:
    return value != 0;
  case tess::ComparisonPredicate::lt:
    return value < 0;
  case tess::ComparisonPredicate::le:
    return value <= 0;
  case tess::ComparisonPredicate::gt:
    return value > 0;
  case tess::ComparisonPredicate::ge:
    return value >= 0;
  }
  return false;
}

/// Constant conditions are read entry by entry up to this many entries of
/// the scores (a part of a mask that was small enough to fold).
constexpr int64_t kLargestScannedCondition = int64_t(1) << 22;

/// The band a constant i1 condition keeps, when it is one: the kept
/// entries of every row are exactly the offsets from the smallest to the
/// largest kept one.
std::optional<KeyBand> readConstantBand(MaskLeaf &leaf,
                                        ArrayRef<int64_t> scoresShape) {
  if (scoresShape.size() != 4 || !computeStrides(leaf, scoresShape))
    return std::nullopt;
  // Batch and head dims the condition does not vary along are read once.
  int64_t batches = leaf.strides[0] ? scoresShape[0] : 1;
  int64_t heads = leaf.strides[1] ? scoresShape[1] : 1;
  int64_t querySeq = scoresShape[2], keySeq = scoresShape[3];
  if (batches * heads * querySeq * keySeq > kLargestScannedCondition)
    return std::nullopt;
  std::optional<int64_t> lowest, highest;
  auto forEach = [&](auto visit) {
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < querySeq; ++i)
          for (int64_t j = 0; j < keySeq; ++j)
            visit(leaf.at({b, h, i, j}) != 0.0, j - i);
  };
  forEach([&](bool kept, int64_t offset) {
    if (!kept)
      return;
    lowest = lowest ? std::min(*lowest, offset) : offset;
    highest = highest ? std::max(*highest, offset) : offset;
  });
  if (!lowest)
    return KeyBand::none();
  bool isBand = true;
  forEach([&](bool kept, int64_t offset) {
    isBand &= kept == (offset >= *lowest && offset <= *highest);
  });
  if (!isBand)
    return std::nullopt;
  // Offsets the scores do not have bound nothing.
  KeyBand band;
  if (*lowest > -(querySeq - 1))
    band.lowest = lowest;
  if (*highest < keySeq - 1)
    band.highest = highest;
  return band;
}

/// The band an i1 condition over the scores keeps, when it is one.
std::optional<KeyBand> readBand(Value condition,
                                ArrayRef<int64_t> scoresShape) {
  condition = stripMaskBroadcasts(condition);
  if (auto compare = condition.getDefiningOp<tess::CompareOp>()) {
    // lhs - rhs = query * i + key * j + offset, compared with 0.
    std::optional<AffinePositions> lhs =
        readAffinePositions(compare.getLhs(), scoresShape);
    std::optional<AffinePositions> rhs =
        readAffinePositions(compare.getRhs(), scoresShape);
    if (!lhs || !rhs)
      return std::nullopt;
    int64_t query = lhs->query - rhs->query, key = lhs->key - rhs->key;
    int64_t offset = lhs->offset - rhs->offset;
    tess::ComparisonPredicate predicate = compare.getPredicate();
    if (query == 0 && key == 0)
      return holds(predicate, offset) ? KeyBand::all() : KeyBand::none();
    // (j - i) + offset  P 0  <=>  d P -offset
    if (key == 1 && query == -1)
      return bandWhere(predicate, -offset);
    // -(j - i) + offset  P 0  <=>  offset P d  <=>  d P' offset
    if (key == -1 && query == 1)
      return bandWhere(swapped(predicate), offset);
    return std::nullopt;
  }
  // A logical op's band from its operands' bands.
  auto combineBands = [&](Value lhs, Value rhs,
                          auto combine) -> std::optional<KeyBand> {
    std::optional<KeyBand> a = readBand(lhs, scoresShape);
    std::optional<KeyBand> b = readBand(rhs, scoresShape);
    if (!a || !b)
      return std::nullopt;
    return combine(*a, *b);
  };
  if (auto both = condition.getDefiningOp<tess::LogicalAndOp>())
    return combineBands(
        both.getLhs(), both.getRhs(),
        [](const KeyBand &a, const KeyBand &b) -> std::optional<KeyBand> {
          return a.intersect(b);
        });
  if (auto either = condition.getDefiningOp<tess::LogicalOrOp>())
    return combineBands(
        either.getLhs(), either.getRhs(),
        [](const KeyBand &a, const KeyBand &b) { return a.unite(b); });
  if (auto negation = condition.getDefiningOp<tess::LogicalNotOp>()) {
    std::optional<KeyBand> band = readBand(negation.getInput(), scoresShape);
    if (!band)
      return std::nullopt;
    return band->complement();
  }
  std::optional<MaskLeaf> leaf = readLeaf(condition);
  if (!leaf || leaf->unknownScalar)
    return std::nullopt;
  // One value: the exporter's all-true `new_ones`.
  if (leaf->isSplat())
    return leaf->values.front() != 0.0 ? KeyBand::all() : KeyBand::none();
  return readConstantBand(*leaf, scoresShape);
}

/// What keeping the band `band` of scores `[.., q_seq, kv_seq]` is.
MaskKind kindOfBand(const KeyBand &band, int64_t querySeq, int64_t keySeq) {
  if (band.empty)
    return {MaskKind::Other, 0};
  // The offsets the scores have: -(q_seq - 1) to kv_seq - 1.
  int64_t lowestOffset = -(querySeq - 1), highestOffset = keySeq - 1;
  bool hidesBelow = band.lowest && *band.lowest > lowestOffset;
  bool hidesAbove = band.highest && *band.highest < highestOffset;
  if (!hidesBelow && !hidesAbove)
    return {MaskKind::HidesNothing, 0};
  int64_t diagonal = keySeq - querySeq;
  if (!hidesAbove || *band.highest != diagonal || querySeq > keySeq)
    return {MaskKind::Other, 0};
  if (!hidesBelow)
    return {MaskKind::Causal, 0};
  // Keys diagonal - window < d <= diagonal.
  return {MaskKind::Causal, diagonal - *band.lowest + 1};
}

/// The arithmetic reading (see MaskClassificationCache::classify); nullopt when
/// the mask is not `where(C, kept, hidden)` of a condition made of positions.
std::optional<MaskKind> classifyFromArithmetic(Value mask,
                                               ArrayRef<int64_t> scoresShape) {
  auto where = stripMaskBroadcasts(mask).getDefiningOp<tess::WhereOp>();
  if (!where || scoresShape.size() != 4)
    return std::nullopt;
  std::optional<MaskLeaf> onTrue = readLeaf(where.getOnTrue());
  std::optional<MaskLeaf> onFalse = readLeaf(where.getOnFalse());
  if (!onTrue || !onFalse || !(onTrue->isSplat() || onTrue->unknownScalar) ||
      !(onFalse->isSplat() || onFalse->unknownScalar))
    return std::nullopt;
  // A run-time branch keeps its keys (any uniform kept value cancels in the
  // softmax); a constant one keeps them when finite and above the threshold.
  auto keeps = [](const MaskLeaf &leaf) -> std::optional<bool> {
    if (leaf.unknownScalar)
      return true;
    double value = leaf.values.front();
    if (std::isnan(value) || (std::isinf(value) && value > 0))
      return std::nullopt;
    return !hides(value);
  };
  std::optional<bool> trueKeeps = keeps(*onTrue), falseKeeps = keeps(*onFalse);
  if (!trueKeeps || !falseKeeps || *trueKeeps == *falseKeeps)
    return std::nullopt;
  // where(not C, a, b) is where(C, b, a): peeled here, since the
  // complement of a band bounded on both sides is no band.
  Value condition = stripMaskBroadcasts(where.getCondition());
  bool keptWhenTrue = *trueKeeps;
  while (auto negation = condition.getDefiningOp<tess::LogicalNotOp>()) {
    condition = stripMaskBroadcasts(negation.getInput());
    keptWhenTrue = !keptWhenTrue;
  }
  std::optional<KeyBand> band = readBand(condition, scoresShape);
  if (band && !keptWhenTrue)
    band = band->complement();
  if (!band)
    return std::nullopt;
  return kindOfBand(*band, scoresShape[2], scoresShape[3]);
}

//===----------------------------------------------------------------------===//
// Reading the mask's values
//===----------------------------------------------------------------------===//

/// One mask entry: hidden, or kept with a constant or an unknown value.
struct MaskEntry {
  bool hidden = false;
  std::variant<double, Value> kept;
};

/// The value reading (see MaskClassificationCache::classify).
///
/// The mask is `where(C, a, b)` (broadcast to the scores) or a constant. An
/// entry is hidden when its value is at or below kHidingThreshold. All kept
/// entries must hold one and the same scalar: softmax is unchanged when the
/// same finite amount is added to every kept score of a row (it cancels
/// between numerator and denominator), so a uniform kept value, even one not
/// known at compile time such as GPT-2's `lifted_tensor_0` parameter, may be
/// dropped. Every batch and head slice is checked, not just the first: the
/// constant is a broadcast in practice, but nothing guarantees it.
MaskKind classifyFromValues(Value mask, ArrayRef<int64_t> scoresShape) {
  const MaskKind other{MaskKind::Other, 0};
  // Decompose the mask into condition and branches (no condition: the mask
  // is its own single leaf, read as the "true" branch).
  Value stripped = stripMaskBroadcasts(mask);
  std::optional<MaskLeaf> condition, onTrue, onFalse;
  if (auto where = stripped.getDefiningOp<tess::WhereOp>()) {
    condition = readLeaf(where.getCondition());
    onTrue = readLeaf(where.getOnTrue());
    onFalse = readLeaf(where.getOnFalse());
    // An unknown condition says nothing about which entries are hidden.
    if (!condition || condition->unknownScalar || !onTrue || !onFalse)
      return other;
  } else {
    onTrue = readLeaf(stripped);
    if (!onTrue)
      return other;
  }

  int64_t batch = scoresShape[0], heads = scoresShape[1];
  int64_t querySeq = scoresShape[2], keySeq = scoresShape[3];
  for (MaskLeaf *leaf : {condition ? &*condition : nullptr, &*onTrue,
                         onFalse ? &*onFalse : nullptr})
    if (leaf && !leaf->unknownScalar && leaf->values.size() > 1 &&
        !computeStrides(*leaf, scoresShape))
      return other;

  // Batch and head dims that no leaf varies along need visiting once.
  auto varies = [&](int dim) {
    for (MaskLeaf *leaf : {condition ? &*condition : nullptr, &*onTrue,
                           onFalse ? &*onFalse : nullptr})
      if (leaf && leaf->values.size() > 1 && leaf->strides[dim] != 0)
        return true;
    return false;
  };
  int64_t batchCount = varies(0) ? batch : 1;
  int64_t headCount = varies(1) ? heads : 1;

  auto entryAt = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> MaskEntry {
    int64_t index[] = {b, h, i, j};
    const MaskLeaf &chosen =
        !condition || condition->at(index) != 0.0 ? *onTrue : *onFalse;
    if (chosen.unknownScalar)
      return MaskEntry{false, chosen.unknownScalar};
    double value = chosen.at(index);
    return MaskEntry{hides(value), value};
  };

  // The window a band mask would have: the kept keys that end the last
  // query's row (whose diagonal is the last key). Every row is then checked
  // against the band of that width.
  int64_t window = 0;
  if (querySeq > 0)
    for (int64_t j = keySeq - 1;
         j >= 0 && !entryAt(0, 0, querySeq - 1, j).hidden; --j)
      ++window;

  bool hidesNothing = true, band = true;
  std::optional<std::variant<double, Value>> keptValue;
  int64_t diagonal = keySeq - querySeq;
  for (int64_t b = 0; b < batchCount; ++b)
    for (int64_t h = 0; h < headCount; ++h)
      for (int64_t i = 0; i < querySeq; ++i)
        for (int64_t j = 0; j < keySeq; ++j) {
          MaskEntry entry = entryAt(b, h, i, j);
          if (const double *number = std::get_if<double>(&entry.kept);
              number && std::isnan(*number))
            return other;
          if (entry.hidden) {
            hidesNothing = false;
          } else {
            // +inf, or kept entries that differ, change the softmax.
            if (const double *number = std::get_if<double>(&entry.kept);
                number && std::isinf(*number))
              return other;
            if (!keptValue)
              keptValue = entry.kept;
            else if (*keptValue != entry.kept)
              return other;
          }
          bool inBand = j <= i + diagonal && j > i + diagonal - window;
          band &= entry.hidden != inBand;
        }
  if (hidesNothing)
    return {MaskKind::HidesNothing, 0};
  if (band && window > 0 && querySeq <= keySeq)
    return {MaskKind::Causal, window >= keySeq ? 0 : window};
  return other;
}

/// What a mask leaf is, cheaply: its constant attribute (uniqued by the
/// context, so equal masks share one) or, for a run-time scalar, its value.
const void *leafIdentity(Value value) {
  value = stripMaskBroadcasts(value);
  Attribute attribute;
  if (matchPattern(value, m_Constant(&attribute)))
    return attribute.getAsOpaquePointer();
  if (auto parameter = value.getDefiningOp<tess::ParameterOp>();
      parameter && !parameter.getTrainable() && parameter.getValue())
    return parameter.getValue()->getAsOpaquePointer();
  return value.getAsOpaquePointer();
}

} // namespace

MaskKind MaskClassificationCache::classify(Value mask,
                                           ArrayRef<int64_t> scoresShape) {
  if (std::optional<MaskKind> kind = classifyFromArithmetic(mask, scoresShape))
    return *kind;
  Value stripped = stripMaskBroadcasts(mask);
  Key key;
  if (auto where = stripped.getDefiningOp<tess::WhereOp>())
    key.leaves = {leafIdentity(where.getCondition()),
                  leafIdentity(where.getOnTrue()),
                  leafIdentity(where.getOnFalse())};
  else
    key.leaves = {leafIdentity(stripped), nullptr, nullptr};
  key.scoresShape.assign(scoresShape.begin(), scoresShape.end());
  for (const auto &[known, kind] : entries)
    if (known == key)
      return kind;
  MaskKind kind = classifyFromValues(mask, scoresShape);
  entries.emplace_back(std::move(key), kind);
  return kind;
}
