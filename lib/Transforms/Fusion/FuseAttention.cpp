//===- FuseAttention.cpp - tess-fuse-attention ----------------------------===//
//
// Scaled dot-product attention reaches the importer as two matmuls around a
// softmax, with the scale and the additive mask as separate elementwise ops.
// As one `tess.attention` it can run as a flash-attention kernel that never
// materializes the [S, S] scores, and the sharding search sees heads it can
// split. The mask is the delicate part: exporters fold a causal mask into a
// constant tensor (or a `where` between constants), and recognizing it turns
// a [B, 1, S, S] operand into the `causal` flag, which a kernel applies by
// skipping blocks instead of reading a tensor.
//
//===----------------------------------------------------------------------===//

#include "FusionMatchers.h"
#include "tessera/Transforms/Passes.h"

#include <array>

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <numeric>
#include <variant>

namespace tessera {
#define GEN_PASS_DEF_FUSEATTENTION
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

//===----------------------------------------------------------------------===//
// Mask classification
//===----------------------------------------------------------------------===//

/// An additive mask entry at or below this hides its key: softmax gives it a
/// weight of at most e^-10000 relative to a kept entry, i.e. exactly zero in
/// any float format. Exporters use -inf, the dtype's lowest value
/// (-3.4e38 for f32) or -10000 (older BERT code).
constexpr double kHidingThreshold = -1.0e4;

/// What an additive attention mask does.
enum class MaskEffect {
  /// Every entry keeps its key: the mask can be dropped.
  HidesNothing,
  /// Entry (i, j) hides exactly the keys j > i + (kv_seq - q_seq).
  Causal,
  /// Anything else, or not known at compile time: the mask stays an operand.
  Other,
};

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
};

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
  if (!llvm::isa<FloatType>(element))
    return std::nullopt;
  if (dense.isSplat())
    return std::vector<double>{
        dense.getSplatValue<APFloat>().convertToDouble()};
  for (const APFloat &number : dense.getValues<APFloat>())
    values.push_back(number.convertToDouble());
  return values;
}

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

/// Fills `leaf.strides` for reading it at an index of `scoresShape`.
void computeStrides(MaskLeaf &leaf, ArrayRef<int64_t> scoresShape) {
  int64_t rank = scoresShape.size();
  leaf.strides.assign(rank, 0);
  int64_t stride = 1;
  int64_t leafRank = leaf.shape.size();
  for (int64_t dim = leafRank - 1; dim >= 0; --dim) {
    int64_t scoresDim = rank - leafRank + dim;
    if (leaf.shape[dim] != 1)
      leaf.strides[scoresDim] = stride;
    stride *= leaf.shape[dim];
  }
}

/// One mask entry: hidden, or kept with a constant or an unknown value.
struct MaskEntry {
  bool hidden = false;
  std::variant<double, Value> kept;
};

