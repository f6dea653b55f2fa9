//===- PipelineParallel.cpp - Stages, stash and messages of a pipeline ----===//

#include "PipelineParallel.h"

#include "TrainError.h"

#include "tessera/runtime/comm.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace tessera::train {
namespace {

[[noreturn]] void pipelineError(const std::string &message) {
  fail("malformed program (a compiler bug): pipeline: " + message);
}

std::string chunkName(int32_t chunk, bool forward) {
  return "chunk " + std::to_string(chunk) + (forward ? " forward" : " backward");
}

std::string prepareName(int32_t chunk) {
  return "chunk " + std::to_string(chunk) + " prepare";
}

std::string describeStageTensor(const tessera_stage_tensor &tensor) {
  std::vector<int64_t> shape(tensor.shape, tensor.shape + tensor.rank);
  return "dtype " + std::to_string(tensor.dtype) + " " + shapeText(shape);
}

bool sameTensor(const tessera_stage_tensor &a, const tessera_stage_tensor &b) {
  if (a.dtype != b.dtype || a.rank != b.rank)
    return false;
  for (int32_t d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d])
      return false;
  return true;
}

/// The tensors of `list` (count `count`) with role `role`, in order.
std::vector<tessera_stage_tensor> withRole(const tessera_stage_tensor *list,
                                           int32_t count, int32_t role) {
  std::vector<tessera_stage_tensor> tensors;
  for (int32_t i = 0; i < count; ++i)
    if (list[i].role == role)
      tensors.push_back(list[i]);
  return tensors;
}

/// Checks that the `count` tensors have the roles of `order`, each role's
/// tensors before the next role's.
void checkRoleOrder(const tessera_stage_tensor *list, int32_t count,
                    std::initializer_list<int32_t> order,
                    const std::string &what) {
  const int32_t *next = order.begin();
  for (int32_t i = 0; i < count; ++i) {
    int32_t role = list[i].role;
    while (next != order.end() && *next != role)
      ++next;
    if (next == order.end())
      pipelineError(what + " " + std::to_string(i) + " has role " +
                    std::to_string(role) + " out of program.h's order");
  }
}

void checkTensorList(const tessera_stage_tensor *list, int32_t count,
                     const std::string &what) {
  if (count < 0 || (count > 0 && !list))
    pipelineError("bad " + what + " list");
  for (int32_t i = 0; i < count; ++i) {
    const tessera_stage_tensor &tensor = list[i];
    if (tensor.role < TESSERA_STAGE_ACTIVATION ||
        tensor.role > TESSERA_STAGE_RESIDENT)
      pipelineError(what + " " + std::to_string(i) + " has unknown role " +
                    std::to_string(tensor.role));
    if (tensor.rank < 0 || tensor.rank > TESSERA_MAX_RANK)
      pipelineError(what + " " + std::to_string(i) + " has rank " +
                    std::to_string(tensor.rank));
    for (int32_t d = 0; d < tensor.rank; ++d)
      if (tensor.shape[d] < 0)
        pipelineError(what + " " + std::to_string(i) +
                      " has a negative dimension");
    (void)dtypeSize(tensor.dtype);
  }
}

void checkParameterList(const int32_t *list, int32_t count,
                        int32_t parameterCount, const std::string &what) {
  if (count < 0 || (count > 0 && !list))
    pipelineError("bad " + what + " list");
  for (int32_t i = 0; i < count; ++i)
    if (list[i] < 0 || list[i] >= parameterCount)
      pipelineError(what + " names parameter " + std::to_string(list[i]) +
                    " of " + std::to_string(parameterCount));
}

enum class Call { Prepare, Forward, Backward };

void checkFunction(const tessera_stage_function &function, int32_t chunk,
                   Call kind, int32_t parameterCount) {
  std::string name = kind == Call::Prepare
                         ? prepareName(chunk)
                         : chunkName(chunk, kind == Call::Forward);
  if (!function.call)
    pipelineError(name + " has no function");
  checkTensorList(function.inputs, function.input_count, name + " input");
  checkTensorList(function.outputs, function.output_count, name + " output");
  switch (kind) {
  case Call::Prepare:
    checkRoleOrder(function.inputs, function.input_count, {}, name + " input");
    checkRoleOrder(function.outputs, function.output_count,
                   {TESSERA_STAGE_RESIDENT}, name + " output");
    if (function.returns_loss)
      pipelineError(name + " returns the loss");
    break;
  case Call::Forward:
    checkRoleOrder(function.inputs, function.input_count,
                   {TESSERA_STAGE_RESIDENT, TESSERA_STAGE_ACTIVATION},
                   name + " input");
    checkRoleOrder(function.outputs, function.output_count,
                   {TESSERA_STAGE_ACTIVATION, TESSERA_STAGE_SAVED},
                   name + " output");
    break;
  case Call::Backward:
    checkRoleOrder(function.inputs, function.input_count,
                   {TESSERA_STAGE_RESIDENT, TESSERA_STAGE_SAVED,
                    TESSERA_STAGE_ACTIVATION_GRADIENT},
                   name + " input");
    checkRoleOrder(function.outputs, function.output_count,
                   {TESSERA_STAGE_ACTIVATION_GRADIENT}, name + " output");
    break;
  }
  checkParameterList(function.read_parameters, function.read_parameter_count,
                     parameterCount, name + "'s read_parameters");
  checkParameterList(function.gradient_parameters, function.gradient_count,
                     parameterCount, name + "'s gradient_parameters");
  if (kind != Call::Backward && function.gradient_count != 0)
    pipelineError(name + " lists gradients (a backward completes them)");
  if (!(function.flops >= 0) || !std::isfinite(function.flops))
    pipelineError(name + "'s flops are negative or not finite");
}

/// `sent` (what one side produces) must be `expected` (what the other
/// side takes), tensor by tensor.
void checkMessages(const std::vector<tessera_stage_tensor> &sent,
                   const std::vector<tessera_stage_tensor> &expected,
                   const std::string &sender, const std::string &receiver,
                   const char *what) {
  if (sent.size() != expected.size())
    pipelineError(sender + " gives " + std::to_string(sent.size()) + " " +
                  what + " but " + receiver + " takes " +
                  std::to_string(expected.size()));
  for (size_t i = 0; i < sent.size(); ++i)
    if (!sameTensor(sent[i], expected[i]))
      pipelineError(std::string(what) + " " + std::to_string(i) + " of " +
                    sender + " is " + describeStageTensor(sent[i]) + " but " +
                    receiver + " takes " + describeStageTensor(expected[i]));
}

