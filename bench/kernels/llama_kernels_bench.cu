//===- llama_kernels_bench.cu - Every op kind of Llama 3.2 1B vs roofline -===//
//
// Times, at Llama 3.2 1B's training shapes (8 x 2048 tokens = 16384 rows,
// d = 2048, 32 query heads and 8 key/value heads of 64, MLP width 8192,
// vocabulary 128256, bf16), one call of every kernel kind the training step
// launches: RMSNorm and its fused backward, rotary (q, its adjoint, k),
// SwiGLU and its gradient, the head transposes, causal GQA attention and
// its gradient, the projection GEMMs and the LM head, the fused
// cross-entropy, and the embedding gradient. Each line gives ms per call,
// the achieved rate, and the fraction of that kernel's roofline:
// memory-bound kernels against kBandwidth (bytes they must move, counted
// as each operand read once and each output written once), GEMMs and
// attention against kFlops. The point is a guard, not a profile: every op
// kind should be within 2x of its roofline, so the program exits non-zero
// if any kernel is below 50% of it. Run by hand on the GPU machine; not a
// test.
//
//===----------------------------------------------------------------------===//

#include "KernelBench.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace kernel_bench;

namespace {

/// H200 practical HBM bandwidth, bytes per second.
constexpr double kBandwidth = 4.0e12;
/// H200 practical dense bf16 tensor-core rate, FLOP per second.
constexpr double kFlops = 7.9e14;
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
  double ms = timeMs(call);
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

} // namespace

