//===- FuseActivations.cpp - tess-fuse-activations ------------------------===//
//
// Exporters write GELU and SiLU out as chains of elementwise ops (and the
// gated MLP's silu(gate) * up as two). Kernels,
// autodiff and the cost model all want to see one activation instead: one
// op is one kernel launch and one saved tensor for the backward pass, where
// the chain would be eight of each.
//
// The products and sums of a chain may be associated in any order (torch
// writes `(x * 0.5) * (1 + tanh(...))`, a hand-written model may write
// `x * (0.5 * (1 + tanh(...)))`), so products are matched as a multiset of
// factors rather than as a fixed tree.
//
//===----------------------------------------------------------------------===//

#include "FusionMatchers.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/MathExtras.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::fusion;

namespace {

/// Collects the factors of the product tree rooted at `value`: descends into
/// every `tess.mul` whose result feeds only the tree (the root's own operands
/// always), so `(x * 0.5) * y` and `x * (0.5 * y)` both give {x, 0.5, y}. A
/// mul with another user is a factor itself: fusing through it would leave
/// that user without its input.
void collectFactors(Value value, bool isRoot, SmallVectorImpl<Value> &factors) {
  auto mul = value.getDefiningOp<tess::MulOp>();
  if (!mul || (!isRoot && !value.hasOneUse())) {
    factors.push_back(value);
    return;
  }
  collectFactors(mul.getLhs(), /*isRoot=*/false, factors);
  collectFactors(mul.getRhs(), /*isRoot=*/false, factors);
}

/// Removes from `factors` the first one that is a splat constant close to
/// `expected`; false when there is none.
bool takeConstantFactor(SmallVectorImpl<Value> &factors, double expected) {
  auto *found = llvm::find_if(
      factors, [&](Value factor) { return isSplatCloseTo(factor, expected); });
  if (found == factors.end())
    return false;
  factors.erase(found);
  return true;
}

/// True when `value` is `1 + inner` (either order) with `inner` an op of type
/// `UnaryOp`, both used only here; sets `argument` to the unary op's input.
template <typename UnaryOp>
bool matchOnePlus(Value value, Value &argument) {
  auto add = value.getDefiningOp<tess::AddOp>();
  if (!add || !value.hasOneUse())
    return false;
  return matchEitherOrder(add.getLhs(), add.getRhs(), [&](Value one,
                                                          Value other) {
    auto unary = other.getDefiningOp<UnaryOp>();
    if (!unary || !other.hasOneUse() || !isSplatCloseTo(one, 1.0))
      return false;
    argument = unary.getInput();
    return true;
  });
}

/// True when `value` is `x^3` written as `pow(x, 3)` or as a product holding
/// x three times, used only here.
bool isCubeOf(Value value, Value x) {
  if (!value.hasOneUse())
    return false;
  if (auto pow = value.getDefiningOp<tess::PowOp>())
    return pow.getLhs() == x && isSplatCloseTo(pow.getRhs(), 3.0);
  SmallVector<Value> factors;
  collectFactors(value, /*isRoot=*/true, factors);
  return factors.size() == 3 && llvm::all_of(factors, [&](Value factor) {
           return factor == x;
         });
}

/// True when `value` is `x + 0.044715 * x^3` (either order), each
/// intermediate used only here.
bool isTanhGeluCubicTerm(Value value, Value x) {
  auto add = value.getDefiningOp<tess::AddOp>();
  if (!add || !value.hasOneUse())
    return false;
  return matchEitherOrder(add.getLhs(), add.getRhs(), [&](Value linear,
                                                          Value cubic) {
    if (linear != x || !cubic.hasOneUse() || !cubic.getDefiningOp<tess::MulOp>())
      return false;
    SmallVector<Value> factors;
    collectFactors(cubic, /*isRoot=*/true, factors);
    if (!takeConstantFactor(factors, 0.044715))
      return false;
    // x^3 as a single factor (pow, or a product with its own user count)
    // or spread over three factors of the same product.
    if (factors.size() == 1)
      return isCubeOf(factors.front(), x);
    return factors.size() == 3 && llvm::all_of(factors, [&](Value factor) {
             return factor == x;
           });
  });
}

/// True when `argument` is tanh-GELU's `sqrt(2/pi) * (x + 0.044715 x^3)`.
bool isTanhGeluArgument(Value argument, Value x) {
  if (!argument.hasOneUse() || !argument.getDefiningOp<tess::MulOp>())
    return false;
  SmallVector<Value> factors;
  collectFactors(argument, /*isRoot=*/true, factors);
  const double sqrtTwoOverPi = std::sqrt(2.0 / llvm::numbers::pi);
  return takeConstantFactor(factors, sqrtTwoOverPi) && factors.size() == 1 &&
         isTanhGeluCubicTerm(factors.front(), x);
}

/// True when `argument` is exact GELU's `x / sqrt 2` or `x * (1/sqrt 2)`.
bool isErfGeluArgument(Value argument, Value x) {
  if (!argument.hasOneUse())
    return false;
  if (auto div = argument.getDefiningOp<tess::DivOp>())
    return div.getLhs() == x && isSplatCloseTo(div.getRhs(), std::sqrt(2.0));
  auto mul = argument.getDefiningOp<tess::MulOp>();
  if (!mul)
    return false;
  return matchEitherOrder(mul.getLhs(), mul.getRhs(), [&](Value input,
                                                          Value constant) {
    return input == x && isSplatCloseTo(constant, 1.0 / std::sqrt(2.0));
  });
}

/// `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` ->
/// `tess.gelu x {approximation = tanh}`, and
/// `0.5 * x * (1 + erf(x / sqrt 2))` -> `tess.gelu x` (exact), rooted at the
/// outermost product.
struct FuseGelu : OpRewritePattern<tess::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::MulOp root,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(root.getResult(), /*isRoot=*/true, factors);
    if (factors.size() != 3 || !takeConstantFactor(factors, 0.5))
      return rewriter.notifyMatchFailure(root, "not a product 0.5 * x * y");

