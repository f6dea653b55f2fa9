//===- Cluster.cpp - reading cluster files --------------------------------===//
//
// The format is documented in README.md ("Cluster files"). Every field is
// checked, with the field's dotted path and the file in the message: a
// cluster file is written by hand or by bench/measure_cluster.py, and a typo
// must not silently become a default. Unknown fields are errors for the
// same reason; "comment" is allowed anywhere for provenance notes.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/Cluster.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace llvm;

namespace tessera::cost {
namespace {

/// Reads the fields of one cluster file, failing with the first error.
class ClusterReader {
public:
  explicit ClusterReader(StringRef source) : source(source) {}

  Expected<Cluster> read(StringRef text);

private:
  Error fail(const Twine &message) const {
    return createStringError(inconvertibleErrorCode(),
                             "cluster file '" + source + "': " + message);
  }
  static std::string join(StringRef path, StringRef key) {
    return path.empty() ? key.str() : (path + "." + key).str();
  }

  /// Fails on a key of `object` outside `known` (and "comment").
  Error checkKeys(const json::Object &object, StringRef path,
                  ArrayRef<StringRef> known) const;
  Expected<const json::Object *> object(const json::Object &parent,
                                        StringRef path, StringRef key,
                                        bool required) const;
  /// A positive finite number (or >= 0 with `allowZero`); nothing when
  /// optional and absent.
  Expected<std::optional<double>> number(const json::Object &parent,
                                         StringRef path, StringRef key,
                                         bool required,
                                         bool allowZero = false) const;
  Expected<int64_t> positiveInteger(const json::Object &parent, StringRef path,
                                    StringRef key) const;
  Expected<std::string> string(const json::Object &parent, StringRef path,
                               StringRef key, bool required) const;

  Error readDevice(const json::Object &parent, DeviceModel &device) const;
  /// device.gemm_shapes: per precision, [m, n, k, flop/s] rows.
  Error readGemmShapes(const json::Object &shapes, DeviceModel &device) const;
  Expected<std::array<double, 3>> readPrecisionRates(const json::Object &rates,
                                                     StringRef path,
                                                     bool required) const;
  Expected<LinkModel> readLink(const json::Object &link, StringRef path) const;
  Error readCollective(const json::Object &entry, StringRef path,
                       CollectiveModel &model) const;

