//===- SafetensorsTest.cpp - safetensors files and checkpoint matching ----===//

#include "Safetensors.h"
#include "Checkpoint.h"
#include "Json.h"
#include "TrainError.h"
#include "TrainTestSupport.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <csignal>
#include <cstring>
#include <dirent.h>
#include <sys/resource.h>

using namespace tessera::train;
using namespace tessera_train_test;

namespace {

std::string readError(const std::string &path) {
  try {
    readSafetensors(path);
  } catch (const TrainError &error) {
    return error.what();
  }
  return "";
}

/// A safetensors file from a header string and raw data.
void writeRaw(const std::string &path, const std::string &header,
              const std::string &data) {
  uint64_t length = header.size();
  writeBytes(path, std::string(reinterpret_cast<const char *>(&length), 8) +
                       header + data);
}

std::vector<std::string> listDirectory(const std::string &directory) {
  std::vector<std::string> names;
  DIR *listing = opendir(directory.c_str());
  while (dirent *entry = readdir(listing))
    if (entry->d_name[0] != '.')
      names.push_back(entry->d_name);
  closedir(listing);
  return names;
}

// Tests that every dtype, the shapes (including scalars and empty tensors),
// the bytes and the metadata survive a write and a read.
TEST(Safetensors, RoundTrip) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  std::string path = directory + "/t.safetensors";
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 0.0f, 1e-30f, -7.0f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80};
  std::vector<uint16_t> f16 = {0x3c00, 0xfc00};
  std::vector<int64_t> i64 = {-1, INT64_MAX, 42};
  float scalar = 9.5f;
  writeSafetensors(path,
                   {{"a.weight", TESSERA_F32, {2, 3}, f32.data()},
                    {"b \"quoted\" \\ name", TESSERA_BF16, {3}, bf16.data()},
                    {"c", TESSERA_F16, {2, 1}, f16.data()},
                    {"d", TESSERA_I64, {3}, i64.data()},
                    {"scalar", TESSERA_F32, {}, &scalar},
                    {"empty", TESSERA_F32, {0, 4}, nullptr}},
                   {{"step", "12"}, {"note", "line\nbreak"}});

  std::string bytes = readBytes(path);
  uint64_t headerLength;
  std::memcpy(&headerLength, bytes.data(), 8);
  EXPECT_EQ((8 + headerLength) % 8, 0u) << "data must start 8-byte aligned";
  EXPECT_EQ(bytes[8], '{');

  SafetensorsFile file = readSafetensors(path);
  ASSERT_EQ(file.tensors.size(), 6u);
  EXPECT_EQ(file.metadata.at("step"), "12");
  EXPECT_EQ(file.metadata.at("note"), "line\nbreak");
  const LoadedTensor *a = file.find("a.weight");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->dtype, TESSERA_F32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(a->bytes.data(), f32.data(), 24), 0);
  const LoadedTensor *b = file.find("b \"quoted\" \\ name");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->dtype, TESSERA_BF16);
  EXPECT_EQ(std::memcmp(b->bytes.data(), bf16.data(), 6), 0);
  EXPECT_EQ(file.find("c")->dtype, TESSERA_F16);
  EXPECT_EQ(std::memcmp(file.find("d")->bytes.data(), i64.data(), 24), 0);
  EXPECT_TRUE(file.find("scalar")->shape.empty());
  EXPECT_EQ(file.find("empty")->bytes.size(), 0u);
  // Data in file order, which is the order written.
  EXPECT_EQ(file.tensors.front().name, "a.weight");
}

