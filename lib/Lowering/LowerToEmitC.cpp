//===- LowerToEmitC.cpp - tess-lower-to-emitc ----------------------------===//
//
// @forward_backward -> one EmitC translation unit over the runtime's C ABI.
// See the pass description in include/tessera/Lowering/Passes.td.
//
// The op -> kernel mapping is the interpreter's (lib/Execution/
// Interpreter.cpp), call for call and attribute for attribute: the
// interpreter is what the fixture tests check against PyTorch, and this is
// what the executable runs.
//
// Shape of the generated step:
//   static int32_t tessera_forward_backward_steps(arena, parameters, ...) {
//     int32_t status = 0;
//     tessera_tensor t3 = tessera_layout_tensor(arena, tessera_layouts, 3);
//     ...                                    // descriptors, as ops define them
//     if (status == 0) { status = tessera_cpu_linear(...); }
//     ...
//     return status;
//   }
// EmitC's `return` must be the function's terminator, so instead of
// returning from the middle, every call after a failure is skipped by its
// guard and the failing status reaches the single return.
//
// Targets: one op -> kernel mapping serves both. `cpu` calls
// tessera_cpu_<kernel>(...) over a host arena; `cuda` calls
// tessera_cuda_<kernel>(..., stream) over a device arena (TargetConventions),
// on the driver's stream (tessera_step_context) or the program's own. The
// tensors program.h passes are in the target's memory (the cuda program's
// parameters, buffers, tokens, targets and gradients stay on the GPU for the
// whole run), so the two targets differ only in two places: the loss scale
// (a float argument) is splatted into a device scalar, and the loss is
// computed into a device scalar and read back to the host's *loss at the
// end, where tessera_cuda_finish_step makes the one device error check and
// synchronization of the call.
//
// Gradients: every gradient the plan writes in place (StorageKind::Output)
// is final once the one op that defines it is enqueued (SSA: nothing writes
// it again); the others are final once copied out at the end. Right after
// that point the step calls tessera_gradient_ready(context, i), so a
// data-parallel driver can start reducing gradient i while the rest of the
// backward pass runs.
//
// Weights: a ZeRO-3 driver holds only its shard of the weights the step
// reads and gathers them into transient places. Before every call that is
// the first read of a parameter within the forward pass (the calls before
// the first cross-entropy gradient) or within the backward pass, the step
// calls tessera_weights_needed(context, position), `position` numbering the
// calls that read any parameter (a view of a parameter reads it too);
// program.h's parameter_read_intervals tells the driver, per parameter, the
// first and last read position in each pass, from which it plans when each
// gather runs and which places may share memory.
//
//===----------------------------------------------------------------------===//

#include "tessera/Lowering/Passes.h"

#include "KernelCalls/KernelCalls.h"

#include "MeshProgram.h"
#include "PipelineProgram.h"
#include "ProgramDefinition.h"
#include "StepSignature.h"
#include "tessera/CostModel/OpCost.h"
#include "tessera/Execution/HostTensorBuffer.h"
#include "tessera/Analysis/ArenaPlanning.h"

#include "Tess/IR/TessOps.h"
#include "tessera/runtime/program.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#include <map>

namespace tessera {
#define GEN_PASS_DEF_LOWERTOEMITC
#include "tessera/Lowering/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::lowering;
namespace tess = tessera::tess;

namespace {

constexpr int kLayoutRow = 3 + TESSERA_MAX_RANK;

/// The C names of one emitted step's functions and globals. The whole
/// step's are the ones every program has had (tessera_forward_backward,
/// tessera_arena, ...); a pipeline stage's carry its function's name
/// (tessera_stage1_forward, tessera_stage1_forward_layouts, ...), so that
/// the stages share one translation unit. A pipeline device's chunk
/// functions share one arena and stream (DeviceArena).
struct StepNames {
  std::string wrapper, steps, layouts, arena, arenaBytes, stream, table,
      constant;

  static StepNames of(StringRef function) {
    bool whole = function == "forward_backward";
    std::string globals = whole ? "tessera" : ("tessera_" + function).str();
    StepNames names;
    names.wrapper = ("tessera_" + function).str();
    names.steps = names.wrapper + "_steps";
    names.layouts = globals + "_layouts";
    names.arena = globals + "_arena";
    names.arenaBytes = globals + "_arena_bytes";
    names.stream = globals + "_stream";
    names.table = globals + "_table_";
    names.constant = globals + "_constant_";
    return names;
  }
};

/// The arena (and own stream) of one pipeline device, which every function
/// of its chunks (prepare, forward, backward, interleaved chunks' alike)
/// uses: the device calls them one after another on one stream (one
/// thread), and an arena holds only a call's temporaries (what crosses
/// calls, the stash, the messages and the residents, is the caller's
/// storage), so the device needs the largest function's arena, not their
/// sum. Its size is that largest one's, set once every function is built.
struct DeviceArena {
  std::string arena, arenaBytes, stream;
  /// The size global, whose value is set last.
  emitc::GlobalOp bytesGlobal;
  int64_t bytes = 0;

  static DeviceArena of(int64_t device) {
    std::string globals = "tessera_device" + std::to_string(device);
    return {globals + "_arena", globals + "_arena_bytes",
            globals + "_stream", nullptr, 0};
  }
};


/// What differs between the targets; everything else is shared.
struct TargetConventions {
  bool cuda = false;
  /// Kernels: tessera_cpu_linear / tessera_cuda_linear.
  StringRef kernelPrefix = "tessera_cpu_";
  /// Lowering helpers with a device twin: tessera_fill_bytes /
  /// tessera_cuda_fill_bytes.
  StringRef supportPrefix = "tessera_";
  StringRef supportHeader = "tessera/runtime/lowering_support.h";

  static FailureOr<TargetConventions> forName(StringRef name) {
    TargetConventions conventions;
    if (name == "cpu")
      return conventions;
    if (name != "cuda")
      return failure();
    conventions.cuda = true;
    conventions.kernelPrefix = "tessera_cuda_";
    conventions.supportPrefix = "tessera_cuda_";
    conventions.supportHeader = "tessera/runtime/cuda_lowering_support.h";
    return conventions;
  }
};

/// The EmitC types the generated code uses.
struct CTypes {
  explicit CTypes(MLIRContext *context) {
    Builder b(context);
    tensor = emitc::OpaqueType::get(context, "tessera_tensor");
    constTensor = emitc::OpaqueType::get(context, "const tessera_tensor");
    tensorPointer = emitc::PointerType::get(tensor);
    constTensorPointer = emitc::PointerType::get(constTensor);
    i32 = b.getI32Type();
    i64 = b.getI64Type();
    ui64 = b.getIntegerType(64, /*isSigned=*/false);
    f32 = b.getF32Type();
    f64 = b.getF64Type();
    index = b.getIndexType();
    bytePointer = emitc::PointerType::get(b.getIntegerType(8, false));
    floatPointer = emitc::PointerType::get(f32);
    stream = emitc::OpaqueType::get(context, "cudaStream_t");
    contextPointer = emitc::PointerType::get(
        emitc::OpaqueType::get(context, "const tessera_step_context"));
  }
  Type tensor, constTensor, tensorPointer, constTensorPointer;
  Type i32, i64, ui64, f32, f64, index, bytePointer, floatPointer;
  /// The CUDA stream the cuda target's calls take last.
  Type stream;
  /// program.h's `const tessera_step_context *`.
  Type contextPointer;
};

/// Every family's kernel-call patterns, made once and then only read.
const KernelCallPatterns &kernelCallPatterns() {
  static const KernelCallPatterns patterns = [] {
    KernelCallPatterns all;
    populateElementwiseKernelCalls(all);
    populateContractionKernelCalls(all);
    populateLayerKernelCalls(all);
    populateLossKernelCalls(all);
    populateDataMovementKernelCalls(all);
    populateCollectiveKernelCalls(all);
    return all;
  }();
  return patterns;
}

/// At the builder's insertion point: `static const int64_t <arenaBytes> =
/// bytes;` and the thread-local arena pointer (and, cuda, the own stream)
/// tessera_[cuda_]arena_acquire fills on the first call. Any program's
/// ranks may be threads of one process, each with its own arena and
/// stream: a mesh's or a pipeline's (the drivers' test beds) and
/// data-parallel ranks (`--thread-ranks N`, on the host or sharing a GPU).
/// Returns the size's global.
emitc::GlobalOp emitArenaGlobals(OpBuilder &builder, Location loc,
                                 StringRef arena, StringRef arenaBytes,
                                 StringRef stream, int64_t bytes, bool cuda) {
  auto global = emitc::GlobalOp::create(
      builder, loc, arenaBytes, builder.getI64Type(),
      builder.getI64IntegerAttr(bytes),
      /*extern_specifier=*/false, /*static_specifier=*/true,
      /*const_specifier=*/true);
  auto threadLocalGlobal = [&](StringRef name, StringRef cType) {
    emitc::VerbatimOp::create(
        builder, loc,
        builder.getStringAttr(
            ("static thread_local " + cType + " " + name + " = NULL;").str()));
  };
  threadLocalGlobal(arena, "uint8_t*");
  if (cuda)
    threadLocalGlobal(stream, "cudaStream_t");
  return global;
}

/// Builds the body of tessera_forward_backward_steps from @forward_backward.
class StepBuilder : public KernelCallContext {
public:
  StepBuilder(ModuleOp module, func::FuncOp source,
              const FunctionArenaPlan &plan, const TargetConventions &target,
              const StepSignature &signature, DeviceArena *device = nullptr)
      : module(module), source(source), plan(plan), target(target),
        signature(signature), names(StepNames::of(source.getSymName())),
        device(device), context(module.getContext()), types(context),
        builder(context), loc(source.getLoc()) {
    if (device) {
      names.arena = device->arena;
      names.arenaBytes = device->arenaBytes;
      names.stream = device->stream;
    }
  }

