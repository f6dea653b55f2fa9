//===- HostCompiler.cpp - C++ of the step -> training executable ---------===//

#include "tessera/Lowering/HostCompiler.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

namespace tessera::lowering {

llvm::Error compileExecutable(const HostCompileOptions &options) {
  std::string compiler = options.compiler;
  if (compiler.find('/') == std::string::npos) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(compiler);
    if (!found)
      return llvm::createStringError(
          "the C++ compiler '" + compiler +
          "' was not found in PATH (set $CXX or pass --cxx)");
    compiler = *found;
  } else if (!llvm::sys::fs::can_execute(compiler)) {
    return llvm::createStringError("the C++ compiler '" + compiler +
                                   "' does not exist or is not executable");
  }
  for (const std::string &library : options.libraries)
    if (!llvm::sys::fs::exists(library))
      return llvm::createStringError(
          "the runtime library '" + library +
          "' does not exist (build tessera_runtime_train and "
          "tessera_runtime_cpu, and tessera_runtime_cuda for --target cuda, "
          "or pass --runtime-dir)");

  // -O1: the kernels are in the prebuilt libraries and the generated code is
  // straight-line calls (on the GPU, recorded once into a CUDA graph), so
  // the optimizer has little to gain, while -O2's passes over one function
  // of tens of thousands of lines grew superlinearly with depth: Llama 3 8B's
  // step (32 layers, 24k lines) took 140 s at -O2, 8.7 s at -O1 on 2 cores.
  std::vector<std::string> arguments = {
      compiler, "-O1", "-std=c++17", "-I" + options.runtimeIncludeDirectory,
      options.sourcePath, "-o", options.outputPath};
  for (const std::string &directory : options.includeDirectories)
    arguments.insert(arguments.begin() + 4, "-I" + directory);
  arguments.insert(arguments.end(), options.libraries.begin(),
                   options.libraries.end());
  arguments.insert(arguments.end(), options.linkArguments.begin(),
                   options.linkArguments.end());
  arguments.push_back("-lpthread");
  arguments.push_back("-lm");

  llvm::SmallString<128> logPath;
  if (std::error_code code = llvm::sys::fs::createTemporaryFile(
          "tesserac-cxx", "log", logPath))
    return llvm::createStringError("cannot create a temporary file: " +
                                   code.message());
  std::vector<llvm::StringRef> argumentRefs(arguments.begin(), arguments.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt,
                                                llvm::StringRef(logPath),
                                                llvm::StringRef(logPath)};
  std::string executionError;
  int status = llvm::sys::ExecuteAndWait(compiler, argumentRefs, std::nullopt,
                                         redirects, 0, 0, &executionError);
  // The compiler's first lines name the first problem; a broken lowering
  // can produce thousands more, so keep the head.
  constexpr size_t kMaxLines = 60;
  std::string output;
  if (auto buffer = llvm::MemoryBuffer::getFile(logPath)) {
    llvm::StringRef rest = (*buffer)->getBuffer();
    size_t lines = 0;
    while (!rest.empty() && lines < kMaxLines) {
      auto [line, tail] = rest.split('\n');
      output += line.str() + "\n";
      rest = tail;
      ++lines;
    }
    if (!rest.empty())
      output += "... (" + std::to_string(rest.count('\n') + 1) +
                " more lines)\n";
  }
  llvm::sys::fs::remove(logPath);
  if (status == 0)
    return llvm::Error::success();
  std::string command;
  for (const std::string &argument : arguments)
    command += (command.empty() ? "" : " ") + argument;
  return llvm::createStringError(
      "the C++ compiler failed" +
      (executionError.empty() ? "" : " (" + executionError + ")") +
      " (exit " + std::to_string(status) + "):\n  " + command + "\n" + output);
}

} // namespace tessera::lowering