/// Classifies the additive mask `mask` of scores shaped
/// `[batch, heads, q_seq, kv_seq]`.
///
/// The mask is `where(C, a, b)` (broadcast to the scores) or a constant. An
/// entry is hidden when its value is at or below kHidingThreshold. All kept
/// entries must hold one and the same scalar: softmax is unchanged when the
/// same finite amount is added to every kept score of a row (it cancels
/// between numerator and denominator), so a uniform kept value, even one not
/// known at compile time such as GPT-2's `lifted_tensor_0` parameter, may be
/// dropped. Every batch and head slice is checked, not just the first: the
/// constant is a broadcast in practice, but nothing guarantees it.
MaskEffect classifyMask(Value mask, ArrayRef<int64_t> scoresShape) {
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
      return MaskEffect::Other;
  } else {
    onTrue = readLeaf(stripped);
    if (!onTrue)
      return MaskEffect::Other;
  }

  int64_t batch = scoresShape[0], heads = scoresShape[1];
  int64_t querySeq = scoresShape[2], keySeq = scoresShape[3];
  for (MaskLeaf *leaf : {condition ? &*condition : nullptr, &*onTrue,
                         onFalse ? &*onFalse : nullptr})
    if (leaf)
      computeStrides(*leaf, scoresShape);

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

  auto read = [](const MaskLeaf &leaf, ArrayRef<int64_t> index) -> double {
    if (leaf.values.size() == 1)
      return leaf.values.front();
    int64_t offset = 0;
    for (auto [position, stride] : llvm::zip(index, leaf.strides))
      offset += position * stride;
    return leaf.values[offset];
  };
  auto entryOf = [&](const MaskLeaf &leaf,
                     ArrayRef<int64_t> index) -> MaskEntry {
    if (leaf.unknownScalar)
      return MaskEntry{false, leaf.unknownScalar};
    double value = read(leaf, index);
    return MaskEntry{value <= kHidingThreshold, value};
  };

  bool hidesNothing = true, causal = true;
  std::optional<std::variant<double, Value>> keptValue;
  int64_t causalOffset = keySeq - querySeq;
  for (int64_t b = 0; b < batchCount; ++b)
    for (int64_t h = 0; h < headCount; ++h)
      for (int64_t i = 0; i < querySeq; ++i)
        for (int64_t j = 0; j < keySeq; ++j) {
          int64_t index[] = {b, h, i, j};
          const MaskLeaf &chosen =
              !condition || read(*condition, index) != 0.0 ? *onTrue
                                                           : *onFalse;
          MaskEntry entry = entryOf(chosen, index);
          if (const double *number = std::get_if<double>(&entry.kept);
              number && std::isnan(*number))
            return MaskEffect::Other;
          if (entry.hidden) {
            hidesNothing = false;
          } else {
            // +inf, or kept entries that differ, change the softmax.
            if (const double *number = std::get_if<double>(&entry.kept);
                number && std::isinf(*number))
              return MaskEffect::Other;
            if (!keptValue)
              keptValue = entry.kept;
            else if (*keptValue != entry.kept)
              return MaskEffect::Other;
          }
          causal &= entry.hidden == (j > i + causalOffset);
        }
  if (hidesNothing)
    return MaskEffect::HidesNothing;
  if (causal && querySeq <= keySeq)
    return MaskEffect::Causal;
  return MaskEffect::Other;
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

/// Every layer of a Transformer adds the same mask, and reading an
/// [8, 1, 1024, 1024] constant takes a tenth of a second: classify each
/// distinct mask once per pass run. The key is the mask's leaves (condition
/// and branches of its `where`, or the constant itself) and the scores'
/// shape, not the mask Value, whose op may be erased mid-pass.
class MaskClassificationCache {
public:
  MaskEffect classify(Value mask, ArrayRef<int64_t> scoresShape) {
    Value stripped = stripMaskBroadcasts(mask);
    Key key;
    if (auto where = stripped.getDefiningOp<tess::WhereOp>())
      key.leaves = {leafIdentity(where.getCondition()),
                    leafIdentity(where.getOnTrue()),
                    leafIdentity(where.getOnFalse())};
    else
      key.leaves = {leafIdentity(stripped), nullptr, nullptr};
    key.scoresShape.assign(scoresShape.begin(), scoresShape.end());
    for (const auto &[known, effect] : entries)
      if (known == key)
        return effect;
    MaskEffect effect = classifyMask(mask, scoresShape);
    entries.emplace_back(std::move(key), effect);
    return effect;
  }

private:
  struct Key {
    std::array<const void *, 3> leaves;
    SmallVector<int64_t, 4> scoresShape;
    bool operator==(const Key &other) const {
      return leaves == other.leaves && scoresShape == other.scoresShape;
    }
  };
  /// A model has one or two masks: a list beats a hash map here.
  std::vector<std::pair<Key, MaskEffect>> entries;
};

//===----------------------------------------------------------------------===//
// Operand matching
//===----------------------------------------------------------------------===//

