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

namespace {

/// `tensor` with each dim of more than one piece viewed as two, (pieces,
/// size / pieces): a piece-major block is then a block of the inner one.
tessera_tensor piecesView(tessera_tensor tensor,
                          llvm::ArrayRef<int64_t> pieces) {
  tessera_tensor view = tensor;
  view.rank = 0;
  for (int32_t dim = 0; dim < tensor.rank; ++dim) {
    int64_t count = static_cast<size_t>(dim) < pieces.size() ? pieces[dim] : 1;
    if (count > 1)
      view.shape[view.rank++] = count;
    view.shape[view.rank++] = tensor.shape[dim] / std::max<int64_t>(count, 1);
  }
  return view;
}

/// Per dim of `pieces`' view, the start of the block at `coordinates` of
/// the dims `layout` splits (0 for the pieces' own dims).
std::vector<int64_t> viewStarts(const tessera_tensor &block,
                                const TensorLayout &layout,
                                const std::vector<int32_t> &coordinates,
                                llvm::ArrayRef<int64_t> pieces) {
  std::vector<int64_t> starts;
  for (int32_t dim = 0; dim < block.rank; ++dim) {
    int64_t count = static_cast<size_t>(dim) < pieces.size() ? pieces[dim] : 1;
    if (count > 1)
      starts.push_back(0);
    int axis = layout.dimAxes[dim];
    starts.push_back(axis == kUnsplit
                         ? 0
                         : coordinates[axis] * (block.shape[dim] / count));
  }
  return starts;
}

} // namespace

std::vector<int64_t> fixtures::piecesOf(mlir::func::FuncOp function,
                                        unsigned index, bool result) {
  auto pieces = result ? function.getResultAttrOfType<mlir::DenseI64ArrayAttr>(
                             index, "tess.pieces")
                       : function.getArgAttrOfType<mlir::DenseI64ArrayAttr>(
                             index, "tess.pieces");
  if (!pieces)
    return {};
  return std::vector<int64_t>(pieces.asArrayRef().begin(),
                              pieces.asArrayRef().end());
}

HostTensorBuffer fixtures::localBlock(HostTensorBuffer tensor,
                                      const TensorLayout &layout,
                                      const std::vector<int32_t> &coordinates,
                                      const cost::DeviceMesh &mesh,
                                      llvm::ArrayRef<int64_t> pieces) {
  std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
    if (axis != kUnsplit)
      shape[dim] /= mesh.axes[axis].size;
  HostTensorBuffer block = HostTensorBuffer::zeros(tensor.dtype(), shape);
  tessera_tensor out = block.descriptor();
  std::vector<int64_t> starts = viewStarts(out, layout, coordinates, pieces);
  tessera_tensor from = piecesView(*tensor.constDescriptor(), pieces);
  tessera_tensor to = piecesView(out, pieces);
  std::vector<int64_t> strides(starts.size(), 1);
  EXPECT_EQ(tessera_cpu_slice(&from, &to, starts.data(), strides.data()), 0);
  return block;
}

HostTensorBuffer
fixtures::assemble(std::vector<HostTensorBuffer> &blocks,
                   const std::vector<std::vector<int32_t>> &coordinates,
                   const TensorLayout &layout, const cost::DeviceMesh &mesh,
                   llvm::ArrayRef<int64_t> pieces) {
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
    std::vector<int64_t> starts = viewStarts(
        *blocks[rank].constDescriptor(), layout, coordinates[rank], pieces);
    std::vector<int64_t> strides(starts.size(), 1);
    HostTensorBuffer placed = HostTensorBuffer::zeros(TESSERA_F32, shape);
    tessera_tensor out = piecesView(placed.descriptor(), pieces);
    tessera_tensor in = piecesView(*blocks[rank].constDescriptor(), pieces);
    EXPECT_EQ(tessera_cpu_slice_grad(&in, &out, starts.data(), strides.data()),
              0);
    for (int64_t i = 0; i < placed.numElements(); ++i)
      total[i] += placed.getDouble(i);
  }
  return HostTensorBuffer::fromFloats(shape, total);
}
