//===- GraphImporter.h - state of one ONNX graph import --------*- C++ -*-===//
//
// The importer walks the graph's nodes in order (ONNX requires topological
// order). Each ONNX value is either known on the host (a HostTensor: shapes,
// indices, masks), a run-time tensor (an mlir::Value), or a sequence of
// those (SplitToSequence). A node whose inputs are all known is folded by
// the ConstantEvaluator; any other node goes to the handler registered for
// its op type, which emits `tess` ops. Handlers are grouped by op family in
// their own files and registered in one table.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define TESSERA_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "tessera/Import/ONNX/HostTensor.h"
#include "tessera/Import/ONNX/Importer.h"

#include "Tess/IR/TessOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <onnx/onnx_pb.h>

#include <memory>
#include <vector>

namespace tessera::onnx_import {

/// One ONNX value during import.
struct ImportedValue {
  /// Known at compile time (shared: many nodes read one shape tensor).
  std::shared_ptr<const HostTensor> constant;
  /// Computed at run time, or a constant already materialized as an op.
  mlir::Value value;
  /// The elements of an ONNX sequence.
  std::vector<ImportedValue> sequence;
  bool isSequence = false;
  /// For a run-time value that would be known at compile time but for a
  /// fold the evaluator declined as too large (here or in a value it is
  /// computed from): why, naming that node and the --dim that made it so.
  /// An op without a run-time form that reads it reports this reason
  /// instead of calling itself unsupported.
  std::string notFoldedBecause;

  bool isConstant() const { return constant != nullptr; }
};

/// Collects the diagnostics MLIR emits while alive into `text`.
class DiagnosticCapture {
public:
  DiagnosticCapture(mlir::MLIRContext &context, std::string &text);
  ~DiagnosticCapture();

private:
  mlir::MLIRContext &context;
  mlir::DiagnosticEngine::HandlerID handler;
};

/// Every run-time value the importer builds is a ranked tensor.
inline mlir::RankedTensorType tensorType(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType());
}

class GraphImporter;
class InitializerClassifier;
struct InitializerCensus;
struct ParameterView;
/// Emits the `tess` ops of the current node; errors go through
/// GraphImporter::nodeError so they name the node.
using NodeHandler = llvm::Error (*)(GraphImporter &);

/// Op type -> handler, filled by the per-family register functions.
using HandlerTable = llvm::StringMap<NodeHandler>;
void registerElementwiseHandlers(HandlerTable &table);
void registerContractionHandlers(HandlerTable &table);
void registerNormalizationHandlers(HandlerTable &table);
void registerShapeHandlers(HandlerTable &table);
void registerReductionHandlers(HandlerTable &table);
void registerIndexingHandlers(HandlerTable &table);
void registerPrefixSumHandlers(HandlerTable &table);

/// `input` as a tess.reshape to `shape` (itself when it has that shape).
llvm::Expected<mlir::Value> reshapeTo(GraphImporter &importer,
                                      mlir::Value input,
                                      llvm::ArrayRef<int64_t> shape);
/// reshapeTo, then the result is the current node's output 0.
llvm::Error setReshaped(GraphImporter &importer, mlir::Value input,
                        llvm::ArrayRef<int64_t> shape);

/// Maps an ONNX element type to the MLIR element type (signless integers);
/// null for types Tessera does not compute with.
mlir::Type convertElementType(int32_t onnxType, mlir::MLIRContext *context);
/// The ONNX element type of an MLIR element type (inverse of the above).
int32_t onnxElementType(mlir::Type type);
/// A host tensor as an MLIR attribute of the matching tensor type.
mlir::DenseElementsAttr toElementsAttr(const HostTensor &tensor,
                                       mlir::MLIRContext *context);

class GraphImporter {
public:
  GraphImporter(const onnx::ModelProto &model, llvm::StringRef modelPath,
                const ImportOptions &options, mlir::MLIRContext &context);

  /// Imports the whole graph into a new module.
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> run();

  //===--------------------------------------------------------------------===//
  // For node handlers
  //===--------------------------------------------------------------------===//

