//===- CompiledPipelineMemory.cpp - one device of a compiled pipeline -----===//
//
// See CompiledPipelineMemory.h. Each term follows what the driver allocates
// (runtime/train/PipelineParallel.cpp's PipelineStep and PipelineLayout,
// TrainingBackend's flat state), read here from the module the lowering
// turns into those tables, so that the fit decision of a pipelined plan is
// the program's, as StepMemory.h's is for one device.
//
//===----------------------------------------------------------------------===//

#include "tessera/Pipeline/CompiledPipelineMemory.h"

#include "tessera/Analysis/ArenaPlanning.h"
#include "tessera/Pipeline/Schedule.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

using namespace mlir;

namespace tessera::pipeline {

namespace {

FailureOr<int64_t> tensorBytes(Operation *where, Type type) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return where->emitError() << "a pipeline call's tensor of type " << type
                              << " has no static shape";
  FailureOr<int64_t> element = elementBytes(shaped.getElementType());
  if (failed(element))
    return where->emitError() << "a pipeline call's tensor of type " << type
                              << " has an element type the runtime cannot "
                                 "store";
  return shaped.getNumElements() * *element;
}

/// The chunk's three functions.
struct Chunk {
  func::FuncOp prepare, forward, backward;
};

/// The bytes of `function`'s arguments (inputs) or results carrying
/// `role`.
FailureOr<int64_t> roleBytes(func::FuncOp function, StringRef role,
                             bool results) {
  int64_t total = 0;
  unsigned count =
      results ? function.getNumResults() : function.getNumArguments();
  for (unsigned i = 0; i < count; ++i) {
    bool has = results ? static_cast<bool>(function.getResultAttr(i, role))
                       : static_cast<bool>(function.getArgAttr(i, role));
    if (!has)
      continue;
    Type type = results ? function.getResultTypes()[i]
                        : function.getArgumentTypes()[i];
    FailureOr<int64_t> bytes = tensorBytes(function, type);
    if (failed(bytes))
      return failure();
    total += *bytes;
  }
  return total;
}

/// The bytes of one micro-batch's tokens and targets, whole: the chunks'
/// tess.input arguments (the first's tokens, the last's targets), each
/// dim split over a mesh axis (its tess.layout) counted whole.
FailureOr<int64_t> wholeInputBytes(ArrayRef<Chunk> chunks) {
  int64_t total = 0;
  for (const Chunk &chunk : chunks) {
    func::FuncOp forward = chunk.forward;
    auto module = forward->getParentOfType<ModuleOp>();
    tess::MeshAttr mesh = tess::MeshAttr::lookup(module);
    for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i) {
      if (!forward.getArgAttr(i, "tess.input"))
        continue;
      FailureOr<int64_t> bytes =
          tensorBytes(forward, forward.getArgumentTypes()[i]);
      if (failed(bytes))
        return failure();
      if (auto layout =
              forward.getArgAttrOfType<tess::LayoutAttr>(i, "tess.layout"))
        for (StringAttr axis : layout.getDims())
          if (mesh && axis && !axis.getValue().empty())
            *bytes *= mesh.axisSize(axis.getValue()).value_or(1);
      total += *bytes;
    }
  }
  return total;
}

/// Per (chunk, direction 0 forward / 1 backward), the most messages the
/// device holds at once: its order run against each peer's send order,
/// a message taken from a peer only when a task needs one from it
/// (PipelineStep's receive pools).
std::map<std::pair<int64_t, int64_t>, int64_t>
receiveSlots(const std::vector<std::vector<ScheduledTask>> &order,
             int64_t device, int64_t stages, int64_t chunks) {
  auto deviceOf = [&](int64_t chunk) { return chunk % stages; };
  std::vector<std::vector<ScheduledTask>> incoming(order.size());
  for (int64_t peer = 0; peer < static_cast<int64_t>(order.size()); ++peer) {
    if (peer == device)
      continue;
    for (const ScheduledTask &task : order[peer]) {
      int64_t target = task.forward ? task.chunk + 1 : task.chunk - 1;
      if (target >= 0 && target < chunks && deviceOf(target) == device)
        incoming[peer].push_back({task.forward, target, task.microBatch});
    }
  }
  std::vector<size_t> cursor(order.size(), 0);
  std::set<std::tuple<bool, int64_t, int64_t>> held;
  std::map<std::pair<int64_t, int64_t>, int64_t> holding, most;
  for (const ScheduledTask &task : order[device]) {
    int64_t from = task.forward ? task.chunk - 1 : task.chunk + 1;
    if (from < 0 || from >= chunks)
      continue;
    auto peer = static_cast<size_t>(deviceOf(from));
    std::tuple<bool, int64_t, int64_t> key{task.forward, task.chunk,
                                           task.microBatch};
    while (!held.count(key) && cursor[peer] < incoming[peer].size()) {
      const ScheduledTask &message = incoming[peer][cursor[peer]++];
      held.insert({message.forward, message.chunk, message.microBatch});
      std::pair<int64_t, int64_t> pool{message.chunk, message.forward ? 0 : 1};
      most[pool] = std::max(most[pool], ++holding[pool]);
    }
    held.erase(key);
    --holding[{task.chunk, task.forward ? 0 : 1}];
  }
  return most;
}

