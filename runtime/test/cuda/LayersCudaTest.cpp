//===- LayersCudaTest.cpp - Norms, softmax, cross-entropy, embedding ------===//

#include "CudaTestUtil.h"

using namespace tessera_test;

namespace {

/// The norm forward and backward against the CPU kernels; with
/// `withResidual`, the backward is the fused *_grad_add (dx = residual +
/// the gradient).
void checkLayerNorm(int32_t dtype, bool withParameters, bool rms, int64_t width,
                    int64_t batch = 3, bool withResidual = false) {
  SCOPED_TRACE("dtype " + std::to_string(dtype) + " parameters " +
               std::to_string(withParameters) + " rms " + std::to_string(rms) +
               " width " + std::to_string(width) + " batch " +
               std::to_string(batch) + " residual " +
               std::to_string(withResidual));
  Shape shape = {batch, 70, width}, rowShape = {width};
  Tensor x = randomTensor(dtype, shape, 1, -2.0f, 3.0f);
  Tensor scale = randomTensor(dtype, rowShape, 2, 0.5f, 1.5f);
  Tensor bias = randomTensor(dtype, rowShape, 3);
  Tensor dy = randomTensor(dtype, shape, 4);
  Tensor residual = randomTensor(dtype, shape, 5);
  Tensor y(dtype, shape), dx(dtype, shape), dscale(dtype, rowShape),
      dbias(dtype, rowShape);
  DeviceTensor gresidual(residual);
  const tessera_tensor *scaleArg = withParameters ? scale.get() : nullptr;
  DeviceTensor gx(x), gscale(scale), gbias(bias), gdy(dy), gy(dtype, shape),
      gdx(dtype, shape), gdscale(dtype, rowShape), gdbias(dtype, rowShape);
  const tessera_tensor *gscaleArg = withParameters ? gscale.get() : nullptr;
  if (rms) {
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_rms_norm(x.get(), scaleArg, y.get(), 2, 1e-5));
    tessera_tensor *dscaleArg = withParameters ? dscale.get() : nullptr;
    tessera_tensor *gdscaleArg = withParameters ? gdscale.get() : nullptr;
    EXPECT_CUDA_KERNEL_OK(
        tessera_cuda_rms_norm(gx.get(), gscaleArg, gy.get(), 2, 1e-5, nullptr));
    if (withResidual) {
      EXPECT_CPU_KERNEL_OK(tessera_cpu_rms_norm_grad_add(
          x.get(), scaleArg, dy.get(), residual.get(), dx.get(), dscaleArg, 2,
          1e-5));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_rms_norm_grad_add(
          gx.get(), gscaleArg, gdy.get(), gresidual.get(), gdx.get(),
          gdscaleArg, 2, 1e-5, nullptr));
    } else {
      EXPECT_CPU_KERNEL_OK(tessera_cpu_rms_norm_grad(
          x.get(), scaleArg, dy.get(), dx.get(), dscaleArg, 2, 1e-5));
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_rms_norm_grad(gx.get(), gscaleArg, gdy.get(), gdx.get(),
                                     gdscaleArg, 2, 1e-5, nullptr));
    }
  } else {
    EXPECT_CPU_KERNEL_OK(tessera_cpu_layer_norm(
        x.get(), scaleArg, withParameters ? bias.get() : nullptr, y.get(), 2,
        1e-5));
    tessera_tensor *dscaleArg = withParameters ? dscale.get() : nullptr;
    tessera_tensor *gdscaleArg = withParameters ? gdscale.get() : nullptr;
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_layer_norm(
        gx.get(), gscaleArg, withParameters ? gbias.get() : nullptr, gy.get(),
        2, 1e-5, nullptr));
    if (withResidual) {
      EXPECT_CPU_KERNEL_OK(tessera_cpu_layer_norm_grad_add(
          x.get(), scaleArg, dy.get(), residual.get(), dx.get(), dscaleArg,
          dbias.get(), 2, 1e-5));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_layer_norm_grad_add(
          gx.get(), gscaleArg, gdy.get(), gresidual.get(), gdx.get(),
          gdscaleArg, gdbias.get(), 2, 1e-5, nullptr));
    } else {
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_layer_norm_grad(x.get(), scaleArg, dy.get(), dx.get(),
                                      dscaleArg, dbias.get(), 2, 1e-5));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_layer_norm_grad(
          gx.get(), gscaleArg, gdy.get(), gdx.get(), gdscaleArg, gdbias.get(),
          2, 1e-5, nullptr));
    }
  }
  expectDeviceClean();
  double rtol = dtype == TESSERA_F32 ? 1e-4 : toleranceFor(dtype);
  expectTensorsNear(gy.download(), y, rtol, rtol, "norm y");
  expectTensorsNear(gdx.download(), dx, rtol, rtol, "norm dx");
  if (withParameters)
    expectTensorsNear(gdscale.download(), dscale, rtol, rtol, "norm dscale");
  if (!rms)
    expectTensorsNear(gdbias.download(), dbias, rtol, rtol, "norm dbias");
}

