//===- ExpandWeightGrads.cpp - tess-expand-weight-grads -------------------===//
//
// The autodiff writes a linear layer's weight gradient as one
// tess.linear_weight_grad over the rows' dims as they are, so that the
// sharding labels, and with them the search, the partition and the stage
// costs, see a split of any of those dims (a sequence split's tokens, not
// only the samples) as a partial sum of the gradient. Merged into rows
// before the partition, a split of an inner dim was no block of the rows,
// and the partition gathered both operands (the LM head's logits gradient
// whole on every tensor-parallel rank). After the partition a rank's rows
// are contiguous in memory, so the gradient is the one GEMM the kernels
// run: the reshapes to rows are views, the matmul the form the later
// rewrites (the bias gradient's epilogue, the head's blocks) take.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "RowsView.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_EXPANDWEIGHTGRADS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct ExpandWeightGradsPass
    : tessera::impl::ExpandWeightGradsBase<ExpandWeightGradsPass> {
  void runOnOperation() override {
    llvm::SmallVector<tess::LinearWeightGradOp> gradients;
    getOperation().walk(
        [&](tess::LinearWeightGradOp op) { gradients.push_back(op); });
    for (tess::LinearWeightGradOp op : gradients) {
      OpBuilder builder(op);
      Location loc = op.getLoc();
      Value input = asRows(builder, loc, op.getInput());
      Value dy = asRows(builder, loc, op.getDy());
      // [in, out] = x^T dy; [out, in] = dy^T x.
      Value product =
          op.getTransposeWeight()
              ? tess::MatmulOp::create(builder, loc, dy, input, true, false)
              : tess::MatmulOp::create(builder, loc, input, dy, true, false);
      op.replaceAllUsesWith(product);
      op.erase();
    }
  }
};

} // namespace
