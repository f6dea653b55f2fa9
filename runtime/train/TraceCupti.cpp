//===- TraceCupti.cpp - Kernels, copies and memsets from CUPTI ------------===//
//
// Design: CUPTI hands activity records over in buffers the client provides
// (bufferRequested) and returns when full or flushed (bufferCompleted, often
// on a CUPTI thread). The records of the buffers are turned into
// TraceEvents right away, under one lock, and the buffer is freed; the
// trace only covers a few steps, so the events stay in memory until the
// file is written. The callbacks are plain C function pointers without a
// user argument, so the one open collector is reached through a global; a
// buffer completed when none is open is dropped.
//
// The CUPTI functions are looked up with dlsym into pointers typed after
// the headers' declarations (decltype), so the compiler checks every call
// while the executable keeps no link to libcupti. The library stays loaded
// for the life of the process: CUPTI keeps threads and callbacks into this
// code.
//
// Records are read through the structs of the headers this runtime was
// built with (CUDA 13: CUpti_ActivityKernel10, Memcpy6, Memset4); a CUPTI
// of an older major version writes older layouts, so it is refused. Newer
// ones only append fields.
//
//===----------------------------------------------------------------------===//

#include "TraceCupti.h"

#include <cstdlib>

#ifdef TESSERA_TRACE_HAVE_CUPTI
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <chrono>
#include <mutex>
#endif

namespace tessera::train {

std::vector<std::string> defaultCuptiLibraries() {
  std::vector<std::string> libraries;
  if (const char *chosen = std::getenv("TESSERA_CUPTI_LIBRARY");
      chosen && *chosen)
    libraries.push_back(chosen);
  for (const char *name :
       {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
    libraries.push_back(name);
  return libraries;
}

#ifndef TESSERA_TRACE_HAVE_CUPTI

std::unique_ptr<GpuActivityCollector>
openCuptiCollector(const std::vector<std::string> &, std::string &whyNot) {
  whyNot = "this runtime was built without CUPTI's headers (cupti.h)";
  return nullptr;
}

#else

namespace {

constexpr size_t kBufferBytes = size_t(8) << 20;
constexpr size_t kRecordAlignment = 8;
/// The kinds recorded. CONCURRENT_KERNEL rather than KERNEL: the latter
/// serializes kernels, which would change the very timing being traced.
constexpr CUpti_ActivityKind kRecordedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET};

/// The CUPTI entry points used, looked up once per process.
struct CuptiApi {
  std::string libraryName;
  uint32_t version = 0;
  decltype(&cuptiGetVersion) getVersion = nullptr;
  decltype(&cuptiGetResultString) getResultString = nullptr;
  decltype(&cuptiGetTimestamp) getTimestamp = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) registerCallbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) getNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) getNumDroppedRecords = nullptr;

  std::string describe(CUptiResult result) const {
    const char *text = nullptr;
    if (getResultString(result, &text) != CUPTI_SUCCESS || !text)
      return "CUPTI error " + std::to_string(static_cast<int>(result));
    return text;
  }
};

template <typename Function>
bool lookUp(void *library, const char *symbol, Function &function,
            std::string &whyNot) {
  function = reinterpret_cast<Function>(::dlsym(library, symbol));
  if (!function)
    whyNot = std::string("it has no ") + symbol;
  return function != nullptr;
}

/// Opens `name` and checks it is a usable CUPTI; "" and `api` filled, or
/// the reason.
std::string loadCupti(const std::string &name, CuptiApi &api) {
  void *library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *error = ::dlerror();
    return error ? error : name + ": cannot be opened";
  }
  std::string whyNot;
  bool complete =
      lookUp(library, "cuptiGetVersion", api.getVersion, whyNot) &&
      lookUp(library, "cuptiGetResultString", api.getResultString, whyNot) &&
      lookUp(library, "cuptiGetTimestamp", api.getTimestamp, whyNot) &&
      lookUp(library, "cuptiActivityRegisterCallbacks", api.registerCallbacks,
             whyNot) &&
      lookUp(library, "cuptiActivityEnable", api.enable, whyNot) &&
      lookUp(library, "cuptiActivityDisable", api.disable, whyNot) &&
      lookUp(library, "cuptiActivityFlushAll", api.flushAll, whyNot) &&
      lookUp(library, "cuptiActivityGetNextRecord", api.getNextRecord,
             whyNot) &&
      lookUp(library, "cuptiActivityGetNumDroppedRecords",
             api.getNumDroppedRecords, whyNot);
  const uint32_t oldestUsable = (CUPTI_API_VERSION / 10000) * 10000;
  if (complete && api.getVersion(&api.version) != CUPTI_SUCCESS) {
    complete = false;
    whyNot = "cuptiGetVersion failed";
  } else if (complete && api.version < oldestUsable) {
    complete = false;
    whyNot = "its API version " + std::to_string(api.version) +
             " is older than the " + std::to_string(oldestUsable) +
             " this runtime was built for";
  }
  if (!complete) {
    ::dlclose(library);
    return name + ": " + whyNot;
  }
  api.libraryName = name;
  return "";
}

