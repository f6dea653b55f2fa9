//===- Checkpoint.cpp - Checkpoints as safetensors -----------------------===//
//
// Design: a checkpoint is one safetensors file that any safetensors reader
// can open: the parameters under their ONNX initializer names (f32 master
// copies), the program's buffers under theirs, AdamW's moments as
// "optimizer.m.<name>" and "optimizer.v.<name>" (f32), and in __metadata__
// everything else TrainingState holds (step, optimizer_step, seed,
// data_position, loss_scale, clean_steps, overflow_streak,
// learning_rate_factor, gradient_spikes, recent_grad_norms, run: the run's
// id, kept across resumes), plus the model name and a format tag. Numbers are
// decimal strings; the doubles are printed with "%a" (hex float) so that they
// round-trip exactly, the recent norms as a comma-separated list. The keys
// added with the spike detector and the loss-scale hysteresis are optional when
// loading (a checkpoint of an earlier driver resumes with their initial
// values).
//
// Files are named checkpoint_<step>.safetensors with the step zero-padded to
// eight digits, written atomically (Safetensors.cpp), and all are kept;
// --resume picks the highest step. Loading insists on exactly the program's
// tensor set and shapes, so a checkpoint of another model fails with the
// name of the first tensor that differs rather than training garbage.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include "TrainError.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <random>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace tessera::train {
namespace {

constexpr const char *kFormatKey = "format";
constexpr const char *kFormatValue = "tessera-checkpoint-1";
constexpr const char *kFirstMomentPrefix = "optimizer.m.";
constexpr const char *kSecondMomentPrefix = "optimizer.v.";
constexpr const char *kPrefix = "checkpoint_";
constexpr const char *kSuffix = ".safetensors";

const char *modelNameOf(const tessera_program &program) {
  return program.model_name ? program.model_name : "(unnamed)";
}

std::string requireMetadata(const std::string &path,
                            const SafetensorsFile &file, const char *key) {
  auto found = file.metadata.find(key);
  if (found == file.metadata.end())
    fail(path + ": not a Tessera checkpoint (no '" + key +
         "' in __metadata__)");
  return found->second;
}

/// Whether strto*'s `end` is the end of all of `text`. Checking *end for
/// '\0' is not enough: a JSON string may hold "\u0000", and "5\u0000junk"
/// would read as 5.
bool parsedWhole(const std::string &text, const char *end) {
  return !text.empty() && end == text.c_str() + text.size();
}

int64_t metadataInteger(const std::string &path, const SafetensorsFile &file,
                        const char *key) {
  std::string text = requireMetadata(path, file, key);
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (!parsedWhole(text, end) || errno == ERANGE || value < 0)
    fail(path + ": __metadata__ '" + key + "' = '" + text +
         "' is not a non-negative integer");
  return value;
}

/// An optional integer key: `fallback` when absent.
int64_t optionalInteger(const std::string &path, const SafetensorsFile &file,
                        const char *key, int64_t fallback) {
  return file.metadata.count(key) ? metadataInteger(path, file, key) : fallback;
}

std::string hexDouble(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%a", value);
  return text;
}

/// A double written by hexDouble, under metadata key `key`.
double parseDouble(const std::string &path, const char *key,
                   const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (!parsedWhole(text, end) || !std::isfinite(value))
    fail(path + ": __metadata__ '" + key + "' holds '" + text +
         "', not a finite number");
  return value;
}

std::string joinDoubles(const std::vector<double> &values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? "," : "") + hexDouble(values[i]);
  return text;
}

std::vector<double> splitDoubles(const std::string &path, const char *key,
                                 const std::string &text) {
  std::vector<double> values;
  size_t start = 0;
  while (!text.empty() && start <= text.size()) {
    size_t comma = text.find(',', start);
    values.push_back(parseDouble(path, key,
                                 text.substr(start, comma == std::string::npos
                                                        ? std::string::npos
                                                        : comma - start)));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return values;
}

} // namespace

std::string checkpointPath(const std::string &directory, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%08lld%s", kPrefix,
                static_cast<long long>(step), kSuffix);
  return directory + "/" + name;
}

namespace {

/// The step of a checkpoint's file name, or -1 for another name.
long long checkpointStep(const std::string &name) {
  size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.rfind(kPrefix, 0) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0)
    return -1;
  std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::strtoll(digits.c_str(), nullptr, 10);
}

} // namespace

