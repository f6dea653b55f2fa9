//===- GraphImporter.cpp - walk an ONNX graph, fold or emit each node ----===//

#include "GraphImporter.h"
#include "InitializerClassification.h"
#include "ParameterViews.h"

#include "tessera/Import/ONNX/ConstantEvaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace tessera::onnx_import;

namespace {

/// Constants up to this many elements are materialized by value; larger
/// ones stay ops so the IR (and its printed form) stays small.
constexpr int64_t kLargeMaskElements = int64_t(1) << 16;

/// Whether `node` is a comparison or logical op of compile-time operands
/// whose result is their outer product, larger than every operand and than
/// kLargeMaskElements: the causal mask's `kv_pos <= q_pos` over
/// [batch, 1, 1, seq] and [batch, 1, seq, 1] positions, or a sliding
/// window's `kv_pos > q_pos - window`. Folded, such a node costs
/// batch * seq^2 host memory (8 GiB at seq 32768), and so does everything
/// computed from it; left a run-time op on its small operands, the mask is
/// read from its arithmetic by tess-fuse-attention, which turns it into the
/// attention's `causal` flag and `window`, and the ops go away.
bool isOuterProductMask(const onnx::NodeProto &node,
                        llvm::ArrayRef<const HostTensor *> inputs) {
  static const llvm::StringSet<> maskOps = {
      "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
      "And",   "Or",   "Xor"};
  if (!maskOps.contains(node.op_type()) || inputs.size() != 2 ||
      !inputs[0] || !inputs[1])
    return false;
  llvm::ArrayRef<int64_t> lhs = inputs[0]->getShape();
  llvm::ArrayRef<int64_t> rhs = inputs[1]->getShape();
  // The numpy broadcast of the two shapes, counted (a mismatch is left to
  // the evaluator to report).
  int64_t elements = 1;
  size_t rank = std::max(lhs.size(), rhs.size());
  for (size_t dim = 0; dim < rank; ++dim) {
    int64_t a = dim < rank - lhs.size() ? 1 : lhs[dim - (rank - lhs.size())];
    int64_t b = dim < rank - rhs.size() ? 1 : rhs[dim - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1)
      return false;
    if (llvm::MulOverflow(elements, std::max(a, b), elements))
      return true;
  }
  return elements > kLargeMaskElements &&
         elements > inputs[0]->numElements() &&
         elements > inputs[1]->numElements();
}

/// "'a', 'b', 'c' and 12 more": the names a warning lists, the first few of
/// a large model's hundreds.
std::string quotedNames(llvm::ArrayRef<std::string> names) {
  constexpr size_t kListed = 8;
  std::string text;
  for (size_t i = 0; i < names.size() && i < kListed; ++i)
    text += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > kListed)
    text += " and " + std::to_string(names.size() - kListed) + " more";
  return text;
}

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [index, dim] : llvm::enumerate(shape))
    text += (index ? "," : "") + std::to_string(dim);
  return text + "]";
}

/// Why `shape` cannot be the static shape of a tensor, or nothing when it
/// can: a dim is negative, or the element count overflows int64 (which
/// every later size computation would then get wrong).
std::optional<std::string> invalidShapeReason(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  bool overflows = false;
  for (int64_t dim : shape) {
    if (dim < 0)
      return "shape " + shapeString(shape) + " has a negative dim";
    overflows |= __builtin_mul_overflow(count, dim, &count);
  }
  // A zero dim makes the count 0 whatever the other dims are.
  if (overflows && !llvm::is_contained(shape, 0))
    return "shape " + shapeString(shape) +
           " has more elements than a 64-bit count holds";
  return std::nullopt;
}

} // namespace

//===----------------------------------------------------------------------===//
// Types and attributes
//===----------------------------------------------------------------------===//

Type tessera::onnx_import::convertElementType(int32_t onnxType,
                                              MLIRContext *context) {
  Builder builder(context);
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return builder.getF32Type();
  case onnx::TensorProto::FLOAT16:
    return builder.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return builder.getBF16Type();
  case onnx::TensorProto::DOUBLE:
    return builder.getF64Type();
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64:
    return builder.getI64Type();
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32:
    return builder.getI32Type();
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return builder.getIntegerType(16);
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
    return builder.getIntegerType(8);
  case onnx::TensorProto::BOOL:
    return builder.getI1Type();
  default:
    return {};
  }
}

int32_t tessera::onnx_import::onnxElementType(Type type) {
  if (type.isF32())
    return onnx::TensorProto::FLOAT;
  if (type.isF16())
    return onnx::TensorProto::FLOAT16;
  if (type.isBF16())
    return onnx::TensorProto::BFLOAT16;
  if (type.isF64())
    return onnx::TensorProto::DOUBLE;
  if (type.isInteger(64))
    return onnx::TensorProto::INT64;
  if (type.isInteger(32))
    return onnx::TensorProto::INT32;
  if (type.isInteger(16))
    return onnx::TensorProto::INT16;
  if (type.isInteger(8))
    return onnx::TensorProto::INT8;
  if (type.isInteger(1))
    return onnx::TensorProto::BOOL;
  return onnx::TensorProto::UNDEFINED;
}

