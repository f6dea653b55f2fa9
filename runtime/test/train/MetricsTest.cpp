//===- MetricsTest.cpp - The step's console line and JSON object ----------===//

#include "Json.h"
#include "Metrics.h"

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

} // namespace