/// Runs the task orders with buffered sends (the in-process comms') and
/// fails naming a device that waits forever.
void checkTaskOrdersFinish(const tessera_pipeline &pipeline, int32_t chunks) {
  // (forward, chunk, micro-batch) of the tasks done so far.
  std::set<std::tuple<int32_t, int32_t, int32_t>> done;
  std::vector<int32_t> next(static_cast<size_t>(pipeline.stages), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int32_t d = 0; d < pipeline.stages; ++d) {
      int32_t &at = next[static_cast<size_t>(d)];
      for (; at < pipeline.task_counts[d]; ++at) {
        const tessera_pipeline_task &task = pipeline.tasks[d][at];
        bool ready =
            task.forward
                ? task.chunk == 0 ||
                      done.count({1, task.chunk - 1, task.micro_batch})
                : task.chunk + 1 == chunks ||
                      done.count({0, task.chunk + 1, task.micro_batch});
        if (!ready)
          break;
        done.insert({task.forward, task.chunk, task.micro_batch});
        progress = true;
      }
    }
  }
  for (int32_t d = 0; d < pipeline.stages; ++d) {
    int32_t at = next[static_cast<size_t>(d)];
    if (at < pipeline.task_counts[d]) {
      const tessera_pipeline_task &task = pipeline.tasks[d][at];
      pipelineError("the task orders never finish: device " +
                    std::to_string(d) + " waits at its task " +
                    std::to_string(at) + " (" +
                    chunkName(task.chunk, task.forward) + " of micro-batch " +
                    std::to_string(task.micro_batch) +
                    ") for a message its peer sends only later");
    }
  }
}

void checkTasks(const tessera_pipeline &pipeline, int32_t chunks) {
  if (!pipeline.task_counts || !pipeline.tasks)
    pipelineError("no task lists");
  const int32_t perDevice = 2 * pipeline.virtual_stages * pipeline.micro_batches;
  for (int32_t d = 0; d < pipeline.stages; ++d) {
    std::string device = "device " + std::to_string(d);
    if (pipeline.task_counts[d] != perDevice)
      pipelineError(device + " has " + std::to_string(pipeline.task_counts[d]) +
                    " tasks; it runs the forward and backward of " +
                    std::to_string(pipeline.virtual_stages) +
                    " chunk(s) for " + std::to_string(pipeline.micro_batches) +
                    " micro-batches, " + std::to_string(perDevice) + " tasks");
    if (!pipeline.tasks[d])
      pipelineError(device + " has no task list");
    std::set<std::tuple<int32_t, int32_t, int32_t>> seen;
    for (int32_t i = 0; i < perDevice; ++i) {
      const tessera_pipeline_task &task = pipeline.tasks[d][i];
      std::string where = device + "'s task " + std::to_string(i);
      if (task.forward != 0 && task.forward != 1)
        pipelineError(where + " has forward = " + std::to_string(task.forward));
      if (task.chunk < 0 || task.chunk >= chunks ||
          task.chunk % pipeline.stages != d)
        pipelineError(where + " runs chunk " + std::to_string(task.chunk) +
                      ", which is not on " + device);
      if (task.micro_batch < 0 || task.micro_batch >= pipeline.micro_batches)
        pipelineError(where + " runs micro-batch " +
                      std::to_string(task.micro_batch) + " of " +
                      std::to_string(pipeline.micro_batches));
      std::string what = chunkName(task.chunk, task.forward) +
                         " of micro-batch " + std::to_string(task.micro_batch);
      if (!seen.insert({task.forward, task.chunk, task.micro_batch}).second)
        pipelineError(device + " runs " + what + " twice");
      if (!task.forward && !seen.count({1, task.chunk, task.micro_batch}))
        pipelineError(where + " runs " + what + " before its forward");
    }
  }
  checkTaskOrdersFinish(pipeline, chunks);
}

tessera_tensor stageTensor(void *data, const tessera_stage_tensor &info) {
  tessera_tensor tensor{};
  tensor.data = data;
  tensor.dtype = info.dtype;
  tensor.rank = info.rank;
  for (int32_t d = 0; d < info.rank; ++d)
    tensor.shape[d] = info.shape[d];
  return tensor;
}

int64_t stageTensorBytes(const tessera_stage_tensor &info) {
  int64_t count = 1;
  for (int32_t d = 0; d < info.rank; ++d)
    count *= info.shape[d];
  return count * dtypeSize(info.dtype);
}

} // namespace