int main() {
  const int64_t batch = 8, tokens = 2048, width = 2048, queryHeads = 32,
                keyHeads = 8, headDim = 64, hidden = 8192;
  const int64_t rows = batch * tokens, vocabulary = kVocabulary;
  const int bf16 = TESSERA_BF16;
  std::printf("cost model: every kernel costs at least kernel_seconds "
              "(bench/measure_kernels.py); memory-bound ops priced at device "
              "bandwidth\n");
  std::printf("rooflines: %.1e B/s (memory-bound), %.1e FLOP/s (GEMM, "
              "attention)\n",
              kBandwidth, kFlops);
  std::printf("%-44s %11s  %16s %14s %6s\n", "kernel", "ms", "achieved",
              "roofline", "%");
  {
    // RMSNorm: x read, y written; the fused backward reads x, dy, residual
    // and writes dx (scale and dscale are one row, not counted).
    DeviceBuffer x(bf16, {rows, width}), y(bf16, {rows, width}),
        dy(bf16, {rows, width}), residual(bf16, {rows, width}),
        dx(bf16, {rows, width}), scale(bf16, {width}), dscale(bf16, {width});
    time("rms_norm [16384,2048]", Bound::Memory, 2.0 * x.bytes, [&] {
      checkKernel(tessera_cuda_rms_norm(x.get(), scale.get(), y.get(), 1, 1e-5,
                                        nullptr));
    });
    time("rms_norm_grad_add [16384,2048] + dscale", Bound::Memory,
         4.0 * x.bytes, [&] {
           checkKernel(tessera_cuda_rms_norm_grad_add(
               x.get(), scale.get(), dy.get(), residual.get(), dx.get(),
               dscale.get(), 1, 1e-5, nullptr));
         });
  }
  {
    // Rotary: x read, y written (cos/sin are one [T,D] table, not counted).
    DeviceBuffer q(bf16, {batch, queryHeads, tokens, headDim}),
        qy(bf16, {batch, queryHeads, tokens, headDim}),
        k(bf16, {batch, keyHeads, tokens, headDim}),
        ky(bf16, {batch, keyHeads, tokens, headDim}),
        cos(bf16, {1, 1, tokens, headDim}), sin(bf16, {1, 1, tokens, headDim});
    time("rotary q [8,32,2048,64]", Bound::Memory, 2.0 * q.bytes, [&] {
      checkKernel(tessera_cuda_rotary(q.get(), cos.get(), sin.get(), qy.get(),
                                      0, 0, nullptr));
    });
    time("rotary q [8,32,2048,64] adjoint", Bound::Memory, 2.0 * q.bytes, [&] {
      checkKernel(tessera_cuda_rotary(q.get(), cos.get(), sin.get(), qy.get(),
                                      1, 0, nullptr));
    });
    time("rotary k [8,8,2048,64]", Bound::Memory, 2.0 * k.bytes, [&] {
      checkKernel(tessera_cuda_rotary(k.get(), cos.get(), sin.get(), ky.get(),
                                      0, 0, nullptr));
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
    // Head transposes: x read, y written.
    DeviceBuffer bthd(bf16, {batch, tokens, queryHeads, headDim}),
        bhtd(bf16, {batch, queryHeads, tokens, headDim});
    int64_t swap[] = {0, 2, 1, 3};
    time("transpose [8,2048,32,64] -> [8,32,2048,64]", Bound::Memory,
         2.0 * bthd.bytes, [&] {
           checkKernel(
               tessera_cuda_transpose(bthd.get(), bhtd.get(), swap, nullptr));
         });
    time("transpose [8,32,2048,64] -> [8,2048,32,64]", Bound::Memory,
         2.0 * bthd.bytes, [&] {
           checkKernel(
               tessera_cuda_transpose(bhtd.get(), bthd.get(), swap, nullptr));
         });
  }
  {
    // Causal GQA attention: QK^T and PV are 4 B Hq T T D FLOPs dense, half
    // of it under the causal mask. The backward is counted as 2.5x the
    // forward (dQ, dK, dV, and recomputing P); on the cuDNN path it also
    // recomputes the forward, which this count does not credit.
    DeviceBuffer q(bf16, {batch, queryHeads, tokens, headDim}),
        k(bf16, {batch, keyHeads, tokens, headDim}),
        v(bf16, {batch, keyHeads, tokens, headDim}),
        y(bf16, {batch, queryHeads, tokens, headDim}),
        dq(bf16, {batch, queryHeads, tokens, headDim}),
        dk(bf16, {batch, keyHeads, tokens, headDim}),
        dv(bf16, {batch, keyHeads, tokens, headDim});
    double forward = 2.0 * batch * queryHeads * tokens * tokens * headDim;
    time("attention causal q[8,32,2048,64] kv[8,8,..]", Bound::Compute,
         forward, [&] {
           checkKernel(tessera_cuda_attention(q.get(), k.get(), v.get(),
                                              nullptr, y.get(), 1, 0.125, 0.0,
                                              0, nullptr));
         });
    time("attention_grad causal q[8,32,2048,64]", Bound::Compute,
         2.5 * forward, [&] {
           checkKernel(tessera_cuda_attention_grad(
               q.get(), k.get(), v.get(), nullptr, y.get(), dq.get(), dk.get(),
               dv.get(), 1, 0.125, 0.0, 0, nullptr));
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
        checkKernel(tessera_cuda_linear(x.get(), weight.get(), nullptr,
                                        y.get(), 1, nullptr));
      });
    }
  }
  {
    // LM head (2 M V d FLOPs), then the fused cross-entropy over its logits
    // (logits read once, dlogits written once).
    DeviceBuffer x(bf16, {rows, width}), weight(bf16, {vocabulary, width}),
        logits(bf16, {rows, vocabulary}), dlogits(bf16, {rows, vocabulary});
    DeviceBuffer targets(TESSERA_I64, {rows}, kVocabulary), loss(TESSERA_F32, {}),
        dloss(TESSERA_F32, {});
    time("linear head [16384,2048] x [128256,2048]^T", Bound::Compute,
         2.0 * rows * vocabulary * width, [&] {
           checkKernel(tessera_cuda_linear(x.get(), weight.get(), nullptr,
                                           logits.get(), 1, nullptr));
         });
    // The fill's [-2, 2) serves as logits; dloss is set to 1, as in training.
    float one = 1.0f;
    check(cudaMemcpy(dloss.get()->data, &one, sizeof one,
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    time("cross_entropy_with_grad [16384,128256]", Bound::Memory,
         2.0 * logits.bytes, [&] {
           checkKernel(tessera_cuda_cross_entropy_with_grad(
               logits.get(), targets.get(), dloss.get(), loss.get(),
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