// Tests that damaged and foreign files are rejected with the file and the
// tensor named.
TEST(Safetensors, ReadErrors) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  std::string path = directory + "/bad.safetensors";
  EXPECT_NE(readError(directory + "/missing.safetensors")
                .find("missing.safetensors: No such file"),
            std::string::npos);

  writeBytes(path, "abc");
  EXPECT_NE(readError(path).find("shorter than the 8-byte header length"),
            std::string::npos);

  uint64_t huge = 1u << 20;
  writeBytes(path,
             std::string(reinterpret_cast<const char *>(&huge), 8) + "{}");
  EXPECT_NE(readError(path).find("does not fit"), std::string::npos);

  writeRaw(path, "{\"x\": {\"dtype\": \"F32\", ", "");
  EXPECT_NE(readError(path).find("malformed JSON at byte"), std::string::npos);

  writeRaw(path, R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
           "a");
  EXPECT_NE(readError(path).find("tensor 'x': unsupported dtype 'U8'"),
            std::string::npos);

  writeRaw(path, R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
           "abcd");
  EXPECT_NE(readError(path).find("tensor 'x': data_offsets [0, 8] lie outside"),
            std::string::npos);

  writeRaw(path, R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
           "abcdefgh");
  EXPECT_NE(readError(path).find("span 8 bytes but F32 of this shape needs 12"),
            std::string::npos);

  writeRaw(path, R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})",
           "");
  EXPECT_NE(readError(path).find("non-negative integers"), std::string::npos);

  writeRaw(path, R"({"__metadata__":{"step":3}})", "");
  EXPECT_NE(readError(path).find("value of 'step' is not a string"),
            std::string::npos);

  writeRaw(path, R"([1, 2])", "");
  EXPECT_NE(readError(path).find("not a safetensors file"), std::string::npos);

  // The tensors must tile the data: no overlap, no gap, nothing after.
  writeRaw(path,
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           "abcdefghijkl");
  EXPECT_NE(readError(path).find("tensor 'b' (data_offsets [4, 12]) overlaps "
                                 "tensor 'a', which ends at byte 8"),
            std::string::npos)
      << readError(path);
  writeRaw(path,
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
           "abcdefghijkl");
  EXPECT_NE(readError(path).find("bytes 4 to 8 before tensor 'b' "
                                 "(data_offsets [8, 12]) belong to no tensor"),
            std::string::npos)
      << readError(path);
  writeRaw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           "abcdefgh");
  EXPECT_NE(readError(path).find("the last 4 data bytes belong to no tensor"),
            std::string::npos)
      << readError(path);
  // Zero-size tensors share an offset with their neighbour.
  writeRaw(path,
           R"({"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           "abcd");
  EXPECT_EQ(readError(path), "");

  // Only regular files are read: a directory, a FIFO (which would block a
  // plain open forever) and /dev/zero (an endless read) are named as such.
  EXPECT_NE(readError(directory).find(": a directory, not a regular file"),
            std::string::npos)
      << readError(directory);
  std::string fifo = directory + "/pipe.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(readError(fifo).find(
                "pipe.safetensors: a FIFO (named pipe), not a regular file"),
            std::string::npos)
      << readError(fifo);
  EXPECT_NE(readError("/dev/zero")
                .find("/dev/zero: a character device, not a regular file"),
            std::string::npos)
      << readError("/dev/zero");
}

// Tests that a shape whose byte count wraps around 64 bits is refused rather
// than read as a tiny tensor with an astronomic shape (2^61 + 1 F64 elements
// times 8 bytes is 8 modulo 2^64, which matched the offsets; whoever then
// walked the shape read far past the 8 bytes).
TEST(Safetensors, ShapeWhoseByteCountWrapsIsRefused) {
  TemporaryDirectory temporary;
  std::string path = temporary.getPath() + "/wrap.safetensors";
  writeRaw(path,
           R"({"x":{"dtype":"F64","shape":[2305843009213693953],)"
           R"("data_offsets":[0,8]}})",
           "abcdefgh");
  EXPECT_NE(readError(path).find(
                "tensor 'x': shape describes more data than the file holds"),
            std::string::npos)
      << readError(path);
  // The same with the count in the last of two dimensions (I32: 2^62 + 1).
  writeRaw(path,
           R"({"x":{"dtype":"I32","shape":[1, 4611686018427387905],)"
           R"("data_offsets":[0,4]}})",
           "abcd");
  EXPECT_NE(readError(path).find("shape describes more data"),
            std::string::npos)
      << readError(path);
}

