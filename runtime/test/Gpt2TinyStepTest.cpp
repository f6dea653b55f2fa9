//===- Gpt2TinyStepTest.cpp - One GPT-2 training step out of the kernels --===//
//
// A gpt2-tiny (batch 2, seq 32, d 64, 4 heads, 2 layers, vocab 512, tied
// LM head) forward, backward and AdamW step written as the sequence of
// kernel calls a lowered training program makes. It checks that the kernels
// compose (the loss starts near log(vocab), the backward agrees with finite
// differences of the whole loss, training on one batch lowers the loss) and
// that a step is fast enough for a reference backend (well under 100 ms).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <chrono>
#include <iostream>
#include <memory>

using namespace tessera_test;

namespace {

constexpr int64_t kBatch = 2, kSeq = 32, kModel = 64, kHeads = 4,
                  kHeadDim = kModel / kHeads, kLayers = 2, kVocab = 512,
                  kHidden = 4 * kModel, kTokens = kBatch * kSeq;
constexpr double kEpsilon = 1e-5;

/// `tensor`'s data under another shape (a reshape is free in row-major).
tessera_tensor view(Tensor &tensor, const Shape &shape) {
  tessera_tensor result = *tensor.get();
  result.rank = static_cast<int32_t>(shape.size());
  for (size_t dim = 0; dim < shape.size(); ++dim)
    result.shape[dim] = shape[dim];
  EXPECT_EQ(countOf(shape), tensor.count());
  return result;
}

/// A parameter with its gradient and AdamW moments.
struct Parameter {
  Parameter(const Shape &shape, uint32_t seed, float initialScale,
            float offset = 0.0f)
      : value(Tensor::floats(shape, randomFloats(countOf(shape), seed,
                                                 offset - initialScale,
                                                 offset + initialScale))),
        grad(TESSERA_F32, shape), m(TESSERA_F32, shape), v(TESSERA_F32, shape) {
  }
  Tensor value, grad, m, v;
};

struct Layer {
  explicit Layer(uint32_t seed)
      : ln1Scale({kModel}, seed + 1, 0.1f, 1.0f),
        ln1Bias({kModel}, seed + 2, 0.1f),
        qkvWeight({kModel, 3 * kModel}, seed + 3, 0.1f),
        qkvBias({3 * kModel}, seed + 4, 0.02f),
        projWeight({kModel, kModel}, seed + 5, 0.1f),
        projBias({kModel}, seed + 6, 0.02f),
        ln2Scale({kModel}, seed + 7, 0.1f, 1.0f),
        ln2Bias({kModel}, seed + 8, 0.1f),
        fcWeight({kModel, kHidden}, seed + 9, 0.1f),
        fcBias({kHidden}, seed + 10, 0.02f),
        fc2Weight({kHidden, kModel}, seed + 11, 0.05f),
        fc2Bias({kModel}, seed + 12, 0.02f) {}
  Parameter ln1Scale, ln1Bias, qkvWeight, qkvBias, projWeight, projBias;
  Parameter ln2Scale, ln2Bias, fcWeight, fcBias, fc2Weight, fc2Bias;
  std::vector<Parameter *> parameters() {
    return {&ln1Scale, &ln1Bias, &qkvWeight, &qkvBias, &projWeight, &projBias,
            &ln2Scale, &ln2Bias, &fcWeight,  &fcBias,  &fc2Weight,  &fc2Bias};
  }