// Widths in whole 16-byte packs take the one-warp-a-row kernels up to 2048
// forward and 1024 backward (200: some lanes idle; 768, 1024: several packs
// a lane), and the wide-row kernels past that to 8192 (forward from 2056:
// 1536 and 2048 a pack a thread, some threads idle at 1536; 2056 and 4096
// two packs; 6144 four, some idle); 201 and 8200 the block-a-row ones.
constexpr int64_t kNormWidths[] = {200,  201,  768,  1024, 1536,
                                   2048, 2056, 4096, 6144, 8200};

TEST(LayersCuda, LayerNormForwardBackward) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16})
    for (bool parameters : {true, false})
      for (int64_t width : kNormWidths)
        checkLayerNorm(dtype, parameters, false, width);
}

// On the warp path to width 1024 the backward kernel sums the parameter
// gradients itself, each warp over several rows of its block's 32 and the
// block over its warps: 80 x 70 rows make 175 blocks, the last one short.
TEST(LayersCuda, NormParameterGradientsOverManyRows) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16})
    for (int64_t width : {int64_t{200}, int64_t{768}, int64_t{1024},
                          int64_t{2048}, int64_t{4096}}) {
      checkLayerNorm(dtype, true, false, width, 80);
      checkLayerNorm(dtype, true, true, width, 80);
    }
}

// The backward's residual add in the same kernel, every path.
TEST(LayersCuda, NormGradAddIsTheResidualPlusTheGradient) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16})
    for (int64_t width : kNormWidths)
      for (bool rms : {false, true})
        checkLayerNorm(dtype, true, rms, width, 3, /*withResidual=*/true);
  checkLayerNorm(TESSERA_BF16, true, false, 768, 80, /*withResidual=*/true);
}

TEST(LayersCuda, RmsNormForwardBackward) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16})
    for (bool parameters : {true, false})
      for (int64_t width : kNormWidths)
        checkLayerNorm(dtype, parameters, true, width);
}

// The parameter gradients sum over every row: on the warp path (768) and
// the wide-row path (1536, 2056, 4096) in 32-row chunks in the backward
// kernel, on the block path (8200) in 64-row chunks, then over the chunks.
// Repeated calls must give the same bits (f64 atomics across chunks did not).
TEST(LayersCuda, NormGradientsAreBitwiseDeterministic) {
  REQUIRE_GPU();
  struct Case {
    int32_t dtype;
    int64_t rows, width;
  };
  for (Case c : {Case{TESSERA_F32, 8192, 768}, Case{TESSERA_BF16, 8192, 768},
                 Case{TESSERA_BF16, 4096, 1536}, Case{TESSERA_F32, 4096, 2056},
                 Case{TESSERA_BF16, 4096, 4096}, Case{TESSERA_F32, 1024, 8200}})
    for (bool rms : {false, true}) {
      SCOPED_TRACE("dtype " + std::to_string(c.dtype) + " width " +
                   std::to_string(c.width) + " rms " + std::to_string(rms));
      Shape shape = {c.rows, c.width}, rowShape = {c.width};
      Tensor x = randomTensor(c.dtype, shape, 21, -2.0f, 3.0f);
      Tensor scale = randomTensor(c.dtype, rowShape, 22, 0.5f, 1.5f);
      Tensor dy = randomTensor(c.dtype, shape, 23);
      DeviceTensor gx(x), gscale(scale), gdy(dy);
      std::vector<Tensor> dxs, dscales, dbiases;
      for (int call = 0; call < 3; ++call) {
        DeviceTensor gdx(c.dtype, shape), gdscale(c.dtype, rowShape),
            gdbias(c.dtype, rowShape);
        if (rms)
          EXPECT_CUDA_KERNEL_OK(tessera_cuda_rms_norm_grad(
              gx.get(), gscale.get(), gdy.get(), gdx.get(), gdscale.get(), 1,
              1e-5, nullptr));
        else
          EXPECT_CUDA_KERNEL_OK(tessera_cuda_layer_norm_grad(
              gx.get(), gscale.get(), gdy.get(), gdx.get(), gdscale.get(),
              gdbias.get(), 1, 1e-5, nullptr));
        expectDeviceClean();
        dxs.push_back(gdx.download());
        dscales.push_back(gdscale.download());
        if (!rms)
          dbiases.push_back(gdbias.download());
      }
      for (int call = 1; call < 3; ++call) {
        expectSameBits(dxs[call], dxs[0], "norm dx");
        expectSameBits(dscales[call], dscales[0], "norm dscale");
        if (!rms)
          expectSameBits(dbiases[call], dbiases[0], "norm dbias");
      }
    }
}

