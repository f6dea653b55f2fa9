//===- PipelineExecutor.cpp - one rank of a pipelined training step -------===//

#include "tessera/Execution/PipelineExecutor.h"

#include "tessera/Execution/Interpreter.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Sharding/PlanAnnotation.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <deque>
#include <set>
#include <tuple>

using namespace mlir;

namespace tessera::execution {
namespace {

llvm::Error pipelineError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "pipeline: " + message);
}

llvm::Error commError(llvm::StringRef what) {
  return pipelineError(what + " failed: " + tessera_comm_last_error());
}

/// A message between stages: the activations entering `chunk`'s forward
/// or the activation gradients entering its backward, of one micro-batch.
using MessageKey = std::tuple<bool, int64_t, int64_t>;

struct ExpectedMessage {
  MessageKey key;
  SmallVector<RankedTensorType> types;
};

SmallVector<RankedTensorType> resultTypesWith(func::FuncOp function,
                                              llvm::StringRef role) {
  SmallVector<RankedTensorType> types;
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    if (function.getResultAttr(i, role))
      types.push_back(llvm::cast<RankedTensorType>(function.getResultTypes()[i]));
  return types;
}

class PipelineRank {
public:
  PipelineRank(const PipelineRankOptions &options,
               const PipelineParameters &parameters,
               const PipelineInputs &inputs)
      : options(options), parameters(parameters), inputs(inputs) {}

  llvm::Error prepare(ModuleOp module);
  /// Runs this device's chunks' prepare functions: their resident values,
  /// from this step's parameters, for every task.
  llvm::Error computeResidents();
  llvm::Error runTask(const pipeline::ScheduledTask &task);
  llvm::Expected<PipelineRankResult> finish();

  std::vector<std::vector<pipeline::ScheduledTask>> order;

private:
  int64_t deviceOf(int64_t chunk) const { return chunk % devices; }
  llvm::Expected<std::vector<HostTensorBuffer>>
  arguments(func::FuncOp function, int64_t microBatch,
            std::vector<HostTensorBuffer> fromPipeline);
  llvm::Error deliver(MessageKey key, std::vector<HostTensorBuffer> tensors);
  llvm::Expected<std::vector<HostTensorBuffer>> obtain(MessageKey key);
  /// The global gradient norm from this device's gradients.
  llvm::Expected<double>
  agreedGradientNorm(std::map<std::string, HostTensorBuffer> &gradients);
  /// options.optimizer's AdamW step on this device's parameters, then the
  /// updated parameters to the other devices that read them.
  llvm::Error updateParameters(PipelineRankResult &result);

  const PipelineRankOptions &options;
  const PipelineParameters &parameters;
  const PipelineInputs &inputs;
  int64_t devices = 1, chunks = 1, device = 0;
  double lossScale = 1;
  std::vector<func::FuncOp> prepares, forwards, backwards;
  /// Per chunk of this device, its prepare's results.
  std::map<int64_t, std::vector<HostTensorBuffer>> residents;
  Interpreter interpreter;
  std::map<std::string, HostTensorBuffer> parameterCache;
  /// Per peer, the messages it sends this device, in its order.
  std::vector<std::deque<ExpectedMessage>> incoming;
  std::map<MessageKey, std::vector<HostTensorBuffer>> arrived;
  std::map<std::pair<int64_t, int64_t>, std::vector<HostTensorBuffer>> saved;
  double lossSum = 0;
  int64_t peakInFlightChunks = 0;
  std::map<std::string, std::vector<float>> gradientSums;
  std::map<std::string, std::vector<int64_t>> gradientShapes;
  ModuleOp module;
  /// The devices whose stages return each parameter's gradient (two for a
  /// tied embedding, each a part of it; the first owns the sum), the
  /// devices whose stages read each parameter, and its type there.
  std::map<std::string, std::set<int64_t>> gradientDevices;
  std::map<std::string, std::set<int64_t>> readingDevices;
  std::map<std::string, RankedTensorType> parameterTypes;
};

