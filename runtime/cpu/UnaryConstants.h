//===- UnaryConstants.h - The constants of the unary ops' math --*- C++ -*-===//
//
// Shared by the CPU kernels (Unary.cpp) and the CUDA kernels (Elementwise.cu)
// so that both evaluate erf', the normal distribution and GELU with the same
// digits. They are doubles; each kernel converts them to its arithmetic type.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_UNARYCONSTANTS_H
#define TESSERA_RUNTIME_CPU_UNARYCONSTANTS_H

namespace tessera::cpu {

constexpr double kSqrtHalf = 0.70710678118654752440;      // 1 / sqrt(2)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390; // 2 / sqrt(pi)
constexpr double kSqrtTwoOverPi = 0.79788456080286535588; // sqrt(2 / pi)
/// The cubic coefficient of GELU's tanh approximation.
constexpr double kGeluTanhCubic = 0.044715;

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_UNARYCONSTANTS_H
