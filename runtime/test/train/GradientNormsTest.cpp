//===- GradientNormsTest.cpp - Per-parameter and per-layer norms ----------===//

#include "GradientNorms.h"
#include "TrainError.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessera::train;

namespace {

// Tests the layer names the exporters' parameter names give.
TEST(GradientNorms, LayersComeFromTheNames) {
  EXPECT_EQ(layerOfParameter("model.layers.3.mlp.up_proj.weight"),
            "model.layers.3");
  EXPECT_EQ(layerOfParameter("transformer.h.11.attn.c_attn.weight"),
            "transformer.h.11");
  EXPECT_EQ(layerOfParameter("bert.encoder.layer.0.output.dense.bias"),
            "bert.encoder.layer.0");
  EXPECT_EQ(layerOfParameter("model.norm.weight"), "model.norm");
  EXPECT_EQ(layerOfParameter("lm_head.weight"), "lm_head");
  EXPECT_EQ(layerOfParameter("onnx::MatMul_1234"), "onnx::MatMul_1234");
  EXPECT_EQ(layerOfParameter("h2.weight"), "h2");
}

// Tests the norms: per parameter sqrt(sum) / divisor, per layer over its
// parameters, layers in the order they first come.
TEST(GradientNorms, NormsPerParameterAndLayer) {
  const tessera_tensor_info parameters[] = {
      {"model.embed_tokens.weight", TESSERA_F32, 1, {4}},
      {"model.layers.0.q.weight", TESSERA_F32, 1, {4}},
      {"model.layers.0.k.weight", TESSERA_F32, 1, {4}},
      {"model.layers.1.q.weight", TESSERA_F32, 1, {4}},
  };
  tessera_program program{};
  program.parameter_count = 4;
  program.parameters = parameters;
  GradientNorms norms = gradientNorms(program, {16, 9, 16, 4}, 2);
  ASSERT_EQ(norms.parameters.size(), 4u);
  EXPECT_EQ(norms.parameters[1].first, "model.layers.0.q.weight");
  EXPECT_DOUBLE_EQ(norms.parameters[0].second, 2);
  EXPECT_DOUBLE_EQ(norms.parameters[2].second, 2);
  ASSERT_EQ(norms.layers.size(), 3u);
  EXPECT_EQ(norms.layers[0].first, "model.embed_tokens");
  EXPECT_EQ(norms.layers[1].first, "model.layers.0");
  EXPECT_DOUBLE_EQ(norms.layers[1].second, 2.5);
  EXPECT_EQ(norms.layers[2].first, "model.layers.1");
  EXPECT_DOUBLE_EQ(norms.layers[2].second, 1);
  EXPECT_THROW(gradientNorms(program, {1, 2}, 1), TrainError);
}

} // namespace
