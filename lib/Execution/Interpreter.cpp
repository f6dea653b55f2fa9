//===- Interpreter.cpp - run tess IR on the CPU kernels ------------------===//
//
// One case per op: FunctionRun::callKernel fetches the operand buffers and
// allocates zeroed results of the op's static types, and the case calls the
// kernel with the op's attributes. The mapping from op to kernel is the same
// one the lowering to runtime calls uses, so what is tested here is what the
// executable runs.
//
//===----------------------------------------------------------------------===//

#include "tessera/Execution/Interpreter.h"

#include "Tess/IR/TessOps.h"
#include "tessera/runtime/lowering_support.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera::execution;
namespace tess = tessera::tess;

namespace {

/// What a kernel call receives: the operands' descriptors (null for an absent
/// optional operand) and the results' descriptors, in the op's order.
using KernelInputs = ArrayRef<const tessera_tensor *>;
using KernelOutputs = MutableArrayRef<tessera_tensor>;

class FunctionRun {
public:
  FunctionRun(const WeightLookup &weights, uint64_t stepSeed,
              const std::optional<MeshRank> &meshRank)
      : weights(weights), stepSeed(stepSeed), meshRank(meshRank) {}

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

  /// Runs `op` on a kernel: looks up the descriptors of `inputs`, allocates
  /// zeroed results of the op's types, and calls `kernel(in, out)`, whose
  /// nonzero status becomes an error naming the op.
  template <typename Kernel>
  llvm::Error callKernel(Operation &op, ArrayRef<Value> inputs, Kernel kernel);
  llvm::Error parameter(tess::ParameterOp op);
  /// The collectives of a partitioned program (MeshRank).
  llvm::Error collective(Operation &op);
  /// A random op's seed: the step's mixed with `opSeed`, advanced to this
  /// rank's block along each of its split stream dims (tess::streamBlocks).
  llvm::Expected<uint64_t> randomSeed(Operation &op, int64_t opSeed);
  /// This rank's coordinate on the mesh axis named by `op`'s `attribute`
  /// (0 without one).
  llvm::Expected<int64_t> coordinateOn(Operation &op, StringRef attribute);
  /// The rows of a table block (rows_axis: this rank's of a
  /// vocabulary-parallel table; else the whole table).
  struct RowBlock {
    int64_t first, total;
  };
  llvm::Expected<RowBlock> rowBlock(Operation &op, Value table);

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

  /// The descriptor of an operand's buffer, or null for an absent optional
  /// operand.
  llvm::Expected<const tessera_tensor *> operand(Value value);

