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
// The file (--metrics) is appended to a line a step, so it cannot be written
// once and renamed as the dumps and the trace are; what a user of
// llm.c's logs or TensorBoard's events expects of it is still this:
// - It is checked at start (TrainMain: its directory takes new files, it is
//   not a directory), not after the first step.
// - An existing file is never left truncated or half replaced: the run
//   writes a temporary file beside it (FILE.tmp.XXXXXX) and renames it
//   over FILE when the first step is recorded. A run that fails before its
//   first step (bad data, weights, a divergence at step 1) leaves the
//   previous run's metrics as they were; from the first step on the file
//   is the new run's, each line flushed as it is written.
// - --resume continues the file as TensorBoard's purge_step does: of the
//   existing lines it keeps the whole ones of steps up to the checkpoint's
//   step, and drops those the killed run wrote after its last checkpoint
//   (the resumed run computes them again) and a last line cut by the kill.
//   So after any number of kills and resumes the file holds each step once,
//   in order, like an uninterrupted run's (llm.c, which only appends, would
//   hold some twice). The kept lines are copied into the temporary file,
//   which replaces FILE at the first step as above. A line that is not one
//   of ours (no leading "step") is kept.
//
//===----------------------------------------------------------------------===//

#include "Metrics.h"

#include "Json.h"
#include "OutputPaths.h"
#include "RegularFile.h"
#include "TrainError.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

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

namespace {

/// The step of a metrics line ({"step":N,...}), or nothing for a line
/// that does not start as ours do.
std::optional<int64_t> stepOfLine(const std::string &line) {
  static const std::string prefix = "{\"step\":";
  if (line.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  const char *start = line.c_str() + prefix.size();
  char *end = nullptr;
  errno = 0;
  long long step = std::strtoll(start, &end, 10);
  if (end == start || errno != 0 || (*end != ',' && *end != '}'))
    return std::nullopt;
  return step;
}

/// Copies the whole lines of `path` whose step is at most `resumedStep`
/// to `out`. A missing file holds none.
void copyLinesUpTo(const std::string &path, int64_t resumedStep, FILE *out,
                   const std::string &stagingPath) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 && errno == ENOENT)
    return;
  RegularFile existing(path);
  FILE *in = ::fdopen(::dup(existing.descriptor()), "r");
  if (!in)
    fail("--metrics: cannot read " + describeSystemError(path));
  char *buffer = nullptr;
  size_t capacity = 0;
  ssize_t length;
  bool written = true;
  while ((length = ::getline(&buffer, &capacity, in)) > 0) {
    std::string line(buffer, static_cast<size_t>(length));
    // A line without its newline is the one a kill cut short.
    if (line.back() != '\n')
      break;
    std::optional<int64_t> step = stepOfLine(line);
    if (step && *step > resumedStep)
      continue;
    written &= std::fputs(line.c_str(), out) >= 0;
  }
  bool readFailed = std::ferror(in) != 0;
  std::free(buffer);
  std::fclose(in);
  if (readFailed)
    fail("--metrics: cannot read " + describeSystemError(path));
  if (!written || std::fflush(out) != 0)
    fail("--metrics: cannot write " + describeSystemError(stagingPath));
}

} // namespace

MetricsWriter::MetricsWriter(FILE *console, const std::string &jsonlPath,
                             std::optional<int64_t> resumedStep)
    : console(console), jsonlPath(jsonlPath) {
  if (jsonlPath.empty())
    return;
  int descriptor = createUniqueFile(jsonlPath + ".tmp.", stagingPath);
  if (descriptor < 0)
    fail("--metrics: cannot write " + describeSystemError(jsonlPath));
  // mkstemp creates the file 0600; metrics are ordinary data.
  (void)::fchmod(descriptor, 0644);
  jsonl = ::fdopen(descriptor, "w");
  if (!jsonl) {
    int savedErrno = errno;
    ::close(descriptor);
    ::unlink(stagingPath.c_str());
    errno = savedErrno;
    fail("--metrics: cannot write " + describeSystemError(stagingPath));
  }
  if (!resumedStep)
    return;
  try {
    copyLinesUpTo(jsonlPath, *resumedStep, jsonl, stagingPath);
  } catch (...) {
    std::fclose(jsonl);
    jsonl = nullptr;
    ::unlink(stagingPath.c_str());
    throw;
  }
}

MetricsWriter::~MetricsWriter() {
  if (jsonl)
    std::fclose(jsonl);
  // No step was recorded: the previous file stays as it was.
  if (!stagingPath.empty())
    ::unlink(stagingPath.c_str());
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
    // The first step's line is in the temporary file: it now replaces the
    // previous file whole, and later lines are appended to it in place.
    if (!stagingPath.empty()) {
      if (std::rename(stagingPath.c_str(), jsonlPath.c_str()) != 0)
        fail("--metrics: cannot replace " + describeSystemError(jsonlPath));
      stagingPath.clear();
    }
  }
}

} // namespace tessera::train
