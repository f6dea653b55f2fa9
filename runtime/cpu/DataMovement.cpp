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

/// The offset of `starts` in x, and x's strides scaled by the slice steps,
/// after checking that every selected position lies inside x.
Shape sliceStrides(const tessera_tensor &x, const Shape &sliceShape,
                   const int64_t *starts, const int64_t *strides,
                   int64_t &baseOffset) {
  if (x.rank > 0 && (!starts || !strides))
    fail("starts and strides must not be null");
  Shape xShape = shapeOf(x);
  Shape xStrides = rowMajorStrides(xShape);
  Shape steps(xShape.size());
  baseOffset = 0;
  for (size_t dim = 0; dim < xShape.size(); ++dim) {
    int64_t last = starts[dim] + (sliceShape[dim] - 1) * strides[dim];
    if (strides[dim] < 1 || starts[dim] < 0 || starts[dim] > xShape[dim] ||
        (sliceShape[dim] > 0 && last >= xShape[dim]))
      fail("dim " + std::to_string(dim) + ": " +
           std::to_string(sliceShape[dim]) + " elements from " +
           std::to_string(starts[dim]) + " in steps of " +
           std::to_string(strides[dim]) + " do not fit in size " +
           std::to_string(xShape[dim]) + " (full shape " + formatShape(xShape) +
           ")");
    baseOffset += starts[dim] * xStrides[dim];
    steps[dim] = strides[dim] * xStrides[dim];
  }
  return steps;
}

/// Checks that `piece` matches `whole` in rank, dtype and every dim but
/// `axis`.
void requireJoinable(const tessera_tensor &piece, const std::string &name,
                     const tessera_tensor &whole, int64_t axis) {
  Shape expected = shapeOf(whole);
  if (piece.rank == whole.rank)
    expected[axis] = piece.shape[axis];
  requireShape(piece, expected, name.c_str());
  requireSameDtype(piece, name.c_str(), whole, "the joined tensor");
}

} // namespace

extern "C" int tessera_cpu_copy(const tessera_tensor *x, tessera_tensor *y) {
  return runKernel("tessera_cpu_copy", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireSameDtype(input, "x", output, "y");
    if (elementCount(input) != elementCount(output))
      fail("x " + formatShape(shapeOf(input)) + " and y " +
           formatShape(shapeOf(output)) + " have different element counts");
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
    requireSameDtype(input, "x", output, "y");
    if (input.rank != output.rank)
      fail("x and y have different ranks");
    if (input.rank > 0 && !permutation)
      fail("permutation must not be null");
    Shape inputStrides = rowMajorStrides(shapeOf(input));
    Shape expected(input.rank), permutedStrides(input.rank);
    std::vector<bool> used(input.rank, false);
    for (int32_t dim = 0; dim < input.rank; ++dim) {
      int64_t source = permutation[dim];
      if (source < 0 || source >= input.rank || used[source])
        fail("permutation is not a permutation of [0, " +
             std::to_string(input.rank) + ")");
      used[source] = true;
      expected[dim] = input.shape[source];
      permutedStrides[dim] = inputStrides[source];
    }
    requireShape(output, expected, "y");
    gatherStrided(input, output, StridedWalker(expected, {permutedStrides}), 0);
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
    requireAxis(axis, output.rank, "axis");
    if (count < 1 || !inputs)
      fail("concat needs at least one input");
    int64_t joinedLength = 0;
    for (int32_t k = 0; k < count; ++k) {
      std::string name = "input " + std::to_string(k);
      requireJoinable(requireTensor(inputs[k], name.c_str()), name, output,
                      axis);
      joinedLength += inputs[k]->shape[axis];
    }
    if (joinedLength != output.shape[axis])
      fail("the inputs' sizes along axis " + std::to_string(axis) + " sum to " +
           std::to_string(joinedLength) + ", but y " +
           formatShape(shapeOf(output)) + " has " +
           std::to_string(output.shape[axis]));
    Shape shape = shapeOf(output);
    int64_t outer = product(shape, 0, static_cast<size_t>(axis));
    int64_t inner = product(shape, static_cast<size_t>(axis) + 1, shape.size());
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
    requireAxis(axis, input.rank, "axis");
    if (count < 1 || !outputs)
      fail("split needs at least one output");
    int64_t splitLength = 0;
    for (int32_t k = 0; k < count; ++k) {
      std::string name = "output " + std::to_string(k);
      requireJoinable(requireTensor(outputs[k], name.c_str()), name, input,
                      axis);
      splitLength += outputs[k]->shape[axis];
    }
    if (splitLength != input.shape[axis])
      fail("the outputs' sizes along axis " + std::to_string(axis) +
           " sum to " + std::to_string(splitLength) + ", but x " +
           formatShape(shapeOf(input)) + " has " +
           std::to_string(input.shape[axis]));
    Shape shape = shapeOf(input);
    int64_t outer = product(shape, 0, static_cast<size_t>(axis));
    int64_t inner = product(shape, static_cast<size_t>(axis) + 1, shape.size());
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
