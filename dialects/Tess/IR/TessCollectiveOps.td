//===- TessCollectiveOps.td - the device mesh and its collectives -*- tablegen -*-===//
//
// What a partitioned (per-rank, SPMD) training step needs beyond the ops of
// one device: the mesh the program runs on, the collectives between the
// ranks of one mesh axis, and the rank's own block of a replicated tensor.
// `tess-partition-spmd` creates them in @forward_backward; each lowers to
// one call of runtime/include/tessera/runtime/comm.h on the communicator of
// its mesh axis (tessera_step_context::axis_comms).
//
// Types are per rank: an op's operand and result are the tensors one rank
// holds. Every rank of the axis's group executes the same op with the same
// local shape (SPMD), so a collective's shapes are checked against the
// mesh's axis size here.
//
// No VJPs: partitioning runs after `tess-build-training`, on the already
// differentiated step, so the backward's communication is the partition of
// the backward ops' own layouts, never the transpose of a forward
// collective. (Megatron's f/g pair, "identity forward, all-reduce backward",
// is correct only for a replicated input feeding column-parallel work;
// deriving it by autodiff would need that context on every collective.)
// `tess-build-training` therefore rejects a collective on a parameter's
// path with its usual "has no VJP" error.
//
// Included by TessOps.td; rules are numbered per op as there.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_COLLECTIVE_OPS_TD
#define TESS_COLLECTIVE_OPS_TD

//===----------------------------------------------------------------------===//
// The mesh
//===----------------------------------------------------------------------===//

