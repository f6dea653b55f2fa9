//===- FuseNorms.cpp - tess-fuse-norms (work in progress) -------------===//
#include "tessera/Transforms/Passes.h"

namespace tessera {
#define GEN_PASS_DEF_FUSENORMS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

namespace {
struct FuseNormsPass
    : tessera::impl::FuseNormsBase<FuseNormsPass> {
  void runOnOperation() override {}
};
} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseNormsPass() {
  return std::make_unique<FuseNormsPass>();
}
