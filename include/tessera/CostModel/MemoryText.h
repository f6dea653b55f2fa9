//===- MemoryText.h - bytes as the planners' messages say them --*- C++ -*-===//
//
// A device's limit or a plan's need in an error message: GiB from one GiB
// up, else MiB, so a tiny model's (the lit tests' sub-MiB devices) never
// reads "0.0 GiB". One spelling for the mesh search's and the pipeline
// search's messages, which --devices prints side by side.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_MEMORYTEXT_H
#define TESSERA_COSTMODEL_MEMORYTEXT_H

#include <string>

namespace tessera::cost {

/// `bytes` as "12.34 GiB" (one GiB and up) or "0.394 MiB".
std::string memoryText(double bytes);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_MEMORYTEXT_H