/// The splat value of a scale factor: a constant, or the square root of one.
/// PyTorch's decomposed scaled_dot_product_attention multiplies Q and K^T by
/// sqrt(scale) each, and its Sqrt reaches the pattern unfolded when the
/// scale came from a CastLike of a run-time tensor.
std::optional<double> getSplatFactor(Value factor) {
  if (std::optional<double> splat = getSplatFloatAsWritten(factor))
    return splat;
  if (auto root = factor.getDefiningOp<tess::SqrtOp>())
    if (std::optional<double> splat = getSplatFloatAsWritten(root.getInput());
        splat && *splat >= 0)
      return std::sqrt(*splat);
  return std::nullopt;
}

/// When `value` is `input * s` or `s * input` or `input / d` with a positive
/// scalar constant (or the square root of one) and no broadcast of `input`,
/// returns `input` and multiplies `scale` by s (or 1/d).
Value peelScale(Value value, double &scale) {
  auto sameType = [&](Value input) { return input.getType() == value.getType(); };
  if (auto mul = value.getDefiningOp<tess::MulOp>()) {
    Value input;
    double factor = 0;
    if (matchEitherOrder(mul.getLhs(), mul.getRhs(), [&](Value x, Value c) {
          std::optional<double> splat = getSplatFactor(c);
          if (!splat || *splat <= 0 || !sameType(x))
            return false;
          input = x;
          factor = *splat;
          return true;
        })) {
      scale *= factor;
      return input;
    }
  }
  if (auto div = value.getDefiningOp<tess::DivOp>()) {
    std::optional<double> divisor = getSplatFloatAsWritten(div.getRhs());
    if (divisor && *divisor > 0 && sameType(div.getLhs())) {
      scale /= *divisor;
      return div.getLhs();
    }
  }
  return value;
}

/// A value with its last two dims swapped, not yet built: either an existing
/// value (the input of a transpose that already swaps them) or a transpose
/// still to create. Nothing is created until the whole pattern has matched,
/// so that a failed match leaves the IR untouched.
struct SwappedValue {
  Value input;
  /// Empty when `input` itself is the swapped value.
  SmallVector<int64_t> permutation;
  RankedTensorType type;

  Value materialize(PatternRewriter &rewriter, Location loc) const {
    if (permutation.empty())
      return input;
    return tess::TransposeOp::create(rewriter, loc, type, input, permutation);
  }
};

/// `value` with its last two dims swapped; a transpose defining `value` is
/// composed with the swap rather than stacked under a second transpose.
SwappedValue swapInnerDims(Value value) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> swap(rank);
  std::iota(swap.begin(), swap.end(), 0);
  std::swap(swap[rank - 2], swap[rank - 1]);

  SwappedValue result{value, swap, nullptr};
  if (auto transpose = value.getDefiningOp<tess::TransposeOp>()) {
    result.input = transpose.getInput();
    result.permutation.clear();
    for (int64_t dim : swap)
      result.permutation.push_back(transpose.getPermutation()[dim]);
  }
  if (llvm::equal(result.permutation, llvm::seq<int64_t>(0, rank)))
    result.permutation.clear();
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[rank - 2], shape[rank - 1]);
  result.type = RankedTensorType::get(shape, type.getElementType());
  return result;
}

/// `value` unchanged, as a SwappedValue with nothing to build.
SwappedValue asIs(Value value) {
  return SwappedValue{value, {}, llvm::cast<RankedTensorType>(value.getType())};
}