void checkPipeline(const tessera_program &program) {
  const tessera_pipeline &pipeline = *program.pipeline;
  if (program.forward_backward)
    pipelineError("a pipelined program has forward_backward (it must be NULL)");
  // Over a stage mesh, a gradient may be pending over the mesh's axes only.
  if (pipeline.gradient_partial_axes) {
    const int32_t axes = (int32_t(1) << std::max(program.mesh_axis_count, 0)) - 1;
    for (int32_t p = 0; p < program.parameter_count; ++p)
      if ((pipeline.gradient_partial_axes[p] & ~axes) != 0)
        pipelineError("the gradient of '" +
                      std::string(program.parameters[p].name) +
                      "' is pending over mesh axes " +
                      std::to_string(pipeline.gradient_partial_axes[p]) +
                      " (a bit each) of a mesh of " +
                      std::to_string(program.mesh_axis_count));
  }
  if (pipeline.stages < 1 || pipeline.virtual_stages < 1 ||
      pipeline.micro_batches < 1)
    pipelineError("stages " + std::to_string(pipeline.stages) +
                  ", virtual_stages " + std::to_string(pipeline.virtual_stages) +
                  " and micro_batches " +
                  std::to_string(pipeline.micro_batches) +
                  " must all be at least 1");
  if (!pipeline.prepares || !pipeline.forwards || !pipeline.backwards)
    pipelineError("no stage functions");
  const int32_t chunks = pipeline.stages * pipeline.virtual_stages;
  const int32_t parameters = program.parameter_count;
  std::vector<int32_t> ownerChunk(static_cast<size_t>(parameters), -1);
  for (int32_t c = 0; c < chunks; ++c) {
    const tessera_stage_function &prepare = pipeline.prepares[c];
    const tessera_stage_function &forward = pipeline.forwards[c];
    const tessera_stage_function &backward = pipeline.backwards[c];
    checkFunction(prepare, c, Call::Prepare, parameters);
    checkFunction(forward, c, Call::Forward, parameters);
    checkFunction(backward, c, Call::Backward, parameters);
    if (forward.returns_loss != (c + 1 == chunks ? 1 : 0))
      pipelineError(chunkName(c, true) +
                    (c + 1 == chunks ? " (the last) does not return the loss"
                                     : " returns the loss (only the last "
                                       "chunk's forward does)"));
    if (backward.returns_loss)
      pipelineError(chunkName(c, false) + " returns the loss");
    // A gradient may come in parts from several chunks (a tied
    // embedding's); the first chunk's device owns it.
    for (int32_t i = 0; i < backward.gradient_count; ++i) {
      int32_t p = backward.gradient_parameters[i];
      for (int32_t j = 0; j < i; ++j)
        if (backward.gradient_parameters[j] == p)
          pipelineError(chunkName(c, false) + " returns the gradient of '" +
                        std::string(program.parameters[p].name) + "' twice");
      int32_t &owner = ownerChunk[static_cast<size_t>(p)];
      if (owner < 0)
        owner = c;
    }
    // What crosses to the neighbours, and to the chunk's own calls.
    std::vector<tessera_stage_tensor> residents(
        prepare.outputs, prepare.outputs + prepare.output_count);
    for (bool reader : {true, false}) {
      const tessera_stage_function &call = reader ? forward : backward;
      checkMessages(residents,
                    withRole(call.inputs, call.input_count,
                             TESSERA_STAGE_RESIDENT),
                    prepareName(c),
                    chunkName(c, reader), "resident values");
    }
    std::vector<tessera_stage_tensor> none;
    checkMessages(withRole(forward.outputs, forward.output_count,
                           TESSERA_STAGE_ACTIVATION),
                  c + 1 < chunks
                      ? withRole(pipeline.forwards[c + 1].inputs,
                                 pipeline.forwards[c + 1].input_count,
                                 TESSERA_STAGE_ACTIVATION)
                      : none,
                  chunkName(c, true),
                  c + 1 < chunks ? chunkName(c + 1, true) : "nothing (the last)",
                  "activations");
    checkMessages(withRole(forward.outputs, forward.output_count,
                           TESSERA_STAGE_SAVED),
                  withRole(backward.inputs, backward.input_count,
                           TESSERA_STAGE_SAVED),
                  chunkName(c, true), chunkName(c, false), "saved values");
    checkMessages(withRole(backward.outputs, backward.output_count,
                           TESSERA_STAGE_ACTIVATION_GRADIENT),
                  c > 0 ? withRole(pipeline.backwards[c - 1].inputs,
                                   pipeline.backwards[c - 1].input_count,
                                   TESSERA_STAGE_ACTIVATION_GRADIENT)
                        : none,
                  chunkName(c, false),
                  c > 0 ? chunkName(c - 1, false) : "nothing (the first)",
                  "activation gradients");
  }
  if (chunks > 0 && !withRole(pipeline.forwards[0].inputs,
                              pipeline.forwards[0].input_count,
                              TESSERA_STAGE_ACTIVATION)
                         .empty())
    pipelineError("chunk 0 forward takes activations (it is the first)");
  for (int32_t p = 0; p < parameters; ++p)
    if (ownerChunk[static_cast<size_t>(p)] < 0)
      pipelineError("parameter '" + std::string(program.parameters[p].name) +
                    "' is owned by no chunk (no backward returns its "
                    "gradient)");
  checkTasks(pipeline, chunks);
}

PipelineLayout::PipelineLayout(const tessera_program &program)
    : whole(program) {
  const tessera_pipeline &pipeline = *program.pipeline;
  const int32_t chunks = pipeline.stages * pipeline.virtual_stages;
  const auto parameters = static_cast<size_t>(program.parameter_count);
  owners.assign(parameters, -1);
  readers.resize(parameters);
  std::vector<std::set<int32_t>> holders(parameters);
  reads.assign(static_cast<size_t>(pipeline.stages),
               std::vector<bool>(parameters, false));
  for (int32_t c = 0; c < chunks; ++c) {
    int32_t device = deviceOfChunk(c);
    for (const tessera_stage_function *function :
         {&pipeline.prepares[c], &pipeline.forwards[c],
          &pipeline.backwards[c]}) {
      for (int32_t i = 0; i < function->read_parameter_count; ++i)
        reads[static_cast<size_t>(device)]
             [static_cast<size_t>(function->read_parameters[i])] = true;
      for (int32_t i = 0; i < function->gradient_count; ++i) {
        // The first chunk's device owns it; later ones hold parts.
        int32_t &owner =
            owners[static_cast<size_t>(function->gradient_parameters[i])];
        if (owner < 0)
          owner = device;
        else if (owner != device)
          holders[static_cast<size_t>(function->gradient_parameters[i])]
              .insert(device);
      }
    }
  }
  parts.resize(parameters);
  for (size_t p = 0; p < parameters; ++p) {
    parts[p].assign(holders[p].begin(), holders[p].end());
    for (int32_t d = 0; d < pipeline.stages; ++d)
      if (reads[static_cast<size_t>(d)][p] && d != owners[p])
        readers[p].push_back(d);
  }
  // Reserved first: the programs point into these vectors.
  deviceParameters.resize(static_cast<size_t>(pipeline.stages));
  for (int32_t d = 0; d < pipeline.stages; ++d) {
    std::vector<tessera_tensor_info> &infos =
        deviceParameters[static_cast<size_t>(d)];
    infos.assign(program.parameters, program.parameters + parameters);
    for (size_t p = 0; p < parameters; ++p)
      if (!holds(d, static_cast<int32_t>(p))) {
        infos[p].rank = 1;
        std::fill(std::begin(infos[p].shape), std::end(infos[p].shape), 0);
      }
    tessera_program device = program;
    device.parameters = infos.empty() ? nullptr : infos.data();
    devicePrograms.push_back(device);
  }
}

bool PipelineLayout::holds(int32_t device, int32_t parameter) const {
  return ownerOf(parameter) == device ||
         reads[static_cast<size_t>(device)][static_cast<size_t>(parameter)] ||
         std::count(partHolders(parameter).begin(),
                    partHolders(parameter).end(), device) > 0;
}