  /// Emits the step functions before `source`; fails with a diagnostic on
  /// an op without a kernel.
  LogicalResult build();
  /// The C function program.h calls (tessera_forward_backward, ...).
  StringRef wrapperName() const { return names.wrapper; }
  /// After build(): per gradient result, the position of the one call that
  /// writes it among the calls that write gradients (program.h's
  /// gradient_write_positions).
  const std::vector<int32_t> &gradientWritePositions() const {
    return writePositions;
  }
  /// After build(): per parameter, the first and last read position in
  /// the forward pass, then in the backward pass, -1 where it is not read
  /// (program.h's parameter_read_intervals).
  const std::vector<int32_t> &parameterReadIntervals() const {
    return readIntervals;
  }

private:
  // Layout rows and descriptors.
  int32_t addLayoutRow(int64_t offset, RankedTensorType type);
  Value describe(StringRef helper, Value base, int64_t offset,
                 RankedTensorType type);
  Value elementPointer(Value array, unsigned index, Type pointerType);
  LogicalResult describeResults(Operation &op);

  // Guarded calls.
  void guardedCall(StringRef callee, CallArguments &arguments);
  void guardedCall(StringRef callee,
                   function_ref<void(CallArguments &)> buildArguments);
  /// The target's lowering helper `name` (tessera_name / tessera_cuda_name
  /// with the stream last).
  void supportCall(StringRef name, CallArguments &arguments);

  // KernelCallContext: what the kernel-call patterns build with.
  Value in(Value value) override { return descriptors.lookup(value); }
  /// The target's kernel `name` (tessera_cpu_name / tessera_cuda_name with
  /// the stream last).
  void kernelCall(StringRef name,
                  function_ref<void(CallArguments &)> buildArguments) override;
  /// `if (status == 0) status = tessera_[cuda_]mesh_<collective>(context,
  /// <axis of op's `axis`>, arguments..., stream)` (mesh_step.h).
  LogicalResult meshCall(Operation *op, StringRef collective,
                         function_ref<void(CallArguments &)> buildArguments,
                         bool withStream) override;
  Value int64Table(ArrayRef<int64_t> values) override;
  Value rowsView(Value value) override;
  Value flatView(Value value) override;
  Value mixedSeed(int64_t opSeed) override;
  /// A literal 0 without dropout: a tessera_mix_seed call would mark the
  /// step as random, which keeps the CUDA driver from replaying it as a
  /// graph.
  Value attentionSeed(double dropout, int64_t opSeed) override;
  Value streamedSeed(Operation *op, Value seed) override;
  Value firstRow(Operation *op, int64_t blockRows) override;
  /// A local of `type` set to `initial`, then passed by address to
  /// tessera[_cuda]_mesh_<call>(context, axis of `axisName`, ...) with
  /// `block`: the rank's block of a split op (stream_seed, block_start).
  Value rankBlockValue(Operation *op, StringAttr axisName, StringRef call,
                       Type type, Value initial, int64_t block);
  Value pointerArray(ValueRange pointers, bool constant) override;
  bool isView(Value result) override {
    return plan.storage.lookup(result).kind == StorageKind::Alias;
  }

  // The cuda target's device scalars for what program.h passes through host
  // memory (the loss scale, the loss): blocks of the arena after the
  // planned tensors.
  Value deviceSlot(RankedTensorType type);
  /// The descriptor of the loss written in place: the caller's *loss on
  /// the host, a device scalar read back at the end on the GPU.
  Value lossOutput(RankedTensorType type);
  /// The caller's storage of result `index` (a gradient or an output; the
  /// loss is lossOutput's).
  Value resultStorage(unsigned index, RankedTensorType type);
  /// `if (status == 0) status = tessera_gradient_ready(context, index);`,
  /// recording the gradient's write position (`nextWritePosition`).
  void announceGradient(unsigned parameterIndex);

  /// The parameter whose bytes `value` is (itself or a view of it), or
  /// nothing.
  std::optional<unsigned> parameterOf(Value value) const;
  /// Numbers the calls that read parameters and fills readIntervals, before
  /// any op is lowered.
  void planWeightReads(Block &body);

  LogicalResult lowerOp(Operation &op);
  LogicalResult lowerConstant(tess::ConstantOp constant);
  void copyResultsOut(func::ReturnOp returnOp);

  ModuleOp module;
  func::FuncOp source;
  const FunctionArenaPlan &plan;
  const TargetConventions &target;
  const StepSignature &signature;
  StepNames names;
  /// A pipeline chunk's function: the device's shared arena, which this
  /// function's size grows and whose globals the caller emits.
  DeviceArena *device;
  /// One rank's program of a mesh (MeshProgram.h) or one stage of a
  /// pipeline: its ranks may be threads of one process, so the arena and
  /// the stream are per thread.
  MLIRContext *context;
  CTypes types;
  OpBuilder builder;
  Location loc;
  /// Per gradient, the position of its writing call, and the next
  /// position: a call that writes several gradients gives them one.
  std::vector<int32_t> writePositions;
  int32_t nextWritePosition = 0;
  /// Per op that reads parameters, its read position; the positions at
  /// which some parameter's read interval starts (tessera_weights_needed
  /// precedes their calls); four per parameter, as parameterReadIntervals.
  llvm::DenseMap<Operation *, int32_t> readPositions;
  llvm::DenseSet<int32_t> intervalStarts;
  std::vector<int32_t> readIntervals;

  // Values of the steps function.
  Value arena, stream, stepContext, parameters, buffers, tokens, targets,
      inputs, lossScale, seed, loss, gradients, outputs;
  Value status, zero, layoutsPlaceholder;

