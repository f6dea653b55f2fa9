//===- PipelineProgram.cpp - a stage-split step as the driver runs it -----===//

#include "PipelineProgram.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/HostTensorBuffer.h"
#include "tessera/runtime/program.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace tessera::lowering {
namespace {

using Source = StepSignature::Source;
using Destination = StepSignature::Destination;

/// The message, saved and resident roles of the split pass, as program.h
/// numbers them; std::nullopt for any other argument or result.
std::optional<int32_t> stageRole(DictionaryAttr attributes) {
  if (!attributes)
    return std::nullopt;
  if (attributes.get("tess.resident"))
    return TESSERA_STAGE_RESIDENT;
  if (attributes.get("tess.activation"))
    return TESSERA_STAGE_ACTIVATION;
  if (attributes.get("tess.activation_gradient"))
    return TESSERA_STAGE_ACTIVATION_GRADIENT;
  if (attributes.get("tess.saved"))
    return TESSERA_STAGE_SAVED;
  return std::nullopt;
}

StringRef nameOf(DictionaryAttr attributes, StringRef role) {
  if (!attributes)
    return {};
  if (auto name = attributes.getAs<StringAttr>(role))
    return name.getValue();
  return {};
}

/// The position of `role` in a call's inputs or outputs (program.h): a
/// prepare gives resident values; a forward takes resident values then
/// activations and gives activations then saved values; a backward takes
/// resident values, saved values, then activation gradients and gives
/// activation gradients.
int roleRank(int32_t role) {
  switch (role) {
  case TESSERA_STAGE_RESIDENT:
    return 0;
  case TESSERA_STAGE_ACTIVATION:
    return 1;
  case TESSERA_STAGE_SAVED:
    return 2;
  default:
    return 3;
  }
}

/// The roles a call of `kind` takes (inputs) or gives (outputs).
bool takesRole(StageKind kind, int32_t role) {
  switch (kind) {
  case StageKind::Prepare:
    return false;
  case StageKind::Forward:
    return role == TESSERA_STAGE_RESIDENT || role == TESSERA_STAGE_ACTIVATION;
  case StageKind::Backward:
    return role != TESSERA_STAGE_ACTIVATION;
  }
  return false;
}
bool givesRole(StageKind kind, int32_t role) {
  switch (kind) {
  case StageKind::Prepare:
    return role == TESSERA_STAGE_RESIDENT;
  case StageKind::Forward:
    return role == TESSERA_STAGE_ACTIVATION || role == TESSERA_STAGE_SAVED;
  case StageKind::Backward:
    return role == TESSERA_STAGE_ACTIVATION_GRADIENT;
  }
  return false;
}

const char *kindName(StageKind kind) {
  switch (kind) {
  case StageKind::Prepare:
    return "prepare";
  case StageKind::Forward:
    return "forward";
  case StageKind::Backward:
    return "backward";
  }
  return "?";
}

FailureOr<StageTensor> stageTensor(func::FuncOp function, Type type,
                                   int32_t role, const Twine &what) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      tensor.getRank() > TESSERA_MAX_RANK)
    return function.emitError("tess-lower-to-emitc: ")
           << what << " must be a static tensor of rank <= " << TESSERA_MAX_RANK
           << ", got " << type;
  llvm::Expected<tessera_dtype> dtype =
      execution::dtypeOf(tensor.getElementType());
  if (!dtype)
    return function.emitError("tess-lower-to-emitc: ")
           << what << ": " << llvm::toString(dtype.takeError());
  return StageTensor{role, *dtype,
                     std::vector<int64_t>(tensor.getShape().begin(),
                                          tensor.getShape().end())};
}

