//===- CommAbi.cpp - The C ABI of comm.h ----------------------------------===//
//
// Each exported function checks what this rank can check alone (tensors
// well formed, shapes consistent with the group size, a valid peer), then
// calls the backend. A CommError (or any exception) becomes `return 1` and
// this thread's tessera_comm_last_error(), prefixed with the collective and
// the rank, so a log of N ranks says who failed where.
//
//===----------------------------------------------------------------------===//

#include "CommBase.h"
#include "TensorBlocks.h"

#include <new>
#include <string>

namespace tessera::comm {
namespace {

thread_local std::string lastError;

[[noreturn]] void fail(const std::string &message) { throw CommError(message); }

void requireComm(const tessera_comm *comm) {
  if (!comm)
    fail("no communicator (NULL)");
}

/// Checks that `tensor` is well formed; returns it (const or not, as given).
template <typename Tensor>
Tensor &requireTensor(Tensor *tensor, const char *name) {
  if (!tensor)
    fail(std::string(name) + " is NULL");
  if (tensor->rank < 0 || tensor->rank > TESSERA_MAX_RANK)
    fail(std::string(name) + " has rank " + std::to_string(tensor->rank));
  if (dtypeBytes(tensor->dtype) == 0)
    fail(std::string(name) + " has unknown dtype " +
         std::to_string(tensor->dtype));
  for (int32_t d = 0; d < tensor->rank; ++d)
    if (tensor->shape[d] < 0)
      fail(std::string(name) + " " + describeTensor(*tensor) +
           " has a negative dim");
  if (!tensor->data && tensorElements(*tensor) > 0)
    fail(std::string(name) + " " + describeTensor(*tensor) + " has no data");
  return *tensor;
}

void requireAxis(const tessera_tensor &tensor, int32_t axis, const char *what) {
  if (axis < 0 || axis >= tensor.rank)
    fail(std::string(what) + " " + std::to_string(axis) +
         " is out of range for " + describeTensor(tensor));
}

void requireDivisible(const tessera_tensor &tensor, int32_t axis,
                      int32_t groupSize) {
  if (tensor.shape[axis] % groupSize != 0)
    fail("dim " + std::to_string(axis) + " of " + describeTensor(tensor) +
         " does not divide by the group size " + std::to_string(groupSize));
}

/// y must be x with dims scaled: dim `grown` times factor, dim `shrunk`
/// divided by it (either may be -1).
void requireResult(const tessera_tensor &x, const tessera_tensor &y,
                   int32_t grown, int32_t shrunk, int32_t factor) {
  tessera_tensor expected = x;
  if (shrunk >= 0)
    expected.shape[shrunk] /= factor;
  if (grown >= 0)
    expected.shape[grown] *= factor;
  bool same = x.dtype == y.dtype && expected.rank == y.rank;
  for (int32_t d = 0; same && d < y.rank; ++d)
    same = expected.shape[d] == y.shape[d];
  if (!same)
    fail("the result is " + describeTensor(y) + " but " + describeTensor(x) +
         " over " + std::to_string(factor) + " ranks gives " +
         describeTensor(expected));
}

void requirePeer(const tessera_comm &comm, int32_t peer) {
  if (peer < 0 || peer >= comm.size() || peer == comm.rank())
    fail("peer " + std::to_string(peer) + " is not another rank of " +
         comm.name() + " (ranks 0.." + std::to_string(comm.size() - 1) +
         ", this is " + std::to_string(comm.rank()) + ")");
}

template <typename Body>
int runCollective(const char *collective, const tessera_comm *comm,
                  Body &&body) {
  std::string where = std::string("tessera_comm_") + collective;
  if (comm)
    where +=
        " (rank " + std::to_string(comm->rank()) + " of " + comm->name() + ")";
  try {
    requireComm(comm);
    body();
    return 0;
  } catch (const CommError &error) {
    lastError = where + ": " + error.what();
  } catch (const std::bad_alloc &) {
    lastError = where + ": out of memory";
  } catch (const std::exception &error) {
    lastError = where + ": internal error: " + error.what();
  }
  return 1;
}

} // namespace
} // namespace tessera::comm

using namespace tessera::comm;

extern "C" {

const char *tessera_comm_last_error(void) { return lastError.c_str(); }

int32_t tessera_comm_size(const tessera_comm *comm) {
  return comm ? comm->size() : 0;
}

int32_t tessera_comm_rank(const tessera_comm *comm) {
  return comm ? comm->rank() : -1;
}

int tessera_comm_all_reduce(tessera_comm *comm, tessera_tensor *x, int32_t op,
                            void *stream) {
  return runCollective("all_reduce", comm, [&] {
    tessera_tensor &tensor = requireTensor(x, "x");
    if (op != TESSERA_REDUCE_SUM && op != TESSERA_REDUCE_MAX)
      fail("unknown reduction " + std::to_string(op));
    if (tensor.dtype == TESSERA_BOOL && op == TESSERA_REDUCE_SUM)
      fail("a sum of bool tensors is not defined (use max for 'any')");
    comm->allReduce(tensor, static_cast<tessera_reduce_op>(op), stream);
  });
}

int tessera_comm_all_gather(tessera_comm *comm, const tessera_tensor *x,
                            tessera_tensor *y, int32_t axis, void *stream) {
  return runCollective("all_gather", comm, [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireAxis(input, axis, "axis");
    requireResult(input, output, axis, -1, comm->size());
    comm->allGather(input, output, axis, stream);
  });
}

int tessera_comm_reduce_scatter(tessera_comm *comm, const tessera_tensor *x,
                                tessera_tensor *y, int32_t axis, void *stream) {
  return runCollective("reduce_scatter", comm, [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireAxis(input, axis, "axis");
    requireDivisible(input, axis, comm->size());
    if (input.dtype == TESSERA_BOOL)
      fail("a sum of bool tensors is not defined");
    requireResult(input, output, -1, axis, comm->size());
    comm->reduceScatter(input, output, axis, stream);
  });
}

int tessera_comm_all_to_all(tessera_comm *comm, const tessera_tensor *x,
                            tessera_tensor *y, int32_t split_axis,
                            int32_t concat_axis, void *stream) {
  return runCollective("all_to_all", comm, [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireAxis(input, split_axis, "split_axis");
    requireAxis(input, concat_axis, "concat_axis");
    requireDivisible(input, split_axis, comm->size());
    requireResult(input, output, concat_axis, split_axis, comm->size());
    comm->allToAll(input, output, split_axis, concat_axis, stream);
  });
}

int tessera_comm_send(tessera_comm *comm, const tessera_tensor *x, int32_t peer,
                      void *stream) {
  return runCollective("send", comm, [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    requirePeer(*comm, peer);
    comm->send(input, peer, stream);
  });
}

int tessera_comm_recv(tessera_comm *comm, tessera_tensor *y, int32_t peer,
                      void *stream) {
  return runCollective("recv", comm, [&] {
    tessera_tensor &output = requireTensor(y, "y");
    requirePeer(*comm, peer);
    comm->recv(output, peer, stream);
  });
}

int tessera_comm_group_start(tessera_comm *comm) {
  return runCollective("group_start", comm, [&] { comm->groupStart(); });
}

int tessera_comm_group_end(tessera_comm *comm) {
  return runCollective("group_end", comm, [&] { comm->groupEnd(); });
}

} // extern "C"
