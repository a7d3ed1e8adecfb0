// Staging plans (src/device/staging_plan.h): what is copied, where the host
// algorithm finds its buffers, and how copies are cut into chunks.
#include <gtest/gtest.h>

#include <numeric>

#include "src/device/staging_plan.h"

namespace loom::cuda {
namespace {

using algo::CollType;

StagingInputs inputs(CollType type, size_t count, bool send, bool recv, bool inPlace = false, int rank = 1,
                     int root = 0) {
  StagingInputs in;
  in.type = type;
  in.count = count;
  in.elemBytes = 4;
  in.nranks = 4;
  in.rank = rank;
  in.root = root;
  in.inPlace = inPlace;
  in.sendStaged = send;
  in.recvStaged = recv;
  return in;
}

size_t total(const std::vector<StagedCopy>& copies) {
  return std::accumulate(copies.begin(), copies.end(), size_t{0},
                         [](size_t s, const StagedCopy& c) { return s + c.bytes; });
}

TEST(CudaHostStagingPlan, AllReduceStagesInputInAndOutputOut) {
  const StagingPlan p = planStaging(inputs(CollType::kAllReduce, 1000, true, true));
  EXPECT_TRUE(p.send.staged);
  EXPECT_TRUE(p.recv.staged);
  EXPECT_EQ(p.send.offset, 0u);
  EXPECT_EQ(p.recv.offset, 4096u);  // 4000 bytes, 256-byte aligned
  EXPECT_EQ(p.stagingBytes, 8192u);
  ASSERT_EQ(p.copyIn.size(), 1u);
  EXPECT_TRUE(p.copyIn[0].userIsSend);
  EXPECT_EQ(p.copyIn[0].bytes, 4000u);
  ASSERT_EQ(p.copyOut.size(), 1u);
  EXPECT_FALSE(p.copyOut[0].userIsSend);
  EXPECT_EQ(p.copyOut[0].stagingOffset, 4096u);
}

TEST(CudaHostStagingPlan, HostSideOfAMixedCallIsUsedInPlace) {
  const StagingPlan hostSend = planStaging(inputs(CollType::kAllReduce, 100, false, true));
  EXPECT_FALSE(hostSend.send.staged);
  EXPECT_TRUE(hostSend.copyIn.empty());
  EXPECT_EQ(hostSend.recv.offset, 0u);
  EXPECT_EQ(total(hostSend.copyOut), 400u);
  const StagingPlan hostRecv = planStaging(inputs(CollType::kAllReduce, 100, true, false));
  EXPECT_FALSE(hostRecv.recv.staged);
  EXPECT_TRUE(hostRecv.copyOut.empty());
  EXPECT_EQ(total(hostRecv.copyIn), 400u);
  EXPECT_FALSE(planStaging(inputs(CollType::kAllReduce, 100, false, false)).staged());
  EXPECT_FALSE(planStaging(inputs(CollType::kAllReduce, 0, true, true)).staged());
}

TEST(CudaHostStagingPlan, CopiesAreCutIntoChunksThatTileTheBuffer) {
  StagingInputs in = inputs(CollType::kAllReduce, (10u << 20) / 4, true, true);
  in.copyChunkBytes = 4u << 20;
  const StagingPlan p = planStaging(in);
  ASSERT_EQ(p.copyIn.size(), 3u);  // 4 + 4 + 2 MiB
  size_t next = 0;
  for (const StagedCopy& c : p.copyIn) {
    EXPECT_EQ(c.userOffset, next);
    EXPECT_EQ(c.stagingOffset, next);  // send region at 0
    EXPECT_LE(c.bytes, in.copyChunkBytes);
    next += c.bytes;
  }
  EXPECT_EQ(next, 10u << 20);
  ASSERT_EQ(p.copyOut.size(), 3u);
  EXPECT_EQ(p.copyOut[2].stagingOffset, p.recv.offset + (8u << 20));
  EXPECT_EQ(p.copyOut[2].bytes, 2u << 20);
}

TEST(CudaHostStagingPlan, InPlaceAllReduceUsesOneRegion) {
  const StagingPlan p = planStaging(inputs(CollType::kAllReduce, 64, true, true, true));
  EXPECT_EQ(p.send.offset, p.recv.offset);
  EXPECT_EQ(p.stagingBytes, 256u);
  EXPECT_EQ(total(p.copyIn), 256u);
  EXPECT_EQ(total(p.copyOut), 256u);
}

TEST(CudaHostStagingPlan, BroadcastReadsOnlyOnTheRoot) {
  const StagingPlan root = planStaging(inputs(CollType::kBroadcast, 10, true, true, false, 0, 0));
  EXPECT_EQ(total(root.copyIn), 40u);
  EXPECT_EQ(total(root.copyOut), 40u);
  const StagingPlan other = planStaging(inputs(CollType::kBroadcast, 10, true, true, false, 2, 0));
  EXPECT_FALSE(other.send.staged);  // never read: keeps the user's pointer
  EXPECT_TRUE(other.copyIn.empty());
  EXPECT_EQ(total(other.copyOut), 40u);
  // In place: the root's buffer is only its input, the others' only their output.
  const StagingPlan rootInPlace = planStaging(inputs(CollType::kBroadcast, 10, true, true, true, 0, 0));
  EXPECT_EQ(total(rootInPlace.copyIn), 40u);
  EXPECT_TRUE(rootInPlace.copyOut.empty());
  const StagingPlan otherInPlace = planStaging(inputs(CollType::kBroadcast, 10, true, true, true, 3, 0));
  EXPECT_TRUE(otherInPlace.copyIn.empty());
  EXPECT_EQ(total(otherInPlace.copyOut), 40u);
}

TEST(CudaHostStagingPlan, ReduceWritesOnlyOnTheRoot) {
  const StagingPlan root = planStaging(inputs(CollType::kReduce, 10, true, true, false, 2, 2));
  EXPECT_EQ(total(root.copyOut), 40u);
  const StagingPlan other = planStaging(inputs(CollType::kReduce, 10, true, true, false, 1, 2));
  EXPECT_FALSE(other.recv.staged);
  EXPECT_TRUE(other.copyOut.empty());
  EXPECT_EQ(total(other.copyIn), 40u);
  const StagingPlan otherInPlace = planStaging(inputs(CollType::kReduce, 10, true, true, true, 1, 2));
  EXPECT_EQ(total(otherInPlace.copyIn), 40u);
  EXPECT_TRUE(otherInPlace.copyOut.empty());
}

TEST(CudaHostStagingPlan, AllGatherAndReduceScatterSizesAndInPlaceBlocks) {
  // 4 ranks, rank 1, 8 elements of 4 bytes per block.
  const StagingPlan ag = planStaging(inputs(CollType::kAllGather, 8, true, true));
  EXPECT_EQ(total(ag.copyIn), 32u);
  EXPECT_EQ(total(ag.copyOut), 128u);
  const StagingPlan rs = planStaging(inputs(CollType::kReduceScatter, 8, true, true));
  EXPECT_EQ(total(rs.copyIn), 128u);
  EXPECT_EQ(total(rs.copyOut), 32u);

  // All-gather in place: sendbuff is block 1 of recvbuff: copy in only that block.
  const StagingPlan agIn = planStaging(inputs(CollType::kAllGather, 8, true, true, true));
  ASSERT_EQ(agIn.copyIn.size(), 1u);
  EXPECT_FALSE(agIn.copyIn[0].userIsSend);
  EXPECT_EQ(agIn.copyIn[0].userOffset, 32u);
  EXPECT_EQ(agIn.copyIn[0].bytes, 32u);
  EXPECT_EQ(agIn.send.offset, agIn.recv.offset + 32u);
  EXPECT_EQ(total(agIn.copyOut), 128u);
  // Reduce-scatter in place: recvbuff is block 1 of sendbuff: copy out only that block.
  const StagingPlan rsIn = planStaging(inputs(CollType::kReduceScatter, 8, true, true, true));
  EXPECT_EQ(total(rsIn.copyIn), 128u);
  ASSERT_EQ(rsIn.copyOut.size(), 1u);
  EXPECT_EQ(rsIn.copyOut[0].userOffset, 32u);
  EXPECT_EQ(rsIn.copyOut[0].bytes, 32u);
  EXPECT_EQ(rsIn.recv.offset, rsIn.send.offset + 32u);
}

TEST(CudaHostStagingPlan, InPlaceFollowsNcclConventions) {
  float buf[64];
  algo::CollArgs a;
  a.count = 8;
  a.dtype = DataType::kFloat32;
  a.type = CollType::kAllGather;
  a.recvbuf = buf;
  a.sendbuf = buf + 2 * 8;
  EXPECT_TRUE(isInPlace(a, 2));
  EXPECT_FALSE(isInPlace(a, 1));
  a.type = CollType::kReduceScatter;
  a.sendbuf = buf;
  a.recvbuf = buf + 3 * 8;
  EXPECT_TRUE(isInPlace(a, 3));
  EXPECT_FALSE(isInPlace(a, 0));
  a.type = CollType::kAllReduce;
  a.recvbuf = buf;
  EXPECT_TRUE(isInPlace(a, 0));
}

TEST(CudaHostStagingPlan, SendRecvStagesEachDeviceOpInItsOwnRegion) {
  int a[10], b[100], c[3];
  std::vector<algo::P2POp> ops = {algo::P2POp::send(1, a, sizeof a), algo::P2POp::recv(1, b, sizeof b),
                                  algo::P2POp::recv(2, c, sizeof c), algo::P2POp::send(2, c, 0)};
  const P2PStagingPlan p = planP2PStaging(ops, {true, false, true, true}, 16);
  EXPECT_TRUE(p.ops[0].staged);
  EXPECT_FALSE(p.ops[1].staged);  // host memory: used where it is
  EXPECT_TRUE(p.ops[2].staged);
  EXPECT_FALSE(p.ops[3].staged);  // nothing to move
  EXPECT_EQ(p.ops[0].offset, 0u);
  EXPECT_EQ(p.ops[2].offset, 256u);
  EXPECT_EQ(p.stagingBytes, 512u);
  ASSERT_EQ(p.copyIn.size(), 3u);  // 40 bytes in chunks of 16
  EXPECT_EQ(p.copyInOp, (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(p.copyIn[2].bytes, 8u);
  ASSERT_EQ(p.copyOut.size(), 1u);
  EXPECT_EQ(p.copyOutOp[0], 2u);
  EXPECT_EQ(p.copyOut[0].stagingOffset, 256u);
}

}  // namespace
}  // namespace loom::cuda
