//===- RingPlacement.h - Places of transient tensors in one buffer -*- C++ -*-===//
//
// ZeRO-2's ring of whole gradients (gradient_ring.h) and ZeRO-3's ring of
// gathered weights (weight_ring.h) hold blocks each needed for part of a
// step. Two blocks that are never needed at once may share bytes. Both are
// placed as the arena planner places tensors: largest first, each at the
// lowest offset clear of the blocks already placed that are busy with it,
// so the ring comes close to the most memory busy at once.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_RINGPLACEMENT_H
#define TESSERA_RUNTIME_COMM_RINGPLACEMENT_H

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::comm {

struct RingPlacement {
  /// Per block, its first element in the ring.
  std::vector<int64_t> offsets;
  /// Elements of the ring.
  int64_t total = 0;
};

/// Places blocks of `sizes` elements; `busyTogether(a, b)` says whether
/// blocks a and b are needed at the same time.
RingPlacement
placeInRing(const std::vector<int64_t> &sizes,
            const std::function<bool(size_t, size_t)> &busyTogether);

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_RINGPLACEMENT_H
