//===- BuildTraining.cpp - tess-build-training ----------------------------===//
//
// Reverse-mode automatic differentiation of @forward into
// @forward_backward, plus the AdamW update as @optimizer_step. See the
// pass's description in Passes.td for the functions' signatures.
//
// The forward is copied rather than rewritten: @forward stays usable for
// inference, and the copy can be retyped to the compute precision and have
// its parameters turned into arguments without touching the original.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "VocabularyPadding.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace tessera {
#define GEN_PASS_DEF_BUILDTRAINING
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// One `tess.parameter` name of the forward, with the type it is declared
/// with there.
struct ParameterInfo {
  std::string name;
  RankedTensorType declaredType;
  bool trainable;
};

RankedTensorType tensorType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

struct BuildTrainingPass
    : tessera::impl::BuildTrainingBase<BuildTrainingPass> {
  using BuildTrainingBase::BuildTrainingBase;

  void runOnOperation() override;

private:
  /// Checks the options; sets `computeType`.
  LogicalResult parseOptions();
  /// Checks @forward's signature and that the functions to build are new.
  LogicalResult checkForward(func::FuncOp forward);
  /// The forward's parameters by name, in program order.
  FailureOr<SmallVector<ParameterInfo>> collectParameters(func::FuncOp forward);
  /// `type` as the training step computes it: f32 becomes the compute type.
  Type computeTypeOf(Type type) const;
  FailureOr<func::FuncOp>
  buildForwardBackward(func::FuncOp forward,
                       ArrayRef<ParameterInfo> parameters);
  void buildOptimizerStep(func::FuncOp forwardBackward,
                          ArrayRef<ParameterInfo> parameters);

  FloatType computeType;
};

LogicalResult BuildTrainingPass::parseOptions() {
  MLIRContext *context = &getContext();
  if (loss != "causal-lm" && loss != "mlm")
    return getOperation().emitError("tess-build-training: loss must be "
                                    "causal-lm or mlm, got '")
           << loss << "'";
  if (precision == "fp32")
    computeType = Float32Type::get(context);
  else if (precision == "bf16")
    computeType = BFloat16Type::get(context);
  else if (precision == "fp16")
    computeType = Float16Type::get(context);
  else
    return getOperation().emitError("tess-build-training: precision must be "
                                    "fp32, bf16 or fp16, got '")
           << precision << "'";
  return success();
}

LogicalResult BuildTrainingPass::checkForward(func::FuncOp forward) {
  FunctionType type = forward.getFunctionType();
  auto describe = [&]() -> LogicalResult {
    return forward.emitError("@forward must take the token ids (one integer "
                             "tensor [B, T]) and return the logits "
                             "[B, T, V], got ")
           << type;
  };
  if (forward.isExternal() || !forward.getBody().hasOneBlock())
    return forward.emitError("@forward must have a body of one block");
  if (type.getNumInputs() != 1 || type.getNumResults() != 1)
    return describe();
  auto ids = llvm::dyn_cast<RankedTensorType>(type.getInput(0));
  auto logits = llvm::dyn_cast<RankedTensorType>(type.getResult(0));
  if (!ids || !logits || !llvm::isa<IntegerType>(ids.getElementType()) ||
      !llvm::isa<FloatType>(logits.getElementType()) ||
      logits.getRank() != ids.getRank() + 1 ||
      logits.getShape().drop_back() != ids.getShape())
    return describe();
  ModuleOp module = getOperation();
  for (StringRef name : {"forward_backward", "optimizer_step"})
    if (Operation *existing = module.lookupSymbol(name))
      return existing->emitError("tess-build-training builds @")
             << name << ", which already exists";
  return success();
}

