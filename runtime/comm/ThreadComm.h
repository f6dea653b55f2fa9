//===- ThreadComm.h - One thread rank's handle on a ThreadGroup -*- C++ -*-===//

#ifndef TESSERA_RUNTIME_COMM_THREADCOMM_H
#define TESSERA_RUNTIME_COMM_THREADCOMM_H

#include "CommBase.h"
#include "ThreadGroup.h"

namespace tessera::comm {

class ThreadComm : public tessera_comm {
public:
  ThreadComm(ThreadGroup &group, int32_t rank);

  int32_t size() const override { return group.size(); }
  int32_t rank() const override { return groupRank; }
  const std::string &name() const override { return group.name(); }
  StreamOps &streamOps() override;

  void allReduce(tessera_tensor &x, tessera_reduce_op op,
                 void *stream) override;
  void allGather(const tessera_tensor &x, tessera_tensor &y, int32_t axis,
                 void *stream) override;
  void reduceScatter(const tessera_tensor &x, tessera_tensor &y, int32_t axis,
                     void *stream) override;
  void allToAll(const tessera_tensor &x, tessera_tensor &y, int32_t splitAxis,
                int32_t concatAxis, void *stream) override;
  void send(const tessera_tensor &x, int32_t peer, void *stream) override;
  void recv(tessera_tensor &y, int32_t peer, void *stream) override;

private:
  ThreadGroup &group;
  int32_t groupRank;

  template <typename Compute>
  void collective(const CollectivePost &post, tessera_tensor &output,
                  Compute &&compute);
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_THREADCOMM_H
