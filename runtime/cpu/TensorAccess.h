//===- TensorAccess.h - Checking, indexing and viewing tensors --*- C++ -*-===//
//
// Helpers shared by every kernel, so that each kernel file reads as its math:
// - argument checks that throw KernelError with the shapes in the message
//   (the compiler checked shapes already; these catch a wrong call cheaply
//   instead of corrupting memory);
// - StridedWalker, which visits a shape in row-major order while keeping one
//   linear offset per operand (stride 0 on a broadcast dim): the single
//   mechanism behind broadcasting, transposes, slices and reductions;
// - FloatInput / FloatOutput, which give a kernel a plain `float *` whatever
//   the storage type: f32 tensors are used in place, other float types are
//   converted into scratch once on the way in and rounded once on the way out
//   (so a bf16 kernel computes exactly what the f32 kernel computes on the
//   same values, then rounds).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_TENSORACCESS_H
#define TESSERA_RUNTIME_CPU_TENSORACCESS_H

#include "tessera/runtime/cpu_kernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::cpu {

using Shape = std::vector<int64_t>;

Shape shapeOf(const tessera_tensor &tensor);
int64_t elementCount(const tessera_tensor &tensor);
int64_t product(const Shape &shape, size_t begin, size_t end);
/// Row-major strides, in elements.
Shape rowMajorStrides(const Shape &shape);
/// "[2, 32, 64]".
std::string formatShape(const Shape &shape);
/// The multi-index of `linearIndex` in `shape`, formatted like a shape.
std::string formatPosition(const Shape &shape, int64_t linearIndex);

/// Checks that `tensor` is non-null and well formed (rank in [0, 8], known
/// dtype, non-negative dims, data present when it has elements).
const tessera_tensor &requireTensor(const tessera_tensor *tensor,
                                    const char *name);
tessera_tensor &requireTensor(tessera_tensor *tensor, const char *name);
void requireFloatType(const tessera_tensor &tensor, const char *name);
/// I32 or I64: the index types of embedding, gather and cross_entropy.
void requireIndexType(const tessera_tensor &tensor, const char *name);
void requireSameDtype(const tessera_tensor &a, const char *nameA,
                      const tessera_tensor &b, const char *nameB);
void requireShape(const tessera_tensor &tensor, const Shape &expected,
                  const char *name);
/// `tensor` has `like`'s shape, then its dtype (the messages name both).
void requireLike(const tessera_tensor &tensor, const char *name,
                 const tessera_tensor &like, const char *likeName);
/// Checks 0 <= axis < rank.
void requireAxis(int64_t axis, int32_t rank, const char *what);
/// Checks that rows [first, first + rows) are a block of a table of
/// `total` rows (a vocabulary-parallel rank's, rows_axis).
void requireRowBlock(int64_t first, int64_t rows, int64_t total);

/// Strides that read `input` at the positions of `outputShape` under numpy
/// broadcasting (0 where a dim stretches); fails if it does not broadcast.
Shape broadcastStrides(const tessera_tensor &input, const char *name,
                       const Shape &outputShape);

/// Element `index` of an I32/I64 tensor.
int64_t loadIndexValue(const tessera_tensor &tensor, int64_t index);

/// Visits every index of `shape` in row-major order, keeping one offset per
/// operand: offset(k) = sum over dims of index[d] * strides[k][d].
class StridedWalker {
public:
  StridedWalker(Shape walkedShape, std::vector<Shape> operandStrides);
  int64_t offset(size_t operand) const { return offsets[operand]; }
  const Shape &index() const { return position; }
  /// Moves to the next index (wrapping to all zeros after the last).
  void advance();

private:
  Shape shape;
  std::vector<Shape> strides;
  Shape position;
  std::vector<int64_t> offsets;
};

/// A read-only f32 view of a float tensor (a converted copy unless f32).
class FloatInput {
public:
  FloatInput(const tessera_tensor &tensor, const char *name);
  // `values` may point into `converted`: copying would leave it pointing into
  // the source, so only moves (which keep a vector's buffer) are allowed.
  FloatInput(FloatInput &&other) noexcept;
  FloatInput(const FloatInput &) = delete;
  FloatInput &operator=(const FloatInput &) = delete;
  FloatInput &operator=(FloatInput &&) = delete;
  const float *data() const { return values; }
  float operator[](int64_t index) const { return values[index]; }

private:
  std::vector<float> converted;
  const float *values;
};

/// An f32 destination for a float tensor. Kernels write data(); commit()
/// rounds it into the tensor's storage when that is not f32. With
/// `loadCurrent`, data() starts with the tensor's current values (in-place
/// updates); otherwise its contents are unspecified until written.
class FloatOutput {
public:
  FloatOutput(tessera_tensor &tensor, const char *name,
              bool loadCurrent = false);
  FloatOutput(const FloatOutput &) = delete;
  FloatOutput &operator=(const FloatOutput &) = delete;
  float *data() { return values; }
  float &operator[](int64_t index) { return values[index]; }
  void fill(float value);
  void commit();

private:
  tessera_tensor &target;
  std::vector<float> scratch;
  float *values;
};

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_TENSORACCESS_H