  const WeightLookup &weights;
  uint64_t stepSeed;
  const std::optional<MeshRank> &meshRank;
  /// The message of the last failed collective (comm.h keeps its own).
  std::string communicationError;
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
llvm::Error FunctionRun::callKernel(Operation &op, ArrayRef<Value> inputs,
                                    Kernel kernel) {
  llvm::Expected<SmallVector<const tessera_tensor *>> in = operands(inputs);
  if (!in)
    return in.takeError();
  llvm::Expected<SmallVector<HostTensorBuffer *>> results = allocateResults(op);
  if (!results)
    return results.takeError();
  SmallVector<tessera_tensor> out;
  for (HostTensorBuffer *result : *results)
    out.push_back(result->descriptor());
  return kernelError(op, kernel(KernelInputs(*in), KernelOutputs(out)));
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

/// `axis` of `value`'s type, made non-negative.
int64_t normalizedAxis(int64_t axis, Value value) {
  return *tess::normalizeAxis(
      axis, llvm::cast<RankedTensorType>(value.getType()).getRank());
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

int32_t geluKind(tess::GeluApproximation approximation) {
  return approximation == tess::GeluApproximation::tanh ? TESSERA_GELU_TANH
                                                        : TESSERA_GELU_ERF;
}

/// Mixes an op's seed attribute with the step's seed (SplitMix64 finalizer),
/// so that each step and each random op draws its own stream.
uint64_t mixSeed(uint64_t stepSeed, uint64_t opSeed) {
  uint64_t z = stepSeed * 0x9E3779B97F4A7C15ull + opSeed + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

llvm::Expected<int64_t> FunctionRun::coordinateOn(Operation &op,
                                                  StringRef attribute) {
  auto axis = op.getAttrOfType<StringAttr>(attribute);
  if (!axis)
    return 0;
  if (!meshRank)
    return opError(op, "a " + attribute + " needs a mesh rank (Interpreter::"
                       "setMeshRank)");
  auto position = llvm::find(meshRank->axisNames, axis.getValue());
  if (position == meshRank->axisNames.end())
    return opError(op, "the mesh rank has no axis '" + axis.getValue() + "'");
  return meshRank->coordinates[position - meshRank->axisNames.begin()];
}

llvm::Expected<uint64_t> FunctionRun::randomSeed(Operation &op,
                                                 int64_t opSeed) {
  static_assert(tess::kAttentionDropoutHeads ==
                    TESSERA_ATTENTION_DROPOUT_HEADS,
                "the dialect's and the kernels' attention dropout index differ");
  uint64_t seed = mixSeed(stepSeed, opSeed);
  for (tess::StreamBlock block : tess::streamBlocks(&op)) {
    if (!op.hasAttr(block.attribute))
      continue;
    llvm::Expected<int64_t> coordinate = coordinateOn(op, block.attribute);
    if (!coordinate)
      return coordinate.takeError();
    seed = tessera_advance_seed(
        seed, static_cast<uint64_t>(*coordinate) * block.positions);
  }
  return seed;
}

llvm::Expected<FunctionRun::RowBlock> FunctionRun::rowBlock(Operation &op,
                                                            Value table) {
  llvm::Expected<int64_t> coordinate = coordinateOn(op, "rows_axis");
  if (!coordinate)
    return coordinate.takeError();
  int64_t rows = llvm::cast<RankedTensorType>(table.getType()).getDimSize(0);
  return RowBlock{*coordinate * rows, tess::wholeTableRows(&op, table)};
}

llvm::Error FunctionRun::execute(Operation &op) {
  // The op families whose kernel takes the op as a code.
  auto unary = [&](int32_t kind) {
    return callKernel(op, {op.getOperand(0)},
                      [&](KernelInputs in, KernelOutputs out) {
                        return tessera_cpu_unary(kind, in[0], &out[0]);
                      });
  };
  auto unaryGrad = [&](int32_t kind) {
    return callKernel(op, {op.getOperand(0), op.getOperand(1)},
                      [&](KernelInputs in, KernelOutputs out) {
                        return tessera_cpu_unary_grad(kind, in[0], in[1],
                                                      &out[0]);
                      });
  };
  auto binary = [&](int32_t kind) {
    return callKernel(op, {op.getOperand(0), op.getOperand(1)},
                      [&](KernelInputs in, KernelOutputs out) {
                        return tessera_cpu_binary(kind, in[0], in[1], &out[0]);
                      });
  };
  auto reduce = [&](int32_t kind, ArrayRef<int64_t> dims) {
    SmallVector<int64_t> normalized;
    for (int64_t dim : dims)
      normalized.push_back(normalizedAxis(dim, op.getOperand(0)));
    llvm::sort(normalized);
    return callKernel(op, {op.getOperand(0)},
                      [&](KernelInputs in, KernelOutputs out) {
                        return tessera_cpu_reduce(kind, in[0], &out[0],
                                                  normalized.data(),
                                                  normalized.size());
                      });
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
      .Case([&](tess::NegOp) { return unary(TESSERA_NEG); })
      .Case([&](tess::AbsOp) { return unary(TESSERA_ABS); })
      .Case([&](tess::ExpOp) { return unary(TESSERA_EXP); })
      .Case([&](tess::LogOp) { return unary(TESSERA_LOG); })
      .Case([&](tess::SqrtOp) { return unary(TESSERA_SQRT); })
      .Case([&](tess::RsqrtOp) { return unary(TESSERA_RSQRT); })
      .Case([&](tess::ReciprocalOp) { return unary(TESSERA_RECIPROCAL); })
      .Case([&](tess::TanhOp) { return unary(TESSERA_TANH); })
      .Case([&](tess::ErfOp) { return unary(TESSERA_ERF); })
      .Case([&](tess::SigmoidOp) { return unary(TESSERA_SIGMOID); })
      .Case([&](tess::ReluOp) { return unary(TESSERA_RELU); })
      .Case([&](tess::SiluOp) { return unary(TESSERA_SILU); })
      .Case([&](tess::CosOp) { return unary(TESSERA_COS); })
      .Case([&](tess::SinOp) { return unary(TESSERA_SIN); })
      .Case([&](tess::LogicalNotOp) { return unary(TESSERA_LOGICAL_NOT); })
      .Case([&](tess::GeluOp gelu) {
        return unary(geluKind(gelu.getApproximation()));
      })
      .Case([&](tess::AddOp) { return binary(TESSERA_ADD); })
      .Case([&](tess::SubOp) { return binary(TESSERA_SUB); })
      .Case([&](tess::MulOp) { return binary(TESSERA_MUL); })
      .Case([&](tess::DivOp) { return binary(TESSERA_DIV); })
      .Case([&](tess::PowOp) { return binary(TESSERA_POW); })
      .Case([&](tess::MaximumOp) { return binary(TESSERA_MAXIMUM); })
      .Case([&](tess::MinimumOp) { return binary(TESSERA_MINIMUM); })
      .Case([&](tess::LogicalAndOp) { return binary(TESSERA_LOGICAL_AND); })
      .Case([&](tess::LogicalOrOp) { return binary(TESSERA_LOGICAL_OR); })
      .Case([&](tess::CompareOp compare) {
        return binary(comparisonKind(compare.getPredicate()));
      })
      .Case([&](tess::WhereOp where) {
        return callKernel(
            op, {where.getCondition(), where.getOnTrue(), where.getOnFalse()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_where(in[0], in[1], in[2], &out[0]);
            });
      })
      .Case([&](tess::CastOp) {
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_cast(in[0], &out[0]);
                          });
      })
      .Case([&](tess::DropoutOp dropout) -> llvm::Error {
        double rate = dropout.getRate().convertToDouble();
        llvm::Expected<uint64_t> seed =
            randomSeed(op, dropout.getSeed());
        if (!seed)
          return seed.takeError();
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_dropout(in[0], &out[0], rate,
                                                       *seed);
                          });
      })
      .Case([&](tess::ReshapeOp) {
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_copy(in[0], &out[0]);
                          });
      })
      .Case([&](tess::BroadcastOp) {
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_broadcast(in[0], &out[0]);
                          });
      })
      .Case([&](tess::TransposeOp transpose) {
        ArrayRef<int64_t> permutation = transpose.getPermutation();
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_transpose(in[0], &out[0],
                                                         permutation.data());
                          });
      })
      .Case([&](tess::SliceOp slice) {
        ArrayRef<int64_t> starts = slice.getStarts(),
                          strides = slice.getStrides();
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_slice(in[0], &out[0],
                                                     starts.data(),
                                                     strides.data());
                          });
      })
      .Case([&](tess::SoftmaxOp softmax) {
        int64_t axis = normalizedAxis(softmax.getAxis(), softmax.getInput());
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_softmax(in[0], &out[0], axis);
                          });
      })
      .Case([&](tess::MatmulOp matmul) {
        return callKernel(op, {matmul.getLhs(), matmul.getRhs()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_matmul(
                                in[0], in[1], &out[0], matmul.getTransposeLhs(),
                                matmul.getTransposeRhs());
                          });
      })
      // The GEMM tess-expand-weight-grads makes of it: the rows flattened.
      .Case([&](tess::LinearWeightGradOp gradient) {
        return callKernel(
            op, {gradient.getInput(), gradient.getDy()},
            [&](KernelInputs in, KernelOutputs out) {
              tessera_tensor x = flattenRows(in[0]), dy = flattenRows(in[1]);
              return gradient.getTransposeWeight()
                         ? tessera_cpu_matmul(&dy, &x, &out[0], true, false)
                         : tessera_cpu_matmul(&x, &dy, &out[0], true, false);
            });
      })
      .Case([&](tess::LinearOp linear) {
        return callKernel(
            op, {linear.getInput(), linear.getWeight(), linear.getBias()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_linear(in[0], in[1], in[2], &out[0],
                                        linear.getTransposeWeight());
            });
      })
      // The fused ops (tess-fuse-epilogues): the calls the executable makes.
      .Case([&](tess::LinearAddOp linear) {
        return callKernel(op,
                          {linear.getInput(), linear.getWeight(),
                           linear.getBias(), linear.getAddend()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_linear_add(
                                in[0], in[1], in[2], in[3], &out[0],
                                linear.getTransposeWeight());
                          });
      })
      .Case([&](tess::LinearGeluOp linear) {
        return callKernel(
            op, {linear.getInput(), linear.getWeight(), linear.getBias()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_linear_gelu(in[0], in[1], in[2], &out[0],
                                             &out[1],
                                             linear.getTransposeWeight());
            });
      })
      .Case([&](tess::LinearGeluGradOp linear) {
        return callKernel(op,
                          {linear.getInput(), linear.getWeight(),
                           linear.getPreactivation()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_linear_dgelu(
                                in[0], in[1], in[2], &out[0],
                                linear.getTransposeWeight());
                          });
      })
      .Case([&](tess::MatmulAddOp matmul) {
        return callKernel(
            op, {matmul.getLhs(), matmul.getRhs(), matmul.getAddend()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_matmul_add(in[0], in[1], in[2], &out[0],
                                            matmul.getTransposeLhs(),
                                            matmul.getTransposeRhs());
            });
      })
      .Case([&](tess::MatmulBiasGradOp matmul) {
        return callKernel(op, {matmul.getLhs(), matmul.getRhs()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_matmul_bias_grad(
                                in[0], in[1], &out[0], &out[1],
                                matmul.getTransposeLhs(), 0);
                          });
      })
      .Case([&](tess::LayerNormOp norm) {
        int64_t axis = normalizedAxis(norm.getAxis(), norm.getInput());
        return callKernel(
            op, {norm.getInput(), norm.getScale(), norm.getBias()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_layer_norm(
                  in[0], in[1], in[2], &out[0], axis,
                  norm.getEpsilon().convertToDouble());
            });
      })
      .Case([&](tess::RotaryOp rotary) {
        return callKernel(
            op, {rotary.getInput(), rotary.getCos(), rotary.getSin()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_rotary(
                  in[0], in[1], in[2], &out[0], rotary.getAdjoint(),
                  static_cast<int64_t>(rotary.getRotatedHeads()));
            });
      })
      .Case([&](tess::RmsNormOp norm) {
        int64_t axis = normalizedAxis(norm.getAxis(), norm.getInput());
        return callKernel(op, {norm.getInput(), norm.getScale()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_rms_norm(
                                in[0], in[1], &out[0], axis,
                                norm.getEpsilon().convertToDouble());
                          });
      })
      .Case([&](tess::EmbeddingOp embedding) -> llvm::Error {
        llvm::Expected<RowBlock> block = rowBlock(op, embedding.getTable());
        if (!block)
          return block.takeError();
        return callKernel(op, {embedding.getTable(), embedding.getIndices()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_embedding_rows(
                                in[0], in[1], &out[0], block->first,
                                block->total);
                          });
      })
      .Case([&](tess::GatherOp gather) {
        int64_t axis = normalizedAxis(gather.getAxis(), gather.getInput());
        return callKernel(op, {gather.getInput(), gather.getIndices()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_gather(in[0], in[1], &out[0],
                                                      axis);
                          });
      })
      .Case([&](tess::AttentionOp attention) -> llvm::Error {
        llvm::Expected<uint64_t> streamSeed = randomSeed(op, attention.getSeed());
        if (!streamSeed)
          return streamSeed.takeError();
        return callKernel(
            op,
            {attention.getQuery(), attention.getKey(), attention.getValue(),
             attention.getMask()},
            [&](KernelInputs in, KernelOutputs out) {
              double scale = attention.getScale().convertToDouble();
              double dropout = attention.getDropout().convertToDouble();
              uint64_t seed = *streamSeed;
              auto window = static_cast<int64_t>(attention.getWindow());
              if (double softcap = attention.getSoftcap().convertToDouble())
                return tessera_cpu_softcapped_attention(
                    in[0], in[1], in[2], in[3], &out[0], attention.getCausal(),
                    window, scale, softcap, dropout, seed);
              if (window)
                return tessera_cpu_sliding_window_attention(
                    in[0], in[1], in[2], in[3], &out[0], window, scale,
                    dropout, seed);
              return tessera_cpu_attention(in[0], in[1], in[2], in[3],
                                           &out[0], attention.getCausal(),
                                           scale, dropout, seed);
            });
      })
      .Case([&](tess::PackedAttentionOp attention) {
        return callKernel(op, {attention.getQkv()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_packed_attention(
                                in[0], &out[0], &out[1],
                                static_cast<int64_t>(attention.getQueryHeads()),
                                static_cast<int64_t>(attention.getKeyHeads()),
                                attention.getCausal(),
                                attention.getScale().convertToDouble());
                          });
      })
      .Case([&](tess::CrossEntropyOp loss) {
        SmallVector<Value, 3> inputs = {loss.getLogits(), loss.getTargets()};
        if (loss.getAllTargets())
          inputs.push_back(loss.getAllTargets());
        return callKernel(op, inputs, [&](KernelInputs in, KernelOutputs out) {
          tessera_tensor logits = flattenRows(in[0]);
          tessera_tensor targets = flattenAll(in[1]);
          return tessera_cpu_cross_entropy(&logits, &targets,
                                           in.size() > 2 ? in[2] : nullptr,
                                           &out[0], loss.getIgnoreIndex());
        });
      })
      .Case([&](tess::CrossEntropyGradOp grad) {
        SmallVector<Value, 4> inputs = {grad.getLogits(), grad.getTargets(),
                                        grad.getDloss()};
        if (grad.getAllTargets())
          inputs.push_back(grad.getAllTargets());
        return callKernel(
            op, inputs, [&](KernelInputs in, KernelOutputs out) {
              tessera_tensor logits = flattenRows(in[0]);
              tessera_tensor targets = flattenAll(in[1]);
              tessera_tensor output = flattenRows(out[0]);
              return tessera_cpu_cross_entropy_grad(
                  &logits, &targets, in.size() > 3 ? in[3] : nullptr, in[2],
                  &output, grad.getIgnoreIndex());
            });
      })
      .Case([&](tess::CrossEntropyWithGradOp loss) {
        return callKernel(
            op,
            {loss.getLogits(), loss.getTargets(), loss.getAllTargets(),
             loss.getDloss()},
            [&](KernelInputs in, KernelOutputs out) {
              tessera_tensor logits = flattenRows(in[0]);
              tessera_tensor targets = flattenAll(in[1]);
              tessera_tensor dlogits = flattenRows(out[1]);
              return tessera_cpu_cross_entropy_with_grad(
                  &logits, &targets, in[2], in[3], &out[0], &dlogits,
                  loss.getIgnoreIndex());
            });
      })
      .Case([&](tess::GeluGradOp grad) {
        return unaryGrad(geluKind(grad.getApproximation()));
      })
      .Case([&](tess::SwigluOp swiglu) {
        return callKernel(op, {swiglu.getGate(), swiglu.getUp()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_swiglu(in[0], in[1], &out[0]);
                          });
      })
      .Case([&](tess::SwigluGradOp grad) {
        return callKernel(op, {grad.getGate(), grad.getUp(), grad.getDy()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_swiglu_grad(
                                in[0], in[1], in[2], &out[0], &out[1]);
                          });
      })
      .Case([&](tess::PackedSwigluOp swiglu) {
        return callKernel(op, {swiglu.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_packed_swiglu(in[0], &out[0]);
                          });
      })
      .Case([&](tess::PackedSwigluGradOp grad) {
        return callKernel(op, {grad.getInput(), grad.getDy()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_packed_swiglu_grad(
                                in[0], in[1], &out[0]);
                          });
      })
      .Case([&](tess::SiluGradOp) { return unaryGrad(TESSERA_SILU); })
      .Case([&](tess::LayerNormGradOp grad) {
        int64_t axis = normalizedAxis(grad.getAxis(), grad.getInput());
        return callKernel(
            op,
            {grad.getInput(), grad.getScale(), grad.getDy(),
             grad.getResidual()},
            [&](KernelInputs in, KernelOutputs out) {
              // Results are [dx, dscale?, dbias?].
              tessera_tensor *dscale = grad.getDscale() ? &out[1] : nullptr;
              tessera_tensor *dbias = grad.getDbias() ? &out.back() : nullptr;
              double epsilon = grad.getEpsilon().convertToDouble();
              if (in[3])
                return tessera_cpu_layer_norm_grad_add(in[0], in[1], in[2],
                                                       in[3], &out[0], dscale,
                                                       dbias, axis, epsilon);
              return tessera_cpu_layer_norm_grad(in[0], in[1], in[2], &out[0],
                                                 dscale, dbias, axis, epsilon);
            });
      })
      .Case([&](tess::RmsNormGradOp grad) {
        int64_t axis = normalizedAxis(grad.getAxis(), grad.getInput());
        return callKernel(
            op,
            {grad.getInput(), grad.getScale(), grad.getDy(),
             grad.getResidual()},
            [&](KernelInputs in, KernelOutputs out) {
              // Results are [dx, dscale?].
              tessera_tensor *dscale = grad.getScale() ? &out[1] : nullptr;
              double epsilon = grad.getEpsilon().convertToDouble();
              if (in[3])
                return tessera_cpu_rms_norm_grad_add(in[0], in[1], in[2], in[3],
                                                     &out[0], dscale, axis,
                                                     epsilon);
              return tessera_cpu_rms_norm_grad(in[0], in[1], in[2], &out[0],
                                               dscale, axis, epsilon);
            });
      })
      .Case([&](tess::SoftmaxGradOp grad) {
        int64_t axis = normalizedAxis(grad.getAxis(), grad.getOutput());
        return callKernel(op, {grad.getOutput(), grad.getDy()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_softmax_grad(in[0], in[1],
                                                            &out[0], axis);
                          });
      })
      .Case([&](tess::AttentionGradOp grad) -> llvm::Error {
        llvm::Expected<uint64_t> streamSeed =
            randomSeed(op, grad.getSeed());
        if (!streamSeed)
          return streamSeed.takeError();
        return callKernel(
            op,
            {grad.getQuery(), grad.getKey(), grad.getValue(), grad.getMask(),
             grad.getDy()},
            [&](KernelInputs in, KernelOutputs out) {
              double scale = grad.getScale().convertToDouble();
              double dropout = grad.getDropout().convertToDouble();
              uint64_t seed = *streamSeed;
              auto window = static_cast<int64_t>(grad.getWindow());
              if (double softcap = grad.getSoftcap().convertToDouble())
                return tessera_cpu_softcapped_attention_grad(
                    in[0], in[1], in[2], in[3], in[4], &out[0], &out[1],
                    &out[2], grad.getCausal(), window, scale, softcap, dropout,
                    seed);
              if (window)
                return tessera_cpu_sliding_window_attention_grad(
                    in[0], in[1], in[2], in[3], in[4], &out[0], &out[1],
                    &out[2], window, scale, dropout, seed);
              return tessera_cpu_attention_grad(
                  in[0], in[1], in[2], in[3], in[4], &out[0], &out[1],
                  &out[2], grad.getCausal(), scale, dropout, seed);
            });
      })
      .Case([&](tess::PackedAttentionGradOp grad) {
        return callKernel(
            op, {grad.getQkv(), grad.getY(), grad.getLse(), grad.getDy()},
            [&](KernelInputs in, KernelOutputs out) {
              return tessera_cpu_packed_attention_grad(
                  in[0], in[1], in[2], in[3], &out[0],
                  static_cast<int64_t>(grad.getQueryHeads()),
                  static_cast<int64_t>(grad.getKeyHeads()), grad.getCausal(),
                  grad.getScale().convertToDouble());
            });
      })
      .Case([&](tess::EmbeddingGradOp grad) -> llvm::Error {
        llvm::Expected<RowBlock> block = rowBlock(op, grad.getDtable());
        if (!block)
          return block.takeError();
        return callKernel(op, {grad.getIndices(), grad.getDy()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_embedding_grad_rows(
                                in[0], in[1], &out[0], block->first,
                                block->total);
                          });
      })
      .Case([&](tess::GatherGradOp grad) {
        int64_t axis = normalizedAxis(grad.getAxis(), op.getResult(0));
        return callKernel(op, {grad.getIndices(), grad.getDy()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_gather_grad(in[0], in[1],
                                                           &out[0], axis);
                          });
      })
      .Case([&](tess::SliceGradOp grad) {
        ArrayRef<int64_t> starts = grad.getStarts(),
                          strides = grad.getStrides();
        return callKernel(op, {op.getOperand(0)},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_slice_grad(in[0], &out[0],
                                                          starts.data(),
                                                          strides.data());
                          });
      })
      .Case([&](tess::AdamWOp adamw) {
        return callKernel(
            op,
            {adamw.getParam(), adamw.getGrad(), adamw.getM(), adamw.getV(),
             adamw.getLr(), adamw.getStep(), adamw.getGradScale()},
            [&](KernelInputs in, KernelOutputs out) {
              // The kernel updates in place: start the results [param, m, v]
              // from the inputs.
              for (int i = 0; i < 3; ++i)
                if (int status = tessera_cpu_copy(in[i == 0 ? 0 : i + 1],
                                                  &out[i]))
                  return status;
              auto scalar = [&](int index) {
                return slot(op.getOperand(index)).getDouble(0);
              };
              return tessera_cpu_adamw(
                  &out[0], in[1], &out[1], &out[2],
                  slot(adamw.getStep()).getInt(0), scalar(4),
                  adamw.getBeta1().convertToDouble(),
                  adamw.getBeta2().convertToDouble(),
                  adamw.getEpsilon().convertToDouble(),
                  adamw.getWeightDecay().convertToDouble(), scalar(6));
            });
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
        int64_t axis = normalizedAxis(concat.getAxis(), op.getResult(0));
        return callKernel(op, {}, [&](KernelInputs, KernelOutputs out) {
          return tessera_cpu_concat(inputs.data(), inputs.size(), &out[0],
                                    axis);
        });
      })
      .Case([&](tess::SplitOp split) {
        int64_t axis = normalizedAxis(split.getAxis(), split.getInput());
        return callKernel(op, {split.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            std::vector<tessera_tensor *> outputs;
                            for (tessera_tensor &output : out)
                              outputs.push_back(&output);
                            return tessera_cpu_split(in[0], outputs.data(),
                                                     outputs.size(), axis);
                          });
      })
      .Case([&](tess::ReduceSumOp reduction) {
        return reduce(TESSERA_REDUCE_SUM, reduction.getDims());
      })
      .Case([&](tess::ReduceMeanOp reduction) {
        return reduce(TESSERA_REDUCE_MEAN, reduction.getDims());
      })
      .Case([&](tess::ReduceMaxOp reduction) {
        return reduce(TESSERA_REDUCE_MAX, reduction.getDims());
      })
      .Case([&](tess::ReduceMinOp reduction) {
        return reduce(TESSERA_REDUCE_MIN, reduction.getDims());
      })
      .Case<tess::AllReduceOp, tess::AllGatherOp, tess::ReduceScatterOp,
            tess::AllToAllOp, tess::ShardSliceOp>(
          [&](Operation *) { return collective(op); })
      .Default([&](Operation *unknown) {
        return opError(*unknown, "the CPU interpreter cannot run this op");
      });
}