std::vector<std::string> listCheckpoints(const std::string &directory) {
  DIR *listing = ::opendir(directory.c_str());
  if (!listing) {
    if (errno == ENOENT)
      return {};
    fail("--checkpoint-dir: cannot read " + describeSystemError(directory));
  }
  std::vector<std::pair<long long, std::string>> found;
  while (dirent *entry = ::readdir(listing))
    if (long long step = checkpointStep(entry->d_name); step >= 0)
      found.emplace_back(step, directory + "/" + entry->d_name);
  ::closedir(listing);
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto &[step, path] : found)
    paths.push_back(std::move(path));
  return paths;
}

std::string findLatestCheckpoint(const std::string &directory) {
  std::vector<std::string> paths = listCheckpoints(directory);
  return paths.empty() ? std::string() : paths.back();
}

void claimCheckpointDirectory(const std::string &directory, bool overwrite,
                              bool remove) {
  std::vector<std::string> existing = listCheckpoints(directory);
  if (existing.empty())
    return;
  if (!overwrite)
    fail("--checkpoint-dir " + directory + " already holds " +
         std::to_string(existing.size()) + " checkpoint(s) (newest " +
         existing.back() +
         "): continue that run with --resume, or start a new one with "
         "--overwrite-checkpoints (which deletes them) or another directory");
  if (!remove)
    return;
  for (const std::string &path : existing)
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      fail("--overwrite-checkpoints: cannot delete " +
           describeSystemError(path));
}

std::string newRunId() {
  std::random_device source;
  uint64_t id = (static_cast<uint64_t>(source()) << 32) ^ source();
  char text[32];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(id));
  return text;
}

void ensureDirectory(const std::string &directory) {
  std::string partial;
  size_t start = 0;
  while (start <= directory.size()) {
    size_t slash = directory.find('/', start);
    partial = directory.substr(0, slash);
    if (!partial.empty() && ::mkdir(partial.c_str(), 0755) != 0 &&
        errno != EEXIST)
      fail("--checkpoint-dir: cannot create " + describeSystemError(partial));
    if (slash == std::string::npos)
      break;
    start = slash + 1;
  }
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    fail("--checkpoint-dir: " + directory + " is not a directory");
}

void checkTensorSet(const std::string &path, const SafetensorsFile &file,
                    const std::vector<ExpectedTensor> &expected,
                    const char *modelName) {
  std::set<std::string> names;
  for (const ExpectedTensor &tensor : expected) {
    names.insert(tensor.name);
    const LoadedTensor *found = file.find(tensor.name);
    if (!found)
      fail(path + ": tensor '" + tensor.name + "' of model " + modelName +
           " is missing (is the file from another model?)");
    if (found->shape != tensor.shape)
      fail(path + ": tensor '" + tensor.name + "' has shape " +
           shapeText(found->shape) + " but model " + modelName + " needs " +
           shapeText(tensor.shape) + " (is the file from another model?)");
  }
  for (const LoadedTensor &tensor : file.tensors)
    if (!names.count(tensor.name))
      fail(path + ": tensor '" + tensor.name + "' is not part of model " +
           modelName + " (is the file from another model?)");
}

namespace {

bool isFloatDtype(int32_t dtype) {
  return dtype == TESSERA_F32 || dtype == TESSERA_BF16 ||
         dtype == TESSERA_F16 || dtype == TESSERA_F64;
}

std::string nonFiniteText(const std::string &name, const float *values,
                          int64_t element) {
  char value[32];
  std::snprintf(value, sizeof(value), "%g",
                static_cast<double>(values[element]));
  return "tensor '" + name + "' holds " + value + " at element " +
         std::to_string(element);
}

} // namespace

void convertTensor(const std::string &path, const LoadedTensor &tensor,
                   int32_t dtype, void *destination) {
  if (isFloatDtype(tensor.dtype) != isFloatDtype(dtype))
    fail(path + ": tensor '" + tensor.name + "' is " +
         safetensorsDtypeName(tensor.dtype) + " but the program's needs " +
         (isFloatDtype(dtype) ? "a float type (F32, BF16, F16, F64)"
                              : std::string(safetensorsDtypeName(dtype))) +
         " (is the file from another model?)");
  if (tensor.dtype == dtype) {
    if (!tensor.bytes.empty())
      std::memcpy(destination, tensor.bytes.data(), tensor.bytes.size());
    return;
  }
  tessera_tensor source{};
  source.data = const_cast<unsigned char *>(tensor.bytes.data());
  source.dtype = tensor.dtype;
  source.rank = static_cast<int32_t>(tensor.shape.size());
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    source.shape[i] = tensor.shape[i];
  tessera_tensor target = source;
  target.data = destination;
  target.dtype = dtype;
  if (tessera_cpu_cast(&source, &target) != 0)
    fail(path + ": tensor '" + tensor.name + "': cannot convert " +
         safetensorsDtypeName(tensor.dtype) + " to " +
         safetensorsDtypeName(dtype) + ": " + tessera_cpu_last_error());
}

