//===- PackGateUpProjections.cpp - tess-pack-gate-up-projections ----------===//
//
// The Llama-family MLP gates with silu(x Wg^T) * (x Wu^T): two GEMMs of one
// input, each N = F, and backward two dW GEMMs and two dx GEMMs (the second
// accumulating into the first). Packed, gate and up are one linear of the
// concatenated weight [2F, D], producing [.., 2F], and tess.packed_swiglu
// reads its halves in place; its gradient writes one [.., 2F] tensor, so
// autodiff gives the pair one dx GEMM (K = 2F) and one dW GEMM.
//
// As for q/k/v, the weights are concatenated once per step and their
// gradient split back, so parameters, checkpoints and the optimizer keep the
// model's own tensors.
//
//===----------------------------------------------------------------------===//

#include "PackedLinear.h"

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"

namespace tessera {
#define GEN_PASS_DEF_PACKGATEUPPROJECTIONS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The gate and up linears of `swiglu`, when they can be one linear: each
/// read by the swiglu alone, of one input and one result type.
std::optional<std::array<tess::LinearOp, 2>>
matchProjections(tess::SwigluOp swiglu) {
  std::array<tess::LinearOp, 2> linears = {
      swiglu.getGate().getDefiningOp<tess::LinearOp>(),
      swiglu.getUp().getDefiningOp<tess::LinearOp>()};
  if (!linears[0] || !linears[1] || !swiglu.getGate().hasOneUse() ||
      !swiglu.getUp().hasOneUse() ||
      linears[0].getType() != linears[1].getType() ||
      !fusion::packableLinears(linears))
    return std::nullopt;
  auto type = llvm::cast<RankedTensorType>(linears[0].getType());
  if (type.getRank() < 1 || type.isDynamicDim(type.getRank() - 1))
    return std::nullopt;
  return linears;
}

void pack(tess::SwigluOp swiglu, std::array<tess::LinearOp, 2> linears,
          DominanceInfo &dominance) {
  OpBuilder builder(swiglu);
  Value packed = fusion::packLinears(linears, dominance, builder);
  if (!packed)
    return;
  builder.setInsertionPoint(swiglu);
  Value gated = tess::PackedSwigluOp::create(builder, swiglu.getLoc(),
                                             swiglu.getType(), packed);
  swiglu.getResult().replaceAllUsesWith(gated);
  swiglu.erase();
  for (tess::LinearOp linear : linears)
    linear.erase();
}

struct PackGateUpProjectionsPass
    : tessera::impl::PackGateUpProjectionsBase<PackGateUpProjectionsPass> {
  void runOnOperation() override {
    SmallVector<std::pair<tess::SwigluOp, std::array<tess::LinearOp, 2>>>
        groups;
    getOperation().walk([&](tess::SwigluOp swiglu) {
      if (auto linears = matchProjections(swiglu))
        groups.push_back({swiglu, *linears});
    });
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    for (auto &[swiglu, linears] : groups)
      pack(swiglu, linears, dominance);
    if (groups.empty())
      markAllAnalysesPreserved();
  }
};

} // namespace