bool PipelineLayout::hasGradientParts(const tessera_program &program) {
  const tessera_pipeline &pipeline = *program.pipeline;
  const int32_t chunks = pipeline.stages * pipeline.virtual_stages;
  std::vector<int32_t> device(static_cast<size_t>(program.parameter_count), -1);
  for (int32_t c = 0; c < chunks; ++c) {
    const tessera_stage_function &backward = pipeline.backwards[c];
    for (int32_t i = 0; i < backward.gradient_count; ++i) {
      int32_t &first = device[static_cast<size_t>(backward.gradient_parameters[i])];
      if (first >= 0 && first != c % pipeline.stages)
        return true;
      first = c % pipeline.stages;
    }
  }
  return false;
}

TrainingState PipelineLayout::takeHeld(const TrainingState &state,
                                       int32_t device) const {
  TrainingState held = state;
  for (int32_t p = 0; p < whole.parameter_count; ++p)
    if (!holds(device, p)) {
      auto i = static_cast<size_t>(p);
      // Released, not just emptied: this is the memory pipelining saves.
      std::vector<float>().swap(held.parameters[i]);
      std::vector<float>().swap(held.firstMoments[i]);
      std::vector<float>().swap(held.secondMoments[i]);
    }
  return held;
}

std::vector<bool> PipelineLayout::ownedBy(int32_t device) const {
  std::vector<bool> owned;
  for (int32_t owner : owners)
    owned.push_back(owner == device);
  return owned;
}

std::vector<std::vector<float>> PipelineLayout::gatherFromOwners(
    const std::vector<std::vector<float>> &held, tessera_comm *comm,
    int32_t device, void *stream) const {
  std::vector<std::vector<float>> tensors;
  const int64_t ranks = stages();
  for (int32_t p = 0; p < whole.parameter_count; ++p) {
    const int64_t count = elementCount(whole.parameters[p]);
    const int32_t owner = ownerOf(p);
    // Every rank gives a row, the owner's is the tensor: an all-gather
    // works on every comm (host, staged, NCCL) where a gather to rank 0
    // would need device buffers of its own.
    std::vector<float> row(static_cast<size_t>(count), 0.0f);
    if (owner == device)
      row = held[static_cast<size_t>(p)];
    std::vector<float> rows(static_cast<size_t>(count * ranks));
    tessera_tensor x{row.data(), TESSERA_F32, 2, {1, count}};
    tessera_tensor y{rows.data(), TESSERA_F32, 2, {ranks, count}};
    try {
      comm::allGatherHostTensors(comm, x, y, 0, stream);
    } catch (const comm::CommError &error) {
      fail(std::string("gathering '") + whole.parameters[p].name +
           "' from its owner, rank " + std::to_string(owner) + ": " +
           error.what());
    }
    auto begin = rows.begin() + owner * count;
    tensors.emplace_back(begin, begin + count);
  }
  return tensors;
}

/// Slots of saved values shared by the device's chunks whose forwards save
/// the same tensors (an interleaved device's layer-only chunks): as many as
/// micro-batches of those chunks are ever in flight together in the
/// device's order. A pool per chunk, each as deep as its own chunk's peak,
/// held more: a later device's first chunk fills while its second drains
/// (GPT-3's PP 16 interleaved:2, device 8: 46 chunk slots, not 31).
struct PipelineStep::StashPool {
  std::vector<std::vector<tessera_tensor>> slots;
  std::vector<int32_t> freeSlots;
};

/// One chunk of this device: its calls' descriptors (message buffers
/// allocated once), its resident values and the stash of its saved values.
struct PipelineStep::Chunk {
  int32_t index = 0;
  const tessera_stage_function *prepare = nullptr;
  const tessera_stage_function *forward = nullptr;
  const tessera_stage_function *backward = nullptr;
  /// The prepare's outputs, computed once a step: the leading inputs of
  /// the forward and of the backward.
  std::vector<tessera_tensor> residents;
  /// The leading ACTIVATION outputs of the forward, then its SAVED ones.
  int32_t activationOutputs = 0;
  int32_t savedCount = 0;
  /// Where the received messages start among the forward's and the
  /// backward's inputs (after the residents, and the backward's saved).
  size_t firstMessage[2] = {0, 0};
  /// The backward's gradient_parameters in ascending order, sorted once:
  /// its runs of consecutive parameters are each one accumulation.
  std::vector<int32_t> completedGradients;
  std::vector<tessera_tensor> forwardInputs, forwardOutputs, backwardInputs,
      backwardOutputs;
  /// The stash pool of its saved layout; the slot of each micro-batch in
  /// flight (-1: none).
  StashPool *stash = nullptr;
  std::vector<int32_t> slotOfMicroBatch;
  /// Received messages, per direction (0: the forward's activations, 1: the
  /// backward's activation gradients): a pool of slots as large as the
  /// most messages of this chunk ever buffered (an interleaved schedule's
  /// peer sends some before they are needed), the free slots, the slot of
  /// each micro-batch's message (-1: not received).
  struct Messages {
    std::vector<std::vector<tessera_tensor>> slots;
    std::vector<int32_t> freeSlots;
    std::vector<int32_t> slotOfMicroBatch;
  };
  Messages messages[2];
};

PipelineStep::Chunk &PipelineStep::chunkOf(int32_t chunk) {
  return *chunks[static_cast<size_t>(chunk / layout.stages())];
}

