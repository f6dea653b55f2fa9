//===- OpCost.cpp - the per-op cost table ---------------------------------===//
//
// FLOPs and bytes of each tess op as its kernel does the work. Conventions:
//
// - A multiply-add is 2 FLOPs. Contractions are exact: linear and matmul
//   2mnk (+ mn for a bias), attention 4 b h s_q s_kv d forward (the two
//   GEMMs, QK^T and PV; the softmax is not counted, and a causal mask is not
//   credited with halving the work). Its backward, FlashAttention-2 style,
//   recomputes the scores and does five GEMMs: 2.5x the forward executed,
//   2x credited as model FLOPs.
// - Other ops are memory-bound on every current accelerator, so their FLOP
//   counts per element are rough (a transcendental counts 4) and matter only
//   through the roofline's max.
// - Bytes: every operand read once and every result written once, as a
//   fused kernel does. A reshape is a view (0 bytes); gathers read the rows
//   they copy, not the table; scatter-adds (embedding/gather gradients)
//   zero their whole output and read-modify-write one row per index.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/OpCost.h"

#include "Tess/IR/TessOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>

using namespace mlir;

namespace tessera::cost {
namespace {

double elementsOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type ? static_cast<double>(type.getNumElements()) : 0;
}

double bytesOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.getElementType().isIntOrFloat())
    return 0;
  // i1 is stored as one byte.
  return static_cast<double>(type.getNumElements()) *
         ((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

double operandAndResultBytes(Operation *op) {
  double bytes = 0;
  for (Value operand : op->getOperands())
    bytes += bytesOf(operand);
  for (Value result : op->getResults())
    bytes += bytesOf(result);
  return bytes;
}

/// The precision of the first float tensor the op produces or reads.
Precision precisionOfOp(Operation *op) {
  for (Value value : llvm::concat<Value>(op->getResults(), op->getOperands()))
    if (auto type = llvm::dyn_cast<RankedTensorType>(value.getType()))
      if (llvm::isa<FloatType>(type.getElementType()))
        return precisionOf(type.getElementType());
  return Precision::FP32;
}

/// A memory-bound kernel: `flopsPerElement` of arithmetic per element of
/// `elements`, moving the op's operands and results once.
OpCost streaming(Operation *op, OpKind kind, double flopsPerElement,
                 double elements) {
  OpCost cost;
  cost.kind = kind;
  cost.flops = cost.modelFlops = flopsPerElement * elements;
  cost.bytes = operandAndResultBytes(op);
  cost.precision = precisionOfOp(op);
  return cost;
}

/// FLOPs of the forward attention: the QK^T and PV GEMMs over the keys each
/// query visits (`window`: 0 for all).
double attentionForwardFlops(Value query, Value value, uint64_t window) {
  auto queryType = llvm::cast<RankedTensorType>(query.getType());
  auto valueType = llvm::cast<RankedTensorType>(value.getType());
  double batch = queryType.getDimSize(0), heads = queryType.getDimSize(1),
         querySeq = queryType.getDimSize(2), keyDim = queryType.getDimSize(3);
  double keySeq = valueType.getDimSize(2), valueDim = valueType.getDimSize(3);
  // A sliding window bounds the keys each query visits, and the kernels
  // visit no others: at seq 32768 and window 4096 that is 8x fewer FLOPs.
  // (A plain causal mask is not credited; see program.h.)
  if (window > 0)
    keySeq = std::min(keySeq, static_cast<double>(window));
  return 2 * batch * heads * querySeq * keySeq * (keyDim + valueDim);
}

/// The same for tess.packed_attention's qkv [B, T, (Hq + 2 Hkv) Dh].
double packedAttentionForwardFlops(Value qkv, int64_t queryHeads,
                                   int64_t keyHeads) {
  auto type = llvm::cast<RankedTensorType>(qkv.getType());
  double batch = type.getDimSize(0), seq = type.getDimSize(1);
  double headDim =
      static_cast<double>(type.getDimSize(2)) / (queryHeads + 2 * keyHeads);
  return 4 * batch * queryHeads * seq * seq * headDim;
}

/// A norm backward's cost with `values` read once more when it has
/// parameter gradients (results after dx).
OpCost withRereads(OpCost cost, Operation *op,
                   std::initializer_list<Value> values) {
  if (op->getNumResults() > 1)
    for (Value value : values)
      cost.bytes += bytesOf(value);
  return cost;
}

OpCost contraction(Operation *op, double flops, double modelFlops,
                   OpKind kind) {
  OpCost cost;
  cost.kind = kind;
  cost.flops = flops;
  cost.modelFlops = modelFlops;
  cost.bytes = operandAndResultBytes(op);
  cost.usesMatrixUnits = true;
  cost.precision = precisionOfOp(op);
  return cost;
}

/// Gathers read the rows they copy (result-sized) and the indices.
OpCost gatherCost(Operation *op, Value indices, Value result) {
  OpCost cost;
  cost.kind = OpKind::DataMovement;
  cost.bytes = bytesOf(indices) + 2 * bytesOf(result);
  cost.precision = precisionOfOp(op);
  return cost;
}

/// Scatter-adds zero their output, then read-modify-write one slice of it
/// and read one slice of `dy` per index.
OpCost scatterAddCost(Operation *op, Value indices, Value dy, Value result) {
  OpCost cost;
  cost.kind = OpKind::DataMovement;
  cost.flops = cost.modelFlops = elementsOf(dy);
  cost.bytes = bytesOf(result) + bytesOf(indices) + 3 * bytesOf(dy);
  cost.precision = precisionOfOp(op);
  return cost;
}

} // namespace

llvm::StringRef opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::Linear:
    return "linear";
  case OpKind::Attention:
    return "attention";
  case OpKind::Norm:
    return "norms";
  case OpKind::Elementwise:
    return "elementwise";
  case OpKind::DataMovement:
    return "data movement";
  case OpKind::Loss:
    return "loss";
  case OpKind::Optimizer:
    return "optimizer";
  case OpKind::Free:
    return "free";
  }
  return "unknown";
}