llvm::Error PipelineRank::prepare(ModuleOp module) {
  auto split = module->getAttrOfType<DictionaryAttr>("tess.pipeline");
  if (!split)
    return pipelineError("the module has no pipeline stages (run "
                         "tess-split-pipeline-stages first)");
  devices = llvm::cast<IntegerAttr>(split.get("stages")).getInt();
  int64_t virtualStages = llvm::cast<IntegerAttr>(split.get("virtual")).getInt();
  if (!options.pipelineComm ||
      tessera_comm_size(options.pipelineComm) != devices)
    return pipelineError("the module is split into " + llvm::Twine(devices) +
                         " stages but the pipeline group has " +
                         llvm::Twine(options.pipelineComm
                                         ? tessera_comm_size(options.pipelineComm)
                                         : 0) +
                         " ranks");
  int64_t scheduleChunks =
      options.schedule.kind == pipeline::ScheduleKind::Interleaved
          ? options.schedule.virtualStages
          : 1;
  if (scheduleChunks != virtualStages)
    return pipelineError("schedule " + options.schedule.name() + " runs " +
                         llvm::Twine(scheduleChunks) +
                         " chunks per device, the module is split into " +
                         llvm::Twine(virtualStages));
  chunks = devices * virtualStages;
  device = tessera_comm_rank(options.pipelineComm);
  this->module = module;
  if (options.meshRank)
    interpreter.setMeshRank(*options.meshRank);
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    for (auto [functions, kind] :
         {std::pair(&prepares, "prepare"), std::pair(&forwards, "forward"),
          std::pair(&backwards, "backward")}) {
      std::string name = "stage" + std::to_string(chunk) + "_" + kind;
      auto function = module.lookupSymbol<func::FuncOp>(name);
      if (!function)
        return pipelineError("the module has no @" + name);
      functions->push_back(function);
      for (unsigned i = 0; i < function.getNumArguments(); ++i)
        if (auto parameter =
                function.getArgAttrOfType<StringAttr>(i, "tess.parameter")) {
          readingDevices[parameter.str()].insert(deviceOf(chunk));
          parameterTypes[parameter.str()] =
              llvm::cast<RankedTensorType>(function.getArgumentTypes()[i]);
        }
      for (unsigned i = 0; i < function.getNumResults(); ++i)
        if (auto gradient =
                function.getResultAttrOfType<StringAttr>(i, "tess.gradient"))
          gradientDevices[gradient.str()].insert(deviceOf(chunk));
    }
  auto taskOrder = pipeline::scheduleTaskOrder(options.schedule, devices,
                                               options.microBatches);
  if (!taskOrder)
    return taskOrder.takeError();
  order = std::move(*taskOrder);
  int64_t replicas = options.dataParallelComm
                         ? tessera_comm_size(options.dataParallelComm)
                         : 1;
  lossScale = 1.0 / static_cast<double>(options.microBatches * replicas);

  // What each peer sends here, in its task order.
  incoming.resize(devices);
  for (int64_t peer = 0; peer < devices; ++peer) {
    if (peer == device)
      continue;
    for (const pipeline::ScheduledTask &task : order[peer]) {
      int64_t target = task.forward ? task.chunk + 1 : task.chunk - 1;
      if (target < 0 || target >= chunks || deviceOf(target) != device)
        continue;
      func::FuncOp sender =
          task.forward ? forwards[task.chunk] : backwards[task.chunk];
      incoming[peer].push_back(
          {{task.forward, target, task.microBatch},
           resultTypesWith(sender, task.forward ? "tess.activation"
                                                : "tess.activation_gradient")});
    }
  }
  return llvm::Error::success();
}

