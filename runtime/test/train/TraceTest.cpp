//===- TraceTest.cpp - --trace on the CPU: the JSON, the files, the steps -===//
//
// Every file is read back with the driver's strict JSON parser (Json.h), so
// "valid JSON" means RFC 8259, not "Perfetto was lenient". The GPU side
// (CUPTI) is TraceCudaTest.cpp; here only its absence is tested.
//
//===----------------------------------------------------------------------===//

#include "Flags.h"
#include "Json.h"
#include "Trace.h"
#include "TraceFile.h"
#include "TraceJson.h"
#include "TrainError.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

using namespace tessera::train;

namespace {

/// A fresh directory per test.
std::string makeTemporaryDirectory() {
  std::string pattern = ::testing::TempDir() + "tessera_trace_XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (!::mkdtemp(name.data()))
    ADD_FAILURE() << "mkdtemp failed";
  return name.data();
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::vector<std::string> listDirectory(const std::string &path) {
  std::vector<std::string> names;
  if (DIR *directory = ::opendir(path.c_str())) {
    while (dirent *entry = ::readdir(directory))
      if (std::string(entry->d_name) != "." && std::string(entry->d_name) != "..")
        names.push_back(entry->d_name);
    ::closedir(directory);
  }
  return names;
}

/// The events of a trace file, the metadata ("ph":"M") left out.
std::vector<const JsonValue *> eventsOf(const JsonValue &trace) {
  std::vector<const JsonValue *> events;
  for (const JsonValue &event : trace.find("traceEvents")->array)
    if (event.find("ph")->string != "M")
      events.push_back(&event);
  return events;
}

std::vector<std::string> namesOf(const std::vector<const JsonValue *> &events) {
  std::vector<std::string> names;
  for (const JsonValue *event : events)
    names.push_back(event->find("name")->string);
  return names;
}

/// Options that write into `directory` and keep the test's output quiet.
TraceOptions quietOptions(const std::string &directory) {
  TraceOptions options;
  options.file = directory + "/trace.json";
  options.messages = nullptr;
  options.warnings = nullptr;
  return options;
}

TraceEvent complete(const std::string &name, int64_t start, int64_t duration) {
  TraceEvent event;
  event.name = name;
  event.category = "host";
  event.startNanoseconds = start;
  event.durationNanoseconds = duration;
  return event;
}

TEST(TraceJson, WritesValidChromeTraceWithProcessAndTrackNames) {
  TraceDocument document;
  document.rank = 3;
  document.trackNames[kHostTrack] = "host";
  document.trackNames[kStreamTrackBase + 7] = "GPU 0 stream 7";
  document.events.push_back(complete("forward_backward", 2'000'000, 1'500));
  TraceEvent kernel = complete("gemm", 2'000'100, 900);
  kernel.category = "kernel";
  kernel.track = kStreamTrackBase + 7;
  kernel.addInteger("correlation", 42);
  kernel.addString("grid", "4x1x1");
  document.events.push_back(kernel);
  TraceEvent scale;
  scale.kind = TraceEvent::Kind::Counter;
  scale.name = "loss scale";
  scale.startNanoseconds = 2'001'000;
  scale.addNumber("value", 65536.0);
  document.events.push_back(scale);
  TraceEvent mark;
  mark.kind = TraceEvent::Kind::Instant;
  mark.name = "checkpoint";
  mark.startNanoseconds = 2'002'000;
  document.events.push_back(mark);
  document.otherData.emplace_back("rank", "3");

  JsonValue trace = parseJson(renderChromeTrace(document), "trace");
  EXPECT_EQ(trace.find("otherData")->find("rank")->number, 3);
  const std::vector<JsonValue> &all = trace.find("traceEvents")->array;
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(all[0].find("name")->string, "process_name");
  EXPECT_EQ(all[0].find("args")->find("name")->string, "rank 3");
  std::map<int64_t, std::string> threadNames;
  for (const JsonValue &event : all) {
    EXPECT_EQ(event.find("pid")->number, 3);
    if (event.find("name")->string == "thread_name")
      threadNames[static_cast<int64_t>(event.find("tid")->number)] =
          event.find("args")->find("name")->string;
  }
  EXPECT_EQ(threadNames[kHostTrack], "host");
  EXPECT_EQ(threadNames[kStreamTrackBase + 7], "GPU 0 stream 7");

  std::vector<const JsonValue *> events = eventsOf(trace);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]->find("ph")->string, "X");
  EXPECT_EQ(events[0]->find("ts")->numberText, "2000.000");
  EXPECT_EQ(events[0]->find("dur")->numberText, "1.500");
  EXPECT_EQ(events[1]->find("tid")->number, kStreamTrackBase + 7);
  EXPECT_EQ(events[1]->find("cat")->string, "kernel");
  EXPECT_EQ(events[1]->find("args")->find("correlation")->number, 42);
  EXPECT_EQ(events[1]->find("args")->find("grid")->string, "4x1x1");
  EXPECT_EQ(events[2]->find("ph")->string, "C");
  EXPECT_EQ(events[2]->find("args")->find("value")->number, 65536);
  EXPECT_EQ(events[3]->find("ph")->string, "i");
  EXPECT_EQ(events[3]->find("s")->string, "t");
}

TEST(TraceJson, EscapesKernelNames) {
  const std::string name = "void k<\"q\", '\\\\'>(float*)\n\t\x01 ncclDevKernel";
  TraceDocument document;
  document.events.push_back(complete(name, 1, 1));
  document.trackNames[kHostTrack] = "tab\there \"quoted\"";
  JsonValue trace = parseJson(renderChromeTrace(document), "trace");
  std::vector<const JsonValue *> events = eventsOf(trace);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]->find("name")->string, name);
}

