//===- TraceCudaTest.cpp - --trace on the GPU: CUPTI's kernels line up ----===//
//
// Runs a small workload (uploads, a memset, a cuBLASLt GEMM, one of our own
// templated kernels, a download) inside a traced step and checks the file:
// the kernels, copies and memset are there with demangled names on named
// stream tracks, and their timestamps, mapped from CUPTI's clock onto the
// host's, fall inside the host range that launched and waited for them.
// Work after the traced steps is not recorded. Label gpu: skips without a
// GPU, fails when CUPTI cannot be used there (which is what it checks).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "Json.h"
#include "Trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace tessera::train;
using namespace tessera_test;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

/// The workload: every kind of activity the trace collects.
void runWorkload() {
  Tensor a = randomTensor(TESSERA_F32, {64, 96}, 1);
  Tensor b = randomTensor(TESSERA_F32, {96, 32}, 2);
  DeviceTensor da(a), db(b), product(TESSERA_F32, {64, 32}),
      negated(TESSERA_F32, {64, 32});
  ASSERT_EQ(cudaMemsetAsync(product.get()->data, 0, 64 * 32 * sizeof(float),
                            nullptr),
            cudaSuccess);
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_matmul(da.get(), db.get(), product.get(), 0, 0, nullptr));
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_unary(TESSERA_NEG, product.get(), negated.get(), nullptr));
  Tensor result = negated.download();
  EXPECT_EQ(result.count(), 64 * 32);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(TraceCuda, KernelsCopiesAndMemsetsLineUpWithTheHostRange) {
  REQUIRE_GPU();
  // The CUDA context before tracing starts, as in a run (the backend makes
  // it before the first step).
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);
  const std::string path = ::testing::TempDir() + "tessera_trace_gpu.json";
  TraceOptions options;
  options.file = path;
  options.firstStep = 1;
  options.lastStep = 1;
  options.captureGpu = true;
  options.messages = nullptr;
  {
    Trace trace(options);
    ASSERT_EQ(trace.getGpuMissingReason(), "");
    {
      TraceStep traced(trace, 1);
      TraceRange range(trace, "workload");
      runWorkload();
    }
    // Step 2 is not traced: its kernels must not appear.
    {
      TraceStep traced(trace, 2);
      runWorkload();
    }
    trace.finish();
    ASSERT_EQ(trace.getGpuMissingReason(), "");
  }

  JsonValue file = parseJson(readFile(path), "trace");
  std::string describe = file.find("otherData")->find("gpu_activity")->string;
  EXPECT_EQ(describe.rfind("CUPTI ", 0), 0u) << describe;
  std::printf("gpu_activity: %s\n", describe.c_str());

  double rangeStart = -1, rangeEnd = -1;
  std::map<int64_t, std::string> threadNames;
  for (const JsonValue &event : file.find("traceEvents")->array) {
    if (event.find("name")->string == "workload") {
      rangeStart = event.find("ts")->number;
      rangeEnd = rangeStart + event.find("dur")->number;
    }
    if (event.find("name")->string == "thread_name")
      threadNames[static_cast<int64_t>(event.find("tid")->number)] =
          event.find("args")->find("name")->string;
  }
  ASSERT_GT(rangeStart, 0);

  int kernels = 0, unaryKernels = 0, gemms = 0, uploads = 0, downloads = 0,
      memsets = 0;
  // The host and device clocks are matched to within a few microseconds;
  // allow 50.
  const double slack = 50;
  for (const JsonValue &event : file.find("traceEvents")->array) {
    const JsonValue *category = event.find("cat");
    if (!category || category->string == "host" || category->string == "step")
      continue;
    const std::string &name = event.find("name")->string;
    double start = event.find("ts")->number;
    double duration = event.find("dur")->number;
    int64_t track = static_cast<int64_t>(event.find("tid")->number);
    SCOPED_TRACE(name);
    EXPECT_GE(track, kStreamTrackBase);
    EXPECT_EQ(threadNames[track].rfind("GPU ", 0), 0u) << threadNames[track];
    EXPECT_GE(duration, 0);
    EXPECT_GE(start, rangeStart - slack);
    EXPECT_LE(start + duration, rangeEnd + slack);
    EXPECT_EQ(name.rfind("_Z", 0), std::string::npos) << "not demangled";
    if (category->string == "kernel") {
      ++kernels;
      // Elementwise.cu's kernel, demangled from _ZN12_GLOBAL__N_1...
      if (name.find("unaryKernel<float>") != std::string::npos)
        ++unaryKernels;
      if (name.find("gemm") != std::string::npos ||
          name.find("sm90") != std::string::npos)
        ++gemms;
    } else if (name == "memcpy HtoD") {
      ++uploads;
    } else if (name == "memcpy DtoH") {
      ++downloads;
    } else if (category->string == "memset") {
      ++memsets;
    }
  }
  std::printf("traced: %d kernels (%d unary, %d gemm), %d uploads, "
              "%d downloads, %d memsets; host range %.3f us\n",
              kernels, unaryKernels, gemms, uploads, downloads, memsets,
              rangeEnd - rangeStart);
  EXPECT_GE(kernels, 2);
  EXPECT_GE(unaryKernels, 1);
  EXPECT_GE(gemms, 1);
  EXPECT_GE(uploads, 2);
  EXPECT_GE(downloads, 1);
  // DeviceTensor clears each output with cudaMemset, and the workload
  // adds one of its own.
  EXPECT_GE(memsets, 1);
}

} // namespace