void convertParameter(const std::string &path, const LoadedTensor &tensor,
                      float *destination) {
  convertTensor(path, tensor, TESSERA_F32, destination);
  int64_t count = 1;
  for (int64_t size : tensor.shape)
    count *= size;
  if (int64_t bad = firstNonFinite(destination, count); bad >= 0)
    fail(path + ": " + nonFiniteText(tensor.name, destination, bad) +
         "; the weights must be finite");
}

void requireFiniteValues(const std::string &path, const std::string &name,
                         const float *values, int64_t count) {
  if (int64_t bad = firstNonFinite(values, count); bad >= 0)
    fail("refusing to write " + path + ": " + nonFiniteText(name, values, bad) +
         " (a driver bug: the update's check should have ended the run)");
}

void saveCheckpoint(const std::string &path, const tessera_program &program,
                    const TrainingState &state) {
  std::vector<TensorView> views;
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const tessera_tensor_info &info = program.parameters[i];
    const auto index = static_cast<size_t>(i);
    const int64_t count = elementCount(info);
    requireFiniteValues(path, info.name, state.parameters[index].data(), count);
    requireFiniteValues(path, kFirstMomentPrefix + std::string(info.name),
                        state.firstMoments[index].data(), count);
    requireFiniteValues(path, kSecondMomentPrefix + std::string(info.name),
                        state.secondMoments[index].data(), count);
    views.push_back({info.name, TESSERA_F32, shapeOf(info),
                     state.parameters[index].data()});
  }
  for (int32_t i = 0; i < program.buffer_count; ++i) {
    const tessera_tensor_info &info = program.buffers[i];
    views.push_back({info.name, info.dtype, shapeOf(info),
                     state.buffers[static_cast<size_t>(i)].data()});
  }
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const tessera_tensor_info &info = program.parameters[i];
    views.push_back({std::string(kFirstMomentPrefix) + info.name, TESSERA_F32,
                     shapeOf(info),
                     state.firstMoments[static_cast<size_t>(i)].data()});
    views.push_back({std::string(kSecondMomentPrefix) + info.name, TESSERA_F32,
                     shapeOf(info),
                     state.secondMoments[static_cast<size_t>(i)].data()});
  }
  std::map<std::string, std::string> metadata = {
      {kFormatKey, kFormatValue},
      {"model", modelNameOf(program)},
      {"step", std::to_string(state.step)},
      {"optimizer_step", std::to_string(state.optimizerStep)},
      {"seed", std::to_string(state.seed)},
      {"data_position", std::to_string(state.dataPosition)},
      {"loss_scale", hexDouble(state.lossScale)},
      {"clean_steps", std::to_string(state.cleanSteps)},
      {"overflow_streak", std::to_string(state.overflowStreak)},
      {"learning_rate_factor", hexDouble(state.learningRateFactor)},
      {"gradient_spikes", std::to_string(state.gradientSpikes)},
      {"recent_grad_norms", joinDoubles(state.recentGradientNorms)},
      {"run", state.runId},
  };
  writeSafetensors(path, views, metadata);
}

