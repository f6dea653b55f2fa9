//===- AttentionKernels.h - The attention kernels' internal entry points --===//
//
// Private to runtime/cuda. For the packed entries, cuDNN's engines
// (CudnnAttention.cpp) are tried first, then the flash kernels
// (FlashAttention.cu), then the general kernels (Attention.cu). Each of the
// first two returns false, having launched nothing, when the call is
// outside its limits, and the caller tries the next. Shapes are already
// checked.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_ATTENTIONKERNELS_H
#define TESSERA_RUNTIME_CUDA_ATTENTIONKERNELS_H

#include "tessera/runtime/cpu_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace tessera::cuda {

/// [B, H, T, D] operands; `lse` (f32 [B Hq T], natural log) may be null.
bool flashAttentionForward(const tessera_tensor &q, const tessera_tensor &k,
                           const tessera_tensor &v, bool hasMask,
                           double dropout, tessera_tensor &y, float *lse,
                           bool causal, double scale, cudaStream_t stream);
bool flashAttentionBackward(const tessera_tensor &q, const tessera_tensor &k,
                            const tessera_tensor &v, bool hasMask,
                            double dropout, const tessera_tensor &dy,
                            tessera_tensor &dq, tessera_tensor &dk,
                            tessera_tensor &dv, bool causal, double scale,
                            cudaStream_t stream);

/// tess.packed_attention's layouts: qkv [B, T, (Hq + 2 Hkv) D], y and dy
/// [B, T, Hq D], lse f32 [B, Hq, T], dqkv like qkv.
bool flashPackedAttentionForward(const tessera_tensor &qkv,
                                 int64_t queryHeads, int64_t keyHeads,
                                 tessera_tensor &y, tessera_tensor &lse,
                                 bool causal, double scale,
                                 cudaStream_t stream);
bool flashPackedAttentionBackward(const tessera_tensor &qkv,
                                  int64_t queryHeads, int64_t keyHeads,
                                  const tessera_tensor &y,
                                  const tessera_tensor &lse,
                                  const tessera_tensor &dy,
                                  tessera_tensor &dqkv, bool causal,
                                  double scale, cudaStream_t stream);

/// The packed entries on cuDNN's fused attention (the same layouts and the
/// same lse); false when cuDNN is absent, turned off or refuses the shape.
bool cudnnPackedAttentionForward(const tessera_tensor &qkv,
                                 int64_t queryHeads, int64_t keyHeads,
                                 tessera_tensor &y, tessera_tensor &lse,
                                 bool causal, double scale,
                                 cudaStream_t stream);
bool cudnnPackedAttentionBackward(const tessera_tensor &qkv,
                                  int64_t queryHeads, int64_t keyHeads,
                                  const tessera_tensor &y,
                                  const tessera_tensor &lse,
                                  const tessera_tensor &dy,
                                  tessera_tensor &dqkv, bool causal,
                                  double scale, cudaStream_t stream);

/// Turns the cuDNN path on or off for the process (initially on unless
/// TESSERA_CUDNN_ATTENTION is 0 or off): benchmarks and tests compare both.
/// tess.attention on cuDNN (q [B, Hq, T, D], k and v [B, Hkv, T, D],
/// contiguous); false, with nothing launched, where cuDNN is off, absent or
/// refuses the shape. `lse` may be null.
/// A nonzero `window` (with causal) is a sliding window: query i sees keys
/// i - window < j <= i, cuDNN's diagonal band with that left bound. A
/// nonzero `softcap` caps each scaled score s at softcap * tanh(s /
/// softcap) (Gemma-2), cuDNN's Softcap score modifier.
bool cudnnAttentionForward(const tessera_tensor &q, const tessera_tensor &k,
                           const tessera_tensor &v, tessera_tensor &y,
                           float *lse, bool causal, int64_t window,
                           double softcap, double scale, cudaStream_t stream);
bool cudnnAttentionBackward(const tessera_tensor &q, const tessera_tensor &k,
                            const tessera_tensor &v, const tessera_tensor &dy,
                            tessera_tensor &dq, tessera_tensor &dk,
                            tessera_tensor &dv, bool causal, int64_t window,
                            double softcap, double scale,
                            cudaStream_t stream);

void setCudnnAttentionEnabled(bool on);
/// Whether this build has the cuDNN path and libcudnn.so.9 opened.
bool cudnnAttentionAvailable();
/// How many calls cuDNN has run so far, so tests can tell which path ran.
int64_t cudnnAttentionCalls();

/// tessera_cuda_attention's work (cuDNN, flash or general), also writing
/// each query row's natural-log log-sum-exp into `lse` (f32 [B Hq Sq])
/// unless it is null; a nonzero `window` (causal) is a sliding window, as
/// tessera_cuda_sliding_window_attention, and a nonzero `softcap` caps the
/// scores (cudnnAttentionForward). Throws KernelError on bad operands.
void attentionForward(const tessera_tensor *q, const tessera_tensor *k,
                      const tessera_tensor *v, const tessera_tensor *mask,
                      tessera_tensor *y, float *lse, bool causal,
                      int64_t window, double softcap, double scale,
                      double dropout, uint64_t seed, cudaStream_t stream);

} // namespace tessera::cuda

#endif // TESSERA_RUNTIME_CUDA_ATTENTIONKERNELS_H
