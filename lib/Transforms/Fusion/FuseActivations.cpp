//===- FuseActivations.cpp - tess-fuse-activations (work in progress) -------------===//
#include "tessera/Transforms/Passes.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEACTIVATIONS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

namespace {
struct FuseActivationsPass
    : tessera::impl::FuseActivationsBase<FuseActivationsPass> {
  void runOnOperation() override {}
};
} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseActivationsPass() {
  return std::make_unique<FuseActivationsPass>();
}
