//===- FuseAttention.cpp - tess-fuse-attention (work in progress) -------------===//
#include "tessera/Transforms/Passes.h"

namespace tessera {
#define GEN_PASS_DEF_FUSEATTENTION
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

namespace {
struct FuseAttentionPass
    : tessera::impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {}
};
} // namespace

std::unique_ptr<mlir::Pass> tessera::createFuseAttentionPass() {
  return std::make_unique<FuseAttentionPass>();
}
