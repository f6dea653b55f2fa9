//===- ThreadComm.cpp - comm.h's collectives between thread ranks ---------===//
//
// Each collective: post the arguments, wait for every rank's (barrier 1),
// check that all ranks called the same collective with the same dtype and
// shapes (every rank sees the same posts, so every rank reports the same
// mismatch), compute this rank's result from the other ranks' inputs into a
// private buffer, wait until everyone has read (barrier 2), then write the
// result. The private buffer is what makes in-place calls (all_reduce, an
// all_gather whose x lies inside y) safe: nobody writes before everybody
// has read.
//
//===----------------------------------------------------------------------===//

#include "ThreadComm.h"

#include "HostReduction.h"
#include "TensorBlocks.h"

#include <cstring>
#include <sstream>

namespace tessera::comm {
namespace {

bool sameShape(const tessera_tensor &a, const tessera_tensor &b) {
  if (a.dtype != b.dtype || a.rank != b.rank)
    return false;
  for (int32_t d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d])
      return false;
  return true;
}

bool samePost(const CollectivePost &a, const CollectivePost &b) {
  return std::strcmp(a.collective, b.collective) == 0 && sameShape(a.x, b.x) &&
         sameShape(a.y, b.y) && a.op == b.op && a.axis == b.axis &&
         a.secondAxis == b.secondAxis;
}

std::string describePost(const CollectivePost &post) {
  std::ostringstream text;
  text << post.collective << "(" << describeTensor(post.x);
  if (post.y.rank > 0 || post.y.data)
    text << " -> " << describeTensor(post.y);
  if (std::strcmp(post.collective, "all_reduce") == 0)
    text << (post.op == TESSERA_REDUCE_SUM ? ", sum" : ", max");
  else
    text << ", axis " << post.axis;
  if (std::strcmp(post.collective, "all_to_all") == 0)
    text << ", concat axis " << post.secondAxis;
  text << ")";
  return text.str();
}

} // namespace

ThreadComm::ThreadComm(ThreadGroup &group, int32_t rank)
    : group(group), groupRank(rank) {}

StreamOps &ThreadComm::streamOps() { return hostStreamOps(); }

template <typename Compute>
void ThreadComm::collective(const CollectivePost &post, tessera_tensor &output,
                            Compute &&compute) {
  group.postAndWait(groupRank, post);
  const std::vector<CollectivePost> &posts = group.currentPosts();
  std::string mismatch;
  for (size_t r = 1; r < posts.size() && mismatch.empty(); ++r)
    if (!samePost(posts[0], posts[r])) {
      std::ostringstream text;
      text << "mismatched collectives on " << group.name() << ":";
      for (size_t q = 0; q < posts.size(); ++q)
        text << (q ? ";" : "") << " rank " << q << " calls "
             << describePost(posts[q]);
      mismatch = text.str();
    }
  std::vector<unsigned char> result;
  if (mismatch.empty()) {
    result.resize(tensorBytes(output));
    compute(posts, result.data());
  }
  group.finishCollective(groupRank, post.collective);
  if (!mismatch.empty())
    throw CommError(mismatch);
  if (!result.empty())
    std::memcpy(output.data, result.data(), result.size());
}

void ThreadComm::allReduce(tessera_tensor &x, tessera_reduce_op op, void *) {
  CollectivePost post{"all_reduce", x, {}, op, 0, 0};
  collective(
      post, x, [&](const std::vector<CollectivePost> &posts, void *result) {
        std::vector<const void *> inputs;
        for (const CollectivePost &each : posts)
          inputs.push_back(each.x.data);
        reduceInRankOrder(inputs, result, tensorElements(x), x.dtype, op);
      });
}

void ThreadComm::allGather(const tessera_tensor &x, tessera_tensor &y,
                           int32_t axis, void *) {
  CollectivePost post{"all_gather", x, y, 0, axis, 0};
  collective(post, y,
             [&](const std::vector<CollectivePost> &posts, void *result) {
               BlockGeometry geometry = blockGeometry(y, axis, size());
               for (size_t r = 0; r < posts.size(); ++r)
                 unpackBlock(posts[r].x.data, geometry, static_cast<int64_t>(r),
                             result);
             });
}

void ThreadComm::reduceScatter(const tessera_tensor &x, tessera_tensor &y,
                               int32_t axis, void *) {
  CollectivePost post{"reduce_scatter", x, y, 0, axis, 0};
  collective(post, y,
             [&](const std::vector<CollectivePost> &posts, void *result) {
               BlockGeometry geometry = blockGeometry(x, axis, size());
               size_t blockBytes = tensorBytes(y);
               std::vector<unsigned char> blocks(blockBytes * posts.size());
               std::vector<const void *> inputs;
               for (size_t r = 0; r < posts.size(); ++r) {
                 packBlock(posts[r].x.data, geometry, groupRank,
                           blocks.data() + r * blockBytes);
                 inputs.push_back(blocks.data() + r * blockBytes);
               }
               reduceInRankOrder(inputs, result, tensorElements(y), y.dtype,
                                 TESSERA_REDUCE_SUM);
             });
}

void ThreadComm::allToAll(const tessera_tensor &x, tessera_tensor &y,
                          int32_t splitAxis, int32_t concatAxis, void *) {
  CollectivePost post{"all_to_all", x, y, 0, splitAxis, concatAxis};
  collective(
      post, y, [&](const std::vector<CollectivePost> &posts, void *result) {
        BlockGeometry sent = blockGeometry(x, splitAxis, size());
        BlockGeometry received = blockGeometry(y, concatAxis, size());
        std::vector<unsigned char> block(
            static_cast<size_t>(sent.blockElements()) * sent.elementBytes);
        for (size_t r = 0; r < posts.size(); ++r) {
          packBlock(posts[r].x.data, sent, groupRank, block.data());
          unpackBlock(block.data(), received, static_cast<int64_t>(r), result);
        }
      });
}

void ThreadComm::send(const tessera_tensor &x, int32_t peer, void *) {
  group.send(groupRank, peer, x);
}

void ThreadComm::recv(tessera_tensor &y, int32_t peer, void *) {
  group.recv(groupRank, peer, y);
}

} // namespace tessera::comm
