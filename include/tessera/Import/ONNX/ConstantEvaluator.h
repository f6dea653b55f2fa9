//===- ConstantEvaluator.h - Fold ONNX nodes on host tensors ----*- C++ -*-===//
//
// Once the importer has bound symbolic dimensions (batch, sequence) to
// numbers, the Shape -> Gather -> Concat -> Reshape chains and mask builders in
// exported Transformers become constant. Folding them on the host, before any
// MLIR exists, means the `tess` dialect only ever sees static shapes and real
// compute. This evaluator implements ONNX semantics (opsets 13 through 20) for
// the ops those subgraphs use, on HostTensors, without touching MLIR.
//
// Numerics follow onnxruntime: fp32 ops compute in float, fp16/bf16 ops
// compute in float and round, integer division truncates toward zero, integer
// results wrap to their type's width.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_IMPORT_ONNX_CONSTANTEVALUATOR_H
#define TESSERA_IMPORT_ONNX_CONSTANTEVALUATOR_H

#include "tessera/Import/ONNX/HostTensor.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace tessera::onnx_import {

/// Folds no op whose result would hold more elements than this; the importer
/// emits the real op instead of materializing a huge constant.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 28;

/// Evaluates `node` on constant inputs. `inputs[i]` is the value of
/// `node.input(i)`; an optional input that is absent (empty name, or beyond
/// the end of `inputs`) is nullptr. `modelDirectory` resolves external data in
/// a Constant's `value` attribute.
///
/// Returns std::nullopt when the node is not one the evaluator folds (unknown
/// op or domain, an unsupported attribute such as a string Constant, or a
/// result larger than kMaxFoldedElements); the caller then emits a real op.
/// Returns an llvm::Error, naming the node and op type, when the node is
/// invalid: wrong number of inputs, shapes that do not broadcast, an index out
/// of range, mismatched element types and the like. On success the vector has
/// one HostTensor per node output.
llvm::Expected<std::optional<std::vector<HostTensor>>>
evaluateNode(const onnx::NodeProto &node,
             llvm::ArrayRef<const HostTensor *> inputs, int64_t opsetVersion,
             llvm::StringRef modelDirectory = "");

/// Whether evaluateNode folds nodes of `opType` (of the default domain) at
/// all. For those it declines anyway on valid input, the result is over
/// kMaxFoldedElements: what the importer reports for an op that exists only
/// on the host.
bool isFoldableOpType(llvm::StringRef opType);

/// Numpy-style multidirectional broadcast of two shapes. Fails when a pair of
/// aligned dimensions differs and neither is 1.
llvm::Expected<std::vector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

} // namespace tessera::onnx_import

#endif // TESSERA_IMPORT_ONNX_CONSTANTEVALUATOR_H
