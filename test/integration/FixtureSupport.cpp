//===- FixtureSupport.cpp - PyTorch reference numbers for the tests ------===//

#include "FixtureSupport.h"

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

using namespace tessera;
using execution::HostTensorBuffer;
using sharding::kUnsplit;
using sharding::TensorLayout;

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

HostTensorBuffer fixtures::localBlock(HostTensorBuffer tensor,
                                      const TensorLayout &layout,
                                      const std::vector<int32_t> &coordinates,
                                      const cost::DeviceMesh &mesh) {
  std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
  std::vector<int64_t> starts(shape.size(), 0), strides(shape.size(), 1);
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes)) {
    if (axis == kUnsplit)
      continue;
    shape[dim] /= mesh.axes[axis].size;
    starts[dim] = coordinates[axis] * shape[dim];
  }
  HostTensorBuffer block = HostTensorBuffer::zeros(tensor.dtype(), shape);
  tessera_tensor out = block.descriptor();
  EXPECT_EQ(tessera_cpu_slice(tensor.constDescriptor(), &out, starts.data(),
                              strides.data()),
            0);
  return block;
}

HostTensorBuffer
fixtures::assemble(std::vector<HostTensorBuffer> &blocks,
                   const std::vector<std::vector<int32_t>> &coordinates,
                   const TensorLayout &layout, const cost::DeviceMesh &mesh) {
  std::vector<int64_t> shape(blocks[0].shape().begin(),
                             blocks[0].shape().end());
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
    if (axis != kUnsplit)
      shape[dim] *= mesh.axes[axis].size;
  HostTensorBuffer sum = HostTensorBuffer::zeros(TESSERA_F32, shape);
  std::vector<float> total(sum.numElements(), 0.0f);
  for (size_t rank = 0; rank < blocks.size(); ++rank) {
    bool counted = true;
    for (unsigned axis = 0; axis < mesh.axes.size(); ++axis)
      if (layout.dimSplitOver(axis) == kUnsplit &&
          !layout.isPartialOver(axis) && coordinates[rank][axis] != 0)
        counted = false;
    if (!counted)
      continue;
    std::vector<int64_t> starts(shape.size(), 0), strides(shape.size(), 1);
    for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
      if (axis != kUnsplit)
        starts[dim] = coordinates[rank][axis] * blocks[rank].shape()[dim];
    HostTensorBuffer placed = HostTensorBuffer::zeros(TESSERA_F32, shape);
    tessera_tensor out = placed.descriptor();
    EXPECT_EQ(tessera_cpu_slice_grad(blocks[rank].constDescriptor(), &out,
                                     starts.data(), strides.data()),
              0);
    for (int64_t i = 0; i < placed.numElements(); ++i)
      total[i] += placed.getDouble(i);
  }
  return HostTensorBuffer::fromFloats(shape, total);
}
