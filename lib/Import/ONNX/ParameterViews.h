//===- ParameterViews.h - initializers that are another's copy ---*- C++ -*-===//
//
// Exporters sometimes store one parameter twice: a legacy export
// (torch.onnx.export(..., dynamo=False)) of a model whose output head shares
// the input embedding keeps the embedding for the lookup and its transpose
// for the head's MatMul; torch.onnx.export(..., optimize=True) folds
// Transpose(embedding) into a new initializer beside the embedding. Trained
// as two tensors, each copy gets part of the gradient and they drift apart;
// PyTorch trains one. A view is found by value: an initializer equal,
// element for element, to another one or to its 2-D transpose.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_PARAMETERVIEWS_H
#define TESSERA_LIB_IMPORT_ONNX_PARAMETERVIEWS_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace tessera::onnx_import {

/// An initializer that holds another initializer's values.
struct ParameterView {
  /// The initializer it copies (a parameter the importer trains).
  std::string source;
  /// Whether it holds the source's 2-D transpose rather than a plain copy.
  bool transposed = false;
};

/// Initializer name -> the view it is, for every `canBeView` float
/// initializer of rank 2 or more that equals a `canBeSource` initializer (or
/// its transpose), found among those whose data is in the model file
/// (external data is not read: weights are not needed to compile).
/// `canBeSource` picks the trained tensors, `canBeView` leaves out those
/// known to be parameters of their own (the export's graph signature names
/// them); of two trained tensors equal to each other, the one a Gather reads
/// (the embedding) or else the first is the source. A source whose elements
/// are all equal (zero-initialized) has no copies: equal values cannot tell
/// a copy from a weight initialized alike.
llvm::StringMap<ParameterView> findParameterViews(
    const onnx::GraphProto &graph,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeSource,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeView);

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_PARAMETERVIEWS_H