  // Activations saved by the forward for the backward.
  Tensor input{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor ln1{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor qkv{TESSERA_F32, {kBatch, kSeq, 3 * kModel}};
  Tensor q{TESSERA_F32, {kBatch, kSeq, kModel}},
      k{TESSERA_F32, {kBatch, kSeq, kModel}},
      v{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor qHeads{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor kHeads_{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor vHeads{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor attention{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor merged{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor projected{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor afterAttention{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor ln2{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor fc{TESSERA_F32, {kBatch, kSeq, kHidden}};
  Tensor gelu{TESSERA_F32, {kBatch, kSeq, kHidden}};
  Tensor fc2{TESSERA_F32, {kBatch, kSeq, kModel}};
};

const int64_t kSplitHeads[] = {0, 2, 1, 3}; // [B, S, H, Dh] <-> [B, H, S, Dh]

class Gpt2Tiny {
public:
  Gpt2Tiny()
      : tokenEmbedding({kVocab, kModel}, 100, 0.1f),
        positionEmbedding({kSeq, kModel}, 101, 0.05f),
        finalScale({kModel}, 102, 0.1f, 1.0f), finalBias({kModel}, 103, 0.1f) {
    for (int64_t layer = 0; layer < kLayers; ++layer)
      layers.push_back(
          std::make_unique<Layer>(200 + 20 * static_cast<uint32_t>(layer)));
    std::vector<int64_t> tokens(kTokens), next(kTokens), positions(kTokens);
    for (int64_t i = 0; i < kTokens; ++i) {
      tokens[i] = (i * 37 + 11) % kVocab;
      next[i] = (i * 53 + 7) % kVocab;
      positions[i] = i % kSeq;
    }
    next[5] = -100; // one padded position
    ids = Tensor::integers({kBatch, kSeq}, tokens);
    targets = Tensor::integers({kTokens}, next);
    positionIds = Tensor::integers({kBatch, kSeq}, positions);
  }

  std::vector<Parameter *> parameters() {
    std::vector<Parameter *> all = {&tokenEmbedding, &positionEmbedding,
                                    &finalScale, &finalBias};
    for (auto &layer : layers)
      for (Parameter *parameter : layer->parameters())
        all.push_back(parameter);
    return all;
  }

  float forward() {
    EXPECT_KERNEL_OK(tessera_cpu_embedding(tokenEmbedding.value.get(),
                                           ids.get(), tokens.get()));
    EXPECT_KERNEL_OK(tessera_cpu_embedding(positionEmbedding.value.get(),
                                           positionIds.get(), positions.get()));
    Tensor *x = &embedded;
    EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_ADD, tokens.get(),
                                        positions.get(), x->get()));
    for (auto &layerPointer : layers) {
      Layer &layer = *layerPointer;
      EXPECT_KERNEL_OK(tessera_cpu_copy(x->get(), layer.input.get()));
      EXPECT_KERNEL_OK(tessera_cpu_layer_norm(
          layer.input.get(), layer.ln1Scale.value.get(),
          layer.ln1Bias.value.get(), layer.ln1.get(), 2, kEpsilon));
      EXPECT_KERNEL_OK(
          tessera_cpu_linear(layer.ln1.get(), layer.qkvWeight.value.get(),
                             layer.qkvBias.value.get(), layer.qkv.get(), 0));
      tessera_tensor *pieces[] = {layer.q.get(), layer.k.get(), layer.v.get()};
      EXPECT_KERNEL_OK(tessera_cpu_split(layer.qkv.get(), pieces, 3, 2));
      Shape split = {kBatch, kSeq, kHeads, kHeadDim};
      tessera_tensor qView = view(layer.q, split), kView = view(layer.k, split),
                     vView = view(layer.v, split);
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(&qView, layer.qHeads.get(), kSplitHeads));
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(&kView, layer.kHeads_.get(), kSplitHeads));
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(&vView, layer.vHeads.get(), kSplitHeads));
      EXPECT_KERNEL_OK(tessera_cpu_attention(
          layer.qHeads.get(), layer.kHeads_.get(), layer.vHeads.get(), nullptr,
          layer.attention.get(), 1, 1.0 / std::sqrt(double(kHeadDim)), 0.0, 0));
      tessera_tensor mergedView = view(layer.merged, split);
      EXPECT_KERNEL_OK(tessera_cpu_transpose(layer.attention.get(), &mergedView,
                                             kSplitHeads));
      EXPECT_KERNEL_OK(tessera_cpu_linear(
          layer.merged.get(), layer.projWeight.value.get(),
          layer.projBias.value.get(), layer.projected.get(), 0));
      EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_ADD, layer.input.get(),
                                          layer.projected.get(),
                                          layer.afterAttention.get()));
      EXPECT_KERNEL_OK(tessera_cpu_layer_norm(
          layer.afterAttention.get(), layer.ln2Scale.value.get(),
          layer.ln2Bias.value.get(), layer.ln2.get(), 2, kEpsilon));
      EXPECT_KERNEL_OK(
          tessera_cpu_linear(layer.ln2.get(), layer.fcWeight.value.get(),
                             layer.fcBias.value.get(), layer.fc.get(), 0));
      EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_GELU_TANH, layer.fc.get(),
                                         layer.gelu.get()));
      EXPECT_KERNEL_OK(
          tessera_cpu_linear(layer.gelu.get(), layer.fc2Weight.value.get(),
                             layer.fc2Bias.value.get(), layer.fc2.get(), 0));
      EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_ADD,
                                          layer.afterAttention.get(),
                                          layer.fc2.get(), residual.get()));
      x = &residual;
    }
    EXPECT_KERNEL_OK(tessera_cpu_copy(x->get(), finalInput.get()));
    EXPECT_KERNEL_OK(tessera_cpu_layer_norm(
        finalInput.get(), finalScale.value.get(), finalBias.value.get(),
        finalNormalized.get(), 2, kEpsilon));
    EXPECT_KERNEL_OK(tessera_cpu_linear(finalNormalized.get(),
                                        tokenEmbedding.value.get(), nullptr,
                                        logits.get(), 1));
    tessera_tensor logitRows = view(logits, {kTokens, kVocab});
    EXPECT_KERNEL_OK(
        tessera_cpu_cross_entropy(&logitRows, targets.get(), nullptr, loss.get(), -100));
    return loss.at(0);
  }

