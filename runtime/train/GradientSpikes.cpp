//===- GradientSpikes.cpp - Gradient-norm spike detection -----------------===//
//
// See GradientSpikes.h for the rules.
//
//===----------------------------------------------------------------------===//

#include "GradientSpikes.h"

#include <cmath>
#include <cstddef>
#include <cstdio>

namespace tessera::train {
namespace {

/// Drops the oldest norms beyond `window`.
void keepNewest(std::vector<double> &recent, int64_t window) {
  const auto keep = static_cast<size_t>(window);
  if (recent.size() > keep)
    recent.erase(recent.begin(),
                 recent.end() - static_cast<std::ptrdiff_t>(keep));
}

std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

} // namespace

SpikeResponse respondToGradientNorm(const TrainOptions &options, int64_t step,
                                    double norm, TrainingState &state) {
  SpikeResponse response;
  const SpikeActions &actions = options.onSpike;
  if (!actions.enabled() || !std::isfinite(norm) || step <= options.warmupSteps)
    return response;
  std::vector<double> &recent = state.recentGradientNorms;
  // A resumed run with a smaller --spike-window keeps the newest norms.
  keepNewest(recent, options.spikeWindow);
  if (recent.size() < static_cast<size_t>(options.spikeWindow)) {
    recent.push_back(norm);
    return response;
  }
  double sum = 0;
  for (double value : recent)
    sum += value;
  const double count = static_cast<double>(recent.size());
  const double mean = sum / count;
  double squares = 0;
  for (double value : recent)
    squares += (value - mean) * (value - mean);
  const double deviation =
      recent.size() > 1 ? std::sqrt(squares / (count - 1)) : 0.0;
  response.judged = true;
  response.mean = mean;
  response.deviation = deviation;
  response.lower = mean - options.spikeSigma * deviation;
  response.upper = mean + options.spikeSigma * deviation;
  response.spike = norm < response.lower || norm > response.upper;
  recent.push_back(std::fmin(std::fmax(norm, response.lower), response.upper));
  keepNewest(recent, options.spikeWindow);
  if (!response.spike)
    return response;

  ++state.gradientSpikes;
  if (actions.has(SpikeActions::LowerLearningRate))
    state.learningRateFactor *= actions.learningRateFactor;
  if (actions.has(SpikeActions::Clip) && norm > response.upper)
    response.clip = response.upper / norm;
  response.skip =
      actions.has(SpikeActions::Skip) || actions.has(SpikeActions::Stop);
  response.checkpoint = actions.has(SpikeActions::Checkpoint);
  response.stop = actions.has(SpikeActions::Stop);
  return response;
}

std::string spikeActionsText(const SpikeActions &actions) {
  std::string text;
  auto add = [&](const std::string &name) {
    text += (text.empty() ? "" : ",") + name;
  };
  if (actions.has(SpikeActions::Report))
    add("report");
  if (actions.has(SpikeActions::Skip))
    add("skip");
  if (actions.has(SpikeActions::Clip))
    add("clip");
  if (actions.has(SpikeActions::LowerLearningRate))
    add("lower-lr=" + formatNumber(actions.learningRateFactor));
  if (actions.has(SpikeActions::Checkpoint))
    add("checkpoint");
  if (actions.has(SpikeActions::Stop))
    add("stop");
  return text;
}

std::string describeSpike(const TrainOptions &options, int64_t step,
                          double norm, const SpikeResponse &response) {
  return "step " + std::to_string(step) +
         ": gradient norm spike: " + formatNumber(norm) + " outside [" +
         formatNumber(response.lower) + ", " + formatNumber(response.upper) +
         "] (mean " + formatNumber(response.mean) + " +- " +
         formatNumber(options.spikeSigma) + " x " +
         formatNumber(response.deviation) + " over the last " +
         std::to_string(options.spikeWindow) + " steps); " +
         spikeActionsText(options.onSpike);
}

} // namespace tessera::train
