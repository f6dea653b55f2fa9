//===- TessBase.td - the tess dialect, its attributes and enums -*- tablegen -*-===//
//
// The `tess` dialect holds a Transformer at the level it is written in
// PyTorch: linear layers, attention, norms, activations, on ranked tensors.
// Everything later in Tessera (autodiff, sharding search, lowering) reads and
// rewrites these ops, so they say *what* is computed, never how.
//
//===----------------------------------------------------------------------===//

#ifndef TESS_BASE_TD
#define TESS_BASE_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonTypeConstraints.td"

def Tess_Dialect : Dialect {
  let name = "tess";
  let cppNamespace = "::tessera::tess";
  let summary = "Transformer-level tensor ops for Tessera's training compiler";
  let description = [{
    The `tess` dialect describes a Transformer's forward (and, after
    `tess-build-training`, its training step) with ops at the granularity a
    model author thinks in: `tess.linear`, `tess.attention`,
    `tess.layer_norm`, `tess.gelu`, ... on statically shaped, ranked
    tensors. Shapes are always static: the ONNX importer binds every symbolic
    dimension and folds all shape arithmetic away before ops are built.

    Trainable weights are `tess.parameter` ops that name an ONNX initializer
    and where its bytes live; the bytes themselves are attached only on
    request, so that a 175B-parameter model can be compiled from its graph.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  // The plan's discardable attributes (tess.plan, tess.layout,
  // tess.layouts; TessPlanAttrs.td) are checked where they sit.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

class Tess_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Tess_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Tess_WeightLocationAttr : Tess_Attr<"WeightLocation", "weight_location"> {
  let summary = "where the bytes of a parameter live";
  let description = [{
    Names the file that holds a weight. With `offset` and `length` the file is
    ONNX external data and the tensor is the raw little-endian bytes at that
    place. Without them the file is the ONNX model itself and the tensor is
    the initializer named by the `tess.parameter`.

    ```mlir
    #tess.weight_location<file = "gpt2-124m.raw.dyn.onnx.data", offset = 0, length = 3072>
    #tess.weight_location<file = "gpt2-tiny.raw.dyn.onnx">
    ```
  }];
  let parameters = (ins
    StringRefParameter<"file holding the bytes">:$file,
    OptionalParameter<"std::optional<int64_t>">:$offset,
    OptionalParameter<"std::optional<int64_t>">:$length);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Tess_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how GELU's Gaussian CDF is computed", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::tessera::tess";
  let genSpecializedAttr = 0;
}
def Tess_GeluApproximationAttr
    : EnumAttr<Tess_Dialect, Tess_GeluApproximation, "gelu_approximation">;

def Tess_ComparisonPredicate : I32EnumAttr<"ComparisonPredicate",
    "an elementwise comparison", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>
    ]> {
  let cppNamespace = "::tessera::tess";
  let genSpecializedAttr = 0;
}
def Tess_ComparisonPredicateAttr
    : EnumAttr<Tess_Dialect, Tess_ComparisonPredicate, "comparison">;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Tess_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Tess_IndexTensor : RankedTensorOf<[I32, I64]>;
def Tess_BoolTensor : RankedTensorOf<[I1]>;
def Tess_Tensor : RankedTensorOf<[AnyType]>;

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

// Runs the op's `verifyBeforeInference()` ahead of the check that the declared
// result types match the inferred ones. A rule that inference cannot express
// (how many results there are) then fails with its own number instead of the
// generic "inferred type(s) ... are incompatible" message.
def Tess_VerifiesBeforeInference : NativeOpTrait<"VerifiesBeforeInference"> {
  let cppNamespace = "::tessera::tess";
}

class Tess_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tess_Dialect, mnemonic, traits>;

#endif // TESS_BASE_TD
