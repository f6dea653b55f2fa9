//===- GatedActivation.cpp - SwiGLU: silu(gate) * up, and its gradients ---===//
//
// tess.swiglu and tess.swiglu_grad, and their packed forms (gate and up the
// two halves of each row of one tensor). The product is computed in f64 and
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

namespace {

/// Where the gate and up of result element i are: `gate` and `up` at
/// gateIndex(i) (unpacked: two tensors of the result's shape), or one tensor
/// of rows of `2 width` whose up half starts `width` after its gate half.
struct GatedLayout {
  int64_t width, stride;
  int64_t gateIndex(int64_t i) const { return i / width * stride + i % width; }
};

GatedLayout unpacked(int64_t count) {
  int64_t width = count > 0 ? count : 1;
  return {width, width};
}

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

/// y[i] = silu(gate) * up over `count` results.
void swigluForward(const void *gate, const void *up, int32_t dtype,
                   GatedLayout layout, int64_t upOffset, tessera_tensor &y) {
  int64_t count = elementCount(y);
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = layout.gateIndex(i);
    double g = loadNumber(gate, dtype, at);
    double u = loadNumber(up, dtype, at + upOffset);
    storeNumber(y.data, y.dtype, i, g * sigmoid(g) * u);
  }
}

/// dgate and dup of each result element from dy[i], written where gate and
/// up were read (each pair read before it is written, so in place works).
void swigluBackward(const void *gate, const void *up, int32_t dtype,
                    GatedLayout layout, int64_t upOffset,
                    const tessera_tensor &dy, void *dgate, void *dup) {
  int64_t count = elementCount(dy);
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = layout.gateIndex(i);
    double g = loadNumber(gate, dtype, at);
    double u = loadNumber(up, dtype, at + upOffset);
    double upstream = loadNumber(dy.data, dy.dtype, i);
    double s = sigmoid(g);
    storeNumber(dgate, dtype, at, upstream * u * s * (1.0 + g * (1.0 - s)));
    storeNumber(dup, dtype, at + upOffset, upstream * g * s);
  }
}

} // namespace

extern "C" int tessera_cpu_swiglu(const tessera_tensor *gate,
                                  const tessera_tensor *up, tessera_tensor *y) {
  return runKernel("tessera_cpu_swiglu", [&] {
    requireGatedOperands(gate, up, {{y, "y"}});
    swigluForward(gate->data, up->data, gate->dtype,
                  unpacked(elementCount(*gate)), 0, *y);
  });
}

extern "C" int tessera_cpu_swiglu_grad(const tessera_tensor *gate,
                                       const tessera_tensor *up,
                                       const tessera_tensor *dy,
                                       tessera_tensor *dgate,
                                       tessera_tensor *dup) {
  return runKernel("tessera_cpu_swiglu_grad", [&] {
    requireGatedOperands(gate, up,
                         {{dy, "dy"}, {dgate, "dgate"}, {dup, "dup"}});
    swigluBackward(gate->data, up->data, gate->dtype,
                   unpacked(elementCount(*gate)), 0, *dy, dgate->data,
                   dup->data);
  });
}

extern "C" int tessera_cpu_packed_swiglu(const tessera_tensor *input,
                                         tessera_tensor *y) {
  return runKernel("tessera_cpu_packed_swiglu", [&] {
    int64_t width = requirePackedGatedOperands(input, y, "y", {});
    if (width == 0)
      return;
    swigluForward(input->data, input->data, input->dtype, {width, 2 * width},
                  width, *y);
  });
}

extern "C" int tessera_cpu_packed_swiglu_grad(const tessera_tensor *input,
                                              const tessera_tensor *dy,
                                              tessera_tensor *dinput) {
  return runKernel("tessera_cpu_packed_swiglu_grad", [&] {
    int64_t width =
        requirePackedGatedOperands(input, dy, "dy", {{dinput, "dinput"}});
    if (width == 0)
      return;
    swigluBackward(input->data, input->data, input->dtype, {width, 2 * width},
                   width, *dy, dinput->data, dinput->data);
  });
}
