//===- ModelSummary.cpp - what a tess module holds, in numbers -----------===//

#include "tessera/Analysis/ModelSummary.h"

#include "Tess/IR/TessOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;

namespace {

std::string typeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

int64_t byteSize(RankedTensorType type) {
  return type.getNumElements() *
         ((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

/// 1234567 -> "1,234,567": parameter counts are read against PyTorch's.
std::string withCommas(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, ",");
  return digits;
}

std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}

} // namespace

ModelSummary tessera::summarizeModel(ModuleOp module) {
  ModelSummary summary;
  module.walk([&](Operation *op) {
    if (op == module.getOperation())
      return;
    ++summary.opCounts[op->getName().getStringRef().str()];
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(op)) {
      auto type = llvm::cast<RankedTensorType>(parameter.getType());
      if (parameter.getTrainable()) {
        ++summary.trainableTensors;
        summary.trainableElements += type.getNumElements();
        summary.trainableBytesByType[typeString(type.getElementType())] +=
            byteSize(type);
      } else {
        ++summary.bufferTensors;
        summary.bufferElements += type.getNumElements();
        summary.bufferBytes += byteSize(type);
      }
    }
  });
  module.walk([&](func::FuncOp function) {
    for (auto [index, type] :
         llvm::enumerate(function.getFunctionType().getInputs())) {
      std::string name = "arg" + std::to_string(index);
      if (auto loc = llvm::dyn_cast<NameLoc>(
              function.getArgument(index).getLoc()))
        name = loc.getName().str();
      summary.inputs.push_back(name + ": " + typeString(type));
    }
    for (Type type : function.getFunctionType().getResults())
      summary.outputs.push_back(typeString(type));
  });
  return summary;
}

void tessera::printModelSummary(const ModelSummary &summary,
                                llvm::StringRef title, llvm::raw_ostream &os) {
  os << "Model: " << title << "\n\n";
  os << "Inputs:\n";
  for (const std::string &input : summary.inputs)
    os << "  " << input << "\n";
  os << "Outputs:\n";
  for (const std::string &output : summary.outputs)
    os << "  " << output << "\n";

  os << "\nOps:\n";
  int64_t total = 0;
  for (const auto &[name, count] : summary.opCounts) {
    os << llvm::formatv("  {0,-24} {1,8}\n", name, count);
    total += count;
  }
  os << llvm::formatv("  {0,-24} {1,8}\n", "total", total);

  os << "\nParameters (trainable):\n";
  os << llvm::formatv("  {0,-24} {1,16}\n", "tensors",
                      withCommas(summary.trainableTensors));
  os << llvm::formatv("  {0,-24} {1,16}\n", "elements",
                      withCommas(summary.trainableElements));
  for (const auto &[type, bytes] : summary.trainableBytesByType)
    os << llvm::formatv("  {0,-24} {1,16}  ({2})\n", "bytes " + type,
                        withCommas(bytes), humanBytes(bytes));
  os << "Buffers (not trained):\n";
  os << llvm::formatv("  {0,-24} {1,16}\n", "tensors",
                      withCommas(summary.bufferTensors));
  os << llvm::formatv("  {0,-24} {1,16}  ({2})\n", "elements",
                      withCommas(summary.bufferElements),
                      humanBytes(summary.bufferBytes));

  if (!summary.initializerKinds.empty()) {
    os << "Initializers by kind:\n";
    for (const auto &[kind, count] : summary.initializerKinds)
      os << llvm::formatv("  {0,-24} {1,16}\n", kind, withCommas(count));
  }

  os << "\nTraining memory, mixed precision (bf16 weights and gradients, fp32 "
        "master weights and AdamW moments: 16 bytes a parameter), before "
        "activations:\n";
  os << llvm::formatv("  {0,-24} {1,16}  ({2})\n", "bytes",
                      withCommas(summary.trainingStateBytes()),
                      humanBytes(summary.trainingStateBytes()));
}