DenseElementsAttr tessera::onnx_import::toElementsAttr(const HostTensor &tensor,
                                                      MLIRContext *context) {
  Type element = convertElementType(tensor.getElementType(), context);
  auto type = RankedTensorType::get(tensor.getShape(), element);
  int64_t count = tensor.numElements();
  if (tensor.isFloat()) {
    llvm::ArrayRef<double> data = tensor.getFloatData();
    bool splat = count > 0 && llvm::all_equal(data);
    auto &semantics = llvm::cast<FloatType>(element).getFloatSemantics();
    auto convert = [&](double value) {
      APFloat result(value);
      bool lost;
      result.convert(semantics, APFloat::rmNearestTiesToEven, &lost);
      return result;
    };
    if (splat)
      return DenseElementsAttr::get(type, convert(data.front()));
    if (element.isF32()) {
      std::vector<float> floats(data.begin(), data.end());
      return DenseElementsAttr::get(type, llvm::ArrayRef<float>(floats));
    }
    llvm::SmallVector<APFloat> values;
    values.reserve(count);
    for (double value : data)
      values.push_back(convert(value));
    return DenseElementsAttr::get(type, values);
  }
  llvm::ArrayRef<int64_t> data = tensor.getIntData();
  unsigned width = element.getIntOrFloatBitWidth();
  if (count > 0 && llvm::all_equal(data))
    return DenseElementsAttr::get(type, APInt(width, data.front(), true, true));
  if (width == 1) {
    llvm::SmallVector<bool> bools(data.begin(), data.end());
    return DenseElementsAttr::get(type, llvm::ArrayRef<bool>(bools));
  }
  if (width == 64)
    return DenseElementsAttr::get(type, data);
  llvm::SmallVector<APInt> values;
  values.reserve(count);
  for (int64_t value : data)
    values.push_back(APInt(width, value, true, true));
  return DenseElementsAttr::get(type, values);
}

DiagnosticCapture::DiagnosticCapture(MLIRContext &context, std::string &text)
    : context(context) {
  handler = context.getDiagEngine().registerHandler([&text](Diagnostic &diag) {
    if (!text.empty())
      text += "; ";
    text += diag.str();
    return success();
  });
}

