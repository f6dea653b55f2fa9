//===- TessInterfaces.td - op interfaces of tess ------------*- tablegen -*-===//
//
// The interfaces that passes query instead of switching on op kinds. An op
// opts in with DeclareOpInterfaceMethods in TessOps.td and implements the
// methods in C++.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_INTERFACES_TD
#define TESS_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Tess_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::tessera::tess";
  let description = [{
    An op that reverse-mode automatic differentiation (`tess-build-training`)
    can walk through: it knows its vector-Jacobian product (VJP). Given the
    cotangent of each result (the gradient of the loss with respect to that
    result), it builds the cotangent of each operand out of tess ops.

    Operands that carry no gradient (indices, conditions, attention masks,
    targets) get a null cotangent; so do operands whose cotangent would be
    zero because every result cotangent is null. The builder's insertion
    point is where the backward ops go; the op's own results and operands
    may be used (the forward values are still live there).
  }];

  let methods = [
    InterfaceMethod<[{
        Builds the operand cotangents of this op with `builder`.
        `resultCotangents` has one entry per result, each null (no gradient
        reaches that result) or of that result's type. On success,
        `operandCotangents` holds one entry per operand, null or of that
        operand's type. Fails (after emitting an error) only when the op's
        types make it not differentiable, e.g. an integer tensor.
      }],
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ArrayRef<::mlir::Value>":$resultCotangents,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandCotangents)
    >,
  ];
}

/// Shorthand for the ops that implement the interface above.
defvar Tess_Differentiable =
    DeclareOpInterfaceMethods<Tess_DifferentiableOpInterface>;

def Tess_ShardingInterface : OpInterface<"ShardingInterface"> {
  let cppNamespace = "::tessera::tess";
  let description = [{
    An op that can run partitioned over a device mesh: it labels every dim
    of its operands and results (`ShardingLabels`, TessShardingLabels.h).
    Dims with one label are one index of the computation; splitting all of
    them over a mesh axis lets each rank run the op on its blocks. Each
    label has a kind: `batch` and `parallel` labels are in the results,
    `contracted` and `reduced` ones are summed into a result (split, it
    leaves partial sums), `averaged` ones are the loss's rows; `indexed`
    and `pieced` ones only the search splits, `positional` ones nobody;
    `streamed` ones (a random op's outermost dim) split with the rank
    drawing its block of the stream (`stream_axis`). The op also names the splits
    the intra-op search offers.

    From this one answer derive the intra-op search's strategies
    (lib/Sharding/ShardingStrategy), the layouts the partition rewrite
    builds (lib/Transforms/Partition/LayoutChoice) and the tensor-parallel
    costs of the pipeline search (lib/Pipeline/UnitProfile). It is modelled
    on upstream's `shard` ShardingInterface, whose loops are our labels and
    whose indexing maps our per-dim lists; ours also says what upstream's
    cannot: averaged rows, partial sums passing through linear ops, and
    dims only the search splits. An op without the interface runs
    replicated.

    Example: `tess.linear %x, %w, %b : (tensor<8x32x64xf32>,
    tensor<64x128xf32>, tensor<128xf32>) -> tensor<8x32x128xf32>` answers
    (`tessera-opt --tess-print-sharding-labels`):

    ```
    tess.linear
      labels: 0 batch, 1 batch, 2 parallel, 3 contracted
      operand 0: [0, 1, 3]
      operand 1: [3, 2]
      operand 2: [2]
      result 0: [0, 1, 2] summed [3]
      added to the sum: 2
      linear in: {0, 2} {1, 2}
      splits: column-parallel = 2, row-parallel = 3, data-parallel = 0
    ```

    So a column-parallel split (label 2 over `tp`) splits the weight's
    columns, the bias and the result's last dim, and leaves the input
    whole; a row-parallel one (label 3) splits the input's last dim and the
    weight's rows and leaves the result, and the bias it needs, partial
    sums over `tp`.
  }];

  let methods = [
    InterfaceMethod<[{
        The labels of this op's dims, their kinds and the splits the search
        offers, for the op's current types and attributes.
      }],
      "::tessera::tess::ShardingLabels", "getShardingLabels", (ins)
    >,
  ];
}

/// Shorthand for the ops that implement the interface above.
defvar Tess_Shardable =
    DeclareOpInterfaceMethods<Tess_ShardingInterface>;

#endif // TESS_INTERFACES_TD
