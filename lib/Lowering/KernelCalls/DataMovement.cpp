//===- DataMovement.cpp - kernel calls that move data ---------------------===//
//
// Views (reshape, contiguous split pieces) call nothing: their descriptors
// point into their operand's bytes. Transposes, broadcasts, slices, gathers,
// concats, splits and reductions each call one kernel with their index
// tables as static arrays.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
namespace tess = tessera::tess;

namespace tessera::lowering {

void populateDataMovementKernelCalls(KernelCallPatterns &patterns) {
  // A reshape is a view: its descriptor was made by describeResults.
  patterns.add<tess::ReshapeOp>(
      [](tess::ReshapeOp, KernelCallContext &) { return success(); });
  patterns.add<tess::BroadcastOp>(
      [](tess::BroadcastOp broadcast, KernelCallContext &c) {
        return c.call("broadcast", [&](CallArguments &a) {
          a.value(c.in(broadcast.getOperand())).value(c.out(broadcast));
        });
      });
  patterns.add<tess::TransposeOp>(
      [](tess::TransposeOp transpose, KernelCallContext &c) {
        Value permutation = c.int64Table(transpose.getPermutation());
        return c.call("transpose", [&](CallArguments &a) {
          a.value(c.in(transpose.getOperand()))
              .value(c.out(transpose))
              .value(permutation);
        });
      });
  patterns.add<tess::SliceOp>([](tess::SliceOp slice, KernelCallContext &c) {
    Value starts = c.int64Table(slice.getStarts());
    Value strides = c.int64Table(slice.getStrides());
    return c.call("slice", [&](CallArguments &a) {
      a.value(c.in(slice.getOperand()))
          .value(c.out(slice))
          .value(starts)
          .value(strides);
    });
  });
  patterns.add<tess::GatherOp>([](tess::GatherOp gather, KernelCallContext &c) {
    return c.call("gather", [&](CallArguments &a) {
      a.value(c.in(gather.getInput()))
          .value(c.in(gather.getIndices()))
          .value(c.out(gather))
          .i64(axisOf(gather.getAxis(), gather.getInput()));
    });
  });
  patterns.add<tess::GatherGradOp>(
      [](tess::GatherGradOp grad, KernelCallContext &c) {
        return c.call("gather_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getIndices()))
              .value(c.in(grad.getDy()))
              .value(c.out(grad))
              .i64(axisOf(grad.getAxis(), grad.getResult()));
        });
      });
  patterns.add<tess::SliceGradOp>(
      [](tess::SliceGradOp grad, KernelCallContext &c) {
        Value starts = c.int64Table(grad.getStarts());
        Value strides = c.int64Table(grad.getStrides());
        return c.call("slice_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getDy()))
              .value(c.out(grad))
              .value(starts)
              .value(strides);
        });
      });
  patterns.add<tess::ConcatOp>([](tess::ConcatOp concat, KernelCallContext &c) {
    return c.call("concat", [&](CallArguments &a) {
      // const tessera_tensor *inputs[count] = {...};
      SmallVector<Value> inputs;
      for (Value input : concat.getInputs())
        inputs.push_back(c.in(input));
      a.value(c.pointerArray(inputs, /*constant=*/true))
          .i32(inputs.size())
          .value(c.out(concat))
          .i64(axisOf(concat.getAxis(), concat.getResult()));
    });
  });
  patterns.add<tess::SplitOp>([](tess::SplitOp split, KernelCallContext &c) {
    // Contiguous pieces are views of the input (describeResults).
    if (c.isView(split.getResult(0)))
      return success();
    return c.call("split", [&](CallArguments &a) {
      // tessera_tensor *outputs[count] = {...};
      SmallVector<Value> outputs;
      for (unsigned index = 0; index < split.getNumResults(); ++index)
        outputs.push_back(c.out(split, index));
      a.value(c.in(split.getInput()))
          .value(c.pointerArray(outputs, /*constant=*/false))
          .i32(outputs.size())
          .i64(axisOf(split.getAxis(), split.getInput()));
    });
  });
  patterns.add<tess::ReduceSumOp, tess::ReduceMeanOp, tess::ReduceMaxOp,
               tess::ReduceMinOp>([](auto reduction, KernelCallContext &c) {
    const char *kind =
        isa<tess::ReduceSumOp>(reduction)    ? "TESSERA_REDUCE_SUM"
        : isa<tess::ReduceMeanOp>(reduction) ? "TESSERA_REDUCE_MEAN"
        : isa<tess::ReduceMaxOp>(reduction)  ? "TESSERA_REDUCE_MAX"
                                             : "TESSERA_REDUCE_MIN";
    SmallVector<int64_t> dims;
    for (int64_t dim : reduction.getDims())
      dims.push_back(axisOf(dim, reduction->getOperand(0)));
    llvm::sort(dims);
    Value table = c.int64Table(dims);
    return c.call("reduce", [&](CallArguments &a) {
      a.literal(kind)
          .value(c.in(reduction->getOperand(0)))
          .value(c.out(reduction))
          .value(table)
          .i32(dims.size());
    });
  });
}

} // namespace tessera::lowering