  std::vector<int64_t> layoutRows;
  llvm::DenseMap<Value, Value> descriptors;
  unsigned tableCount = 0;
  std::map<std::vector<int64_t>, std::string> int64Tables;
  /// The arena's size: the plan's tensors, then (cuda) the device slots.
  int64_t arenaBytes = 0;
  Value deviceLoss;
};

int32_t StepBuilder::addLayoutRow(int64_t offset, RankedTensorType type) {
  int32_t row = static_cast<int32_t>(layoutRows.size() / kLayoutRow);
  layoutRows.push_back(offset);
  layoutRows.push_back(*execution::dtypeOf(type.getElementType()));
  layoutRows.push_back(type.getRank());
  for (int d = 0; d < TESSERA_MAX_RANK; ++d)
    layoutRows.push_back(d < type.getRank() ? type.getDimSize(d) : 0);
  return row;
}

/// `tessera_tensor v = helper(base, tessera_layouts, row); &v`.
Value StepBuilder::describe(StringRef helper, Value base, int64_t offset,
                            RankedTensorType type) {
  int32_t row = addLayoutRow(offset, type);
  Value variable = emitc::VariableOp::create(
      builder, loc, emitc::LValueType::get(types.tensor),
      emitc::OpaqueAttr::get(context, ""));
  CallArguments arguments(context);
  arguments.value(base).value(layoutsPlaceholder).i32(row);
  Value descriptor =
      emitc::CallOpaqueOp::create(builder, loc, TypeRange{types.tensor}, helper,
                                  arguments.operands,
                                  builder.getArrayAttr(arguments.args))
          .getResult(0);
  emitc::AssignOp::create(builder, loc, variable, descriptor);
  return emitc::AddressOfOp::create(builder, loc, types.tensorPointer,
                                    variable);
}

/// `&array[index]`.
Value StepBuilder::elementPointer(Value array, unsigned index,
                                  Type pointerType) {
  Value position = emitc::ConstantOp::create(
      builder, loc, types.index, builder.getIndexAttr(index));
  Type element = llvm::cast<emitc::PointerType>(pointerType).getPointee();
  Value lvalue = emitc::SubscriptOp::create(
      builder, loc, emitc::LValueType::get(element), array,
      ValueRange{position});
  return emitc::AddressOfOp::create(builder, loc, pointerType, lvalue);
}

/// A static const int64_t table (permutations, starts, dims, ...), or NULL
/// for an empty list.
Value StepBuilder::int64Table(ArrayRef<int64_t> values) {
  if (values.empty())
    return emitc::LiteralOp::create(builder, loc,
                                    emitc::PointerType::get(types.i64), "NULL");
  auto type = emitc::ArrayType::get({static_cast<int64_t>(values.size())},
                                    types.i64);
  // Equal lists (the same permutation in every layer) share one table.
  std::string &name = int64Tables[std::vector<int64_t>(values.begin(),
                                                       values.end())];
  if (!name.empty())
    return emitc::GetGlobalOp::create(builder, loc, type, name);
  name = names.table + std::to_string(tableCount++);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(builder.getInsertionBlock()->getParentOp());
    emitc::GlobalOp::create(
        builder, loc, name, type,
        DenseIntElementsAttr::get(
            RankedTensorType::get({static_cast<int64_t>(values.size())},
                                  types.i64),
            values),
        /*extern_specifier=*/false, /*static_specifier=*/true,
        /*const_specifier=*/true);
  }
  return emitc::GetGlobalOp::create(builder, loc, type, name);
}

Value StepBuilder::rowsView(Value value) {
  RankedTensorType type = tensorTypeOf(value);
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < type.getRank(); ++d)
    rows *= type.getDimSize(d);
  int64_t width = type.getRank() ? type.getShape().back() : 1;
  return describe("tessera_view_tensor", descriptors.lookup(value), 0,
                  RankedTensorType::get({rows, width}, type.getElementType()));
}

Value StepBuilder::flatView(Value value) {
  RankedTensorType type = tensorTypeOf(value);
  return describe("tessera_view_tensor", descriptors.lookup(value), 0,
                  RankedTensorType::get({type.getNumElements()},
                                        type.getElementType()));
}

/// Descriptors of `op`'s results, where the plan puts them.
LogicalResult StepBuilder::describeResults(Operation &op) {
  for (Value result : op.getResults()) {
    const ValueStorage &storage = plan.storage.lookup(result);
    RankedTensorType type = tensorTypeOf(result);
    switch (storage.kind) {
    case StorageKind::Arena:
      descriptors[result] =
          describe("tessera_layout_tensor", arena,
                   plan.layout.offsets[storage.index], type);
      break;
    case StorageKind::Output:
      descriptors[result] =
          signature.results[storage.index].destination ==
                  StepSignature::Destination::Loss
              ? lossOutput(type)
              : resultStorage(storage.index, type);
      break;
    case StorageKind::Alias:
      descriptors[result] =
          describe("tessera_view_tensor", descriptors.lookup(storage.aliasOf),
                   storage.offsetBytes, type);
      break;
    case StorageKind::Argument:
      return op.emitError("an op result planned as an argument");
    }
  }
  return success();
}

/// `if (status == 0) { status = callee(arguments...); }`.
void StepBuilder::guardedCall(StringRef callee, CallArguments &arguments) {
  guardedCall(callee, [&](CallArguments &inner) { inner = arguments; });
}

void StepBuilder::guardedCall(
    StringRef callee, function_ref<void(CallArguments &)> buildArguments) {
  Value current = emitc::LoadOp::create(builder, loc, types.i32, status);
  Value ok = emitc::CmpOp::create(builder, loc, builder.getI1Type(),
                                  emitc::CmpPredicate::eq, current, zero);
  emitc::IfOp::create(builder, loc, ok, [&](OpBuilder &inner, Location) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(inner.getInsertionBlock(),
                              inner.getInsertionPoint());
    CallArguments arguments(context);
    buildArguments(arguments);
    Value result =
        emitc::CallOpaqueOp::create(builder, loc, TypeRange{types.i32}, callee,
                                    arguments.operands,
                                    builder.getArrayAttr(arguments.args))
            .getResult(0);
    emitc::AssignOp::create(builder, loc, status, result);
    emitc::YieldOp::create(builder, loc);
  });
}

void StepBuilder::kernelCall(
    StringRef name, function_ref<void(CallArguments &)> buildArguments) {
  guardedCall((target.kernelPrefix + name).str(), [&](CallArguments &a) {
    buildArguments(a);
    if (target.cuda)
      a.value(stream);
  });
}

void StepBuilder::supportCall(StringRef name, CallArguments &arguments) {
  if (target.cuda)
    arguments.value(stream);
  guardedCall((target.supportPrefix + name).str(), arguments);
}

/// A descriptor of `type` in the next free block of the arena.
Value StepBuilder::deviceSlot(RankedTensorType type) {
  int64_t offset = llvm::alignTo(arenaBytes, kArenaAlignment);
  int64_t bytes =
      type.getNumElements() *
      static_cast<int64_t>(execution::dtypeSize(*execution::dtypeOf(
          type.getElementType())));
  arenaBytes = offset + bytes;
  return describe("tessera_layout_tensor", arena, offset, type);
}

Value StepBuilder::lossOutput(RankedTensorType type) {
  if (!target.cuda)
    return describe("tessera_layout_tensor", loss, 0, type);
  if (!deviceLoss)
    deviceLoss = deviceSlot(type);
  return deviceLoss;
}

Value StepBuilder::resultStorage(unsigned index, RankedTensorType type) {
  const StepSignature::Result &result = signature.results[index];
  bool gradient = result.destination == StepSignature::Destination::Gradient;
  return describe("tessera_view_tensor",
                  elementPointer(gradient ? gradients : outputs, result.index,
                                 types.tensorPointer),
                  0, type);
}

std::optional<unsigned> StepBuilder::parameterOf(Value value) const {
  // A view's bytes are its source's: follow the chain to its root.
  while (!llvm::isa<BlockArgument>(value)) {
    const ValueStorage &storage = plan.storage.lookup(value);
    if (storage.kind != StorageKind::Alias || !storage.aliasOf)
      return std::nullopt;
    value = storage.aliasOf;
  }
  const StepSignature::Argument &from =
      signature.arguments[llvm::cast<BlockArgument>(value).getArgNumber()];
  if (from.source != StepSignature::Source::Parameter)
    return std::nullopt;
  return from.index;
}

