//===- DataMovementCudaTest.cpp - Copies, transposes, slices, joins -------===//

#include "CudaTestUtil.h"
#include "TensorAccess.h"

using namespace tessera_test;

namespace {

const int32_t kTypes[] = {TESSERA_F32, TESSERA_BF16, TESSERA_F64, TESSERA_I8};

Tensor sequence(int32_t dtype, const Shape &shape) {
  std::vector<int64_t> values(static_cast<size_t>(countOf(shape)));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int64_t>(i % 101) - 50;
  return Tensor::integers(shape, values, dtype);
}

TEST(DataMovementCuda, CopyTransposeBroadcast) {
  REQUIRE_GPU();
  for (int32_t dtype : kTypes) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    Tensor x = sequence(dtype, {2, 3, 4, 5});
    DeviceTensor gx(x);

    DeviceTensor copied(dtype, {6, 20});
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_copy(gx.get(), copied.get(), nullptr));
    expectTensorsEqual(copied.download(), x, "copy");

    int64_t permutation[] = {2, 0, 3, 1};
    Tensor expected(dtype, {4, 2, 5, 3});
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_transpose(x.get(), expected.get(), permutation));
    DeviceTensor transposed(dtype, {4, 2, 5, 3});
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_transpose(gx.get(), transposed.get(),
                                                 permutation, nullptr));
    expectTensorsEqual(transposed.download(), expected, "transpose");

    Tensor small = sequence(dtype, {3, 1, 5});
    Tensor broadcastExpected(dtype, {2, 3, 4, 5});
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_broadcast(small.get(), broadcastExpected.get()));
    DeviceTensor gsmall(small), broadcasted(dtype, {2, 3, 4, 5});
    EXPECT_CUDA_KERNEL_OK(
        tessera_cuda_broadcast(gsmall.get(), broadcasted.get(), nullptr));
    expectTensorsEqual(broadcasted.download(), broadcastExpected, "broadcast");
    expectDeviceClean();
  }
}

/// Transposes on the GPU (the data `offsetElements` past 16-byte alignment)
/// and on the CPU and expects the same bytes.
void checkTranspose(int32_t dtype, const Shape &shape,
                    const std::vector<int64_t> &permutation,
                    size_t offsetElements = 0) {
  SCOPED_TRACE("dtype " + std::to_string(dtype) + " shape " +
               tessera::cpu::formatShape(shape) + " offset " +
               std::to_string(offsetElements));
  size_t offsetBytes = offsetElements * tessera::cpu::dtypeSize(dtype);
  Shape outputShape;
  for (int64_t dim : permutation)
    outputShape.push_back(shape[dim]);
  Tensor x = sequence(dtype, shape);
  Tensor expected(dtype, outputShape);
  EXPECT_CPU_KERNEL_OK(
      tessera_cpu_transpose(x.get(), expected.get(), permutation.data()));
  DeviceTensor gx(x, offsetBytes), gy(dtype, outputShape, offsetBytes);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_transpose(gx.get(), gy.get(),
                                               permutation.data(), nullptr));
  expectDeviceClean();
  expectTensorsEqual(gy.download(), expected, "transpose");
}

// Attention's head transposes keep the innermost dim: rows of 64 bf16 move
// as 16-byte words; odd row lengths and shifted pointers take narrower words.
TEST(DataMovementCuda, TransposeKeepingTheInnermostDim) {
  REQUIRE_GPU();
  for (int32_t dtype : kTypes) {
    checkTranspose(dtype, {2, 9, 3, 64}, {0, 2, 1, 3});
    checkTranspose(dtype, {2, 3, 9, 64}, {0, 2, 1, 3});
    checkTranspose(dtype, {2, 5, 3, 7}, {0, 2, 1, 3});
    checkTranspose(dtype, {3, 4, 12}, {1, 0, 2});
    checkTranspose(dtype, {2, 9, 3, 64}, {0, 2, 1, 3}, 1);
    checkTranspose(dtype, {2, 9, 3, 64}, {0, 2, 1, 3}, 4);
    checkTranspose(dtype, {1, 1, 1}, {2, 0, 1});
  }
}

// Transposes that move the innermost dim go through shared-memory tiles:
// sizes that are not multiples of the 32-wide tile, and batches of them.
TEST(DataMovementCuda, TransposeMovingTheInnermostDim) {
  REQUIRE_GPU();
  for (int32_t dtype : kTypes) {
    checkTranspose(dtype, {37, 45}, {1, 0});
    checkTranspose(dtype, {3, 33, 70}, {0, 2, 1});
    checkTranspose(dtype, {5, 2, 31, 3}, {3, 1, 0, 2});
    checkTranspose(dtype, {64, 1, 3}, {2, 1, 0}, 1);
  }
}