TEST(LayersCuda, SoftmaxAlongAnyAxis) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    for (int64_t axis : {0, 1, 2}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " axis " +
                   std::to_string(axis));
      Shape shape = {4, 37, 300};
      Tensor x = randomTensor(dtype, shape, 5, -8.0f, 8.0f);
      Tensor dy = randomTensor(dtype, shape, 6);
      Tensor y(dtype, shape), dx(dtype, shape);
      EXPECT_CPU_KERNEL_OK(tessera_cpu_softmax(x.get(), y.get(), axis));
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_softmax_grad(y.get(), dy.get(), dx.get(), axis));
      DeviceTensor gx(x), gy(dtype, shape), gdy(dy), gdx(dtype, shape);
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_softmax(gx.get(), gy.get(), axis, nullptr));
      DeviceTensor gyReference(y); // the grad from the CPU's y, as the ABI says
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_softmax_grad(
          gyReference.get(), gdy.get(), gdx.get(), axis, nullptr));
      expectDeviceClean();
      double rtol = dtype == TESSERA_F32 ? 1e-5 : toleranceFor(dtype);
      expectTensorsNear(gy.download(), y, rtol, 1e-7, "softmax");
      expectTensorsNear(gdx.download(), dx, rtol * 10, 1e-6, "softmax_grad");
    }
  }
}

/// `dlogitsOffset` elements shift dlogits off the logits' 16-byte alignment
/// (the backward then stores element by element).
void checkCrossEntropy(int32_t dtype, int32_t targetType, int64_t classes,
                       size_t dlogitsOffset = 0) {
  SCOPED_TRACE("dtype " + std::to_string(dtype) + " targets " +
               std::to_string(targetType) + " classes " +
               std::to_string(classes) + " dlogits offset " +
               std::to_string(dlogitsOffset));
  int64_t rows = 37;
  Tensor logits = randomTensor(dtype, {rows, classes}, 7, -6.0f, 6.0f);
  std::vector<int64_t> targetValues(rows);
  for (int64_t row = 0; row < rows; ++row)
    targetValues[row] = row % 5 == 3 ? -100 : (row * 7919) % classes;
  Tensor targets = Tensor::integers({rows}, targetValues, targetType);
  Tensor dloss = Tensor::floats({}, {0.75f}, dtype);
  Tensor loss(dtype, {}), dlogits(dtype, {rows, classes});
  EXPECT_CPU_KERNEL_OK(
      tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), -100));
  EXPECT_CPU_KERNEL_OK(tessera_cpu_cross_entropy_grad(
      logits.get(), targets.get(), nullptr, dloss.get(), dlogits.get(), -100));
  DeviceTensor glogits(logits), gtargets(targets), gdloss(dloss),
      gloss(dtype, {}),
      gdlogits(dtype, {rows, classes},
               dlogitsOffset * tessera::cpu::dtypeSize(dtype));
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy(
      glogits.get(), gtargets.get(), nullptr, gloss.get(), -100, nullptr));
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy_grad(
      glogits.get(), gtargets.get(), nullptr, gdloss.get(), gdlogits.get(), -100,
      nullptr));
  // The fused call (the lowering's, when the gradient follows the loss):
  // the separate kernels' loss and gradient to the bit.
  DeviceTensor fusedLoss(dtype, {}),
      fusedDlogits(dtype, {rows, classes},
                   dlogitsOffset * tessera::cpu::dtypeSize(dtype));
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy_with_grad(
      glogits.get(), gtargets.get(), nullptr, gdloss.get(), fusedLoss.get(),
      fusedDlogits.get(), -100, nullptr));
  expectDeviceClean();
  double rtol = dtype == TESSERA_F32 ? 1e-5 : toleranceFor(dtype);
  expectTensorsNear(gloss.download(), loss, rtol, 0.0, "cross_entropy");
  expectTensorsNear(gdlogits.download(), dlogits, rtol, 1e-9,
                    "cross_entropy_grad");
  EXPECT_EQ(fusedLoss.download().values(), gloss.download().values());
  EXPECT_EQ(fusedDlogits.download().values(), gdlogits.download().values());
  // In place (the arena planner's choice when nothing reads the logits
  // afterwards): the same loss and gradient to the bit.
  if (dlogitsOffset == 0) {
    DeviceTensor inPlace(logits), inPlaceLoss(dtype, {});
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy_with_grad(
        inPlace.get(), gtargets.get(), nullptr, gdloss.get(), inPlaceLoss.get(),
        inPlace.get(), -100, nullptr));
    expectDeviceClean();
    EXPECT_EQ(inPlaceLoss.download().values(), gloss.download().values());
    EXPECT_EQ(inPlace.download().values(), gdlogits.download().values());
  }
}

