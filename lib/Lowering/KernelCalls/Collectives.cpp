//===- Collectives.cpp - kernel calls of a partitioned step's collectives -===//
//
// The collectives of tess-partition-spmd's per-rank programs call comm.h on
// the communicator of the op's mesh axis (mesh_step.h). all_reduce works in
// place, so its result first takes a copy of the operand.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
namespace tess = tessera::tess;

namespace tessera::lowering {

void populateCollectiveKernelCalls(KernelCallPatterns &patterns) {
  // The collectives of a partitioned step: comm.h on the communicator
  // of the op's mesh axis (mesh_step.h). all_reduce works in place, so
  // its result first takes a copy of the operand.
  patterns.add<tess::AllReduceOp>([](tess::AllReduceOp reduce,
                                     KernelCallContext &c) {
    c.kernelCall("copy", [&](CallArguments &a) {
      a.value(c.in(reduce.getInput())).value(c.out(reduce));
    });
    const char *kind = reduce.getReduction() == tess::CollectiveReduction::max
                           ? "TESSERA_REDUCE_MAX"
                           : "TESSERA_REDUCE_SUM";
    return c.meshCall(reduce, "all_reduce", [&](CallArguments &a) {
      a.value(c.out(reduce)).literal(kind);
    });
  });
  patterns.add<tess::AllGatherOp>(
      [](tess::AllGatherOp gather, KernelCallContext &c) {
        return c.meshCall(gather, "all_gather", [&](CallArguments &a) {
          a.value(c.in(gather.getInput()))
              .value(c.out(gather))
              .i32(gather.getDim());
        });
      });
  patterns.add<tess::ReduceScatterOp>(
      [](tess::ReduceScatterOp scatter, KernelCallContext &c) {
        return c.meshCall(scatter, "reduce_scatter", [&](CallArguments &a) {
          a.value(c.in(scatter.getInput()))
              .value(c.out(scatter))
              .i32(scatter.getDim());
        });
      });
  patterns.add<tess::AllToAllOp>(
      [](tess::AllToAllOp exchange, KernelCallContext &c) {
        return c.meshCall(exchange, "all_to_all", [&](CallArguments &a) {
          a.value(c.in(exchange.getInput()))
              .value(c.out(exchange))
              .i32(exchange.getSplitDim())
              .i32(exchange.getConcatDim());
        });
      });
  patterns.add<tess::ShardSliceOp>(
      [](tess::ShardSliceOp slice, KernelCallContext &c) {
        return c.meshCall(
            slice, "shard_slice",
            [&](CallArguments &a) {
              a.value(c.in(slice.getInput()))
                  .value(c.out(slice))
                  .i32(slice.getDim());
            },
            /*withStream=*/false);
      });
}

} // namespace tessera::lowering
