//===- PackedAttention.cu - Attention on a QKV-packed tensor --------------===//
//
// tess.packed_attention(_grad) on the GPU. cuDNN's fused attention runs the
// calls where it is available (CudnnAttention.cpp); otherwise the flash
// kernels do, the same way: they read the heads
// of qkv [B, T, (Hq + 2 Hkv) D] and write y [B, T, Hq D] and dqkv in place
// through their strided head layouts, so GPT-2's fused projection needs no
// transposes, no split copies and no concat of the gradients; the backward
// takes the forward's y and log-sum-exp rather than rerunning the forward.
//
// Calls outside the flash limits (f32, other head dims) unpack the heads
// into [B, H, T, D] scratch, run Attention.cu's general kernels (which also
// write the log-sum-exp) and pack the results back: slower, the same
// values. The operand checks are OperandChecks.h's, shared with the CPU
// reference.
//
//===----------------------------------------------------------------------===//

#include "AttentionKernels.h"
#include "Common.cuh"
#include "OperandChecks.h"

using namespace tessera::cuda;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::requireSuccess;
using tessera::cpu::requireTensor;
using tessera::cpu::PackedAttentionLayout;

namespace {

constexpr int kScratchSlot = 2100; // streamScratch slot of the fallback

/// Moves heads [firstHead, firstHead + heads) between token-major rows of
/// `rowWidth` elements and a [B, heads, T, D] tensor (both of `dtype`).
__global__ void moveHeads(const void *from, void *to, int dtype, int64_t batch,
                          int64_t heads, int64_t seq, int64_t dim,
                          int64_t rowWidth, int64_t firstHead, bool pack) {
  int64_t count = batch * heads * seq * dim;
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t d = i % dim, t = (i / dim) % seq, h = (i / (dim * seq)) % heads,
            b = i / (dim * seq * heads);
    int64_t token = (b * seq + t) * rowWidth + (firstHead + h) * dim + d;
    if (pack)
      storeFloat(to, dtype, token, loadFloat(from, dtype, i));
    else
      storeFloat(to, dtype, i, loadFloat(from, dtype, token));
  }
}

/// [B, heads, T, D] scratch tensors of one storage type, carved out of one
/// stream scratch block.
class HeadScratch {
public:
  HeadScratch(const PackedAttentionLayout &layout, int dtype,
              std::initializer_list<int64_t> headCounts, cudaStream_t stream)
      : layout(layout), dtype(dtype), stream(stream) {
    size_t total = 0;
    for (int64_t heads : headCounts)
      total += bytesOf(heads);
    char *block = static_cast<char *>(streamScratch(stream, total, kScratchSlot));
    for (int64_t heads : headCounts) {
      tessera_tensor tensor{};
      tensor.data = block;
      tensor.dtype = dtype;
      tensor.rank = 4;
      tensor.shape[0] = layout.batch;
      tensor.shape[1] = heads;
      tensor.shape[2] = layout.seq;
      tensor.shape[3] = layout.headDim;
      tensors.push_back(tensor);
      block += bytesOf(heads);
    }
  }

  tessera_tensor &operator[](size_t index) { return tensors[index]; }

  /// Copies heads [firstHead, ...) of token-major `tokens` (rows of
  /// `rowWidth`) into tensor `index`, or back when `pack`.
  void move(size_t index, const void *tokens, int64_t rowWidth,
            int64_t firstHead, bool pack) {
    tessera_tensor &tensor = tensors[index];
    int64_t count = layout.batch * tensor.shape[1] * layout.seq * layout.headDim;
    if (count == 0)
      return;
    const void *from = pack ? tensor.data : tokens;
    void *to = pack ? const_cast<void *>(tokens) : tensor.data;
    moveHeads<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
        from, to, dtype, layout.batch, tensor.shape[1], layout.seq,
        layout.headDim, rowWidth, firstHead, pack);
    cudaCheckLaunch();
  }

private:
  size_t bytesOf(int64_t heads) const {
    size_t bytes = static_cast<size_t>(layout.batch * heads * layout.seq *
                                       layout.headDim) *
                   dtypeSize(dtype);
    return (bytes + 255) / 256 * 256;
  }

  const PackedAttentionLayout &layout;
  int dtype;
  cudaStream_t stream;
  std::vector<tessera_tensor> tensors;
};

} // namespace