  std::string source;
};

Error ClusterReader::checkKeys(const json::Object &object, StringRef path,
                               ArrayRef<StringRef> known) const {
  for (const auto &entry : object) {
    StringRef key = entry.first;
    if (key == "comment" || llvm::is_contained(known, key))
      continue;
    std::string expected;
    for (StringRef name : known)
      expected += (expected.empty() ? "" : ", ") + name.str();
    return fail("unknown field '" + join(path, key) + "' (expected one of: " +
                expected + ")");
  }
  return Error::success();
}

Expected<const json::Object *>
ClusterReader::object(const json::Object &parent, StringRef path,
                      StringRef key, bool required) const {
  const json::Value *value = parent.get(key);
  if (!value) {
    if (required)
      return fail("missing field '" + join(path, key) + "'");
    return nullptr;
  }
  const json::Object *result = value->getAsObject();
  if (!result)
    return fail("field '" + join(path, key) + "' must be an object");
  return result;
}

Expected<std::optional<double>>
ClusterReader::number(const json::Object &parent, StringRef path,
                      StringRef key, bool required, bool allowZero) const {
  const json::Value *value = parent.get(key);
  if (!value) {
    if (required)
      return fail("missing field '" + join(path, key) + "'");
    return std::optional<double>();
  }
  std::optional<double> result = value->getAsNumber();
  if (!result || !std::isfinite(*result) ||
      (allowZero ? *result < 0 : *result <= 0))
    return fail("field '" + join(path, key) + "' must be a " +
                (allowZero ? "non-negative" : "positive") + " number, got " +
                formatv("{0}", *value).str());
  return result;
}

Expected<int64_t> ClusterReader::positiveInteger(const json::Object &parent,
                                                 StringRef path,
                                                 StringRef key) const {
  const json::Value *value = parent.get(key);
  if (!value)
    return fail("missing field '" + join(path, key) + "'");
  std::optional<int64_t> result = value->getAsInteger();
  if (!result || *result <= 0)
    return fail("field '" + join(path, key) +
                "' must be a positive integer, got " +
                formatv("{0}", *value).str());
  return *result;
}

Expected<std::string> ClusterReader::string(const json::Object &parent,
                                            StringRef path, StringRef key,
                                            bool required) const {
  const json::Value *value = parent.get(key);
  if (!value) {
    if (required)
      return fail("missing field '" + join(path, key) + "'");
    return std::string();
  }
  std::optional<StringRef> result = value->getAsString();
  if (!result)
    return fail("field '" + join(path, key) + "' must be a string");
  return result->str();
}

Expected<std::array<double, 3>>
ClusterReader::readPrecisionRates(const json::Object &rates, StringRef path,
                                  bool required) const {
  if (Error error = checkKeys(rates, path, {"bf16", "fp16", "fp32"}))
    return std::move(error);
  std::array<double, 3> result{};
  for (Precision precision :
       {Precision::BF16, Precision::FP16, Precision::FP32}) {
    auto rate = number(rates, path, precisionName(precision), required);
    if (!rate)
      return rate.takeError();
    result[static_cast<size_t>(precision)] = rate->value_or(0);
  }
  return result;
}

Error ClusterReader::readGemmShapes(const json::Object &shapes,
                                    DeviceModel &device) const {
  if (Error error = checkKeys(shapes, "device.gemm_shapes",
                              {"bf16", "fp16", "fp32"}))
    return error;
  for (Precision precision :
       {Precision::BF16, Precision::FP16, Precision::FP32}) {
    std::string path = ("device.gemm_shapes." + precisionName(precision)).str();
    const json::Value *value = shapes.get(precisionName(precision));
    if (!value)
      continue;
    const json::Array *rows = value->getAsArray();
    if (!rows)
      return fail("field '" + path +
                  "' must be an array of [m, n, k, flop/s] rows");
    std::vector<GemmRate> &table = device.gemmShapes[static_cast<size_t>(precision)];
    for (auto [index, row] : llvm::enumerate(*rows)) {
      const json::Array *entry = row.getAsArray();
      std::array<double, 4> numbers{};
      bool valid = entry && entry->size() == 4;
      for (size_t i = 0; valid && i < 4; ++i) {
        std::optional<double> number = (*entry)[i].getAsNumber();
        valid = number && std::isfinite(*number) && *number > 0;
        if (valid)
          numbers[i] = *number;
      }
      if (!valid)
        return fail("field '" + path + "[" + std::to_string(index) +
                    "]' must be [m, n, k, flop/s], four positive numbers, got " +
                    formatv("{0}", row).str());
      table.push_back({numbers[0], numbers[1], numbers[2], numbers[3]});
    }
  }
  return Error::success();
}

Error ClusterReader::readDevice(const json::Object &root,
                                DeviceModel &device) const {
  auto deviceObject = object(root, "", "device", /*required=*/true);
  if (!deviceObject)
    return deviceObject.takeError();
  const json::Object &fields = **deviceObject;
  if (Error error = checkKeys(fields, "device",
                              {"name", "memory_bytes", "memory_bandwidth",
                               "flops", "peak_flops", "vector_flops",
                               "attention_flops", "gemm_shapes",
                               "kernel_seconds"}))
    return error;
  auto name = string(fields, "device", "name", /*required=*/false);
  auto memory = number(fields, "device", "memory_bytes", /*required=*/true);
  auto bandwidth =
      number(fields, "device", "memory_bandwidth", /*required=*/true);
  if (!name)
    return name.takeError();
  if (!memory)
    return memory.takeError();
  if (!bandwidth)
    return bandwidth.takeError();
  device.name = *name;
  device.memoryBytes = **memory;
  device.memoryBandwidth = **bandwidth;

  auto flopsObject = object(fields, "device", "flops", /*required=*/true);
  if (!flopsObject)
    return flopsObject.takeError();
  auto flops = readPrecisionRates(**flopsObject, "device.flops",
                                  /*required=*/true);
  if (!flops)
    return flops.takeError();
  device.matrixFlops = *flops;

  // Peaks default to the practical rates, precision by precision.
  device.peakMatrixFlops = device.matrixFlops;
  auto peakObject = object(fields, "device", "peak_flops", /*required=*/false);
  if (!peakObject)
    return peakObject.takeError();
  if (*peakObject) {
    auto peaks = readPrecisionRates(**peakObject, "device.peak_flops",
                                    /*required=*/false);
    if (!peaks)
      return peaks.takeError();
    for (size_t i = 0; i < peaks->size(); ++i)
      if ((*peaks)[i] > 0)
        device.peakMatrixFlops[i] = (*peaks)[i];
  }

  auto attentionObject =
      object(fields, "device", "attention_flops", /*required=*/false);
  if (!attentionObject)
    return attentionObject.takeError();
  if (*attentionObject) {
    auto rates = readPrecisionRates(**attentionObject,
                                    "device.attention_flops",
                                    /*required=*/false);
    if (!rates)
      return rates.takeError();
    device.attentionFlops = *rates;
  }

  auto shapesObject =
      object(fields, "device", "gemm_shapes", /*required=*/false);
  if (!shapesObject)
    return shapesObject.takeError();
  if (*shapesObject)
    if (Error error = readGemmShapes(**shapesObject, device))
      return error;
  auto kernel = number(fields, "device", "kernel_seconds", /*required=*/false,
                       /*allowZero=*/true);
  if (!kernel)
    return kernel.takeError();
  device.kernelSeconds = kernel->value_or(0);

  auto vector = number(fields, "device", "vector_flops", /*required=*/false);
  if (!vector)
    return vector.takeError();
  device.vectorFlops = vector->value_or(device.matrixRate(Precision::FP32));
  return Error::success();
}

Error ClusterReader::readCollective(const json::Object &entry, StringRef path,
                                    CollectiveModel &model) const {
  if (Error error = checkKeys(entry, path,
                              {"latency", "bandwidth", "measured",
                               "measured_group_size"}))
    return error;
  auto latency = number(entry, path, "latency", /*required=*/false,
                        /*allowZero=*/true);
  auto bandwidth = number(entry, path, "bandwidth", /*required=*/false);
  if (!latency)
    return latency.takeError();
  if (!bandwidth)
    return bandwidth.takeError();
  if (*latency)
    model.latency = **latency;
  if (*bandwidth)
    model.bandwidth = **bandwidth;

  if (entry.get("measured_group_size")) {
    auto groupSize = positiveInteger(entry, path, "measured_group_size");
    if (!groupSize)
      return groupSize.takeError();
    model.measuredGroupSize = *groupSize;
  }

  const json::Value *measured = entry.get("measured");
  if (!measured)
    return Error::success();
  const json::Array *points = measured->getAsArray();
  if (!points)
    return fail("field '" + join(path, "measured") +
                "' must be an array of {\"bytes\": N, \"bus_bandwidth\": B}");
  for (auto [index, value] : llvm::enumerate(*points)) {
    std::string pointPath = formatv("{0}.measured[{1}]", path, index).str();
    const json::Object *point = value.getAsObject();
    if (!point)
      return fail("field '" + pointPath +
                  "' must be an object {\"bytes\": N, \"bus_bandwidth\": B}");
    if (Error error = checkKeys(*point, pointPath, {"bytes", "bus_bandwidth"}))
      return error;
    auto bytes = number(*point, pointPath, "bytes", /*required=*/true);
    auto busBandwidth =
        number(*point, pointPath, "bus_bandwidth", /*required=*/true);
    if (!bytes)
      return bytes.takeError();
    if (!busBandwidth)
      return busBandwidth.takeError();
    if (!model.measured.empty() && **bytes <= model.measured.back().bytes)
      return fail("field '" + pointPath +
                  "': measurements must be sorted by strictly increasing "
                  "bytes");
    model.measured.push_back({**bytes, **busBandwidth});
  }
  return Error::success();
}

Expected<LinkModel> ClusterReader::readLink(const json::Object &link,
                                            StringRef path) const {
  if (Error error = checkKeys(link, path,
                              {"name", "latency", "bandwidth", "collectives"}))
    return std::move(error);
  LinkModel result;
  auto name = string(link, path, "name", /*required=*/false);
  auto latency = number(link, path, "latency", /*required=*/false,
                        /*allowZero=*/true);
  auto bandwidth = number(link, path, "bandwidth", /*required=*/false);
  auto collectives = object(link, path, "collectives", /*required=*/false);
  if (!name)
    return name.takeError();
  if (!latency)
    return latency.takeError();
  if (!bandwidth)
    return bandwidth.takeError();
  if (!collectives)
    return collectives.takeError();
  result.name = *name;

  std::string collectivesPath = join(path, "collectives");
  if (*collectives) {
    SmallVector<StringRef> names;
    for (Collective collective : allCollectives())
      names.push_back(collectiveName(collective));
    if (Error error = checkKeys(**collectives, collectivesPath, names))
      return std::move(error);
  }
  for (Collective collective : allCollectives()) {
    CollectiveModel &model =
        result.collectives[static_cast<size_t>(collective)];
    model.collective = collective;
    // The link's own latency and bandwidth are the defaults of every
    // collective; an entry overrides them.
    model.latency = latency->value_or(0);
    model.bandwidth = bandwidth->value_or(0);
    std::string entryPath = join(collectivesPath, collectiveName(collective));
    if (*collectives) {
      auto entry = object(**collectives, collectivesPath,
                          collectiveName(collective), /*required=*/false);
      if (!entry)
        return entry.takeError();
      if (*entry)
        if (Error error = readCollective(**entry, entryPath, model))
          return std::move(error);
    }
    if (model.bandwidth <= 0)
      return fail("missing field '" + join(entryPath, "bandwidth") +
                  "' (or a default '" + join(path, "bandwidth") +
                  "' for every collective of the link)");
  }
  return result;
}

Expected<Cluster> ClusterReader::read(StringRef text) {
  Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return fail("invalid JSON: " + toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return fail("the top level must be a JSON object");
  if (Error error = checkKeys(*root, "",
                              {"name", "description", "nodes",
                               "devices_per_node", "device", "links",
                               "host"}))
    return std::move(error);

  Cluster cluster;
  auto name = string(*root, "", "name", /*required=*/true);
  auto description = string(*root, "", "description", /*required=*/false);
  auto nodes = positiveInteger(*root, "", "nodes");
  auto perNode = positiveInteger(*root, "", "devices_per_node");
  if (!name)
    return name.takeError();
  if (!description)
    return description.takeError();
  if (!nodes)
    return nodes.takeError();
  if (!perNode)
    return perNode.takeError();
  cluster.name = *name;
  cluster.description = *description;
  cluster.nodes = *nodes;
  cluster.devicesPerNode = *perNode;

  if (Error error = readDevice(*root, cluster.device))
    return std::move(error);

  auto links = object(*root, "", "links", /*required=*/true);
  if (!links)
    return links.takeError();
  if (Error error = checkKeys(**links, "links", {"intra_node", "inter_node"}))
    return std::move(error);
  auto intra = object(**links, "links", "intra_node", /*required=*/true);
  if (!intra)
    return intra.takeError();
  auto intraLink = readLink(**intra, "links.intra_node");
  if (!intraLink)
    return intraLink.takeError();
  cluster.intraNode = std::move(*intraLink);

  auto inter = object(**links, "links", "inter_node",
                      /*required=*/cluster.nodes > 1);
  if (!inter) {
    // Say why a single-node file would not need it.
    consumeError(inter.takeError());
    return fail(formatv("missing field 'links.inter_node' (required because "
                        "'nodes' is {0})",
                        cluster.nodes)
                    .str());
  }
  if (*inter) {
    auto interLink = readLink(**inter, "links.inter_node");
    if (!interLink)
      return interLink.takeError();
    cluster.interNode = std::move(*interLink);
  }

  auto host = object(*root, "", "host", /*required=*/false);
  if (!host)
    return host.takeError();
  if (*host) {
    if (Error error = checkKeys(**host, "host",
                                {"adamw_elements_per_second",
                                 "device_to_host_bandwidth",
                                 "host_to_device_bandwidth"}))
      return std::move(error);
    HostModel model;
    std::pair<StringRef, double *> fields[] = {
        {"adamw_elements_per_second", &model.adamwElementsPerSecond},
        {"device_to_host_bandwidth", &model.deviceToHostBandwidth},
        {"host_to_device_bandwidth", &model.hostToDeviceBandwidth}};
    for (auto [key, target] : fields) {
      auto value = number(**host, "host", key, /*required=*/true);
      if (!value)
        return value.takeError();
      *target = **value;
    }
    cluster.host = model;
  }
  return cluster;
}

} // namespace

Expected<Cluster> parseCluster(StringRef json, StringRef source) {
  return ClusterReader(source).read(json);
}

Expected<Cluster> loadCluster(StringRef nameOrPath) {
  if (std::optional<StringRef> builtin = builtinClusterJson(nameOrPath))
    return parseCluster(*builtin, ("built-in " + nameOrPath).str());
  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFile(nameOrPath, /*IsText=*/true);
  if (!file) {
    std::string names;
    for (StringRef name : builtinClusterNames())
      names += (names.empty() ? "" : ", ") + name.str();
    return createStringError(
        inconvertibleErrorCode(),
        "--cluster " + nameOrPath + ": not a built-in cluster (" + names +
            ") and not a readable file: " + file.getError().message());
  }
  return parseCluster((*file)->getBuffer(), nameOrPath);
}

} // namespace tessera::cost