void StepBuilder::planWeightReads(Block &body) {
  // The backward pass starts at the loss's gradient: everything after it
  // depends on it (the program is in dependency order).
  bool backward = false;
  int32_t nextReadPosition = 0;
  for (Operation &op : body) {
    backward = backward ||
               llvm::isa<tess::CrossEntropyGradOp, tess::CrossEntropyWithGradOp>(
                   op);
    llvm::SmallSetVector<unsigned, 4> read;
    for (Value operand : op.getOperands())
      if (std::optional<unsigned> parameter = parameterOf(operand))
        read.insert(*parameter);
    if (read.empty())
      continue;
    const int32_t position = nextReadPosition++;
    readPositions[&op] = position;
    for (unsigned parameter : read) {
      if (readIntervals.size() < 4 * (parameter + 1))
        readIntervals.resize(4 * (parameter + 1), -1);
      int32_t *interval = &readIntervals[4 * parameter + (backward ? 2 : 0)];
      if (interval[0] < 0) {
        interval[0] = position;
        intervalStarts.insert(position);
      }
      interval[1] = position;
    }
  }
}

void StepBuilder::announceGradient(unsigned parameterIndex) {
  if (writePositions.size() <= parameterIndex)
    writePositions.resize(parameterIndex + 1, -1);
  writePositions[parameterIndex] = nextWritePosition;
  CallArguments arguments(context);
  arguments.value(stepContext).i32(parameterIndex);
  guardedCall("tessera_gradient_ready", arguments);
}

Value StepBuilder::attentionSeed(double dropout, int64_t opSeed) {
  if (dropout > 0)
    return mixedSeed(opSeed);
  return emitc::LiteralOp::create(builder, loc, types.ui64, "0");
}

Value StepBuilder::rankBlockValue(Operation *op, StringAttr axisName,
                                  StringRef call, Type type, Value initial,
                                  int64_t block) {
  // (The op's verifier checked that the module's mesh has the axis.)
  unsigned axis = *tess::MeshAttr::lookup(op).axisIndex(axisName.getValue());
  Value variable = emitc::VariableOp::create(
      builder, loc, emitc::LValueType::get(type),
      emitc::OpaqueAttr::get(context, ""));
  emitc::AssignOp::create(builder, loc, variable, initial);
  Value address = emitc::AddressOfOp::create(
      builder, loc, emitc::PointerType::get(type), variable);
  std::string callee =
      ((target.cuda ? "tessera_cuda_mesh_" : "tessera_mesh_") + call).str();
  guardedCall(callee, [&](CallArguments &a) {
    a.value(stepContext).i32(axis).value(address).i64(block);
  });
  return emitc::LoadOp::create(builder, loc, type, variable);
}

Value StepBuilder::streamedSeed(Operation *op, Value seed) {
  for (tess::StreamBlock block : tess::streamBlocks(op))
    if (auto axisName = op->getAttrOfType<StringAttr>(block.attribute))
      seed = rankBlockValue(op, axisName, "stream_seed", types.ui64, seed,
                            static_cast<int64_t>(block.positions));
  return seed;
}

Value StepBuilder::firstRow(Operation *op, int64_t blockRows) {
  auto axisName = op->getAttrOfType<StringAttr>("rows_axis");
  Value zero = emitc::LiteralOp::create(builder, loc, types.i64, "0");
  if (!axisName)
    return zero;
  return rankBlockValue(op, axisName, "block_start", types.i64, zero,
                        blockRows);
}

/// tessera_mix_seed(seed, opSeed): the interpreter's mixSeed.
Value StepBuilder::mixedSeed(int64_t opSeed) {
  CallArguments arguments(context);
  arguments.value(seed);
  arguments.args.push_back(
      builder.getIntegerAttr(types.ui64, static_cast<uint64_t>(opSeed)));
  return emitc::CallOpaqueOp::create(builder, loc, TypeRange{types.ui64},
                                     "tessera_mix_seed", arguments.operands,
                                     builder.getArrayAttr(arguments.args))
      .getResult(0);
}

/// `T *array[n]; array[i] = pointers[i]; ...` (const tessera_tensor * when
/// `constant`, each pointer cast to it).
Value StepBuilder::pointerArray(ValueRange pointers, bool constant) {
  Type pointerType = constant ? types.constTensorPointer : types.tensorPointer;
  auto arrayType = emitc::ArrayType::get(
      {static_cast<int64_t>(pointers.size())}, pointerType);
  Value array = emitc::VariableOp::create(builder, loc, arrayType,
                                          emitc::OpaqueAttr::get(context, ""));
  for (auto [index, pointer] : llvm::enumerate(pointers)) {
    Value position = emitc::ConstantOp::create(builder, loc, types.index,
                                               builder.getIndexAttr(index));
    Value slot = emitc::SubscriptOp::create(
        builder, loc, emitc::LValueType::get(pointerType), array,
        ValueRange{position});
    Value element = pointer;
    if (element.getType() != pointerType)
      element = emitc::CastOp::create(builder, loc, pointerType, element);
    emitc::AssignOp::create(builder, loc, slot, element);
  }
  return array;
}

LogicalResult
StepBuilder::meshCall(Operation *op, StringRef collective,
                      function_ref<void(CallArguments &)> buildArguments,
                      bool withStream) {
  StringRef axisName = op->getAttrOfType<StringAttr>("axis").getValue();
  tess::MeshAttr mesh = tess::MeshAttr::lookup(op);
  std::optional<unsigned> axis =
      mesh ? mesh.axisIndex(axisName) : std::nullopt;
  if (!axis)
    return op->emitError("tess-lower-to-emitc: no mesh axis '")
           << axisName << "' in the module's tess.mesh";
  std::string callee =
      ((target.cuda ? "tessera_cuda_mesh_" : "tessera_mesh_") + collective)
          .str();
  guardedCall(callee, [&](CallArguments &a) {
    a.value(stepContext).i32(*axis);
    buildArguments(a);
    if (target.cuda)
      a.value(stream);
    else if (withStream)
      a.literal("NULL");
  });
  return success();
}

/// A constant's bytes become a static table copied into its storage (a
/// splat, such as a zero gradient, is one element written everywhere).
LogicalResult StepBuilder::lowerConstant(tess::ConstantOp constant) {
  ElementsAttr value = constant.getValue();
  auto dense = llvm::dyn_cast<DenseElementsAttr>(value);
  bool splat = dense && dense.isSplat();
  if (splat)
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, dense.getElementType()),
        dense.getSplatValue<Attribute>());
  llvm::Expected<execution::HostTensorBuffer> buffer =
      execution::HostTensorBuffer::fromAttribute(value);
  if (!buffer)
    return constant.emitError("cannot lower this constant: ")
           << llvm::toString(buffer.takeError());
  int64_t size = buffer->numElements() * execution::dtypeSize(buffer->dtype());
  auto bytes = ArrayRef<uint8_t>(static_cast<const uint8_t *>(buffer->data()),
                                 static_cast<size_t>(size));
  std::string name = names.constant + std::to_string(tableCount++);
  Type byteType = builder.getIntegerType(8, /*isSigned=*/false);
  auto type = emitc::ArrayType::get({size}, byteType);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(builder.getInsertionBlock()->getParentOp());
    SmallVector<APInt> values;
    for (uint8_t byte : bytes)
      values.push_back(APInt(8, byte));
    emitc::GlobalOp::create(
        builder, loc, name, type,
        DenseElementsAttr::get(RankedTensorType::get({size}, byteType), values),
        /*extern_specifier=*/false, /*static_specifier=*/true,
        /*const_specifier=*/true);
  }
  Value table = emitc::GetGlobalOp::create(builder, loc, type, name);
  CallArguments arguments(context);
  arguments.value(descriptors.lookup(constant.getResult())).value(table).i64(size);
  supportCall(splat ? "fill_splat" : "fill_bytes", arguments);
  return success();
}

/// The op's kernel calls, by its kernel-call pattern (KernelCalls/).
LogicalResult StepBuilder::lowerOp(Operation &op) {
  if (auto constant = dyn_cast<tess::ConstantOp>(op))
    return lowerConstant(constant);
  if (const KernelCallPattern *pattern = kernelCallPatterns().lookup(op))
    return (*pattern)(op, *this);
  return op.emitError("tess-lower-to-emitc: no kernel for '")
         << op.getName() << "' in @forward_backward";
}

