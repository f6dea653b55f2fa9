//===- TessConstantFolding.h - evaluating tess ops on constants -*- C++ -*-===//
//
// The folders of TessFolders.cpp evaluate elementwise and data-movement ops
// whose operands are constants. These helpers hold what they share: reading
// elements of a DenseElementsAttr whatever their type, walking a result's
// indices, and building the folded constant. Only small results are built
// (kMaxFoldedElements), so that folding never turns a graph-sized tensor into
// IR bytes; a splat result is built at any size because it costs one element.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DIALECT_TESS_TESSCONSTANTFOLDING_H
#define TESSERA_DIALECT_TESS_TESSCONSTANTFOLDING_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <variant>

namespace tessera::tess::folding {

/// Largest non-splat constant, in elements, that a fold builds.
inline constexpr int64_t kMaxFoldedElements = 4096;

/// One element of a constant: an integer (`i1` included) or a float.
using Element = std::variant<llvm::APInt, llvm::APFloat>;

/// Computes one result element from one element of each operand. Returns
/// std::nullopt where the value is not defined (an integer division by
/// zero), which cancels the whole fold.
using ElementFunction =
    llvm::function_ref<std::optional<Element>(llvm::ArrayRef<Element>)>;

/// Evaluates an elementwise op whose `operands` broadcast (numpy's rule) to
/// `resultType`. Null unless every operand is a DenseElementsAttr of integers
/// or floats, the result is small or a splat, and `compute` succeeds on every
/// element.
mlir::Attribute foldElementwise(llvm::ArrayRef<mlir::Attribute> operands,
                                mlir::RankedTensorType resultType,
                                ElementFunction compute);

/// Says which input, and which index of it, a result index copies: fills
/// `inputIndex` and returns the input's position in the list.
using SourceFunction = llvm::function_ref<unsigned(
    llvm::ArrayRef<int64_t> resultIndex,
    llvm::SmallVectorImpl<int64_t> &inputIndex)>;

/// Evaluates a data-movement op (transpose, broadcast, slice, concat, split)
/// whose inputs are constants: every result element is a copy of the input
/// element `source` names. Null unless every input is a DenseElementsAttr of
/// integers or floats and the result is small.
mlir::Attribute foldDataMovement(llvm::ArrayRef<mlir::Attribute> inputs,
                                 mlir::RankedTensorType resultType,
                                 SourceFunction source);

} // namespace tessera::tess::folding

#endif // TESSERA_DIALECT_TESS_TESSCONSTANTFOLDING_H