    // The two remaining factors are x and `1 + tanh/erf(...)`, in any order.
    for (int onePlusIndex : {0, 1}) {
      Value onePlus = factors[onePlusIndex];
      Value x = factors[1 - onePlusIndex];
      // The chain is elementwise on x: a constant of larger shape would
      // broadcast x, which the fused op cannot express.
      if (x.getType() != root.getType())
        continue;
      Value argument;
      if (matchOnePlus<tess::TanhOp>(onePlus, argument) &&
          isTanhGeluArgument(argument, x)) {
        rewriter.replaceOpWithNewOp<tess::GeluOp>(
            root, root.getType(), x, tess::GeluApproximation::tanh);
        return success();
      }
      if (matchOnePlus<tess::ErfOp>(onePlus, argument) &&
          isErfGeluArgument(argument, x)) {
        rewriter.replaceOpWithNewOp<tess::GeluOp>(
            root, root.getType(), x, tess::GeluApproximation::none);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(root, "not a GELU chain");
  }
};

/// `x * sigmoid(x)` (either order) -> `tess.silu x`.
struct FuseSilu : OpRewritePattern<tess::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::MulOp root,
                                PatternRewriter &rewriter) const override {
    Value input;
    bool matched = matchEitherOrder(
        root.getLhs(), root.getRhs(), [&](Value x, Value gate) {
          auto sigmoid = gate.getDefiningOp<tess::SigmoidOp>();
          if (!sigmoid || sigmoid.getInput() != x || !gate.hasOneUse())
            return false;
          input = x;
          return true;
        });
    if (!matched || input.getType() != root.getType())
      return rewriter.notifyMatchFailure(root, "not x * sigmoid(x)");
    rewriter.replaceOpWithNewOp<tess::SiluOp>(root, root.getType(), input);
    return success();
  }
};

/// `silu(gate) * up` (either order) -> `tess.swiglu gate, up`: the gated
/// MLP's product, when silu(gate) feeds nothing else (it is then neither
/// stored nor saved for the backward).
struct FuseSwiglu : OpRewritePattern<tess::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tess::MulOp root,
                                PatternRewriter &rewriter) const override {
    Value gate, up;
    bool matched = matchEitherOrder(
        root.getLhs(), root.getRhs(), [&](Value activated, Value other) {
          auto silu = activated.getDefiningOp<tess::SiluOp>();
          if (!silu || !activated.hasOneUse())
            return false;
          gate = silu.getInput();
          up = other;
          return true;
        });
    if (!matched || gate.getType() != root.getType() ||
        up.getType() != root.getType())
      return rewriter.notifyMatchFailure(root, "not silu(gate) * up");
    rewriter.replaceOpWithNewOp<tess::SwigluOp>(root, root.getType(), gate, up);
    return success();
  }
};

struct FuseActivationsPass
    : tessera::impl::FuseActivationsBase<FuseActivationsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGelu, FuseSilu, FuseSwiglu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseActivationsPass() {
  return std::make_unique<FuseActivationsPass>();
}