/// Grouped-query attention repeats each K/V head n times as
/// `reshape(broadcast(reshape(x: [B, Hkv, S, D] -> [B, Hkv, 1, S, D])
/// -> [B, Hkv, n, S, D]) -> [B, Hkv * n, S, D])`. Returns x, whose heads the
/// attention op groups itself, and sets `groups` to n; null when `value` is
/// not such a repeat.
///
/// The merge may also flatten batch and heads, `[B * Hkv * n, S, D]`: the
/// form in which the exporter's decomposed SDPA (enable_gqa) hands K to a
/// batched transpose (see matchRepeatedHeadsUnderBatchedSwap).
Value matchRepeatedHeads(Value value, int64_t &groups) {
  auto merge = value.getDefiningOp<tess::ReshapeOp>();
  if (!merge)
    return nullptr;
  auto broadcast = merge.getInput().getDefiningOp<tess::BroadcastOp>();
  if (!broadcast)
    return nullptr;
  auto unsqueeze = broadcast.getInput().getDefiningOp<tess::ReshapeOp>();
  if (!unsqueeze)
    return nullptr;
  Value x = unsqueeze.getInput();
  ArrayRef<int64_t> xShape = llvm::cast<RankedTensorType>(x.getType()).getShape();
  ArrayRef<int64_t> unsqueezed = unsqueeze.getType().getShape();
  ArrayRef<int64_t> repeated = broadcast.getType().getShape();
  ArrayRef<int64_t> merged = merge.getType().getShape();
  if (xShape.size() != 4 || unsqueezed.size() != 5 || repeated.size() != 5)
    return nullptr;
  int64_t b = xShape[0], heads = xShape[1], s = xShape[2], d = xShape[3];
  int64_t n = repeated[2];
  if (unsqueezed != ArrayRef<int64_t>{b, heads, 1, s, d} ||
      repeated != ArrayRef<int64_t>{b, heads, n, s, d} ||
      (merged != ArrayRef<int64_t>{b, heads * n, s, d} &&
       merged != ArrayRef<int64_t>{b * heads * n, s, d}))
    return nullptr;
  groups = n;
  return x;
}

/// K^T built from repeated heads flattened to `[B * H, S, D]`, transposed as
/// a batch of matrices and split again:
/// `reshape(transpose(repeat(x) : [B*H, S, D]) {0, 2, 1} -> [B, H, D, S])`.
/// `key` is that K^T with its inner dims still to swap back; returns x (as
/// matchRepeatedHeads), or null when `key` is not of that form.
Value matchRepeatedHeadsUnderBatchedSwap(Value swappedKey,
                                         ArrayRef<int64_t> permutation,
                                         int64_t &groups) {
  if (permutation != ArrayRef<int64_t>{0, 1, 3, 2})
    return nullptr;
  auto split = swappedKey.getDefiningOp<tess::ReshapeOp>();
  if (!split)
    return nullptr;
  auto transpose = split.getInput().getDefiningOp<tess::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef<int64_t>{0, 2, 1})
    return nullptr;
  ArrayRef<int64_t> flat = transpose.getType().getShape();
  ArrayRef<int64_t> keyT = split.getType().getShape();
  if (keyT.size() != 4 || flat[0] != keyT[0] * keyT[1] || flat[1] != keyT[2] ||
      flat[2] != keyT[3])
    return nullptr;
  Value x = matchRepeatedHeads(transpose.getInput(), groups);
  if (!x)
    return nullptr;
  ArrayRef<int64_t> xShape = llvm::cast<RankedTensorType>(x.getType()).getShape();
  if (xShape[0] != keyT[0] || xShape[1] * groups != keyT[1])
    return nullptr;
  return x;
}