/// Results not written in place are copied into the caller's storage (and
/// announced); the GPU's loss is always read back from its device scalar.
void StepBuilder::copyResultsOut(func::ReturnOp returnOp) {
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    // In place: the value, or the value a reshape chain of it views, was
    // written into this result.
    const ValueStorage &storage =
        plan.storage.lookup(plan.resolveAlias(value));
    bool inPlace = storage.kind == StorageKind::Output &&
                   storage.index == index &&
                   plan.storage.lookup(value).offsetBytes == 0;
    Value source = descriptors.lookup(value);
    const StepSignature::Result &result = signature.results[index];
    if (result.destination == StepSignature::Destination::Loss) {
      if (inPlace && !target.cuda)
        continue;
      CallArguments arguments(context);
      arguments.value(source).value(loss);
      supportCall("read_scalar_f32", arguments);
      continue;
    }
    if (inPlace)
      continue;
    Value copy = resultStorage(index, tensorTypeOf(value));
    kernelCall("copy", [&](CallArguments &a) { a.value(source).value(copy); });
    if (result.destination == StepSignature::Destination::Gradient) {
      announceGradient(result.index);
      ++nextWritePosition;
    }
  }
}

LogicalResult StepBuilder::build() {
  // static int32_t tessera_forward_backward_steps(uint8_t *arena,
  //     const tessera_step_context *context,
  //     const tessera_tensor *parameters, const tessera_tensor *buffers,
  //     const tessera_tensor *tokens, const tessera_tensor *targets,
  //     float loss_scale, uint64_t seed, float *loss,
  //     tessera_tensor *gradients)
  // The cuda target's takes the stream after the arena. A pipeline stage's
  // (tessera_stage_function's call) also takes its inputs after the
  // targets and its outputs last.
  SmallVector<Type> programArguments = {
      types.contextPointer, types.constTensorPointer, types.constTensorPointer,
      types.constTensorPointer, types.constTensorPointer};
  if (signature.stage)
    programArguments.push_back(types.constTensorPointer);
  programArguments.append(
      {types.f32, types.ui64, types.floatPointer, types.tensorPointer});
  if (signature.stage)
    programArguments.push_back(types.tensorPointer);
  SmallVector<Type> stepArguments = {types.bytePointer};
  if (target.cuda)
    stepArguments.push_back(types.stream);
  stepArguments.append(programArguments);
  builder.setInsertionPoint(source);
  auto steps = emitc::FuncOp::create(
      builder, loc, names.steps,
      builder.getFunctionType(stepArguments, {types.i32}));
  steps.setSpecifiersAttr(builder.getStrArrayAttr({"static"}));
  Block *body = steps.addEntryBlock();
  builder.setInsertionPointToStart(body);
  arena = body->getArgument(0);
  unsigned next = target.cuda ? 2 : 1;
  if (target.cuda)
    stream = body->getArgument(1);
  auto take = [&] { return body->getArgument(next++); };
  stepContext = take();
  parameters = take();
  buffers = take();
  tokens = take();
  targets = take();
  if (signature.stage)
    inputs = take();
  lossScale = take();
  seed = take();
  loss = take();
  gradients = take();
  if (signature.stage)
    outputs = take();
  // The device slots (cuda) follow the planned tensors.
  arenaBytes = plan.layout.totalBytes;

  status = emitc::VariableOp::create(builder, loc,
                                     emitc::LValueType::get(types.i32),
                                     builder.getI32IntegerAttr(0));
  zero = emitc::ConstantOp::create(builder, loc, types.i32,
                                   builder.getI32IntegerAttr(0));
  // Replaced by the layout table once every row is known.
  layoutsPlaceholder = emitc::LiteralOp::create(
      builder, loc, emitc::PointerType::get(types.i64), "tessera_layouts");

  // The arguments, by index into the caller's arrays (in the target's
  // memory).
  using Source = StepSignature::Source;
  for (BlockArgument argument : source.getArguments()) {
    const StepSignature::Argument &from =
        signature.arguments[argument.getArgNumber()];
    switch (from.source) {
    case Source::Parameter:
      descriptors[argument] =
          elementPointer(parameters, from.index, types.constTensorPointer);
      break;
    case Source::Buffer:
      descriptors[argument] =
          elementPointer(buffers, from.index, types.constTensorPointer);
      break;
    case Source::Input:
      descriptors[argument] =
          elementPointer(inputs, from.index, types.constTensorPointer);
      break;
    case Source::Tokens:
      descriptors[argument] = tokens;
      break;
    case Source::Targets:
      descriptors[argument] = targets;
      break;
    case Source::LossScale:
      if (target.cuda) {
        // A float argument, splatted into a device scalar.
        Value scale = deviceSlot(tensorTypeOf(argument));
        CallArguments arguments(context);
        arguments.value(scale).value(lossScale).value(stream);
        guardedCall("tessera_cuda_fill_f32", arguments);
        descriptors[argument] = scale;
      } else {
        // A float argument, described as a rank-0 tensor.
        Value scale = emitc::VariableOp::create(
            builder, loc, emitc::LValueType::get(types.f32),
            builder.getF32FloatAttr(0));
        emitc::AssignOp::create(builder, loc, scale, lossScale);
        Value address = emitc::AddressOfOp::create(
            builder, loc, types.floatPointer, scale);
        descriptors[argument] = describe("tessera_layout_tensor", address, 0,
                                         tensorTypeOf(argument));
      }
      break;
    }
  }

  Block &sourceBody = source.getBody().front();
  planWeightReads(sourceBody);
  for (Operation &op : sourceBody) {
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      copyResultsOut(returnOp);
      continue;
    }
    // A ZeRO-3 driver gathers the weights whose reads start here.
    auto read = readPositions.find(&op);
    if (read != readPositions.end() && intervalStarts.contains(read->second)) {
      CallArguments arguments(context);
      arguments.value(stepContext).i32(read->second);
      guardedCall("tessera_weights_needed", arguments);
    }
    if (failed(describeResults(op)))
      return failure();
    if (failed(lowerOp(op)))
      return failure();
    // The op's kernel call wrote these gradients, and nothing writes their
    // storage again (ArenaPlanning: no value is placed in an output's
    // bytes but its own), so they share one write position.
    bool wroteGradient = false;
    for (Value result : op.getResults()) {
      const ValueStorage &storage = plan.storage.lookup(result);
      if (storage.kind == StorageKind::Output &&
          signature.results[storage.index].destination ==
              StepSignature::Destination::Gradient) {
        announceGradient(signature.results[storage.index].index);
        wroteGradient = true;
      }
    }
    if (wroteGradient)
      ++nextWritePosition;
  }
  Value result = emitc::LoadOp::create(builder, loc, types.i32, status);
  emitc::ReturnOp::create(builder, loc, result);

  // The layout table, now complete.
  auto layoutType = emitc::ArrayType::get(
      {static_cast<int64_t>(layoutRows.size())}, types.i64);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(steps);
    emitc::GlobalOp::create(
        builder, loc, names.layouts, layoutType,
        DenseIntElementsAttr::get(
            RankedTensorType::get({static_cast<int64_t>(layoutRows.size())},
                                  types.i64),
            layoutRows),
        /*extern_specifier=*/false, /*static_specifier=*/true,
        /*const_specifier=*/true);
    builder.setInsertionPointAfter(layoutsPlaceholder.getDefiningOp());
    Value layouts =
        emitc::GetGlobalOp::create(builder, loc, layoutType, names.layouts);
    layoutsPlaceholder.replaceAllUsesWith(layouts);
    layoutsPlaceholder.getDefiningOp()->erase();
  }

  // int32_t tessera_forward_backward(<program.h's forward_backward>): the
  // arena once, then the steps (cuda: on the context's stream or the
  // program's own, then the step's one device check).
  builder.setInsertionPoint(source);
  auto wrapper = emitc::FuncOp::create(
      builder, loc, names.wrapper,
      builder.getFunctionType(programArguments, {types.i32}));
  wrapper.setSpecifiersAttr(builder.getStrArrayAttr({"static"}));
  Block *wrapperBody = wrapper.addEntryBlock();
  builder.setInsertionPointToStart(wrapperBody);
  status = emitc::VariableOp::create(builder, loc,
                                     emitc::LValueType::get(types.i32),
                                     builder.getI32IntegerAttr(0));
  zero = emitc::ConstantOp::create(builder, loc, types.i32,
                                   builder.getI32IntegerAttr(0));
  // The program's mutable globals (the arena, its own stream) are
  // thread_locals, which emitc.global cannot declare (see below), so they
  // are named by literals instead. A global's address, and its value read
  // at `at`'s insertion point.
  struct MutableGlobal {
    StringRef name;
    Type type;
  };
  auto addressOf = [&](const MutableGlobal &global) -> Value {
    return emitc::LiteralOp::create(builder, loc,
                                    emitc::PointerType::get(global.type),
                                    ("&" + global.name).str());
  };
  auto valueOf = [&](OpBuilder &at, const MutableGlobal &global) -> Value {
    return emitc::LiteralOp::create(at, loc, global.type, global.name);
  };
  MutableGlobal arenaGlobal{names.arena, types.bytePointer};
  MutableGlobal streamGlobal{names.stream, types.stream};
  Value arenaAddress = addressOf(arenaGlobal);
  Value arenaBytesGlobal = emitc::GetGlobalOp::create(
      builder, loc, emitc::LValueType::get(types.i64), names.arenaBytes);
  Value bytes = emitc::LoadOp::create(builder, loc, types.i64, arenaBytesGlobal);
  CallArguments acquire(context);
  acquire.value(arenaAddress).value(bytes);
  if (target.cuda)
    acquire.value(addressOf(streamGlobal));
  guardedCall((target.supportPrefix + "arena_acquire").str(), acquire);
  Value stepStream;
  if (target.cuda) {
    Value ownStream = valueOf(builder, streamGlobal);
    stepStream = emitc::CallOpaqueOp::create(
                     builder, loc, TypeRange{types.stream},
                     "tessera_cuda_step_stream",
                     ValueRange{wrapperBody->getArgument(0), ownStream})
                     .getResult(0);
  }
  Value current = emitc::LoadOp::create(builder, loc, types.i32, status);
  Value ok = emitc::CmpOp::create(builder, loc, builder.getI1Type(),
                                  emitc::CmpPredicate::eq, current, zero);
  emitc::IfOp::create(builder, loc, ok, [&](OpBuilder &inner, Location) {
    SmallVector<Value> operands = {valueOf(inner, arenaGlobal)};
    if (target.cuda)
      operands.push_back(stepStream);
    operands.append(wrapperBody->getArguments().begin(),
                    wrapperBody->getArguments().end());
    Value result = emitc::CallOp::create(inner, loc, steps, operands)
                       .getResult(0);
    emitc::AssignOp::create(inner, loc, status, result);
    emitc::YieldOp::create(inner, loc);
  });
  if (target.cuda) {
    // Unguarded: it also waits for what a failed step had launched, and
    // hands the first failure's message to tessera_cpu_last_error().
    Value stepStatus = emitc::LoadOp::create(builder, loc, types.i32, status);
    Value finished =
        emitc::CallOpaqueOp::create(builder, loc, TypeRange{types.i32},
                                    "tessera_cuda_finish_step",
                                    ValueRange{stepStatus, stepStream})
            .getResult(0);
    emitc::AssignOp::create(builder, loc, status, finished);
  }
  Value finalStatus = emitc::LoadOp::create(builder, loc, types.i32, status);
  emitc::ReturnOp::create(builder, loc, finalStatus);

  // The arena: its size and the pointer acquired on the first step (cuda:
  // in device memory, with the stream a call runs on when the driver names
  // none).
  builder.setInsertionPoint(steps);
  arenaBytes = llvm::alignTo(arenaBytes, kArenaAlignment);
  if (device) {
    device->bytes = std::max(device->bytes, arenaBytes);
    return success();
  }
  emitArenaGlobals(builder, loc, names.arena, names.arenaBytes, names.stream,
                   arenaBytes, target.cuda);
  return success();
}

