//===- Cast.cpp - Any dtype to any dtype ----------------------------------===//
//
// Two paths, so that no value passes through a type that cannot hold it:
// integer (and bool) sources go through int64, which keeps every integer
// exact when the target is an integer too (sign-extension, then truncation
// to the target's low bits); everything else goes through double, which
// holds every f32/bf16/f16 exactly and rounds once into the target (to nearest
// even for floats, toward zero for integers, "not zero" for bool).
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "TensorAccess.h"

using namespace tessera::cpu;

extern "C" int tessera_cpu_cast(const tessera_tensor *x, tessera_tensor *y) {
  return runKernel("tessera_cpu_cast", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    int64_t count = elementCount(input);
    bool integerToInteger =
        isIntegerType(input.dtype) && isIntegerType(output.dtype);
    for (int64_t i = 0; i < count; ++i) {
      if (integerToInteger)
        storeInteger(output.data, output.dtype, i,
                     loadInteger(input.data, input.dtype, i));
      else
        storeNumber(output.data, output.dtype, i,
                    loadNumber(input.data, input.dtype, i));
    }
  });
}
