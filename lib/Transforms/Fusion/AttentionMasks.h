//===- AttentionMasks.h - what an additive attention mask does -*- C++ -*-===//
//
// tess-fuse-attention turns `softmax(scale * Q K^T + M) V` into one
// `tess.attention`; what it does with M is decided here. A mask that hides
// a band of keys around the causal diagonal (causal, Mistral's sliding
// window) becomes the op's `causal` flag and `window`, which a kernel
// applies by skipping blocks; one that hides nothing is dropped; anything
// else stays an operand. Private to lib/Transforms/Fusion.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_FUSION_ATTENTIONMASKS_H
#define TESSERA_LIB_TRANSFORMS_FUSION_ATTENTIONMASKS_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::fusion {

/// What an additive attention mask over scores `[batch, heads, q_seq,
/// kv_seq]` does, with o = kv_seq - q_seq.
struct MaskKind {
  enum Effect {
    /// Every entry keeps its key: the mask can be dropped.
    HidesNothing,
    /// Entry (i, j) keeps exactly the keys i + o - window < j <= i + o
    /// (window 0: every j <= i + o).
    Causal,
    /// Anything else, or not known at compile time: the mask stays an
    /// operand.
    Other,
  };
  Effect effect = Other;
  /// Keys each query sees under `Causal`; 0 when the band is unbounded
  /// below (plain causal).
  int64_t window = 0;

  bool operator==(const MaskKind &other) const {
    return effect == other.effect && window == other.window;
  }
};

/// Classifies masks (each already checked to broadcast to its scores).
///
/// Two readings, tried in order:
/// - the mask's arithmetic: `where(C, kept, hidden)` whose condition C is
///   built from comparisons of token positions (`kv_pos <= q_pos`,
///   `kv_pos > q_pos - window`, `seq_id[q] == seq_id[kv]`, ...) combined
///   with and / or / not. Positions are compile-time vectors over the query
///   or key axis, so the band each comparison allows is found from them
///   alone, in time linear in the sequence: the [batch, 1, seq, seq]
///   condition, which the importer leaves unfolded, is never evaluated.
/// - the mask's values, when it is a constant (or a `where` of constants):
///   every entry is read, so only for masks small enough to have been
///   folded.
///
/// Every layer of a Transformer adds the same mask, and reading an
/// [8, 1, 1024, 1024] constant takes a tenth of a second: the value reading
/// is done once per distinct mask and pass run. Its key is the mask's
/// leaves (condition and branches of its `where`, or the constant itself)
/// and the scores' shape, not the mask Value, whose op may be erased
/// mid-pass. The arithmetic reading is cheap and not cached.
class MaskClassificationCache {
public:
  MaskKind classify(mlir::Value mask, llvm::ArrayRef<int64_t> scoresShape);

private:
  struct Key {
    std::array<const void *, 3> leaves;
    llvm::SmallVector<int64_t, 4> scoresShape;
    bool operator==(const Key &other) const {
      return leaves == other.leaves && scoresShape == other.scoresShape;
    }
  };
  /// A model has one or two masks: a list beats a hash map here.
  std::vector<std::pair<Key, MaskKind>> entries;
};

} // namespace tessera::fusion

#endif // TESSERA_LIB_TRANSFORMS_FUSION_ATTENTIONMASKS_H
