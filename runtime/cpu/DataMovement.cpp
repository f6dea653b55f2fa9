//===- DataMovement.cpp - Copies, transposes, broadcasts, slices, joins ---===//
//
// These kernels move elements without looking at them, so they work on bytes
// and accept every dtype. The strided ones (transpose, broadcast, slice,
// slice_grad) walk the output (or dy) in row-major order with StridedWalker,
// which carries the matching offset into the other tensor: a transpose reads
// x with permuted strides, a broadcast with stride 0 on stretched dims, a
// slice with strides multiplied by the step and a base offset at `starts`.
// concat and split copy contiguous runs: around `axis` a tensor is
// [outer, length * inner], and each input owns a run of length_k * inner
// elements in every outer row.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"

#include <cstring>

using namespace tessera::cpu;

namespace {

/// Copies `count` elements of `elementSize` bytes from element `sourceIndex`
/// of `source` to element `destinationIndex` of `destination`.
void copyElements(void *destination, int64_t destinationIndex,
                  const void *source, int64_t sourceIndex, int64_t count,
                  size_t elementSize) {
  if (count == 0)
    return;
  std::memcpy(static_cast<char *>(destination) + destinationIndex * elementSize,
              static_cast<const char *>(source) + sourceIndex * elementSize,
              static_cast<size_t>(count) * elementSize);
}

/// Copies every element of `to` from `from` at the walker's offset 0.
void gatherStrided(const tessera_tensor &from, tessera_tensor &to,
                   StridedWalker walker, int64_t baseOffset) {
  size_t elementSize = dtypeSize(to.dtype);
  int64_t count = elementCount(to);
  for (int64_t i = 0; i < count; ++i, walker.advance())
    copyElements(to.data, i, from.data, baseOffset + walker.offset(0), 1,
                 elementSize);
}

} // namespace

extern "C" int tessera_cpu_copy(const tessera_tensor *x, tessera_tensor *y) {
  return runKernel("tessera_cpu_copy", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireCopyOperands(input, output);
    if (input.data != output.data)
      copyElements(output.data, 0, input.data, 0, elementCount(input),
                   dtypeSize(input.dtype));
  });
}

extern "C" int tessera_cpu_transpose(const tessera_tensor *x, tessera_tensor *y,
                                     const int64_t *permutation) {
  return runKernel("tessera_cpu_transpose", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    Shape permutedStrides = transposeStrides(input, output, permutation);
    gatherStrided(input, output,
                  StridedWalker(shapeOf(output), {permutedStrides}), 0);
  });
}

extern "C" int tessera_cpu_broadcast(const tessera_tensor *x,
                                     tessera_tensor *y) {
  return runKernel("tessera_cpu_broadcast", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    Shape shape = shapeOf(output);
    gatherStrided(input, output,
                  StridedWalker(shape, {broadcastStrides(input, "x", shape)}),
                  0);
  });
}

extern "C" int tessera_cpu_slice(const tessera_tensor *x, tessera_tensor *y,
                                 const int64_t *starts,
                                 const int64_t *strides) {
  return runKernel("tessera_cpu_slice", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    if (input.rank != output.rank)
      fail("x and y have different ranks");
    Shape shape = shapeOf(output);
    int64_t baseOffset = 0;
    Shape steps = sliceStrides(input, shape, starts, strides, baseOffset);
    gatherStrided(input, output, StridedWalker(shape, {steps}), baseOffset);
  });
}

extern "C" int tessera_cpu_slice_grad(const tessera_tensor *dy,
                                      tessera_tensor *dx, const int64_t *starts,
                                      const int64_t *strides) {
  return runKernel("tessera_cpu_slice_grad", [&] {
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &result = requireTensor(dx, "dx");
    requireSameDtype(upstream, "dy", result, "dx");
    if (upstream.rank != result.rank)
      fail("dy and dx have different ranks");
    Shape shape = shapeOf(upstream);
    int64_t baseOffset = 0;
    Shape steps = sliceStrides(result, shape, starts, strides, baseOffset);
    size_t elementSize = dtypeSize(result.dtype);
    // All-zero bytes are zero in every dtype. Steps >= 1 make the selected
    // positions distinct, so assignment (not addition) is the adjoint.
    if (elementCount(result) > 0)
      std::memset(result.data, 0,
                  static_cast<size_t>(elementCount(result)) * elementSize);
    StridedWalker walker(shape, {steps});
    int64_t count = elementCount(upstream);
    for (int64_t i = 0; i < count; ++i, walker.advance())
      copyElements(result.data, baseOffset + walker.offset(0), upstream.data, i,
                   1, elementSize);
  });
}

extern "C" int tessera_cpu_concat(const tessera_tensor *const *inputs,
                                  int32_t count, tessera_tensor *y,
                                  int64_t axis) {
  return runKernel("tessera_cpu_concat", [&] {
    tessera_tensor &output = requireTensor(y, "y");
    JoinLayout layout =
        requireJoin("concat", "input", inputs, count, output, "y", axis);
    int64_t outer = layout.outer, inner = layout.inner;
    size_t elementSize = dtypeSize(output.dtype);
    for (int64_t o = 0; o < outer; ++o) {
      int64_t destination = o * output.shape[axis] * inner;
      for (int32_t k = 0; k < count; ++k) {
        int64_t run = inputs[k]->shape[axis] * inner;
        copyElements(output.data, destination, inputs[k]->data, o * run, run,
                     elementSize);
        destination += run;
      }
    }
  });
}

extern "C" int tessera_cpu_split(const tessera_tensor *x,
                                 tessera_tensor *const *outputs, int32_t count,
                                 int64_t axis) {
  return runKernel("tessera_cpu_split", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    JoinLayout layout =
        requireJoin("split", "output", outputs, count, input, "x", axis);
    int64_t outer = layout.outer, inner = layout.inner;
    size_t elementSize = dtypeSize(input.dtype);
    for (int64_t o = 0; o < outer; ++o) {
      int64_t source = o * input.shape[axis] * inner;
      for (int32_t k = 0; k < count; ++k) {
        int64_t run = outputs[k]->shape[axis] * inner;
        copyElements(outputs[k]->data, o * run, input.data, source, run,
                     elementSize);
        source += run;
      }
    }
  });
}
