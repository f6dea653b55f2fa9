//===- Metrics.cpp - Console lines and JSON lines per step ----------------===//
//
// Design: the console line is for people (fixed columns, a few significant
// digits); the JSON line is for scripts and plots, so its numbers are printed
// with enough digits to round-trip (%.9g for f32 losses, %.17g for doubles)
// and a non-finite value (a diverged loss) becomes null, since JSON has no
// NaN. Both are flushed after every step: the metrics of a killed run must
// survive it. Keys: step, loss, lr, grad_norm, tokens_per_s, step_ms,
// loss_scale, skipped, mfu (a fraction; null when the program does not say
// its FLOPs), peak_memory_gib (GiB = 2^30 bytes); with --on-spike, spike
// (and on a spike spike_band [lower, upper] and spike_actions); on
// --grad-norms-every's steps layer_grad_norms and param_grad_norms, objects
// from names to norms in program order.
//
//===----------------------------------------------------------------------===//

#include "Metrics.h"

#include "Json.h"
#include "TrainError.h"

#include <cmath>

namespace tessera::train {
namespace {

std::string formatNumber(const char *format, double value) {
  if (!std::isfinite(value))
    return "null";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

double gibibytes(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
}

std::string normsObject(const NamedNorms &norms) {
  std::string out = "{";
  for (size_t i = 0; i < norms.size(); ++i)
    out += (i ? "," : "") + quoteJson(norms[i].first) + ":" +
           formatNumber("%.9g", norms[i].second);
  return out + "}";
}

} // namespace

std::string formatMetricsJson(const StepMetrics &metrics) {
  std::string out =
      "{\"step\":" + std::to_string(metrics.step) +
      ",\"loss\":" + formatNumber("%.9g", metrics.loss) +
      ",\"lr\":" + formatNumber("%.17g", metrics.learningRate) +
      ",\"grad_norm\":" + formatNumber("%.9g", metrics.gradientNorm) +
      ",\"tokens_per_s\":" + formatNumber("%.1f", metrics.tokensPerSecond) +
      ",\"step_ms\":" + formatNumber("%.3f", metrics.stepMilliseconds) +
      ",\"loss_scale\":" + formatNumber("%.17g", metrics.lossScale) +
      ",\"skipped\":" + (metrics.skipped ? "true" : "false") + ",\"mfu\":" +
      (metrics.modelFlopsUtilization < 0
           ? std::string("null")
           : formatNumber("%.6g", metrics.modelFlopsUtilization)) +
      ",\"peak_memory_gib\":" +
      formatNumber("%.4f", gibibytes(metrics.peakMemoryBytes));
  if (metrics.spikeDetection) {
    out += ",\"spike\":" + std::string(metrics.spike ? "true" : "false");
    if (metrics.spike)
      out += ",\"spike_band\":[" + formatNumber("%.9g", metrics.spikeLower) +
             "," + formatNumber("%.9g", metrics.spikeUpper) +
             "],\"spike_actions\":" + quoteJson(metrics.spikeActions);
  }
  if (!metrics.gradientNorms.parameters.empty())
    out +=
        ",\"layer_grad_norms\":" + normsObject(metrics.gradientNorms.layers) +
        ",\"param_grad_norms\":" +
        normsObject(metrics.gradientNorms.parameters);
  return out + "}";
}

std::string formatMetricsLine(const StepMetrics &metrics) {
  char buffer[256];
  std::snprintf(buffer, sizeof(buffer),
                "step %5lld/%lld | loss %.6f | lr %.4e | grad norm %.4f | "
                "%.0f tokens/s | %.1f ms",
                static_cast<long long>(metrics.step),
                static_cast<long long>(metrics.totalSteps), metrics.loss,
                metrics.learningRate, metrics.gradientNorm,
                metrics.tokensPerSecond, metrics.stepMilliseconds);
  std::string line = buffer;
  if (metrics.modelFlopsUtilization >= 0) {
    std::snprintf(buffer, sizeof(buffer), " | MFU %.1f%%",
                  100.0 * metrics.modelFlopsUtilization);
    line += buffer;
  }
  std::snprintf(buffer, sizeof(buffer), " | peak mem %.2f GiB",
                gibibytes(metrics.peakMemoryBytes));
  line += buffer;
  if (metrics.skipped && metrics.spike) {
    line += " | skipped: gradient norm spike";
  } else if (metrics.skipped) {
    std::snprintf(buffer, sizeof(buffer),
                  " | skipped: gradients overflowed at loss scale %g",
                  metrics.lossScale);
    line += buffer;
  }
  return line;
}

MetricsWriter::MetricsWriter(FILE *console, const std::string &jsonlPath,
                             bool append)
    : console(console), jsonlPath(jsonlPath) {
  if (jsonlPath.empty())
    return;
  jsonl = std::fopen(jsonlPath.c_str(), append ? "a" : "w");
  if (!jsonl)
    fail("--metrics: cannot open " + describeSystemError(jsonlPath));
}

MetricsWriter::~MetricsWriter() {
  if (jsonl)
    std::fclose(jsonl);
}

void MetricsWriter::record(const StepMetrics &metrics) {
  if (console) {
    std::fprintf(console, "%s\n", formatMetricsLine(metrics).c_str());
    std::fflush(console);
  }
  if (jsonl) {
    std::string line = formatMetricsJson(metrics) + "\n";
    if (std::fputs(line.c_str(), jsonl) < 0 || std::fflush(jsonl) != 0)
      fail("--metrics: cannot write " + describeSystemError(jsonlPath));
  }
}

} // namespace tessera::train
