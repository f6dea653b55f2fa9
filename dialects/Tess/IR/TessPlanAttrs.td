//===- TessPlanAttrs.td - the parallel plan as typed attributes -*- tablegen -*-===//
//
// What the searches decide, as attributes every later pass reads: the layout
// of each value on the mesh (`#tess.layout`, lib/Sharding's TensorLayout),
// the module's plan (`#tess.plan`: mesh, ZeRO stage, recomputation,
// pipeline stages, schedule and micro-batches) and the sharding search's
// decision per op (`#tess.planned`). Being dialect attributes, they are
// parsed, printed and verified with the IR: a plan that names an
// axis the mesh lacks, or a schedule the stages cannot run, is an error
// where it is written, not in the pass that reads it.
//
// Where they sit (the dialect's attribute verifier checks the places):
//   module          tess.plan = #tess.plan<...>
//   func argument   tess.layout = #tess.layout<[dp, -]>  (the block a rank is given)
//   func result     tess.layout = #tess.layout<[-, tp] partial(dp)>
//   op              tess.layouts = [#tess.layout<...>, ...]  (one per result)
//   forward op      tess.planned = #tess.planned<strategy = ..., ...>  (the
//                   search's decision, before the step is built)
//   forward result  tess.planned = #tess.layout<...>
//
// Included by TessOps.td after TessCollectiveOps.td (the plan holds a mesh).
//
//===----------------------------------------------------------------------===//

#ifndef TESS_PLAN_ATTRS_TD
#define TESS_PLAN_ATTRS_TD

def Tess_LayoutAttr : Tess_Attr<"Layout", "layout"> {
  let summary = "how one tensor lies on the module's device mesh";
  let description = [{
    For every tensor dim, the mesh axis it is split over in equal contiguous
    blocks (`-`: not split), then optionally the axes over which the tensor
    is a pending partial sum (each rank of the group holds an addend; the
    tensor is their sum), as a row-parallel linear layer leaves it. The
    text is lib/Sharding's TensorLayout text form; no mention of an axis
    means replicated over it.

    Why not upstream `shard.sharding`: it has no partial-sum state, which
    row-parallel layers and a vocabulary-parallel embedding produce and the
    search prices.

    Rules. Of the attribute: (C1) no axis appears twice (two dims, or a dim
    and the partial sum). Where it is attached (tess.layout on a function
    argument or result, tess.layouts on an op): (C2) the module has a
    `tess.mesh` and every axis named is one of its axes; (C3) one entry per
    dim of the value it lays out; (C4) `tess.layout` is a `#tess.layout`,
    and `tess.layouts` an array of them, one per result of the op.

    A function argument or result may beside it carry `tess.pieces`, a
    parameter (or its gradient) stored piece by piece: per dim the count of
    equal pieces the dim holds one after another (a fused projection's q, k
    and v columns), each rank holding its block of every piece in piece
    order (Megatron-LM's fused QKV; tess-annotate-from-plan writes it where
    every op that touches the dim keeps its positions). (C5) `tess.pieces`
    is an array of one count per dim, each at least 1; a dim of more than
    one piece is split in the value's `tess.layout` and its size divides by
    the count.

    ```mlir
    module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
      func.func @step(%x: tensor<4x8xf32> {tess.layout = #tess.layout<[dp, -]>},
                      %w: tensor<8x12xf32> {tess.layout = #tess.layout<[-, tp]>,
                                            tess.pieces = array<i64: 1, 3>})
          -> (tensor<4x8xf32> {tess.layout = #tess.layout<[-, tp] partial(dp)>}) {
        %y = tess.exp %x {tess.layouts = [#tess.layout<[dp, tp]>]} : tensor<4x8xf32>
        return %y : tensor<4x8xf32>
      }
    }
    ```
  }];
  // An unsplit dim is the empty name.
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$dims,
                        ArrayRefParameter<"::mlir::StringAttr">:$partial);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const { return getDims().size(); }
    /// No dim split, no partial sum.
    bool isReplicated() const;
    /// C2 and C3 for a value of `type` in a module with `mesh` (null when
    /// the module has none); `what` names the value in the message.
    ::mlir::LogicalResult
    verifyPlacement(::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
                    ::mlir::Type type, MeshAttr mesh, ::llvm::StringRef what) const;
  }];
}