/// The name in a tess.* argument or result attribute, or "".
StringRef roleName(DictionaryAttr attributes, StringRef role) {
  if (!attributes)
    return {};
  if (auto name = attributes.getAs<StringAttr>(role))
    return name.getValue();
  return {};
}

/// The model FLOPs of one call of @forward_backward, for the driver's MFU:
/// its contractions (linear and matmul, forward and backward, and fused
/// attention) as the cost model credits them: a multiply-add is 2, and
/// attention's backward is not charged for recomputing its scores.
double modelFlops(func::FuncOp function) {
  double flops = 0;
  function.walk([&](Operation *op) {
    cost::OpCost opCost = cost::estimateOpCost(op);
    if (opCost.kind == cost::OpKind::Linear ||
        opCost.kind == cost::OpKind::Attention)
      flops += opCost.modelFlops;
  });
  return flops;
}

struct LowerToEmitCPass
    : tessera::impl::LowerToEmitCBase<LowerToEmitCPass> {
  using LowerToEmitCBase::LowerToEmitCBase;

  void runOnOperation() override;

private:
  /// Checks @forward_backward's signature against program.h and collects
  /// the program's description.
  FailureOr<ProgramInfo> describeProgram(func::FuncOp function,
                                         unsigned &parameterCount,
                                         unsigned &bufferCount);
};

