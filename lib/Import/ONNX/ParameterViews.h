//===- ParameterViews.h - initializers derived from a parameter --*- C++
//-*-===//
//
// Exporters sometimes store a parameter again, transformed: a legacy export
// (torch.onnx.export(..., dynamo=False)) of a model whose output head shares
// the input embedding keeps the embedding for the lookup and its transpose
// for the head's MatMul; torch.onnx.export(..., optimize=True) folds
// Transpose(W), Reshape(W), Cast(W), Slice(W) or Concat(Wq, Wk, Wv) of
// parameters it keeps into new initializers (a fused QKV weight, a
// reshaped bias). Trained as tensors of their own, each copy gets part of
// the gradient and drifts apart from its parameter; PyTorch trains one. A
// view is found by value: an initializer equal, element for element, to
// such a function of trained initializers, read from the bytes and shapes
// alone. Each form is one the exporters produce and that no two different
// parameter sets can both explain: a copy in any shape (reshape), a dtype
// cast (rounded to nearest even), a window along one axis (slice), pieces
// along one axis (concatenation), and the 2-D transpose of any of these.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_PARAMETERVIEWS_H
#define TESSERA_LIB_IMPORT_ONNX_PARAMETERVIEWS_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera::onnx_import {

/// An initializer that holds a function of other initializers' values:
/// each source cast to the view's element type, then reshaped (one source),
/// sliced (`sliceAxis`) or concatenated (several), then transposed.
struct ParameterView {
  /// The parameters it is a function of: one, or a concatenation's pieces
  /// in order.
  std::vector<std::string> sources;
  /// For several sources, the axis they are concatenated along.
  int64_t concatAxis = 0;
  /// For one source holding more along one axis: that axis, and where the
  /// view's window of it starts (its length is the view's dim).
  std::optional<int64_t> sliceAxis;
  int64_t sliceStart = 0;
  /// Whether the view holds the 2-D transpose of that function.
  bool transposed = false;
};

/// Initializer name -> the view it is, for every `canBeView` float
/// initializer whose values vary and that is a function (above) of
/// `canBeSource` initializers, found among those whose data is in the model
/// file (external data is not read: weights are not needed to compile).
/// `canBeSource` picks the trained tensors, `canBeView` leaves out those
/// known to be tensors of their own (the export's graph signature names
/// them). Of trained tensors that can each be written as a function of the
/// other (a tied head and its embedding, a fused QKV weight and its
/// pieces), the one a Gather reads (the embedding), else one whose name is
/// not the exporter's (`val_N`, `onnx::...`), else the first, is the
/// source. A source whose elements are all equal (zero-initialized) has no
/// views: equal values cannot tell a copy from a weight initialized alike.
llvm::StringMap<ParameterView> findParameterViews(
    const onnx::GraphProto &graph,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeSource,
    llvm::function_ref<bool(const onnx::TensorProto &)> canBeView);

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_PARAMETERVIEWS_H