TEST(LayersCuda, CrossEntropyAndGradient) {
  REQUIRE_GPU();
  checkCrossEntropy(TESSERA_F32, TESSERA_I64, 50);
  checkCrossEntropy(TESSERA_F32, TESSERA_I32, 5000);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 50257);
  // Rows shorter than the scalar head, rows past what the backward keeps in
  // registers, f16, and dlogits at another alignment than the logits.
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 3);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I32, 70001);
  checkCrossEntropy(TESSERA_F16, TESSERA_I64, 1001);
  checkCrossEntropy(TESSERA_F32, TESSERA_I64, 40003);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 50257, 1);
  // GPT-2's head padded to 50,304 classes (tess-build-training).
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 50304);
}

// Rows of the large vocabularies, most of each row past the block's shared
// memory cache (read from memory again for the gradient): Llama 3's and
// Qwen2's, an odd length (a scalar head and tail), Gemma's 256,000, the
// scalar-store path, and f32 rows of 300,001 classes.
TEST(LayersCuda, CrossEntropyOverLargeVocabularies) {
  REQUIRE_GPU();
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 128256);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I32, 151936);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 128257);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 256000);
  checkCrossEntropy(TESSERA_BF16, TESSERA_I64, 128256, 1);
  checkCrossEntropy(TESSERA_F32, TESSERA_I64, 300001);
}

TEST(LayersCuda, CrossEntropyWithEveryTargetIgnoredIsNaN) {
  REQUIRE_GPU();
  Tensor logits = randomTensor(TESSERA_F32, {3, 10}, 8);
  Tensor targets = Tensor::integers({3}, {-100, -100, -100});
  DeviceTensor glogits(logits), gtargets(targets), gloss(TESSERA_F32, {});
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy(
      glogits.get(), gtargets.get(), nullptr, gloss.get(), -100, nullptr));
  expectDeviceClean();
  EXPECT_TRUE(std::isnan(gloss.download().at(0)));
}

TEST(LayersCuda, CrossEntropyBadTargetIsADeviceError) {
  REQUIRE_GPU();
  Tensor logits = randomTensor(TESSERA_F32, {3, 10}, 8);
  Tensor targets = Tensor::integers({3}, {1, 10, 2});
  DeviceTensor glogits(logits), gtargets(targets), gloss(TESSERA_F32, {});
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy(
      glogits.get(), gtargets.get(), nullptr, gloss.get(), -100, nullptr));
  EXPECT_EQ(tessera_cuda_check_device_errors(nullptr), 1);
  std::string message = tessera_cuda_last_error();
  EXPECT_NE(message.find("index 10 at flat position 1 is outside [0, 10)"),
            std::string::npos)
      << message;
}

