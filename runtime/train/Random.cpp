//===- Random.cpp - SplitMix64 and the draws built on it ------------------===//
//
// See Random.h for why the driver carries its own generator. SplitMix64
// (Steele, Lea, Flood 2014) passes BigCrush, which is far more than data
// shuffling and weight initialization need.
//
//===----------------------------------------------------------------------===//

#include "Random.h"

#include <cmath>

namespace tessera::train {

uint64_t mixBits(uint64_t value) {
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

uint64_t deriveSeed(uint64_t seed, uint64_t purpose, uint64_t stream) {
  return mixBits(mixBits(mixBits(seed) ^ purpose) ^ stream);
}

uint64_t RandomGenerator::nextBits() {
  state += 0x9e3779b97f4a7c15ULL;
  return mixBits(state);
}

uint64_t RandomGenerator::nextBelow(uint64_t bound) {
  // Rejection keeps every value equally likely: draws at or above the largest
  // multiple of `bound` that fits in 64 bits are thrown away.
  uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t bits;
  do {
    bits = nextBits();
  } while (bits >= limit);
  return bits % bound;
}

double RandomGenerator::nextOpenUnit() {
  // 53 random bits centred in their interval: (k + 0.5) / 2^53 is in (0, 1).
  return (static_cast<double>(nextBits() >> 11) + 0.5) * 0x1.0p-53;
}

double RandomGenerator::nextNormal() {
  double radius = std::sqrt(-2.0 * std::log(nextOpenUnit()));
  double angle = 2.0 * M_PI * nextOpenUnit();
  return radius * std::cos(angle);
}

std::vector<int64_t> randomPermutation(int64_t count, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    order[static_cast<size_t>(i)] = i;
  RandomGenerator generator(seed);
  for (int64_t i = count - 1; i > 0; --i) {
    auto j =
        static_cast<int64_t>(generator.nextBelow(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

} // namespace tessera::train
