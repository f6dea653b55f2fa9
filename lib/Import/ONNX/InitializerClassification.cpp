//===- InitializerClassification.cpp - parameter, buffer or constant -----===//
//
// torch.export records, for every lifted tensor, what it was in the module:
// the dynamo ONNX exporter (IR 10) keeps that as the metadata property
// `pkg.torch.export.graph_signature.InputSpec.kind` on the initializer's
// value_info. That is the ground truth and is used when present; in a graph
// that has it, an initializer without it was made by the exporter's
// optimizer and is a constant, unless it is a matrix product's weight: the
// optimizer folds Transpose(W) into a new initializer and drops W, and what
// it leaves is W's values in another layout, which AdamW (elementwise)
// trains exactly as it would train W. The fallback, for models from other
// exporters, is the convention those graphs follow: a learned tensor is a
// floating tensor with at least one element beyond a scalar, and
// well-known buffer names are not learned.
//
//===----------------------------------------------------------------------===//

#include "InitializerClassification.h"

#include "llvm/Support/Regex.h"

#include <google/protobuf/unknown_field_set.h>

using namespace tessera::onnx_import;

namespace {

constexpr const char *kExportKindKey =
    "pkg.torch.export.graph_signature.InputSpec.kind";
/// What onnxscript's optimizer (torch.onnx.export(..., optimize=True))
/// records on a value it folded: the names of the values it was computed
/// from, as a Python list literal ("['lm_head.weight']").
constexpr const char *kFoldedFromKey = "pkg.onnxscript.optimizer.folded_from";

/// ValueInfoProto.metadata_props is field 4 since ONNX IR 10; libonnx 1.12
/// predates it, so protobuf keeps it among the unknown fields. Each entry is
/// a StringStringEntryProto, which 1.12 does know.
std::optional<std::string> metadataOf(const onnx::ValueInfoProto &info,
                                      llvm::StringRef key) {
  constexpr int kMetadataPropsField = 4;
  const google::protobuf::UnknownFieldSet &unknown =
      info.GetReflection()->GetUnknownFields(info);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    if (field.number() != kMetadataPropsField ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(field.length_delimited()) && entry.key() == key)
      return entry.value();
  }
  return std::nullopt;
}

/// The names in a Python list literal of strings, or nothing if `list` is
/// not one.
std::optional<std::vector<std::string>> namesInList(llvm::StringRef list) {
  list = list.trim();
  if (!list.consume_front("[") || !list.consume_back("]"))
    return std::nullopt;
  std::vector<std::string> names;
  for (list = list.trim(); !list.empty(); list = list.trim()) {
    char quote = list.front();
    if (quote != '\'' && quote != '"')
      return std::nullopt;
    size_t end = list.find(quote, 1);
    if (end == llvm::StringRef::npos)
      return std::nullopt;
    names.push_back(list.slice(1, end).str());
    list = list.drop_front(end + 1).trim();
    if (!list.empty() && !list.consume_front(","))
      return std::nullopt;
  }
  return names;
}

bool isFloatingType(int32_t type) {
  return type == onnx::TensorProto::FLOAT ||
         type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16 ||
         type == onnx::TensorProto::DOUBLE;
}

/// Buffers that Transformer implementations register under these names.
bool hasBufferName(llvm::StringRef name) {
  return name.ends_with("position_ids") || name.ends_with("inv_freq") ||
         name.ends_with("token_type_ids") || name.ends_with("masked_bias") ||
         name.contains("lifted_tensor");
}

llvm::Error checkPattern(const std::optional<std::string> &pattern,
                         llvm::StringRef flag) {
  if (!pattern)
    return llvm::Error::success();
  std::string message;
  if (!llvm::Regex(*pattern).isValid(message))
    return llvm::createStringError("%s '%s' is not a valid regular expression: "
                                   "%s",
                                   flag.str().c_str(), pattern->c_str(),
                                   message.c_str());
  return llvm::Error::success();
}

bool matches(const std::optional<std::string> &pattern, llvm::StringRef name) {
  return pattern && llvm::Regex(*pattern).match(name);
}

} // namespace

