//===- FuseLinear.cpp - tess-fuse-linear (work in progress) -------------===//
#include "tessera/Transforms/Passes.h"

namespace tessera {
#define GEN_PASS_DEF_FUSELINEAR
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

namespace {
struct FuseLinearPass
    : tessera::impl::FuseLinearBase<FuseLinearPass> {
  void runOnOperation() override {}
};
} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseLinearPass() {
  return std::make_unique<FuseLinearPass>();
}
