//===- KernelCalls.h - One tess op, its runtime kernel calls ---*- C++ -* -===//
//
// The lowering to EmitC (LowerToEmitC.cpp) walks a step's ops in order and
// emits, for each, guarded calls of the runtime's kernels (cpu_kernels.h /
// cuda_kernels.h) on tensor descriptors the arena plan placed. What those
// calls are for an op is a kernel-call pattern: one per op, registered by
// op family (elementwise, contractions, layers, losses, data movement,
// collectives), each family in its own file, as MLIR's populate*Patterns
// functions register rewrite patterns. A pattern sees the step only
// through KernelCallContext: descriptors of values, the target's call
// conventions and the few helpers calls need (tables, views, seeds).
// Private to lib/Lowering.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_LOWERING_KERNELCALLS_KERNELCALLS_H
#define TESSERA_LIB_LOWERING_KERNELCALLS_KERNELCALLS_H

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>

namespace tessera::lowering {

/// The operands and literal arguments of one emitc.call_opaque, in order.
class CallArguments {
public:
  explicit CallArguments(mlir::MLIRContext *context) : builder(context) {}
  CallArguments &value(mlir::Value operand) {
    args.push_back(builder.getIndexAttr(operands.size()));
    operands.push_back(operand);
    return *this;
  }
  /// `operand`, or NULL for an absent optional tensor.
  CallArguments &optional(mlir::Value operand) {
    return operand ? value(operand) : literal("NULL");
  }
  CallArguments &literal(llvm::StringRef text) {
    args.push_back(mlir::emitc::OpaqueAttr::get(builder.getContext(), text));
    return *this;
  }
  CallArguments &i32(int64_t number) {
    args.push_back(builder.getI32IntegerAttr(static_cast<int32_t>(number)));
    return *this;
  }
  CallArguments &i64(int64_t number) {
    args.push_back(builder.getI64IntegerAttr(number));
    return *this;
  }
  CallArguments &f64(double number) {
    args.push_back(builder.getF64FloatAttr(number));
    return *this;
  }
  llvm::SmallVector<mlir::Value> operands;
  llvm::SmallVector<mlir::Attribute> args;

private:
  mlir::Builder builder;
};

/// What a kernel-call pattern may use of the step being lowered.
class KernelCallContext {
public:
  virtual ~KernelCallContext();

  /// The descriptor (`tessera_tensor *`) of an operand's value.
  virtual mlir::Value in(mlir::Value value) = 0;
  /// The descriptor of `op`'s result `index`, where the plan put it.
  mlir::Value out(mlir::Operation *op, unsigned index = 0) {
    return in(op->getResult(index));
  }
  /// `if (status == 0) status = <kernel prefix><name>(arguments...)`, the
  /// cuda target's stream last.
  virtual void kernelCall(llvm::StringRef name,
                          llvm::function_ref<void(CallArguments &)> build) = 0;
  /// kernelCall, for a pattern whose op is that one call.
  mlir::LogicalResult call(llvm::StringRef name,
                           llvm::function_ref<void(CallArguments &)> build) {
    kernelCall(name, build);
    return mlir::success();
  }
  /// A collective of a partitioned step on the communicator of `op`'s mesh
  /// axis (mesh_step.h); `withStream` false for the host's shard_slice.
  virtual mlir::LogicalResult
  meshCall(mlir::Operation *op, llvm::StringRef collective,
           llvm::function_ref<void(CallArguments &)> build,
           bool withStream = true) = 0;
  /// A static const int64_t table (NULL for an empty list).
  virtual mlir::Value int64Table(llvm::ArrayRef<int64_t> values) = 0;
  /// `value` viewed as rows [N, V] / as one dim (the cross-entropy
  /// kernels' operands).
  virtual mlir::Value rowsView(mlir::Value value) = 0;
  virtual mlir::Value flatView(mlir::Value value) = 0;
  /// The step's seed mixed with an op's (tessera_mix_seed).
  virtual mlir::Value mixedSeed(int64_t opSeed) = 0;
  /// An attention's seed argument: mixedSeed with dropout, else 0.
  virtual mlir::Value attentionSeed(double dropout, int64_t opSeed) = 0;
  /// `seed` advanced to the rank's block of `op` (a random op) along each
  /// of its split stream dims (tess::streamBlocks: `stream_axis`, an
  /// attention's `head_stream_axis`): by coordinate * positions on each
  /// (tessera[_cuda]_mesh_stream_seed); `seed` itself when none is split.
  virtual mlir::Value streamedSeed(mlir::Operation *op, mlir::Value seed) = 0;
  /// The first row of `op`'s table block when it has a `rows_axis` (a
  /// vocabulary-parallel lookup: coordinate * `blockRows`,
  /// tessera[_cuda]_mesh_block_start); else 0.
  virtual mlir::Value firstRow(mlir::Operation *op, int64_t blockRows) = 0;
  /// A local array of tensor pointers holding `descriptors`
  /// (`const tessera_tensor *` when `constant`), for kernels that take a
  /// list (concat's inputs, split's outputs).
  virtual mlir::Value pointerArray(mlir::ValueRange descriptors,
                                   bool constant) = 0;
  /// Whether the plan made `result` a view of another value's bytes
  /// (contiguous split pieces): nothing to compute.
  virtual bool isView(mlir::Value result) = 0;
};

/// Lowers one op (of the type it was registered for) to its calls.
using KernelCallPattern =
    std::function<mlir::LogicalResult(mlir::Operation &, KernelCallContext &)>;

/// The patterns by op type.
class KernelCallPatterns {
public:
  /// Registers `pattern`, called as pattern(OpTy, KernelCallContext &), for
  /// each of `OpTys`.
  template <typename... OpTys, typename Pattern> void add(Pattern pattern) {
    (addOne<OpTys>(pattern), ...);
  }
  /// The pattern for `op`'s type, or null.
  const KernelCallPattern *lookup(mlir::Operation &op) const {
    auto it = patterns.find(op.getName().getTypeID());
    return it == patterns.end() ? nullptr : &it->second;
  }

private:
  template <typename OpTy, typename Pattern> void addOne(Pattern pattern) {
    patterns[mlir::TypeID::get<OpTy>()] =
        [pattern](mlir::Operation &op, KernelCallContext &context) {
          return pattern(llvm::cast<OpTy>(op), context);
        };
  }
  llvm::DenseMap<mlir::TypeID, KernelCallPattern> patterns;
};

/// Every op the lowering knows but tess.constant (whose bytes the step
/// builder writes as a table) and tess.reshape (a view).
void populateElementwiseKernelCalls(KernelCallPatterns &patterns);
void populateContractionKernelCalls(KernelCallPatterns &patterns);
void populateLayerKernelCalls(KernelCallPatterns &patterns);
void populateLossKernelCalls(KernelCallPatterns &patterns);
void populateDataMovementKernelCalls(KernelCallPatterns &patterns);
void populateCollectiveKernelCalls(KernelCallPatterns &patterns);

inline mlir::RankedTensorType tensorTypeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType());
}

/// An op's signed axis attribute as the kernels take it: in [0, rank).
inline int64_t axisOf(int64_t axis, mlir::Value value) {
  return *tess::normalizeAxis(axis, tensorTypeOf(value).getRank());
}

} // namespace tessera::lowering

#endif // TESSERA_LIB_LOWERING_KERNELCALLS_KERNELCALLS_H