/// PyTorch's decomposed scaled_dot_product_attention guards its
/// probabilities with `where(isnan(p), 0, p)`, isnan imported as
/// `compare ne, p, p`: a row whose keys are all hidden has softmax 0/0 = NaN
/// and gets weight 0 instead. tess.attention gives such a row weight 0
/// itself (as PyTorch does; see runtime/cpu/Attention.cpp), so the guard is
/// part of the attention. Returns p when `value` is that guard and p feeds
/// nothing else; null otherwise.
Value matchNanGuardedProbabilities(Value value) {
  auto guard = value.getDefiningOp<tess::WhereOp>();
  if (!guard || !value.hasOneUse())
    return nullptr;
  Value probabilities = guard.getOnFalse();
  auto isNan = guard.getCondition().getDefiningOp<tess::CompareOp>();
  if (!isNan || !isNan->hasOneUse() ||
      isNan.getPredicate() != tess::ComparisonPredicate::ne ||
      isNan.getLhs() != probabilities || isNan.getRhs() != probabilities ||
      probabilities.getType() != value.getType())
    return nullptr;
  std::optional<double> zero = getSplatFloatAsWritten(guard.getOnTrue());
  if (!zero || *zero != 0.0)
    return nullptr;
  for (Operation *user : probabilities.getUsers())
    if (user != isNan.getOperation() && user != guard.getOperation())
      return nullptr;
  return probabilities;
}

/// True when `value` is a softmax over its last dim.
bool isLastDimSoftmax(tess::SoftmaxOp softmax) {
  int64_t rank = softmax.getType().getRank();
  int64_t axis = softmax.getAxis();
  return axis == -1 || axis == rank - 1;
}

//===----------------------------------------------------------------------===//
// The pattern
//===----------------------------------------------------------------------===//

/// `softmax(scale * Q K^T + M) V` -> `tess.attention Q, K, V`, rooted at the
/// matmul by V.
struct FuseScaledDotProductAttention : OpRewritePattern<tess::MatmulOp> {
  FuseScaledDotProductAttention(MLIRContext *context,
                                MaskClassificationCache &masks)
      : OpRewritePattern(context), masks(masks) {}