// Tests that a checkpoint's numbers are read whole or refused: a NUL inside
// the JSON string ("3\u0000junk" read as 3), a negative seed (read as 2^64 -
// 1), a too long one (clamped) and an infinite loss scale (which would skip
// every fp16 step) used to be accepted.
TEST(Checkpoint, MetadataNumbersMustBeWhole) {
  TemporaryDirectory temporary;
  std::string path = temporary.getPath() + "/checkpoint_00000001.safetensors";
  static const tessera_tensor_info parameters[] = {{"w", TESSERA_F32, 1, {2}}};
  tessera_program program{};
  program.model_name = "tiny.onnx";
  program.parameter_count = 1;
  program.parameters = parameters;
  TrainingState state;
  allocateState(program, state);
  state.seed = 7;
  state.step = 3;
  saveCheckpoint(path, program, state);
  SafetensorsFile saved = readSafetensors(path);

  // The saved checkpoint with one metadata value replaced.
  auto loadError = [&](const std::string &key, const std::string &value) {
    std::map<std::string, std::string> metadata = saved.metadata;
    metadata[key] = value;
    std::vector<TensorView> views;
    for (const LoadedTensor &tensor : saved.tensors)
      views.push_back(
          {tensor.name, tensor.dtype, tensor.shape, tensor.bytes.data()});
    writeSafetensors(path, views, metadata);
    try {
      TrainingState loaded;
      allocateState(program, loaded);
      loadCheckpoint(path, program, loaded);
    } catch (const TrainError &error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_EQ(loadError("step", "3"), "");
  EXPECT_NE(loadError("step", std::string("3\0junk", 6)).find("'step' = '3"),
            std::string::npos);
  EXPECT_NE(loadError("seed", "-1").find("'seed' = '-1' is not a non-negative"),
            std::string::npos);
  EXPECT_NE(loadError("seed", "99999999999999999999999")
                .find("is not a non-negative 64-bit integer"),
            std::string::npos);
  EXPECT_NE(loadError("seed", std::string("7\0", 2)).find("'seed'"),
            std::string::npos);
  EXPECT_NE(loadError("loss_scale", "inf")
                .find("'loss_scale' = 'inf' is not a positive number"),
            std::string::npos);
  EXPECT_NE(loadError("loss_scale", "0x1p+2000").find("'loss_scale'"),
            std::string::npos);
  EXPECT_NE(loadError("learning_rate_factor", std::string("0x1p-1\0", 7))
                .find("'learning_rate_factor'"),
            std::string::npos);
}

// Tests that a write that fails half way (here: the file size limit is hit
// in the middle of the data) leaves the previous file untouched and no
// temporary file behind.
TEST(Safetensors, AtomicWrite) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  std::string path = directory + "/w.safetensors";
  std::vector<float> small = {1, 2, 3};
  writeSafetensors(path, {{"w", TESSERA_F32, {3}, small.data()}}, {});
  std::string before = readBytes(path);

  std::vector<float> large(1 << 16, 0.5f);
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct rlimit limited = saved;
  limited.rlim_cur = 64 * 1024; // a quarter of the data fits
  auto previousHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  try {
    writeSafetensors(path, {{"w", TESSERA_F32, {1 << 16}, large.data()}}, {});
  } catch (const TrainError &error) {
    message = error.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previousHandler);

  EXPECT_NE(
      message.find("cannot write " + path + ": writing tensor 'w' failed"),
      std::string::npos)
      << message;
  EXPECT_EQ(readBytes(path), before) << "the old file must survive";
  EXPECT_EQ(listDirectory(directory), std::vector<std::string>{"w.safetensors"})
      << "no temporary file may remain";

  message.clear();
  try {
    writeSafetensors(directory + "/no/such/dir/x.safetensors", {}, {});
  } catch (const TrainError &error) {
    message = error.what();
  }
  EXPECT_NE(message.find("no/such/dir/x.safetensors: No such file"),
            std::string::npos)
      << message;
}

// Tests that a file with a missing, extra or reshaped tensor is reported by
// name (what loading a checkpoint of another model runs into).
TEST(Safetensors, TensorSetMismatch) {
  TemporaryDirectory temporary;
  std::string directory = temporary.getPath();
  std::string path = directory + "/m.safetensors";
  std::vector<float> values(6, 1.0f);
  writeSafetensors(path,
                   {{"embed.weight", TESSERA_F32, {2, 3}, values.data()},
                    {"head.bias", TESSERA_F32, {3}, values.data()}},
                   {});
  SafetensorsFile file = readSafetensors(path);
  auto mismatch = [&](const std::vector<ExpectedTensor> &expected) {
    try {
      checkTensorSet(path, file, expected, "tiny.onnx");
    } catch (const TrainError &error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_EQ(mismatch({{"embed.weight", {2, 3}}, {"head.bias", {3}}}), "");
  EXPECT_NE(mismatch({{"embed.weight", {2, 3}},
                      {"head.bias", {3}},
                      {"head.weight", {3, 3}}})
                .find("tensor 'head.weight' of model tiny.onnx is missing"),
            std::string::npos);
  EXPECT_NE(mismatch({{"embed.weight", {2, 3}}})
                .find("tensor 'head.bias' is not part of model tiny.onnx"),
            std::string::npos);
  EXPECT_NE(mismatch({{"embed.weight", {3, 2}}, {"head.bias", {3}}})
                .find("tensor 'embed.weight' has shape [2, 3] but model "
                      "tiny.onnx needs [3, 2]"),
            std::string::npos);
}

// Tests the JSON reader on the escapes a header may contain.
TEST(Json, Strings) {
  JsonValue value = parseJson(R"({"a\u00e9\n": [1, -2.5e3, true, null]})", "t");
  ASSERT_EQ(value.object.size(), 1u);
  EXPECT_EQ(value.object[0].first, "a\xc3\xa9\n");
  EXPECT_EQ(value.object[0].second.array[1].number, -2500);
  EXPECT_EQ(quoteJson("a\"b\\\x01"), "\"a\\\"b\\\\\\u0001\"");
  EXPECT_THROW(parseJson("{\"a\": 01}", "t"), TrainError);
  EXPECT_THROW(parseJson(std::string(100, '['), "t"), TrainError);
}

} // namespace