llvm::Expected<InitializerClassifier>
InitializerClassifier::create(const onnx::GraphProto &graph,
                              const ImportOptions &options) {
  if (llvm::Error error = checkPattern(options.freezePattern, "--freeze"))
    return std::move(error);
  if (llvm::Error error = checkPattern(options.trainPattern, "--train"))
    return std::move(error);
  InitializerClassifier classifier;
  classifier.freezePattern = options.freezePattern;
  classifier.trainPattern = options.trainPattern;
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers.insert(tensor.name());
  for (const onnx::ValueInfoProto &info : graph.value_info()) {
    if (std::optional<std::string> kind = metadataOf(info, kExportKindKey))
      classifier.exportKinds[info.name()] = *kind;
    // One original the export no longer holds: the parameter this tensor
    // is all that is left of. Folded from several (a fused weight), it has
    // no one name.
    std::optional<std::string> list = metadataOf(info, kFoldedFromKey);
    std::optional<std::vector<std::string>> names =
        list ? namesInList(*list) : std::nullopt;
    if (names && names->size() == 1 && !names->front().empty() &&
        !initializers.contains(names->front()))
      classifier.foldedFrom[info.name()] = names->front();
    // torch.export names a lifted parameter or buffer by its module path
    // (dotted), a computed value by an identifier ("arange", "val_4").
    for (const std::string &name : names.value_or(std::vector<std::string>()))
      if (llvm::StringRef(name).contains('.') && !initializers.contains(name))
        classifier.droppedOrigins[info.name()].push_back(name);
  }
  for (const onnx::NodeProto &node : graph.node())
    if ((node.op_type() == "MatMul" || node.op_type() == "Gemm") &&
        node.input_size() >= 2)
      classifier.productWeights.insert(node.input(1));
    else if (node.op_type() == "Gather" && node.input_size() >= 1)
      classifier.lookupTables.insert(node.input(0));
  // A name is one parameter's: of two folded weights claiming it, the
  // first in the file takes it and the other keeps the export's name.
  llvm::StringSet<> claimed;
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    auto origin = classifier.foldedFrom.find(tensor.name());
    if (origin == classifier.foldedFrom.end())
      continue;
    if (!classifier.isFoldedWeight(tensor) ||
        !claimed.insert(origin->second).second)
      classifier.foldedFrom.erase(origin);
  }
  return classifier;
}

bool InitializerClassifier::isFoldedMatrixIn(
    const onnx::TensorProto &initializer, const llvm::StringSet<> &uses) const {
  return outsideSignature(initializer.name()) &&
         uses.contains(initializer.name()) && initializer.dims_size() >= 2 &&
         isFloatingType(initializer.data_type());
}

llvm::ArrayRef<std::string> InitializerClassifier::droppedOriginsOf(
    const onnx::TensorProto &initializer) const {
  auto origins = droppedOrigins.find(initializer.name());
  if (origins == droppedOrigins.end() ||
      !isFloatingType(initializer.data_type()))
    return {};
  return origins->second;
}

InitializerRole
InitializerClassifier::classify(const onnx::TensorProto &initializer) const {
  llvm::StringRef name = initializer.name();
  InitializerRole role;
  auto kind = exportKinds.find(name);
  if (kind != exportKinds.end()) {
    if (kind->second == "PARAMETER")
      role = InitializerRole::TrainableParameter;
    else if (kind->second == "BUFFER")
      role = InitializerRole::Buffer;
    else
      role = InitializerRole::Constant;
  } else if (isFoldedWeight(initializer)) {
    role = InitializerRole::TrainableParameter;
  } else if (!exportKinds.empty()) {
    // The exporter recorded the module's signature, and this tensor is not
    // in it: its graph optimizer made it (a folded mask, a parameter gathered
    // at fixed positions, merged constants). Such a tensor is data.
    role = InitializerRole::Constant;
  } else {
    int64_t elements = 1;
    for (int64_t dim : initializer.dims())
      elements *= dim;
    if (!isFloatingType(initializer.data_type()) || elements <= 1)
      role = InitializerRole::Constant;
    else if (hasBufferName(name))
      role = InitializerRole::Buffer;
    else
      role = InitializerRole::TrainableParameter;
  }
  if (role != InitializerRole::TrainableParameter)
    return role;
  // The user's patterns only ever narrow the trained set, and read the
  // name the parameter is imported under.
  std::string imported = pytorchNameOf(initializer).value_or(name.str());
  if (matches(freezePattern, imported) ||
      (trainPattern && !matches(trainPattern, imported)))
    return InitializerRole::Buffer;
  return role;
}

void InitializerCensus::count(InitializerRole role) {
  switch (role) {
  case InitializerRole::TrainableParameter:
    ++parameters;
    return;
  case InitializerRole::Buffer:
    ++buffers;
    return;
  case InitializerRole::Constant:
    ++constants;
    return;
  }
}

InitializerCounts InitializerCensus::byKind() const {
  return {
      {{"trained", parameters},
       {"  outside the signature", static_cast<int64_t>(foldedWeights.size())},
       {"    under PyTorch's name", pytorchNamed},
       {"copies of a parameter", views},
       {"buffers", buffers},
       {"constants", constants}}};
}
