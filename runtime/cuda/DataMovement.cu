//===- DataMovement.cu - Copy, transpose, broadcast, slice, concat, split -===//
//
// Two mechanisms cover every op here:
// - copies of contiguous runs go to the copy engine: copy is one
//   cudaMemcpyAsync; concat and split are one cudaMemcpy2DAsync per piece
//   (each piece is `outer` runs of `length * inner` elements, a pitched 2-D
//   copy), so no kernel of ours runs at all;
// - transpose, broadcast, slice and slice_grad are one "strided copy"
//   kernel: each output element's source offset is its index decomposed by
//   the output shape and dotted with per-dim source strides (0 for
//   broadcast dims, permuted for transposes, step-scaled for slices). The
//   kernel moves elements as 1/2/4/8-byte words, so every dtype works.
// slice_grad zeroes dx and scatters dy through the same strides.
//
// The strided kernel is simple and reads or writes uncoalesced along
// permuted dims; a tiled shared-memory transpose is the upgrade if traces
// show transposes (the lowering avoids most of them by choosing layouts).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "OperandChecks.h"

using namespace tessera::cuda;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::JoinLayout;
using tessera::cpu::product;
using tessera::cpu::requireCopyOperands;
using tessera::cpu::requireJoin;
using tessera::cpu::requireSameDtype;
using tessera::cpu::requireTensor;
using tessera::cpu::shapeOf;
using tessera::cpu::sliceStrides;
using tessera::cpu::transposeStrides;

namespace {

/// gather: y[i] = x[base + offset(i)]; scatter: y[base + offset(i)] = x[i].
template <typename Element, bool Scatter>
__global__ void stridedCopyKernel(const Element *x, Element *y,
                                  StridedLayout<1> layout, int64_t base,
                                  int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) {
    int64_t offsets[1];
    layout.offsets(i, offsets);
    if (Scatter)
      y[base + offsets[0]] = x[i];
    else
      y[i] = x[base + offsets[0]];
  }
}

/// Walks `shape` (the smaller tensor's); `strides` index the larger one.
template <bool Scatter>
void stridedCopy(const void *x, void *y, int32_t dtype, const Shape &shape,
                 const Shape &strides, int64_t base, cudaStream_t stream) {
  int64_t count = product(shape, 0, shape.size());
  if (count == 0)
    return;
  Shape operandStrides[1] = {strides};
  StridedLayout<1> layout = makeLayout(shape, operandStrides);
  unsigned grid = gridFor(count);
  switch (dtypeSize(dtype)) {
  case 1:
    stridedCopyKernel<uint8_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint8_t *>(x), static_cast<uint8_t *>(y), layout,
        base, count);
    break;
  case 2:
    stridedCopyKernel<uint16_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint16_t *>(x), static_cast<uint16_t *>(y), layout,
        base, count);
    break;
  case 4:
    stridedCopyKernel<uint32_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint32_t *>(x), static_cast<uint32_t *>(y), layout,
        base, count);
    break;
  default:
    stridedCopyKernel<uint64_t, Scatter><<<grid, kThreadsPerBlock, 0, stream>>>(
        static_cast<const uint64_t *>(x), static_cast<uint64_t *>(y), layout,
        base, count);
    break;
  }
  cudaCheckLaunch();
}

/// Copies `outer` runs of `run` elements between a piece and the joined
/// tensor, whose runs are `joinedRun` apart, starting at `joinedOffset`.
void copyRuns(void *destination, size_t destinationPitch, const void *source,
              size_t sourcePitch, size_t runBytes, int64_t outer,
              cudaStream_t stream) {
  if (runBytes == 0 || outer == 0)
    return;
  cudaCheck(cudaMemcpy2DAsync(destination, destinationPitch, source,
                              sourcePitch, runBytes,
                              static_cast<size_t>(outer),
                              cudaMemcpyDeviceToDevice, stream));
}

} // namespace

extern "C" int tessera_cuda_copy(const tessera_tensor *x, tessera_tensor *y,
                                 cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_copy", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireCopyOperands(input, output);
    size_t bytes = elementCount(input) * dtypeSize(input.dtype);
    if (input.data != output.data && bytes > 0)
      cudaCheck(cudaMemcpyAsync(output.data, input.data, bytes,
                                cudaMemcpyDeviceToDevice, stream));
  });
}

