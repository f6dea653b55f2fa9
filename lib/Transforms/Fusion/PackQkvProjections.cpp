//===- PackQkvProjections.cpp - tess-pack-qkv-projections -----------------===//
//
// Llama-family exports project q, k and v with three nn.Linear of one input,
// each viewed as [B, T, H, Dh], transposed to [B, H, T, Dh] and (q and k)
// rotated. Three GEMMs of N = Hq Dh, Hkv Dh, Hkv Dh over the same x read x
// three times and, for GQA's narrow K/V, run at a poorer rate than one GEMM
// of N = (Hq + 2 Hkv) Dh; their backward is six more GEMMs and two sums of
// dx. Packed, the projection is GPT-2's c_attn form: one linear of the
// concatenated weights and a split, whose backward autodiff writes as one dx
// GEMM and one dW GEMM of the concatenated gradient, and whose pieces
// tess-fuse-packed-attention later reads in place.
//
// The weights are concatenated once per step (a copy of the projection's
// weights, small next to its GEMMs), and their gradient is split back, so
// parameters, checkpoints and the optimizer keep the model's own tensors.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "PackedLinear.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"

namespace tessera {
#define GEN_PASS_DEF_PACKQKVPROJECTIONS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

constexpr int64_t kHeadPermutation[] = {0, 2, 1, 3};

/// The linear whose result `value` is as heads: [rotary](transpose([0, 2, 1,
/// 3], reshape(linear))), the reshape splitting only the last dim, each link
/// the only use of the one before (so the packed pieces replace them all).
tess::LinearOp projectionOf(Value value) {
  if (auto rotary = value.getDefiningOp<tess::RotaryOp>()) {
    if (rotary.getAdjoint() || rotary.getRotatedHeads() != 0 ||
        !rotary.getInput().hasOneUse())
      return {};
    value = rotary.getInput();
  }
  auto transpose = value.getDefiningOp<tess::TransposeOp>();
  if (!transpose || transpose.getPermutation() != ArrayRef(kHeadPermutation) ||
      !transpose.getInput().hasOneUse())
    return {};
  auto view = transpose.getInput().getDefiningOp<tess::ReshapeOp>();
  if (!view || !view.getInput().hasOneUse())
    return {};
  auto linear = view.getInput().getDefiningOp<tess::LinearOp>();
  if (!linear)
    return {};
  auto rows = llvm::cast<RankedTensorType>(linear.getType());
  auto heads = llvm::cast<RankedTensorType>(view.getType());
  if (!rows.hasStaticShape() || rows.getRank() != 3 || heads.getRank() != 4 ||
      rows.getShape().take_front(2) != heads.getShape().take_front(2))
    return {};
  return linear;
}

/// The three projections of one attention, when they can be one linear.
std::optional<std::array<tess::LinearOp, 3>>
matchProjections(tess::AttentionOp attention) {
  if (attention.getMask() || attention.getDropout().convertToDouble() != 0.0)
    return std::nullopt;
  std::array<tess::LinearOp, 3> linears = {projectionOf(attention.getQuery()),
                                           projectionOf(attention.getKey()),
                                           projectionOf(attention.getValue())};
  if (!linears[0] || !linears[1] || !linears[2] ||
      !fusion::packableLinears(linears))
    return std::nullopt;
  return linears;
}

void pack(std::array<tess::LinearOp, 3> linears, DominanceInfo &dominance) {
  OpBuilder builder(linears[0]);
  Value packed = fusion::packLinears(linears, dominance, builder);
  if (!packed)
    return;
  SmallVector<int64_t, 3> widths;
  for (tess::LinearOp linear : linears)
    widths.push_back(linear.getType().getShape().back());
  auto pieces = tess::SplitOp::create(builder, packed.getLoc(), packed,
                                      /*axis=*/2, widths);
  for (auto [linear, piece] : llvm::zip(linears, pieces.getResults())) {
    linear.getResult().replaceAllUsesWith(piece);
    linear.erase();
  }
}

struct PackQkvProjectionsPass
    : tessera::impl::PackQkvProjectionsBase<PackQkvProjectionsPass> {
  void runOnOperation() override {
    SmallVector<std::array<tess::LinearOp, 3>> groups;
    getOperation().walk([&](tess::AttentionOp attention) {
      if (auto linears = matchProjections(attention))
        groups.push_back(*linears);
    });
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    for (std::array<tess::LinearOp, 3> &linears : groups)
      pack(linears, dominance);
    if (groups.empty())
      markAllAnalysesPreserved();
  }
};

} // namespace