def Tess_ChunkAttr : Tess_Attr<"Chunk", "chunk"> {
  let summary = "one chunk of a pipelined step: its units and its device";
  let description = [{
    The program units (lib/Pipeline's ProgramUnits: 0 the embedding, 1..L
    the Transformer layers, L + 1 the head) `first` to `last`, inclusive,
    that `tess-split-pipeline-stages` puts into chunk c (its
    `@stage{c}_forward` and `@stage{c}_backward`), and the pipeline device
    that runs it; optionally what its layers recompute in their backward
    (`tess-rematerialize`'s modes), where the pipeline search chose it per
    stage: absent, the plan's `remat`.
    Rules: (C1) 0 <= first <= last; (C2) device >= 0; (C3) `remat` is
    none, selective or full, or absent.
    ```mlir
    #tess.chunk<device = 1, units = 3 to 5>
    #tess.chunk<device = 0, units = 0 to 2, remat = "full">
    ```
  }];
  let parameters = (ins "int64_t":$device, "int64_t":$first, "int64_t":$last,
                        StringRefParameter<"the chunk's recomputation mode",
                                           "\"\"">:$remat);
  let builders = [
    AttrBuilder<(ins "int64_t":$device, "int64_t":$first, "int64_t":$last), [{
      return $_get($_ctxt, device, first, last, ::llvm::StringRef());
    }]>
  ];
  let assemblyFormat =
      "`<` `device` `=` $device `,` `units` `=` $first `to` $last "
      "(`,` `remat` `=` $remat^)? `>`";
  let genVerifyDecl = 1;
}

def Tess_PlanAttr : Tess_Attr<"Plan", "plan"> {
  let summary = "the module's parallel plan: mesh, ZeRO, remat, pipeline";
  let description = [{
    The module attribute `tess.plan`: what tesserac (from the search or the
    user's flags) and `tess-split-pipeline-stages` decided, for the passes
    after them to read instead of options.

    - `mesh`: the device mesh one pipeline stage is partitioned over
      (absent: one device); equal to the module's `tess.mesh` when both
      are present.
    - `zero`: the parameters' ZeRO stage, 0 to 3, or `mixed` when the
      search chose per parameter (their layouts say how); default 0.
    - `remat`: what each Transformer layer recomputes in its backward:
      `none` (default), `selective` or `full` (tess-rematerialize's modes).
    - `stages`, `schedule`, `microbatches`: a pipelined step runs on
      `stages` devices with the schedule `gpipe`, `1f1b` or
      `interleaved:V` (V chunks per device) over `microbatches` per step.
      No schedule: not pipelined.
    - `chunks`: the stage split, chunk c being `@stage{c}_*` (written by
      `tess-split-pipeline-stages`).
    - `offload`: `optimizer` when the fp32 masters and AdamW's moments live
      in pinned host memory and AdamW runs on the host (the executable's
      `--offload optimizer`): what tesserac picks when nothing else fits
      the device; absent: the whole state on the device.

    Rules: (C1) `zero` is 0 to 3 or mixed; (C2) `remat` is none, selective
    or full; (C3) `stages` >= 1 and `microbatches` >= 1; (C4) `schedule`
    is gpipe, 1f1b or interleaved:V with V >= 2, or absent, and without
    one, `stages` and `microbatches` are 1 and there are no chunks;
    (C5) there are no chunks or `stages` x V of them (V = 1 but for
    interleaved:V), chunk c on device c mod `stages`, their units
    consecutive from 0; (C6) `tess.plan` sits on a module, and where
    both the plan and the module have a mesh they are the same; (C7)
    `offload` is `optimizer` or absent, and an offloaded plan is one
    device's: no mesh, no schedule, zero 0 (the executable offloads one
    rank's whole optimizer state).

    ```mlir
    module attributes {tess.plan = #tess.plan<zero = 1, remat = "selective",
        stages = 2, schedule = "interleaved:2", microbatches = 4,
        chunks = [#tess.chunk<device = 0, units = 0 to 1>,
                  #tess.chunk<device = 1, units = 2 to 2>,
                  #tess.chunk<device = 0, units = 3 to 3>,
                  #tess.chunk<device = 1, units = 4 to 5>]>} {}
    ```
  }];
  let parameters = (ins "MeshAttr":$mesh, "int64_t":$zero,
                        StringRefParameter<"recomputation mode">:$remat,
                        "int64_t":$stages,
                        StringRefParameter<"pipeline schedule">:$schedule,
                        "int64_t":$microbatches,
                        ArrayRefParameter<"ChunkAttr">:$chunks,
                        StringRefParameter<"optimizer offload">:$offload);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The value of `zero` when the search's stages differ per parameter.
    static constexpr int64_t kMixedZero = -1;
    /// One device, nothing decided: the defaults of every field.
    static PlanAttr get(::mlir::MLIRContext *context);
    /// A copy with `chunks` replaced.
    PlanAttr withChunks(::llvm::ArrayRef<ChunkAttr> chunks) const;
    /// A copy with `mesh` replaced.
    PlanAttr withMesh(MeshAttr mesh) const;
    /// Whether the optimizer state is offloaded to the host (C7).
    bool isOffloaded() const { return !getOffload().empty(); }
    bool isPipelined() const { return !getSchedule().empty(); }
    /// Chunks per device: V of interleaved:V, otherwise 1.
    int64_t getVirtualStages() const;
    /// The `tess.plan` of the module that contains `op`, or null.
    static PlanAttr lookup(::mlir::Operation *op);
  }];
}

def Tess_PlannedAttr : Tess_Attr<"Planned", "planned"> {
  let summary = "the sharding search's decision for one forward op";
  let description = [{
    The discardable attribute `tess.planned` that `tess-search-sharding`
    writes on each op of @forward (lib/Sharding/SearchedPlan.h) and that
    `tess-annotate-from-plan` reads from the step's copies of them: the
    strategy the search chose, the Transformer layer the op belongs to (if
    any), and the layout it wants for each operand and result. On a
    `tess.parameter` it is the parameter form: its result's (compute)
    layout, the layout of its optimizer state (`state`), its ZeRO stage
    (`zero`, 0 to 3, printed whenever `state` is) and the mesh axes that
    stage shards the state over (`zero_axes`). Empty lists are not printed.

    It is the search's wish, not the partitioner's input: a layout that
    does not divide its value is the shard phase's to refuse.

    Rules. Of the attribute: (C1) `zero` is 0 to 3; (C2) `zero_axes` are
    distinct, and there are none with `zero = 0` (a stage > 0 may have none:
    the layout already splits the parameter over every axis, so the stage
    shards nothing); (C3) `zero` and `zero_axes` only in the parameter form
    (with `state`). Where it is attached: (C4) `tess.planned` on an op is a
    `#tess.planned`, and on a function result (the layout the loss reads
    that result in) a `#tess.layout`; (C5) one layout in `operands` per
    operand and one in `results` per result of the op, and the parameter
    form only on a `tess.parameter`; (C6) the module has a `tess.mesh` and
    every axis named (by a layout or `zero_axes`) is one of its axes.

    ```mlir
    module attributes {tess.mesh = #tess.mesh<dp = 2>} {
      func.func @forward(%ids: tensor<8x16xi64>)
          -> (tensor<8x16x64xf32> {tess.planned = #tess.layout<[dp, -, -]>}) {
        %wte = tess.parameter "wte" trainable {tess.planned = #tess.planned<
            strategy = "[-, -] ZeRO-3", results = [#tess.layout<[dp, -]>],
            state = #tess.layout<[dp, -]>, zero = 3, zero_axes = [dp]>}
            : tensor<512x64xf32>
        %x = tess.embedding %wte, %ids {tess.planned = #tess.planned<
            strategy = "dp: data-parallel", layer = "transformer.wte",
            operands = [#tess.layout<[-, -]>, #tess.layout<[dp, -]>],
            results = [#tess.layout<[dp, -, -]>]>}
            : (tensor<512x64xf32>, tensor<8x16xi64>) -> tensor<8x16x64xf32>
        return %x : tensor<8x16x64xf32>
      }
    }
    ```
  }];
  let parameters = (ins StringRefParameter<"the search's strategy">:$strategy,
                        StringRefParameter<"the op's layer", "\"\"">:$layer,
                        ArrayRefParameter<"LayoutAttr">:$operands,
                        ArrayRefParameter<"LayoutAttr">:$results,
                        "LayoutAttr":$state, "int64_t":$zero,
                        ArrayRefParameter<"::mlir::StringAttr">:$zeroAxes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The parameter form: a `tess.parameter`'s, with a state layout.
    bool isParameter() const { return static_cast<bool>(getState()); }
    /// C4 to C6 where `tess.planned` sits on `op`.
    ::mlir::LogicalResult verifyPlacement(::mlir::Operation *op) const;
  }];
}

#endif // TESS_PLAN_ATTRS_TD
