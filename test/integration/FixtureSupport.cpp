//===- FixtureSupport.cpp - PyTorch reference numbers for the tests ------===//

#include "FixtureSupport.h"

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

using namespace tessera;

std::string fixtures::testDirectory() { return TESSERA_TEST_DIRECTORY; }

llvm::json::Object fixtures::loadFixture(const std::string &model) {
  return loadFixtureFile(testDirectory() + "/fixtures/" + model +
                         ".reference.json");
}

llvm::json::Object fixtures::loadFixtureFile(const std::string &path) {
  auto file = llvm::MemoryBuffer::getFile(path);
  if (!file) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  if (!parsed) {
    ADD_FAILURE() << path << ": " << llvm::toString(parsed.takeError());
    return {};
  }
  return std::move(*parsed->getAsObject());
}

std::vector<double> fixtures::numbers(const llvm::json::Value *array) {
  std::vector<double> values;
  if (!array || !array->getAsArray())
    return values;
  for (const llvm::json::Value &value : *array->getAsArray())
    values.push_back(value.getAsNumber().value_or(NAN));
  return values;
}

std::string fixtures::initializerOf(llvm::StringRef pytorchName,
                                   const llvm::json::Object &info) {
  if (std::optional<llvm::StringRef> name = info.getString("onnx_initializer"))
    return name->str();
  return pytorchName.str();
}

double fixtures::norm(const execution::HostTensorBuffer &tensor) {
  double sum = 0;
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    sum += tensor.getDouble(i) * tensor.getDouble(i);
  return std::sqrt(sum);
}

std::string fixtures::testName(llvm::StringRef description) {
  std::string name = description.str();
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return name;
}

execution::HostTensorBuffer
fixtures::fixtureTokens(const llvm::json::Object &fixture, int64_t firstColumn,
                       int64_t columns) {
  const llvm::json::Array *rows = fixture.getArray("input_ids");
  std::vector<int64_t> ids;
  int64_t rowCount = rows ? rows->size() : 0;
  for (int64_t row = 0; row < rowCount; ++row) {
    const llvm::json::Array *values = (*rows)[row].getAsArray();
    for (int64_t column = firstColumn; column < firstColumn + columns; ++column)
      ids.push_back((*values)[column].getAsInteger().value_or(-1));
  }
  return execution::HostTensorBuffer::fromInts({rowCount, columns}, ids);
}

mlir::OwningOpRef<mlir::ModuleOp>
fixtures::importWithWeights(mlir::MLIRContext &context, const std::string &file,
                           const std::map<std::string, int64_t> &dims) {
  onnx_import::ImportOptions options;
  options.loadWeights = true;
  options.dims = dims;
  auto module = onnx_import::importOnnxModel(testDirectory() + "/models/" + file,
                                             options, context);
  if (!module) {
    ADD_FAILURE() << llvm::toString(module.takeError());
    return {};
  }
  mlir::PassManager pm(&context);
  buildImportCleanupPipeline(pm);
  if (mlir::failed(pm.run(**module))) {
    ADD_FAILURE() << "import cleanup failed on " << file;
    return {};
  }
  return std::move(*module);
}