  const onnx::NodeProto &node() const { return *currentNode; }
  int64_t opset() const { return opsetVersion; }
  mlir::OpBuilder &builder() { return opBuilder; }
  mlir::MLIRContext *context() { return &mlirContext; }
  /// The location of the current node: its name (and the model file).
  mlir::Location loc() const { return currentLoc; }

  /// An error naming the model file, the node, its op type and opset.
  llvm::Error nodeError(const llvm::Twine &message) const;

  unsigned numInputs() const { return currentNode->input_size(); }
  /// True when input `index` is given (not past the end, not empty).
  bool hasInput(unsigned index) const;
  /// The host value of an input known at compile time, else null.
  const HostTensor *constantInput(unsigned index) const;
  /// The host value of an input that must be known at compile time (axes,
  /// shapes, split sizes): an error naming the input otherwise.
  llvm::Expected<const HostTensor *> requireConstantInput(unsigned index,
                                                          llvm::StringRef what);
  /// An input as a tensor value; a host constant becomes a `tess.constant`
  /// (once per ONNX value).
  llvm::Expected<mlir::Value> tensorInput(unsigned index);
  /// A sequence input's elements.
  llvm::Expected<const ImportedValue *> sequenceInput(unsigned index);

  void setResult(unsigned index, mlir::Value value);
  void setConstantResult(unsigned index, HostTensor tensor);
  void setSequenceResult(unsigned index, std::vector<ImportedValue> elements);

  /// Builds a `tess` op for the current node, inferring its result types
  /// unless given. Invalid operands (shapes that do not broadcast, a rule of
  /// the op broken by the ONNX node) become an error naming the node, never
  /// an abort: inference runs before the op exists.
  template <typename OpTy>
  llvm::Expected<OpTy> create(mlir::ValueRange operands,
                              llvm::ArrayRef<mlir::NamedAttribute> attributes = {},
                              mlir::TypeRange resultTypes = {}) {
    mlir::OperationState state(loc(), OpTy::getOperationName());
    state.addOperands(operands);
    state.addAttributes(attributes);
    llvm::SmallVector<mlir::Type> types(resultTypes.begin(), resultTypes.end());
    std::string diagnostics;
    {
      DiagnosticCapture capture(mlirContext, diagnostics);
      if constexpr (std::is_base_of_v<
                        mlir::InferTypeOpInterface::Trait<OpTy>, OpTy>) {
        if (types.empty()) {
          typename OpTy::Properties properties;
          mlir::DictionaryAttr dictionary =
              state.attributes.getDictionary(context());
          if (mlir::failed(OpTy::setPropertiesFromAttr(
                  properties, dictionary,
                  [&] { return mlir::emitError(loc()); })) ||
              mlir::failed(OpTy::inferReturnTypes(
                  context(), loc(), state.operands, dictionary,
                  mlir::OpaqueProperties(&properties), state.regions, types)))
            return nodeError("cannot build " +
                             OpTy::getOperationName().str() + ": " +
                             diagnostics);
        }
      }
      state.addTypes(types);
      mlir::Operation *op = opBuilder.create(state);
      if (mlir::failed(mlir::verify(op, /*verifyRecursively=*/false))) {
        op->erase();
        return nodeError("cannot build " + OpTy::getOperationName().str() +
                         ": " + diagnostics);
      }
      return llvm::cast<OpTy>(op);
    }
  }

  /// create<OpTy>, then the op's single result becomes the node's output 0.
  template <typename OpTy>
  llvm::Error createResult(mlir::ValueRange operands,
                           llvm::ArrayRef<mlir::NamedAttribute> attributes = {},
                           mlir::TypeRange resultTypes = {}) {
    llvm::Expected<OpTy> op = create<OpTy>(operands, attributes, resultTypes);
    if (!op)
      return op.takeError();
    setResult(0, op->getResult());
    return llvm::Error::success();
  }