PipelineStep::PipelineStep(const PipelineLayout &layout, int32_t device,
                           TrainingBackend &backend, tessera_comm *comm,
                           Trace &trace,
                           const std::vector<tessera_comm *> &meshAxes,
                           int32_t shardedAxis)
    : layout(layout), device(device), backend(backend), comm(comm),
      trace(trace), meshAxes(meshAxes), shardedAxis(shardedAxis),
      owned(layout.ownedBy(device)), agreement(comm, backend.stream()) {
  const tessera_pipeline &pipeline = layout.pipeline();
  const tessera_program &whole = layout.wholeProgram();
  const int32_t count = pipeline.task_counts[device];
  const tessera_pipeline_task *tasks = pipeline.tasks[device];
  backend.reserveMicroBatches(pipeline.micro_batches);
  auto allocateAll = [&](const tessera_stage_tensor *infos, int32_t first,
                         int32_t end, std::vector<tessera_tensor> &into,
                         const std::string &what) {
    for (int32_t i = first; i < end; ++i)
      into[static_cast<size_t>(i)] = stageTensor(
          backend.allocate(stageTensorBytes(infos[i]), what.c_str()), infos[i]);
  };
  for (int32_t v = 0; v < pipeline.virtual_stages; ++v) {
    auto chunk = std::make_unique<Chunk>();
    chunk->index = device + v * pipeline.stages;
    const int32_t c = chunk->index;
    chunk->prepare = &pipeline.prepares[c];
    chunk->forward = &pipeline.forwards[c];
    chunk->backward = &pipeline.backwards[c];
    const tessera_stage_function &forward = *chunk->forward;
    const tessera_stage_function &backward = *chunk->backward;
    chunk->completedGradients.assign(
        backward.gradient_parameters,
        backward.gradient_parameters + backward.gradient_count);
    std::sort(chunk->completedGradients.begin(),
              chunk->completedGradients.end());
    chunk->savedCount = static_cast<int32_t>(
        withRole(forward.outputs, forward.output_count, TESSERA_STAGE_SAVED)
            .size());
    chunk->activationOutputs = forward.output_count - chunk->savedCount;
    chunk->forwardInputs.resize(static_cast<size_t>(forward.input_count));
    chunk->forwardOutputs.resize(static_cast<size_t>(forward.output_count));
    chunk->backwardInputs.resize(static_cast<size_t>(backward.input_count));
    chunk->backwardOutputs.resize(static_cast<size_t>(backward.output_count));
    const tessera_stage_function &prepare = *chunk->prepare;
    const auto residentCount = static_cast<size_t>(prepare.output_count);
    chunk->residents.resize(residentCount);
    allocateAll(prepare.outputs, 0, prepare.output_count, chunk->residents,
                "pipeline resident values");
    for (size_t j = 0; j < residentCount; ++j)
      chunk->forwardInputs[j] = chunk->backwardInputs[j] = chunk->residents[j];
    chunk->firstMessage[0] = residentCount;
    chunk->firstMessage[1] =
        residentCount + static_cast<size_t>(chunk->savedCount);
    // Messages: what is received and sent. The saved values' descriptors
    // point into a stash slot, set per call.
    allocateAll(forward.outputs, 0, chunk->activationOutputs,
                chunk->forwardOutputs, "pipeline activations");
    allocateAll(backward.outputs, 0, backward.output_count,
                chunk->backwardOutputs, "pipeline activation gradients");
    chunk->slotOfMicroBatch.assign(static_cast<size_t>(pipeline.micro_batches),
                                   -1);
    chunks.push_back(std::move(chunk));
  }

  // The stash: one pool per saved layout, as many slots as micro-batches
  // of its chunks are ever in flight together (forward run, backward not
  // yet) in the device's order.
  auto savedOf = [](const Chunk &chunk) {
    return chunk.forward->outputs + chunk.activationOutputs;
  };
  auto sameSaved = [&](const Chunk &a, const Chunk &b) {
    if (a.savedCount != b.savedCount)
      return false;
    for (int32_t j = 0; j < a.savedCount; ++j) {
      const tessera_stage_tensor &x = savedOf(a)[j], &y = savedOf(b)[j];
      if (x.dtype != y.dtype || x.rank != y.rank ||
          !std::equal(x.shape, x.shape + x.rank, y.shape))
        return false;
    }
    return true;
  };
  for (size_t first = 0; first < chunks.size(); ++first) {
    Chunk &leader = *chunks[first];
    if (leader.stash)
      continue;
    stashPools.push_back(std::make_unique<StashPool>());
    StashPool &pool = *stashPools.back();
    std::vector<int32_t> members;
    for (size_t other = first; other < chunks.size(); ++other)
      if (!chunks[other]->stash && sameSaved(leader, *chunks[other])) {
        chunks[other]->stash = &pool;
        members.push_back(chunks[other]->index);
      }
    int32_t inFlight = 0, most = 0;
    for (int32_t i = 0; i < count; ++i)
      if (std::find(members.begin(), members.end(), tasks[i].chunk) !=
          members.end()) {
        inFlight += tasks[i].forward ? 1 : -1;
        most = std::max(most, inFlight);
      }
    for (int32_t slotIndex = 0; slotIndex < most; ++slotIndex) {
      std::vector<tessera_tensor> slot(static_cast<size_t>(leader.savedCount));
      for (int32_t j = 0; j < leader.savedCount; ++j) {
        const tessera_stage_tensor &info = savedOf(leader)[j];
        slot[static_cast<size_t>(j)] = stageTensor(
            backend.allocate(stageTensorBytes(info), "saved activations"),
            info);
      }
      pool.slots.push_back(std::move(slot));
    }
    for (int32_t slotIndex = most - 1; slotIndex >= 0; --slotIndex)
      pool.freeSlots.push_back(slotIndex);
  }

  // What each peer sends this device, in the peer's order: the order the
  // messages arrive in (comm.h's send/recv match in order per pair).
  const int32_t chunkCount = layout.stages() * pipeline.virtual_stages;
  incoming.resize(static_cast<size_t>(layout.stages()));
  for (int32_t peer = 0; peer < layout.stages(); ++peer) {
    if (peer == device)
      continue;
    for (int32_t i = 0; i < pipeline.task_counts[peer]; ++i) {
      const tessera_pipeline_task &task = pipeline.tasks[peer][i];
      int32_t target = task.forward ? task.chunk + 1 : task.chunk - 1;
      if (target >= 0 && target < chunkCount &&
          layout.deviceOfChunk(target) == device)
        incoming[static_cast<size_t>(peer)].push_back(
            {task.forward, target, task.micro_batch});
    }
  }
  // The message pools: this device's order run against the arrival
  // orders, receiving from a peer only when a task needs its message
  // (receiveInputs), counting the messages of each chunk and direction
  // held at once.
  std::vector<size_t> cursor(incoming.size(), 0);
  std::set<std::tuple<int32_t, int32_t, int32_t>> held;
  std::map<std::pair<int32_t, int32_t>, int32_t> holding, most;
  for (int32_t i = 0; i < count; ++i) {
    const tessera_pipeline_task &task = tasks[i];
    int32_t from = task.forward ? task.chunk - 1 : task.chunk + 1;
    if (from < 0 || from >= chunkCount)
      continue;
    size_t peer = static_cast<size_t>(layout.deviceOfChunk(from));
    std::tuple<int32_t, int32_t, int32_t> key{task.forward, task.chunk,
                                              task.micro_batch};
    while (!held.count(key) && cursor[peer] < incoming[peer].size()) {
      const tessera_pipeline_task &message = incoming[peer][cursor[peer]++];
      held.insert({message.forward, message.chunk, message.micro_batch});
      std::pair<int32_t, int32_t> pool{message.chunk, message.forward ? 0 : 1};
      most[pool] = std::max(most[pool], ++holding[pool]);
    }
    if (!held.count(key))
      pipelineError("device " + std::to_string(device) + " needs " +
                    chunkName(task.chunk, task.forward) + "'s input of "
                    "micro-batch " + std::to_string(task.micro_batch) +
                    ", which rank " + std::to_string(peer) + " never sends");
    held.erase(key);
    --holding[{task.chunk, task.forward ? 0 : 1}];
  }
  for (auto &[pool, slots] : most) {
    Chunk &chunk = chunkOf(pool.first);
    bool forward = pool.second == 0;
    const tessera_stage_function &function =
        forward ? *chunk.forward : *chunk.backward;
    auto first = static_cast<int32_t>(chunk.firstMessage[pool.second]);
    Chunk::Messages &messages = chunk.messages[pool.second];
    for (int32_t s = 0; s < slots; ++s) {
      std::vector<tessera_tensor> slot;
      for (int32_t j = first; j < function.input_count; ++j)
        slot.push_back(stageTensor(
            backend.allocate(stageTensorBytes(function.inputs[j]),
                             forward ? "pipeline activations"
                                     : "pipeline activation gradients"),
            function.inputs[j]));
      messages.slots.push_back(std::move(slot));
    }
  }
  for (const std::unique_ptr<Chunk> &chunk : chunks)
    for (Chunk::Messages &messages : chunk->messages) {
      for (int32_t s = static_cast<int32_t>(messages.slots.size()) - 1; s >= 0;
           --s)
        messages.freeSlots.push_back(s);
      messages.slotOfMicroBatch.assign(
          static_cast<size_t>(pipeline.micro_batches), -1);
    }
  nextArrival.assign(incoming.size(), 0);
  contributed.assign(static_cast<size_t>(whole.parameter_count), false);
  int64_t largestPart = 0;
  for (int32_t p = 0; p < whole.parameter_count; ++p)
    if (layout.ownerOf(p) == device && !layout.partHolders(p).empty())
      largestPart = std::max(largestPart, backend.getLayout().count(p));
  if (largestPart > 0)
    partBuffer = static_cast<float *>(backend.allocate(
        largestPart * static_cast<int64_t>(sizeof(float)),
        "other stages' gradient parts"));

  // AdamW on the owned parameters only; the readers' copies come from the
  // owners (afterOptimizer), in parameter order, then reader order. Under
  // ZeRO-1 over the stage's dp group (a sharded state) the optimizer covers
  // the owned parameters' shard already (DataParallelGradients), and what
  // the readers need is the whole f32 mirror the step reads, which the
  // group's all-gather completes before the transfers (a pipelined step
  // reads f32: no compute copies).
  const ParameterLayout &flat = backend.getLayout();
  std::vector<ParameterLayout::Piece> pieces;
  FlatBuffer read = backend.masterWeights();
  if (backend.holdsShardOnly()) {
    std::vector<FlatBuffer> stepBuffers = backend.shardedStepBuffers();
    if (stepBuffers.size() != 1 || stepBuffers[0].dtype != TESSERA_F32)
      fail("internal error: a pipelined step over a sharded state reads "
           "one f32 mirror of its parameters");
    read = stepBuffers[0];
  }
  for (int32_t p = 0; p < whole.parameter_count; ++p) {
    if (owned[static_cast<size_t>(p)])
      pieces.push_back({p, flat.offset(p), flat.count(p)});
    // The mirrors hold the buckets of the parameters, packed.
    tessera_tensor slice = makeTensor(
        static_cast<float *>(read.data) +
            (backend.holdsShardOnly() ? backend.stepCopyOffset(p, flat.offset(p))
                                      : flat.offset(p)),
        TESSERA_F32, whole.parameters[p]);
    for (int32_t reader : layout.otherReaders(p)) {
      if (layout.ownerOf(p) == device)
        transfers.push_back({slice, reader, true, p});
      else if (reader == device)
        transfers.push_back({slice, layout.ownerOf(p), false, p});
    }
  }
  if (!backend.holdsShardOnly())
    backend.restrictOptimizer(pieces);
}