TEST(TraceJson, OrdersByStartThenLongestFirstThenRecordingOrder) {
  TraceDocument document;
  document.events.push_back(complete("late", 300, 10));
  document.events.push_back(complete("child", 100, 10));
  document.events.push_back(complete("parent", 100, 50));
  document.events.push_back(complete("sibling-a", 200, 5));
  document.events.push_back(complete("sibling-b", 200, 5));
  document.events.push_back(complete("early", 0, 1));
  JsonValue trace = parseJson(renderChromeTrace(document), "trace");
  EXPECT_EQ(namesOf(eventsOf(trace)),
            (std::vector<std::string>{"early", "parent", "child", "sibling-a",
                                      "sibling-b", "late"}));
}

TEST(TraceJson, EmptyDocumentIsValid) {
  JsonValue trace = parseJson(renderChromeTrace(TraceDocument()), "trace");
  EXPECT_TRUE(eventsOf(trace).empty());
}

TEST(TraceJson, FormatsTimesExactlyAndNumbersShortest) {
  EXPECT_EQ(formatMicroseconds(0), "0.000");
  EXPECT_EQ(formatMicroseconds(1'234'567), "1234.567");
  EXPECT_EQ(formatMicroseconds(-500), "-0.500");
  // A monotonic clock some months after boot: a double would round this.
  EXPECT_EQ(formatMicroseconds(9'876'543'210'123'457), "9876543210123.457");
  EXPECT_EQ(formatJsonNumber(0.1), "0.1");
  EXPECT_EQ(formatJsonNumber(65536.0), "65536");
  EXPECT_EQ(std::strtod(formatJsonNumber(1.0 / 3.0).c_str(), nullptr),
            1.0 / 3.0);
  EXPECT_EQ(formatJsonNumber(std::nan("")), "null");
}

TEST(TraceFile, NamesOneFilePerRank) {
  EXPECT_EQ(traceFileForRank("trace.json", 0, 1), "trace.json");
  EXPECT_EQ(traceFileForRank("trace.json", 3, 4), "trace.rank3.json");
  EXPECT_EQ(traceFileForRank("out.v2/run.json", 1, 2), "out.v2/run.rank1.json");
  EXPECT_EQ(traceFileForRank("trace", 1, 2), "trace.rank1");
  EXPECT_EQ(traceFileForRank("t_%r.json", 5, 8), "t_5.json");
  EXPECT_EQ(traceFileForRank("%r/t_%r.json", 0, 1), "0/t_0.json");
}

TEST(Trace, RecordsOnlyTheChosenStepsAndWritesAtomically) {
  std::string directory = makeTemporaryDirectory();
  TraceOptions options = quietOptions(directory);
  options.firstStep = 2;
  options.lastStep = 3;
  {
    Trace trace(options);
    for (int64_t step = 1; step <= 5; ++step) {
      TraceStep traced(trace, step);
      EXPECT_EQ(trace.isRecording(), step >= 2 && step <= 3) << step;
      {
        TraceRange range(trace, "forward_backward");
        range.addInteger("micro_batch", 0);
      }
      trace.counter("loss scale", 1024.0 * static_cast<double>(step));
      trace.instant("marker");
    }
    EXPECT_FALSE(trace.isRecording());
    trace.finish();
  }
  EXPECT_EQ(listDirectory(directory), std::vector<std::string>{"trace.json"});
  JsonValue trace = parseJson(readFile(directory + "/trace.json"), "trace");
  std::vector<const JsonValue *> events = eventsOf(trace);
  EXPECT_EQ(namesOf(events),
            (std::vector<std::string>{"step 2", "forward_backward",
                                      "loss scale", "marker", "step 3",
                                      "forward_backward", "loss scale",
                                      "marker"}));
  EXPECT_EQ(events[1]->find("args")->find("micro_batch")->number, 0);
  EXPECT_EQ(events[2]->find("args")->find("value")->number, 2048);
  EXPECT_EQ(events[6]->find("args")->find("value")->number, 3072);
  const JsonValue &other = *trace.find("otherData");
  EXPECT_EQ(other.find("steps")->string, "2:3");
  EXPECT_EQ(other.find("steps_traced")->number, 2);
  EXPECT_EQ(other.find("gpu_activity")->string,
            "not collected (a host program)");
}

TEST(Trace, OpenEndedStepsRunToTheLastStep) {
  std::string directory = makeTemporaryDirectory();
  TraceOptions options = quietOptions(directory);
  options.firstStep = 4;
  options.lastStep = kTraceToLastStep;
  Trace trace(options);
  for (int64_t step = 1; step <= 6; ++step) {
    TraceStep traced(trace, step);
    TraceRange range(trace, "optimizer");
  }
  trace.finish();
  JsonValue file = parseJson(readFile(trace.getPath()), "trace");
  EXPECT_EQ(file.find("otherData")->find("steps")->string, "4:");
  EXPECT_EQ(file.find("otherData")->find("steps_traced")->number, 3);
}

TEST(Trace, OffByDefaultRecordsAndWritesNothing) {
  Trace trace;
  EXPECT_FALSE(trace.isEnabled());
  {
    TraceStep traced(trace, 2);
    EXPECT_FALSE(trace.isRecording());
    TraceRange range(trace, "forward_backward");
  }
  trace.finish();
  EXPECT_EQ(trace.getPath(), "");
}

TEST(Trace, EachRankWritesItsOwnFileNamedAfterItsRank) {
  std::string directory = makeTemporaryDirectory();
  for (int32_t rank = 0; rank < 2; ++rank) {
    TraceOptions options = quietOptions(directory);
    options.rank = rank;
    options.worldSize = 2;
    options.firstStep = 1;
    Trace trace(options);
    { TraceStep traced(trace, 1); }
    trace.finish();
  }
  for (int32_t rank = 0; rank < 2; ++rank) {
    JsonValue file = parseJson(
        readFile(directory + "/trace.rank" + std::to_string(rank) + ".json"),
        "trace");
    const JsonValue &first = file.find("traceEvents")->array.at(0);
    EXPECT_EQ(first.find("pid")->number, rank);
    EXPECT_EQ(first.find("args")->find("name")->string,
              "rank " + std::to_string(rank));
  }
}

TEST(Trace, OtherThreadsGetTracksOfTheirOwn) {
  std::string directory = makeTemporaryDirectory();
  TraceOptions options = quietOptions(directory);
  options.firstStep = 1;
  Trace trace(options);
  {
    TraceStep traced(trace, 1);
    TraceRange range(trace, "forward_backward");
    std::thread reducer([&] { TraceRange wait(trace, "reduce"); });
    reducer.join();
  }
  trace.finish();
  JsonValue file = parseJson(readFile(trace.getPath()), "trace");
  std::map<std::string, int64_t> trackOf;
  for (const JsonValue *event : eventsOf(file))
    trackOf[event->find("name")->string] =
        static_cast<int64_t>(event->find("tid")->number);
  EXPECT_EQ(trackOf["forward_backward"], kHostTrack);
  EXPECT_EQ(trackOf["reduce"], kHostTrack + 1);
  bool named = false;
  for (const JsonValue &event : file.find("traceEvents")->array)
    if (event.find("name")->string == "thread_name" &&
        event.find("tid")->number == kHostTrack + 1)
      named = event.find("args")->find("name")->string == "host thread 1";
  EXPECT_TRUE(named);
}

TEST(Trace, FailedRunStillWritesItsTrace) {
  std::string directory = makeTemporaryDirectory();
  TraceOptions options = quietOptions(directory);
  try {
    Trace trace(options);
    TraceStep traced(trace, 2);
    TraceRange range(trace, "forward_backward");
    fail("the program failed");
  } catch (const TrainError &) {
  }
  JsonValue file = parseJson(readFile(directory + "/trace.json"), "trace");
  std::vector<std::string> names = namesOf(eventsOf(file));
  EXPECT_EQ(names, (std::vector<std::string>{"step 2", "forward_backward",
                                             "run ended with an error"}));
}

TEST(Trace, UnwritableFileFailsBeforeTraining) {
  TraceOptions options;
  options.file = makeTemporaryDirectory() + "/missing/trace.json";
  try {
    Trace trace(options);
    FAIL() << "expected a TrainError";
  } catch (const TrainError &error) {
    EXPECT_NE(std::string(error.what()).find("missing/trace.json"),
              std::string::npos)
        << error.what();
  }
}

TEST(Trace, WithoutCuptiWarnsOnceAndKeepsTheHostRanges) {
  std::string directory = makeTemporaryDirectory();
  TraceOptions options = quietOptions(directory);
  options.captureGpu = true;
  options.cuptiLibraries = {directory + "/libcupti.so.13"};
  options.programName = "gpt2";
  std::FILE *warnings = std::tmpfile();
  ASSERT_NE(warnings, nullptr);
  options.warnings = warnings;
  {
    Trace trace(options);
    EXPECT_NE(trace.getGpuMissingReason(), "");
    for (int64_t step = 1; step <= 3; ++step) {
      TraceStep traced(trace, step);
      TraceRange range(trace, "forward_backward");
    }
    trace.finish();
  }
  std::rewind(warnings);
  std::string text;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), warnings))
    text += buffer;
  std::fclose(warnings);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_EQ(text.rfind("gpt2: warning: --trace: GPU activity will be missing", 0),
            0u)
      << text;
  // The reason: the library tried, or a build without CUPTI's headers.
  EXPECT_TRUE(text.find("libcupti.so.13") != std::string::npos ||
              text.find("without CUPTI") != std::string::npos)
      << text;
  JsonValue file = parseJson(readFile(directory + "/trace.json"), "trace");
  EXPECT_EQ(namesOf(eventsOf(file)),
            (std::vector<std::string>{"step 2", "forward_backward", "step 3",
                                      "forward_backward"}));
  EXPECT_EQ(file.find("otherData")->find("gpu_activity")->string.rfind(
                "missing: ", 0),
            0u);
}

