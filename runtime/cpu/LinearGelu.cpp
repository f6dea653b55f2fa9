//===- LinearGelu.cpp - A linear layer fused with the tanh GELU -----------===//
//
// The lowering runs GPT-2's MLP input projection and its GELU as one call,
// and, in the backward, the output projection's input gradient and the
// GELU's gradient as one, so that the CUDA backend can make each a single
// GEMM with a cuBLASLt epilogue (GELU_AUX, DGELU). The CPU reference is the
// two kernels it replaces, in order, so fused and unfused programs agree
// bit for bit here; the dgelu's intermediate product lives in scratch of
// dx's type, rounded as the unfused program rounds it.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "TensorAccess.h"

#include <vector>

using namespace tessera::cpu;

extern "C" int tessera_cpu_linear_gelu(const tessera_tensor *x,
                                       const tessera_tensor *weight,
                                       const tessera_tensor *bias,
                                       tessera_tensor *pre, tessera_tensor *y,
                                       int32_t transpose_weight) {
  return runKernel("tessera_cpu_linear_gelu", [&] {
    tessera_tensor &activation = requireTensor(y, "y");
    requireTensor(pre, "pre");
    requireSuccess(tessera_cpu_linear(x, weight, bias, pre, transpose_weight),
                   tessera_cpu_last_error);
    requireShape(activation, shapeOf(*pre), "y");
    requireSuccess(tessera_cpu_unary(TESSERA_GELU_TANH, pre, &activation),
                   tessera_cpu_last_error);
  });
}

extern "C" int tessera_cpu_linear_dgelu(const tessera_tensor *dy,
                                        const tessera_tensor *weight,
                                        const tessera_tensor *pre,
                                        tessera_tensor *dx,
                                        int32_t transpose_weight) {
  return runKernel("tessera_cpu_linear_dgelu", [&] {
    const tessera_tensor &input = requireTensor(pre, "pre");
    tessera_tensor &gradient = requireTensor(dx, "dx");
    requireShape(gradient, shapeOf(input), "dx");
    requireSameDtype(gradient, "dx", input, "pre");
    // The product dy W^T, as the unfused linear would write it.
    std::vector<unsigned char> bytes(elementCount(gradient) *
                                     dtypeSize(gradient.dtype));
    tessera_tensor product = gradient;
    product.data = bytes.data();
    requireSuccess(
        tessera_cpu_linear(dy, weight, nullptr, &product, transpose_weight),
        tessera_cpu_last_error);
    requireSuccess(
        tessera_cpu_unary_grad(TESSERA_GELU_TANH, &input, &product, &gradient),
        tessera_cpu_last_error);
  });
}
