//===- Random.h - Deterministic random numbers for the driver ---*- C++ -*-===//
//
// `--resume` must continue bit-for-bit, and a run must be reproducible from
// its seed on any machine, so the driver cannot use <random>'s distributions:
// std::uniform_int_distribution and std::normal_distribution are allowed to
// differ between standard libraries. Instead everything random here (the
// data order, `--init random`, the per-micro-batch dropout seeds) comes from
// SplitMix64, a tiny counter-friendly generator whose whole state is one
// 64-bit word, with the integer and normal draws written out below.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_RANDOM_H
#define TESSERA_RUNTIME_TRAIN_RANDOM_H

#include <cstdint>
#include <vector>

namespace tessera::train {

/// Mixes `value` into a well-spread 64-bit word (SplitMix64's finalizer);
/// used to derive independent seeds from (seed, purpose, counter) tuples.
uint64_t mixBits(uint64_t value);

/// Seed for stream `stream` of a run seeded with `seed` (e.g. epoch e of the
/// data order, or micro-batch k of step s).
uint64_t deriveSeed(uint64_t seed, uint64_t purpose, uint64_t stream);

class RandomGenerator {
public:
  explicit RandomGenerator(uint64_t seed) : state(seed) {}

  uint64_t nextBits();
  /// Uniform in [0, bound), without modulo bias (bound > 0).
  uint64_t nextBelow(uint64_t bound);
  /// Uniform in (0, 1): never 0, so log() is safe.
  double nextOpenUnit();
  /// Standard normal draw (Box-Muller; one value per call, for simplicity).
  double nextNormal();

private:
  uint64_t state;
};

/// A uniformly random permutation of 0..count-1 (Fisher-Yates).
std::vector<int64_t> randomPermutation(int64_t count, uint64_t seed);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_RANDOM_H