  /// Gradients of the last forward's loss into every Parameter::grad.
  void backward() {
    Tensor one = Tensor::floats({}, {1.0f});
    tessera_tensor logitRows = view(logits, {kTokens, kVocab});
    tessera_tensor dlogitRows = view(dlogits, {kTokens, kVocab});
    EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_grad(
        &logitRows, targets.get(), nullptr, one.get(), &dlogitRows, -100));
    tessera_tensor normalizedRows = view(finalNormalized, {kTokens, kModel});
    EXPECT_KERNEL_OK(
        tessera_cpu_matmul(&dlogitRows, &normalizedRows, headGrad.get(), 1, 0));
    EXPECT_KERNEL_OK(tessera_cpu_linear(dlogits.get(),
                                        tokenEmbedding.value.get(), nullptr,
                                        dNormalized.get(), 0));
    EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(
        finalInput.get(), finalScale.value.get(), dNormalized.get(), dx.get(),
        finalScale.grad.get(), finalBias.grad.get(), 2, kEpsilon));
    for (size_t index = layers.size(); index-- > 0;) {
      Layer &layer = *layers[index];
      // MLP branch; dx is the gradient of the layer's output.
      linearBackward(layer.gelu, layer.fc2Weight, layer.fc2Bias, dx, dGelu);
      EXPECT_KERNEL_OK(tessera_cpu_unary_grad(TESSERA_GELU_TANH, layer.fc.get(),
                                              dGelu.get(), dFc.get()));
      linearBackward(layer.ln2, layer.fcWeight, layer.fcBias, dFc, dLn);
      EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(
          layer.afterAttention.get(), layer.ln2Scale.value.get(), dLn.get(),
          dBranch.get(), layer.ln2Scale.grad.get(), layer.ln2Bias.grad.get(), 2,
          kEpsilon));
      EXPECT_KERNEL_OK(
          tessera_cpu_binary(TESSERA_ADD, dx.get(), dBranch.get(), dx.get()));
      // Attention branch.
      linearBackward(layer.merged, layer.projWeight, layer.projBias, dx,
                     dMerged);
      Shape split = {kBatch, kSeq, kHeads, kHeadDim};
      tessera_tensor dMergedView = view(dMerged, split);
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(&dMergedView, dAttention.get(), kSplitHeads));
      EXPECT_KERNEL_OK(tessera_cpu_attention_grad(
          layer.qHeads.get(), layer.kHeads_.get(), layer.vHeads.get(), nullptr,
          dAttention.get(), dqHeads.get(), dkHeads.get(), dvHeads.get(), 1,
          1.0 / std::sqrt(double(kHeadDim)), 0.0, 0));
      tessera_tensor dqView = view(dq, split), dkView = view(dk, split),
                     dvView = view(dv, split);
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(dqHeads.get(), &dqView, kSplitHeads));
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(dkHeads.get(), &dkView, kSplitHeads));
      EXPECT_KERNEL_OK(
          tessera_cpu_transpose(dvHeads.get(), &dvView, kSplitHeads));
      const tessera_tensor *pieces[] = {dq.get(), dk.get(), dv.get()};
      EXPECT_KERNEL_OK(tessera_cpu_concat(pieces, 3, dQkv.get(), 2));
      linearBackward(layer.ln1, layer.qkvWeight, layer.qkvBias, dQkv, dLn);
      EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(
          layer.input.get(), layer.ln1Scale.value.get(), dLn.get(),
          dBranch.get(), layer.ln1Scale.grad.get(), layer.ln1Bias.grad.get(), 2,
          kEpsilon));
      EXPECT_KERNEL_OK(
          tessera_cpu_binary(TESSERA_ADD, dx.get(), dBranch.get(), dx.get()));
    }
    EXPECT_KERNEL_OK(tessera_cpu_embedding_grad(ids.get(), dx.get(),
                                                tokenEmbedding.grad.get()));
    EXPECT_KERNEL_OK(tessera_cpu_embedding_grad(positionIds.get(), dx.get(),
                                                positionEmbedding.grad.get()));
    EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_ADD, tokenEmbedding.grad.get(),
                                        headGrad.get(),
                                        tokenEmbedding.grad.get()));
  }

  void optimizerStep(int64_t step, double learningRate) {
    double sumOfSquares = 0.0;
    for (Parameter *parameter : parameters())
      EXPECT_KERNEL_OK(
          tessera_cpu_sum_squares(parameter->grad.get(), &sumOfSquares));
    double norm = std::sqrt(sumOfSquares);
    double clip = norm > 1.0 ? 1.0 / norm : 1.0;
    for (Parameter *parameter : parameters())
      EXPECT_KERNEL_OK(tessera_cpu_adamw(
          parameter->value.get(), parameter->grad.get(), parameter->m.get(),
          parameter->v.get(), step, learningRate, 0.9, 0.95, 1e-8, 0.1, clip));
  }

