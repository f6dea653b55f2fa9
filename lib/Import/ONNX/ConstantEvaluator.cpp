//===- ConstantEvaluator.cpp - Fold ONNX nodes on host tensors ------------===//
//
// The entry points of the constant evaluator: broadcastShapes, and
// evaluateNode, which picks the evaluator for a node's op type. The
// evaluators live in ConstantEvaluation/, one file per op family, on top of
// the strided walk and node helpers in ConstantEvaluation/EvaluationSupport.h.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/ConstantEvaluator.h"

#include "ConstantEvaluation/EvaluationSupport.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <string>

using namespace tessera::onnx_import;
using namespace tessera::onnx_import::constant_evaluation;

namespace {

using Evaluator = FoldResult (*)(const NodeContext &);

/// The evaluator for `opType`, or nullptr for an op the evaluator does not
/// fold.
Evaluator lookupEvaluator(llvm::StringRef opType) {
  return llvm::StringSwitch<Evaluator>(opType)
      // Generators.
      .Case("Constant", evaluateConstant)
      .Case("ConstantOfShape", evaluateConstantOfShape)
      .Case("Range", evaluateRange)
      .Case("Trilu", evaluateTrilu)
      .Case("CumSum", evaluateCumSum)
      // Shapes, views and indexing.
      .Case("Identity", evaluateIdentity)
      .Case("Shape", evaluateShape)
      .Case("Size", evaluateSize)
      .Case("Squeeze", evaluateSqueeze)
      .Case("Unsqueeze", evaluateUnsqueeze)
      .Case("Reshape", evaluateReshape)
      .Case("Concat", evaluateConcat)
      .Case("Split", evaluateSplit)
      .Case("Gather", evaluateGather)
      .Case("GatherElements", evaluateGatherElements)
      .Case("GatherND", evaluateGatherND)
      .Case("ScatterND", evaluateScatterND)
      .Case("Slice", evaluateSlice)
      .Case("Expand", evaluateExpand)
      .Case("Transpose", evaluateTranspose)
      .Case("Tile", evaluateTile)
      // Elementwise.
      .Case("Cast", evaluateCast)
      .Case("CastLike", evaluateCastLike)
      .Case("Where", evaluateWhere)
      .Cases({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"},
             evaluateCompare)
      .Cases({"Not", "And", "Or", "Xor"}, evaluateLogical)
      .Cases({"Add", "Sub", "Mul", "Div"}, evaluateArithmetic)
      .Case("Pow", evaluatePow)
      .Cases({"Max", "Min"}, evaluateVariadicMaxMin)
      .Cases({"Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Tanh", "Erf",
              "Sigmoid", "Floor", "Ceil", "Cos", "Sin"},
             evaluateUnary)
      // Reductions.
      .Cases({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
              "ReduceProd"},
             evaluateReduce)
      .Default(nullptr);
}

} // namespace

llvm::Expected<std::vector<int64_t>>
tessera::onnx_import::broadcastShapes(llvm::ArrayRef<int64_t> lhs,
                                      llvm::ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  std::vector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; missing leading dimensions act as 1.
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1) {
      auto format = [](llvm::ArrayRef<int64_t> shape) {
        std::string text = "[";
        for (size_t d = 0; d < shape.size(); ++d)
          text += (d ? "x" : "") + std::to_string(shape[d]);
        return text + "]";
      };
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "shapes " + format(lhs) + " and " +
                                         format(rhs) + " do not broadcast");
    }
    result[i] = a == 1 ? b : a;
  }
  return result;
}

bool tessera::onnx_import::isFoldableOpType(llvm::StringRef opType) {
  return lookupEvaluator(opType) != nullptr;
}

llvm::Expected<std::optional<std::vector<HostTensor>>>
tessera::onnx_import::evaluateNode(const onnx::NodeProto &node,
                                   llvm::ArrayRef<const HostTensor *> inputs,
                                   int64_t opsetVersion,
                                   llvm::StringRef modelDirectory) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return notFolded();
  Evaluator evaluator = lookupEvaluator(node.op_type());
  if (!evaluator)
    return notFolded();
  return evaluator(NodeContext(node, inputs, opsetVersion, modelDirectory));
}