/// slice and slice_grad of a `sequence` tensor on the GPU against the CPU.
void checkSliceAndSliceGrad(int32_t dtype, const Shape &shape,
                            const std::vector<int64_t> &starts,
                            const std::vector<int64_t> &strides,
                            const Shape &sliceShape) {
  SCOPED_TRACE("dtype " + std::to_string(dtype) + " shape " +
               tessera::cpu::formatShape(shape));
  Tensor x = sequence(dtype, shape);
  Tensor expected(dtype, sliceShape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_slice(x.get(), expected.get(),
                                         starts.data(), strides.data()));
  DeviceTensor gx(x), sliced(dtype, sliceShape);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_slice(gx.get(), sliced.get(),
                                           starts.data(), strides.data(),
                                           nullptr));
  expectTensorsEqual(sliced.download(), expected, "slice");

  Tensor dy = sequence(dtype, sliceShape);
  Tensor dxExpected(dtype, shape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_slice_grad(dy.get(), dxExpected.get(),
                                              starts.data(), strides.data()));
  DeviceTensor gdy(dy), gdx(dtype, shape);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_slice_grad(gdy.get(), gdx.get(),
                                                starts.data(), strides.data(),
                                                nullptr));
  expectTensorsEqual(gdx.download(), dxExpected, "slice_grad");
  expectDeviceClean();
}

TEST(DataMovementCuda, SliceAndSliceGrad) {
  REQUIRE_GPU();
  for (int32_t dtype : kTypes)
    checkSliceAndSliceGrad(dtype, {6, 7, 8}, {1, 0, 2}, {2, 3, 1}, {3, 3, 5});
}

// Row copies whose strided side starts at an odd element (a slice's base
// offset), gathered by slice and scattered by slice_grad.
TEST(DataMovementCuda, SliceRowsAtUnalignedOffsets) {
  REQUIRE_GPU();
  for (int32_t dtype : kTypes)
    checkSliceAndSliceGrad(dtype, {5, 64}, {1, 1}, {1, 1}, {4, 56});
}

TEST(DataMovementCuda, SliceOutOfBoundsIsAnError) {
  REQUIRE_GPU();
  DeviceTensor x(TESSERA_F32, {4}), y(TESSERA_F32, {3});
  int64_t starts[] = {2}, strides[] = {1};
  EXPECT_NE(tessera_cuda_slice(x.get(), y.get(), starts, strides, nullptr), 0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("do not fit"),
            std::string::npos);
}

TEST(DataMovementCuda, ConcatAndSplit) {
  REQUIRE_GPU();
  for (int32_t dtype : kTypes) {
    for (int64_t axis : {0, 1, 2}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " axis " +
                   std::to_string(axis));
      Shape shapes[3] = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
      shapes[1][axis] = 1;
      shapes[2][axis] = 5;
      Tensor a = sequence(dtype, shapes[0]), b = sequence(dtype, shapes[1]),
             c = sequence(dtype, shapes[2]);
      Shape joined = {2, 3, 4};
      joined[axis] = shapes[0][axis] + shapes[1][axis] + shapes[2][axis];
      const tessera_tensor *inputs[] = {a.get(), b.get(), c.get()};
      Tensor expected(dtype, joined);
      EXPECT_CPU_KERNEL_OK(tessera_cpu_concat(inputs, 3, expected.get(), axis));
      DeviceTensor ga(a), gb(b), gc(c), gy(dtype, joined);
      const tessera_tensor *deviceInputs[] = {ga.get(), gb.get(), gc.get()};
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_concat(deviceInputs, 3, gy.get(), axis, nullptr));
      expectTensorsEqual(gy.download(), expected, "concat");

      DeviceTensor sa(dtype, shapes[0]), sb(dtype, shapes[1]),
          sc(dtype, shapes[2]);
      tessera_tensor *outputs[] = {sa.get(), sb.get(), sc.get()};
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_split(gy.get(), outputs, 3, axis, nullptr));
      expectTensorsEqual(sa.download(), a, "split 0");
      expectTensorsEqual(sb.download(), b, "split 1");
      expectTensorsEqual(sc.download(), c, "split 2");
      expectDeviceClean();
    }
  }
}

} // namespace