private:
  /// For y = x W + b: dW = x^T dy, db = sum dy, dx = dy W^T.
  void linearBackward(Tensor &input, Parameter &weight, Parameter &bias,
                      Tensor &dOutput, Tensor &dInput) {
    int64_t in = input.dims().back(), out = dOutput.dims().back();
    tessera_tensor inputRows = view(input, {kTokens, in});
    tessera_tensor dOutputRows = view(dOutput, {kTokens, out});
    EXPECT_KERNEL_OK(
        tessera_cpu_matmul(&inputRows, &dOutputRows, weight.grad.get(), 1, 0));
    const int64_t rowsDim[] = {0};
    EXPECT_KERNEL_OK(tessera_cpu_reduce(TESSERA_REDUCE_SUM, &dOutputRows,
                                        bias.grad.get(), rowsDim, 1));
    EXPECT_KERNEL_OK(tessera_cpu_linear(dOutput.get(), weight.value.get(),
                                        nullptr, dInput.get(), 1));
  }

  Parameter tokenEmbedding, positionEmbedding, finalScale, finalBias;
  std::vector<std::unique_ptr<Layer>> layers;
  Tensor ids{TESSERA_I64, {1}}, targets{TESSERA_I64, {1}},
      positionIds{TESSERA_I64, {1}};
  Tensor tokens{TESSERA_F32, {kBatch, kSeq, kModel}},
      positions{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor embedded{TESSERA_F32, {kBatch, kSeq, kModel}},
      residual{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor finalInput{TESSERA_F32, {kBatch, kSeq, kModel}},
      finalNormalized{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor logits{TESSERA_F32, {kBatch, kSeq, kVocab}}, loss{TESSERA_F32, {}};
  // Gradient buffers.
  Tensor dlogits{TESSERA_F32, {kBatch, kSeq, kVocab}},
      headGrad{TESSERA_F32, {kVocab, kModel}};
  Tensor dNormalized{TESSERA_F32, {kBatch, kSeq, kModel}},
      dx{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor dGelu{TESSERA_F32, {kBatch, kSeq, kHidden}},
      dFc{TESSERA_F32, {kBatch, kSeq, kHidden}};
  Tensor dLn{TESSERA_F32, {kBatch, kSeq, kModel}},
      dBranch{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor dMerged{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor dAttention{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor dqHeads{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor dkHeads{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor dvHeads{TESSERA_F32, {kBatch, kHeads, kSeq, kHeadDim}};
  Tensor dq{TESSERA_F32, {kBatch, kSeq, kModel}},
      dk{TESSERA_F32, {kBatch, kSeq, kModel}},
      dv{TESSERA_F32, {kBatch, kSeq, kModel}};
  Tensor dQkv{TESSERA_F32, {kBatch, kSeq, 3 * kModel}};
};

TEST(Gpt2TinyStep, LossStartsNearLogVocab) {
  Gpt2Tiny model;
  float loss = model.forward();
  EXPECT_NEAR(loss, std::log(static_cast<double>(kVocab)), 1.0);
}

TEST(Gpt2TinyStep, BackwardMatchesFiniteDifferencesOfTheLoss) {
  Gpt2Tiny model;
  model.forward();
  model.backward();
  // A few elements of parameters spread over the network (f32 loss: a
  // coarse check of the chain, the per-kernel tests are the precise ones).
  std::vector<Parameter *> parameters = model.parameters();
  for (size_t which : {size_t(0), size_t(1), size_t(2), size_t(6), size_t(8),
                       size_t(14), parameters.size() - 2}) {
    Parameter &parameter = *parameters[which];
    for (int64_t element : {int64_t(0), parameter.value.count() / 3,
                            parameter.value.count() - 1}) {
      float original = parameter.value.f32()[element];
      const float step = 1e-2f;
      parameter.value.f32()[element] = original + step;
      double plus = model.forward();
      parameter.value.f32()[element] = original - step;
      double minus = model.forward();
      parameter.value.f32()[element] = original;
      double numeric = (plus - minus) / (2 * step);
      EXPECT_NEAR(parameter.grad.at(element), numeric,
                  3e-4 + 0.03 * std::fabs(numeric))
          << "parameter " << which << " element " << element;
    }
  }
}

TEST(Gpt2TinyStep, TrainingOnOneBatchLowersTheLossAndAStepIsFast) {
  Gpt2Tiny model;
  float first = model.forward();
  model.backward();
  model.optimizerStep(1, 3e-3);
  const int steps = 10;
  auto start = std::chrono::steady_clock::now();
  float last = first;
  for (int step = 2; step < 2 + steps; ++step) {
    last = model.forward();
    model.backward();
    model.optimizerStep(step, 3e-3);
  }
  double milliseconds = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count() /
                        steps;
  std::cout << "[ gpt2-tiny ] one training step (forward, backward, AdamW): "
            << milliseconds << " ms; loss " << first << " -> " << last << "\n";
  RecordProperty("step_milliseconds", std::to_string(milliseconds));
  EXPECT_LT(last, first - 0.5f);
#ifdef NDEBUG
  EXPECT_LT(milliseconds, 100.0);
#endif
}

} // namespace
