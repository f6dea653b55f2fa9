//===- copy_ce_elementwise_bench.cu - Transposes, cross-entropy, pointwise -===//
//
// Times, at GPT-2 124M's training shapes (16 x 1024 tokens, d = 768, 12
// heads of 64, vocabulary 50257, bf16), the memory-bound kernels the step
// profile showed as slow: attention's head transposes, the cross-entropy
// forward and backward over the logits, and the elementwise families
// (binary with a bias row and same-shape, cast, GELU and its gradient),
// and LayerNorm's backward (with and without the fused residual add).
// Prints ms per call and the bytes moved per second. Run by hand on the GPU
// machine; not a test.
//
//===----------------------------------------------------------------------===//

#include "KernelBench.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

using namespace kernel_bench;

namespace {


/// Prints ms per call and GB/s for `bytes` moved per call.
void time(const char *name, double bytes, const std::function<void()> &call) {
  double ms = timeMs(call);
  std::printf("%-46s %9.3f ms  %7.0f GB/s\n", name, ms, bytes / ms / 1e6);
}

} // namespace

int main() {
  const int64_t batch = 16, tokens = 1024, heads = 12, headDim = 64,
                width = 768, hidden = 3072, vocabulary = 50257;
  const int64_t rows = batch * tokens;
  {
    DeviceBuffer bthd(TESSERA_BF16, {batch, tokens, heads, headDim});
    DeviceBuffer bhtd(TESSERA_BF16, {batch, heads, tokens, headDim});
    int64_t swap[] = {0, 2, 1, 3};
    double bytes = 2.0 * bthd.bytes;
    time("transpose bf16 [B,T,H,D] -> [B,H,T,D]", bytes, [&] {
      checkKernel(tessera_cuda_transpose(bthd.get(), bhtd.get(), swap, nullptr));
    });
    time("transpose bf16 [B,H,T,D] -> [B,T,H,D]", bytes, [&] {
      checkKernel(tessera_cuda_transpose(bhtd.get(), bthd.get(), swap, nullptr));
    });
    DeviceBuffer matrix(TESSERA_BF16, {rows, width});
    DeviceBuffer transposed(TESSERA_BF16, {width, rows});
    int64_t flip[] = {1, 0};
    time("transpose bf16 [16384,768] -> [768,16384]", 2.0 * matrix.bytes, [&] {
      checkKernel(
          tessera_cuda_transpose(matrix.get(), transposed.get(), flip, nullptr));
    });
  }
  {
    DeviceBuffer logits(TESSERA_BF16, {rows, vocabulary});
    DeviceBuffer targets(TESSERA_I64, {rows});
    DeviceBuffer loss(TESSERA_F32, {});
    DeviceBuffer dloss(TESSERA_F32, {});
    DeviceBuffer dlogits(TESSERA_BF16, {rows, vocabulary});
    time("cross_entropy bf16 [16384,50257]", logits.bytes, [&] {
      checkKernel(tessera_cuda_cross_entropy(logits.get(), targets.get(), nullptr,
                                             loss.get(), -100, nullptr));
    });
    time("cross_entropy_grad bf16 [16384,50257]", 2.0 * logits.bytes, [&] {
      checkKernel(tessera_cuda_cross_entropy_grad(
          logits.get(), targets.get(), nullptr, dloss.get(), dlogits.get(), -100,
          nullptr));
    });
  }
  for (int dtype : {TESSERA_BF16, TESSERA_F32}) {
    const char *type = dtype == TESSERA_BF16 ? "bf16" : "f32";
    char name[96];
    DeviceBuffer a(dtype, {rows, hidden}), b(dtype, {rows, hidden}),
        y(dtype, {rows, hidden}), bias(dtype, {hidden});
    std::snprintf(name, sizeof name, "binary add %s [16384,3072]", type);
    time(name, 3.0 * a.bytes, [&] {
      checkKernel(
          tessera_cuda_binary(TESSERA_ADD, a.get(), b.get(), y.get(), nullptr));
    });
    std::snprintf(name, sizeof name, "binary add %s [16384,3072] + [3072]",
                  type);
    time(name, 2.0 * a.bytes, [&] {
      checkKernel(tessera_cuda_binary(TESSERA_ADD, a.get(), bias.get(), y.get(),
                                      nullptr));
    });
    std::snprintf(name, sizeof name, "unary gelu_tanh %s [16384,3072]", type);
    time(name, 2.0 * a.bytes, [&] {
      checkKernel(
          tessera_cuda_unary(TESSERA_GELU_TANH, a.get(), y.get(), nullptr));
    });
    std::snprintf(name, sizeof name, "unary_grad gelu_tanh %s [16384,3072]",
                  type);
    time(name, 3.0 * a.bytes, [&] {
      checkKernel(tessera_cuda_unary_grad(TESSERA_GELU_TANH, a.get(), b.get(),
                                          y.get(), nullptr));
    });
  }
  {
    DeviceBuffer wide(TESSERA_F32, {rows, width}), narrow(TESSERA_BF16,
                                                          {rows, width});
    double bytes = static_cast<double>(wide.bytes + narrow.bytes);
    time("cast f32 -> bf16 [16384,768]", bytes, [&] {
      checkKernel(tessera_cuda_cast(wide.get(), narrow.get(), nullptr));
    });
    time("cast bf16 -> f32 [16384,768]", bytes, [&] {
      checkKernel(tessera_cuda_cast(narrow.get(), wide.get(), nullptr));
    });
  }
  {
    // LayerNorm's backward with dscale and dbias, alone and with the
    // residual add of the backward's residual stream (x, dy, residual read
    // once, dx written once: 3 or 4 times [16384,768] bf16).
    DeviceBuffer x(TESSERA_BF16, {rows, width}), dy(TESSERA_BF16, {rows, width}),
        residual(TESSERA_BF16, {rows, width}), dx(TESSERA_BF16, {rows, width});
    DeviceBuffer scale(TESSERA_BF16, {width}), dscale(TESSERA_BF16, {width}),
        dbias(TESSERA_BF16, {width});
    time("layer_norm_grad bf16 [16384,768] + dscale, dbias", 3.0 * x.bytes,
         [&] {
           checkKernel(tessera_cuda_layer_norm_grad(
               x.get(), scale.get(), dy.get(), dx.get(), dscale.get(),
               dbias.get(), 1, 1e-5, nullptr));
         });
    time("layer_norm_grad_add bf16 [16384,768] + dscale, dbias",
         4.0 * x.bytes, [&] {
           checkKernel(tessera_cuda_layer_norm_grad_add(
               x.get(), scale.get(), dy.get(), residual.get(), dx.get(),
               dscale.get(), dbias.get(), 1, 1e-5, nullptr));
         });
    time("layer_norm_grad bf16 [16384,768], dx only", 3.0 * x.bytes, [&] {
      checkKernel(tessera_cuda_layer_norm_grad(x.get(), scale.get(), dy.get(),
                                               dx.get(), nullptr, nullptr, 1,
                                               1e-5, nullptr));
    });
  }
  check(cudaDeviceSynchronize(), "sync");
  std::printf("ok\n");
  return 0;
}