/// The parameters' whole-step types and the step's gradient element bytes,
/// buffers and tokens, from @forward_backward (one mesh rank's).
struct StepTables {
  llvm::StringMap<int64_t> parameterElements;
  int64_t gradientElementBytes = TrainingStateBytes::kMasterBytesPerElement;
  int64_t bufferBytes = 0;
  /// Some gradient is a pending partial sum over a stage mesh's axes.
  bool partialGradients = false;
};

FailureOr<StepTables> readStep(func::FuncOp step) {
  StepTables tables;
  for (unsigned i = 0, e = step.getNumArguments(); i < e; ++i) {
    Type type = step.getArgumentTypes()[i];
    if (auto name = step.getArgAttrOfType<StringAttr>(i, "tess.parameter")) {
      tables.parameterElements[name.getValue()] =
          cast<ShapedType>(type).getNumElements();
    } else if (step.getArgAttr(i, "tess.buffer")) {
      FailureOr<int64_t> bytes = tensorBytes(step, type);
      if (failed(bytes))
        return failure();
      tables.bufferBytes += *bytes;
    }
  }
  for (unsigned i = 0, e = step.getNumResults(); i < e; ++i) {
    if (!step.getResultAttr(i, "tess.gradient"))
      continue;
    FailureOr<int64_t> element = elementBytes(
        cast<ShapedType>(step.getResultTypes()[i]).getElementType());
    if (succeeded(element))
      tables.gradientElementBytes = *element;
    if (auto layout =
            step.getResultAttrOfType<tess::LayoutAttr>(i, "tess.layout"))
      tables.partialGradients |= !layout.getPartial().empty();
  }
  return tables;
}

} // namespace