llvm::Error PipelineRank::deliver(MessageKey key,
                                  std::vector<HostTensorBuffer> tensors) {
  int64_t target = deviceOf(std::get<1>(key));
  if (target == device) {
    arrived[key] = std::move(tensors);
    return llvm::Error::success();
  }
  for (HostTensorBuffer &tensor : tensors) {
    tessera_tensor descriptor = tensor.descriptor();
    if (tessera_comm_send(options.pipelineComm, &descriptor,
                          static_cast<int32_t>(target), nullptr) != 0)
      return commError("send to rank " + std::to_string(target));
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<HostTensorBuffer>>
PipelineRank::obtain(MessageKey key) {
  bool forward = std::get<0>(key);
  int64_t chunk = std::get<1>(key);
  int64_t peer = deviceOf(forward ? chunk - 1 : chunk + 1);
  while (!arrived.count(key)) {
    if (incoming[peer].empty())
      return pipelineError("rank " + llvm::Twine(device) +
                           " waits for a message that rank " +
                           llvm::Twine(peer) + " never sends");
    ExpectedMessage next = std::move(incoming[peer].front());
    incoming[peer].pop_front();
    std::vector<HostTensorBuffer> tensors;
    for (RankedTensorType type : next.types) {
      auto tensor = HostTensorBuffer::zeros(type);
      if (!tensor)
        return tensor.takeError();
      tessera_tensor descriptor = tensor->descriptor();
      if (tessera_comm_recv(options.pipelineComm, &descriptor,
                            static_cast<int32_t>(peer), nullptr) != 0)
        return commError("recv from rank " + std::to_string(peer));
      tensors.push_back(std::move(*tensor));
    }
    arrived[next.key] = std::move(tensors);
  }
  std::vector<HostTensorBuffer> tensors = std::move(arrived[key]);
  arrived.erase(key);
  return tensors;
}

llvm::Expected<std::vector<HostTensorBuffer>>
PipelineRank::arguments(func::FuncOp function, int64_t microBatch,
                        std::vector<HostTensorBuffer> fromPipeline) {
  std::vector<HostTensorBuffer> values;
  size_t nextFromPipeline = 0;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    auto nameOf = [&](llvm::StringRef role) {
      auto name = function.getArgAttrOfType<StringAttr>(i, role);
      return name ? name.getValue() : llvm::StringRef();
    };
    llvm::StringRef parameter = nameOf("tess.parameter");
    if (parameter.empty())
      parameter = nameOf("tess.buffer");
    llvm::StringRef input = nameOf("tess.input");
    if (!parameter.empty()) {
      auto cached = parameterCache.find(parameter.str());
      if (cached == parameterCache.end()) {
        auto value = parameters(parameter);
        if (!value)
          return value.takeError();
        cached = parameterCache.emplace(parameter.str(), std::move(*value)).first;
      }
      values.push_back(cached->second);
    } else if (input == "loss_scale") {
      values.push_back(HostTensorBuffer::fromFloats(
          {}, {static_cast<float>(lossScale)}));
    } else if (!input.empty()) {
      auto value = inputs(input, microBatch);
      if (!value)
        return value.takeError();
      values.push_back(std::move(*value));
    } else if (nextFromPipeline < fromPipeline.size()) {
      values.push_back(std::move(fromPipeline[nextFromPipeline++]));
    } else {
      return pipelineError("@" + function.getSymName() + " argument " +
                           llvm::Twine(i) + " has no value");
    }
  }
  return values;
}

llvm::Error PipelineRank::computeResidents() {
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    if (deviceOf(chunk) != device)
      continue;
    auto values = arguments(prepares[chunk], 0, {});
    if (!values)
      return values.takeError();
    auto results = interpreter.run(prepares[chunk], std::move(*values));
    if (!results)
      return results.takeError();
    residents[chunk] = std::move(*results);
  }
  return llvm::Error::success();
}