FailureOr<SmallVector<ParameterInfo>>
BuildTrainingPass::collectParameters(func::FuncOp forward) {
  SmallVector<ParameterInfo> parameters;
  llvm::StringMap<size_t> byName;
  WalkResult walk = forward.walk([&](tess::ParameterOp parameter) {
    std::string name = parameter.getName().str();
    auto [entry, inserted] = byName.try_emplace(name, parameters.size());
    if (inserted) {
      if (parameter.getTrainable() &&
          !llvm::isa<FloatType>(parameter.getType().getElementType())) {
        parameter.emitError("trainable parameter '")
            << name << "' must be a float tensor, got " << parameter.getType();
        return WalkResult::interrupt();
      }
      parameters.push_back(
          {name, parameter.getType(), parameter.getTrainable()});
      return WalkResult::advance();
    }
    // A name read twice must describe one tensor.
    const ParameterInfo &first = parameters[entry->second];
    if (first.declaredType != parameter.getType() ||
        first.trainable != parameter.getTrainable()) {
      parameter.emitError("parameter '")
          << name << "' is declared twice with different types or "
          << "trainability";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return parameters;
}

Type BuildTrainingPass::computeTypeOf(Type type) const {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return type;
  return RankedTensorType::get(tensor.getShape(), computeType);
}

/// The f32 master-weight type of a trainable parameter.
RankedTensorType masterType(const ParameterInfo &parameter) {
  return RankedTensorType::get(parameter.declaredType.getShape(),
                               Float32Type::get(parameter.declaredType.getContext()));
}

FailureOr<func::FuncOp>
BuildTrainingPass::buildForwardBackward(func::FuncOp forward,
                                        ArrayRef<ParameterInfo> parameters) {
  MLIRContext *context = &getContext();
  Location loc = forward.getLoc();
  Type idsType = forward.getFunctionType().getInput(0);
  auto lossType = RankedTensorType::get({}, Float32Type::get(context));

  // Signature: trainable parameters, buffers, ids, targets, loss scale ->
  // loss, one gradient per trainable parameter.
  SmallVector<Type> argumentTypes, resultTypes = {lossType};
  SmallVector<const ParameterInfo *> trainable, buffers;
  for (const ParameterInfo &parameter : parameters)
    (parameter.trainable ? trainable : buffers).push_back(&parameter);
  for (const ParameterInfo *parameter : trainable) {
    argumentTypes.push_back(masterType(*parameter));
    resultTypes.push_back(computeTypeOf(parameter->declaredType));
  }
  for (const ParameterInfo *parameter : buffers)
    argumentTypes.push_back(parameter->declaredType);
  argumentTypes.append({idsType, idsType, lossType});

  OpBuilder builder(context);
  builder.setInsertionPointAfter(forward);
  auto function = func::FuncOp::create(
      builder, loc, "forward_backward",
      FunctionType::get(context, argumentTypes, resultTypes));
  function->setAttr("tess.loss", builder.getStringAttr(loss));
  function->setAttr("tess.precision", builder.getStringAttr(precision));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToStart(body);

  // Arguments and their names for the runtime.
  unsigned argument = 0;
  llvm::StringMap<Value> parameterValues;
  SmallVector<Value> trainableValues;
  auto bindParameter = [&](const ParameterInfo &parameter, StringRef role) {
    function.setArgAttr(argument, role, builder.getStringAttr(parameter.name));
    Value value = body->getArgument(argument++);
    Type working = computeTypeOf(parameter.declaredType);
    if (value.getType() != working)
      value = tess::CastOp::create(builder, loc, working, value);
    parameterValues[parameter.name] = value;
    return value;
  };
  for (const ParameterInfo *parameter : trainable)
    trainableValues.push_back(bindParameter(*parameter, "tess.parameter"));
  for (const ParameterInfo *parameter : buffers)
    bindParameter(*parameter, "tess.buffer");
  for (StringRef input : {"input_ids", "targets", "loss_scale"})
    function.setArgAttr(argument++, "tess.input",
                        builder.getStringAttr(input));
  Value ids = body->getArgument(argument - 3);
  Value targets = body->getArgument(argument - 2);
  Value lossScale = body->getArgument(argument - 1);

  // The forward, retyped to the compute type, parameters replaced by the
  // arguments, each random op given its own stream.
  IRMapping mapping;
  mapping.map(forward.getArgument(0), ids);
  Value logits;
  int64_t nextSeed = 0;
  for (Operation &op : forward.getBody().front()) {
    if (auto parameter = dyn_cast<tess::ParameterOp>(op)) {
      mapping.map(parameter.getResult(),
                  parameterValues.lookup(parameter.getName()));
      continue;
    }
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      logits = mapping.lookup(returnOp.getOperand(0));
      continue;
    }
    Operation *copy = builder.clone(op, mapping);
    if (isa<tess::ConstantOp>(copy)) {
      // The value attribute fixes a constant's type: cast it instead.
      Value constant = copy->getResult(0);
      Type working = computeTypeOf(constant.getType());
      if (working != constant.getType())
        mapping.map(op.getResult(0),
                    tess::CastOp::create(builder, copy->getLoc(), working,
                                         constant));
      continue;
    }
    for (OpResult result : copy->getResults())
      result.setType(computeTypeOf(result.getType()));
    if (auto dropout = dyn_cast<tess::DropoutOp>(copy))
      dropout.setSeed(nextSeed++);
    else if (auto attention = dyn_cast<tess::AttentionOp>(copy);
             attention && attention.getDropout().convertToDouble() > 0)
      attention.setSeed(nextSeed++);
  }
  // The loss reads the logits in the compute type: its kernels convert each
  // element to f32 and do all their arithmetic in f32, the same numbers as
  // a cast first, and its gradient comes out in the logits' type. A cast
  // would write an f32 copy of the [tokens, vocabulary] logits, and the
  // backward another of their gradient: a tenth of a GPT-2 124M step.
  // An aligned class dim for the head's GEMMs (VocabularyPadding.h); the
  // runtime still checks token ids against the model's vocabulary.
  int64_t classes = tensorType(logits).getShape().back();
  logits = padVocabulary(builder, logits, vocabularyMultiple);
  if (tensorType(logits).getShape().back() != classes)
    function->setAttr("tess.vocabulary", builder.getI64IntegerAttr(classes));
  Value lossValue =
      tess::CrossEntropyOp::create(builder, loc, logits, targets,
                                   ignoreIndex);

  // Which values depend on a trainable parameter: only their cotangents are
  // wanted, and only ops between them and the loss need a VJP.
  llvm::DenseSet<Value> active(trainableValues.begin(), trainableValues.end());
  SmallVector<Operation *> forwardOps;
  for (Operation &op : *body) {
    forwardOps.push_back(&op);
    if (llvm::none_of(op.getOperands(),
                      [&](Value operand) { return active.contains(operand); }))
      continue;
    for (Value result : op.getResults())
      if (auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
          type && llvm::isa<FloatType>(type.getElementType()))
        active.insert(result);
  }

  // The backward: ops in reverse, each turning its results' cotangents into
  // its operands', summed where a value has several uses.
  llvm::DenseMap<Value, Value> cotangents;
  cotangents[lossValue] = lossScale;
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultCotangents;
    for (Value result : op->getResults())
      resultCotangents.push_back(cotangents.lookup(result));
    if (llvm::all_of(resultCotangents, [](Value dy) { return !dy; }) ||
        llvm::none_of(op->getOperands(), [&](Value operand) {
          return active.contains(operand);
        }))
      continue;
    auto differentiable = dyn_cast<tess::DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitError("op '")
             << op->getName() << "' has no VJP; cannot differentiate "
             << op->getLoc();
    SmallVector<Value> operandCotangents;
    if (failed(differentiable.buildVjp(builder, resultCotangents,
                                       operandCotangents)))
      return failure();
    for (auto [operand, cotangent] :
         llvm::zip_equal(op->getOperands(), operandCotangents)) {
      if (!cotangent || !active.contains(operand))
        continue;
      if (cotangent.getType() != operand.getType())
        return op->emitError("the VJP of '")
               << op->getName() << "' built a cotangent of type "
               << cotangent.getType() << " for an operand of type "
               << operand.getType();
      Value &sum = cotangents[operand];
      sum = sum ? tess::AddOp::create(builder, op->getLoc(), sum, cotangent)
                      .getResult()
                : cotangent;
    }
  }

  // A parameter that does not reach the loss has a zero gradient.
  SmallVector<Value> results = {lossValue};
  for (Value parameter : trainableValues) {
    Value gradient = cotangents.lookup(parameter);
    if (!gradient) {
      RankedTensorType type = tensorType(parameter);
      gradient = tess::ConstantOp::create(
          builder, loc, type,
          DenseElementsAttr::get(type, FloatAttr::get(type.getElementType(),
                                                      0.0)));
    }
    results.push_back(gradient);
  }
  func::ReturnOp::create(builder, loc, results);
  for (auto [index, parameter] : llvm::enumerate(trainable))
    function.setResultAttr(index + 1, "tess.gradient",
                           builder.getStringAttr(parameter->name));

  // VJPs build every operand's cotangent; drop those nobody needed (the
  // cotangents of constants, the ids' casts, ...).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return function;
}

void BuildTrainingPass::buildOptimizerStep(func::FuncOp forwardBackward,
                                           ArrayRef<ParameterInfo> parameters) {
  MLIRContext *context = &getContext();
  Location loc = forwardBackward.getLoc();
  SmallVector<const ParameterInfo *> trainable;
  for (const ParameterInfo &parameter : parameters)
    if (parameter.trainable)
      trainable.push_back(&parameter);
  size_t count = trainable.size();

  // Arguments: params, grads, m, v (one each per parameter), lr, step,
  // grad_scale. Results: params', m', v'.
  SmallVector<Type> argumentTypes, resultTypes;
  for (const ParameterInfo *parameter : trainable)
    argumentTypes.push_back(masterType(*parameter));
  for (const ParameterInfo *parameter : trainable)
    argumentTypes.push_back(computeTypeOf(parameter->declaredType));
  for (int moment = 0; moment < 2; ++moment)
    for (const ParameterInfo *parameter : trainable)
      argumentTypes.push_back(masterType(*parameter));
  auto f32Scalar = RankedTensorType::get({}, Float32Type::get(context));
  argumentTypes.append(
      {f32Scalar, RankedTensorType::get({}, IntegerType::get(context, 64)),
       f32Scalar});
  for (int state = 0; state < 3; ++state)
    for (const ParameterInfo *parameter : trainable)
      resultTypes.push_back(masterType(*parameter));

  OpBuilder builder(context);
  builder.setInsertionPointAfter(forwardBackward);
  auto function = func::FuncOp::create(
      builder, loc, "optimizer_step",
      FunctionType::get(context, argumentTypes, resultTypes));
  Block *body = function.addEntryBlock();
  builder.setInsertionPointToStart(body);

  StringRef roles[] = {"tess.parameter", "tess.gradient", "tess.first_moment",
                       "tess.second_moment"};
  for (auto [group, role] : llvm::enumerate(roles))
    for (auto [index, parameter] : llvm::enumerate(trainable))
      function.setArgAttr(group * count + index, role,
                          builder.getStringAttr(parameter->name));
  unsigned scalars = 4 * count;
  StringRef inputs[] = {"lr", "step", "grad_scale"};
  for (auto [offset, input] : llvm::enumerate(inputs))
    function.setArgAttr(scalars + offset, "tess.input",
                        builder.getStringAttr(input));

  SmallVector<Value> newParameters, newFirst, newSecond;
  for (size_t index = 0; index < count; ++index) {
    auto update = tess::AdamWOp::create(
        builder, loc, body->getArgument(index),
        body->getArgument(count + index), body->getArgument(2 * count + index),
        body->getArgument(3 * count + index), body->getArgument(scalars),
        body->getArgument(scalars + 1), body->getArgument(scalars + 2),
        APFloat(static_cast<double>(beta1)),
        APFloat(static_cast<double>(beta2)),
        APFloat(static_cast<double>(adamEpsilon)),
        APFloat(static_cast<double>(weightDecay)));
    newParameters.push_back(update.getNewParam());
    newFirst.push_back(update.getNewM());
    newSecond.push_back(update.getNewV());
  }
  SmallVector<Value> results(newParameters);
  llvm::append_range(results, newFirst);
  llvm::append_range(results, newSecond);
  func::ReturnOp::create(builder, loc, results);
  StringRef resultRoles[] = {roles[0], roles[2], roles[3]};
  for (auto [group, role] : llvm::enumerate(resultRoles))
    for (auto [index, parameter] : llvm::enumerate(trainable))
      function.setResultAttr(group * count + index, role,
                             builder.getStringAttr(parameter->name));
}

void BuildTrainingPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(parseOptions()))
    return signalPassFailure();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    module.emitError("tess-build-training needs a func.func @forward");
    return signalPassFailure();
  }
  if (failed(checkForward(forward)))
    return signalPassFailure();
  FailureOr<SmallVector<ParameterInfo>> parameters =
      collectParameters(forward);
  if (failed(parameters))
    return signalPassFailure();
  FailureOr<func::FuncOp> forwardBackward =
      buildForwardBackward(forward, *parameters);
  if (failed(forwardBackward))
    return signalPassFailure();
  buildOptimizerStep(*forwardBackward, *parameters);
}

} // namespace
