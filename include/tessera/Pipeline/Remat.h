//===- Remat.h - keep, selectively recompute, or fully recompute a layer -*- C++ -*-===//
//
// Per layer, what its forward keeps for the backward:
//   none       everything the backward reads (UnitProfile::savedAll)
//   selective  all but the attention core, which the backward runs again
//              from its input (Megatron-LM's selective recomputation; with a
//              fused FlashAttention-style kernel there is no s^2 score
//              tensor to drop, so the saving is the core's outputs)
//   full       only the layer's input; the backward runs the whole forward
//              of the layer again (and its tensor-parallel all-reduces)
// The embedding and the head are never recomputed.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_REMAT_H
#define TESSERA_PIPELINE_REMAT_H

#include "tessera/Pipeline/UnitProfile.h"

#include <optional>

namespace tessera::pipeline {

enum class RematMode { None, Selective, Full };

/// "none", "selective", "full".
llvm::StringRef rematName(RematMode mode);
std::optional<RematMode> parseRematName(llvm::StringRef name);

/// Activation bytes the unit keeps per micro-batch under `mode`.
const TensorBytes &keptActivations(const UnitProfile &unit, RematMode mode);

/// Bytes the unit needs, beyond what it keeps, while its backward runs: the
/// largest op working set, plus (full) the activations rebuilt by the
/// recomputed forward.
TensorBytes backwardWorkingBytes(const UnitProfile &unit, RematMode mode);

/// Forward ops the backward runs again under `mode`.
const std::vector<OpRecord> &recomputedOps(const UnitProfile &unit,
                                           RematMode mode);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_REMAT_H