/// Orders `entries` (role, position) as program.h lays out a call's inputs
/// or outputs and returns each position's index among them.
std::map<unsigned, unsigned>
orderByRole(std::vector<std::pair<int32_t, unsigned>> entries) {
  std::stable_sort(entries.begin(), entries.end(), [](auto a, auto b) {
    return roleRank(a.first) < roleRank(b.first);
  });
  std::map<unsigned, unsigned> index;
  for (auto [i, entry] : llvm::enumerate(entries))
    index[entry.second] = static_cast<unsigned>(i);
  return index;
}

FailureOr<StageFunction> describeStage(func::FuncOp function, StageKind kind,
                                       const llvm::StringMap<unsigned> &parameters,
                                       const llvm::StringMap<unsigned> &buffers) {
  StageFunction stage;
  stage.function = function;
  stage.signature.stage = true;
  StringRef name = function.getSymName();

  std::vector<std::pair<int32_t, unsigned>> inputRoles;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    DictionaryAttr attributes = function.getArgAttrDict(i);
    StepSignature::Argument argument;
    if (StringRef parameter = nameOf(attributes, "tess.parameter");
        !parameter.empty()) {
      auto found = parameters.find(parameter);
      if (found == parameters.end())
        return function.emitError("tess-lower-to-emitc: @")
               << name << " reads parameter '" << parameter
               << "', which @forward_backward does not take";
      argument = {Source::Parameter, found->second};
      stage.readParameters.push_back(static_cast<int32_t>(found->second));
    } else if (StringRef buffer = nameOf(attributes, "tess.buffer");
               !buffer.empty()) {
      auto found = buffers.find(buffer);
      if (found == buffers.end())
        return function.emitError("tess-lower-to-emitc: @")
               << name << " reads buffer '" << buffer
               << "', which @forward_backward does not take";
      argument = {Source::Buffer, found->second};
    } else if (StringRef input = nameOf(attributes, "tess.input");
               !input.empty()) {
      if (input == "input_ids")
        argument.source = Source::Tokens;
      else if (input == "targets")
        argument.source = Source::Targets;
      else if (input == "loss_scale")
        argument.source = Source::LossScale;
      else
        return function.emitError("tess-lower-to-emitc: @")
               << name << " takes an unknown tess.input '" << input << "'";
    } else if (std::optional<int32_t> role = stageRole(attributes)) {
      if (!takesRole(kind, *role))
        return function.emitError("tess-lower-to-emitc: argument ")
               << i << " of @" << name << " has a role a " << kindName(kind)
               << " does not take";
      argument.source = Source::Input;
      inputRoles.push_back({*role, i});
    } else {
      return function.emitError("tess-lower-to-emitc: argument ")
             << i << " of @" << name
             << " has no role (tess.parameter, tess.buffer, tess.input, "
                "tess.resident, tess.activation, tess.saved, "
                "tess.activation_gradient)";
    }
    stage.signature.arguments.push_back(argument);
  }
  std::map<unsigned, unsigned> inputIndex = orderByRole(inputRoles);
  stage.inputs.resize(inputRoles.size());
  for (auto [argument, index] : inputIndex) {
    stage.signature.arguments[argument].index = index;
    int32_t role = *stageRole(function.getArgAttrDict(argument));
    FailureOr<StageTensor> tensor =
        stageTensor(function, function.getArgumentTypes()[argument], role,
                    "argument " + Twine(argument) + " of @" + name);
    if (failed(tensor))
      return failure();
    stage.inputs[index] = *tensor;
  }

  std::vector<std::pair<int32_t, unsigned>> outputRoles;
  for (unsigned i = 0; i < function.getNumResults(); ++i) {
    DictionaryAttr attributes = function.getResultAttrDict(i);
    StepSignature::Result result;
    if (attributes && attributes.get("tess.loss")) {
      if (kind != StageKind::Forward)
        return function.emitError("tess-lower-to-emitc: @")
               << name << " returns the loss; only a forward may";
      result.destination = Destination::Loss;
      stage.returnsLoss = true;
    } else if (StringRef gradient = nameOf(attributes, "tess.gradient");
               !gradient.empty()) {
      if (kind != StageKind::Backward)
        return function.emitError("tess-lower-to-emitc: @")
               << name << " returns the gradient of '" << gradient
               << "'; only a backward may";
      auto found = parameters.find(gradient);
      if (found == parameters.end())
        return function.emitError("tess-lower-to-emitc: @")
               << name << " returns the gradient of '" << gradient
               << "', which is not a parameter of @forward_backward";
      result = {Destination::Gradient, found->second};
      if (llvm::is_contained(stage.gradientParameters,
                             static_cast<int32_t>(found->second)))
        return function.emitError("tess-lower-to-emitc: @")
               << name << " returns the gradient of '" << gradient
               << "' twice";
      stage.gradientParameters.push_back(static_cast<int32_t>(found->second));
    } else if (std::optional<int32_t> role = stageRole(attributes)) {
      if (!givesRole(kind, *role))
        return function.emitError("tess-lower-to-emitc: result ")
               << i << " of @" << name << " has a role a " << kindName(kind)
               << " does not give";
      result.destination = Destination::Output;
      outputRoles.push_back({*role, i});
    } else {
      return function.emitError("tess-lower-to-emitc: result ")
             << i << " of @" << name
             << " has no role (tess.loss, tess.gradient, tess.resident, "
                "tess.activation, tess.saved, tess.activation_gradient)";
    }
    stage.signature.results.push_back(result);
  }
  std::map<unsigned, unsigned> outputIndex = orderByRole(outputRoles);
  stage.outputs.resize(outputRoles.size());
  for (auto [resultNumber, index] : outputIndex) {
    stage.signature.results[resultNumber].index = index;
    int32_t role = *stageRole(function.getResultAttrDict(resultNumber));
    FailureOr<StageTensor> tensor =
        stageTensor(function, function.getResultTypes()[resultNumber], role,
                    "result " + Twine(resultNumber) + " of @" + name);
    if (failed(tensor))
      return failure();
    stage.outputs[index] = *tensor;
  }
  return stage;
}