PipelineStep::~PipelineStep() = default;

void PipelineStep::receiveInputs(int64_t step, int32_t index) {
  const tessera_pipeline &pipeline = layout.pipeline();
  const tessera_pipeline_task &task = pipeline.tasks[device][index];
  const int32_t chunks = layout.stages() * pipeline.virtual_stages;
  int32_t from = task.forward ? task.chunk - 1 : task.chunk + 1;
  if (from < 0 || from >= chunks)
    return;
  int32_t peer = layout.deviceOfChunk(from);
  auto slotOf = [&](const tessera_pipeline_task &message) -> int32_t & {
    return chunkOf(message.chunk)
        .messages[message.forward ? 0 : 1]
        .slotOfMicroBatch[static_cast<size_t>(message.micro_batch)];
  };
  // The peer's messages in the order it sends them, up to this task's: an
  // interleaved schedule's may come before they are needed.
  std::vector<tessera_pipeline_task> &arrivals =
      incoming[static_cast<size_t>(peer)];
  size_t &next = nextArrival[static_cast<size_t>(peer)];
  while (slotOf(task) < 0) {
    if (next >= arrivals.size())
      fail("step " + std::to_string(step) + ": internal error: rank " +
           std::to_string(peer) + " sends no input for " +
           chunkName(task.chunk, task.forward));
    const tessera_pipeline_task &message = arrivals[next++];
    Chunk::Messages &messages =
        chunkOf(message.chunk).messages[message.forward ? 0 : 1];
    // The pools were sized from these very orders: never empty here.
    if (messages.freeSlots.empty())
      fail("step " + std::to_string(step) +
           ": internal error: no free message slot for " +
           chunkName(message.chunk, message.forward));
    int32_t slot = messages.freeSlots.back();
    messages.freeSlots.pop_back();
    slotOf(message) = slot;
    for (tessera_tensor &tensor : messages.slots[static_cast<size_t>(slot)])
      if (tessera_comm_recv(comm, &tensor, peer, backend.stream()) != 0)
        fail("step " + std::to_string(step) + ", micro-batch " +
             std::to_string(message.micro_batch + 1) + ": " +
             chunkName(message.chunk, message.forward) + " receiving " +
             (message.forward ? "activations" : "activation gradients") +
             " from rank " + std::to_string(peer) + ": " +
             tessera_comm_last_error());
  }
}

