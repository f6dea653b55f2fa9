//===- HostCompiler.h - C++ of the step -> training executable ---*- C++ -*-===//
//
// The link step of `tesserac --target cpu|cuda -o train`: the translation
// unit that tess-lower-to-emitc produced is compiled by the host C++ compiler
// and linked with the runtime's static libraries (for cuda also the CUDA
// runtime, statically, and cuBLASLt: no nvcc is needed to link).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LOWERING_HOSTCOMPILER_H
#define TESSERA_LOWERING_HOSTCOMPILER_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace tessera::lowering {

struct HostCompileOptions {
  /// The compiler: a name looked up in PATH or a path (`c++`, $CXX, --cxx).
  std::string compiler = "c++";
  std::string sourcePath;
  std::string outputPath;
  /// runtime/include: program.h, cpu_kernels.h, lowering_support.h.
  std::string runtimeIncludeDirectory;
  /// The runtime's static libraries, in link order (driver, then kernels).
  std::vector<std::string> libraries;
  /// More header folders (the CUDA toolkit's, for cuda_runtime_api.h).
  std::vector<std::string> includeDirectories;
  /// Arguments after the libraries, before -lpthread -lm (the CUDA
  /// libraries, -ldl, -lrt, an rpath).
  std::vector<std::string> linkArguments;
};

/// Compiles and links. A failure is an error carrying the command and the
/// compiler's output.
llvm::Error compileExecutable(const HostCompileOptions &options);

} // namespace tessera::lowering

#endif // TESSERA_LOWERING_HOSTCOMPILER_H