std::vector<StageTensor> withRole(const std::vector<StageTensor> &tensors,
                                  int32_t role) {
  std::vector<StageTensor> selected;
  for (const StageTensor &tensor : tensors)
    if (tensor.role == role)
      selected.push_back(tensor);
  return selected;
}

bool sameTensors(const std::vector<StageTensor> &a,
                 const std::vector<StageTensor> &b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](auto &x, auto &y) {
           return x.dtype == y.dtype && x.shape == y.shape;
         });
}

/// `what` of `sender` must be `what` of `receiver`, in order.
LogicalResult checkMessage(const StageFunction &sender,
                           const std::vector<StageTensor> &sent,
                           const StageFunction &receiver,
                           const std::vector<StageTensor> &received,
                           StringRef what) {
  if (sameTensors(sent, received))
    return success();
  func::FuncOp from = sender.function, to = receiver.function;
  return to.emitError("tess-lower-to-emitc: @")
         << to.getSymName() << " takes " << received.size()
         << " " << what << " but @" << from.getSymName()
         << " gives " << sent.size()
         << (sent.size() == received.size() ? " of other dtypes or shapes"
                                            : "");
}

} // namespace

FailureOr<std::optional<PipelineProgram>>
preparePipelineProgram(ModuleOp module, const ProgramInfo &info,
                       StringRef schedule, int64_t microBatches) {
  auto split = module->getAttrOfType<DictionaryAttr>("tess.pipeline");
  if (!split)
    return std::optional<PipelineProgram>();
  auto stagesAttr = split.getAs<IntegerAttr>("stages");
  auto virtualAttr = split.getAs<IntegerAttr>("virtual");
  if (!stagesAttr || !virtualAttr || stagesAttr.getInt() < 1 ||
      virtualAttr.getInt() < 1)
    return module.emitError("tess-lower-to-emitc: tess.pipeline must be "
                            "{stages = S, virtual = V} with S, V >= 1");
  PipelineProgram program;
  program.stages = stagesAttr.getInt();
  program.virtualStages = virtualAttr.getInt();
  // The module's plan decides the schedule and the micro-batches; the
  // options are for a module split without one (tessera-opt).
  if (auto plan = tess::PlanAttr::lookup(module); plan && plan.isPipelined()) {
    schedule = plan.getSchedule();
    microBatches = plan.getMicrobatches();
  }
  program.microBatches = microBatches;
  if (microBatches < 1)
    return module.emitError("tess-lower-to-emitc: micro-batches must be at "
                            "least 1, got ")
           << microBatches;
  llvm::Expected<pipeline::Schedule> parsed = pipeline::parseSchedule(schedule);
  if (!parsed)
    return module.emitError("tess-lower-to-emitc: pipeline-schedule: ")
           << llvm::toString(parsed.takeError());
  int64_t scheduleChunks = parsed->kind == pipeline::ScheduleKind::Interleaved
                               ? parsed->virtualStages
                               : 1;
  if (scheduleChunks != program.virtualStages)
    return module.emitError("tess-lower-to-emitc: schedule ")
           << parsed->name() << " runs " << scheduleChunks
           << " chunks per device, the module is split into "
           << program.virtualStages;
  program.schedule = parsed->name();
  llvm::Expected<std::vector<std::vector<pipeline::ScheduledTask>>> order =
      pipeline::scheduleTaskOrder(*parsed, program.stages, microBatches);
  if (!order)
    return module.emitError("tess-lower-to-emitc: ")
           << llvm::toString(order.takeError());
  program.tasks = std::move(*order);

  llvm::StringMap<unsigned> parameters, buffers;
  for (auto [index, parameter] : llvm::enumerate(info.parameters))
    parameters[parameter.name] = static_cast<unsigned>(index);
  for (auto [index, buffer] : llvm::enumerate(info.buffers))
    buffers[buffer.name] = static_cast<unsigned>(index);

  int64_t chunks = program.stages * program.virtualStages;
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    for (StageKind kind :
         {StageKind::Prepare, StageKind::Forward, StageKind::Backward}) {
      std::string name =
          "stage" + std::to_string(chunk) + "_" + kindName(kind);
      auto function = module.lookupSymbol<func::FuncOp>(name);
      if (!function)
        return module.emitError("tess-lower-to-emitc: the module is split "
                                "into ")
               << chunks << " pipeline chunks but has no @" << name;
      FailureOr<StageFunction> stage =
          describeStage(function, kind, parameters, buffers);
      if (failed(stage))
        return failure();
      (kind == StageKind::Prepare   ? program.prepares
       : kind == StageKind::Forward ? program.forwards
                                    : program.backwards)
          .push_back(std::move(*stage));
    }

  // What the driver relies on when it hands one call's outputs to another.
  int losses = 0;
  std::vector<int> completions(info.parameters.size(), 0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    StageFunction &prepare = program.prepares[chunk];
    StageFunction &forward = program.forwards[chunk];
    StageFunction &backward = program.backwards[chunk];
    losses += forward.returnsLoss;
    // Both calls take all the prepare's resident values, in its order.
    for (const StageFunction *reader : {&forward, &backward})
      if (failed(checkMessage(prepare, prepare.outputs, *reader,
                              withRole(reader->inputs, TESSERA_STAGE_RESIDENT),
                              "resident values")))
        return failure();
    for (int32_t parameter : forward.gradientParameters)
      ++completions[parameter];
    for (int32_t parameter : backward.gradientParameters)
      ++completions[parameter];
    if (failed(checkMessage(forward, withRole(forward.outputs, TESSERA_STAGE_SAVED),
                            backward,
                            withRole(backward.inputs, TESSERA_STAGE_SAVED),
                            "saved values")))
      return failure();
    std::vector<StageTensor> none;
    const StageFunction *nextForward =
        chunk + 1 < chunks ? &program.forwards[chunk + 1] : nullptr;
    const StageFunction *nextBackward =
        chunk + 1 < chunks ? &program.backwards[chunk + 1] : nullptr;
    // Chunk c's activations are chunk c + 1's; the last chunk sends none.
    std::vector<StageTensor> sent =
        withRole(forward.outputs, TESSERA_STAGE_ACTIVATION);
    if (nextForward) {
      if (failed(checkMessage(forward, sent, *nextForward,
                              withRole(nextForward->inputs,
                                       TESSERA_STAGE_ACTIVATION),
                              "activations")) ||
          failed(checkMessage(
              *nextBackward,
              withRole(nextBackward->outputs,
                       TESSERA_STAGE_ACTIVATION_GRADIENT),
              backward,
              withRole(backward.inputs, TESSERA_STAGE_ACTIVATION_GRADIENT),
              "activation gradients")))
        return failure();
    } else if (!sent.empty() ||
               !withRole(backward.inputs, TESSERA_STAGE_ACTIVATION_GRADIENT)
                    .empty()) {
      return forward.function.emitError("tess-lower-to-emitc: the last "
                                        "chunk sends activations or receives "
                                        "activation gradients");
    }
    if (chunk == 0 && (!withRole(forward.inputs, TESSERA_STAGE_ACTIVATION)
                            .empty() ||
                       !withRole(backward.outputs,
                                 TESSERA_STAGE_ACTIVATION_GRADIENT)
                            .empty()))
      return forward.function.emitError("tess-lower-to-emitc: the first "
                                        "chunk receives activations or sends "
                                        "activation gradients");
  }
  if (losses != 1)
    return module.emitError("tess-lower-to-emitc: exactly one chunk's "
                            "forward must return the loss, found ")
           << losses;
  // Several chunks return parts of a gradient that sum to it (a tied
  // embedding's); none is a parameter left untrained.
  for (auto [index, count] : llvm::enumerate(completions))
    if (count == 0)
      return module.emitError("tess-lower-to-emitc: no chunk returns the "
                              "gradient of '")
             << info.parameters[index].name << "'";
  return std::optional<PipelineProgram>(std::move(program));
}