void PipelineStep::sendOutputs(int64_t step, int32_t index) {
  const tessera_pipeline &pipeline = layout.pipeline();
  const tessera_pipeline_task &task = pipeline.tasks[device][index];
  const int32_t chunks = layout.stages() * pipeline.virtual_stages;
  Chunk &chunk = chunkOf(task.chunk);
  int32_t to = task.forward ? task.chunk + 1 : task.chunk - 1;
  if (to < 0 || to >= chunks)
    return;
  int32_t peer = layout.deviceOfChunk(to);
  std::vector<tessera_tensor> &outputs =
      task.forward ? chunk.forwardOutputs : chunk.backwardOutputs;
  size_t end = task.forward ? static_cast<size_t>(chunk.activationOutputs)
                            : outputs.size();
  for (size_t i = 0; i < end; ++i)
    if (tessera_comm_send(comm, &outputs[i], peer, backend.stream()) != 0)
      fail("step " + std::to_string(step) + ", micro-batch " +
           std::to_string(task.micro_batch + 1) + ": " +
           chunkName(task.chunk, task.forward) + " sending " +
           (task.forward ? "activations" : "activation gradients") +
           " to rank " + std::to_string(peer) + " (" +
           chunkName(to, task.forward) + "): " + tessera_comm_last_error());
}

void PipelineStep::runTask(int64_t step, int32_t index, float lossScale,
                           const std::vector<uint64_t> &seeds) {
  const tessera_pipeline_task &task = layout.pipeline().tasks[device][index];
  Chunk &chunk = chunkOf(task.chunk);
  auto micro = static_cast<size_t>(task.micro_batch);
  int32_t &slot = chunk.slotOfMicroBatch[micro];
  std::string what = "step " + std::to_string(step) + ", micro-batch " +
                     std::to_string(task.micro_batch + 1) + ": " +
                     chunkName(task.chunk, task.forward);
  if (task.forward) {
    // The pool was sized from this very order: never empty here.
    if (chunk.stash->freeSlots.empty())
      fail(what + ": internal error: no free stash slot");
    slot = chunk.stash->freeSlots.back();
    chunk.stash->freeSlots.pop_back();
    for (int32_t j = 0; j < chunk.savedCount; ++j)
      chunk.forwardOutputs[static_cast<size_t>(chunk.activationOutputs + j)] =
          chunk.stash->slots[static_cast<size_t>(slot)][static_cast<size_t>(j)];
  } else {
    for (int32_t j = 0; j < chunk.savedCount; ++j)
      chunk.backwardInputs[chunk.residents.size() + static_cast<size_t>(j)] =
          chunk.stash->slots[static_cast<size_t>(slot)][static_cast<size_t>(j)];
  }
  const tessera_stage_function &function =
      task.forward ? *chunk.forward : *chunk.backward;
  // The received inputs: the message slot of this micro-batch.
  Chunk::Messages &messages = chunk.messages[task.forward ? 0 : 1];
  const bool receives = !messages.slots.empty();
  if (receives) {
    int32_t messageSlot = messages.slotOfMicroBatch[micro];
    std::vector<tessera_tensor> &inputs =
        task.forward ? chunk.forwardInputs : chunk.backwardInputs;
    size_t first = chunk.firstMessage[task.forward ? 0 : 1];
    const std::vector<tessera_tensor> &received =
        messages.slots[static_cast<size_t>(messageSlot)];
    for (size_t j = 0; j < received.size(); ++j)
      inputs[first + j] = received[j];
  }
  // The measured schedule, to lay beside `tesserac --explain=trace`'s.
  TraceRange range(trace, task.forward ? "forward" : "backward");
  range.addInteger("chunk", task.chunk);
  range.addInteger("micro_batch", task.micro_batch);
  try {
    backend.runStage(
        function, task.micro_batch,
        task.forward ? chunk.forwardInputs.data() : chunk.backwardInputs.data(),
        task.forward ? chunk.forwardOutputs.data()
                     : chunk.backwardOutputs.data(),
        lossScale, seeds[micro]);
  } catch (const TrainError &error) {
    fail(what + ": " + error.what());
  }
  if (receives) {
    // Stream-ordered: the next message into this slot lands after the call.
    messages.freeSlots.push_back(messages.slotOfMicroBatch[micro]);
    messages.slotOfMicroBatch[micro] = -1;
  }
  if (task.forward)
    return;
  // Stream-ordered: the next forward writing this slot runs after the call.
  chunk.stash->freeSlots.push_back(slot);
  slot = -1;
  // One accumulation per run of consecutive parameters (a stage's layers
  // are consecutive slices), not one launch per parameter.
  const std::vector<int32_t> &completed = chunk.completedGradients;
  for (size_t i = 0; i < completed.size();) {
    bool first = !contributed[static_cast<size_t>(completed[i])];
    size_t j = i + 1;
    while (j < completed.size() && completed[j] == completed[j - 1] + 1 &&
           contributed[static_cast<size_t>(completed[j])] == !first)
      ++j;
    backend.accumulateGradients(completed[i], completed[j - 1] + 1, first);
    for (size_t k = i; k < j; ++k)
      contributed[static_cast<size_t>(completed[k])] = true;
    i = j;
  }
}