def Tess_MeshAttr : Tess_Attr<"Mesh", "mesh"> {
  let summary = "a named, ordered grid of devices";
  let description = [{
    The device mesh a partitioned program runs on, as the module attribute
    `tess.mesh`: its axes, outermost first, each with a name and a size.
    Rank `r` sits at the row-major coordinates of `r` (the last axis varies
    fastest), as runtime/include/tessera/runtime/mesh.h numbers them.
    Collectives and layouts name axes, never index them.

    Why not a dictionary (`{dp = 2, tp = 2}`): an MLIR dictionary sorts its
    keys, and the order of the axes fixes which ranks form a group. Why
    not upstream `shard.grid`: its axes are unnamed (ops refer to them by
    index), it is a symbol op rather than an attribute the verifiers can
    reach from any op, and nothing else of the `shard` dialect is used
    (it cannot express the partial sums of lib/Sharding's layouts).

    Rules: (C1) at least one axis; (C2) names are non-empty and distinct;
    (C3) sizes are >= 1.

    ```mlir
    module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {}
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$names,
                        ArrayRefParameter<"int64_t">:$sizes);
  let assemblyFormat = "`<` custom<MeshAxes>($names, $sizes) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// `dp = 2, tp = 2`: the custom directive of the assembly format
    /// (members, so that the generated parser finds them).
    static ::mlir::ParseResult
    parseMeshAxes(::mlir::AsmParser &parser,
                  ::llvm::SmallVector<::mlir::StringAttr> &names,
                  ::llvm::SmallVector<int64_t> &sizes);
    static void printMeshAxes(::mlir::AsmPrinter &printer,
                              ::llvm::ArrayRef<::mlir::StringAttr> names,
                              ::llvm::ArrayRef<int64_t> sizes);
    /// The size of the axis named `name`, or std::nullopt.
    std::optional<int64_t> axisSize(::llvm::StringRef name) const;
    /// The position of the axis named `name`, or std::nullopt.
    std::optional<unsigned> axisIndex(::llvm::StringRef name) const;
    /// The number of ranks: the product of the sizes.
    int64_t rankCount() const;
    /// The mesh of the module that contains `op` (its `tess.mesh`), or null.
    static MeshAttr lookup(::mlir::Operation *op);
  }];
}

def Tess_CollectiveReduction : I32EnumAttr<"CollectiveReduction",
    "how an all-reduce combines the ranks' tensors", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"max", 1>
    ]> {
  let cppNamespace = "::tessera::tess";
  let genSpecializedAttr = 0;
}
def Tess_CollectiveReductionAttr
    : EnumAttr<Tess_Dialect, Tess_CollectiveReduction, "reduction">;

//===----------------------------------------------------------------------===//
// Collectives over one mesh axis
//===----------------------------------------------------------------------===//

// An op on one mesh axis; `axisRule` is `C1` in each description.
class Tess_MeshAxisOp<string mnemonic, list<Trait> traits = []>
    : Tess_Op<mnemonic, traits> {
  string axisRule = [{
    Rule (C1): the enclosing module has a `tess.mesh` and `axis` names one
    of its axes.
  }];
  let hasVerifier = 1;
  code collectiveDeclarations = [{
    /// The size of `axis` in the module's mesh (the verifier checked it).
    int64_t getAxisSize();
  }];
  let extraClassDeclaration = collectiveDeclarations;
}

// A collective talks to the other ranks: it writes the
// `tess::Communication` resource, so that no pass drops, merges or reorders
// it (every rank must call the same collectives in the same order).
class Tess_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Tess_MeshAxisOp<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<MemoryEffectsOpInterface>])>;

def Tess_AllReduceOp : Tess_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "combine a tensor across the ranks of a mesh axis";
  let description = !strconcat([{
    Every rank of the group along `axis` gets the elementwise `sum` (or
    `max`) of the group's tensors: a pending partial sum becomes whole
    (row-parallel linear layers, data-parallel gradients). Lowers to
    `tessera_comm_all_reduce`.
  }], axisRule, [{
    ```mlir
    %y = tess.all_reduce %x {axis = "tp", reduction = #tess<reduction sum>} : tensor<2x31x64xf32>
    ```
  }]);
  let arguments = (ins Tess_Tensor:$input, StrAttr:$axis,
      DefaultValuedAttr<Tess_CollectiveReductionAttr,
                        "::tessera::tess::CollectiveReduction::sum">:$reduction);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Tess_AllGatherOp : Tess_CollectiveOp<"all_gather"> {
  let summary = "concatenate the ranks' blocks of a split dim";
  let description = !strconcat([{
    Each rank of the group along `axis` holds one block of `dim`; every
    rank gets the blocks concatenated along `dim` in coordinate order.
    Lowers to `tessera_comm_all_gather`.
  }], axisRule, [{
    (C2) `dim` is in `[0, rank)`; (C3) the result has the input's element
    type and shape except that `dim` is the axis size times larger.

    ```mlir
    %y = tess.all_gather %x {axis = "tp", dim = 2 : i64}
      : (tensor<2x31x32xf32>) -> tensor<2x31x64xf32>
    ```
  }]);
  let arguments = (ins Tess_Tensor:$input, StrAttr:$axis, I64Attr:$dim);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tess_ReduceScatterOp : Tess_CollectiveOp<"reduce_scatter"> {
  let summary = "sum across a mesh axis, each rank keeping one block";
  let description = !strconcat([{
    The elementwise sum of the group's tensors along `axis`, of which the
    rank with coordinate `c` keeps the `c`-th of the axis-size equal
    blocks along `dim`: a partial sum becomes a split tensor (ZeRO's
    gradient sharding, sequence-parallel layers). Lowers to
    `tessera_comm_reduce_scatter`.
  }], axisRule, [{
    (C2) `dim` is in `[0, rank)`; (C3) `dim` divides by the axis size and
    the result has the input's element type and shape except that `dim` is
    divided by it.

    ```mlir
    %y = tess.reduce_scatter %x {axis = "dp", dim = 0 : i64}
      : (tensor<64x192xf32>) -> tensor<32x192xf32>
    ```
  }]);
  let arguments = (ins Tess_Tensor:$input, StrAttr:$axis, I64Attr:$dim);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tess_AllToAllOp : Tess_CollectiveOp<"all_to_all"> {
  let summary = "move the split of a tensor from one dim to another";
  let description = !strconcat([{
    Each rank cuts its tensor into axis-size blocks along `split_dim`,
    sends block `j` to the rank with coordinate `j` and concatenates what
    it receives along `concat_dim`, in coordinate order. A tensor split
    along `concat_dim` comes out split along `split_dim`. Lowers to
    `tessera_comm_all_to_all`.
  }], axisRule, [{
    (C2) both dims are in `[0, rank)`; (C3) `split_dim` divides by the axis
    size and the result has the input's element type and shape except that
    `split_dim` is divided by it and `concat_dim` multiplied by it.

    ```mlir
    %y = tess.all_to_all %x {axis = "tp", split_dim = 1 : i64, concat_dim = 0 : i64}
      : (tensor<16x64xf32>) -> tensor<32x32xf32>
    ```
  }]);
  let arguments = (ins Tess_Tensor:$input, StrAttr:$axis, I64Attr:$split_dim,
                   I64Attr:$concat_dim);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def Tess_ShardSliceOp : Tess_MeshAxisOp<"shard_slice", [Pure]> {
  let summary = "this rank's block of a tensor every rank holds whole";
  let description = !strconcat([{
    The `c`-th of the axis-size equal blocks along `dim`, `c` being this
    rank's coordinate on `axis`: a replicated tensor becomes split without
    communication. The coordinate is known only at run time (the lowering
    reads it from `tessera_step_context::mesh_coordinates`), so this is not
    a `tess.slice`.
  }], axisRule, [{
    (C2) `dim` is in `[0, rank)`; (C3) `dim` divides by the axis size and
    the result has the input's element type and shape except that `dim` is
    divided by it.

    ```mlir
    %y = tess.shard_slice %x {axis = "tp", dim = 1 : i64}
      : (tensor<2x4x31x16xf32>) -> tensor<2x2x31x16xf32>
    ```
  }]);
  let arguments = (ins Tess_Tensor:$input, StrAttr:$axis, I64Attr:$dim);
  let results = (outs Tess_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

#endif // TESS_COLLECTIVE_OPS_TD
