//===- FixtureSupport.h - PyTorch reference numbers for the tests -*- C++ -*-===//
//
// test/fixtures/<model>.reference.json holds PyTorch's fp32 numbers for a
// bundled model (shared/README.md describes the format): the input ids, the
// loss, logits checksums, and per parameter its gradient and one AdamW step.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TEST_INTEGRATION_FIXTURESUPPORT_H
#define TESSERA_TEST_INTEGRATION_FIXTURESUPPORT_H

#include "tessera/Execution/HostTensorBuffer.h"
#include "tessera/Import/ONNX/Importer.h"
#include "tessera/Sharding/TensorLayout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace tessera::fixtures {

/// The source tree's test/ folder (set by CMake).
std::string testDirectory();

/// Parses test/fixtures/<model>.reference.json; fails the test on error.
llvm::json::Object loadFixture(const std::string &model);

/// Parses the fixture at `path`; fails the test on error.
llvm::json::Object loadFixtureFile(const std::string &path);

/// The fixture's input ids [rows, columns] as I64, keeping `columns` of them
/// starting at `firstColumn`.
execution::HostTensorBuffer fixtureTokens(const llvm::json::Object &fixture,
                                          int64_t firstColumn,
                                          int64_t columns);

std::vector<double> numbers(const llvm::json::Value *array);

/// The ONNX initializer that holds the PyTorch parameter `pytorchName` of
/// the fixture's "params": named in its entry `info` where the two differ
/// (tied weights), else the same name.
std::string initializerOf(llvm::StringRef pytorchName,
                          const llvm::json::Object &info);

/// The name the compiled program gives the PyTorch parameter `pytorchName`,
/// among `byName`'s keys: PyTorch's own where the importer recovered it (an
/// optimize=True export's folded weight), else the initializer's.
template <typename Value>
std::string programNameOf(llvm::StringRef pytorchName,
                          const llvm::json::Object &info,
                          const std::map<std::string, Value> &byName) {
  if (byName.count(pytorchName.str()))
    return pytorchName.str();
  return initializerOf(pytorchName, info);
}

/// The L2 norm of all the tensor's elements, summed in double: what the
/// fixtures' grad_norm holds.
double norm(const execution::HostTensorBuffer &tensor);

/// `description` as a GoogleTest name, which allows only letters, digits
/// and underscores: every other character becomes '_'.
std::string testName(llvm::StringRef description);

/// INSTANTIATE_TEST_SUITE_P's name generator for a parameter type with a
/// `describe(const Case &)` next to it (found by argument-dependent lookup
/// in the test's namespace): the test is named after its description.
struct DescribedTestName {
  template <typename ParamInfo>
  std::string operator()(const ParamInfo &info) const {
    return testName(describe(info.param));
  }
};

/// Imports test/models/<file> with its weights and the fusion pipeline,
/// binding `dims` (empty for a static export).
mlir::OwningOpRef<mlir::ModuleOp>
importWithWeights(mlir::MLIRContext &context, const std::string &file,
                  const std::map<std::string, int64_t> &dims);

/// The block of `tensor` (laid out as `layout` on `mesh`) that the rank at
/// `coordinates` holds. `pieces` (tess.pieces; empty: none) per dim: a dim
/// of more than one piece holds the rank's block of each piece, in order.
execution::HostTensorBuffer localBlock(execution::HostTensorBuffer tensor,
                                       const sharding::TensorLayout &layout,
                                       const std::vector<int32_t> &coordinates,
                                       const cost::DeviceMesh &mesh,
                                       llvm::ArrayRef<int64_t> pieces = {});

/// The tess.pieces of argument (or result) `index` of `function`, empty
/// without one.
std::vector<int64_t> piecesOf(mlir::func::FuncOp function, unsigned index,
                              bool result);

/// The full f32 tensor from every rank's block of it (`blocks[r]` from the
/// rank at `coordinates[r]`): blocks of split dims put in place, partial
/// sums added, replicas counted once.
execution::HostTensorBuffer
assemble(std::vector<execution::HostTensorBuffer> &blocks,
         const std::vector<std::vector<int32_t>> &coordinates,
         const sharding::TensorLayout &layout, const cost::DeviceMesh &mesh,
         llvm::ArrayRef<int64_t> pieces = {});

} // namespace tessera::fixtures

#endif // TESSERA_TEST_INTEGRATION_FIXTURESUPPORT_H
