//===- llama_kernels_bench.cu - Every op kind of Llama 3.2 1B vs roofline -===//
//
// Times, at Llama 3.2 1B's training shapes (8 x 2048 tokens = 16384 rows,
// d = 2048, 32 query heads and 8 key/value heads of 64, MLP width 8192,
// vocabulary 128256, bf16), one call of every kernel kind the training step
// launches: RMSNorm and its fused backward (also at Llama 3 8B's width
// 4096), rotary over the packed q/k/v and its adjoint, SwiGLU and its
// gradient, causal GQA attention on the packed q/k/v and its gradient, the
// projection GEMMs and the LM head, the fused cross-entropy, the embedding
// gradient, and the optimizer (gradient sum of squares, multi-tensor
// AdamW). Each line gives ms per call,
// the achieved rate, and the fraction of that kernel's roofline:
// memory-bound kernels against the bandwidth a plain device-to-device copy
// of 1 GiB reaches on this GPU (bytes they must move, counted as each
// operand read once and each output written once), GEMMs and attention
// against the rate of an 8192^3 bf16 GEMM on it: the rooflines are this
// device's own (an H100 80GB's copy runs near 3 TB/s, an H200's near 4), not
// one card's numbers applied to another. The point is a guard, not a profile: every op
// kind should be within 2x of its roofline, so the program exits non-zero
// if any kernel is below 50% of it. TESSERA_BENCH_NORM_PARTS=1 adds the
// norm backwards without the parameter gradient (and without the residual
// add), to split their time. TESSERA_BENCH_COLD_L2=1 flushes the L2 before
// each timed call (timeMsColdL2): repeated on the same operands, a layer's
// GEMM finds its weight in the L2, which in the step it does not (the 1B
// step's layer GEMMs ran 7-18 % slower than this bench times them, its head
// GEMMs, whose weight never fits, at the same rate). TESSERA_BENCH_FILL=normal
// fills the operands with standard normal values instead of a short pattern
// (KernelBench.cuh's fillNormal: a GEMM's clock depends on its data). Run by
// hand on the GPU machine; not a test.
//
//===----------------------------------------------------------------------===//

#include "KernelBench.cuh"

#include "tessera/runtime/cuda_optimizer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace kernel_bench;

namespace {

/// This device's rooflines (measureRooflines): a copy's bytes per second
/// (read and write counted) and a large bf16 GEMM's FLOP per second.
double kBandwidth = 0;
double kFlops = 0;
/// A kernel below this fraction of its roofline fails the guard.
constexpr double kGuard = 0.5;

constexpr long long kVocabulary = 128256;

enum class Bound { Memory, Compute };

std::string worstName;
double worstFraction = 1e30;

/// Prints ms per call, the achieved rate for `amount` (bytes or FLOPs per
/// call) and its fraction of the roofline; keeps the worst.
void time(const char *name, Bound bound, double amount,
          const std::function<void()> &call) {
  static const bool coldL2 = [] {
    const char *value = std::getenv("TESSERA_BENCH_COLD_L2");
    return value && std::string(value) == "1";
  }();
  double ms = coldL2 ? timeMsColdL2(call) : timeMs(call);
  checkKernel(tessera_cuda_check_device_errors(nullptr));
  double rate = amount / (ms * 1e-3);
  bool memory = bound == Bound::Memory;
  double roof = memory ? kBandwidth : kFlops;
  double fraction = rate / roof;
  std::printf("%-44s %8.3f ms  %8.1f %-7s %6.0f %-7s %5.1f%%\n", name, ms,
              rate / (memory ? 1e9 : 1e12), memory ? "GB/s" : "TFLOP/s",
              roof / (memory ? 1e9 : 1e12), memory ? "GB/s" : "TFLOP/s",
              100.0 * fraction);
  if (fraction < worstFraction) {
    worstFraction = fraction;
    worstName = name;
  }
}

/// Measures kBandwidth (cudaMemcpyAsync of 1 GiB, device to device) and
/// kFlops (one 8192 x 8192 x 8192 bf16 product through cuBLASLt).
void measureRooflines() {
  {
    DeviceBuffer from(TESSERA_BF16, {int64_t{1} << 29}),
        to(TESSERA_BF16, {int64_t{1} << 29});
    double ms = timeMs([&] {
      check(cudaMemcpyAsync(to.get()->data, from.get()->data,
                            static_cast<size_t>(from.bytes),
                            cudaMemcpyDeviceToDevice),
            "copy");
    });
    kBandwidth = 2.0 * static_cast<double>(from.bytes) / (ms * 1e-3);
  }
  const int64_t n = 8192;
  DeviceBuffer a(TESSERA_BF16, {n, n}), b(TESSERA_BF16, {n, n}),
      y(TESSERA_BF16, {n, n});
  double ms = timeMs([&] {
    checkKernel(tessera_cuda_matmul(a.get(), b.get(), y.get(), 0, 0, nullptr));
  });
  kFlops = 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3);
}

} // namespace