const char *const kProgram = "train";

TEST(TraceFlags, ParsesTheFileAndTheSteps) {
  const char *defaults[] = {kProgram, "--trace", "t.json"};
  TrainOptions options = parseFlags(3, defaults);
  EXPECT_EQ(options.traceFile, "t.json");
  EXPECT_EQ(options.traceFirstStep, 2);
  EXPECT_EQ(options.traceLastStep, 4);

  const char *range[] = {kProgram, "--trace=t.json", "--trace-steps", "3:7"};
  options = parseFlags(4, range);
  EXPECT_EQ(options.traceFirstStep, 3);
  EXPECT_EQ(options.traceLastStep, 7);

  const char *open[] = {kProgram, "--trace-steps=5:"};
  options = parseFlags(2, open);
  EXPECT_EQ(options.traceFirstStep, 5);
  EXPECT_EQ(options.traceLastStep, kTraceToLastStep);

  const char *all[] = {kProgram, "--trace-steps", "all"};
  options = parseFlags(3, all);
  EXPECT_EQ(options.traceFirstStep, 1);
  EXPECT_EQ(options.traceLastStep, kTraceToLastStep);
}

TEST(TraceFlags, BecomeTheTraceOptionsOfARank) {
  const char *argv[] = {kProgram, "--trace", "t.json", "--trace-steps", "1:9"};
  TraceOptions options =
      traceOptionsFromFlags(parseFlags(5, argv), "gpt2", true, 2, 4);
  EXPECT_EQ(options.file, "t.json");
  EXPECT_EQ(options.firstStep, 1);
  EXPECT_EQ(options.lastStep, 9);
  EXPECT_EQ(options.rank, 2);
  EXPECT_EQ(options.worldSize, 4);
  EXPECT_TRUE(options.captureGpu);
  EXPECT_EQ(options.programName, "gpt2");
}

TEST(TraceFlags, RejectsMalformedSteps) {
  for (const char *value : {"3", "0:2", "4:2", "a:b", ":4", "2:x", ""}) {
    const char *argv[] = {kProgram, "--trace-steps", value};
    try {
      parseFlags(3, argv);
      ADD_FAILURE() << "accepted '" << value << "'";
    } catch (const TrainError &error) {
      EXPECT_EQ(error.getExitCode(), kUsageExitCode) << value;
      EXPECT_NE(std::string(error.what()).find("--trace-steps"),
                std::string::npos)
          << error.what();
    }
  }
  const char *empty[] = {kProgram, "--trace", ""};
  EXPECT_THROW(parseFlags(3, empty), TrainError);
}

TEST(TraceFlags, HelpDocumentsPerRankNames) {
  std::string help = usageText(kProgram);
  EXPECT_NE(help.find("--trace FILE.json"), std::string::npos);
  EXPECT_NE(help.find("%r"), std::string::npos);
  EXPECT_NE(help.find("--trace-steps A:B"), std::string::npos);
}

} // namespace
