//===- Layers.cpp - kernel calls of the Transformer layers ----------------===//
//
// Norms, rotary, softmax, attention (the unpacked and the packed forms) and
// embeddings, with their gradients; a norm gradient with a residual (tess-
// fuse-epilogues) calls the *_add kernel.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
namespace tess = tessera::tess;

namespace tessera::lowering {
namespace {

/// A norm's backward: x, scale, dy, the residual added to dx when there is
/// one (the *_add kernel), dx, then the parameter gradients (`parameters`),
/// axis and epsilon.
template <typename NormGradOp>
LogicalResult normGradCall(KernelCallContext &c, StringRef kernel,
                           NormGradOp grad,
                           function_ref<void(CallArguments &)> parameters) {
  Value residual = grad.getResidual();
  std::string name = (kernel + (residual ? "_add" : "")).str();
  return c.call(name, [&](CallArguments &a) {
    a.value(c.in(grad.getInput()))
        .optional(c.in(grad.getScale()))
        .value(c.in(grad.getDy()));
    if (residual)
      a.value(c.in(residual));
    a.value(c.out(grad, 0));
    parameters(a);
    a.i64(axisOf(grad.getAxis(), grad.getInput()))
        .f64(grad.getEpsilon().convertToDouble());
  });
}

/// The entry point of an attention or its gradient: the softcapped kernels
/// for a softcap (they take a window too), the windowed ones for a window
/// alone, else the plain ones.
template <typename AttentionLikeOp>
std::string attentionKernel(AttentionLikeOp op, StringRef suffix) {
  if (op.getSoftcap().convertToDouble() != 0.0)
    return ("softcapped_attention" + suffix).str();
  if (op.getWindow() != 0)
    return ("sliding_window_attention" + suffix).str();
  return ("attention" + suffix).str();
}

/// The arguments after the tensors that attentionKernel's entry point takes,
/// up to the seed: which keys each query sees, the scale, the softcap and
/// the dropout rate.
template <typename AttentionLikeOp>
void attentionOptions(AttentionLikeOp op, CallArguments &a) {
  auto window = static_cast<int64_t>(op.getWindow());
  double softcap = op.getSoftcap().convertToDouble();
  if (softcap != 0.0 || !window)
    a.i32(op.getCausal());
  if (softcap != 0.0 || window)
    a.i64(window);
  a.f64(op.getScale().convertToDouble());
  if (softcap != 0.0)
    a.f64(softcap);
  a.f64(op.getDropout().convertToDouble());
}

/// A vocabulary-parallel table's block (rows_axis): its rows and the whole
/// table's.
struct TableBlock {
  int64_t rows, totalRows;
};
std::optional<TableBlock> tableBlock(Operation *op, Value table) {
  if (!op->hasAttr("rows_axis"))
    return std::nullopt;
  return TableBlock{
      llvm::cast<RankedTensorType>(table.getType()).getDimSize(0),
      tess::wholeTableRows(op, table)};
}

} // namespace

void populateLayerKernelCalls(KernelCallPatterns &patterns) {
  patterns.add<tess::SoftmaxOp>(
      [](tess::SoftmaxOp softmax, KernelCallContext &c) {
        return c.call("softmax", [&](CallArguments &a) {
          a.value(c.in(softmax.getInput()))
              .value(c.out(softmax))
              .i64(axisOf(softmax.getAxis(), softmax.getInput()));
        });
      });
  patterns.add<tess::LayerNormOp>(
      [](tess::LayerNormOp norm, KernelCallContext &c) {
        return c.call("layer_norm", [&](CallArguments &a) {
          a.value(c.in(norm.getInput()))
              .optional(c.in(norm.getScale()))
              .optional(c.in(norm.getBias()))
              .value(c.out(norm))
              .i64(axisOf(norm.getAxis(), norm.getInput()))
              .f64(norm.getEpsilon().convertToDouble());
        });
      });
  patterns.add<tess::RotaryOp>([](tess::RotaryOp rotary, KernelCallContext &c) {
    return c.call("rotary", [&](CallArguments &a) {
      a.value(c.in(rotary.getInput()))
          .value(c.in(rotary.getCos()))
          .value(c.in(rotary.getSin()))
          .value(c.out(rotary))
          .i32(rotary.getAdjoint())
          .i64(static_cast<int64_t>(rotary.getRotatedHeads()));
    });
  });
  patterns.add<tess::RmsNormOp>([](tess::RmsNormOp norm, KernelCallContext &c) {
    return c.call("rms_norm", [&](CallArguments &a) {
      a.value(c.in(norm.getInput()))
          .optional(c.in(norm.getScale()))
          .value(c.out(norm))
          .i64(axisOf(norm.getAxis(), norm.getInput()))
          .f64(norm.getEpsilon().convertToDouble());
    });
  });
  patterns.add<tess::EmbeddingOp>(
      [](tess::EmbeddingOp embedding, KernelCallContext &c) {
        if (auto block = tableBlock(embedding, embedding.getTable()))
          return c.call("embedding_rows", [&](CallArguments &a) {
            a.value(c.in(embedding.getTable()))
                .value(c.in(embedding.getIndices()))
                .value(c.out(embedding))
                .value(c.firstRow(embedding, block->rows))
                .i64(block->totalRows);
          });
        return c.call("embedding", [&](CallArguments &a) {
          a.value(c.in(embedding.getTable()))
              .value(c.in(embedding.getIndices()))
              .value(c.out(embedding));
        });
      });
  patterns.add<tess::AttentionOp>(
      [](tess::AttentionOp attention, KernelCallContext &c) {
        Value opSeed = c.streamedSeed(
            attention,
            c.attentionSeed(attention.getDropout().convertToDouble(),
                            attention.getSeed()));
        return c.call(attentionKernel(attention, ""), [&](CallArguments &a) {
          a.value(c.in(attention.getQuery()))
              .value(c.in(attention.getKey()))
              .value(c.in(attention.getValue()))
              .optional(c.in(attention.getMask()))
              .value(c.out(attention));
          attentionOptions(attention, a);
          a.value(opSeed);
        });
      });
  patterns.add<tess::PackedAttentionOp>(
      [](tess::PackedAttentionOp attention, KernelCallContext &c) {
        return c.call("packed_attention", [&](CallArguments &a) {
          a.value(c.in(attention.getQkv()))
              .value(c.out(attention, 0))
              .value(c.out(attention, 1))
              .i64(static_cast<int64_t>(attention.getQueryHeads()))
              .i64(static_cast<int64_t>(attention.getKeyHeads()))
              .i32(attention.getCausal())
              .f64(attention.getScale().convertToDouble());
        });
      });
  patterns.add<tess::LayerNormGradOp>(
      [](tess::LayerNormGradOp grad, KernelCallContext &c) {
        return normGradCall(c, "layer_norm_grad", grad, [&](CallArguments &a) {
          a.optional(grad.getDscale() ? c.in(grad.getDscale()) : Value())
              .optional(grad.getDbias() ? c.in(grad.getDbias()) : Value());
        });
      });
  patterns.add<tess::RmsNormGradOp>(
      [](tess::RmsNormGradOp grad, KernelCallContext &c) {
        return normGradCall(c, "rms_norm_grad", grad, [&](CallArguments &a) {
          a.optional(grad.getScale() ? c.out(grad, 1) : Value());
        });
      });
  patterns.add<tess::SoftmaxGradOp>(
      [](tess::SoftmaxGradOp grad, KernelCallContext &c) {
        return c.call("softmax_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getOutput()))
              .value(c.in(grad.getDy()))
              .value(c.out(grad))
              .i64(axisOf(grad.getAxis(), grad.getOutput()));
        });
      });
  patterns.add<tess::AttentionGradOp>([](tess::AttentionGradOp grad,
                                         KernelCallContext &c) {
    Value opSeed = c.streamedSeed(
        grad,
        c.attentionSeed(grad.getDropout().convertToDouble(), grad.getSeed()));
    return c.call(attentionKernel(grad, "_grad"), [&](CallArguments &a) {
      a.value(c.in(grad.getQuery()))
          .value(c.in(grad.getKey()))
          .value(c.in(grad.getValue()))
          .optional(c.in(grad.getMask()))
          .value(c.in(grad.getDy()))
          .value(c.out(grad, 0))
          .value(c.out(grad, 1))
          .value(c.out(grad, 2));
      attentionOptions(grad, a);
      a.value(opSeed);
    });
  });
  patterns.add<tess::PackedAttentionGradOp>(
      [](tess::PackedAttentionGradOp grad, KernelCallContext &c) {
        return c.call("packed_attention_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getQkv()))
              .value(c.in(grad.getY()))
              .value(c.in(grad.getLse()))
              .value(c.in(grad.getDy()))
              .value(c.out(grad))
              .i64(static_cast<int64_t>(grad.getQueryHeads()))
              .i64(static_cast<int64_t>(grad.getKeyHeads()))
              .i32(grad.getCausal())
              .f64(grad.getScale().convertToDouble());
        });
      });
  patterns.add<tess::EmbeddingGradOp>(
      [](tess::EmbeddingGradOp grad, KernelCallContext &c) {
        if (auto block = tableBlock(grad, grad.getDtable()))
          return c.call("embedding_grad_rows", [&](CallArguments &a) {
            a.value(c.in(grad.getIndices()))
                .value(c.in(grad.getDy()))
                .value(c.out(grad))
                .value(c.firstRow(grad, block->rows))
                .i64(block->totalRows);
          });
        return c.call("embedding_grad", [&](CallArguments &a) {
          a.value(c.in(grad.getIndices()))
              .value(c.in(grad.getDy()))
              .value(c.out(grad));
        });
      });
}

} // namespace tessera::lowering
