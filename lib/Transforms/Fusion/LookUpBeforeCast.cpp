//===- LookUpBeforeCast.cpp - tess-look-up-before-cast ---------------------===//
//
// Mixed precision casts every parameter to the compute type at the start of
// the step. For an embedding table that only a lookup reads (an untied
// model's token embedding: Llama 3, Mistral, Qwen2 7B ...), that cast writes
// a [vocabulary, d] compute copy of which the step reads a few thousand
// rows: 1 GiB of bf16 for Llama 3 8B's 128,256 x 4,096 table, live from the
// step's start until the lookup, and a pass over 3 GiB every step. A lookup
// commutes with an elementwise cast, so this pass looks the rows up in the
// master table and casts only them: the same values, bit for bit.
//
// It runs after autodiff (in tess-lowering-preparation): the table's
// gradient is the scatter of the rows' gradients whatever their type, and
// reads neither copy.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace tessera {
#define GEN_PASS_DEF_LOOKUPBEFORECAST
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct LookUpBeforeCastPass
    : tessera::impl::LookUpBeforeCastBase<LookUpBeforeCastPass> {
  void runOnOperation() override {
    SmallVector<tess::CastOp> casts;
    getOperation().walk([&](tess::CastOp cast) {
      if (tess::readOnlyByLookups(cast.getResult()))
        casts.push_back(cast);
    });
    IRRewriter rewriter(&getContext());
    for (tess::CastOp cast : casts) {
      Type computeElement =
          llvm::cast<RankedTensorType>(cast.getType()).getElementType();
      for (Operation *user : llvm::make_early_inc_range(cast->getUsers())) {
        auto lookup = llvm::cast<tess::EmbeddingOp>(user);
        rewriter.setInsertionPoint(lookup);
        auto rows = tess::EmbeddingOp::create(
            rewriter, lookup.getLoc(), cast.getInput(), lookup.getIndices(),
            lookup.getRowsAxisAttr());
        auto rowType = llvm::cast<RankedTensorType>(rows.getType());
        rewriter.replaceOpWithNewOp<tess::CastOp>(
            lookup, rowType.clone(computeElement), rows.getResult());
      }
      rewriter.eraseOp(cast);
    }
  }
};

} // namespace