DiagnosticCapture::~DiagnosticCapture() {
  context.getDiagEngine().eraseHandler(handler);
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

GraphImporter::GraphImporter(const onnx::ModelProto &model,
                             llvm::StringRef modelPath,
                             const ImportOptions &options,
                             MLIRContext &context)
    : model(model), modelPath(modelPath.str()),
      modelDirectory(llvm::sys::path::parent_path(modelPath).str()),
      options(options), mlirContext(context), opBuilder(&context),
      currentLoc(UnknownLoc::get(&context)) {
  registerElementwiseHandlers(handlers);
  registerContractionHandlers(handlers);
  registerNormalizationHandlers(handlers);
  registerShapeHandlers(handlers);
  registerReductionHandlers(handlers);
  registerIndexingHandlers(handlers);
  registerPrefixSumHandlers(handlers);
}

llvm::Error GraphImporter::nodeError(const llvm::Twine &message) const {
  std::string where =
      currentNode ? "node '" + currentNode->name() + "' (" +
                        currentNode->op_type() + ", opset " +
                        std::to_string(opsetVersion) + ")"
                  : std::string("graph");
  return llvm::createStringError(modelPath + ": " + where + ": " + message);
}

bool GraphImporter::hasInput(unsigned index) const {
  return index < numInputs() && !currentNode->input(index).empty();
}

const HostTensor *GraphImporter::constantInput(unsigned index) const {
  if (!hasInput(index))
    return nullptr;
  auto it = values.find(currentNode->input(index));
  return it == values.end() ? nullptr : it->second.constant.get();
}

llvm::Expected<const HostTensor *>
GraphImporter::requireConstantInput(unsigned index, llvm::StringRef what) {
  if (const HostTensor *constant = constantInput(index))
    return constant;
  return nodeError("input " + std::to_string(index) + " (" + what +
                   ") must be known at compile time; Tessera compiles "
                   "static shapes");
}

llvm::Expected<Value> GraphImporter::tensorInput(unsigned index) {
  if (!hasInput(index))
    return nodeError("missing required input " + std::to_string(index));
  auto it = values.find(currentNode->input(index));
  if (it == values.end())
    return nodeError("input '" + currentNode->input(index) +
                     "' is not defined before its use");
  ImportedValue &imported = it->second;
  if (imported.isSequence)
    return nodeError("input '" + currentNode->input(index) +
                     "' is a sequence where a tensor is expected");
  if (!imported.value) {
    if (convertElementType(imported.constant->getElementType(), context()) ==
        nullptr)
      return nodeError("input '" + currentNode->input(index) + "' has type " +
                       elementTypeName(imported.constant->getElementType()) +
                       ", which Tessera does not compute with");
    // Constants are materialized at the top of the function so that every
    // later use, in any node, is dominated by the definition.
    OpBuilder::InsertionGuard guard(opBuilder);
    opBuilder.setInsertionPointToStart(opBuilder.getInsertionBlock());
    imported.value = tess::ConstantOp::create(
        opBuilder, NameLoc::get(StringAttr::get(context(), it->first())),
        toElementsAttr(*imported.constant, context()));
  }
  return imported.value;
}

llvm::Expected<const ImportedValue *>
GraphImporter::sequenceInput(unsigned index) {
  auto it = hasInput(index) ? values.find(currentNode->input(index))
                            : values.end();
  if (it == values.end() || !it->second.isSequence)
    return nodeError("input " + std::to_string(index) + " must be a sequence");
  return &it->second;
}

void GraphImporter::setResult(unsigned index, Value value) {
  if (index < static_cast<unsigned>(currentNode->output_size()) &&
      !currentNode->output(index).empty())
    values[currentNode->output(index)] = ImportedValue{nullptr, value, {}};
}

void GraphImporter::setConstantResult(unsigned index, HostTensor tensor) {
  if (index < static_cast<unsigned>(currentNode->output_size()) &&
      !currentNode->output(index).empty()) {
    foldedBytes += hostBytes(tensor);
    values[currentNode->output(index)] = ImportedValue{
        std::make_shared<const HostTensor>(std::move(tensor)), Value(), {}};
  }
}

std::string GraphImporter::boundDimsNote(llvm::ArrayRef<int64_t> shape) const {
  if (options.dims.empty())
    return "";
  std::string named, all;
  for (const auto &[name, value] : options.dims) {
    std::string flag = "--dim " + name + "=" + std::to_string(value);
    all += (all.empty() ? "" : ", ") + flag;
    if (value > 1 && llvm::is_contained(shape, value))
      named += (named.empty() ? "" : ", ") + flag;
  }
  return named.empty() ? " (bound dims: " + all + ")"
                       : " (its dims come from " + named + ")";
}

std::string GraphImporter::foldLimitReason() const {
  for (const std::string &output : currentNode->output()) {
    auto it = values.find(output);
    if (output.empty() || it == values.end() || !it->second.value)
      continue;
    auto type = llvm::dyn_cast<RankedTensorType>(it->second.value.getType());
    // importNode has checked that the count fits in 64 bits.
    if (!type || type.getNumElements() <= kMaxFoldedElements)
      continue;
    return "node '" + currentNode->name() + "' (" + currentNode->op_type() +
           ") was not folded: its result '" + output + "' " +
           shapeString(type.getShape()) + " has " +
           std::to_string(type.getNumElements()) +
           " elements, more than the " + std::to_string(kMaxFoldedElements) +
           " Tessera folds on the host" + boundDimsNote(type.getShape());
  }
  return "";
}

llvm::Error GraphImporter::unhandledNodeError(bool foldDeclined) const {
  const std::string &opType = currentNode->op_type();
  if (!isFoldableOpType(opType))
    return nodeError("unsupported op '" + opType + "' (opset " +
                     std::to_string(opsetVersion) + ")");
  if (foldDeclined)
    return nodeError("'" + opType +
                     "' has no run-time form, and its result was not folded: "
                     "it has more than the " +
                     std::to_string(kMaxFoldedElements) +
                     " elements Tessera folds on the host" + boundDimsNote({}));
  // A run-time input: because an earlier fold was too large (that fold, and
  // the --dim behind it, is the cause), or computed from the graph's inputs.
  for (const std::string &input : currentNode->input()) {
    auto it = input.empty() ? values.end() : values.find(input);
    if (it != values.end() && !it->second.notFoldedBecause.empty())
      return nodeError("'" + opType +
                       "' has no run-time form and needs its input '" + input +
                       "' known at compile time, but " +
                       it->second.notFoldedBecause);
  }
  for (const std::string &input : currentNode->input()) {
    auto it = input.empty() ? values.end() : values.find(input);
    if (it != values.end() && !it->second.isConstant())
      return nodeError("'" + opType +
                       "' has no run-time form and needs its input '" + input +
                       "' known at compile time, but it is computed at run "
                       "time");
  }
  return nodeError("unsupported op '" + opType + "' (opset " +
                   std::to_string(opsetVersion) + ")");
}

int64_t GraphImporter::hostBytes(const HostTensor &tensor) {
  // HostTensor keeps one int64 or one double per element.
  return tensor.numElements() * 8;
}

void GraphImporter::releaseDeadInputs(const onnx::NodeProto &node) {
  for (const std::string &input : node.input()) {
    auto uses = remainingUses.find(input);
    if (input.empty() || uses == remainingUses.end() || --uses->second > 0)
      continue;
    auto it = values.find(input);
    if (it == values.end())
      continue;
    if (it->second.constant && it->second.constant.use_count() == 1)
      foldedBytes -= hostBytes(*it->second.constant);
    values.erase(it);
  }
}

void GraphImporter::setSequenceResult(unsigned index,
                                      std::vector<ImportedValue> elements) {
  ImportedValue sequence;
  sequence.isSequence = true;
  sequence.sequence = std::move(elements);
  if (index < static_cast<unsigned>(currentNode->output_size()))
    values[currentNode->output(index)] = std::move(sequence);
}

const onnx::AttributeProto *
GraphImporter::findAttr(llvm::StringRef name) const {
  for (const onnx::AttributeProto &attr : currentNode->attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

const onnx::AttributeProto *
GraphImporter::typedAttr(llvm::StringRef name,
                         onnx::AttributeProto::AttributeType type,
                         llvm::StringRef typeName) const {
  const onnx::AttributeProto *attr = findAttr(name);
  if (!attr || attr->type() == type)
    return attr;
  // Handlers read attributes as plain values; a mistyped one is recorded
  // and reported once the handler returns (see importNode).
  if (!attributeError)
    attributeError = "attribute '" + name.str() + "' must be " +
                     typeName.str() + " (ONNX type " +
                     std::to_string(static_cast<int>(attr->type())) + ")";
  return nullptr;
}

int64_t GraphImporter::intAttr(llvm::StringRef name,
                               int64_t defaultValue) const {
  const onnx::AttributeProto *attr =
      typedAttr(name, onnx::AttributeProto::INT, "an integer");
  return attr ? attr->i() : defaultValue;
}

double GraphImporter::floatAttr(llvm::StringRef name,
                                double defaultValue) const {
  const onnx::AttributeProto *attr =
      typedAttr(name, onnx::AttributeProto::FLOAT, "a float");
  return attr ? attr->f() : defaultValue;
}

std::string GraphImporter::stringAttr(llvm::StringRef name,
                                      llvm::StringRef defaultValue) const {
  const onnx::AttributeProto *attr =
      typedAttr(name, onnx::AttributeProto::STRING, "a string");
  return attr ? attr->s() : defaultValue.str();
}

std::optional<std::vector<int64_t>>
GraphImporter::intsAttr(llvm::StringRef name) const {
  const onnx::AttributeProto *attr =
      typedAttr(name, onnx::AttributeProto::INTS, "a list of integers");
  if (!attr)
    return std::nullopt;
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

//===----------------------------------------------------------------------===//
// Graph inputs, initializers, outputs
//===----------------------------------------------------------------------===//

llvm::Expected<RankedTensorType>
GraphImporter::declaredType(const onnx::ValueInfoProto &info) {
  if (!info.type().has_tensor_type())
    return llvm::createStringError(modelPath + ": input '" + info.name() +
                                   "' is not a tensor");
  const onnx::TypeProto::Tensor &tensor = info.type().tensor_type();
  Type element = convertElementType(tensor.elem_type(), context());
  if (!element)
    return llvm::createStringError(
        modelPath + ": input '" + info.name() + "' has element type " +
        elementTypeName(tensor.elem_type()) +
        ", which Tessera does not support");
  if (!tensor.has_shape())
    return llvm::createStringError(modelPath + ": input '" + info.name() +
                                   "' has no shape");
  llvm::SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto::Dimension &dim : tensor.shape().dim()) {
    if (dim.has_dim_value()) {
      shape.push_back(dim.dim_value());
      continue;
    }
    auto bound = options.dims.find(dim.dim_param());
    if (dim.dim_param().empty() || bound == options.dims.end())
      return llvm::createStringError(
          modelPath + ": symbolic dim '" + dim.dim_param() + "' of input '" +
          info.name() + "' is not bound; pass --dim " + dim.dim_param() +
          "=N");
    shape.push_back(bound->second);
  }
  if (std::optional<std::string> reason = invalidShapeReason(shape))
    return llvm::createStringError(modelPath + ": input '" + info.name() +
                                   "': " + *reason);
  return RankedTensorType::get(shape, element);
}

llvm::Error
GraphImporter::importInputs(Block &body,
                            llvm::SmallVectorImpl<Type> &inputTypes) {
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  // Every --dim must name a symbolic dim of some input: a misspelt name would
  // otherwise be ignored silently.
  llvm::StringSet<> symbols;
  for (const onnx::ValueInfoProto &input : model.graph().input())
    for (const auto &dim : input.type().tensor_type().shape().dim())
      if (!dim.dim_param().empty())
        symbols.insert(dim.dim_param());
  for (const auto &[name, value] : options.dims) {
    if (!symbols.contains(name)) {
      std::string known;
      for (const auto &symbol : symbols)
        known += (known.empty() ? "" : ", ") + symbol.getKey().str();
      return llvm::createStringError(
          "--dim " + name + ": " + modelPath + " has no symbolic dim '" +
          name + "' (its symbolic dims: " +
          (known.empty() ? std::string("none") : known) + ")");
    }
    if (value <= 0)
      return llvm::createStringError("--dim " + name + "=" +
                                     std::to_string(value) +
                                     ": a dim must be positive");
  }
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (initializers.contains(input.name()))
      continue;
    if (values.count(input.name()))
      return llvm::createStringError(modelPath + ": graph input '" +
                                     input.name() + "' is declared twice");
    llvm::Expected<RankedTensorType> type = declaredType(input);
    if (!type)
      return type.takeError();
    inputTypes.push_back(*type);
    values[input.name()] = ImportedValue{
        nullptr, body.addArgument(*type, NameLoc::get(StringAttr::get(
                                             context(), input.name()))),
        {}};
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::importInitializers() {
  llvm::Expected<InitializerClassifier> classifier =
      InitializerClassifier::create(model.graph(), options);
  if (!classifier)
    return classifier.takeError();
  // The same classification without --freeze/--train: a weight the user
  // froze is still a weight (a named, untrained parameter), not a buffer to
  // fold into the graph.
  ImportOptions withoutPatterns = options;
  withoutPatterns.freezePattern.reset();
  withoutPatterns.trainPattern.reset();
  llvm::Expected<InitializerClassifier> modelClassifier =
      InitializerClassifier::create(model.graph(), withoutPatterns);
  if (!modelClassifier)
    return modelClassifier.takeError();
  // An initializer derived from weights (a tied head's transposed
  // embedding, a fused QKV weight, a reshaped or cast copy) is that function
  // of them: the weights stay parameters, each with its whole gradient.
  llvm::StringMap<ParameterView> views = findParameterViews(
      model.graph(),
      [&](const onnx::TensorProto &tensor) {
        return modelClassifier->classify(tensor) ==
               InitializerRole::TrainableParameter;
      },
      [&](const onnx::TensorProto &tensor) {
        return !modelClassifier->inSignature(tensor.name());
      });
  InitializerCensus census;
  std::vector<const onnx::TensorProto *> deferredViews;
  for (const onnx::TensorProto &tensor : model.graph().initializer()) {
    // A parameter is known by its name (checkpoints, --freeze, the runtime).
    if (tensor.name().empty())
      return llvm::createStringError(modelPath +
                                     ": an initializer has no name");
    if (values.count(tensor.name()))
      return llvm::createStringError(modelPath + ": initializer '" +
                                     tensor.name() + "' is defined twice");
    if (views.count(tensor.name())) {
      deferredViews.push_back(&tensor);
      continue;
    }
    if (llvm::Error error =
            importInitializer(tensor, *classifier, *modelClassifier, census))
      return error;
  }
  for (const onnx::TensorProto *tensor : deferredViews) {
    const ParameterView &view = views.find(tensor->name())->second;
    llvm::SmallVector<Value> sources;
    for (const std::string &name : view.sources) {
      auto source = values.find(name);
      if (source != values.end() && source->second.value)
        sources.push_back(source->second.value);
    }
    // A source that became a host constant (not a weight after all) leaves
    // its view a tensor of its own.
    if (sources.size() != view.sources.size()) {
      if (llvm::Error error = importInitializer(*tensor, *classifier,
                                                *modelClassifier, census))
        return error;
      continue;
    }
    values[tensor->name()] =
        ImportedValue{nullptr, importParameterView(*tensor, view, sources), {}};
    ++census.views;
  }
  // The optimizer's folded weights are trained, under the names it gave
  // them; said once, unless --freeze/--train chose what to train.
  if (!census.foldedWeights.empty() && !options.freezePattern &&
      !options.trainPattern) {
    mlir::emitWarning(FileLineColLoc::get(context(), modelPath, 0, 0))
        << "initializers " << quotedNames(census.foldedWeights)
        << " are matrix products' weights outside the export's graph "
           "signature (torch.onnx.export(..., optimize=True) folds a "
           "parameter's transpose into a new initializer and drops the "
           "parameter): they are trained, in the layout the export gave "
           "them, under the parameter's PyTorch name where the optimizer "
           "recorded the one it folded (pkg.onnxscript.optimizer.folded_from) "
           "and else under the export's; --freeze or --train choose otherwise";
  }
  // A lookup table outside the signature may be learned or derived from a
  // buffer: the importer cannot tell, and says what it chose.
  if (!census.foldedTables.empty()) {
    mlir::emitWarning(FileLineColLoc::get(context(), modelPath, 0, 0))
        << "initializers " << quotedNames(census.foldedTables)
        << " are lookup tables outside the export's graph signature, which "
           "may be learned embeddings or tables computed from buffers: they "
           "are imported as constants and not trained; if one was learned, "
           "export with torch.onnx.export(..., optimize=False)";
  }
  // A value the optimizer computed from a module tensor it then dropped
  // (GPT-2's position embeddings gathered at the positions 0..seq-1) may
  // hold a parameter's values or a buffer's: the importer cannot tell.
  if (!census.foldedConstants.empty()) {
    mlir::emitWarning(FileLineColLoc::get(context(), modelPath, 0, 0))
        << "initializers " << quotedNames(census.foldedConstants)
        << " are constants the export's optimizer computed from "
        << quotedNames(census.droppedOrigins)
        << ", which the export no longer holds "
           "(pkg.onnxscript.optimizer.folded_from): they are not trained; "
           "if one of those was a learned parameter, export with "
           "torch.onnx.export(..., optimize=False)";
  }
  if (options.initializerCounts)
    *options.initializerCounts = census.byKind();
  return llvm::Error::success();
}

Value GraphImporter::importParameterView(const onnx::TensorProto &tensor,
                                         const ParameterView &view,
                                         llvm::ArrayRef<Value> sources) {
  auto loc = NameLoc::get(StringAttr::get(context(), tensor.name()));
  Type element = convertElementType(tensor.data_type(), context());
  llvm::SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  if (view.transposed)
    std::swap(shape[0], shape[1]);
  llvm::SmallVector<Value> pieces;
  for (Value source : sources) {
    auto type = cast<RankedTensorType>(source.getType());
    if (type.getElementType() != element)
      source = tess::CastOp::create(opBuilder, loc, type.clone(element), source);
    pieces.push_back(source);
  }
  Value value = pieces.front();
  if (pieces.size() > 1) {
    value = tess::ConcatOp::create(opBuilder, loc, pieces, view.concatAxis);
  } else if (view.sliceAxis) {
    auto type = cast<RankedTensorType>(value.getType());
    llvm::SmallVector<int64_t> starts(shape.size(), 0);
    llvm::SmallVector<int64_t> limits(type.getShape());
    starts[*view.sliceAxis] = view.sliceStart;
    limits[*view.sliceAxis] = view.sliceStart + shape[*view.sliceAxis];
    value = tess::SliceOp::create(
        opBuilder, loc, value, opBuilder.getDenseI64ArrayAttr(starts),
        opBuilder.getDenseI64ArrayAttr(limits),
        opBuilder.getDenseI64ArrayAttr(
            llvm::SmallVector<int64_t>(shape.size(), 1)));
  } else if (cast<RankedTensorType>(value.getType()).getShape() !=
             llvm::ArrayRef<int64_t>(shape)) {
    value = tess::ReshapeOp::create(
        opBuilder, loc, RankedTensorType::get(shape, element), value);
  }
  if (view.transposed)
    value = tess::TransposeOp::create(opBuilder, loc, value,
                                      opBuilder.getDenseI64ArrayAttr({1, 0}));
  return value;
}

llvm::Error GraphImporter::importInitializer(
    const onnx::TensorProto &tensor, const InitializerClassifier &classifier,
    const InitializerClassifier &modelClassifier, InitializerCensus &census) {
  InitializerRole role = classifier.classify(tensor);
  if (classifier.isFoldedWeight(tensor))
    census.foldedWeights.push_back(tensor.name());
  // Checkpoints and --summary name a parameter as PyTorch does wherever the
  // export says which one a folded weight is.
  std::string name =
      modelClassifier.pytorchNameOf(tensor).value_or(tensor.name());
  if (name != tensor.name())
    ++census.pytorchNamed;
  if (classifier.isFoldedLookupTable(tensor)) {
    census.foldedTables.push_back(tensor.name());
  } else if (llvm::ArrayRef<std::string> origins =
                 classifier.droppedOriginsOf(tensor);
             !origins.empty() && role == InitializerRole::Constant) {
    census.foldedConstants.push_back(tensor.name());
    for (const std::string &origin : origins)
      if (!llvm::is_contained(census.droppedOrigins, origin))
        census.droppedOrigins.push_back(origin);
  }
  bool frozenWeight =
      role != InitializerRole::TrainableParameter &&
      modelClassifier.classify(tensor) ==
          InitializerRole::TrainableParameter;
  Type element = convertElementType(tensor.data_type(), context());
  if (!element)
    return llvm::createStringError(
        modelPath + ": initializer '" + tensor.name() + "' has element type " +
        elementTypeName(tensor.data_type()) +
        ", which Tessera does not support");
  llvm::SmallVector<int64_t> shape(tensor.dims().begin(),
                                   tensor.dims().end());
  if (std::optional<std::string> reason = invalidShapeReason(shape))
    return llvm::createStringError(modelPath + ": initializer '" +
                                   tensor.name() + "': " + *reason);
  auto type = RankedTensorType::get(shape, element);
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;

  // Constants and small buffers are read now, so that the graph that
  // computes with them (masks, positions) folds away. Weights are not.
  bool readNow = role == InitializerRole::Constant ||
                 (role == InitializerRole::Buffer && !frozenWeight &&
                  type.getNumElements() <= kLargeMaskElements);
  if (readNow || options.loadWeights) {
    llvm::Expected<HostTensor> decoded =
        decodeTensorProto(tensor, modelDirectory);
    if (decoded && readNow) {
      values[tensor.name()] = ImportedValue{
          std::make_shared<const HostTensor>(std::move(*decoded)), Value(),
          {}};
      census.count(role);
      return llvm::Error::success();
    }
    // A graph-only (meta) export has no data for its weights; such a
    // value stays a named run-time tensor unless weights were asked for.
    if (!decoded && options.loadWeights)
      return llvm::createStringError(modelPath + ": " +
                                     llvm::toString(decoded.takeError()));
    if (decoded && options.loadWeights) {
      auto parameter = tess::ParameterOp::create(
          opBuilder, NameLoc::get(StringAttr::get(context(), name)), type,
          name, role == InitializerRole::TrainableParameter,
          nullptr, toElementsAttr(*decoded, context()));
      values[tensor.name()] = ImportedValue{nullptr, parameter, {}};
      census.count(role);
      return llvm::Error::success();
    }
    llvm::consumeError(decoded.takeError());
  }

  tess::WeightLocationAttr location;
  if (external) {
    std::string file;
    std::optional<int64_t> offset, length;
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      if (entry.key() == "location") {
        file = entry.value();
        continue;
      }
      if (entry.key() != "offset" && entry.key() != "length")
        continue;
      int64_t number;
      if (llvm::StringRef(entry.value()).getAsInteger(10, number) ||
          number < 0)
        return llvm::createStringError(
            modelPath + ": initializer '" + tensor.name() +
            "': external data " + entry.key() + " '" + entry.value() +
            "' is not a non-negative integer");
      (entry.key() == "offset" ? offset : length) = number;
    }
    location = tess::WeightLocationAttr::get(context(), file,
                                             offset.value_or(0), length);
  } else {
    location = tess::WeightLocationAttr::get(
        context(), llvm::sys::path::filename(modelPath), std::nullopt,
        std::nullopt);
  }
  auto parameter = tess::ParameterOp::create(
      opBuilder, NameLoc::get(StringAttr::get(context(), name)), type, name,
      role == InitializerRole::TrainableParameter, location, nullptr);
  values[tensor.name()] = ImportedValue{nullptr, parameter, {}};
  census.count(role);
  return llvm::Error::success();
}

std::string GraphImporter::declaredShape(
    const onnx::ValueInfoProto &info,
    llvm::SmallVectorImpl<std::optional<int64_t>> &expected) const {
  std::string declared;
  for (const auto &dim : info.type().tensor_type().shape().dim()) {
    declared += declared.empty() ? "" : ",";
    if (dim.has_dim_value()) {
      expected.push_back(dim.dim_value());
      declared += std::to_string(dim.dim_value());
      continue;
    }
    auto bound = options.dims.find(dim.dim_param());
    expected.push_back(bound == options.dims.end()
                           ? std::nullopt
                           : std::optional<int64_t>(bound->second));
    declared += dim.dim_param();
    if (expected.back())
      declared += "=" + std::to_string(*expected.back());
  }
  return "[" + declared + "]";
}

std::string GraphImporter::graphInputsNote() const {
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  std::string inputs;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (initializers.contains(input.name()) ||
        !input.type().tensor_type().has_shape())
      continue;
    llvm::SmallVector<std::optional<int64_t>> unused;
    inputs += (inputs.empty() ? "" : ", ") + input.name() + " " +
              declaredShape(input, unused);
  }
  return inputs.empty() ? "" : " from its inputs " + inputs;
}

llvm::Error GraphImporter::checkDeclaredShape(const onnx::ValueInfoProto &info,
                                              const ImportedValue &value,
                                              llvm::StringRef what) {
  if (value.isSequence || !info.type().has_tensor_type() ||
      !info.type().tensor_type().has_shape())
    return llvm::Error::success();
  llvm::ArrayRef<int64_t> actual =
      value.constant ? value.constant->getShape()
                     : llvm::cast<RankedTensorType>(value.value.getType())
                           .getShape();
  llvm::SmallVector<std::optional<int64_t>> expected;
  std::string declared = declaredShape(info, expected);
  // Which input disagrees with the declaration (a static dim of a second
  // input of a legacy export, an unbound or wrongly bound --dim) is read off
  // the inputs' declared and bound shapes.
  auto mismatch = [&](const std::string &declaration) {
    return llvm::createStringError(modelPath + ": " + what.str() + " '" +
                                   info.name() + "' is declared " +
                                   declaration + " but the graph computes " +
                                   shapeString(actual) + graphInputsNote());
  };
  if (expected.size() != actual.size())
    return mismatch("with rank " + std::to_string(expected.size()));
  for (auto [dim, size] : llvm::zip_equal(expected, actual))
    if (dim && *dim != size)
      return mismatch(declared);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

llvm::Error GraphImporter::importNode(const onnx::NodeProto &node) {
  currentNode = &node;
  currentLoc = NameLoc::get(StringAttr::get(
      context(), node.name().empty() ? node.op_type() : node.name()));
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nodeError("op '" + node.op_type() + "' of domain '" +
                     node.domain() + "' is not supported (Tessera imports "
                     "the default ONNX domain)");
  // ONNX graphs are in SSA form: a second definition would silently replace
  // the first for every later reader.
  for (const std::string &output : node.output())
    if (!output.empty() && values.count(output))
      return nodeError("output '" + output +
                       "' is already defined (by an input, an initializer "
                       "or an earlier node)");

  // Fold when everything the node reads is known. Attention masks are the
  // exceptions: a huge boolean mask selecting between two scalars stays a
  // `tess.where` on a compact i1 constant, and a comparison that would
  // build one from position vectors stays a run-time op (see
  // isOuterProductMask); the attention fusion reads either as its mask kind.
  bool allConstant = true;
  std::vector<const HostTensor *> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = values.find(node.input(i));
    if (it == values.end())
      return nodeError("input '" + node.input(i) +
                       "' is not defined before its use");
    inputs.push_back(it->second.constant.get());
    allConstant &= it->second.isConstant();
  }
  bool keepLargeSelect =
      node.op_type() == "Where" && allConstant && inputs.size() == 3 &&
      llvm::all_of(inputs, [](const HostTensor *input) { return input; }) &&
      inputs[0]->numElements() > kLargeMaskElements &&
      inputs[1]->numElements() == 1 && inputs[2]->numElements() == 1;
  bool keepAsOp =
      allConstant && (keepLargeSelect || isOuterProductMask(node, inputs));
  if (allConstant && !keepAsOp) {
    llvm::Expected<std::optional<std::vector<HostTensor>>> folded =
        evaluateNode(node, inputs, opsetVersion, modelDirectory);
    // The evaluator's message already names the node and op.
    if (!folded)
      return llvm::createStringError(modelPath + ": " +
                                     llvm::toString(folded.takeError()));
    if (*folded) {
      for (auto [index, tensor] : llvm::enumerate(**folded))
        setConstantResult(index, std::move(tensor));
      return llvm::Error::success();
    }
  }

  auto handler = handlers.find(node.op_type());
  if (handler == handlers.end())
    return unhandledNodeError(allConstant && !keepAsOp);
  attributeError.reset();
  if (llvm::Error error = handler->second(*this))
    return error;
  if (attributeError)
    return nodeError(*attributeError);
  // Shapes come from the model (Reshape targets, Expand shapes, ...): one
  // that no tensor can have must stop the import here, not in a later pass.
  for (const std::string &output : node.output()) {
    auto it = values.find(output);
    if (output.empty() || it == values.end() || !it->second.value)
      continue;
    auto type = llvm::dyn_cast<RankedTensorType>(it->second.value.getType());
    if (!type)
      continue;
    if (std::optional<std::string> reason =
            invalidShapeReason(type.getShape()))
      return nodeError("output '" + output + "': " + *reason +
                       boundDimsNote(type.getShape()));
  }
  // Remember why results that could have been constants are not (a fold
  // over the limit here, or in a value this node reads).
  std::string notFoldedBecause;
  if (allConstant && !keepAsOp)
    notFoldedBecause = foldLimitReason();
  for (int i = 0; i < node.input_size() && notFoldedBecause.empty(); ++i) {
    auto it = node.input(i).empty() ? values.end() : values.find(node.input(i));
    if (it != values.end())
      notFoldedBecause = it->second.notFoldedBecause;
  }
  if (!notFoldedBecause.empty())
    for (const std::string &output : node.output()) {
      auto it = output.empty() ? values.end() : values.find(output);
      if (it != values.end() && it->second.value)
        it->second.notFoldedBecause = notFoldedBecause;
    }
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (opset.domain().empty() || opset.domain() == "ai.onnx")
      opsetVersion = opset.version();
  constexpr int64_t kMinOpset = 13, kMaxOpset = 22;
  if (opsetVersion < kMinOpset || opsetVersion > kMaxOpset)
    return llvm::createStringError(
        modelPath + ": ONNX opset " + std::to_string(opsetVersion) +
        " is not supported (Tessera imports opsets " +
        std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
        "; re-export with torch.onnx.export(..., opset_version=20))");

  Location fileLoc = FileLineColLoc::get(context(), modelPath, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  auto function = func::FuncOp::create(fileLoc, "forward",
                                       FunctionType::get(context(), {}, {}));
  module->push_back(function);
  Block *body = function.addEntryBlock();
  opBuilder.setInsertionPointToStart(body);

  llvm::SmallVector<Type> inputTypes;
  if (llvm::Error error = importInputs(*body, inputTypes))
    return std::move(error);
  if (llvm::Error error = importInitializers())
    return std::move(error);
  // Folded constants are dropped after their last reader, and the live ones
  // must fit a host-memory budget: a small model can ask for gigabytes of
  // folding (Range(0, 2^27) + 1 ...), which must end in an error, not OOM.
  for (const onnx::NodeProto &node : model.graph().node())
    for (const std::string &input : node.input())
      ++remainingUses[input];
  for (const onnx::ValueInfoProto &output : model.graph().output())
    ++remainingUses[output.name()];
  // The exporter's declared shapes must agree with what the graph computes
  // for the bound dims: a contradiction means the --dim values are wrong
  // for this model (or the model is broken). Checked as each value is made,
  // before it can be released.
  llvm::StringMap<const onnx::ValueInfoProto *> declared;
  for (const onnx::ValueInfoProto &info : model.graph().value_info())
    declared[info.name()] = &info;
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (llvm::Error error = importNode(node))
      return std::move(error);
    for (const std::string &output : node.output()) {
      auto info = declared.find(output);
      auto it = values.find(output);
      if (info != declared.end() && it != values.end())
        if (llvm::Error error =
                checkDeclaredShape(*info->second, it->second, "value"))
          return std::move(error);
    }
    if (foldedBytes > kFoldedBytesBudget) {
      // Name the node's largest folded result and the dims in its shape.
      std::string largest;
      int64_t largestBytes = 0;
      for (const std::string &output : node.output()) {
        auto it = output.empty() ? values.end() : values.find(output);
        if (it == values.end() || !it->second.constant ||
            hostBytes(*it->second.constant) <= largestBytes)
          continue;
        largestBytes = hostBytes(*it->second.constant);
        largest = ": its result '" + output + "' " +
                  shapeString(it->second.constant->getShape()) +
                  " alone takes " + std::to_string(largestBytes >> 20) +
                  " MiB" + boundDimsNote(it->second.constant->getShape());
      }
      if (largest.empty())
        largest = boundDimsNote({});
      return nodeError(
          "folding this graph on the host needs more than " +
          std::to_string(kFoldedBytesBudget >> 20) +
          " MiB of compile-time constants at once" + largest +
          "; the bound dims are too large for the shape and mask arithmetic "
          "it folds (compile one micro-batch: a smaller --dim batch), or the "
          "model computes something unreasonably large from its shapes");
    }
    releaseDeadInputs(node);
  }
  currentNode = nullptr;



  llvm::SmallVector<Value> results;
  llvm::SmallVector<Type> resultTypes;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    auto it = values.find(output.name());
    if (it == values.end() || it->second.isSequence)
      return llvm::createStringError(modelPath + ": graph output '" +
                                     output.name() +
                                     "' is not a computed tensor");
    if (llvm::Error error = checkDeclaredShape(output, it->second, "output"))
      return std::move(error);
    opBuilder.setInsertionPointToEnd(body);
    if (!it->second.value)
      it->second.value = tess::ConstantOp::create(
          opBuilder, fileLoc, toElementsAttr(*it->second.constant, context()));
    results.push_back(it->second.value);
    resultTypes.push_back(it->second.value.getType());
  }
  opBuilder.setInsertionPointToEnd(body);
  func::ReturnOp::create(opBuilder, fileLoc, results);
  function.setType(FunctionType::get(context(), inputTypes, resultTypes));
  // Every op was verified when it was built; this catches what only the
  // whole module can show (a symbol clash, a broken terminator), so that no
  // invalid IR ever leaves the importer.
  std::string diagnostics;
  {
    DiagnosticCapture capture(mlirContext, diagnostics);
    if (failed(verify(*module)))
      return llvm::createStringError(modelPath +
                                     ": the imported module is invalid: " +
                                     diagnostics);
  }
  return std::move(module);
}
