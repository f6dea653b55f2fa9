//===- Remat.h - keep, selectively recompute, or fully recompute a layer -*- C++ -*-===//
//
// Per layer, what its forward keeps for the backward:
//   none       everything the backward reads (UnitProfile::savedAll)
//   selective  all but the cheap outputs the backward reads (normalization,
//              dropout and elementwise results), which the backward runs
//              again from values it keeps anyway (planLayerRecomputation)
//   full       only the layer's input; the backward runs the whole forward
//              of the layer again (and its tensor-parallel all-reduces)
// The embedding and the head are never recomputed.
//
// planLayerRecomputation below is the one rule for which values: the
// program transformation (tess-rematerialize, lib/Transforms/Remat) clones
// its ops, and UnitProfile prices the same ops and drops the same values
// from the kept bytes. Its selective rule differs from Megatron-LM's
// selective recomputation (the attention core): with a fused attention the
// core's outputs are 4 sbh elements of a GPT layer's 16 and recomputing
// them re-runs the attention (the layer's costliest op after the matmuls),
// whereas the normalization and elementwise outputs the backward reads
// (both layer norms, the GELU output: 6 of the 16) are memory-bound to
// recompute from values the backward keeps anyway. In Megatron's 2-byte
// units a GPT layer keeps 32 sbh (none), 20 sbh (selective) and 2 sbh
// (full) (test/unit/Pipeline/RematMemoryTest.cpp); the arena of GPT-2
// 124M's step at 16 x 1024 shrinks by exactly 12 layers x 12 and x 30 sbh
// (test/Transforms/Remat/arena-remat.test checks gpt2-tiny).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_REMAT_H
#define TESSERA_PIPELINE_REMAT_H

#include "tessera/Pipeline/UnitProfile.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace tessera::pipeline {

enum class RematMode { None, Selective, Full };

/// "none", "selective", "full".
llvm::StringRef rematName(RematMode mode);
std::optional<RematMode> parseRematName(llvm::StringRef name);

/// Activation bytes the unit keeps per micro-batch under `mode`.
const TensorBytes &keptActivations(const UnitProfile &unit, RematMode mode);

/// Bytes the unit needs in its device's arena beyond what it keeps: its
/// working set, or recomputing, the one that holds the activations the
/// recomputed forward ops rebuild until the backward's last reader
/// (UnitProfile::workingSelective, workingRecomputing).
const TensorBytes &backwardWorkingBytes(const UnitProfile &unit,
                                        RematMode mode);

/// Forward ops the backward runs again under `mode`.
const std::vector<OpRecord> &recomputedOps(const UnitProfile &unit,
                                           RematMode mode);

/// What the backward of one layer recomputes instead of keeping.
struct LayerRecomputation {
  /// Forward values of the layer the backward reads, which it gets from
  /// the clones instead (in program order).
  llvm::SmallVector<mlir::Value> values;
  /// The forward ops to clone, in program order: the producers of `values`
  /// and (full) every op of the layer between them and the layer's input.
  llvm::SmallVector<mlir::Operation *> ops;
};

/// The recomputation of layer `unit` (a Layer unit of `units`) under `mode`.
/// The layer's forward ops are those of the unit before the first backward
/// op; a value "the backward reads" has a user at or after that op. Values
/// another unit's forward reads (the layer's output, the next layer's
/// input) and values the function returns (the loss, where a head without
/// parameters of its own joins the last layer) are kept whatever the mode.
/// Parameters, their casts and constants are never cloned.
///   none       nothing.
///   full       every other value the backward reads, recomputed from the
///              layer's input: its producer and, transitively, the layer's
///              ops it needs.
///   selective  each value the backward reads whose producer is a
///              normalization (layer_norm, rms_norm, softmax), dropout, a
///              unary elementwise op or an elementwise add/sub/mul/div, and
///              whose operands are kept for the backward anyway, come from
///              outside the layer, or are such memory-bound results of
///              those (the GELU output under a dropout, cloned too): a few
///              memory-bound ops re-run per value, and no value kept that
///              was not kept before. Matmuls and attention never re-run.
/// Dropout (and an attention with dropout) draws its mask from its `seed`
/// attribute and the element index alone, so a clone draws the same mask.
LayerRecomputation planLayerRecomputation(const ProgramUnits &units,
                                          unsigned unit, RematMode mode);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_REMAT_H