llvm::Error PipelineRank::runTask(const pipeline::ScheduledTask &task) {
  int64_t chunk = task.chunk, microBatch = task.microBatch;
  func::FuncOp function = task.forward ? forwards[chunk] : backwards[chunk];
  // Both: the chunk's resident values; then forward: the previous stage's
  // activations; backward: this stage's saved values, then the next
  // stage's activation gradients.
  std::vector<HostTensorBuffer> fromPipeline = residents[chunk];
  if (!task.forward) {
    auto found = saved.find({chunk, microBatch});
    if (found != saved.end()) {
      for (HostTensorBuffer &tensor : found->second)
        fromPipeline.push_back(std::move(tensor));
      saved.erase(found);
    }
  }
  bool receives = task.forward ? chunk > 0 : chunk + 1 < chunks;
  if (receives) {
    auto received = obtain({task.forward, chunk, microBatch});
    if (!received)
      return received.takeError();
    for (HostTensorBuffer &tensor : *received)
      fromPipeline.push_back(std::move(tensor));
  }
  auto values = arguments(function, microBatch, std::move(fromPipeline));
  if (!values)
    return values.takeError();
  auto results = interpreter.run(function, std::move(*values));
  if (!results)
    return results.takeError();

  std::vector<HostTensorBuffer> outgoing, kept;
  for (unsigned i = 0; i < function.getNumResults(); ++i) {
    HostTensorBuffer &result = (*results)[i];
    if (function.getResultAttr(i, "tess.activation") ||
        function.getResultAttr(i, "tess.activation_gradient")) {
      outgoing.push_back(std::move(result));
    } else if (function.getResultAttr(i, "tess.saved")) {
      kept.push_back(std::move(result));
    } else if (function.getResultAttr(i, "tess.loss")) {
      lossSum += result.getDouble(0);
    } else if (auto name =
                   function.getResultAttrOfType<StringAttr>(i, "tess.gradient")) {
      std::vector<float> values = result.toFloats();
      std::vector<float> &sum = gradientSums[name.str()];
      if (sum.empty()) {
        sum.assign(values.size(), 0.0f);
        gradientShapes[name.str()].assign(result.shape().begin(),
                                          result.shape().end());
      }
      for (size_t e = 0; e < values.size(); ++e)
        sum[e] += values[e];
    }
  }
  if (task.forward) {
    saved[{chunk, microBatch}] = std::move(kept);
    peakInFlightChunks =
        std::max(peakInFlightChunks, static_cast<int64_t>(saved.size()));
  }
  bool sends = task.forward ? chunk + 1 < chunks : chunk > 0;
  if (sends)
    return deliver({task.forward, task.forward ? chunk + 1 : chunk - 1,
                    microBatch},
                   std::move(outgoing));
  return llvm::Error::success();
}

llvm::Expected<double> PipelineRank::agreedGradientNorm(
    std::map<std::string, HostTensorBuffer> &gradients) {
  // The mesh axes that split each gradient of a partitioned step: its
  // blocks' squares add up over those axes (the others hold replicas).
  std::map<std::string, std::vector<size_t>> splitting;
  auto meshAttribute =
      module->getAttrOfType<tess::MeshAttr>(sharding::kMeshAttrName);
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (options.meshRank && meshAttribute && step) {
    cost::DeviceMesh mesh = sharding::deviceMesh(meshAttribute);
    for (unsigned i = 0; i < step.getNumResults(); ++i) {
      auto name = step.getResultAttrOfType<StringAttr>(i, "tess.gradient");
      if (!name)
        continue;
      auto layout = sharding::readResultLayout(step, i, mesh);
      if (!layout)
        return layout.takeError();
      for (int axis : layout->dimAxes) {
        if (axis == sharding::kUnsplit)
          continue;
        const std::vector<std::string> &names = options.meshRank->axisNames;
        auto found = llvm::find(names, mesh.axes[axis].name);
        if (found == names.end())
          return pipelineError("the gradient of " + name.getValue() +
                               " is split over mesh axis '" +
                               mesh.axes[axis].name +
                               "', which the mesh rank does not have");
        splitting[name.str()].push_back(found - names.begin());
      }
    }
  }
  // Per set of splitting axes (indices of the mesh rank's, the same on
  // every rank, so the all-reduces come in one order), the squares of this
  // device's blocks.
  std::map<std::vector<size_t>, double> squares;
  for (auto &[name, gradient] : gradients)
    if (tessera_cpu_sum_squares(gradient.constDescriptor(),
                                &squares[splitting[name]]) != 0)
      return pipelineError("the squares of the gradient of " + name + ": " +
                           tessera_cpu_last_error());
  double sum = 0;
  for (const auto &[axes, part] : squares) {
    HostTensorBuffer value = HostTensorBuffer::zeros(TESSERA_F64, {});
    *static_cast<double *>(value.data()) = part;
    for (size_t axis : axes) {
      tessera_tensor descriptor = value.descriptor();
      if (tessera_comm_all_reduce(options.meshRank->comms[axis], &descriptor,
                                  TESSERA_REDUCE_SUM, nullptr) != 0)
        return commError("gradient norm all-reduce over the mesh");
    }
    sum += value.getDouble(0);
  }
  // Each gradient lives on one device of the pipeline; after the
  // data-parallel all-reduce every replica holds the same sums.
  HostTensorBuffer total = HostTensorBuffer::zeros(TESSERA_F64, {});
  *static_cast<double *>(total.data()) = sum;
  tessera_tensor descriptor = total.descriptor();
  if (tessera_comm_all_reduce(options.pipelineComm, &descriptor,
                              TESSERA_REDUCE_SUM, nullptr) != 0)
    return commError("gradient norm all-reduce");
  return std::sqrt(total.getDouble(0));
}

