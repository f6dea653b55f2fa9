//===- HostReduction.h - Reducing ranks' tensors in host memory -*- C++ -*-===//
//
// The in-process backend's arithmetic: out = op(in[0], in[1], ..., in[N-1])
// elementwise, folded strictly in rank order so every rank that computes it
// gets the same bits. Floats accumulate in f32 (bf16 and f16 too, rounded
// once at the end; f64 in f64), integers in int64; max propagates NaN as
// torch.maximum does.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_HOSTREDUCTION_H
#define TESSERA_RUNTIME_COMM_HOSTREDUCTION_H

#include "tessera/runtime/comm.h"

#include <cstdint>
#include <vector>

namespace tessera::comm {

void reduceInRankOrder(const std::vector<const void *> &inputs, void *output,
                       int64_t elements, int32_t dtype, tessera_reduce_op op);

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_HOSTREDUCTION_H