int64_t hostNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string demangle(const char *name) {
  if (!name)
    return "(unnamed kernel)";
  int status = 0;
  char *readable = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = status == 0 && readable ? readable : name;
  std::free(readable);
  return result;
}

const char *copyDirection(uint8_t kind) {
  switch (kind) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
    return "HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    return "DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    return "DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
    return "HtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
    return "PtoP";
  default:
    return "other";
  }
}

class CuptiCollector;

/// Guards `openCollector` and everything a collector holds, because
/// bufferCompleted runs on CUPTI's threads.
std::mutex collectorMutex;
CuptiCollector *openCollector = nullptr;

class CuptiCollector final : public GpuActivityCollector {
public:
  explicit CuptiCollector(const CuptiApi &api) : api(api) {}
  ~CuptiCollector() override {
    if (recording)
      stop();
    std::lock_guard<std::mutex> lock(collectorMutex);
    openCollector = nullptr;
  }

  std::string start() override {
    int64_t before = hostNanoseconds();
    uint64_t deviceClock = 0;
    CUptiResult result = api.getTimestamp(&deviceClock);
    int64_t after = hostNanoseconds();
    if (result != CUPTI_SUCCESS)
      return "cuptiGetTimestamp: " + api.describe(result);
    {
      std::lock_guard<std::mutex> lock(collectorMutex);
      clockOffset = before + (after - before) / 2 -
                    static_cast<int64_t>(deviceClock);
    }
    for (CUpti_ActivityKind kind : kRecordedKinds) {
      result = api.enable(kind);
      if (result != CUPTI_SUCCESS) {
        for (CUpti_ActivityKind enabled : kRecordedKinds)
          (void)api.disable(enabled);
        return "cuptiActivityEnable: " + api.describe(result);
      }
    }
    recording = true;
    return "";
  }

  void stop() override {
    for (CUpti_ActivityKind kind : kRecordedKinds)
      (void)api.disable(kind);
    // Forced: also the buffers that are not full yet. Delivered through
    // bufferCompleted before this returns.
    (void)api.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    recording = false;
  }

  void collect(TraceDocument &document) override {
    std::lock_guard<std::mutex> lock(collectorMutex);
    for (TraceEvent &event : events)
      document.events.push_back(std::move(event));
    events.clear();
    for (const auto &[track, name] : trackNames)
      document.trackNames[track] = name;
  }

  uint64_t droppedRecords() const override {
    std::lock_guard<std::mutex> lock(collectorMutex);
    return dropped;
  }

  std::string describe() const override {
    return "CUPTI " + std::to_string(api.version) + " (" + api.libraryName +
           ")";
  }

  /// Called with collectorMutex held.
  void addBuffer(uint8_t *buffer, size_t validSize, CUcontext context,
                 uint32_t streamId) {
    CUpti_Activity *record = nullptr;
    while (api.getNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS)
      addRecord(record);
    size_t lost = 0;
    if (api.getNumDroppedRecords(context, streamId, &lost) == CUPTI_SUCCESS)
      dropped += lost;
  }

private:
  const CuptiApi &api;
  bool recording = false;
  int64_t clockOffset = 0;
  std::vector<TraceEvent> events;
  std::map<int64_t, std::string> trackNames;
  uint64_t dropped = 0;