llvm::Error PipelineRank::updateParameters(PipelineRankResult &result) {
  const PipelineOptimizerStep &step = *options.optimizer;
  auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!optimizer)
    return pipelineError("the module has no @optimizer_step (build the step "
                         "with tess-build-training)");
  // tess-build-training's AdamW hyperparameters, by parameter.
  std::map<std::string, tess::AdamWOp> updates;
  optimizer.walk([&](tess::AdamWOp update) {
    if (auto argument = llvm::dyn_cast<BlockArgument>(update.getParam()))
      if (auto name = optimizer.getArgAttrOfType<StringAttr>(
              argument.getArgNumber(), "tess.parameter"))
        updates[name.str()] = update;
  });
  // Clipping folds into AdamW's gradient scale, as the training driver's;
  // the micro-batch mean is already in the gradients.
  double scale = 1;
  if (step.gradientClip > 0 && result.gradientNorm > step.gradientClip)
    scale = step.gradientClip / result.gradientNorm;
  auto moment = [&](const std::map<std::string, HostTensorBuffer> *moments,
                    const std::string &name,
                    llvm::ArrayRef<int64_t> shape,
                    llvm::StringRef which) -> llvm::Expected<HostTensorBuffer> {
    if (!moments)
      return HostTensorBuffer::zeros(TESSERA_F32, shape);
    auto found = moments->find(name);
    if (found == moments->end())
      return pipelineError("no " + which + " moment of " + name);
    return found->second;
  };
  for (auto &[name, gradient] : result.gradients) {
    auto update = updates.find(name);
    if (update == updates.end())
      return pipelineError("@optimizer_step has no tess.adamw for " + name);
    auto parameter = parameters(name);
    if (!parameter)
      return parameter.takeError();
    auto first = moment(step.firstMoments, name, gradient.shape(), "first");
    if (!first)
      return first.takeError();
    auto second = moment(step.secondMoments, name, gradient.shape(), "second");
    if (!second)
      return second.takeError();
    tessera_tensor updated = parameter->descriptor(),
                   m = first->descriptor(), v = second->descriptor();
    tess::AdamWOp hyper = update->second;
    if (tessera_cpu_adamw(&updated, gradient.constDescriptor(), &m, &v,
                          step.step, step.learningRate,
                          hyper.getBeta1().convertToDouble(),
                          hyper.getBeta2().convertToDouble(),
                          hyper.getEpsilon().convertToDouble(),
                          hyper.getWeightDecay().convertToDouble(),
                          scale) != 0)
      return pipelineError("AdamW of " + name + ": " +
                           tessera_cpu_last_error());
    result.parameters[name] = std::move(*parameter);
    result.firstMoments[name] = std::move(*first);
    result.secondMoments[name] = std::move(*second);
  }
  // The other readers of a parameter (a tied embedding's head) get its
  // update from the device that made it.
  for (const auto &[name, holders] : gradientDevices) {
    int64_t owner = *holders.begin();
    for (int64_t reader : readingDevices[name]) {
      if (reader == owner || (device != owner && device != reader))
        continue;
      if (device == owner) {
        tessera_tensor descriptor = result.parameters.at(name).descriptor();
        if (tessera_comm_send(options.pipelineComm, &descriptor,
                              static_cast<int32_t>(reader), nullptr) != 0)
          return commError("send of the updated " + name + " to rank " +
                           std::to_string(reader));
        continue;
      }
      auto received = HostTensorBuffer::zeros(parameterTypes.at(name));
      if (!received)
        return received.takeError();
      tessera_tensor descriptor = received->descriptor();
      if (tessera_comm_recv(options.pipelineComm, &descriptor,
                            static_cast<int32_t>(owner), nullptr) != 0)
        return commError("recv of the updated " + name + " from rank " +
                         std::to_string(owner));
      result.parameters[name] = std::move(*received);
    }
  }
  return llvm::Error::success();
}