Precision precisionOf(Type elementType) {
  if (elementType.isBF16())
    return Precision::BF16;
  if (elementType.isF16())
    return Precision::FP16;
  return Precision::FP32;
}

double kernelTime(const DeviceModel &device, OpKind kind, bool usesMatrixUnits,
                  Precision precision, double flops, double bytes, double m,
                  double n, double k) {
  if (kind == OpKind::Free)
    return 0;
  double rate = kind == OpKind::Attention ? device.attentionRate(precision)
                : usesMatrixUnits ? device.matrixRate(precision, m, n, k)
                                  : device.vectorFlops;
  return device.roofline(flops, rate, bytes) + device.kernelSeconds;
}

namespace {

/// A dense layer's GEMM (and bias): tess.linear and the fused ops built
/// on it.
OpCost linearCost(Operation *op, Value input, Value weight, Value bias,
                  bool transposeWeight) {
  auto weightType = llvm::cast<RankedTensorType>(weight.getType());
  double in = weightType.getDimSize(transposeWeight ? 1 : 0);
  double out = weightType.getDimSize(transposeWeight ? 0 : 1);
  double rows = elementsOf(input) / in;
  double flops = 2 * rows * in * out + (bias ? rows * out : 0);
  OpCost cost = contraction(op, flops, flops, OpKind::Linear);
  cost.m = rows;
  cost.n = out;
  cost.k = in;
  return cost;
}

/// A (batched) matrix product: tess.matmul and the fused ops built on it.
OpCost matmulCost(Operation *op, Value lhs, bool transposeLhs, Value result) {
  auto lhsType = llvm::cast<RankedTensorType>(lhs.getType());
  int64_t rank = lhsType.getRank();
  double contracted = lhsType.getDimSize(transposeLhs ? rank - 2 : rank - 1);
  // Every result element is a dot product of length `contracted`.
  double products = elementsOf(result);
  double flops = 2 * products * contracted;
  OpCost cost = contraction(op, flops, flops, OpKind::Linear);
  auto resultType = llvm::cast<RankedTensorType>(result.getType());
  cost.n = resultType.getRank() ? resultType.getShape().back() : 1;
  cost.m = products / cost.n;
  cost.k = contracted;
  return cost;
}

} // namespace

double OpCost::time(const DeviceModel &device) const {
  return kernelTime(device, kind, usesMatrixUnits, precision, flops, bytes, m,
                    n, k);
}

