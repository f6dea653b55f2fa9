//===- MetricsTest.cpp - The step's console line and JSON object ----------===//

#include "Metrics.h"
#include "Json.h"

#include <gtest/gtest.h>

using namespace tessera::train;

namespace {

StepMetrics sample() {
  StepMetrics metrics;
  metrics.step = 3;
  metrics.totalSteps = 10;
  metrics.loss = 2.5;
  metrics.learningRate = 1e-3;
  metrics.gradientNorm = 0.75;
  metrics.tokensPerSecond = 123456.0;
  metrics.stepMilliseconds = 132.5;
  metrics.modelFlopsUtilization = 0.4125;
  metrics.peakMemoryBytes = int64_t(3) << 29; // 1.5 GiB
  return metrics;
}

TEST(Metrics, TheLineShowsMfuAndPeakMemory) {
  std::string line = formatMetricsLine(sample());
  EXPECT_NE(line.find("loss 2.500000"), std::string::npos) << line;
  EXPECT_NE(line.find("grad norm 0.7500"), std::string::npos) << line;
  EXPECT_NE(line.find("123456 tokens/s"), std::string::npos) << line;
  EXPECT_NE(line.find("MFU 41.2%"), std::string::npos) << line;
  EXPECT_NE(line.find("peak mem 1.50 GiB"), std::string::npos) << line;
}

TEST(Metrics, TheJsonObjectHasEveryKey) {
  std::string json = formatMetricsJson(sample());
  JsonValue value = parseJson(json, "metrics");
  for (const char *key : {"step", "loss", "lr", "grad_norm", "tokens_per_s",
                          "step_ms", "loss_scale", "skipped", "mfu",
                          "peak_memory_gib"})
    EXPECT_NE(json.find(std::string("\"") + key + "\":"), std::string::npos)
        << key << " in " << json;
  EXPECT_NE(json.find("\"mfu\":0.4125"), std::string::npos) << json;
  EXPECT_NE(json.find("\"peak_memory_gib\":1.5000"), std::string::npos)
      << json;
}

TEST(Metrics, AnUnknownMfuIsNullAndLeftOffTheLine) {
  StepMetrics metrics = sample();
  metrics.modelFlopsUtilization = -1;
  EXPECT_NE(formatMetricsJson(metrics).find("\"mfu\":null"),
            std::string::npos);
  EXPECT_EQ(formatMetricsLine(metrics).find("MFU"), std::string::npos);
}

// Tests the training-health fields: spike (with its band and actions on a
// spike) only when detection is on, the norms only when given, and the
// console's reason for a skipped step.
TEST(Metrics, SpikesAndGradientNorms) {
  StepMetrics metrics = sample();
  EXPECT_EQ(formatMetricsJson(metrics).find("spike"), std::string::npos);
  metrics.spikeDetection = true;
  EXPECT_NE(formatMetricsJson(metrics).find("\"spike\":false"),
            std::string::npos);
  metrics.spike = true;
  metrics.skipped = true;
  metrics.spikeLower = 0.5;
  metrics.spikeUpper = 1.5;
  metrics.spikeActions = "skip,checkpoint";
  metrics.gradientNorms.parameters = {{"h.0.w", 3}, {"a\"b", 4}};
  metrics.gradientNorms.layers = {{"h.0", 5}};
  JsonValue value = parseJson(formatMetricsJson(metrics), "metrics");
  EXPECT_TRUE(value.find("spike")->boolean);
  ASSERT_EQ(value.find("spike_band")->array.size(), 2u);
  EXPECT_EQ(value.find("spike_band")->array[1].number, 1.5);
  EXPECT_EQ(value.find("spike_actions")->string, "skip,checkpoint");
  EXPECT_EQ(value.find("param_grad_norms")->find("a\"b")->number, 4);
  EXPECT_EQ(value.find("layer_grad_norms")->find("h.0")->number, 5);
  EXPECT_NE(formatMetricsLine(metrics).find("skipped: gradient norm spike"),
            std::string::npos);
}

} // namespace