  /// An event on the track of (device, stream); false when the record has
  /// no complete time span (CUPTI writes 0 when it could not time it).
  bool startEvent(TraceEvent &event, uint64_t start, uint64_t end,
                  uint32_t deviceId, uint32_t streamId) {
    if (start == 0 || end < start)
      return false;
    event.startNanoseconds = static_cast<int64_t>(start) + clockOffset;
    event.durationNanoseconds = static_cast<int64_t>(end - start);
    event.track = kStreamTrackBase + int64_t(deviceId) * 100000 + streamId;
    std::string &name = trackNames[event.track];
    if (name.empty())
      name = "GPU " + std::to_string(deviceId) + " stream " +
             std::to_string(streamId);
    return true;
  }

  void addRecord(const CUpti_Activity *record) {
    TraceEvent event;
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto *kernel =
          reinterpret_cast<const CUpti_ActivityKernel10 *>(record);
      if (!startEvent(event, kernel->start, kernel->end, kernel->deviceId,
                      kernel->streamId))
        return;
      event.name = demangle(kernel->name);
      event.category = event.name.rfind("nccl", 0) == 0 ? "nccl" : "kernel";
      event.addString("grid", std::to_string(kernel->gridX) + "x" +
                                  std::to_string(kernel->gridY) + "x" +
                                  std::to_string(kernel->gridZ));
      event.addString("block", std::to_string(kernel->blockX) + "x" +
                                   std::to_string(kernel->blockY) + "x" +
                                   std::to_string(kernel->blockZ));
      event.addInteger("registers_per_thread", kernel->registersPerThread);
      event.addInteger("shared_memory_bytes",
                       int64_t(kernel->staticSharedMemory) +
                           kernel->dynamicSharedMemory);
      event.addInteger("correlation", kernel->correlationId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto *copy = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
      if (!startEvent(event, copy->start, copy->end, copy->deviceId,
                      copy->streamId))
        return;
      event.name = std::string("memcpy ") + copyDirection(copy->copyKind);
      event.category = "memcpy";
      event.addInteger("bytes", static_cast<int64_t>(copy->bytes));
      event.addInteger("correlation", copy->correlationId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto *set = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
      if (!startEvent(event, set->start, set->end, set->deviceId,
                      set->streamId))
        return;
      event.name = "memset";
      event.category = "memset";
      event.addInteger("bytes", static_cast<int64_t>(set->bytes));
      event.addInteger("value", set->value);
      event.addInteger("correlation", set->correlationId);
      break;
    }
    default:
      return;
    }
    events.push_back(std::move(event));
  }
};

void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size,
                              size_t *maxNumRecords) {
  *buffer = static_cast<uint8_t *>(
      std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxNumRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId,
                              uint8_t *buffer, size_t, size_t validSize) {
  {
    std::lock_guard<std::mutex> lock(collectorMutex);
    if (openCollector && validSize > 0)
      openCollector->addBuffer(buffer, validSize, context, streamId);
  }
  std::free(buffer);
}

} // namespace

std::unique_ptr<GpuActivityCollector>
openCuptiCollector(const std::vector<std::string> &libraries,
                   std::string &whyNot) {
  // Loaded and registered once per process (see the design note).
  static CuptiApi api;
  static bool registered = false;
  static std::mutex loadMutex;
  std::lock_guard<std::mutex> loadLock(loadMutex);
  if (!registered) {
    std::string reasons;
    for (const std::string &name : libraries) {
      std::string reason = loadCupti(name, api);
      if (reason.empty())
        break;
      reasons += (reasons.empty() ? "" : "; ") + reason;
    }
    if (api.libraryName.empty()) {
      whyNot = "CUPTI could not be loaded (" + reasons +
               "); set TESSERA_CUPTI_LIBRARY to its path";
      return nullptr;
    }
    CUptiResult result =
        api.registerCallbacks(bufferRequested, bufferCompleted);
    if (result != CUPTI_SUCCESS) {
      whyNot = "cuptiActivityRegisterCallbacks: " + api.describe(result);
      return nullptr;
    }
    registered = true;
  }
  std::lock_guard<std::mutex> lock(collectorMutex);
  if (openCollector) {
    whyNot = "another trace in this process is collecting GPU activity";
    return nullptr;
  }
  auto collector = std::make_unique<CuptiCollector>(api);
  openCollector = collector.get();
  return collector;
}

#endif // TESSERA_TRACE_HAVE_CUPTI

} // namespace tessera::train