int main() {
  const int64_t batch = 8, tokens = 2048, width = 2048, queryHeads = 32,
                keyHeads = 8, headDim = 64, hidden = 8192;
  const int64_t rows = batch * tokens, vocabulary = kVocabulary;
  const int bf16 = TESSERA_BF16;
  std::printf("cost model: every kernel costs at least kernel_seconds "
              "(bench/measure_kernels.py); memory-bound ops priced at device "
              "bandwidth\n");
  measureRooflines();
  cudaDeviceProp device{};
  check(cudaGetDeviceProperties(&device, 0), "device properties");
  std::printf("rooflines on %s, measured: %.2e B/s (a 1 GiB device-to-device "
              "copy; memory-bound), %.2e FLOP/s (an 8192^3 bf16 GEMM; GEMM, "
              "attention)\n",
              device.name, kBandwidth, kFlops);
  std::printf("%-44s %11s  %16s %14s %6s\n", "kernel", "ms", "achieved",
              "roofline", "%");
  for (int64_t normWidth : {width, int64_t(4096)}) {
    // RMSNorm: x read, y written; the fused backward reads x, dy, residual
    // and writes dx (scale and dscale are one row, not counted). Width 2048
    // is the 1B model's, 4096 Llama 3 8B's (at its 2 x 4096 tokens).
    const int64_t normRows = normWidth == width ? rows : 2 * 4096;
    DeviceBuffer x(bf16, {normRows, normWidth}), y(bf16, {normRows, normWidth}),
        dy(bf16, {normRows, normWidth}), residual(bf16, {normRows, normWidth}),
        dx(bf16, {normRows, normWidth}), scale(bf16, {normWidth}),
        dscale(bf16, {normWidth});
    std::string shape =
        "[" + std::to_string(normRows) + "," + std::to_string(normWidth) + "]";
    time(("rms_norm " + shape).c_str(), Bound::Memory, 2.0 * x.bytes, [&] {
      checkKernel(tessera_cuda_rms_norm(x.get(), scale.get(), y.get(), 1, 1e-5,
                                        nullptr));
    });
    time(("rms_norm_grad_add " + shape + " + dscale").c_str(), Bound::Memory,
         4.0 * x.bytes, [&] {
           checkKernel(tessera_cuda_rms_norm_grad_add(
               x.get(), scale.get(), dy.get(), residual.get(), dx.get(),
               dscale.get(), 1, 1e-5, nullptr));
         });
    if (std::getenv("TESSERA_BENCH_NORM_PARTS")) {
      time(("rms_norm_grad_add " + shape + " no dscale").c_str(),
           Bound::Memory, 4.0 * x.bytes, [&] {
             checkKernel(tessera_cuda_rms_norm_grad_add(
                 x.get(), scale.get(), dy.get(), residual.get(), dx.get(),
                 nullptr, 1, 1e-5, nullptr));
           });
      time(("rms_norm_grad " + shape + " no dscale").c_str(), Bound::Memory,
           3.0 * x.bytes, [&] {
             checkKernel(tessera_cuda_rms_norm_grad(x.get(), scale.get(),
                                                    dy.get(), dx.get(), nullptr,
                                                    1, 1e-5, nullptr));
           });
    }
  }
  {
    // Rotary over the packed q/k/v projection [B, T, Hq + 2 Hkv, D]: the
    // query and key heads rotated, the value heads copied, as the step runs
    // it (forward, and the adjoint in the backward); x read, y written
    // (the [1, T, 1, D] cos/sin table not counted).
    const int64_t packedHeads = queryHeads + 2 * keyHeads;
    DeviceBuffer qkv(bf16, {batch, tokens, packedHeads, headDim}),
        rotated(bf16, {batch, tokens, packedHeads, headDim}),
        cos(bf16, {1, tokens, 1, headDim}), sin(bf16, {1, tokens, 1, headDim});
    time("rotary packed qkv [8,2048,48,64]", Bound::Memory, 2.0 * qkv.bytes,
         [&] {
           checkKernel(tessera_cuda_rotary(qkv.get(), cos.get(), sin.get(),
                                           rotated.get(), 0,
                                           queryHeads + keyHeads, nullptr));
         });
    time("rotary packed qkv [8,2048,48,64] adjoint", Bound::Memory,
         2.0 * qkv.bytes, [&] {
           checkKernel(tessera_cuda_rotary(qkv.get(), cos.get(), sin.get(),
                                           rotated.get(), 1,
                                           queryHeads + keyHeads, nullptr));
         });
    // In place, as the arena runs it when the projection is dead after the
    // rotation: the value heads are not moved, so only the q and k heads'
    // bytes count (read and written).
    const double rotatedBytes = 2.0 * static_cast<double>(qkv.bytes) *
                                static_cast<double>(queryHeads + keyHeads) /
                                static_cast<double>(packedHeads);
    time("rotary packed qkv [8,2048,48,64] in place", Bound::Memory,
         rotatedBytes, [&] {
           checkKernel(tessera_cuda_rotary(qkv.get(), cos.get(), sin.get(),
                                           qkv.get(), 0,
                                           queryHeads + keyHeads, nullptr));
         });
  }
  {
    // SwiGLU: gate, up read, y written; the gradient reads gate, up, dy and
    // writes dgate, dup.
    DeviceBuffer gate(bf16, {rows, hidden}), up(bf16, {rows, hidden}),
        y(bf16, {rows, hidden}), dy(bf16, {rows, hidden}),
        dgate(bf16, {rows, hidden}), dup(bf16, {rows, hidden});
    time("swiglu [16384,8192]", Bound::Memory, 3.0 * gate.bytes, [&] {
      checkKernel(tessera_cuda_swiglu(gate.get(), up.get(), y.get(), nullptr));
    });
    time("swiglu_grad [16384,8192]", Bound::Memory, 5.0 * gate.bytes, [&] {
      checkKernel(tessera_cuda_swiglu_grad(gate.get(), up.get(), dy.get(),
                                           dgate.get(), dup.get(), nullptr));
    });
  }
  {
    // The same SwiGLU over one packed [rows, 2F] gate/up projection
    // (tess-pack-gate-up-projections): the same bytes, the halves read in
    // place; the gradient writes one packed [rows, 2F] tensor.
    DeviceBuffer packed(bf16, {rows, 2 * hidden}), y(bf16, {rows, hidden}),
        dy(bf16, {rows, hidden}), dpacked(bf16, {rows, 2 * hidden});
    time("packed_swiglu [16384,2x8192]", Bound::Memory,
         1.5 * static_cast<double>(packed.bytes), [&] {
           checkKernel(tessera_cuda_packed_swiglu(packed.get(), y.get(), nullptr));
         });
    time("packed_swiglu_grad [16384,2x8192]", Bound::Memory,
         2.5 * static_cast<double>(packed.bytes), [&] {
           checkKernel(tessera_cuda_packed_swiglu_grad(packed.get(), dy.get(),
                                                       dpacked.get(), nullptr));
         });
  }
  {
    // Causal GQA attention straight from the packed q/k/v projection: QK^T
    // and PV are 4 B Hq T T D FLOPs dense, half of it under the causal
    // mask. The backward reads the forward's y and lse and is counted as
    // 2.5x the forward (QK^T again, dP, dV, dQ, dK).
    const int64_t packedWidth = (queryHeads + 2 * keyHeads) * headDim;
    DeviceBuffer qkv(bf16, {batch, tokens, packedWidth}),
        y(bf16, {batch, tokens, queryHeads * headDim}),
        lse(TESSERA_F32, {batch, queryHeads, tokens}),
        dy(bf16, {batch, tokens, queryHeads * headDim}),
        dqkv(bf16, {batch, tokens, packedWidth});
    double forward = 2.0 * batch * queryHeads * tokens * tokens * headDim;
    time("packed_attention causal qkv[8,2048,3072]", Bound::Compute, forward,
         [&] {
           checkKernel(tessera_cuda_packed_attention(
               qkv.get(), y.get(), lse.get(), queryHeads, keyHeads, 1, 0.125,
               nullptr));
         });
    time("packed_attention_grad causal qkv[8,2048,3072]", Bound::Compute,
         2.5 * forward, [&] {
           checkKernel(tessera_cuda_packed_attention_grad(
               qkv.get(), y.get(), lse.get(), dy.get(), dqkv.get(), queryHeads,
               keyHeads, 1, 0.125, nullptr));
         });
  }
  {
    // Projections: y [M,N] = x [M,K] W^T, W [N,K]; 2 M N K FLOPs.
    struct Projection {
      const char *name;
      int64_t n, k;
    };
    const Projection projections[] = {
        {"linear q    [16384,2048] x [2048,2048]^T", width, width},
        {"linear k/v  [16384,2048] x [512,2048]^T", keyHeads * headDim, width},
        {"linear gate/up [16384,2048] x [8192,2048]^T", hidden, width},
        {"linear down [16384,8192] x [2048,8192]^T", width, hidden},
    };
    for (const Projection &p : projections) {
      DeviceBuffer x(bf16, {rows, p.k}), weight(bf16, {p.n, p.k}),
          y(bf16, {rows, p.n});
      time(p.name, Bound::Compute, 2.0 * rows * p.n * p.k, [&] {
        checkKernel(tessera_cuda_linear(x.get(), weight.get(), nullptr, y.get(),
                                        1, nullptr));
      });
      // Its backward as the step runs it: dx [M,K] = dy W (a linear without
      // the transpose) and dW [N,K] = dy^T x (a matmul of dy transposed).
      time((std::string(p.name) + " dx").c_str(), Bound::Compute,
           2.0 * rows * p.n * p.k, [&] {
             checkKernel(tessera_cuda_linear(y.get(), weight.get(), nullptr,
                                             x.get(), 0, nullptr));
           });
      time((std::string(p.name) + " dW").c_str(), Bound::Compute,
           2.0 * rows * p.n * p.k, [&] {
             checkKernel(tessera_cuda_matmul(y.get(), x.get(), weight.get(), 1,
                                             0, nullptr));
           });
    }
  }
  {
    // LM head (2 M V d FLOPs), then the fused cross-entropy over its logits
    // (logits read once, dlogits written once).
    DeviceBuffer x(bf16, {rows, width}), weight(bf16, {vocabulary, width}),
        logits(bf16, {rows, vocabulary}), dlogits(bf16, {rows, vocabulary});
    DeviceBuffer targets(TESSERA_I64, {rows}, kVocabulary),
        loss(TESSERA_F32, {}), dloss(TESSERA_F32, {});
    time("linear head [16384,2048] x [128256,2048]^T", Bound::Compute,
         2.0 * rows * vocabulary * width, [&] {
           checkKernel(tessera_cuda_linear(x.get(), weight.get(), nullptr,
                                           logits.get(), 1, nullptr));
         });
    time("linear head dx", Bound::Compute, 2.0 * rows * vocabulary * width,
         [&] {
           checkKernel(tessera_cuda_linear(logits.get(), weight.get(), nullptr,
                                           x.get(), 0, nullptr));
         });
    time("linear head dW", Bound::Compute, 2.0 * rows * vocabulary * width,
         [&] {
           checkKernel(tessera_cuda_matmul(logits.get(), x.get(), weight.get(),
                                           1, 0, nullptr));
         });
    // The fill's [-2, 2) serves as logits; dloss is set to 1, as in training.
    float one = 1.0f;
    check(
        cudaMemcpy(dloss.get()->data, &one, sizeof one, cudaMemcpyHostToDevice),
        "cudaMemcpy");
    time("cross_entropy_with_grad [16384,128256]", Bound::Memory,
         2.0 * logits.bytes, [&] {
           checkKernel(tessera_cuda_cross_entropy_with_grad(
               logits.get(), targets.get(), nullptr, dloss.get(), loss.get(),
               dlogits.get(), -100, nullptr));
         });
  }
  {
    // Embedding gradient: dy read, the whole table written (overwritten).
    DeviceBuffer ids(TESSERA_I64, {rows}, kVocabulary), dy(bf16, {rows, width}),
        dtable(bf16, {vocabulary, width});
    time("embedding_grad [16384] -> [128256,2048]", Bound::Memory,
         static_cast<double>(dy.bytes + dtable.bytes), [&] {
           checkKernel(tessera_cuda_embedding_grad(ids.get(), dy.get(),
                                                   dtable.get(), nullptr));
         });
  }
  {
    // The optimizer over every parameter of the 1B model (tied embedding:
    // 1.236e9 f32 master weights) in 2^16-element chunks, as the driver
    // runs it: the bf16 gradient's sum of squares (gradient read), then
    // AdamW (weights, m, v read and written, gradient read, the bf16
    // compute copies the step reads written).
    const int64_t parameters = 1235814400, chunkElements = int64_t(1) << 16;
    std::vector<tessera_tensor_chunk> table;
    for (int64_t offset = 0; offset < parameters; offset += chunkElements)
      table.push_back(
          {offset, std::min(chunkElements, parameters - offset), 0, 1,
           offset, offset});
    tessera_tensor_chunk *chunks = nullptr;
    check(cudaMalloc(&chunks, table.size() * sizeof *chunks), "cudaMalloc");
    check(cudaMemcpy(chunks, table.data(), table.size() * sizeof *chunks,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    const int32_t chunkCount = static_cast<int32_t>(table.size());
    DeviceBuffer weights(TESSERA_F32, {parameters}),
        m(TESSERA_F32, {parameters}), v(TESSERA_F32, {parameters}),
        gradient(bf16, {parameters}), copies(bf16, {parameters}),
        sums(TESSERA_F32, {2 * chunkCount});
    time("chunk_sum_squares bf16 [1.24e9]", Bound::Memory,
         static_cast<double>(gradient.bytes), [&] {
           checkKernel(tessera_cuda_chunk_sum_squares(
               gradient.get()->data, bf16, chunks, chunkCount,
               static_cast<double *>(sums.get()->data), nullptr));
         });
    // v starts at the fill's [-2, 2); AdamW needs v >= 0, so square it away
    // with one step on a zeroed v.
    check(cudaMemset(v.get()->data, 0, v.bytes), "cudaMemset");
    time("multi_tensor_adamw f32 + bf16 grad + bf16 copies [1.24e9]",
         Bound::Memory,
         static_cast<double>(2 * (weights.bytes + m.bytes + v.bytes) +
                             gradient.bytes + copies.bytes),
         [&] {
           checkKernel(tessera_cuda_multi_tensor_adamw(
               static_cast<float *>(weights.get()->data), gradient.get()->data,
               bf16, static_cast<float *>(m.get()->data),
               static_cast<float *>(v.get()->data), copies.get()->data, bf16,
               chunks, chunkCount, 1, 1e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, nullptr,
               nullptr));
         });
    check(cudaFree(chunks), "cudaFree");
  }
  check(cudaDeviceSynchronize(), "sync");
  std::printf("worst: %s at %.1f%% of roofline\n", worstName.c_str(),
              100.0 * worstFraction);
  if (worstFraction < kGuard) {
    std::printf("FAIL: a kernel is below %.0f%% of its roofline\n",
                100.0 * kGuard);
    return 1;
  }
  std::printf("ok: every kernel within 2x of its roofline\n");
  return 0;
}
