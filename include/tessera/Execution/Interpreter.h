//===- Interpreter.h - run tess IR on the CPU kernels ----------*- C++ -*-===//
//
// Executes a function of `tess` ops op by op on the CPU backend's kernels
// (runtime/cpu), the way the lowered program calls them. It is the oracle
// of the tests: forward logits against onnxruntime, the training step
// against PyTorch's fixtures, every VJP against finite differences (the
// role StableHLO's interpreter plays for its dialect).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_EXECUTION_INTERPRETER_H
#define TESSERA_EXECUTION_INTERPRETER_H

#include "tessera/Execution/HostTensorBuffer.h"
#include "tessera/runtime/comm.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera::execution {

/// Supplies the bytes of a `tess.parameter` that carries no `value`, by name.
using WeightLookup = std::function<llvm::Expected<HostTensorBuffer>(
    llvm::StringRef name, mlir::RankedTensorType type)>;

/// One rank of a program partitioned for a device mesh (tess-partition-spmd):
/// per mesh axis, in the order of the module's `tess.mesh`, its name, the
/// communicator of this rank's group along it (comm.h, e.g. the in-process
/// backend's, with one thread per rank) and this rank's coordinate. The
/// interpreter runs the collectives on these communicators, the same calls
/// the lowered program makes.
struct MeshRank {
  std::vector<std::string> axisNames;
  std::vector<tessera_comm *> comms;
  std::vector<int32_t> coordinates;
};

class Interpreter {
public:
  explicit Interpreter(WeightLookup weights = {}) : weights(std::move(weights)) {}

  /// Runs collectives as this rank of a mesh; without it, a collective is
  /// an error.
  void setMeshRank(MeshRank rank) { meshRank = std::move(rank); }

  /// Seeds every random op (dropout): op seed attributes are mixed with it.
  void setSeed(uint64_t seed) { stepSeed = seed; }

  /// Runs `function` on `arguments` (one per function argument, matching
  /// types) and returns its results. An op the interpreter does not know or
  /// a kernel failure (e.g. a token id out of range) is an error naming the
  /// op and its location.
  llvm::Expected<std::vector<HostTensorBuffer>>
  run(mlir::func::FuncOp function, std::vector<HostTensorBuffer> arguments);

private:
  WeightLookup weights;
  uint64_t stepSeed = 0;
  std::optional<MeshRank> meshRank;
};

} // namespace tessera::execution

#endif // TESSERA_EXECUTION_INTERPRETER_H