llvm::Expected<PipelineRankResult> PipelineRank::finish() {
  PipelineRankResult result;
  result.peakInFlightChunks = peakInFlightChunks;
  // The loss lives on the last stage's device: the others add zero.
  HostTensorBuffer loss =
      HostTensorBuffer::fromFloats({}, {static_cast<float>(lossSum * lossScale)});
  for (tessera_comm *comm : {options.pipelineComm, options.dataParallelComm}) {
    if (!comm)
      continue;
    tessera_tensor descriptor = loss.descriptor();
    if (tessera_comm_all_reduce(comm, &descriptor, TESSERA_REDUCE_SUM,
                                nullptr) != 0)
      return commError("loss all-reduce");
  }
  result.loss = loss.getDouble(0);
  // A gradient returned in parts by several devices' stages (a tied
  // embedding's) is summed once per step on its owner, the first of them;
  // every rank goes through the names in the same order.
  for (const auto &[name, holders] : gradientDevices) {
    int64_t owner = *holders.begin();
    if (holders.size() < 2 || !holders.count(device))
      continue;
    std::vector<float> &sum = gradientSums[name];
    HostTensorBuffer part = HostTensorBuffer::fromFloats(gradientShapes[name], sum);
    tessera_tensor descriptor = part.descriptor();
    if (device != owner) {
      if (tessera_comm_send(options.pipelineComm, &descriptor,
                            static_cast<int32_t>(owner), nullptr) != 0)
        return commError("send of the part of " + name + "'s gradient to rank " +
                         std::to_string(owner));
      gradientSums.erase(name);
      continue;
    }
    for (int64_t holder : holders) {
      if (holder == owner)
        continue;
      if (tessera_comm_recv(options.pipelineComm, &descriptor,
                            static_cast<int32_t>(holder), nullptr) != 0)
        return commError("recv of the part of " + name + "'s gradient from rank " +
                         std::to_string(holder));
      std::vector<float> received = part.toFloats();
      for (size_t e = 0; e < sum.size(); ++e)
        sum[e] += received[e];
    }
  }
  for (auto &[name, sum] : gradientSums) {
    HostTensorBuffer gradient =
        HostTensorBuffer::fromFloats(gradientShapes[name], sum);
    if (options.dataParallelComm) {
      tessera_tensor descriptor = gradient.descriptor();
      if (tessera_comm_all_reduce(options.dataParallelComm, &descriptor,
                                  TESSERA_REDUCE_SUM, nullptr) != 0)
        return commError("gradient all-reduce of " + name);
    }
    result.gradients[name] = std::move(gradient);
  }
  auto norm = agreedGradientNorm(result.gradients);
  if (!norm)
    return norm.takeError();
  result.gradientNorm = *norm;
  if (options.optimizer)
    if (llvm::Error error = updateParameters(result))
      return std::move(error);
  return result;
}

} // namespace

llvm::Expected<PipelineRankResult>
runPipelineRank(ModuleOp module, const PipelineRankOptions &options,
                const PipelineParameters &parameters,
                const PipelineInputs &inputs) {
  PipelineRank rank(options, parameters, inputs);
  if (llvm::Error error = rank.prepare(module))
    return std::move(error);
  if (llvm::Error error = rank.computeResidents())
    return std::move(error);
  int64_t device = tessera_comm_rank(options.pipelineComm);
  for (const pipeline::ScheduledTask &task : rank.order[device])
    if (llvm::Error error = rank.runTask(task))
      return std::move(error);
  return rank.finish();
}

} // namespace tessera::execution