namespace {

std::string stageTensorInitializer(const std::vector<StageTensor> &tensors) {
  static const char *const roles[] = {
      "TESSERA_STAGE_ACTIVATION", "TESSERA_STAGE_ACTIVATION_GRADIENT",
      "TESSERA_STAGE_SAVED", "TESSERA_STAGE_RESIDENT"};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{";
  for (auto [index, tensor] : llvm::enumerate(tensors)) {
    os << (index ? ",\n    " : "\n    ") << "{" << roles[tensor.role] << ", "
       << dtypeAndShape(tensor.dtype, tensor.shape) << "}";
  }
  os << "}";
  return text;
}

std::string indexInitializer(const std::vector<int32_t> &values) {
  std::string text = "{";
  for (auto [i, value] : llvm::enumerate(values))
    text += (i ? ", " : "") + std::to_string(value);
  return text + "}";
}

/// The tables of one call and its tessera_stage_function initializer.
std::string emitStageFunction(OpBuilder &builder, Location loc,
                              const StageFunction &stage) {
  std::string prefix = stage.call;
  std::string inputs =
      emitConstTable(builder, loc, prefix + "_inputs", "tessera_stage_tensor",
                     stage.inputs.size(), stageTensorInitializer(stage.inputs));
  std::string outputs = emitConstTable(
      builder, loc, prefix + "_outputs", "tessera_stage_tensor",
      stage.outputs.size(), stageTensorInitializer(stage.outputs));
  std::string reads = emitConstTable(
      builder, loc, prefix + "_read_parameters", "int32_t",
      stage.readParameters.size(), indexInitializer(stage.readParameters));
  std::string gradients = emitConstTable(
      builder, loc, prefix + "_gradient_parameters", "int32_t",
      stage.gradientParameters.size(),
      indexInitializer(stage.gradientParameters));
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{" << stage.call << ", " << stage.inputs.size() << ", " << inputs
     << ", " << stage.outputs.size() << ", " << outputs << ", "
     << (stage.returnsLoss ? 1 : 0) << ", " << stage.readParameters.size()
     << ", " << reads << ", " << stage.gradientParameters.size() << ", "
     << gradients << ", " << llvm::format("%.17g", stage.flops) << "}";
  return text;
}

} // namespace

std::string emitPipelineTables(OpBuilder &builder, Location loc,
                               const PipelineProgram &program) {
  auto functionTable = [&](StringRef name,
                           const std::vector<StageFunction> &stages) {
    std::string text = "{";
    for (auto [i, stage] : llvm::enumerate(stages))
      text += (i ? ",\n    " : "\n    ") + emitStageFunction(builder, loc, stage);
    return emitConstTable(builder, loc, name, "tessera_stage_function",
                          stages.size(), text + "}");
  };
  std::string forwards = functionTable("tessera_stage_forwards", program.forwards);
  std::string backwards =
      functionTable("tessera_stage_backwards", program.backwards);
  std::string prepares =
      functionTable("tessera_stage_prepares", program.prepares);

  std::vector<int32_t> counts;
  std::string lists = "{";
  for (auto [device, tasks] : llvm::enumerate(program.tasks)) {
    std::string text = "{";
    for (auto [i, task] : llvm::enumerate(tasks))
      text += (i ? ", {" : "{") + std::to_string(task.forward ? 1 : 0) + ", " +
              std::to_string(task.chunk) + ", " +
              std::to_string(task.microBatch) + "}";
    std::string name = emitConstTable(
        builder, loc, "tessera_pipeline_tasks_" + std::to_string(device),
        "tessera_pipeline_task", tasks.size(), text + "}");
    lists += (device ? ", " : "") + name;
    counts.push_back(static_cast<int32_t>(tasks.size()));
  }
  std::string taskLists =
      emitConstTable(builder, loc, "tessera_pipeline_tasks",
                     "tessera_pipeline_task *const", program.tasks.size(),
                     lists + "}");
  std::string taskCounts =
      emitConstTable(builder, loc, "tessera_pipeline_task_counts", "int32_t",
                     counts.size(), indexInitializer(counts));

  std::string partialAxes = "NULL";
  if (llvm::any_of(program.gradientPartialAxes,
                   [](int32_t axes) { return axes != 0; }))
    partialAxes = emitConstTable(builder, loc,
                                 "tessera_pipeline_gradient_partial_axes",
                                 "int32_t", program.gradientPartialAxes.size(),
                                 indexInitializer(program.gradientPartialAxes));

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{\n    /*stages=*/" << program.stages
     << ",\n    /*virtual_stages=*/" << program.virtualStages
     << ",\n    /*micro_batches=*/" << program.microBatches
     << ",\n    /*schedule=*/" << cStringLiteral(program.schedule)
     << ",\n    /*forwards=*/" << forwards << ",\n    /*backwards=*/"
     << backwards << ",\n    /*task_counts=*/" << taskCounts
     << ",\n    /*tasks=*/" << taskLists << ",\n    /*prepares=*/" << prepares
     << ",\n    /*gradient_partial_axes=*/" << partialAxes << "}";
  MLIRContext *context = builder.getContext();
  emitc::GlobalOp::create(builder, loc, "tessera_pipeline_definition",
                          emitc::OpaqueType::get(context, "tessera_pipeline"),
                          emitc::OpaqueAttr::get(context, text),
                          /*extern_specifier=*/false,
                          /*static_specifier=*/true,
                          /*const_specifier=*/true);
  return "&tessera_pipeline_definition";
}

} // namespace tessera::lowering
