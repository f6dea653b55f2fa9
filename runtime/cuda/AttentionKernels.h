//===- AttentionKernels.h - The attention kernels' internal entry points --===//
//
// Private to runtime/cuda. The flash entries (FlashAttention.cu) are tried
// first; each returns false, having launched nothing, when the call is
// outside the flash kernels' limits (FlashAttention.cu's file comment), and
// the caller then runs the general kernels (Attention.cu). Shapes are
// already checked. PackedAttention.cu's packed entries use both.
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

/// tessera_cuda_attention's work (flash or general), also writing each
/// query row's natural-log log-sum-exp into `lse` (f32 [B Hq Sq]) unless it
/// is null. Throws KernelError on bad operands.
void attentionForward(const tessera_tensor *q, const tessera_tensor *k,
                      const tessera_tensor *v, const tessera_tensor *mask,
                      tessera_tensor *y, float *lse, bool causal, double scale,
                      double dropout, uint64_t seed, cudaStream_t stream);

} // namespace tessera::cuda

#endif // TESSERA_RUNTIME_CUDA_ATTENTIONKERNELS_H