// Widths 24 and 520 (whole 16-byte packs a row: 3 packs, one a thread; 65
// packs, a warp looping over them) take the gradient's pack kernel, width
// 20 its element kernel.
TEST(LayersCuda, EmbeddingAndGradient) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16})
    for (int64_t width : {int64_t{24}, int64_t{520}, int64_t{20}}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " width " +
                   std::to_string(width));
      Tensor table = randomTensor(dtype, {50, width}, 9);
      // Repeated ids: the gradient must sum their rows.
      Tensor ids = Tensor::integers(
          {2, 6}, {3, 7, 3, 0, 49, 3, 7, 7, 1, 2, 3, 4}, TESSERA_I32);
      Tensor dy = randomTensor(dtype, {2, 6, width}, 10);
      Tensor y(dtype, {2, 6, width}), dtable(dtype, {50, width});
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_embedding(table.get(), ids.get(), y.get()));
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_embedding_grad(ids.get(), dy.get(), dtable.get()));
      DeviceTensor gtable(table), gids(ids), gdy(dy), gy(dtype, {2, 6, width}),
          gdtable(dtype, {50, width});
      EXPECT_CUDA_KERNEL_OK(
          tessera_cuda_embedding(gtable.get(), gids.get(), gy.get(), nullptr));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_embedding_grad(
          gids.get(), gdy.get(), gdtable.get(), nullptr));
      expectDeviceClean();
      expectTensorsEqual(gy.download(), y, "embedding");
      expectTensorsNear(gdtable.download(), dtable, toleranceFor(dtype), 1e-6,
                        "embedding_grad");
    }
}

/// `count` ids into `rows` rows with runs of every kind: id 7 half the
/// time (a run of many 64-entry tiles), id 8 exactly 64 times (the longest
/// run summed directly), id 9 exactly 65 times (the shortest split one),
/// and ids from [10, rows) for the rest, shuffled.
std::vector<int64_t> collidingIds(int64_t count, int64_t rows, uint32_t seed) {
  std::vector<int64_t> ids;
  for (int64_t n = 0; n < count / 2; ++n)
    ids.push_back(7);
  for (int64_t n = 0; n < 64; ++n)
    ids.push_back(8);
  for (int64_t n = 0; n < 65; ++n)
    ids.push_back(9);
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int64_t> rest(10, rows - 1);
  while (static_cast<int64_t>(ids.size()) < count)
    ids.push_back(rest(generator));
  std::shuffle(ids.begin(), ids.end(), generator);
  return ids;
}

// Thousands of positions share a few ids: repeated calls must give the same
// bits, and every row whose id occurs at most 64 times is summed exactly as
// the CPU sums it (f32, ascending positions), so it matches bit for bit.
TEST(LayersCuda, EmbeddingGradientIsBitwiseDeterministic) {
  REQUIRE_GPU();
  const int64_t rows = 300, tokens = 4096;
  std::vector<int64_t> idValues = collidingIds(tokens, rows, 31);
  Tensor ids = Tensor::integers({16, tokens / 16}, idValues, TESSERA_I32);
  std::vector<int64_t> occurrences(rows, 0);
  for (int64_t id : idValues)
    ++occurrences[id];
  // 96 and 520: the pack kernel (12 packs a row, and 65 for a warp of 32
  // threads); 90: the element kernel.
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16})
    for (int64_t width : {int64_t{96}, int64_t{520}, int64_t{90}}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " width " +
                   std::to_string(width));
      Tensor dy = randomTensor(dtype, {16, tokens / 16, width}, 32);
      Tensor dtable(dtype, {rows, width});
      EXPECT_CPU_KERNEL_OK(
          tessera_cpu_embedding_grad(ids.get(), dy.get(), dtable.get()));
      DeviceTensor gids(ids), gdy(dy), gdtable(dtype, {rows, width});
      std::vector<Tensor> results;
      for (int call = 0; call < 3; ++call) {
        EXPECT_CUDA_KERNEL_OK(tessera_cuda_embedding_grad(
            gids.get(), gdy.get(), gdtable.get(), nullptr));
        expectDeviceClean();
        results.push_back(gdtable.download());
      }
      for (int call = 1; call < 3; ++call)
        expectSameBits(results[call], results[0], "embedding_grad");
      // Long runs round differently from the CPU's one sequential sum (bf16
      // results by an ulp).
      expectTensorsNear(results[0], dtable, dtype == TESSERA_F32 ? 1e-4 : 1e-2,
                        1e-3, "embedding_grad");
      Tensor shortRuns(dtype, {rows, width}),
          shortRunsCpu(dtype, {rows, width});
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t j = 0; j < width; ++j) {
          bool shortRun = occurrences[row] <= 64;
          int64_t i = row * width + j;
          tessera::cpu::storeFloat(shortRuns.data(), dtype, i,
                                   shortRun ? results[0].at(i) : 0.0f);
          tessera::cpu::storeFloat(shortRunsCpu.data(), dtype, i,
                                   shortRun ? dtable.at(i) : 0.0f);
        }
      expectSameBits(shortRuns, shortRunsCpu, "embedding_grad short runs");
    }
}

