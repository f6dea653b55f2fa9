//===- RingPlacement.cpp - Largest first, lowest free offset --------------===//

#include "RingPlacement.h"

#include <algorithm>
#include <numeric>

namespace tessera::comm {

RingPlacement
placeInRing(const std::vector<int64_t> &sizes,
            const std::function<bool(size_t, size_t)> &busyTogether) {
  const size_t count = sizes.size();
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  RingPlacement ring;
  ring.offsets.assign(count, -1);
  std::vector<size_t> placed;
  for (size_t block : order) {
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t other : placed)
      if (busyTogether(block, other))
        taken.emplace_back(ring.offsets[other],
                           ring.offsets[other] + sizes[other]);
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto &[begin, end] : taken) {
      if (offset + sizes[block] <= begin)
        break;
      offset = std::max(offset, end);
    }
    ring.offsets[block] = offset;
    ring.total = std::max(ring.total, offset + sizes[block]);
    placed.push_back(block);
  }
  return ring;
}

} // namespace tessera::comm
