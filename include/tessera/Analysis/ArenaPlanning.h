//===- ArenaPlanning.h - static arena for a step's intermediates -*- C++ -*-===//
//
// Every intermediate tensor of @forward_backward gets a fixed offset in one
// arena, planned at compile time from liveness: two tensors share bytes only
// when their live ranges [definition, last use] are disjoint. The executable
// allocates the arena once and reuses it every step.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_ARENAPLANNING_H
#define TESSERA_ANALYSIS_ARENAPLANNING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace tessera {

/// The alignment of every arena offset (a cache line; enough for any dtype
/// and for vector loads).
constexpr int64_t kArenaAlignment = 64;

/// One block the arena must hold: `bytes`, live from op position `first`
/// through `last` (both included: an op's output never shares bytes with
/// its inputs, so kernels need not support in-place operation).
struct ArenaRequest {
  int64_t bytes = 0;
  int64_t first = 0;
  int64_t last = 0;
};

struct ArenaLayout {
  /// Per request, its byte offset (a multiple of the alignment).
  std::vector<int64_t> offsets;
  /// The arena's size: the end of the highest block, aligned.
  int64_t totalBytes = 0;
};

/// Packs `requests` greedily by size: largest first, each at the lowest
/// aligned offset where it overlaps no already placed block that is live at
/// the same time (first fit over the gaps). Ties keep program order, so the
/// plan is deterministic.
ArenaLayout packArena(llvm::ArrayRef<ArenaRequest> requests,
                      int64_t alignment = kArenaAlignment);

/// Where a value of the function lives.
enum class StorageKind {
  /// A function argument: the caller's tensor, read only.
  Argument,
  /// Its own block of the arena (`index` = the buffer).
  Arena,
  /// Written straight into the caller's result `index` (the loss or a
  /// gradient), so no copy is needed at the end.
  Output,
  /// A reshape result: the same bytes as its input, seen with another
  /// shape; a piece of a split along its outermost non-unit dim: a
  /// contiguous block of its input's bytes; or a result its op writes over
  /// an operand that nothing reads afterwards (in place).
  Alias,
};

struct ValueStorage {
  StorageKind kind = StorageKind::Arena;
  /// Argument number, arena buffer or result number (by kind).
  unsigned index = 0;
  /// For an alias: the value whose bytes it shares, and where its own
  /// start in them (a split piece's; 0 for a reshape).
  mlir::Value aliasOf;
  int64_t offsetBytes = 0;
};

/// The storage plan of one function.
struct FunctionArenaPlan {
  llvm::DenseMap<mlir::Value, ValueStorage> storage;
  /// Per arena buffer: its request and the value that owns it.
  std::vector<ArenaRequest> buffers;
  std::vector<mlir::Value> bufferValues;
  ArenaLayout layout;

  /// The storage an alias chain ends in (the value itself if not an alias).
  mlir::Value resolveAlias(mlir::Value value) const;
  /// The sum of all buffers: what the step would take without reuse.
  int64_t bytesWithoutReuse() const;
};

/// Plans the storage of every value of `function` (one block, no nested
/// regions, static shapes):
/// - arguments stay where the caller put them;
/// - a reshape always aliases its input, and so do the pieces of a split
///   whose dims before the split axis are all 1 (each a contiguous block of
///   the input). This is safe because every tensor is written exactly once
///   (SSA) and no kernel writes its inputs, so a view never sees its bytes
///   change; the shared block lives until the last use of any view of it;
/// - the exception: a result whose kernels may overwrite an operand
///   (tess.cross_entropy_grad's dlogits over its logits) takes that
///   operand's storage when it is an arena block that no value sharing it
///   is read after the op;
/// - a result of an op that appears exactly once among the returned values
///   is written directly into the caller's result (Output);
/// - everything else gets an arena block over [definition, last use], where
///   a returned value is used at the return (it is copied out there).
/// Fails with a diagnostic on a dynamic shape or an unsupported element type.
mlir::FailureOr<FunctionArenaPlan> planFunctionArena(mlir::func::FuncOp function);

/// Prints the plan: one line per arena buffer (offset, bytes, live range,
/// the value's type), then the totals.
void printArenaPlan(const FunctionArenaPlan &plan, llvm::raw_ostream &os);

/// The bytes of one element of `type` in the runtime's storage (bool = 1).
mlir::FailureOr<int64_t> elementBytes(mlir::Type elementType);

} // namespace tessera

#endif // TESSERA_ANALYSIS_ARENAPLANNING_H