TEST(LayersCuda, EmbeddingGradBadIdIsADeviceError) {
  REQUIRE_GPU();
  Tensor ids = Tensor::integers({3}, {0, 5, 0});
  Tensor dy = randomTensor(TESSERA_F32, {3, 4}, 33);
  DeviceTensor gids(ids), gdy(dy), gdtable(TESSERA_F32, {5, 4});
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_embedding_grad(gids.get(), gdy.get(),
                                                    gdtable.get(), nullptr));
  EXPECT_EQ(tessera_cuda_check_device_errors(nullptr), 1);
  std::string message = tessera_cuda_last_error();
  EXPECT_NE(message.find("tessera_cuda_embedding_grad: index 5 at flat "
                         "position 1 is outside [0, 5)"),
            std::string::npos)
      << message;
  // The bad position adds nothing; row 0 sums positions 0 and 2.
  Tensor dtable = gdtable.download();
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(dtable.at(j), dy.at(j) + dy.at(8 + j)) << j;
    for (int64_t row = 1; row < 5; ++row)
      EXPECT_EQ(dtable.at(row * 4 + j), 0.0f) << row << ", " << j;
  }
}

TEST(LayersCuda, EmbeddingBadIdIsADeviceError) {
  REQUIRE_GPU();
  Tensor table = randomTensor(TESSERA_F32, {5, 4}, 9);
  Tensor ids = Tensor::integers({3}, {0, 5, 1});
  DeviceTensor gtable(table), gids(ids), gy(TESSERA_F32, {3, 4});
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_embedding(gtable.get(), gids.get(), gy.get(), nullptr));
  EXPECT_EQ(tessera_cuda_check_device_errors(nullptr), 1);
  std::string message = tessera_cuda_last_error();
  EXPECT_NE(message.find("tessera_cuda_embedding: index 5 at flat position 1 "
                         "is outside [0, 5)"),
            std::string::npos)
      << message;
}

TEST(LayersCuda, GatherWithNegativeIndicesAndGradient) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_F16}) {
    Tensor x = randomTensor(dtype, {3, 8, 5}, 11);
    Tensor indices = Tensor::integers({2, 2}, {-1, 0, 7, -8});
    Tensor dy = randomTensor(dtype, {3, 2, 2, 5}, 12);
    Tensor y(dtype, {3, 2, 2, 5}), dx(dtype, {3, 8, 5});
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_gather(x.get(), indices.get(), y.get(), 1));
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_gather_grad(indices.get(), dy.get(), dx.get(), 1));
    DeviceTensor gx(x), gindices(indices), gdy(dy), gy(dtype, {3, 2, 2, 5}),
        gdx(dtype, {3, 8, 5});
    EXPECT_CUDA_KERNEL_OK(
        tessera_cuda_gather(gx.get(), gindices.get(), gy.get(), 1, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_gather_grad(gindices.get(), gdy.get(),
                                                   gdx.get(), 1, nullptr));
    expectDeviceClean();
    expectTensorsEqual(gy.download(), y, "gather");
    expectTensorsNear(gdx.download(), dx, toleranceFor(dtype), 1e-6,
                      "gather_grad");
  }
}

