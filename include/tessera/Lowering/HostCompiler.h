//===- HostCompiler.h - C++ of the step -> training executable ---*- C++ -*-===//
//
// The link step of `tesserac --target cpu -o train`: the translation unit
// that tess-lower-to-emitc produced is compiled by the host C++ compiler and
// linked with the runtime's static libraries.
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
};

/// Compiles and links. A failure is an error carrying the command and the
/// compiler's output.
llvm::Error compileExecutable(const HostCompileOptions &options);

} // namespace tessera::lowering

#endif // TESSERA_LOWERING_HOSTCOMPILER_H
