//===- LinearEpilogues.cpp - A linear layer fused with the op after it ----===//
//
// A linear layer and the op right after it as one call (the fused ops of
// TessFusedOps.td, made by tess-fuse-epilogues): GPT-2's MLP input
// projection and its GELU, the output projection's input gradient and the
// GELU's gradient, and each projection and the residual add after it; and
// a matmul and the add of a partial sum after it (a weight gradient summed
// over blocks of rows). The CUDA backend makes each a single GEMM with a
// cuBLASLt epilogue (GELU_AUX, DGELU) or the residual as
// the GEMM's C. The CPU reference is the two kernels a call replaces, in
// order, so fused and unfused programs agree bit for bit here; an
// intermediate product lives in scratch of the result's type, rounded as
// the unfused program rounds it.
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

namespace {

/// Scratch of `like`'s type and shape, for an intermediate product.
struct ProductScratch {
  explicit ProductScratch(const tessera_tensor &like)
      : bytes(elementCount(like) * dtypeSize(like.dtype)), tensor(like) {
    tensor.data = bytes.data();
  }
  std::vector<unsigned char> bytes;
  tessera_tensor tensor;
};

/// y = product + addend, the product written by `multiply` into scratch of
/// y's type first (rounded as the unfused program rounds it), so that y may
/// be the addend's storage.
template <typename Multiply>
void addToProduct(const tessera_tensor *addend, const char *addendName,
                  tessera_tensor *y, Multiply multiply) {
  tessera_tensor &output = requireTensor(y, "y");
  const tessera_tensor &summand = requireTensor(addend, addendName);
  requireLike(summand, addendName, output, "y");
  ProductScratch product(output);
  requireSuccess(multiply(&product.tensor), tessera_cpu_last_error);
  requireSuccess(
      tessera_cpu_binary(TESSERA_ADD, &product.tensor, &summand, &output),
      tessera_cpu_last_error);
}

} // namespace

extern "C" int tessera_cpu_linear_add(const tessera_tensor *x,
                                      const tessera_tensor *weight,
                                      const tessera_tensor *bias,
                                      const tessera_tensor *residual,
                                      tessera_tensor *y,
                                      int32_t transpose_weight) {
  return runKernel("tessera_cpu_linear_add", [&] {
    addToProduct(residual, "residual", y, [&](tessera_tensor *product) {
      return tessera_cpu_linear(x, weight, bias, product, transpose_weight);
    });
  });
}

extern "C" int tessera_cpu_matmul_add(const tessera_tensor *a,
                                      const tessera_tensor *b,
                                      const tessera_tensor *addend,
                                      tessera_tensor *y, int32_t transpose_a,
                                      int32_t transpose_b) {
  return runKernel("tessera_cpu_matmul_add", [&] {
    addToProduct(addend, "addend", y, [&](tessera_tensor *product) {
      return tessera_cpu_matmul(a, b, product, transpose_a, transpose_b);
    });
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
    requireLike(gradient, "dx", input, "pre");
    // The product dy W^T, as the unfused linear would write it.
    ProductScratch product(gradient);
    requireSuccess(tessera_cpu_linear(dy, weight, nullptr, &product.tensor,
                                      transpose_weight),
                   tessera_cpu_last_error);
    requireSuccess(tessera_cpu_unary_grad(TESSERA_GELU_TANH, &input,
                                          &product.tensor, &gradient),
                   tessera_cpu_last_error);
  });
}
