//===- Interpreter.cpp - run tess IR on the CPU kernels ------------------===//
//
// One case per op: fetch operand buffers, allocate zeroed results of the
// op's static types, call the kernel with the op's attributes. The mapping
// from op to kernel is the same one the lowering to runtime calls uses, so
// what is tested here is what the executable runs.
//
//===----------------------------------------------------------------------===//

#include "tessera/Execution/Interpreter.h"

#include "Tess/IR/TessOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera::execution;
namespace tess = tessera::tess;

namespace {

class FunctionRun {
public:
  FunctionRun(const WeightLookup &weights, uint64_t stepSeed)
      : weights(weights), stepSeed(stepSeed) {}

  llvm::Error bind(Value value, HostTensorBuffer buffer) {
    slot(value) = std::move(buffer);
    return llvm::Error::success();
  }

  llvm::Error execute(Operation &op);

  llvm::Expected<HostTensorBuffer *> lookup(Value value) {
    auto it = values.find(value);
    if (it == values.end())
      return llvm::createStringError("value used before it was computed");
    return it->second.get();
  }

private:
  /// Allocates the results of `op` and returns their buffers.
  llvm::Expected<SmallVector<HostTensorBuffer *>> allocateResults(Operation &op);
  llvm::Error kernelError(Operation &op, int status);
  llvm::Error opError(Operation &op, const Twine &message);

  template <typename Kernel>
  llvm::Error unary(Operation &op, int32_t kind, Kernel kernel);
  llvm::Error binary(Operation &op, int32_t kind);
  llvm::Error reduce(Operation &op, int32_t kind, ArrayRef<int64_t> dims);
  llvm::Error parameter(tess::ParameterOp op);

  /// Descriptors of several operands (null entries for absent ones).
  llvm::Expected<SmallVector<const tessera_tensor *>>
  operands(ArrayRef<Value> list) {
    SmallVector<const tessera_tensor *> descriptors;
    for (Value value : list) {
      llvm::Expected<const tessera_tensor *> descriptor = operand(value);
      if (!descriptor)
        return descriptor.takeError();
      descriptors.push_back(*descriptor);
    }
    return descriptors;
  }
  llvm::Error unaryGrad(Operation &op, int32_t kind);

  /// The descriptor of an operand's buffer, or null for an absent optional
  /// operand.
  llvm::Expected<const tessera_tensor *> operand(Value value);

