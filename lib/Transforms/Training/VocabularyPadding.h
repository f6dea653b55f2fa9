//===- VocabularyPadding.h - an aligned class dim for the loss -*- C++ -*-===//
//
// Internal to tess-build-training. A vocabulary like GPT-2's 50,257 makes
// the [tokens, vocabulary] logits and their gradient rows that start off
// 16-byte boundaries, and every GEMM of the head (the logits, the input's
// gradient, the weight's gradient) misaligned; cuBLASLt's fast kernels then
// need the operands copied into padded scratch, a tenth of a GPT-2 124M
// step on an H200. Padding the head's classes to a multiple (Megatron's
// make-vocab-size-divisible-by, nanoGPT's 50,304) aligns them all at the
// price of a copy of the weight, a thousandth of that.
//
// The head `y = linear(x, W, b)` with V classes becomes
//   y' = linear(x, concat(W, 0), concat(b or 0, lowest))   with V' classes:
// the padded classes' logits are the lowest finite value of the compute
// type (the zero rows contribute exactly 0), so the softmax gives them
// probability 0, their loss gradient is 0, and the loss, the gradients of x,
// W and b are those of the unpadded head. Targets never name a padded
// class.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_TRAINING_VOCABULARYPADDING_H
#define TESSERA_LIB_TRANSFORMS_TRAINING_VOCABULARYPADDING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace tessera {

/// When `logits` is the result of a tess.linear (weight of rank 2) whose
/// classes (the last dim) are not a multiple of `multiple` (> 1), builds the
/// padded head at the builder's insertion point, erases the old one if
/// nothing else uses it, and returns the padded logits. Otherwise returns
/// `logits`.
mlir::Value padVocabulary(mlir::OpBuilder &builder, mlir::Value logits,
                          int64_t multiple);

} // namespace tessera

#endif // TESSERA_LIB_TRANSFORMS_TRAINING_VOCABULARYPADDING_H
