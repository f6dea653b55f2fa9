//===- Rotary.cpp - Rotary position embedding (rotate-half form) ----------===//
//
// tess.rotary: each pair (x[..., i], x[..., i + h]) of the last dim (h = D/2)
// turned by the angle behind cos and sin, which broadcast to x. The
// adjoint applies the transposed rotation: the gradient with respect to x.
// Each element is one product pair summed in f64 and rounded once into y's
// storage type (the decomposed chain rounded after each of its five ops).
// y may be x: each pair is read whole before it is written.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

using namespace tessera::cpu;

extern "C" int tessera_cpu_rotary(const tessera_tensor *x,
                                  const tessera_tensor *cos,
                                  const tessera_tensor *sin, tessera_tensor *y,
                                  int32_t adjoint, int64_t rotated_heads) {
  return runKernel("tessera_cpu_rotary", [&] {
    RotaryOperands operands =
        requireRotaryOperands(x, cos, sin, y, rotated_heads);
    const tessera_tensor &input = *x;
    Shape shape = shapeOf(input);
    int64_t width = shape.back(), half = width / 2;
    StridedWalker walker(shape, {operands.cosStrides, operands.sinStrides});
    int64_t lastCos = operands.cosStrides.back();
    int64_t lastSin = operands.sinStrides.back();
    int64_t count = elementCount(input);
    // One pair a visit, at its low element: both values are read before
    // either is written, so y may be x itself (the arena runs the rotation
    // in place, tess.rotary's x being dead after it).
    for (int64_t i = 0; i < count; ++i, walker.advance()) {
      if (walker.index().back() >= half)
        continue;
      double a = loadNumber(input.data, input.dtype, i);
      double b = loadNumber(input.data, input.dtype, i + half);
      // Heads at or past rotated_heads pass through (value heads).
      if (shape.size() >= 2 &&
          walker.index()[shape.size() - 2] >= operands.rotatedHeads) {
        if (y->data != input.data) {
          storeNumber(y->data, y->dtype, i, a);
          storeNumber(y->data, y->dtype, i + half, b);
        }
        continue;
      }
      double cosLow = loadNumber(cos->data, cos->dtype, walker.offset(0));
      double cosHigh =
          loadNumber(cos->data, cos->dtype, walker.offset(0) + half * lastCos);
      double sinLow = loadNumber(sin->data, sin->dtype, walker.offset(1));
      double sinHigh =
          loadNumber(sin->data, sin->dtype, walker.offset(1) + half * lastSin);
      // Forward: y[j] = x[j] c[j] - x[j+h] s[j], y[j+h] = x[j+h] c[j+h] +
      // x[j] s[j+h]; the adjoint (the gradient) the transposed rotation.
      double low = adjoint ? a * cosLow + b * sinHigh : a * cosLow - b * sinLow;
      double high =
          adjoint ? b * cosHigh - a * sinLow : b * cosHigh + a * sinHigh;
      storeNumber(y->data, y->dtype, i, low);
      storeNumber(y->data, y->dtype, i + half, high);
    }
  });
}
