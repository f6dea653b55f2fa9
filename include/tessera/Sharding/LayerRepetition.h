//===- LayerRepetition.h - finding identical Transformer layers -*- C++ -*-===//
//
// A Transformer is a stack of layers that differ only in their weights. The
// search solves one layer and reuses its plan for all identical ones, so its
// time does not grow with depth (MeshSharding.h). This file finds them.
//
// Layers come from parameter names: the first dot-separated component that
// is a number ends a layer prefix (`transformer.h.3.attn.c_attn.weight` is
// layer 3 of `transformer.h`). Each op of the function belongs to the layer
// of the parameters it reads; an op reading none belongs to the group of the
// op before it (a residual add after the MLP's projection stays in its
// layer); an op reading parameters of no layer (`ln_f`, `lm_head`) starts an
// unlayered stretch. Parameter ops belong to their name's layer.
//
// Two layers are identical when their op sequences are: op names,
// attributes, result types, operands (an op of the same layer by position,
// else only the type), and parameters by their name after the prefix. A run
// is a maximal sequence of consecutive layer indices with identical
// signatures; `extraSignature` lets the caller tell otherwise identical
// layers apart (e.g. by the --shard pins their parameters match).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_LAYERREPETITION_H
#define TESSERA_SHARDING_LAYERREPETITION_H

#include "Tess/IR/TessOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <string>
#include <vector>

namespace tessera::sharding {

struct LayerInstance {
  /// "transformer.h.3".
  std::string name;
  int64_t index = 0;
  /// The layer's ops in program order (parameters included).
  std::vector<mlir::Operation *> ops;
};

/// Consecutive identical layers: instance k's i-th op corresponds to
/// instance 0's i-th op.
struct LayerRun {
  /// "transformer.h".
  std::string prefix;
  std::vector<LayerInstance> instances;
  /// "transformer.h.0-23" (or "transformer.h.5" for a run of one).
  std::string describe() const;
};

struct LayerStructure {
  std::vector<LayerRun> runs;
  /// For every op in a run: its run, its instance, its position.
  struct Place {
    unsigned run = 0, instance = 0, position = 0;
  };
  llvm::DenseMap<mlir::Operation *, Place> placeOf;

  /// The op of instance 0 that `op` corresponds to (`op` itself when it is
  /// in no run or in instance 0).
  mlir::Operation *representative(mlir::Operation *op) const;
};

/// The layers of `function`'s single block, grouped into runs.
LayerStructure findRepeatedLayers(
    mlir::func::FuncOp function,
    llvm::function_ref<std::string(tessera::tess::ParameterOp)>
        extraSignature = nullptr);

/// Splits a parameter name into its layer ("transformer.h.3") and the rest
/// ("attn.c_attn.weight"); the layer is empty when no component is a
/// number.
std::pair<std::string, std::string> splitLayerName(llvm::StringRef name);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_LAYERREPETITION_H