llvm::Error FunctionRun::collective(Operation &op) {
  auto axis = op.getAttrOfType<StringAttr>("axis").getValue();
  if (!meshRank)
    return opError(op, "a collective needs a mesh rank (Interpreter::"
                       "setMeshRank)");
  auto position = llvm::find(meshRank->axisNames, axis);
  if (position == meshRank->axisNames.end())
    return opError(op, "the mesh rank has no axis '" + axis + "'");
  size_t index = position - meshRank->axisNames.begin();
  tessera_comm *comm = meshRank->comms[index];
  int32_t coordinate = meshRank->coordinates[index];
  // The communicator reports its own errors.
  auto communicate = [&](int status) -> int {
    if (status != 0)
      communicationError = tessera_comm_last_error();
    return status;
  };
  communicationError.clear();
  llvm::Error error = llvm::TypeSwitch<Operation *, llvm::Error>(&op)
      .Case([&](tess::AllReduceOp reduce) {
        int32_t kind = reduce.getReduction() == tess::CollectiveReduction::max
                           ? TESSERA_REDUCE_MAX
                           : TESSERA_REDUCE_SUM;
        return callKernel(op, {reduce.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            if (int status = tessera_cpu_copy(in[0], &out[0]))
                              return status;
                            return communicate(tessera_comm_all_reduce(
                                comm, &out[0], kind, nullptr));
                          });
      })
      .Case([&](tess::AllGatherOp gather) {
        return callKernel(op, {gather.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return communicate(tessera_comm_all_gather(
                                comm, in[0], &out[0], gather.getDim(),
                                nullptr));
                          });
      })
      .Case([&](tess::ReduceScatterOp scatter) {
        return callKernel(op, {scatter.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return communicate(tessera_comm_reduce_scatter(
                                comm, in[0], &out[0], scatter.getDim(),
                                nullptr));
                          });
      })
      .Case([&](tess::AllToAllOp exchange) {
        return callKernel(op, {exchange.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return communicate(tessera_comm_all_to_all(
                                comm, in[0], &out[0], exchange.getSplitDim(),
                                exchange.getConcatDim(), nullptr));
                          });
      })
      .Case([&](tess::ShardSliceOp slice) {
        int64_t dim = slice.getDim();
        auto type = llvm::cast<RankedTensorType>(slice.getType());
        SmallVector<int64_t> starts(type.getRank(), 0),
            strides(type.getRank(), 1);
        starts[dim] = coordinate * type.getDimSize(dim);
        return callKernel(op, {slice.getInput()},
                          [&](KernelInputs in, KernelOutputs out) {
                            return tessera_cpu_slice(in[0], &out[0],
                                                     starts.data(),
                                                     strides.data());
                          });
      })
      .Default([&](Operation *) {
        return opError(op, "not a collective");
      });
  if (error && !communicationError.empty()) {
    llvm::consumeError(std::move(error));
    return opError(op, communicationError);
  }
  return error;
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
  FunctionRun run(weights, stepSeed, meshRank);
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
