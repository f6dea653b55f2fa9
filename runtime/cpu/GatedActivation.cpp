//===- GatedActivation.cpp - SwiGLU: silu(gate) * up, and its gradients ---===//
//
// tess.swiglu and tess.swiglu_grad. The product is computed in f64 and
// rounded once into the result's storage (the unfused silu and mul rounded
// twice); the backward recomputes s = sigmoid(gate) instead of reading a
// saved silu(gate), so the forward keeps nothing but gate and up.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <cmath>

using namespace tessera::cpu;

extern "C" int tessera_cpu_swiglu(const tessera_tensor *gate,
                                  const tessera_tensor *up, tessera_tensor *y) {
  return runKernel("tessera_cpu_swiglu", [&] {
    requireGatedOperands(gate, up, {{y, "y"}});
    int64_t count = elementCount(*gate);
    for (int64_t i = 0; i < count; ++i) {
      double g = loadNumber(gate->data, gate->dtype, i);
      double u = loadNumber(up->data, up->dtype, i);
      double s = 1.0 / (1.0 + std::exp(-g));
      storeNumber(y->data, y->dtype, i, g * s * u);
    }
  });
}

extern "C" int tessera_cpu_swiglu_grad(const tessera_tensor *gate,
                                       const tessera_tensor *up,
                                       const tessera_tensor *dy,
                                       tessera_tensor *dgate,
                                       tessera_tensor *dup) {
  return runKernel("tessera_cpu_swiglu_grad", [&] {
    requireGatedOperands(gate, up, {{dy, "dy"}, {dgate, "dgate"}, {dup, "dup"}});
    int64_t count = elementCount(*gate);
    for (int64_t i = 0; i < count; ++i) {
      double g = loadNumber(gate->data, gate->dtype, i);
      double u = loadNumber(up->data, up->dtype, i);
      double upstream = loadNumber(dy->data, dy->dtype, i);
      double s = 1.0 / (1.0 + std::exp(-g));
      storeNumber(dgate->data, dgate->dtype, i,
                  upstream * u * s * (1.0 + g * (1.0 - s)));
      storeNumber(dup->data, dup->dtype, i, upstream * g * s);
    }
  });
}