  /// Node attributes, with defaults when absent.
  int64_t intAttr(llvm::StringRef name, int64_t defaultValue) const;
  double floatAttr(llvm::StringRef name, double defaultValue) const;
  std::string stringAttr(llvm::StringRef name,
                         llvm::StringRef defaultValue) const;
  std::optional<std::vector<int64_t>> intsAttr(llvm::StringRef name) const;

private:
  llvm::Error importInputs(mlir::Block &body,
                           llvm::SmallVectorImpl<mlir::Type> &inputTypes);
  llvm::Error importInitializers();
  /// One initializer that is not a view of another, as its classification
  /// says: a host constant or a `tess.parameter`, counted in `census`.
  llvm::Error importInitializer(const onnx::TensorProto &tensor,
                                const InitializerClassifier &classifier,
                                const InitializerClassifier &modelClassifier,
                                InitializerCensus &census);
  /// A view's value: the function (ParameterViews.h) of its `sources`'
  /// values, named after the initializer it replaces.
  mlir::Value importParameterView(const onnx::TensorProto &tensor,
                                  const ParameterView &view,
                                  llvm::ArrayRef<mlir::Value> sources);
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Error checkDeclaredShape(const onnx::ValueInfoProto &info,
                                 const ImportedValue &value,
                                 llvm::StringRef what);
  /// `info`'s declared shape as "[batch=2,seq=32,512]" (a symbolic dim with
  /// its --dim value when bound); `expected` gets each dim's value, where
  /// known.
  std::string
  declaredShape(const onnx::ValueInfoProto &info,
                llvm::SmallVectorImpl<std::optional<int64_t>> &expected) const;
  /// " from its inputs x [batch=2,seq=32], mask [2,7]": the graph's inputs
  /// and their declared shapes, for a declared shape the graph contradicts.
  std::string graphInputsNote() const;
  llvm::Expected<mlir::RankedTensorType>
  declaredType(const onnx::ValueInfoProto &info);
  const onnx::AttributeProto *findAttr(llvm::StringRef name) const;
  /// The attribute when it has `type`; otherwise records attributeError.
  const onnx::AttributeProto *
  typedAttr(llvm::StringRef name, onnx::AttributeProto::AttributeType type,
            llvm::StringRef typeName) const;
  static int64_t hostBytes(const HostTensor &tensor);
  /// " (its dims come from --dim batch=N)" naming the bound dims among
  /// `shape`'s dims (those above 1), or " (bound dims: ...)" when none is;
  /// empty without --dim.
  std::string boundDimsNote(llvm::ArrayRef<int64_t> shape) const;
  /// After the current node's handler ran although its inputs were all
  /// known: why its results were not folded (one is over the fold limit),
  /// or empty when that is not the reason.
  std::string foldLimitReason() const;
  /// Why the current node, which has no handler, cannot be imported: an op
  /// Tessera does not know, or one that exists only on the host (Range)
  /// whose fold was declined (`foldDeclined`: its inputs were all known, so
  /// its result was over the fold limit) or that reads a run-time value.
  llvm::Error unhandledNodeError(bool foldDeclined) const;
  /// Drops the values `node` read for the last time.
  void releaseDeadInputs(const onnx::NodeProto &node);

  /// Live folded constants may hold at most this much host memory. GPT-2's
  /// exported causal mask folds through [batch, 1, seq, seq] tensors, so this
  /// bounds batch * seq^2 (about 48 x 1024^2); planning compiles one
  /// micro-batch, which stays far below. A much larger batch may compile
  /// again: once a mask is over kMaxFoldedElements it is not folded at all
  /// but stays a run-time op (its error, if a host-only op such as Range
  /// then reads it, is ImportedValue::notFoldedBecause).
  static constexpr int64_t kFoldedBytesBudget = int64_t(3) << 29;

  const onnx::ModelProto &model;
  std::string modelPath;
  std::string modelDirectory;
  const ImportOptions &options;
  mlir::MLIRContext &mlirContext;
  mlir::OpBuilder opBuilder;
  int64_t opsetVersion = 0;

  HandlerTable handlers;
  llvm::StringMap<ImportedValue> values;
  /// Readers left for each value name (nodes, graph outputs, value_info).
  llvm::StringMap<int64_t> remainingUses;
  int64_t foldedBytes = 0;
  /// A mistyped attribute met by the current node's handler.
  mutable std::optional<std::string> attributeError;
  const onnx::NodeProto *currentNode = nullptr;
  mlir::Location currentLoc;
};

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
