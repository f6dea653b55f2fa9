//===- AdamWFactors.h - AdamW's step factors, once a call -------*- C++ -*-===//
//
// Every AdamW of the runtime (tessera_cpu_adamw's reference, the host's
// chunked one an offloaded run uses, the GPU's) computes these the same
// way: in f64 from the caller's doubles, then cast to f32 once a call, so
// that the per-element f32 arithmetic starts from the same bits
// everywhere. Host code only (the CUDA kernels take the struct by value).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_ADAMWFACTORS_H
#define TESSERA_RUNTIME_CPU_ADAMWFACTORS_H

#include "Errors.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace tessera::cpu {

struct AdamWFactors {
  float decay, stepSize, sqrtCorrection2, beta1, beta2, oneMinusBeta1,
      oneMinusBeta2, epsilon, gradScale;
};

/// decay = 1 - lr * weight_decay, stepSize = lr / (1 - beta1^step),
/// sqrtCorrection2 = sqrt(1 - beta2^step), and the rest cast. Throws
/// KernelError for a step below 1.
inline AdamWFactors adamwFactors(int64_t step, double lr, double beta1,
                                 double beta2, double eps, double weightDecay,
                                 double gradScale) {
  if (step < 1)
    fail("step " + std::to_string(step) + " must be >= 1");
  const double stepD = static_cast<double>(step);
  return AdamWFactors{
      static_cast<float>(1.0 - lr * weightDecay),
      static_cast<float>(lr / (1.0 - std::pow(beta1, stepD))),
      static_cast<float>(std::sqrt(1.0 - std::pow(beta2, stepD))),
      static_cast<float>(beta1),
      static_cast<float>(beta2),
      static_cast<float>(1.0 - beta1),
      static_cast<float>(1.0 - beta2),
      static_cast<float>(eps),
      static_cast<float>(gradScale)};
}

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_ADAMWFACTORS_H