FailureOr<ProgramInfo>
LowerToEmitCPass::describeProgram(func::FuncOp function,
                                  unsigned &parameterCount,
                                  unsigned &bufferCount) {
  ProgramInfo info;
  info.modelName = modelName;
  info.weightsFile = weightsFile;
  parameterCount = bufferCount = 0;
  unsigned argumentCount = function.getNumArguments();
  for (unsigned i = 0; i < argumentCount; ++i) {
    DictionaryAttr attributes = function.getArgAttrDict(i);
    auto type = llvm::dyn_cast<RankedTensorType>(function.getArgument(i).getType());
    if (!type || !type.hasStaticShape() || type.getRank() > TESSERA_MAX_RANK)
      return function.emitError("tess-lower-to-emitc: argument ")
             << i << " must be a static tensor of rank <= "
             << TESSERA_MAX_RANK << ", got " << function.getArgument(i).getType();
    llvm::Expected<tessera_dtype> dtype =
        execution::dtypeOf(type.getElementType());
    if (!dtype)
      return function.emitError("tess-lower-to-emitc: argument ")
             << i << ": " << llvm::toString(dtype.takeError());
    ProgramTensor tensor{"", *dtype, std::vector<int64_t>(
                                         type.getShape().begin(),
                                         type.getShape().end())};
    if (StringRef name = roleName(attributes, "tess.parameter"); !name.empty()) {
      if (bufferCount != 0)
        return function.emitError("tess-lower-to-emitc: trainable parameters "
                                  "must come first");
      // The table describes the f32 master (the weights file's and the
      // checkpoints' tensor); the step may read the driver's compute copy
      // instead (tess-read-compute-copies), checked against the precision
      // below.
      info.parameterStepDtypes.push_back(*dtype);
      tensor.dtype = TESSERA_F32;
      tensor.name = name.str();
      info.parameters.push_back(tensor);
      ++parameterCount;
    } else if (StringRef name = roleName(attributes, "tess.buffer");
               !name.empty()) {
      tensor.name = name.str();
      info.buffers.push_back(tensor);
      ++bufferCount;
    } else {
      break;
    }
  }
  unsigned inputs = parameterCount + bufferCount;
  static const char *const inputNames[] = {"input_ids", "targets",
                                           "loss_scale"};
  if (argumentCount != inputs + 3)
    return function.emitError("tess-lower-to-emitc: @forward_backward must "
                              "take the parameters, the buffers, then "
                              "input_ids, targets and loss_scale");
  for (unsigned i = 0; i < 3; ++i)
    if (roleName(function.getArgAttrDict(inputs + i), "tess.input") !=
        inputNames[i])
      return function.emitError("tess-lower-to-emitc: argument ")
             << inputs + i << " must be tess.input = \"" << inputNames[i]
             << "\"";
  auto ids = tensorTypeOf(function.getArgument(inputs));
  auto targetsType = tensorTypeOf(function.getArgument(inputs + 1));
  auto scale = tensorTypeOf(function.getArgument(inputs + 2));
  if (ids.getRank() != 2 || !ids.getElementType().isInteger(64) ||
      targetsType != ids || scale.getRank() != 0 ||
      !scale.getElementType().isF32())
    return function.emitError("tess-lower-to-emitc: the runtime passes "
                              "input_ids and targets as [B, T] i64 and the "
                              "loss scale as f32");
  info.batch = ids.getDimSize(0);
  info.sequence = ids.getDimSize(1);

  // Results: the loss, then one gradient per parameter in the same order.
  if (function.getNumResults() != parameterCount + 1 ||
      tensorTypeOf(function.getBody().front().getTerminator()->getOperand(0))
              .getRank() != 0)
    return function.emitError("tess-lower-to-emitc: @forward_backward must "
                              "return the loss, then one gradient per "
                              "parameter");
  for (unsigned i = 0; i < parameterCount; ++i)
    if (roleName(function.getResultAttrDict(i + 1), "tess.gradient") !=
        info.parameters[i].name)
      return function.emitError("tess-lower-to-emitc: result ")
             << i + 1 << " must be the gradient of '"
             << info.parameters[i].name << "'";

  StringRef loss = "causal-lm", precision = "fp32";
  if (auto attribute = function->getAttrOfType<StringAttr>("tess.loss"))
    loss = attribute.getValue();
  if (auto attribute = function->getAttrOfType<StringAttr>("tess.precision"))
    precision = attribute.getValue();
  if (loss == "causal-lm")
    info.lossKind = TESSERA_LOSS_CAUSAL_LM;
  else if (loss == "mlm")
    info.lossKind = TESSERA_LOSS_MLM;
  else
    return function.emitError("tess-lower-to-emitc: unknown tess.loss '")
           << loss << "'";
  if (precision == "fp32")
    info.precision = TESSERA_PRECISION_FP32;
  else if (precision == "bf16")
    info.precision = TESSERA_PRECISION_BF16;
  else if (precision == "fp16")
    info.precision = TESSERA_PRECISION_FP16;
  else
    return function.emitError("tess-lower-to-emitc: unknown tess.precision '")
           << precision << "'";
  const int32_t computeDtype = info.precision == TESSERA_PRECISION_BF16
                                   ? TESSERA_BF16
                                   : info.precision == TESSERA_PRECISION_FP16
                                         ? TESSERA_F16
                                         : TESSERA_F32;
  for (unsigned i = 0; i < parameterCount; ++i) {
    int32_t dtype = info.parameterStepDtypes[i];
    if (dtype == TESSERA_F32 || dtype == computeDtype)
      continue;
    InFlightDiagnostic error =
        function.emitError("tess-lower-to-emitc: parameter '")
        << info.parameters[i].name << "' is read as "
        << tensorTypeOf(function.getArgument(i)).getElementType() << "; ";
    if (computeDtype == TESSERA_F32)
      return error << "an fp32 step reads every parameter as its f32 master";
    return error << "a " << precision << " step reads a parameter as its f32 "
                 << "master or its compute copy of that precision";
  }

  // The vocabulary and ignore index come from the loss: one op, or one
  // per block of rows of a head computed a block at a time
  // (tess-chunk-loss-head), which agree; each a tess.cross_entropy, or one
  // fused with its gradient (tess.cross_entropy_with_grad).
  struct Loss {
    Operation *op;
    int64_t ignoreIndex;
    Value logits, allTargets;
  };
  SmallVector<Loss> losses;
  function.walk([&](Operation *op) {
    if (auto loss = dyn_cast<tess::CrossEntropyOp>(op))
      losses.push_back({op, static_cast<int64_t>(loss.getIgnoreIndex()),
                        loss.getLogits(), loss.getAllTargets()});
    if (auto loss = dyn_cast<tess::CrossEntropyWithGradOp>(op))
      losses.push_back({op, static_cast<int64_t>(loss.getIgnoreIndex()),
                        loss.getLogits(), loss.getAllTargets()});
  });
  if (losses.empty()) {
    // A vocabulary-parallel loss, computed of tess ops by
    // tess-partition-spmd, which records its classes and ignore index.
    auto vocabulary =
        function->getAttrOfType<IntegerAttr>("tess.vocabulary");
    auto ignoreIndex =
        function->getAttrOfType<IntegerAttr>("tess.ignore_index");
    if (!vocabulary || !ignoreIndex)
      return function.emitError("tess-lower-to-emitc: expected a "
                                "tess.cross_entropy in @forward_backward");
    info.vocabulary = vocabulary.getInt();
    info.ignoreIndex = ignoreIndex.getInt();
    return info;
  }
  for (const Loss &loss : losses)
    if (loss.ignoreIndex != losses[0].ignoreIndex ||
        tensorTypeOf(loss.logits).getShape().back() !=
            tensorTypeOf(losses[0].logits).getShape().back() ||
        (losses.size() > 1 && !loss.allTargets))
      return loss.op->emitError(
          "tess-lower-to-emitc: the losses of @forward_backward must be "
          "blocks of one head (count_over, one ignore index and class "
          "count)");
  // A padded head's logits have more classes than the model has tokens
  // (tess-build-training's tess.vocabulary).
  if (auto vocabulary = function->getAttrOfType<IntegerAttr>("tess.vocabulary"))
    info.vocabulary = vocabulary.getInt();
  else
    info.vocabulary = tensorTypeOf(losses[0].logits).getShape().back();
  info.ignoreIndex = losses[0].ignoreIndex;
  return info;
}

/// forward_backward's binding: the parameters, the buffers, input_ids,
/// targets and the loss scale in that order (describeProgram checked it);
/// the loss, then one gradient per parameter.
StepSignature wholeStepSignature(unsigned parameterCount,
                                 unsigned bufferCount) {
  using Source = StepSignature::Source;
  StepSignature signature;
  for (unsigned i = 0; i < parameterCount; ++i)
    signature.arguments.push_back({Source::Parameter, i});
  for (unsigned i = 0; i < bufferCount; ++i)
    signature.arguments.push_back({Source::Buffer, i});
  signature.arguments.push_back({Source::Tokens, 0});
  signature.arguments.push_back({Source::Targets, 0});
  signature.arguments.push_back({Source::LossScale, 0});
  signature.results.push_back({StepSignature::Destination::Loss, 0});
  for (unsigned i = 0; i < parameterCount; ++i)
    signature.results.push_back({StepSignature::Destination::Gradient, i});
  return signature;
}

/// Plans `function`'s arena and checks that the runtime has a dtype for
/// every value it computes.
FailureOr<FunctionArenaPlan> planLoweredFunction(func::FuncOp function,
                                                 bool print) {
  FailureOr<FunctionArenaPlan> plan = planFunctionArena(function);
  if (failed(plan))
    return failure();
  if (print) {
    // A pipelined program's plans, one per chunk function.
    if (function.getSymName() != "forward_backward")
      llvm::errs() << "@" << function.getSymName() << ":\n";
    tessera::printArenaPlan(*plan, llvm::errs());
  }
  for (Operation &op : function.getBody().front())
    for (Value result : op.getResults()) {
      llvm::Expected<tessera_dtype> dtype =
          execution::dtypeOf(tensorTypeOf(result).getElementType());
      if (!dtype)
        return op.emitError("tess-lower-to-emitc: ")
               << llvm::toString(dtype.takeError());
    }
  return plan;
}