extern "C" int tessera_cuda_transpose(const tessera_tensor *x,
                                      tessera_tensor *y,
                                      const int64_t *permutation,
                                      cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_transpose", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    Shape strides = transposeStrides(input, output, permutation);
    stridedCopy<false>(input.data, output.data, input.dtype, shapeOf(output),
                       strides, 0, stream);
  });
}

extern "C" int tessera_cuda_broadcast(const tessera_tensor *x,
                                      tessera_tensor *y, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_broadcast", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    Shape shape = shapeOf(output);
    Shape strides = tessera::cpu::broadcastStrides(input, "x", shape);
    stridedCopy<false>(input.data, output.data, input.dtype, shape, strides, 0,
                       stream);
  });
}

extern "C" int tessera_cuda_slice(const tessera_tensor *x, tessera_tensor *y,
                                  const int64_t *starts, const int64_t *strides,
                                  cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_slice", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    if (input.rank != output.rank)
      fail("x and y have different ranks");
    Shape shape = shapeOf(output);
    int64_t base = 0;
    Shape steps = sliceStrides(input, shape, starts, strides, base);
    stridedCopy<false>(input.data, output.data, input.dtype, shape, steps,
                       base, stream);
  });
}

extern "C" int tessera_cuda_slice_grad(const tessera_tensor *dy,
                                       tessera_tensor *dx,
                                       const int64_t *starts,
                                       const int64_t *strides,
                                       cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_slice_grad", [&] {
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &inputGradient = requireTensor(dx, "dx");
    requireSameDtype(upstream, "dy", inputGradient, "dx");
    if (upstream.rank != inputGradient.rank)
      fail("dy and dx have different ranks");
    Shape shape = shapeOf(upstream);
    int64_t base = 0;
    Shape steps = sliceStrides(inputGradient, shape, starts, strides, base);
    size_t bytes = elementCount(inputGradient) * dtypeSize(inputGradient.dtype);
    if (bytes > 0)
      cudaCheck(cudaMemsetAsync(inputGradient.data, 0, bytes, stream));
    stridedCopy<true>(upstream.data, inputGradient.data, upstream.dtype, shape,
                      steps, base, stream);
  });
}

extern "C" int tessera_cuda_concat(const tessera_tensor *const *inputs,
                                   int32_t count, tessera_tensor *y,
                                   int64_t axis, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_concat", [&] {
    tessera_tensor &output = requireTensor(y, "y");
    JoinLayout layout =
        requireJoin("concat", "input", inputs, count, output, "y", axis);
    int64_t outer = layout.outer, inner = layout.inner;
    size_t elementSize = dtypeSize(output.dtype);
    size_t joinedPitch = output.shape[axis] * inner * elementSize;
    size_t offset = 0;
    for (int32_t k = 0; k < count; ++k) {
      size_t runBytes = inputs[k]->shape[axis] * inner * elementSize;
      copyRuns(static_cast<char *>(output.data) + offset, joinedPitch,
               inputs[k]->data, runBytes, runBytes, outer, stream);
      offset += runBytes;
    }
  });
}

extern "C" int tessera_cuda_split(const tessera_tensor *x,
                                  tessera_tensor *const *outputs,
                                  int32_t count, int64_t axis,
                                  cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_split", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    JoinLayout layout =
        requireJoin("split", "output", outputs, count, input, "x", axis);
    int64_t outer = layout.outer, inner = layout.inner;
    size_t elementSize = dtypeSize(input.dtype);
    size_t joinedPitch = input.shape[axis] * inner * elementSize;
    size_t offset = 0;
    for (int32_t k = 0; k < count; ++k) {
      size_t runBytes = outputs[k]->shape[axis] * inner * elementSize;
      copyRuns(outputs[k]->data, runBytes,
               static_cast<const char *>(input.data) + offset, joinedPitch,
               runBytes, outer, stream);
      offset += runBytes;
    }
  });
}