  LogicalResult matchAndRewrite(tess::MatmulOp output,
                                PatternRewriter &rewriter) const override {
    if (output.getTransposeLhs())
      return rewriter.notifyMatchFailure(output, "probabilities transposed");
    // Training graphs drop out attention probabilities between softmax and
    // the matmul by V; the op applies that dropout itself.
    Value probabilities = output.getLhs();
    auto dropout = probabilities.getDefiningOp<tess::DropoutOp>();
    if (dropout && probabilities.hasOneUse())
      probabilities = dropout.getInput();
    else
      dropout = nullptr;
    // SDPA exports put a NaN guard between the softmax and the dropout.
    bool guarded = false;
    if (Value unguarded = matchNanGuardedProbabilities(probabilities)) {
      probabilities = unguarded;
      guarded = true;
    }
    auto softmax = probabilities.getDefiningOp<tess::SoftmaxOp>();
    if (!softmax || !(guarded || softmax.getResult().hasOneUse()) ||
        !isLastDimSoftmax(softmax) || softmax.getType().getRank() != 4)
      return rewriter.notifyMatchFailure(output, "lhs is not a softmax");
    RankedTensorType scoresType = softmax.getType();

    // Optional additive mask: softmax(scaled + M), operands in either order.
    Value logits = softmax.getInput();
    Value mask;
    if (auto add = logits.getDefiningOp<tess::AddOp>();
        add && logits.hasOneUse()) {
      matchEitherOrder(add.getLhs(), add.getRhs(), [&](Value scaled,
                                                       Value candidate) {
        double unused = 1.0;
        Value unscaled = scaled.hasOneUse() ? peelScale(scaled, unused) : scaled;
        if (scaled.getType() != scoresType ||
            !unscaled.getDefiningOp<tess::MatmulOp>())
          return false;
        logits = scaled;
        mask = candidate;
        return true;
      });
    }

    // Optional scale on the scores.
    double scale = 1.0;
    Value scores = logits;
    if (logits.hasOneUse())
      scores = peelScale(logits, scale);
    auto product = scores.getDefiningOp<tess::MatmulOp>();
    if (!product || !scores.hasOneUse() || product.getTransposeLhs() ||
        scores.getType() != scoresType)
      return rewriter.notifyMatchFailure(output, "no Q K^T product");

    // Q, and K from K^T (or from K itself with transpose_rhs); a scale on
    // either side multiplies the scores the same way.
    Value query = peelScale(product.getLhs(), scale);
    Value keyOperand = peelScale(product.getRhs(), scale);
    Value value = output.getRhs();
    if (llvm::cast<RankedTensorType>(query.getType()).getRank() != 4 ||
        llvm::cast<RankedTensorType>(keyOperand.getType()).getRank() != 4 ||
        llvm::cast<RankedTensorType>(value.getType()).getRank() != 4)
      return rewriter.notifyMatchFailure(output, "operands are not rank 4");

    MaskEffect effect = mask ? masks.classify(mask, scoresType.getShape())
                             : MaskEffect::HidesNothing;

    SwappedValue key = product.getTransposeRhs() ? asIs(keyOperand)
                                                 : swapInnerDims(keyOperand);
    SwappedValue values = output.getTransposeRhs() ? swapInnerDims(value)
                                                   : asIs(value);

    // Fold repeated K/V heads back when both K and V repeat by one factor.
    int64_t keyGroups = 0, valueGroups = 0;
    Value groupedKey =
        key.permutation.empty()
            ? matchRepeatedHeads(key.input, keyGroups)
            : matchRepeatedHeadsUnderBatchedSwap(key.input, key.permutation,
                                                 keyGroups);
    Value groupedValue = values.permutation.empty()
                             ? matchRepeatedHeads(values.input, valueGroups)
                             : nullptr;
    if (groupedKey && groupedValue && keyGroups == valueGroups) {
      key = asIs(groupedKey);
      values = asIs(groupedValue);
    }

    // The checks of tess.attention's verifier, made here so that a chain the
    // op cannot express stays unfused instead of failing verification.
    auto queryType = llvm::cast<RankedTensorType>(query.getType());
    RankedTensorType keyType = key.type, valueType = values.type;
    bool shapesAgree =
        queryType.getElementType() == keyType.getElementType() &&
        queryType.getElementType() == valueType.getElementType() &&
        keyType.getDimSize(0) == valueType.getDimSize(0) &&
        keyType.getDimSize(1) == valueType.getDimSize(1) &&
        keyType.getDimSize(2) == valueType.getDimSize(2) &&
        queryType.getDimSize(0) == keyType.getDimSize(0) &&
        queryType.getDimSize(3) == keyType.getDimSize(3) &&
        queryType.getDimSize(1) % keyType.getDimSize(1) == 0;
    SmallVector<int64_t> resultShape = {
        queryType.getDimSize(0), queryType.getDimSize(1),
        queryType.getDimSize(2), valueType.getDimSize(3)};
    if (!shapesAgree || output.getType().getShape() != ArrayRef(resultShape) ||
        (mask && llvm::cast<RankedTensorType>(mask.getType()).getElementType() !=
                     queryType.getElementType()))
      return rewriter.notifyMatchFailure(output, "operand shapes disagree");

    rewriter.setInsertionPoint(output);
    Value keyValue = key.materialize(rewriter, output.getLoc());
    Value valueValue = values.materialize(rewriter, output.getLoc());
    bool causal = effect == MaskEffect::Causal;
    Value maskOperand = effect == MaskEffect::Other ? mask : Value();
    auto attention = tess::AttentionOp::create(
        rewriter, output.getLoc(), output.getType(), query, keyValue,
        valueValue, maskOperand, causal, APFloat(scale),
        dropout ? dropout.getRate() : APFloat(0.0));
    rewriter.replaceOp(output, attention.getResult());
    // Dropout draws random numbers, so it is not erased as dead on its own.
    if (dropout)
      rewriter.eraseOp(dropout);
    return success();
  }

private:
  MaskClassificationCache &masks;
};

struct FuseAttentionPass
    : tessera::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    MaskClassificationCache masks;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseScaledDotProductAttention>(&getContext(), masks);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseAttentionPass() {
  return std::make_unique<FuseAttentionPass>();
}
