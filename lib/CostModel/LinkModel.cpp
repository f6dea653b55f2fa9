//===- LinkModel.cpp - alpha-beta and measured collective times -----------===//

#include "tessera/CostModel/LinkModel.h"

#include <algorithm>
#include <cmath>

namespace tessera::cost {

double CollectiveModel::time(double bytes, int64_t groupSize) const {
  double factor = busFactor(collective, groupSize);
  if (factor == 0 || bytes <= 0)
    return 0;
  if (measured.empty())
    return latency + bytes * factor / bandwidth;

  auto measuredTime = [&](const MeasuredBandwidth &point) {
    return point.bytes * factor / point.busBandwidth;
  };
  const MeasuredBandwidth &first = measured.front();
  const MeasuredBandwidth &last = measured.back();
  if (bytes <= first.bytes) {
    // From (0, latency) to the first measurement; a latency above the first
    // measured time would make the curve fall, so it is capped there.
    double firstTime = measuredTime(first);
    double start = std::min(latency, firstTime);
    return start + (firstTime - start) * bytes / first.bytes;
  }
  if (bytes >= last.bytes)
    return measuredTime(last) + (bytes - last.bytes) * factor / last.busBandwidth;

  auto upper = std::upper_bound(
      measured.begin(), measured.end(), bytes,
      [](double size, const MeasuredBandwidth &point) {
        return size < point.bytes;
      });
  const MeasuredBandwidth &high = *upper;
  const MeasuredBandwidth &low = *(upper - 1);
  // Bandwidth curves are close to straight lines on log-log axes between
  // NCCL's protocol switch points.
  double weight = (std::log(bytes) - std::log(low.bytes)) /
                  (std::log(high.bytes) - std::log(low.bytes));
  double logBandwidth = std::log(low.busBandwidth) +
                        weight * (std::log(high.busBandwidth) -
                                  std::log(low.busBandwidth));
  return bytes * factor / std::exp(logBandwidth);
}

} // namespace tessera::cost