  const WeightLookup &weights;
  uint64_t stepSeed;
  /// Buffers live behind pointers: kernels get descriptors into them while
  /// results are being added to the map, which may rehash it.
  llvm::DenseMap<Value, std::unique_ptr<HostTensorBuffer>> values;
  HostTensorBuffer &slot(Value value) {
    std::unique_ptr<HostTensorBuffer> &buffer = values[value];
    if (!buffer)
      buffer = std::make_unique<HostTensorBuffer>();
    return *buffer;
  }
};

llvm::Error FunctionRun::opError(Operation &op, const Twine &message) {
  std::string location;
  llvm::raw_string_ostream os(location);
  op.getLoc().print(os);
  return llvm::createStringError("'" + op.getName().getStringRef().str() +
                                 "' at " + location + ": " + message.str());
}

llvm::Error FunctionRun::kernelError(Operation &op, int status) {
  if (status == 0)
    return llvm::Error::success();
  return opError(op, tessera_cpu_last_error());
}

llvm::Expected<const tessera_tensor *> FunctionRun::operand(Value value) {
  if (!value)
    return nullptr;
  llvm::Expected<HostTensorBuffer *> buffer = lookup(value);
  if (!buffer)
    return buffer.takeError();
  return (*buffer)->constDescriptor();
}

llvm::Expected<SmallVector<HostTensorBuffer *>>
FunctionRun::allocateResults(Operation &op) {
  SmallVector<HostTensorBuffer *> results;
  for (Value result : op.getResults()) {
    llvm::Expected<HostTensorBuffer> buffer =
        HostTensorBuffer::zeros(llvm::cast<RankedTensorType>(result.getType()));
    if (!buffer)
      return opError(op, llvm::toString(buffer.takeError()));
    slot(result) = std::move(*buffer);
  }
  for (Value result : op.getResults())
    results.push_back(&slot(result));
  return results;
}

template <typename Kernel>
llvm::Error FunctionRun::unary(Operation &op, int32_t kind, Kernel kernel) {
  auto input = operand(op.getOperand(0));
  if (!input)
    return input.takeError();
  auto results = allocateResults(op);
  if (!results)
    return results.takeError();
  tessera_tensor output = (*results)[0]->descriptor();
  return kernelError(op, kernel(kind, *input, &output));
}

llvm::Error FunctionRun::unaryGrad(Operation &op, int32_t kind) {
  auto inputs = operands({op.getOperand(0), op.getOperand(1)});
  if (!inputs)
    return inputs.takeError();
  auto results = allocateResults(op);
  if (!results)
    return results.takeError();
  tessera_tensor dx = (*results)[0]->descriptor();
  return kernelError(op, tessera_cpu_unary_grad(kind, (*inputs)[0],
                                                (*inputs)[1], &dx));
}

/// Views [..., V] as [N, V]: the cross-entropy kernels take rows.
tessera_tensor flattenRows(tessera_tensor tensor) {
  int64_t rows = 1;
  for (int32_t i = 0; i + 1 < tensor.rank; ++i)
    rows *= tensor.shape[i];
  int64_t width = tensor.rank ? tensor.shape[tensor.rank - 1] : 1;
  tensor.rank = 2;
  tensor.shape[0] = rows;
  tensor.shape[1] = width;
  return tensor;
}
tessera_tensor flattenRows(const tessera_tensor *tensor) {
  return flattenRows(*tensor);
}

/// Views any tensor as rank 1.
tessera_tensor flattenAll(const tessera_tensor *tensor) {
  tessera_tensor flat = *tensor;
  int64_t count = 1;
  for (int32_t i = 0; i < flat.rank; ++i)
    count *= flat.shape[i];
  flat.rank = 1;
  flat.shape[0] = count;
  return flat;
}

llvm::Error FunctionRun::binary(Operation &op, int32_t kind) {
  auto lhs = operand(op.getOperand(0));
  if (!lhs)
    return lhs.takeError();
  auto rhs = operand(op.getOperand(1));
  if (!rhs)
    return rhs.takeError();
  auto results = allocateResults(op);
  if (!results)
    return results.takeError();
  tessera_tensor output = (*results)[0]->descriptor();
  return kernelError(op, tessera_cpu_binary(kind, *lhs, *rhs, &output));
}

llvm::Error FunctionRun::reduce(Operation &op, int32_t kind,
                                ArrayRef<int64_t> dims) {
  auto input = operand(op.getOperand(0));
  if (!input)
    return input.takeError();
  int64_t rank = llvm::cast<RankedTensorType>(op.getOperand(0).getType())
                     .getRank();
  SmallVector<int64_t> normalized;
  for (int64_t dim : dims)
    normalized.push_back(*tess::normalizeAxis(dim, rank));
  llvm::sort(normalized);
  auto results = allocateResults(op);
  if (!results)
    return results.takeError();
  tessera_tensor output = (*results)[0]->descriptor();
  return kernelError(op, tessera_cpu_reduce(kind, *input, &output,
                                            normalized.data(),
                                            normalized.size()));
}

llvm::Error FunctionRun::parameter(tess::ParameterOp op) {
  auto type = llvm::cast<RankedTensorType>(op.getType());
  if (std::optional<ElementsAttr> value = op.getValue()) {
    llvm::Expected<HostTensorBuffer> buffer =
        HostTensorBuffer::fromAttribute(*value);
    if (!buffer)
      return opError(*op, llvm::toString(buffer.takeError()));
    slot(op.getResult()) = std::move(*buffer);
    return llvm::Error::success();
  }
  if (!weights)
    return opError(*op, "parameter '" + op.getName() +
                            "' has no value and no weights were given");
  llvm::Expected<HostTensorBuffer> buffer = weights(op.getName(), type);
  if (!buffer)
    return opError(*op, llvm::toString(buffer.takeError()));
  slot(op.getResult()) = std::move(*buffer);
  return llvm::Error::success();
}

int32_t comparisonKind(tess::ComparisonPredicate predicate) {
  switch (predicate) {
  case tess::ComparisonPredicate::eq:
    return TESSERA_EQ;
  case tess::ComparisonPredicate::ne:
    return TESSERA_NE;
  case tess::ComparisonPredicate::lt:
    return TESSERA_LT;
  case tess::ComparisonPredicate::le:
    return TESSERA_LE;
  case tess::ComparisonPredicate::gt:
    return TESSERA_GT;
  case tess::ComparisonPredicate::ge:
    return TESSERA_GE;
  }
  return TESSERA_EQ;
}

/// Mixes an op's seed attribute with the step's seed (SplitMix64 finalizer),
/// so that each step and each random op draws its own stream.
uint64_t mixSeed(uint64_t stepSeed, uint64_t opSeed) {
  uint64_t z = stepSeed * 0x9E3779B97F4A7C15ull + opSeed + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

llvm::Error FunctionRun::execute(Operation &op) {
  auto runUnary = [&](int32_t kind) {
    return unary(op, kind, tessera_cpu_unary);
  };
  return llvm::TypeSwitch<Operation *, llvm::Error>(&op)
      .Case([&](tess::ConstantOp constant) -> llvm::Error {
        llvm::Expected<HostTensorBuffer> buffer =
            HostTensorBuffer::fromAttribute(constant.getValue());
        if (!buffer)
          return opError(op, llvm::toString(buffer.takeError()));
        slot(constant.getResult()) = std::move(*buffer);
        return llvm::Error::success();
      })
      .Case([&](tess::ParameterOp parameterOp) { return parameter(parameterOp); })
      .Case([&](tess::NegOp) { return runUnary(TESSERA_NEG); })
      .Case([&](tess::AbsOp) { return runUnary(TESSERA_ABS); })
      .Case([&](tess::ExpOp) { return runUnary(TESSERA_EXP); })
      .Case([&](tess::LogOp) { return runUnary(TESSERA_LOG); })
      .Case([&](tess::SqrtOp) { return runUnary(TESSERA_SQRT); })
      .Case([&](tess::RsqrtOp) { return runUnary(TESSERA_RSQRT); })
      .Case([&](tess::ReciprocalOp) { return runUnary(TESSERA_RECIPROCAL); })
      .Case([&](tess::TanhOp) { return runUnary(TESSERA_TANH); })
      .Case([&](tess::ErfOp) { return runUnary(TESSERA_ERF); })
      .Case([&](tess::SigmoidOp) { return runUnary(TESSERA_SIGMOID); })
      .Case([&](tess::ReluOp) { return runUnary(TESSERA_RELU); })
      .Case([&](tess::SiluOp) { return runUnary(TESSERA_SILU); })
      .Case([&](tess::CosOp) { return runUnary(TESSERA_COS); })
      .Case([&](tess::SinOp) { return runUnary(TESSERA_SIN); })
      .Case([&](tess::LogicalNotOp) { return runUnary(TESSERA_LOGICAL_NOT); })
      .Case([&](tess::GeluOp gelu) {
        return runUnary(gelu.getApproximation() ==
                                tess::GeluApproximation::tanh
                            ? TESSERA_GELU_TANH
                            : TESSERA_GELU_ERF);
      })
      .Case([&](tess::AddOp) { return binary(op, TESSERA_ADD); })
      .Case([&](tess::SubOp) { return binary(op, TESSERA_SUB); })
      .Case([&](tess::MulOp) { return binary(op, TESSERA_MUL); })
      .Case([&](tess::DivOp) { return binary(op, TESSERA_DIV); })
      .Case([&](tess::PowOp) { return binary(op, TESSERA_POW); })
      .Case([&](tess::MaximumOp) { return binary(op, TESSERA_MAXIMUM); })
      .Case([&](tess::MinimumOp) { return binary(op, TESSERA_MINIMUM); })
      .Case([&](tess::LogicalAndOp) { return binary(op, TESSERA_LOGICAL_AND); })
      .Case([&](tess::LogicalOrOp) { return binary(op, TESSERA_LOGICAL_OR); })
      .Case([&](tess::CompareOp compare) {
        return binary(op, comparisonKind(compare.getPredicate()));
      })
      .Case([&](tess::WhereOp where) -> llvm::Error {
        auto condition = operand(where.getCondition());
        auto onTrue = condition ? operand(where.getOnTrue())
                                : llvm::Expected<const tessera_tensor *>(nullptr);
        auto onFalse = onTrue ? operand(where.getOnFalse())
                              : llvm::Expected<const tessera_tensor *>(nullptr);
        if (!condition)
          return condition.takeError();
        if (!onTrue)
          return onTrue.takeError();
        if (!onFalse)
          return onFalse.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        return kernelError(
            op, tessera_cpu_where(*condition, *onTrue, *onFalse, &output));
      })
      .Case([&](tess::CastOp) {
        return unary(op, 0, [](int32_t, const tessera_tensor *x,
                               tessera_tensor *y) {
          return tessera_cpu_cast(x, y);
        });
      })
      .Case([&](tess::DropoutOp dropout) {
        double rate = dropout.getRate().convertToDouble();
        uint64_t seed = mixSeed(stepSeed, dropout.getSeed());
        return unary(op, 0, [&](int32_t, const tessera_tensor *x,
                                tessera_tensor *y) {
          return tessera_cpu_dropout(x, y, rate, seed);
        });
      })
      .Case([&](tess::ReshapeOp) {
        return unary(op, 0, [](int32_t, const tessera_tensor *x,
                               tessera_tensor *y) {
          return tessera_cpu_copy(x, y);
        });
      })
      .Case([&](tess::BroadcastOp) {
        return unary(op, 0, [](int32_t, const tessera_tensor *x,
                               tessera_tensor *y) {
          return tessera_cpu_broadcast(x, y);
        });
      })
      .Case([&](tess::TransposeOp transpose) {
        ArrayRef<int64_t> permutation = transpose.getPermutation();
        return unary(op, 0, [&](int32_t, const tessera_tensor *x,
                                tessera_tensor *y) {
          return tessera_cpu_transpose(x, y, permutation.data());
        });
      })
      .Case([&](tess::SliceOp slice) {
        ArrayRef<int64_t> starts = slice.getStarts(),
                          strides = slice.getStrides();
        return unary(op, 0, [&](int32_t, const tessera_tensor *x,
                                tessera_tensor *y) {
          return tessera_cpu_slice(x, y, starts.data(), strides.data());
        });
      })
      .Case([&](tess::SoftmaxOp softmax) {
        int64_t axis = *tess::normalizeAxis(
            softmax.getAxis(), softmax.getInput().getType().getRank());
        return unary(op, 0, [&](int32_t, const tessera_tensor *x,
                                tessera_tensor *y) {
          return tessera_cpu_softmax(x, y, axis);
        });
      })
      .Case([&](tess::MatmulOp matmul) -> llvm::Error {
        auto lhs = operand(matmul.getLhs());
        if (!lhs)
          return lhs.takeError();
        auto rhs = operand(matmul.getRhs());
        if (!rhs)
          return rhs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        return kernelError(op, tessera_cpu_matmul(*lhs, *rhs, &output,
                                                  matmul.getTransposeLhs(),
                                                  matmul.getTransposeRhs()));
      })
      .Case([&](tess::LinearOp linear) -> llvm::Error {
        auto input = operand(linear.getInput());
        if (!input)
          return input.takeError();
        auto weight = operand(linear.getWeight());
        if (!weight)
          return weight.takeError();
        auto bias = operand(linear.getBias());
        if (!bias)
          return bias.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        return kernelError(op, tessera_cpu_linear(*input, *weight, *bias,
                                                  &output,
                                                  linear.getTransposeWeight()));
      })
      .Case([&](tess::LayerNormOp norm) -> llvm::Error {
        auto input = operand(norm.getInput());
        if (!input)
          return input.takeError();
        auto scale = operand(norm.getScale());
        if (!scale)
          return scale.takeError();
        auto bias = operand(norm.getBias());
        if (!bias)
          return bias.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            norm.getAxis(), norm.getInput().getType().getRank());
        return kernelError(op, tessera_cpu_layer_norm(
                                   *input, *scale, *bias, &output, axis,
                                   norm.getEpsilon().convertToDouble()));
      })
      .Case([&](tess::RmsNormOp norm) -> llvm::Error {
        auto input = operand(norm.getInput());
        if (!input)
          return input.takeError();
        auto scale = operand(norm.getScale());
        if (!scale)
          return scale.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            norm.getAxis(), norm.getInput().getType().getRank());
        return kernelError(op, tessera_cpu_rms_norm(
                                   *input, *scale, &output, axis,
                                   norm.getEpsilon().convertToDouble()));
      })
      .Case([&](tess::EmbeddingOp embedding) -> llvm::Error {
        auto table = operand(embedding.getTable());
        if (!table)
          return table.takeError();
        auto ids = operand(embedding.getIndices());
        if (!ids)
          return ids.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        return kernelError(op, tessera_cpu_embedding(*table, *ids, &output));
      })
      .Case([&](tess::GatherOp gather) -> llvm::Error {
        auto input = operand(gather.getInput());
        if (!input)
          return input.takeError();
        auto indices = operand(gather.getIndices());
        if (!indices)
          return indices.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            gather.getAxis(),
            llvm::cast<RankedTensorType>(gather.getInput().getType())
                .getRank());
        return kernelError(op,
                           tessera_cpu_gather(*input, *indices, &output, axis));
      })
      .Case([&](tess::AttentionOp attention) -> llvm::Error {
        auto query = operand(attention.getQuery());
        if (!query)
          return query.takeError();
        auto key = operand(attention.getKey());
        if (!key)
          return key.takeError();
        auto value = operand(attention.getValue());
        if (!value)
          return value.takeError();
        auto mask = operand(attention.getMask());
        if (!mask)
          return mask.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        return kernelError(
            op, tessera_cpu_attention(
                    *query, *key, *value, *mask, &output,
                    attention.getCausal(), attention.getScale().convertToDouble(),
                    attention.getDropout().convertToDouble(),
                    mixSeed(stepSeed, attention.getSeed())));
      })
      .Case([&](tess::CrossEntropyOp loss) -> llvm::Error {
        auto inputs = operands({loss.getLogits(), loss.getTargets()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor logits = flattenRows((*inputs)[0]);
        tessera_tensor targets = flattenAll((*inputs)[1]);
        tessera_tensor output = (*results)[0]->descriptor();
        return kernelError(op, tessera_cpu_cross_entropy(
                                   &logits, &targets, &output,
                                   loss.getIgnoreIndex()));
      })
      .Case([&](tess::CrossEntropyGradOp grad) -> llvm::Error {
        auto inputs = operands(
            {grad.getLogits(), grad.getTargets(), grad.getDloss()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor logits = flattenRows((*inputs)[0]);
        tessera_tensor targets = flattenAll((*inputs)[1]);
        tessera_tensor output = flattenRows((*results)[0]->descriptor());
        return kernelError(op, tessera_cpu_cross_entropy_grad(
                                   &logits, &targets, (*inputs)[2], &output,
                                   grad.getIgnoreIndex()));
      })
      .Case([&](tess::GeluGradOp grad) {
        return unaryGrad(op, grad.getApproximation() ==
                                     tess::GeluApproximation::tanh
                                 ? TESSERA_GELU_TANH
                                 : TESSERA_GELU_ERF);
      })
      .Case([&](tess::SiluGradOp) { return unaryGrad(op, TESSERA_SILU); })
      .Case([&](tess::LayerNormGradOp grad) -> llvm::Error {
        auto inputs = operands({grad.getInput(), grad.getScale(), grad.getDy()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor dx = (*results)[0]->descriptor();
        std::optional<tessera_tensor> dscale, dbias;
        if (grad.getDscale())
          dscale = slot(grad.getDscale()).descriptor();
        if (grad.getDbias())
          dbias = slot(grad.getDbias()).descriptor();
        int64_t axis = *tess::normalizeAxis(
            grad.getAxis(),
            llvm::cast<RankedTensorType>(grad.getInput().getType()).getRank());
        return kernelError(op, tessera_cpu_layer_norm_grad(
                                   (*inputs)[0], (*inputs)[1], (*inputs)[2],
                                   &dx, dscale ? &*dscale : nullptr,
                                   dbias ? &*dbias : nullptr, axis,
                                   grad.getEpsilon().convertToDouble()));
      })
      .Case([&](tess::RmsNormGradOp grad) -> llvm::Error {
        auto inputs = operands({grad.getInput(), grad.getScale(), grad.getDy()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor dx = (*results)[0]->descriptor();
        std::optional<tessera_tensor> dscale;
        if (grad.getScale())
          dscale = (*results)[1]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            grad.getAxis(),
            llvm::cast<RankedTensorType>(grad.getInput().getType()).getRank());
        return kernelError(op, tessera_cpu_rms_norm_grad(
                                   (*inputs)[0], (*inputs)[1], (*inputs)[2],
                                   &dx, dscale ? &*dscale : nullptr, axis,
                                   grad.getEpsilon().convertToDouble()));
      })
      .Case([&](tess::SoftmaxGradOp grad) -> llvm::Error {
        auto inputs = operands({grad.getOutput(), grad.getDy()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor dx = (*results)[0]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            grad.getAxis(),
            llvm::cast<RankedTensorType>(grad.getOutput().getType()).getRank());
        return kernelError(op, tessera_cpu_softmax_grad(
                                   (*inputs)[0], (*inputs)[1], &dx, axis));
      })
      .Case([&](tess::AttentionGradOp grad) -> llvm::Error {
        auto inputs = operands({grad.getQuery(), grad.getKey(), grad.getValue(),
                                grad.getMask(), grad.getDy()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor dq = (*results)[0]->descriptor();
        tessera_tensor dk = (*results)[1]->descriptor();
        tessera_tensor dv = (*results)[2]->descriptor();
        return kernelError(
            op, tessera_cpu_attention_grad(
                    (*inputs)[0], (*inputs)[1], (*inputs)[2], (*inputs)[3],
                    (*inputs)[4], &dq, &dk, &dv, grad.getCausal(),
                    grad.getScale().convertToDouble(),
                    grad.getDropout().convertToDouble(),
                    mixSeed(stepSeed, grad.getSeed())));
      })
      .Case([&](tess::EmbeddingGradOp grad) -> llvm::Error {
        auto inputs = operands({grad.getIndices(), grad.getDy()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor dtable = (*results)[0]->descriptor();
        return kernelError(op, tessera_cpu_embedding_grad(
                                   (*inputs)[0], (*inputs)[1], &dtable));
      })
      .Case([&](tess::GatherGradOp grad) -> llvm::Error {
        auto inputs = operands({grad.getIndices(), grad.getDy()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor dx = (*results)[0]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            grad.getAxis(), llvm::cast<RankedTensorType>(grad.getType()).getRank());
        return kernelError(op, tessera_cpu_gather_grad(
                                   (*inputs)[0], (*inputs)[1], &dx, axis));
      })
      .Case([&](tess::SliceGradOp grad) {
        ArrayRef<int64_t> starts = grad.getStarts(), strides = grad.getStrides();
        return unary(op, 0, [&](int32_t, const tessera_tensor *dy,
                                tessera_tensor *dx) {
          return tessera_cpu_slice_grad(dy, dx, starts.data(), strides.data());
        });
      })
      .Case([&](tess::AdamWOp adamw) -> llvm::Error {
        auto inputs = operands({adamw.getParam(), adamw.getGrad(), adamw.getM(),
                                adamw.getV(), adamw.getLr(), adamw.getStep(),
                                adamw.getGradScale()});
        if (!inputs)
          return inputs.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        // The kernel updates in place: start the results from the inputs.
        for (int i = 0; i < 3; ++i) {
          tessera_tensor target = (*results)[i]->descriptor();
          if (int status = tessera_cpu_copy((*inputs)[i == 0 ? 0 : i + 1], &target))
            return kernelError(op, status);
        }
        tessera_tensor param = (*results)[0]->descriptor();
        tessera_tensor m = (*results)[1]->descriptor();
        tessera_tensor v = (*results)[2]->descriptor();
        auto scalar = [&](int index) {
          return slot(op.getOperand(index)).getDouble(0);
        };
        return kernelError(
            op, tessera_cpu_adamw(&param, (*inputs)[1], &m, &v,
                                  slot(adamw.getStep()).getInt(0), scalar(4),
                                  adamw.getBeta1().convertToDouble(),
                                  adamw.getBeta2().convertToDouble(),
                                  adamw.getEpsilon().convertToDouble(),
                                  adamw.getWeightDecay().convertToDouble(),
                                  scalar(6)));
      })
      .Case([&](tess::ConcatOp concat) -> llvm::Error {
        std::vector<const tessera_tensor *> inputs;
        std::vector<tessera_tensor> storage;
        storage.reserve(concat.getInputs().size());
        for (Value input : concat.getInputs()) {
          llvm::Expected<HostTensorBuffer *> buffer = lookup(input);
          if (!buffer)
            return opError(op, llvm::toString(buffer.takeError()));
          storage.push_back((*buffer)->descriptor());
          inputs.push_back(&storage.back());
        }
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        tessera_tensor output = (*results)[0]->descriptor();
        int64_t axis = *tess::normalizeAxis(
            concat.getAxis(),
            llvm::cast<RankedTensorType>(concat.getType()).getRank());
        return kernelError(op, tessera_cpu_concat(inputs.data(), inputs.size(),
                                                  &output, axis));
      })
      .Case([&](tess::SplitOp split) -> llvm::Error {
        auto input = operand(split.getInput());
        if (!input)
          return input.takeError();
        auto results = allocateResults(op);
        if (!results)
          return results.takeError();
        std::vector<tessera_tensor> storage;
        std::vector<tessera_tensor *> outputs;
        storage.reserve(results->size());
        for (HostTensorBuffer *result : *results) {
          storage.push_back(result->descriptor());
          outputs.push_back(&storage.back());
        }
        int64_t axis = *tess::normalizeAxis(
            split.getAxis(),
            llvm::cast<RankedTensorType>(split.getInput().getType())
                .getRank());
        return kernelError(op, tessera_cpu_split(*input, outputs.data(),
                                                 outputs.size(), axis));
      })
      .Case([&](tess::ReduceSumOp reduction) {
        return reduce(op, TESSERA_REDUCE_SUM, reduction.getDims());
      })
      .Case([&](tess::ReduceMeanOp reduction) {
        return reduce(op, TESSERA_REDUCE_MEAN, reduction.getDims());
      })
      .Case([&](tess::ReduceMaxOp reduction) {
        return reduce(op, TESSERA_REDUCE_MAX, reduction.getDims());
      })
      .Case([&](tess::ReduceMinOp reduction) {
        return reduce(op, TESSERA_REDUCE_MIN, reduction.getDims());
      })
      .Default([&](Operation *unknown) {
        return opError(*unknown, "the CPU interpreter cannot run this op");
      });
}

} // namespace

llvm::Expected<std::vector<HostTensorBuffer>>
Interpreter::run(func::FuncOp function,
                 std::vector<HostTensorBuffer> arguments) {
  if (function.getNumArguments() != arguments.size())
    return llvm::createStringError(
        "@" + function.getName().str() + " takes " +
        std::to_string(function.getNumArguments()) + " arguments, " +
        std::to_string(arguments.size()) + " given");
  FunctionRun run(weights, stepSeed);
  for (auto [argument, buffer] :
       llvm::zip(function.getArguments(), arguments)) {
    auto type = llvm::cast<RankedTensorType>(argument.getType());
    llvm::Expected<tessera_dtype> dtype = dtypeOf(type.getElementType());
    if (!dtype)
      return dtype.takeError();
    if (buffer.dtype() != *dtype || buffer.shape() != type.getShape())
      return llvm::createStringError(
          "argument " + std::to_string(argument.getArgNumber()) + " of @" +
          function.getName().str() + " does not match its type");
    if (llvm::Error error = run.bind(argument, std::move(buffer)))
      return std::move(error);
  }
  std::vector<HostTensorBuffer> results;
  for (Operation &op : function.getBody().front()) {
    if (auto returnOp = llvm::dyn_cast<func::ReturnOp>(op)) {
      for (Value value : returnOp.getOperands()) {
        llvm::Expected<HostTensorBuffer *> buffer = run.lookup(value);
        if (!buffer)
          return buffer.takeError();
        results.push_back(**buffer);
      }
      break;
    }
    if (llvm::Error error = run.execute(op))
      return std::move(error);
  }
  return results;
}
