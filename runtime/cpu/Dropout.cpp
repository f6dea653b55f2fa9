//===- Dropout.cpp - Inverted dropout with a counter-based mask -----------===//
//
// y = keep(i) ? x / (1 - rate) : 0, as torch.nn.functional.dropout does in
// training. The mask comes from Random.h, so the gradient is this same
// kernel applied to dy with the same seed: no mask is ever stored.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "Random.h"
#include "TensorAccess.h"

using namespace tessera::cpu;

extern "C" int tessera_cpu_dropout(const tessera_tensor *x, tessera_tensor *y,
                                   double rate, uint64_t seed) {
  return runKernel("tessera_cpu_dropout", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    if (!(rate >= 0.0 && rate < 1.0))
      fail("rate " + std::to_string(rate) + " is outside [0, 1)");
    FloatInput values(input, "x");
    FloatOutput result(output, "y");
    DropoutMask mask(seed, rate);
    float keptScale = static_cast<float>(1.0 / (1.0 - rate));
    int64_t count = elementCount(input);
    for (int64_t i = 0; i < count; ++i)
      result[i] =
          mask.keeps(static_cast<uint64_t>(i)) ? values[i] * keptScale : 0.0f;
    result.commit();
  });
}
