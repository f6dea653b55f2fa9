//===- Random.h - Counter-based random numbers for dropout ------*- C++ -*-===//
//
// Dropout must draw the same mask in the forward kernel and in the backward
// kernel (and on the CUDA backend) without storing it, and must not depend on
// the order in which elements are visited or split across threads. So the
// random number of element i is a pure function of (seed, i): SplitMix64
// (Steele, Lea and Flood, 2014), a Weyl sequence passed through a 64-bit
// mixer, is already counter-based -- its i-th output needs no earlier one.
//
//   start   = mix(seed)                       (decorrelates nearby seeds)
//   bits(i) = mix(start + (i + 1) * 0x9E3779B97F4A7C15)
//   u(i)    = (bits(i) >> 40) * 2^-24         (uniform in [0, 1), 24 bits)
//   keep(i) = u(i) >= rate
//
// where mix(z) is SplitMix64's finalizer (below). Elements are indexed in
// row-major order of the dropped tensor; for attention that tensor is the
// weights [B, Hq, Sq, Skv]. Using `seed ^ i` instead would make seed s at
// element i collide with seed s^1 at element i^1, hence the Weyl sequence.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_RANDOM_H
#define TESSERA_RUNTIME_CPU_RANDOM_H

#include <cstdint>

namespace tessera::cpu {

/// SplitMix64's output function (a bijection on 64-bit values).
inline uint64_t mixBits(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// mixBits's inverse: each step of the mixer undone in reverse order (an
/// odd multiplier's inverse modulo 2^64, a right xorshift's by repeating it).
inline uint64_t unmixBits(uint64_t z) {
  auto unshift = [](uint64_t y, unsigned shift) {
    uint64_t x = y;
    for (unsigned done = shift; done < 64; done += shift)
      x = y ^ (x >> shift);
    return x;
  };
  // Newton's iteration doubles the correct low bits of an odd number's
  // inverse each time: 5 steps from 3 bits reach 64.
  auto inverse = [](uint64_t odd) {
    uint64_t x = odd;
    for (int i = 0; i < 5; ++i)
      x *= 2 - odd * x;
    return x;
  };
  z = unshift(z, 31) * inverse(0x94D049BB133111EBull);
  z = unshift(z, 27) * inverse(0xBF58476D1CE4E5B9ull);
  return unshift(z, 30);
}

/// The seed whose stream is `seed`'s advanced by `count` elements: its
/// start is start(seed) + count * 0x9E3779B97F4A7C15, so element i of the
/// one is element count + i of the other (a rank's block of a split random
/// op, from the block's first element on).
inline uint64_t advancedSeed(uint64_t seed, uint64_t count) {
  return unmixBits(mixBits(seed) + count * 0x9E3779B97F4A7C15ull);
}

/// Dropout's keep/drop decisions for one (seed, rate): keeps(i) is true when
/// element i survives.
class DropoutMask {
public:
  DropoutMask(uint64_t seed, double rate)
      : start(mixBits(seed)),
        // u < rate  <=>  (bits >> 40) < rate * 2^24, compared as integers.
        dropBelow(static_cast<uint64_t>(rate * 16777216.0)) {}

  bool keeps(uint64_t index) const {
    uint64_t bits = mixBits(start + (index + 1) * 0x9E3779B97F4A7C15ull);
    return (bits >> 40) >= dropBelow;
  }

private:
  uint64_t start;
  uint64_t dropBelow;
};

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_RANDOM_H