void loadCheckpoint(const std::string &path, const tessera_program &program,
                    TrainingState &state) {
  SafetensorsFile file = readSafetensors(path);
  if (requireMetadata(path, file, kFormatKey) != kFormatValue)
    fail(path + ": unsupported checkpoint format '" +
         file.metadata[kFormatKey] + "' (expected " + kFormatValue + ")");
  std::vector<ExpectedTensor> expected;
  for (int32_t i = 0; i < program.parameter_count; ++i)
    expected.push_back(
        {program.parameters[i].name, shapeOf(program.parameters[i])});
  for (int32_t i = 0; i < program.buffer_count; ++i)
    expected.push_back({program.buffers[i].name, shapeOf(program.buffers[i])});
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    expected.push_back(
        {std::string(kFirstMomentPrefix) + program.parameters[i].name,
         shapeOf(program.parameters[i])});
    expected.push_back(
        {std::string(kSecondMomentPrefix) + program.parameters[i].name,
         shapeOf(program.parameters[i])});
  }
  checkTensorSet(path, file, expected, modelNameOf(program));

  for (int32_t i = 0; i < program.parameter_count; ++i) {
    std::string name = program.parameters[i].name;
    auto index = static_cast<size_t>(i);
    convertParameter(path, *file.find(name), state.parameters[index].data());
    convertParameter(path, *file.find(kFirstMomentPrefix + name),
                     state.firstMoments[index].data());
    convertParameter(path, *file.find(kSecondMomentPrefix + name),
                     state.secondMoments[index].data());
  }
  for (int32_t i = 0; i < program.buffer_count; ++i)
    convertTensor(path, *file.find(program.buffers[i].name),
                  program.buffers[i].dtype,
                  state.buffers[static_cast<size_t>(i)].data());

  state.step = metadataInteger(path, file, "step");
  state.optimizerStep = metadataInteger(path, file, "optimizer_step");
  state.dataPosition = metadataInteger(path, file, "data_position");
  state.cleanSteps = metadataInteger(path, file, "clean_steps");
  std::string seed = requireMetadata(path, file, "seed");
  char *end = nullptr;
  // strtoull would take "-1" as 2^64 - 1 and clamp a longer number.
  errno = 0;
  state.seed = std::strtoull(seed.c_str(), &end, 10);
  if (!parsedWhole(seed, end) ||
      !std::isdigit(static_cast<unsigned char>(seed[0])) || errno == ERANGE)
    fail(path + ": __metadata__ 'seed' = '" + seed +
         "' is not a non-negative 64-bit integer");
  std::string scale = requireMetadata(path, file, "loss_scale");
  state.lossScale = std::strtod(scale.c_str(), &end);
  // An infinite scale would skip every fp16 step as an overflow, forever.
  if (!parsedWhole(scale, end) || !(state.lossScale > 0) ||
      !std::isfinite(state.lossScale))
    fail(path + ": __metadata__ 'loss_scale' = '" + scale +
         "' is not a positive number");
  state.overflowStreak = optionalInteger(path, file, "overflow_streak", 0);
  state.gradientSpikes = optionalInteger(path, file, "gradient_spikes", 0);
  state.learningRateFactor = 1;
  if (auto found = file.metadata.find("learning_rate_factor");
      found != file.metadata.end()) {
    state.learningRateFactor =
        parseDouble(path, "learning_rate_factor", found->second);
    if (!(state.learningRateFactor > 0))
      fail(path + ": __metadata__ 'learning_rate_factor' = '" + found->second +
           "' is not a positive number");
  }
  if (auto found = file.metadata.find("run"); found != file.metadata.end())
    state.runId = found->second;
  state.recentGradientNorms.clear();
  if (auto found = file.metadata.find("recent_grad_norms");
      found != file.metadata.end())
    state.recentGradientNorms =
        splitDoubles(path, "recent_grad_norms", found->second);
}

/// Parameter-shaped f32 tensors under the parameters' names, in a file
/// PyTorch loads with safetensors.torch.load_file.
static void writeParameterShaped(const std::string &path,
                                 const tessera_program &program,
                                 const std::vector<const float *> &tensors,
                                 int64_t step) {
  std::vector<TensorView> views;
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    const tessera_tensor_info &info = program.parameters[i];
    const float *values = tensors[static_cast<size_t>(i)];
    requireFiniteValues(path, info.name, values, elementCount(info));
    views.push_back({info.name, TESSERA_F32, shapeOf(info), values});
  }
  // safetensors.torch.save_file tags its files "pt"; doing the same keeps
  // tools that look at the tag happy.
  writeSafetensors(path, views,
                   {{"format", "pt"},
                    {"model", modelNameOf(program)},
                    {"step", std::to_string(step)}});
}

void dumpParameters(const std::string &path, const tessera_program &program,
                    const TrainingState &state) {
  std::vector<const float *> tensors;
  for (const std::vector<float> &parameter : state.parameters)
    tensors.push_back(parameter.data());
  writeParameterShaped(path, program, tensors, state.step);
}

void dumpGradients(const std::string &path, const tessera_program &program,
                   const std::vector<std::vector<float>> &gradients,
                   int64_t step) {
  std::vector<const float *> tensors;
  for (const std::vector<float> &gradient : gradients)
    tensors.push_back(gradient.data());
  writeParameterShaped(path, program, tensors, step);
}

} // namespace tessera::train
