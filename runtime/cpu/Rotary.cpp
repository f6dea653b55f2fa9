//===- Rotary.cpp - Rotary position embedding (rotate-half form) ----------===//
//
// tess.rotary: each pair (x[..., i], x[..., i + h]) of the last dim (h = D/2)
// turned by the angle behind cos and sin, which broadcast to x. The
// adjoint applies the transposed rotation: the gradient with respect to x.
// Each element is one product pair summed in f64 and rounded once into y's
// storage type (the decomposed chain rounded after each of its five ops).
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
    int64_t lastSin = operands.sinStrides.back();
    int64_t count = elementCount(input);
    for (int64_t i = 0; i < count; ++i, walker.advance()) {
      int64_t j = walker.index().back();
      bool low = j < half;
      int64_t step = low ? half : -half; // partner - j
      double value = loadNumber(input.data, input.dtype, i);
      // Heads at or past rotated_heads pass through (value heads).
      if (shape.size() >= 2 &&
          walker.index()[shape.size() - 2] >= operands.rotatedHeads) {
        storeNumber(y->data, y->dtype, i, value);
        continue;
      }
      double partner = loadNumber(input.data, input.dtype, i + step);
      double c = loadNumber(cos->data, cos->dtype, walker.offset(0));
      double s, sign;
      if (!adjoint) {
        // y[j] = x[j] c[j] -+ x[partner] s[j].
        s = loadNumber(sin->data, sin->dtype, walker.offset(1));
        sign = low ? -1.0 : 1.0;
      } else {
        // dx[j] = dy[j] c[j] +- dy[partner] s[partner].
        s = loadNumber(sin->data, sin->dtype, walker.offset(1) + step * lastSin);
        sign = low ? 1.0 : -1.0;
      }
      storeNumber(y->data, y->dtype, i, value * c + sign * partner * s);
    }
  });
}