void LowerToEmitCPass::runOnOperation() {
  ModuleOp module = getOperation();
  FailureOr<TargetConventions> conventions =
      TargetConventions::forName(targetName);
  if (failed(conventions)) {
    module.emitError("tess-lower-to-emitc: unknown target '")
        << targetName << "' (expected cpu or cuda)";
    return signalPassFailure();
  }
  auto function = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!function) {
    module.emitError("tess-lower-to-emitc: no @forward_backward (run "
                     "tess-build-training first)");
    return signalPassFailure();
  }
  // A pipelined step may be partitioned over a stage mesh (PP x DP,
  // PP x TP): its stage functions are then one mesh rank's.
  bool pipelined = module->hasAttr("tess.pipeline");
  FailureOr<std::optional<MeshProgram>> mesh =
      prepareMeshProgram(module, function, pipelined);
  if (failed(mesh))
    return signalPassFailure();
  unsigned parameterCount = 0, bufferCount = 0;
  FailureOr<ProgramInfo> info =
      describeProgram(function, parameterCount, bufferCount);
  if (failed(info))
    return signalPassFailure();
  bool partitioned = mesh->has_value();
  if (partitioned) {
    const MeshProgram &program = **mesh;
    info->meshAxisNames = program.axisNames;
    info->meshShape = program.axisSizes;
    for (unsigned i = 0; i < parameterCount; ++i) {
      info->parameters[i].split = program.argumentSplits[i];
      info->parameters[i].pieces = program.argumentPieces[i];
    }
    for (unsigned i = 0; i < bufferCount; ++i) {
      info->buffers[i].split = program.argumentSplits[parameterCount + i];
      info->buffers[i].pieces = program.argumentPieces[parameterCount + i];
    }
  }
  info->device = conventions->cuda ? TESSERA_DEVICE_CUDA : TESSERA_DEVICE_HOST;
  // The plan as tesserac wrote it, with the mesh the annotation added and
  // the chunks the stage split added: what the executable prints at start.
  if (tess::PlanAttr plan = tess::PlanAttr::lookup(module)) {
    llvm::raw_string_ostream os(info->plan);
    os << Attribute(plan);
    // Only a GPU executable keeps its optimizer state apart from the host.
    if (plan.isOffloaded() && !conventions->cuda) {
      module.emitError("tess-lower-to-emitc: the plan offloads the "
                       "optimizer to the host, which only a GPU program "
                       "(--target cuda) does; a host program's state is in "
                       "host memory already");
      return signalPassFailure();
    }
    info->offloadOptimizer = plan.isOffloaded();
    // ZeRO-1 inside a pipeline's stage mesh is the driver's (StageZero.h);
    // any other plan's ZeRO is in the partitioned program's splits.
    if (plan.isPipelined() && plan.getMesh() && plan.getZero() == 1)
      info->zeroStage = 1;
  }
  FailureOr<std::optional<PipelineProgram>> pipeline =
      preparePipelineProgram(module, *info, pipelineSchedule, microBatches);
  if (failed(pipeline))
    return signalPassFailure();
  // The gradients left pending over axes: a pipeline's table, or the
  // program's (the mesh search's ZeRO-1/2 parameters).
  if (partitioned && !(*mesh)->gradientPartialAxes.empty()) {
    std::vector<int32_t> &partialAxes =
        *pipeline ? (*pipeline)->gradientPartialAxes
                  : info->gradientPartialAxes;
    for (const ProgramTensor &parameter : info->parameters)
      partialAxes.push_back(
          (*mesh)->gradientPartialAxes.lookup(parameter.name));
    // Which of the program's pending gradients the driver keeps as shards
    // (ZeRO-2) rather than whole (ZeRO-1).
    if (!*pipeline)
      for (const ProgramTensor &parameter : info->parameters) {
        const int32_t pending =
            (*mesh)->gradientPartialAxes.lookup(parameter.name);
        auto stage = (*mesh)->gradientZeroStages.find(parameter.name);
        info->gradientZeroStages.push_back(
            pending == 0                                    ? 0
            : stage == (*mesh)->gradientZeroStages.end() ? 1
                                                          : stage->second);
      }
    // Which of them the driver takes its shard of locally (whole on every
    // rank of their axes); no table when none is.
    if (!*pipeline && !(*mesh)->wholeGradients.empty())
      for (const ProgramTensor &parameter : info->parameters)
        info->gradientWhole.push_back(
            (*mesh)->wholeGradients.contains(parameter.name) ? 1 : 0);
  }

  OpBuilder builder(module.getContext());
  builder.setInsertionPointToStart(module.getBody());
  Location loc = module.getLoc();
  emitc::IncludeOp::create(builder, loc, "tessera/runtime/program.h");
  emitc::IncludeOp::create(builder, loc, conventions->supportHeader);
  if (partitioned)
    emitc::IncludeOp::create(builder, loc, "tessera/runtime/mesh_step.h");

  // Lowers `source` bound by `signature`; returns its C function's name
  // (and, given `writePositions`, its gradients' write positions).
  auto lower = [&](func::FuncOp source, const StepSignature &signature,
                   std::vector<int32_t> *writePositions = nullptr,
                   std::vector<int32_t> *readIntervals = nullptr,
                   DeviceArena *device = nullptr) -> FailureOr<std::string> {
    FailureOr<FunctionArenaPlan> plan =
        planLoweredFunction(source, printArenaPlan);
    if (failed(plan))
      return failure();
    StepBuilder steps(module, source, *plan, *conventions, signature, device);
    if (failed(steps.build()))
      return failure();
    if (writePositions)
      *writePositions = steps.gradientWritePositions();
    if (readIntervals) {
      // A parameter the step never reads still has its four entries.
      *readIntervals = steps.parameterReadIntervals();
      readIntervals->resize(4 * static_cast<size_t>(parameterCount), -1);
    }
    return steps.wrapperName().str();
  };

  std::string forwardBackward = "NULL", pipelineTable = "NULL";
  if (*pipeline) {
    // Every chunk's calls; @forward_backward only describes the program.
    // The chunks read the masters (their prepare casts once a step).
    info->parameterStepDtypes.clear();
    PipelineProgram &program = **pipeline;
    info->flopsPerMicroBatch = 0;
    // One arena per device (DeviceArena), its globals after the includes,
    // where every chunk function's code can name them.
    std::vector<DeviceArena> devices;
    for (int64_t device = 0; device < program.stages; ++device) {
      devices.push_back(DeviceArena::of(device));
      DeviceArena &arena = devices.back();
      arena.bytesGlobal =
          emitArenaGlobals(builder, loc, arena.arena, arena.arenaBytes,
                           arena.stream, 0, conventions->cuda);
    }
    for (auto *stages :
         {&program.prepares, &program.forwards, &program.backwards})
      for (auto [chunk, stage] : llvm::enumerate(*stages)) {
        DeviceArena &device =
            devices[chunk % static_cast<size_t>(program.stages)];
        FailureOr<std::string> call =
            lower(stage.function, stage.signature, nullptr, nullptr, &device);
        if (failed(call))
          return signalPassFailure();
        stage.call = *call;
        stage.flops = modelFlops(stage.function);
        // A prepare runs once a step, not once a micro-batch.
        if (stages != &program.prepares)
          info->flopsPerMicroBatch += stage.flops;
      }
    for (DeviceArena &device : devices)
      device.bytesGlobal.setInitialValueAttr(
          builder.getI64IntegerAttr(device.bytes));
    builder.setInsertionPointToEnd(module.getBody());
    pipelineTable = emitPipelineTables(builder, loc, program);
  } else {
    info->flopsPerMicroBatch = modelFlops(function);
    FailureOr<std::string> call =
        lower(function, wholeStepSignature(parameterCount, bufferCount),
              &info->gradientWritePositions, &info->parameterReadIntervals);
    if (failed(call))
      return signalPassFailure();
    forwardBackward = *call;
  }

  builder.setInsertionPointToEnd(module.getBody());
  emitProgramDefinition(builder, loc, *info, forwardBackward, pipelineTable);

  // The runtime runs the optimizer itself; @forward is for inference.
  for (auto function : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    function.erase();
  // The mesh and the stages are in the program table now; what remains is
  // plain EmitC.
  module->removeAttr("tess.mesh");
  module->removeAttr("tess.pipeline");
}

} // namespace