OpCost estimateOpCost(Operation *op) {
  if (!llvm::isa<tess::TessDialect>(op->getDialect()))
    return OpCost();

  auto resultElements = [&] { return elementsOf(op->getResult(0)); };
  return llvm::TypeSwitch<Operation *, OpCost>(op)
      // No kernel: compile-time data, arguments, views.
      .Case<tess::ConstantOp, tess::ParameterOp, tess::ReshapeOp>(
          [](Operation *) { return OpCost(); })

      // Contractions.
      .Case([&](tess::LinearOp linear) {
        return linearCost(op, linear.getInput(), linear.getWeight(),
                          linear.getBias(), linear.getTransposeWeight());
      })
      .Case([&](tess::MatmulOp matmul) {
        return matmulCost(op, matmul.getLhs(), matmul.getTransposeLhs(),
                          matmul.getResult());
      })
      // The GEMM it becomes: [in, rows] x [rows, out].
      .Case([&](tess::LinearWeightGradOp gradient) {
        auto inputType =
            llvm::cast<RankedTensorType>(gradient.getInput().getType());
        double in = inputType.getShape().back();
        double rows = elementsOf(gradient.getInput()) / in;
        double out = elementsOf(gradient.getDy()) / rows;
        double flops = 2 * rows * in * out;
        OpCost cost = contraction(op, flops, flops, OpKind::Linear);
        auto resultType =
            llvm::cast<RankedTensorType>(gradient.getResult().getType());
        cost.m = resultType.getDimSize(0);
        cost.n = resultType.getDimSize(1);
        cost.k = rows;
        return cost;
      })
      // The fused ops (tess-fuse-epilogues): their GEMM, the epilogue's
      // elementwise work riding on it; bytes are the fused op's own, which
      // is what fusing saves.
      .Case([&](tess::LinearAddOp linear) {
        OpCost cost =
            linearCost(op, linear.getInput(), linear.getWeight(),
                       linear.getBias(), linear.getTransposeWeight());
        cost.flops += resultElements();
        return cost;
      })
      .Case([&](tess::LinearGeluOp linear) {
        return linearCost(op, linear.getInput(), linear.getWeight(),
                          linear.getBias(), linear.getTransposeWeight());
      })
      .Case([&](tess::LinearGeluGradOp linear) {
        return linearCost(op, linear.getInput(), linear.getWeight(), Value(),
                          linear.getTransposeWeight());
      })
      .Case([&](tess::MatmulAddOp matmul) {
        OpCost cost = matmulCost(op, matmul.getLhs(), matmul.getTransposeLhs(),
                                 matmul.getResult());
        cost.flops += resultElements();
        return cost;
      })
      .Case([&](tess::MatmulBiasGradOp matmul) {
        OpCost cost = matmulCost(op, matmul.getLhs(), matmul.getTransposeLhs(),
                                 matmul.getResult());
        cost.flops += elementsOf(matmul.getRhs());
        return cost;
      })
      .Case([&](tess::AttentionOp attention) {
        double flops = attentionForwardFlops(
            attention.getQuery(), attention.getValue(), attention.getWindow());
        return contraction(op, flops, flops, OpKind::Attention);
      })
      .Case([&](tess::AttentionGradOp gradient) {
        double forward = attentionForwardFlops(
            gradient.getQuery(), gradient.getValue(), gradient.getWindow());
        return contraction(op, 2.5 * forward, 2 * forward, OpKind::Attention);
      })

      .Case([&](tess::PackedAttentionOp attention) {
        double flops = packedAttentionForwardFlops(
            attention.getQkv(),
            static_cast<int64_t>(attention.getQueryHeads()),
            static_cast<int64_t>(attention.getKeyHeads()));
        return contraction(op, flops, flops, OpKind::Attention);
      })
      // The five GEMMs of tess.attention_grad; the statistics come from
      // the forward here, which attention_grad's kernel reran uncounted.
      .Case([&](tess::PackedAttentionGradOp gradient) {
        double forward = packedAttentionForwardFlops(
            gradient.getQkv(), static_cast<int64_t>(gradient.getQueryHeads()),
            static_cast<int64_t>(gradient.getKeyHeads()));
        return contraction(op, 2.5 * forward, 2 * forward, OpKind::Attention);
      })

      // Norms and softmax: one fused pass each way.
      .Case([&](tess::LayerNormOp norm) {
        return streaming(op, OpKind::Norm, 8, elementsOf(norm.getInput()));
      })
      // The backward reads x and dy twice: once for dx, once more for the
      // parameter gradients' column sums (runtime/cuda/Normalization.cu).
      .Case([&](tess::LayerNormGradOp norm) {
        return withRereads(
            streaming(op, OpKind::Norm, 12, elementsOf(norm.getInput())), op,
            {norm.getInput(), norm.getDy()});
      })
      // Two products and a sum per element; one pass over x and y (cos and
      // sin are a [T, D] table the heads share, served from L2).
      .Case([&](tess::RotaryOp) {
        return streaming(op, OpKind::Elementwise, 3, resultElements());
      })
      .Case([&](tess::RmsNormOp norm) {
        return streaming(op, OpKind::Norm, 5, elementsOf(norm.getInput()));
      })
      .Case([&](tess::RmsNormGradOp norm) {
        return withRereads(
            streaming(op, OpKind::Norm, 8, elementsOf(norm.getInput())), op,
            {norm.getInput(), norm.getDy()});
      })
      .Case([&](tess::SoftmaxOp) {
        return streaming(op, OpKind::Norm, 5, resultElements());
      })
      .Case([&](tess::SoftmaxGradOp) {
        return streaming(op, OpKind::Norm, 4, resultElements());
      })

      // Loss.
      .Case([&](tess::CrossEntropyOp loss) {
        OpCost cost =
            streaming(op, OpKind::Loss, 4, elementsOf(loss.getLogits()));
        // Computed by its gradient's pass over the logits (one read, one
        // write): no bytes of its own.
        if (loss.fusedGradient())
          cost.bytes = 0;
        return cost;
      })
      .Case([&](tess::CrossEntropyGradOp loss) {
        return streaming(op, OpKind::Loss, 5, elementsOf(loss.getLogits()));
      })
      // The pair above as one op (tess-fuse-epilogues).
      .Case([&](tess::CrossEntropyWithGradOp loss) {
        return streaming(op, OpKind::Loss, 9, elementsOf(loss.getLogits()));
      })

      // Optimizer: read param, grad, m, v; write param, m, v.
      .Case([&](tess::AdamWOp adamw) {
        return streaming(op, OpKind::Optimizer, 15,
                         elementsOf(adamw.getParam()));
      })

      // Elementwise arithmetic.
      .Case<tess::NegOp, tess::AbsOp, tess::ReluOp, tess::LogicalNotOp,
            tess::SqrtOp, tess::ReciprocalOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 1, resultElements());
      })
      .Case<tess::ExpOp, tess::LogOp, tess::RsqrtOp, tess::TanhOp, tess::ErfOp,
            tess::SigmoidOp, tess::CosOp, tess::SinOp, tess::PowOp>(
          [&](Operation *) {
            return streaming(op, OpKind::Elementwise, 4, resultElements());
          })
      .Case<tess::SiluOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 5, resultElements());
      })
      .Case<tess::GeluOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 8, resultElements());
      })
      // silu and the product; the backward recomputes sigmoid(gate).
      .Case<tess::SwigluOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 6, resultElements());
      })
      .Case<tess::SwigluGradOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 12, resultElements());
      })
      // The packed forms: F results per 2F inputs, 2F results per F dy.
      .Case<tess::PackedSwigluOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 6, resultElements());
      })
      .Case<tess::PackedSwigluGradOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 6, resultElements());
      })
      .Case<tess::SiluGradOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 8, resultElements());
      })
      .Case<tess::GeluGradOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 12, resultElements());
      })
      .Case<tess::AddOp, tess::SubOp, tess::MulOp, tess::DivOp,
            tess::MaximumOp, tess::MinimumOp, tess::LogicalAndOp,
            tess::LogicalOrOp, tess::CompareOp, tess::WhereOp>(
          [&](Operation *) {
            return streaming(op, OpKind::Elementwise, 1, resultElements());
          })
      .Case<tess::CastOp>([&](Operation *) {
        return streaming(op, OpKind::Elementwise, 0, resultElements());
      })
      .Case<tess::DropoutOp>([&](Operation *) {
        // Counter-based random number, compare, scale.
        return streaming(op, OpKind::Elementwise, 4, resultElements());
      })
      .Case<tess::ReduceSumOp, tess::ReduceMeanOp, tess::ReduceMaxOp,
            tess::ReduceMinOp>([&](Operation *reduction) {
        return streaming(op, OpKind::Elementwise, 1,
                         elementsOf(reduction->getOperand(0)));
      })

      // Copies.
      .Case<tess::TransposeOp, tess::BroadcastOp, tess::SplitOp,
            tess::ConcatOp>([&](Operation *) {
        return streaming(op, OpKind::DataMovement, 0, 0);
      })
      .Case([&](tess::SliceOp slice) {
        // Reads only the window it copies.
        OpCost cost = streaming(op, OpKind::DataMovement, 0, 0);
        cost.bytes = 2 * bytesOf(slice.getResult());
        return cost;
      })
      .Case([&](tess::SliceGradOp slice) {
        // Zero the result, write the window.
        OpCost cost = streaming(op, OpKind::DataMovement, 0, 0);
        cost.bytes = bytesOf(slice.getDx()) + 2 * bytesOf(slice.getDy());
        return cost;
      })
      .Case([&](tess::EmbeddingOp embedding) {
        return gatherCost(op, embedding.getIndices(), embedding.getResult());
      })
      .Case([&](tess::GatherOp gather) {
        return gatherCost(op, gather.getIndices(), gather.getResult());
      })
      .Case([&](tess::EmbeddingGradOp gradient) {
        return scatterAddCost(op, gradient.getIndices(), gradient.getDy(),
                              gradient.getDtable());
      })
      .Case([&](tess::GatherGradOp gradient) {
        return scatterAddCost(op, gradient.getIndices(), gradient.getDy(),
                              gradient.getDx());
      })
      .Default([&](Operation *) {
        OpCost cost = streaming(op, OpKind::DataMovement, 0, 0);
        cost.modelled = false;
        return cost;
      });
}

} // namespace tessera::cost
