//===- DeviceModel.cpp - precision names and the roofline -----------------===//

#include "tessera/CostModel/DeviceModel.h"

#include <algorithm>

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

double DeviceModel::roofline(double flops, double flopRate,
                             double bytes) const {
  double arithmetic = flops > 0 ? flops / flopRate : 0;
  double memory = bytes > 0 ? bytes / memoryBandwidth : 0;
  return std::max(arithmetic, memory);
}

} // namespace tessera::cost
