//===- GptTrainingProgram.cpp - a GPT-2-shaped training step for tests ----===//

#include "GptTrainingProgram.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

#include <gtest/gtest.h>

using llvm::formatv;

namespace tessera::cost::test_programs {
namespace {

/// Emits numbered SSA values and keeps the text.
class ForwardWriter {
public:
  explicit ForwardWriter(const GptShape &shape) : shape(shape) {}

  std::string write();

private:
  std::string fresh() { return formatv("%v{0}", next++).str(); }
  std::string tensor(std::initializer_list<int64_t> dims,
                     const char *element = "f32") {
    std::string text = "tensor<";
    for (int64_t dim : dims)
      text += std::to_string(dim) + "x";
    return text + element + ">";
  }
  std::string parameter(const std::string &name, const std::string &type) {
    std::string value = fresh();
    body += formatv("    {0} = tess.parameter \"{1}\" trainable : {2}\n",
                    value, name, type);
    return value;
  }
  std::string layerNorm(const std::string &input, const std::string &prefix);
  std::string linear(const std::string &input, int64_t in, int64_t out,
                     const std::string &prefix);
  /// [B, T, d] -> [B, h, T, d/h]
  std::string toHeads(const std::string &input);
  std::string block(const std::string &input, int64_t layer);

  const GptShape &shape;
  std::string body;
  int next = 0;
};

std::string ForwardWriter::layerNorm(const std::string &input,
                                     const std::string &prefix) {
  int64_t d = shape.width;
  std::string scale = parameter(prefix + ".weight", tensor({d}));
  std::string bias = parameter(prefix + ".bias", tensor({d}));
  std::string result = fresh();
  std::string activation = tensor({shape.batch, shape.sequence, d});
  body += formatv("    {0} = tess.layer_norm {1} scale {2} bias {3} "
                  "{{epsilon = 1.0e-05 : f64} : ({4}, {5}, {5}) -> {4}\n",
                  result, input, scale, bias, activation, tensor({d}));
  return result;
}

std::string ForwardWriter::linear(const std::string &input, int64_t in,
                                  int64_t out, const std::string &prefix) {
  std::string weight = parameter(prefix + ".weight", tensor({in, out}));
  std::string bias = parameter(prefix + ".bias", tensor({out}));
  std::string result = fresh();
  body += formatv("    {0} = tess.linear {1}, {2}, {3} : ({4}, {5}, {6}) -> "
                  "{7}\n",
                  result, input, weight, bias,
                  tensor({shape.batch, shape.sequence, in}),
                  tensor({in, out}), tensor({out}),
                  tensor({shape.batch, shape.sequence, out}));
  return result;
}

std::string ForwardWriter::toHeads(const std::string &input) {
  int64_t b = shape.batch, t = shape.sequence, h = shape.heads,
          dh = shape.width / shape.heads;
  std::string split = fresh(), transposed = fresh();
  body += formatv("    {0} = tess.reshape {1} : ({2}) -> {3}\n", split, input,
                  tensor({b, t, shape.width}), tensor({b, t, h, dh}));
  body += formatv("    {0} = tess.transpose {1} {{permutation = array<i64: "
                  "0, 2, 1, 3>} : ({2}) -> {3}\n",
                  transposed, split, tensor({b, t, h, dh}),
                  tensor({b, h, t, dh}));
  return transposed;
}

std::string ForwardWriter::block(const std::string &input, int64_t layer) {
  int64_t b = shape.batch, t = shape.sequence, d = shape.width,
          h = shape.heads, dh = d / h;
  std::string prefix = formatv("transformer.h.{0}", layer).str();
  std::string activation = tensor({b, t, d});

  std::string normed = layerNorm(input, prefix + ".ln_1");
  std::string qkv = linear(normed, d, 3 * d, prefix + ".attn.c_attn");
  std::string parts = fresh();
  body += formatv("    {0}:3 = tess.split {1} {{axis = 2 : i64, sizes = "
                  "array<i64: {2}, {2}, {2}>} : ({3}) -> ({4}, {4}, {4})\n",
                  parts, qkv, d, tensor({b, t, 3 * d}), activation);
  std::string query = toHeads(parts + "#0");
  std::string key = toHeads(parts + "#1");
  std::string value = toHeads(parts + "#2");
  std::string heads = tensor({b, h, t, dh});
  std::string attended = fresh();
  std::string dropout =
      shape.attentionDropout > 0
          ? formatv("dropout = {0} : f64, ", shape.attentionDropout).str()
          : std::string();
  body += formatv("    {0} = tess.attention {1}, {2}, {3} {{causal, {6}scale = "
                  "{4} : f64{7}} : ({5}, {5}, {5}) -> {5}\n",
                  attended, query, key, value, 1.0 / std::sqrt(double(dh)),
                  heads, dropout,
                  shape.attentionDropout > 0 ? ", seed = 1 : i64" : "");
  std::string back = fresh(), merged = fresh();
  body += formatv("    {0} = tess.transpose {1} {{permutation = array<i64: "
                  "0, 2, 1, 3>} : ({2}) -> {3}\n",
                  back, attended, heads, tensor({b, t, h, dh}));
  body += formatv("    {0} = tess.reshape {1} : ({2}) -> {3}\n", merged, back,
                  tensor({b, t, h, dh}), activation);
  std::string projected = linear(merged, d, d, prefix + ".attn.c_proj");
  std::string residual = fresh();
  body += formatv("    {0} = tess.add {1}, {2} : ({3}, {3}) -> {3}\n",
                  residual, projected, input, activation);

  std::string normed2 = layerNorm(residual, prefix + ".ln_2");
  std::string up = linear(normed2, d, 4 * d, prefix + ".mlp.c_fc");
  std::string gelu = fresh();
  body += formatv("    {0} = tess.gelu {1} {{approximation = "
                  "#tess<gelu_approximation tanh>} : {2}\n",
                  gelu, up, tensor({b, t, 4 * d}));
  std::string down = linear(gelu, 4 * d, d, prefix + ".mlp.c_proj");
  std::string output = fresh();
  body += formatv("    {0} = tess.add {1}, {2} : ({3}, {3}) -> {3}\n", output,
                  residual, down, activation);
  return output;
}

std::string ForwardWriter::write() {
  int64_t b = shape.batch, t = shape.sequence, d = shape.width,
          v = shape.vocabulary;
  std::string positions = fresh();
  body += formatv("    {0} = tess.constant dense<0> : {1}\n", positions,
                  tensor({1, t}, "i64"));
  std::string wte = parameter(
      shape.tied ? "lm_head.weight" : "transformer.wte.weight", tensor({v, d}));
  std::string wpe = parameter("transformer.wpe.weight", tensor({t, d}));
  std::string tokens = fresh(), places = fresh(), x = fresh();
  body += formatv("    {0} = tess.embedding {1}, %ids : ({2}, {3}) -> {4}\n",
                  tokens, wte, tensor({v, d}), tensor({b, t}, "i64"),
                  tensor({b, t, d}));
  body += formatv("    {0} = tess.embedding {1}, {2} : ({3}, {4}) -> {5}\n",
                  places, wpe, positions, tensor({t, d}),
                  tensor({1, t}, "i64"), tensor({1, t, d}));
  body += formatv("    {0} = tess.add {1}, {2} : ({3}, {4}) -> {3}\n", x,
                  tokens, places, tensor({b, t, d}), tensor({1, t, d}));
  for (int64_t layer = 0; layer < shape.layers; ++layer)
    x = block(x, layer);
  std::string final = layerNorm(x, "transformer.ln_f");
  std::string head =
      shape.tied ? wte : parameter("lm_head.weight", tensor({v, d}));
  std::string logits = fresh();
  body += formatv("    {0} = tess.linear {1}, {2} {{transpose_weight} : ({3}, "
                  "{4}) -> {5}\n",
                  logits, final, head, tensor({b, t, d}), tensor({v, d}),
                  tensor({b, t, v}));
  body += formatv("    return {0} : {1}\n", logits, tensor({b, t, v}));
  return formatv("module {{\n  func.func @forward(%ids: {0}) -> {1} {{\n{2}"
                 "  }\n}\n",
                 tensor({b, t}, "i64"), tensor({b, t, v}), body)
      .str();
}

} // namespace

std::string gptForwardText(const GptShape &shape) {
  return ForwardWriter(shape).write();
}

mlir::OwningOpRef<mlir::ModuleOp>
buildGptTrainingProgram(mlir::MLIRContext &context, const GptShape &shape,
                        const std::string &precision) {
  context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(gptForwardText(shape), &context);
  if (!module) {
    ADD_FAILURE() << "the generated GPT forward does not parse";
    return nullptr;
  }
  mlir::PassManager pm(&context);
  BuildTrainingOptions options;
  options.loss = "causal-lm";
  options.precision = precision;
  buildTrainingPipeline(pm, options);
  if (mlir::failed(pm.run(*module))) {
    ADD_FAILURE() << "building the " << precision
                  << " training step failed";
    return nullptr;
  }
  return module;
}

} // namespace tessera::cost::test_programs