double PipelineStep::run(int64_t step, float lossScale,
                         const std::vector<uint64_t> &seeds) {
  const tessera_pipeline &pipeline = layout.pipeline();
  const int32_t count = pipeline.task_counts[device];
  std::fill(contributed.begin(), contributed.end(), false);
  std::fill(nextArrival.begin(), nextArrival.end(), 0);
  // The resident values from this step's parameters, before any task.
  for (const std::unique_ptr<Chunk> &chunk : chunks) {
    TraceRange range(trace, "prepare");
    range.addInteger("chunk", chunk->index);
    try {
      backend.runStage(*chunk->prepare, 0, nullptr, chunk->residents.data(),
                       lossScale, seeds.empty() ? 0 : seeds[0]);
    } catch (const TrainError &error) {
      fail("step " + std::to_string(step) + ": " +
           prepareName(chunk->index) + ": " + error.what());
    }
  }
  auto group = [&](auto &&body) {
    TraceRange range(trace, "send_receive");
    if (tessera_comm_group_start(comm) != 0)
      fail("step " + std::to_string(step) + ": " + tessera_comm_last_error());
    body();
    if (tessera_comm_group_end(comm) != 0)
      fail("step " + std::to_string(step) + ": " + tessera_comm_last_error());
  };
  if (count > 0)
    group([&] { receiveInputs(step, 0); });
  for (int32_t i = 0; i < count; ++i) {
    runTask(step, i, lossScale, seeds);
    // Task i's sends with task i + 1's receives: on NCCL neither side's
    // send then waits for the other's receive.
    group([&] {
      sendOutputs(step, i);
      if (i + 1 < count)
        receiveInputs(step, i + 1);
    });
  }
  sumGradientParts(step);
  sumOverMesh(step);
  double lossSum = 0;
  try {
    lossSum = backend.finishStages();
  } catch (const TrainError &error) {
    fail("step " + std::to_string(step) + ": " + error.what());
  }
  double loss = lossSum / static_cast<double>(pipeline.micro_batches);
  try {
    return agreement.sum(loss);
  } catch (const comm::CommError &error) {
    fail("step " + std::to_string(step) + ": agreeing on the loss: " +
         error.what());
  }
}

void PipelineStep::sumGradientParts(int64_t step) {
  const tessera_program &whole = layout.wholeProgram();
  const ParameterLayout &flat = backend.getLayout();
  for (int32_t p = 0; p < whole.parameter_count; ++p) {
    const std::vector<int32_t> &holders = layout.partHolders(p);
    if (holders.empty())
      continue;
    int32_t owner = layout.ownerOf(p);
    bool holder = std::count(holders.begin(), holders.end(), device) > 0;
    if (owner != device && !holder)
      continue;
    tessera_tensor_info info = whole.parameters[p];
    std::string name = "step " + std::to_string(step) + ": the part of '" +
                       info.name + "'s gradient ";
    if (holder) {
      // This device's sum over the micro-batches (the f32 accumulators).
      FlatBuffer sums = backend.optimizerGradients();
      tessera_tensor part = makeTensor(
          static_cast<float *>(sums.data) + flat.offset(p), TESSERA_F32, info);
      if (tessera_comm_send(comm, &part, owner, backend.stream()) != 0)
        fail(name + "sent to its owner, rank " + std::to_string(owner) + ": " +
             tessera_comm_last_error());
      continue;
    }
    for (int32_t from : holders) {
      tessera_tensor part = makeTensor(partBuffer, TESSERA_F32, info);
      if (tessera_comm_recv(comm, &part, from, backend.stream()) != 0)
        fail(name + "from rank " + std::to_string(from) + ": " +
             tessera_comm_last_error());
      backend.addToAccumulator(p, partBuffer);
    }
  }
}

void PipelineStep::sumOverMesh(int64_t step) {
  const int32_t *pending = layout.pipeline().gradient_partial_axes;
  if (!pending)
    return;
  // Once a step, beside the tasks' ranges in the rank's trace.
  TraceRange range(trace, "mesh_gradient_sum");
  const tessera_program &whole = layout.wholeProgram();
  const ParameterLayout &flat = backend.getLayout();
  auto *sums = static_cast<float *>(backend.optimizerGradients().data);
  // Every rank of an axis group is the same stage device, so it owns the
  // same parameters and issues the same all-reduces: one per run of
  // consecutive owned parameters pending over the axis (those this device
  // does not hold have no elements and do not break a run; the zero gaps
  // between slices stay zero).
  for (size_t axis = 0; axis < meshAxes.size(); ++axis) {
    // ZeRO-1's axis: reduce-scattered by the data-parallel layer instead.
    if (static_cast<int32_t>(axis) == shardedAxis)
      continue;
    auto pendingHere = [&](int32_t p) {
      return owned[static_cast<size_t>(p)] && ((pending[p] >> axis) & 1) != 0;
    };
    for (int32_t p = 0; p < whole.parameter_count;) {
      if (!pendingHere(p)) {
        ++p;
        continue;
      }
      int32_t end = p + 1, last = p;
      for (; end < whole.parameter_count &&
             (pendingHere(end) || flat.count(end) == 0);
           ++end)
        if (pendingHere(end))
          last = end;
      end = last + 1;
      tessera_tensor run{};
      run.data = sums + flat.offset(p);
      run.dtype = TESSERA_F32;
      run.rank = 1;
      run.shape[0] = flat.spanElements(p, end);
      if (tessera_comm_all_reduce(meshAxes[axis], &run, TESSERA_REDUCE_SUM,
                                  backend.stream()) != 0)
        fail("step " + std::to_string(step) + ": summing the gradients of '" +
             std::string(whole.parameters[p].name) + "' to '" +
             whole.parameters[end - 1].name + "' over mesh axis " +
             std::to_string(axis) + ": " + tessera_comm_last_error());
      p = end;
    }
  }
}

double PipelineStep::gradientSumOfSquares() {
  double squares = backend.gradientSumOfSquares(owned);
  try {
    return agreement.sum(squares);
  } catch (const comm::CommError &error) {
    fail(std::string("agreeing on the gradient norm: ") + error.what());
  }
}

double PipelineStep::max(double value) {
  try {
    return agreement.max(value);
  } catch (const comm::CommError &error) {
    fail(std::string("agreeing on a flag: ") + error.what());
  }
}

std::vector<double> PipelineStep::parameterSumsOfSquares() {
  std::vector<double> sums = backend.lastParameterSumsOfSquares();
  try {
    agreement.sumEach(sums);
  } catch (const comm::CommError &error) {
    fail(std::string("agreeing on the per-parameter gradient norms: ") +
         error.what());
  }
  return sums;
}

void PipelineStep::afterOptimizer() {
  const tessera_program &whole = layout.wholeProgram();
  for (Transfer &transfer : transfers) {
    int status =
        transfer.send
            ? tessera_comm_send(comm, &transfer.master, transfer.peer,
                                backend.stream())
            : tessera_comm_recv(comm, &transfer.master, transfer.peer,
                                backend.stream());
    if (status != 0)
      fail(std::string(transfer.send ? "sending" : "receiving") +
           " the updated '" + whole.parameters[transfer.parameter].name +
           "' " + (transfer.send ? "to" : "from") + " rank " +
           std::to_string(transfer.peer) + ": " + tessera_comm_last_error());
  }
}

} // namespace tessera::train
