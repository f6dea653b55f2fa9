//===- GradientNorms.cpp - Per-parameter and per-layer gradient norms -----===//
//
// See GradientNorms.h.
//
//===----------------------------------------------------------------------===//

#include "GradientNorms.h"

#include "TrainError.h"

#include <cmath>
#include <map>

namespace tessera::train {

std::string layerOfParameter(const std::string &parameter) {
  size_t start = 0;
  while (start < parameter.size()) {
    size_t dot = parameter.find('.', start);
    size_t end = dot == std::string::npos ? parameter.size() : dot;
    if (end > start && parameter.find_first_not_of("0123456789", start) >= end)
      return parameter.substr(0, end);
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  size_t last = parameter.rfind('.');
  return last == std::string::npos || last == 0 ? parameter
                                                : parameter.substr(0, last);
}

GradientNorms gradientNorms(const tessera_program &program,
                            const std::vector<double> &sums, double divisor) {
  if (sums.size() != static_cast<size_t>(program.parameter_count))
    fail("gradient norms: " + std::to_string(sums.size()) +
         " sums of squares for " + std::to_string(program.parameter_count) +
         " parameters (a driver bug)");
  GradientNorms norms;
  std::map<std::string, size_t> layerIndex;
  std::vector<double> layerSums;
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const std::string name = program.parameters[i].name;
    const double sum = sums[static_cast<size_t>(i)];
    norms.parameters.emplace_back(name, std::sqrt(sum) / divisor);
    const std::string layer = layerOfParameter(name);
    auto [found, added] = layerIndex.emplace(layer, layerSums.size());
    if (added) {
      norms.layers.emplace_back(layer, 0.0);
      layerSums.push_back(0.0);
    }
    layerSums[found->second] += sum;
  }
  for (size_t l = 0; l < layerSums.size(); ++l)
    norms.layers[l].second = std::sqrt(layerSums[l]) / divisor;
  return norms;
}

} // namespace tessera::train