// gather's gradient with an outer dim, negative indices (-1 and 39 name the
// same row and interleave) and long runs: the same bits on every call.
TEST(LayersCuda, GatherGradientIsBitwiseDeterministic) {
  REQUIRE_GPU();
  const int64_t outer = 5, length = 40, inner = 3, count = 2000;
  std::vector<int64_t> indexValues;
  std::mt19937 generator(41);
  std::uniform_int_distribution<int64_t> anyIndex(-length, length - 1);
  for (int64_t n = 0; n < count; ++n)
    indexValues.push_back(n % 3 == 0   ? -1
                          : n % 3 == 1 ? 39
                                       : anyIndex(generator));
  Tensor indices = Tensor::integers({count}, indexValues);
  for (int32_t dtype : {TESSERA_F32, TESSERA_F16}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    Tensor dy = randomTensor(dtype, {outer, count, inner}, 42);
    Tensor dx(dtype, {outer, length, inner});
    EXPECT_CPU_KERNEL_OK(
        tessera_cpu_gather_grad(indices.get(), dy.get(), dx.get(), 1));
    DeviceTensor gindices(indices), gdy(dy);
    std::vector<Tensor> results;
    for (int call = 0; call < 3; ++call) {
      DeviceTensor gdx(dtype, {outer, length, inner});
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_gather_grad(gindices.get(), gdy.get(),
                                                     gdx.get(), 1, nullptr));
      expectDeviceClean();
      results.push_back(gdx.download());
    }
    for (int call = 1; call < 3; ++call)
      expectSameBits(results[call], results[0], "gather_grad");
    expectTensorsNear(results[0], dx, dtype == TESSERA_F32 ? 1e-4 : 2e-3,
                      dtype == TESSERA_F32 ? 1e-4 : 2e-2, "gather_grad");
  }
}

// count_targets on the GPU: blocks of a vocabulary-sized head, each divided
// by the whole batch's count, against the CPU's blocks, and their losses
// summing to the batch's mean.
TEST(LayersCuda, CrossEntropyBlocksCountOverTheBatch) {
  REQUIRE_GPU();
  int64_t rows = 64, classes = 50257, blocks = 4, blockRows = rows / blocks;
  Tensor logits = randomTensor(TESSERA_BF16, {rows, classes}, 9, -6.0f, 6.0f);
  std::vector<int64_t> targetValues(rows);
  for (int64_t row = 0; row < rows; ++row)
    targetValues[row] = row % 3 == 1 ? -100 : (row * 7919) % classes;
  Tensor targets = Tensor::integers({rows}, targetValues);
  Tensor dloss = Tensor::floats({}, {1.0f});
  Tensor wholeLoss(TESSERA_F32, {});
  EXPECT_CPU_KERNEL_OK(tessera_cpu_cross_entropy(
      logits.get(), targets.get(), nullptr, wholeLoss.get(), -100));
  std::vector<float> allLogits = logits.values();
  DeviceTensor gtargets(targets), gdloss(dloss);
  double blockSum = 0;
  for (int64_t block = 0; block < blocks; ++block) {
    SCOPED_TRACE("block " + std::to_string(block));
    auto first = allLogits.begin() + block * blockRows * classes;
    Tensor rowLogits = Tensor::floats(
        {blockRows, classes},
        std::vector<float>(first, first + blockRows * classes), TESSERA_BF16);
    Tensor rowTargets = Tensor::integers(
        {blockRows},
        std::vector<int64_t>(targetValues.begin() + block * blockRows,
                             targetValues.begin() + (block + 1) * blockRows));
    Tensor loss(TESSERA_F32, {}), dlogits(TESSERA_BF16, {blockRows, classes});
    EXPECT_CPU_KERNEL_OK(tessera_cpu_cross_entropy_with_grad(
        rowLogits.get(), rowTargets.get(), targets.get(), dloss.get(),
        loss.get(), dlogits.get(), -100));
    DeviceTensor glogits(rowLogits), growTargets(rowTargets),
        gloss(TESSERA_F32, {}), gdlogits(TESSERA_BF16, {blockRows, classes});
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_cross_entropy_with_grad(
        glogits.get(), growTargets.get(), gtargets.get(), gdloss.get(),
        gloss.get(), gdlogits.get(), -100, nullptr));
    expectDeviceClean();
    double rtol = toleranceFor(TESSERA_BF16);
    expectTensorsNear(gloss.download(), loss, 1e-5, 0.0, "block loss");
    expectTensorsNear(gdlogits.download(), dlogits, rtol, 1e-9,
                      "block dlogits");
    blockSum += gloss.download().at(0);
  }
  EXPECT_NEAR(blockSum, wholeLoss.at(0), 1e-5 * std::fabs(wholeLoss.at(0)));
}

} // namespace