FailureOr<std::vector<PipelineDeviceMemory>>
estimatePipelineMemory(ModuleOp module) {
  auto error = [&]() {
    return module.emitError() << "the compiled pipeline's memory: ";
  };
  auto split = module->getAttrOfType<DictionaryAttr>("tess.pipeline");
  auto plan = tess::PlanAttr::lookup(module);
  if (!split || !plan || !plan.isPipelined())
    return error() << "expected a module cut into stages "
                      "(tess.pipeline) with a pipelined #tess.plan";
  auto stagesAttr = split.getAs<IntegerAttr>("stages");
  auto virtualAttr = split.getAs<IntegerAttr>("virtual");
  if (!stagesAttr || !virtualAttr || stagesAttr.getInt() < 1 ||
      virtualAttr.getInt() < 1)
    return error() << "tess.pipeline must be {stages = S, virtual = V}";
  const int64_t stages = stagesAttr.getInt();
  const int64_t chunks = stages * virtualAttr.getInt();
  const int64_t microBatches = plan.getMicrobatches();
  llvm::Expected<Schedule> schedule = parseSchedule(plan.getSchedule());
  if (!schedule)
    return error() << llvm::toString(schedule.takeError());
  llvm::Expected<std::vector<std::vector<ScheduledTask>>> order =
      scheduleTaskOrder(*schedule, stages, microBatches);
  if (!order)
    return error() << llvm::toString(order.takeError());

  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step)
    return error() << "the training step has no @forward_backward";
  FailureOr<StepTables> tables = readStep(step);
  if (failed(tables))
    return failure();
  std::vector<Chunk> chunkFunctions(static_cast<size_t>(chunks));
  for (int64_t c = 0; c < chunks; ++c) {
    Chunk &chunk = chunkFunctions[static_cast<size_t>(c)];
    for (auto [field, kind] :
         {std::pair<func::FuncOp *, StringRef>{&chunk.prepare, "prepare"},
          {&chunk.forward, "forward"},
          {&chunk.backward, "backward"}}) {
      std::string name = llvm::formatv("stage{0}_{1}", c, kind).str();
      *field = module.lookupSymbol<func::FuncOp>(name);
      if (!*field)
        return error() << "no @" << name << " of " << chunks << " chunks";
    }
  }

  // The stage mesh: its data-parallel group shards ZeRO-1's state.
  int64_t zeroGroup = 1;
  if (plan.getZero() == 1)
    if (tess::MeshAttr mesh = plan.getMesh())
      zeroGroup = mesh.axisSize("dp").value_or(1);

  // Who owns each gradient (the device of the first chunk that returns
  // it), who else holds a part, and what each device reads.
  llvm::StringMap<int64_t> owner;
  llvm::StringMap<std::set<int64_t>> partHolders;
  std::vector<std::set<std::string>> held(static_cast<size_t>(stages));
  for (int64_t c = 0; c < chunks; ++c) {
    const Chunk &chunk = chunkFunctions[static_cast<size_t>(c)];
    int64_t device = c % stages;
    for (func::FuncOp function : {chunk.prepare, chunk.forward, chunk.backward}) {
      for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
        if (auto name =
                function.getArgAttrOfType<StringAttr>(i, "tess.parameter"))
          held[device].insert(name.getValue().str());
      for (unsigned i = 0, e = function.getNumResults(); i < e; ++i) {
        auto name = function.getResultAttrOfType<StringAttr>(i, "tess.gradient");
        if (!name)
          continue;
        held[device].insert(name.getValue().str());
        auto [entry, first] = owner.try_emplace(name.getValue(), device);
        if (!first && entry->second != device)
          partHolders[name.getValue()].insert(device);
      }
    }
  }
  bool gradientParts = llvm::any_of(
      partHolders, [](const auto &entry) { return !entry.second.empty(); });
  // runtime/train/TrainMain.cpp: a pipeline sums its micro-batches, the
  // parts of a gradient and a stage mesh's replicas in f32 accumulators;
  // under ZeRO-1 (StageZero.cpp) even one micro-batch's.
  bool accumulating = microBatches > 1 || gradientParts ||
                      tables->partialGradients || zeroGroup > 1;

  FailureOr<int64_t> microBatchInputs = wholeInputBytes(chunkFunctions);
  if (failed(microBatchInputs))
    return failure();

  std::vector<PipelineDeviceMemory> devices(static_cast<size_t>(stages));
  for (int64_t d = 0; d < stages; ++d) {
    PipelineDeviceMemory &memory = devices[static_cast<size_t>(d)];
    memory.device = d;
    std::map<std::pair<int64_t, int64_t>, int64_t> pools =
        receiveSlots(*order, d, stages, chunks);
    std::map<int64_t, int64_t> savedOfChunk;
    for (int64_t c = d; c < chunks; c += stages) {
      const Chunk &chunk = chunkFunctions[static_cast<size_t>(c)];
      for (func::FuncOp function :
           {chunk.prepare, chunk.forward, chunk.backward}) {
        FailureOr<FunctionArenaPlan> arena = planFunctionArena(function);
        if (failed(arena))
          return failure();
        // One arena a device, the largest of its functions' (the
        // lowering's DeviceArena).
        memory.arenaBytes =
            std::max(memory.arenaBytes, arena->layout.totalBytes);
        memory.gemmScratchBytes =
            std::max(memory.gemmScratchBytes, paddedGemmScratchBytes(function));
      }
      FailureOr<int64_t> residents =
          roleBytes(chunk.prepare, "tess.resident", /*results=*/true);
      FailureOr<int64_t> sent =
          roleBytes(chunk.forward, "tess.activation", /*results=*/true);
      FailureOr<int64_t> sentBack = roleBytes(
          chunk.backward, "tess.activation_gradient", /*results=*/true);
      FailureOr<int64_t> saved =
          roleBytes(chunk.forward, "tess.saved", /*results=*/true);
      FailureOr<int64_t> received =
          roleBytes(chunk.forward, "tess.activation", /*results=*/false);
      FailureOr<int64_t> receivedBack = roleBytes(
          chunk.backward, "tess.activation_gradient", /*results=*/false);
      for (FailureOr<int64_t> *bytes :
           {&residents, &sent, &sentBack, &saved, &received, &receivedBack})
        if (failed(*bytes))
          return failure();
      memory.residentBytes += *residents;
      savedOfChunk[c] = *saved;
      memory.messageBytes += *sent + *sentBack +
                             pools[{c, 0}] * *received +
                             pools[{c, 1}] * *receivedBack;
    }
    // The stash: one per saved layout among the device's chunks (the
    // driver's StashPool), as deep as its chunks' peak together.
    std::vector<std::pair<SmallVector<Type>, std::vector<int64_t>>>
        chunksOfLayout;
    for (auto [c, bytes] : savedOfChunk) {
      func::FuncOp forward = chunkFunctions[static_cast<size_t>(c)].forward;
      SmallVector<Type> layout;
      for (unsigned i = 0, e = forward.getNumResults(); i < e; ++i)
        if (forward.getResultAttr(i, "tess.saved"))
          layout.push_back(forward.getResultTypes()[i]);
      auto same = llvm::find_if(chunksOfLayout, [&](const auto &entry) {
        return entry.first == layout;
      });
      if (same == chunksOfLayout.end())
        chunksOfLayout.push_back({layout, {c}});
      else
        same->second.push_back(c);
    }
    for (const auto &[layout, members] : chunksOfLayout) {
      int64_t slots = stashSlots((*order)[d], members);
      memory.savedSlots = std::max(memory.savedSlots, slots);
      memory.savedBytes += slots * savedOfChunk[members.front()];
    }
    // Every rank keeps every micro-batch's tokens and targets, and a
    // working pair (the driver's reserveMicroBatches), whole.
    memory.inputBytes = (microBatches + 1) * *microBatchInputs;
    // The state of what the device holds, in ParameterLayout's slices.
    int64_t heldElements = 0, ownedElements = 0, largestOwnedPart = 0;
    for (const std::string &name : held[d]) {
      auto elements = tables->parameterElements.find(name);
      if (elements == tables->parameterElements.end())
        return error() << "parameter '" << name
                       << "' of a chunk is not @forward_backward's";
      heldElements += TrainingStateBytes::sliceElements(elements->second);
      if (owner.lookup(name) == d)
        ownedElements += TrainingStateBytes::sliceElements(elements->second);
      auto holders = partHolders.find(name);
      if (owner.lookup(name) == d && holders != partHolders.end() &&
          !holders->second.empty())
        largestOwnedPart = std::max(largestOwnedPart, elements->second);
    }
    TrainingStateBytes &state = memory.state;
    state.trainableElements = heldElements;
    // ZeRO-1 keeps masters and moments for the rank's shard of what the
    // device updates (its owned parameters; StageZero.cpp buckets those
    // it only reads apart), without it for everything it holds.
    int64_t stateElements = zeroGroup > 1
                                ? (ownedElements + zeroGroup - 1) / zeroGroup
                                : heldElements;
    state.masterWeights = TrainingStateBytes::kMasterBytesPerElement *
                          stateElements;
    state.optimizerState = TrainingStateBytes::kOptimizerBytesPerElement *
                           stateElements;
    if (zeroGroup > 1)
      state.computeCopies =
          TrainingStateBytes::kMasterBytesPerElement * heldElements;
    state.gradients = tables->gradientElementBytes * heldElements;
    if (accumulating)
      state.accumulators =
          TrainingStateBytes::kAccumulatorBytesPerElement * heldElements;
    state.buffers = tables->bufferBytes;
    memory.partBytes =
        TrainingStateBytes::kAccumulatorBytesPerElement * largestOwnedPart;
  }
  return devices;
}

