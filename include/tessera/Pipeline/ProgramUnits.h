//===- ProgramUnits.h - a training program cut into Transformer layers -*- C++ -*-===//
//
// The pipeline search moves whole layers between stages, so it first needs
// to know which ops of @forward_backward belong to which layer. A Transformer
// export names its parameters by layer (`transformer.h.3.attn.c_attn.weight`,
// `model.layers.3.self_attn.q_proj.weight`, `bert.encoder.layer.3.output...`):
// the first dot-separated component that is a number, with what precedes it,
// is the layer key. The program is cut into units, in the order their
// parameters are first used:
//
//   unit 0          the embedding: ops before the first layer (token and
//                   position embeddings) and parameters without a layer key
//                   first used there
//   units 1 .. L    one per layer key
//   unit L + 1      the head: parameters without a layer key first used after
//                   the layers (final norm, LM head), the logits and the loss
//
// Forward ops (those not depending on the loss gradient) take the largest
// unit among their operands, a parameter counting as the unit of its first
// use: the residual stream of layer 3 plus the output of layer 3's MLP is
// layer 3's. Backward ops take the largest unit among the forward values
// they read (the activations saved by that unit), a parameter counting as
// the unit of its last use (so a tied embedding's gradient in the head is
// the head's); a backward op reading only program inputs (the embedding's
// scatter-add of token ids) is the embedding's, and one reading no forward
// value at all (gradient sums) belongs with the backward op before it, since
// the backward is emitted layer by layer in reverse. A forward value
// computed from parameters alone (the head's padded copy of a tied
// embedding) counts, for a backward op, as the unit of its last forward
// reader: the head's input gradient, read off the padded weight, is the
// head's, not the embedding's.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_PROGRAMUNITS_H
#define TESSERA_PIPELINE_PROGRAMUNITS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::pipeline {

enum class UnitKind { Embedding, Layer, Head };

struct ProgramUnit {
  UnitKind kind = UnitKind::Layer;
  /// "embedding", "head", or the layer key ("transformer.h.3").
  std::string name;
  /// The parameters (argument numbers of @forward_backward) the unit's
  /// forward reads. A tied parameter is in every unit that reads it.
  llvm::SmallVector<unsigned, 16> parameters;
};

struct ProgramUnits {
  mlir::func::FuncOp forwardBackward;
  mlir::func::FuncOp optimizerStep;
  std::vector<ProgramUnit> units;
  /// The unit of every op of @forward_backward (the terminator excluded).
  llvm::DenseMap<mlir::Operation *, unsigned> unitOf;
  /// Ops of @forward_backward that depend on the loss gradient.
  llvm::DenseMap<mlir::Operation *, bool> isBackward;
  /// Forward ops computed from parameters, buffers and constants alone (a
  /// weight's cast to the compute type, the LM head's padded copy of a
  /// tied embedding), none of whose values is a result of the program:
  /// any stage can compute them again for itself rather than receive them.
  llvm::DenseSet<mlir::Operation *> parameterOnly;

  size_t layerCount() const { return units.size() - 2; }
};

/// The layer key of a parameter name ("transformer.h.3" for
/// "transformer.h.3.attn.c_attn.weight"), or nothing.
std::optional<std::string> layerKeyOf(llvm::StringRef parameterName);

/// Cuts the training program (tess-build-training's @forward_backward and
/// @optimizer_step) into units. Errors: the functions are missing, or no
/// parameter has a layer key.
llvm::Expected<ProgramUnits> partitionIntoUnits(mlir::ModuleOp module);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_PROGRAMUNITS_H
