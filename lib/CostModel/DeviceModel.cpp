//===- DeviceModel.cpp - precision names and the roofline -----------------===//

#include "tessera/CostModel/DeviceModel.h"

#include <algorithm>
#include <cmath>

namespace tessera::cost {

llvm::StringRef precisionName(Precision precision) {
  switch (precision) {
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  case Precision::FP32:
    return "fp32";
  }
  return "unknown";
}

std::optional<Precision> parsePrecisionName(llvm::StringRef name) {
  for (Precision precision : {Precision::BF16, Precision::FP16, Precision::FP32})
    if (precisionName(precision) == name)
      return precision;
  return std::nullopt;
}

double DeviceModel::matrixRate(Precision precision, double m, double n,
                               double k) const {
  const std::vector<GemmRate> &table =
      gemmShapes[static_cast<size_t>(precision)];
  if (table.empty() || !(m > 0 && n > 0 && k > 0))
    return matrixRate(precision);
  // Rates vary smoothly with the logs of the dims (tiles, waves and the
  // reduction's length), so near shapes predict a shape best.
  std::vector<std::pair<double, double>> nearest; // (squared distance, rate)
  for (const GemmRate &measured : table) {
    double dm = std::log2(m / measured.m), dn = std::log2(n / measured.n),
           dk = std::log2(k / measured.k);
    nearest.push_back({dm * dm + dn * dn + dk * dk, measured.flops});
  }
  size_t count = std::min<size_t>(4, nearest.size());
  std::partial_sort(nearest.begin(), nearest.begin() + count, nearest.end());
  if (nearest.front().first < 1e-12)
    return nearest.front().second;
  double weights = 0, weighted = 0;
  for (size_t i = 0; i < count; ++i) {
    double weight = 1.0 / nearest[i].first;
    weights += weight;
    weighted += weight * nearest[i].second;
  }
  return weighted / weights;
}

double DeviceModel::roofline(double flops, double flopRate,
                             double bytes) const {
  double arithmetic = flops > 0 ? flops / flopRate : 0;
  double memory = bytes > 0 ? bytes / memoryBandwidth : 0;
  return std::max(arithmetic, memory);
}

} // namespace tessera::cost