int64_t largestDeviceBytes(const std::vector<PipelineDeviceMemory> &devices) {
  int64_t largest = 0;
  for (const PipelineDeviceMemory &device : devices)
    largest = std::max(largest, device.totalBytes());
  return largest;
}

void printPipelineMemory(const std::vector<PipelineDeviceMemory> &devices,
                         llvm::raw_ostream &os, double deviceBytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  os << "Device memory of the compiled pipeline (each device's chunks as "
        "lowered";
  if (deviceBytes > 0)
    os << llvm::formatv(", of {0:F3} MiB", deviceBytes / kMiB);
  os << "):\n";
  for (const PipelineDeviceMemory &device : devices)
    os << llvm::formatv(
        "  device {0}: {1:F3} MiB (state {2:F3}, arenas {3:F3}, stash "
        "{4:F3} in {5} slots, messages {6:F3}, residents {7:F3})\n",
        device.device, device.totalBytes() / kMiB,
        device.state.total() / kMiB, device.arenaBytes / kMiB,
        device.savedBytes / kMiB, device.savedSlots,
        device.messageBytes / kMiB, device.residentBytes / kMiB);
}

void printStageModelMemory(const PipelinePlan &plan,
                           const std::vector<PipelineDeviceMemory> &devices,
                           llvm::raw_ostream &os) {
  constexpr double kMiB = 1024.0 * 1024.0;
  os << "Stage model per device (the search's prediction of the compiled "
        "devices above):\n";
  for (auto [position, stage] : llvm::enumerate(plan.stages)) {
    const StageMemory &memory = stage.cost.memory;
    double predicted = memory.total(stage.inFlight);
    os << llvm::formatv(
        "  device {0}: {1:F3} MiB (resident {2:F3}, working {3:F3}, stash "
        "{4:F3} x {5:F1}, messages {6:F3}, inputs {7:F3})",
        position, predicted / kMiB, memory.resident() / kMiB,
        memory.working / kMiB, memory.activationsPerMicroBatch / kMiB,
        stage.inFlight, memory.messages / kMiB,
        (memory.inputs + memory.gradientParts) / kMiB);
    if (position < devices.size() && predicted > 0) {
      double off =
          100.0 * (devices[position].totalBytes() - predicted) / predicted;
      os << llvm::formatv("; compiled {0}{1:F2} %", off < 0 ? "" : "+", off);
    }
    os << "\n";
  }
}

} // namespace tessera::pipeline
