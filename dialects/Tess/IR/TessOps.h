//===- TessOps.h - operations and attributes of tess -----------*- C++ -*-===//
#ifndef TESSERA_DIALECT_TESS_TESSOPS_H
#define TESSERA_DIALECT_TESS_TESSOPS_H

#include "Tess/IR/TessDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "Tess/IR/TessEnums.h.inc"

namespace tessera::tess {

/// See Tess_VerifiesBeforeInference in TessBase.td. Listed before
/// InferTypeOpAdaptor, so MLIR runs this trait's check first.
template <typename ConcreteType>
class VerifiesBeforeInference
    : public mlir::OpTrait::TraitBase<ConcreteType, VerifiesBeforeInference> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return llvm::cast<ConcreteType>(op).verifyBeforeInference();
  }
};

} // namespace tessera::tess

#define GET_ATTRDEF_CLASSES
#include "Tess/IR/TessAttrs.h.inc"

#include "Tess/IR/TessShardingLabels.h"
#include "Tess/IR/TessInterfaces.h.inc"

#define GET_OP_CLASSES
#include "Tess/IR/TessOps.h.inc"

namespace tessera::tess {

/// The random number stream that dropout draws from. Ops that draw from it
/// report a write to it, so no pass merges, hoists or drops them as if
/// they were pure.
struct RandomNumbersResource
    : mlir::SideEffects::Resource::Base<RandomNumbersResource> {
  llvm::StringRef getName() final { return "tess::RandomNumbers"; }
};

/// Numpy/ONNX multidirectional broadcast of two static shapes; std::nullopt
/// when a pair of dims is neither equal nor 1.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// The rule `rule` of a random op's stream attribute `name` (`stream_axis`
/// of tess.dropout, tess.attention, tess.attention_grad; the attentions'
/// `head_stream_axis`): only on an op that draws (`rate` above 0), naming
/// an axis of the module's tess.mesh.
mlir::LogicalResult verifyStreamAxis(mlir::Operation *op, llvm::StringRef name,
                                     std::optional<llvm::StringRef> axis,
                                     double rate, llvm::StringRef rule);

/// The head stride of an attention's dropout index: weight (b, h, i, j) draws
/// at ((b * kAttentionDropoutHeads + h) * q_seq + i) * kv_seq + j, so a block
/// of heads starts at a fixed offset whatever the batch's block (the
/// kernels' TESSERA_ATTENTION_DROPOUT_HEADS).
constexpr int64_t kAttentionDropoutHeads = 65536;

/// One attribute of a random op that names the mesh axis a dim of its stream
/// is split over, and how many stream positions one block along that dim
/// spans: the rank at coordinate c draws from the unsplit op's stream
/// advanced by c * positions.
struct StreamBlock {
  llvm::StringRef attribute;
  /// The op's operand (and result) dim the attribute splits.
  unsigned dim;
  uint64_t positions;
};

/// Rule C10 of tess.attention and tess.attention_grad: `stream_axis` and
/// `head_stream_axis` (verifyStreamAxis) of an attention with `dropout`.
mlir::LogicalResult
verifyAttentionStreamAxes(mlir::Operation *op,
                          std::optional<llvm::StringRef> streamAxis,
                          std::optional<llvm::StringRef> headStreamAxis,
                          double dropout);

/// A random op's stream blocks: a tess.dropout's `stream_axis` (its local
/// elements, row-major); a tess.attention's or tess.attention_grad's
/// `stream_axis` (local batch rows of kAttentionDropoutHeads * q_seq *
/// kv_seq positions) and `head_stream_axis` (local heads of q_seq * kv_seq).
llvm::SmallVector<StreamBlock, 2> streamBlocks(mlir::Operation *op);

/// The rows of the whole table a tess.embedding or tess.embedding_grad
/// reads (`table`, its operand or result): its rows, times the size of its
/// rows_axis when it holds a vocabulary-parallel block.
int64_t wholeTableRows(mlir::Operation *op, mlir::Value table);

/// Whether `table` is read, and only as the table of tess.embedding
/// lookups: mixed precision then looks its rows up in the f32 master and
/// casts only them (tess-look-up-before-cast), and keeps no compute copy.
bool readOnlyByLookups(mlir::Value table);

/// The rule `rule` of an op's attribute `name` that names a mesh axis (an
/// embedding's rows_axis): an axis of the module's tess.mesh.
mlir::LogicalResult verifyMeshAxisAttr(mlir::Operation *op,
                                       llvm::StringRef name,
                                       std::optional<llvm::StringRef> axis,
                                       llvm::StringRef rule);

/// Maps `axis` in [-rank, rank) to [0, rank); std::nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

} // namespace tessera::tess

#endif // TESSERA_DIALECT_TESS_TESSOPS_H