extern "C" int tessera_cuda_packed_attention(const tessera_tensor *qkv,
                                             tessera_tensor *y,
                                             tessera_tensor *lse,
                                             int64_t query_heads,
                                             int64_t key_heads, int32_t causal,
                                             double scale, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_packed_attention", [&] {
    const tessera_tensor &packed = requireTensor(qkv, "qkv");
    tessera_tensor &output = requireTensor(y, "y");
    tessera_tensor &statistics = requireTensor(lse, "lse");
    PackedAttentionLayout layout = tessera::cpu::requirePackedAttentionOperands(
        packed, output, statistics, query_heads, key_heads, scale);
    requireKernelFloat(packed, "qkv");
    if (elementCount(output) == 0)
      return;
    if (cudnnPackedAttentionForward(packed, query_heads, key_heads, output,
                                    statistics, causal != 0, scale, stream) ||
        flashPackedAttentionForward(packed, query_heads, key_heads, output,
                                    statistics, causal != 0, scale, stream))
      return;
    HeadScratch heads(layout, packed.dtype,
                      {query_heads, key_heads, key_heads, query_heads},
                      stream);
    int64_t width = layout.width();
    heads.move(0, packed.data, width, 0, false);
    heads.move(1, packed.data, width, query_heads, false);
    heads.move(2, packed.data, width, query_heads + key_heads, false);
    attentionForward(&heads[0], &heads[1], &heads[2], nullptr, &heads[3],
                     static_cast<float *>(statistics.data), causal != 0,
                     /*window=*/0, /*softcap=*/0.0, scale, 0.0, 0, stream);
    heads.move(3, output.data, query_heads * layout.headDim, 0, true);
  });
}

extern "C" int tessera_cuda_packed_attention_grad(
    const tessera_tensor *qkv, const tessera_tensor *y,
    const tessera_tensor *lse, const tessera_tensor *dy, tessera_tensor *dqkv,
    int64_t query_heads, int64_t key_heads, int32_t causal, double scale,
    cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_packed_attention_grad", [&] {
    const tessera_tensor &packed = requireTensor(qkv, "qkv");
    const tessera_tensor &output = requireTensor(y, "y");
    const tessera_tensor &statistics = requireTensor(lse, "lse");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &gradient = requireTensor(dqkv, "dqkv");
    PackedAttentionLayout layout =
        tessera::cpu::requirePackedAttentionGradOperands(
            packed, output, statistics, upstream, gradient, query_heads,
            key_heads, scale);
    requireKernelFloat(packed, "qkv");
    if (elementCount(gradient) == 0)
      return;
    if (cudnnPackedAttentionBackward(packed, query_heads, key_heads, output,
                                     statistics, upstream, gradient,
                                     causal != 0, scale, stream) ||
        flashPackedAttentionBackward(packed, query_heads, key_heads, output,
                                     statistics, upstream, gradient,
                                     causal != 0, scale, stream))
      return;
    // q, k, v, dy, then dq, dk, dv.
    HeadScratch heads(layout, packed.dtype,
                      {query_heads, key_heads, key_heads, query_heads,
                       query_heads, key_heads, key_heads},
                      stream);
    int64_t width = layout.width(), outputWidth = query_heads * layout.headDim;
    int64_t firsts[] = {0, query_heads, query_heads + key_heads};
    for (size_t i = 0; i < 3; ++i)
      heads.move(i, packed.data, width, firsts[i], false);
    heads.move(3, upstream.data, outputWidth, 0, false);
    requireSuccess(tessera_cuda_attention_grad(&heads[0], &heads[1], &heads[2],
                                               nullptr, &heads[3], &heads[4],
                                               &heads[5], &heads[6], causal,
                                               scale, 0.0, 0, stream),
                   tessera_cuda_last_error);
    for (size_t i = 0; i < 3; ++i)
      heads.move(4 + i, gradient.data, width, firsts[i], true);
  });
}
