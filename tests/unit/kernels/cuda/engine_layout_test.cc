// The device engine's layout, views and call validation.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/engine/engine_layout.h"

namespace loom::kernels::cuda::engine {
namespace {

TEST(EngineLayout, RejectsOutOfRangeShapes) {
  EXPECT_NE(engineLayoutError(0, 1, 2, 64), nullptr);
  EXPECT_NE(engineLayoutError(kMaxRanks + 1, 1, 2, 64), nullptr);
  EXPECT_NE(engineLayoutError(2, 0, 2, 64), nullptr);
  EXPECT_NE(engineLayoutError(2, kMaxChannels + 1, 2, 64), nullptr);
  EXPECT_NE(engineLayoutError(2, 1, 1, 64), nullptr);
  EXPECT_NE(engineLayoutError(2, 1, 2, 0), nullptr);
  EXPECT_EQ(engineLayoutError(2, 1, 2, 64), nullptr);
  EXPECT_NE(engineLayoutError(2, 1, 2, 64, 0), nullptr);
  EXPECT_EQ(engineLayout(0, 1, 2, 64).bytes, 0u);
}

// Every connection's FIFO, tail and head are where the peer's view expects
// them, no two parts overlap, and everything lies inside the allocation.
TEST(EngineLayout, ViewsOfPeersAgreeAndPartsDoNotOverlap) {
  const int n = 3, channels = 2;
  const EngineLayout layout = engineLayout(n, channels, 3, 100, 70);
  EXPECT_EQ(layout.slotBytes, 112u);
  EXPECT_EQ(layout.llSlotBytes, 96u);
  std::vector<std::vector<unsigned char>> memory(n, std::vector<unsigned char>(layout.bytes));
  std::vector<void*> bases;
  for (auto& m : memory) bases.push_back(m.data());
  std::vector<EngineView> views;
  for (int r = 0; r < n; ++r) views.push_back(makeEngineView(layout, r, bases.data()));
  auto inside = [&](int owner, const void* p, size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(bases[static_cast<size_t>(owner)]);
    const auto* q = static_cast<const unsigned char*>(p);
    return q >= b && q + bytes <= b + layout.bytes;
  };
  std::set<const void*> starts;
  const size_t fifoBytes = 3 * layout.slotBytes;
  for (int c = 0; c < channels; ++c)
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) {
        const EngineSendConnection& send = views[static_cast<size_t>(s)].send[c][d];
        const EngineRecvConnection& recv = views[static_cast<size_t>(d)].recv[c][s];
        EXPECT_EQ(send.fifo, recv.fifo);
        EXPECT_EQ(send.tail, recv.tail);
        EXPECT_EQ(send.head, recv.head);
        EXPECT_TRUE(inside(d, recv.fifo, fifoBytes));
        EXPECT_TRUE(inside(d, recv.tail, 8));
        EXPECT_TRUE(inside(s, send.head, 8));
        EXPECT_TRUE(inside(s, send.step, 8));
        EXPECT_TRUE(inside(d, recv.step, 8));
        EXPECT_EQ(reinterpret_cast<uintptr_t>(recv.fifo) % 16, reinterpret_cast<uintptr_t>(bases[0]) % 16);
        // LL: the lines in the receiver's allocation, the LL head in the sender's, both LL steps on their side.
        EXPECT_EQ(send.llLines, recv.llLines);
        EXPECT_EQ(send.llHead, recv.llHead);
        EXPECT_TRUE(inside(d, recv.llLines, 3 * layout.llSlotBytes));
        EXPECT_TRUE(inside(s, send.llHead, 8));
        EXPECT_TRUE(inside(s, send.llStep, 8));
        EXPECT_TRUE(inside(d, recv.llStep, 8));
        EXPECT_EQ(reinterpret_cast<uintptr_t>(recv.llLines) % 8, 0u);
        // The FIFO and the LL slots of one connection do not overlap.
        const auto* fifoEnd = recv.fifo + fifoBytes;
        const auto* llStart = reinterpret_cast<const unsigned char*>(recv.llLines);
        EXPECT_TRUE(llStart >= fifoEnd || llStart + 3 * layout.llSlotBytes <= recv.fifo);
        for (const void* p : {static_cast<const void*>(recv.llLines), static_cast<const void*>(send.llHead),
                              static_cast<const void*>(send.llStep), static_cast<const void*>(recv.llStep)})
          EXPECT_TRUE(starts.insert(p).second) << "two LL parts start at the same address";
        for (const void* p : {static_cast<const void*>(recv.fifo), static_cast<const void*>(recv.tail),
                              static_cast<const void*>(send.head), static_cast<const void*>(send.step),
                              static_cast<const void*>(recv.step)})
          EXPECT_TRUE(starts.insert(p).second) << "two parts start at the same address";
      }
}

EngineCall validAllReduce() {
  static float data[4];
  EngineCall call;
  call.op = EngineOp::kAllReduce;
  call.send = data;
  call.recv = data;
  call.count = 4;
  return call;
}

TEST(EngineCallError, AcceptsValidCalls) {
  EXPECT_EQ(engineCallError(validAllReduce(), 4), nullptr);
  EngineCall empty = validAllReduce();
  empty.send = empty.recv = nullptr;
  empty.count = 0;
  EXPECT_EQ(engineCallError(empty, 4), nullptr);
  EngineCall p2p;
  p2p.op = EngineOp::kSendRecv;
  EXPECT_EQ(engineCallError(p2p, 2), nullptr);
}

TEST(EngineCallError, RejectsBadCalls) {
  struct Bad {
    const char* what;
    EngineCall call;
    int nranks;
    int rank;
  };
  std::vector<Bad> bad;
  auto add = [&](const char* what, auto mutate, int nranks = 4, int rank = -1) {
    EngineCall c = validAllReduce();
    mutate(c);
    bad.push_back({what, c, nranks, rank});
  };
  add("too many ranks", [](EngineCall&) {}, kMaxRanks + 1);
  add("no ranks", [](EngineCall&) {}, 0);
  add("null send", [](EngineCall& c) { c.send = nullptr; });
  add("null recv", [](EngineCall& c) { c.recv = nullptr; });
  add("root out of range", [](EngineCall& c) { c.op = EngineOp::kBroadcast; c.root = 4; });
  add("negative root", [](EngineCall& c) { c.op = EngineOp::kReduce; c.root = -1; });
  add("broadcast root without send", [](EngineCall& c) { c.op = EngineOp::kBroadcast; c.root = 1; c.send = nullptr; },
      4, 1);
  add("reduce root without recv", [](EngineCall& c) { c.op = EngineOp::kReduce; c.root = 2; c.recv = nullptr; }, 4,
      2);
  add("bad type", [](EngineCall& c) { c.type = static_cast<DataType>(12); });
  add("bad op", [](EngineCall& c) { c.redOp = static_cast<RedOp>(9); });
  add("bad collective", [](EngineCall& c) { c.op = static_cast<EngineOp>(40); });
  add("avg with a scalar", [](EngineCall& c) { c.redOp = RedOp::kAvg; c.post = PostOp::kMultiplyByScalar; });
  add("too many channels", [](EngineCall& c) { c.channels = kMaxChannels + 1; });
  add("misaligned", [](EngineCall& c) { c.send = static_cast<const unsigned char*>(c.send) + 1; });
  add("all-to-all in place", [](EngineCall& c) { c.op = EngineOp::kAllToAll; });
  add("too many sends", [](EngineCall& c) { c.op = EngineOp::kSendRecv; c.nsends = kMaxRanks + 1; });
  add("send peer out of range", [](EngineCall& c) { c.op = EngineOp::kSendRecv; c.nsends = 1; c.sendPeer[0] = 4; });
  add("recv peer negative", [](EngineCall& c) { c.op = EngineOp::kSendRecv; c.nrecvs = 1; c.recvPeer[0] = -1; });
  add("null send buffer", [](EngineCall& c) { c.op = EngineOp::kSendRecv; c.nsends = 1; c.sendBytes[0] = 8; });
  add("null recv buffer", [](EngineCall& c) { c.op = EngineOp::kSendRecv; c.nrecvs = 1; c.recvBytes[0] = 8; });
  add("LL send/recv", [](EngineCall& c) { c.op = EngineOp::kSendRecv; c.protocol = EngineProtocol::kLL; });
  add("LL all-to-all", [](EngineCall& c) {
    c.op = EngineOp::kAllToAll;
    c.recv = nullptr;
    c.protocol = EngineProtocol::kLL;
  });
  add("bad protocol", [](EngineCall& c) { c.protocol = static_cast<EngineProtocol>(7); });
  add("duplicate send peer", [](EngineCall& c) {
    c.op = EngineOp::kSendRecv;
    c.nsends = 2;
    c.sendPeer[0] = c.sendPeer[1] = 1;
  });
  for (const Bad& b : bad) {
    const char* error = engineCallError(b.call, b.nranks, b.rank);
    EXPECT_NE(error, nullptr) << b.what;
  }
}

TEST(EngineCallError, BlocksPerCall) {
  EngineCall call = validAllReduce();
  EXPECT_EQ(engineBlocks(call, 4, 3), 3);
  call.count = 0;
  EXPECT_EQ(engineBlocks(call, 4, 3), 0);
  call.op = EngineOp::kAllToAll;
  call.count = 5;
  EXPECT_EQ(engineBlocks(call, 4, 3), 24);
  call.op = EngineOp::kSendRecv;
  call.nsends = 2;
  call.nrecvs = 1;
  EXPECT_EQ(engineBlocks(call, 4, 2), 6);
  call.channels = 1;
  EXPECT_EQ(engineChannels(call, 4), 1);
  call.channels = 0;
  EXPECT_EQ(engineChannels(call, 4), 4);
}

// LL for what is small in every buffer a rank touches, by the call's
// arguments alone (so every rank picks the same), never for point-to-point.
TEST(EngineProtocolFor, SmallRingCollectivesRunLL) {
  const size_t limitFloats = kLLMaxBytes / 4;
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllReduce, DataType::kFloat32, 2, 4), EngineProtocol::kLL);
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllReduce, DataType::kFloat32, limitFloats, 4), EngineProtocol::kLL);
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllReduce, DataType::kFloat32, limitFloats + 1, 4), EngineProtocol::kSimple);
  EXPECT_EQ(engineProtocolFor(EngineOp::kBroadcast, DataType::kInt8, kLLMaxBytes, 8), EngineProtocol::kLL);
  EXPECT_EQ(engineProtocolFor(EngineOp::kReduce, DataType::kFloat64, kLLMaxBytes / 8 + 1, 2), EngineProtocol::kSimple);
  // All-gather's output and reduce-scatter's input are nranks times count.
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllGather, DataType::kFloat32, limitFloats / 4, 4), EngineProtocol::kLL);
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllGather, DataType::kFloat32, limitFloats / 4 + 1, 4),
            EngineProtocol::kSimple);
  EXPECT_EQ(engineProtocolFor(EngineOp::kReduceScatter, DataType::kFloat32, limitFloats / 8 + 1, 8),
            EngineProtocol::kSimple);
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllToAll, DataType::kFloat32, 1, 4), EngineProtocol::kSimple);
  EXPECT_EQ(engineProtocolFor(EngineOp::kSendRecv, DataType::kUint8, 1, 4), EngineProtocol::kSimple);
  EXPECT_EQ(engineProtocolFor(EngineOp::kAllReduce, DataType::kFloat32, SIZE_MAX, 4), EngineProtocol::kSimple);
}

// The tree's steps, 2 floor(log2 n) + 2, against the ring's 2(n - 1): fewer
// from 5 ranks on; only LL calls are latency-bound enough to take it.
TEST(EngineAlgorithmFor, SmallAllReducesFromFiveRanksRunTheTree) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    int depth = 0;
    while ((2 << depth) <= n) ++depth;
    const EngineAlgorithm expected = 2 * depth + 2 < 2 * (n - 1) ? EngineAlgorithm::kTree : EngineAlgorithm::kRing;
    EXPECT_EQ(engineAlgorithmFor(EngineOp::kAllReduce, EngineProtocol::kLL, n), expected) << n << " ranks";
    EXPECT_EQ(engineAlgorithmFor(EngineOp::kAllReduce, EngineProtocol::kSimple, n), EngineAlgorithm::kRing);
    EXPECT_EQ(engineAlgorithmFor(EngineOp::kBroadcast, EngineProtocol::kLL, n), EngineAlgorithm::kRing);
  }
  EXPECT_EQ(engineAlgorithmFor(EngineOp::kAllReduce, EngineProtocol::kLL, 4), EngineAlgorithm::kRing);
  EXPECT_EQ(engineAlgorithmFor(EngineOp::kAllReduce, EngineProtocol::kLL, 5), EngineAlgorithm::kTree);
  EXPECT_EQ(engineAlgorithmFor(EngineOp::kAllReduce, EngineProtocol::kLL, 8), EngineAlgorithm::kTree);
}

TEST(EngineLayout, ChannelsGrowWithTheLargestBufferWithinTheBounds) {
  // LL: kLLChannels, or fewer when the engine has fewer.
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllReduce, DataType::kFloat32, 16, 2, EngineProtocol::kLL, 32), kLLChannels);
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllReduce, DataType::kFloat32, 16, 2, EngineProtocol::kLL, 2), 2);
  // Simple: one per kBytesPerChannel, at least kLLChannels, at most the engine's.
  const size_t floats = kBytesPerChannel / 4;
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllReduce, DataType::kFloat32, floats * 2, 2, EngineProtocol::kSimple, 32),
            kLLChannels);
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllReduce, DataType::kFloat32, floats * 12, 2, EngineProtocol::kSimple, 32), 12);
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllReduce, DataType::kFloat32, floats * 100, 2, EngineProtocol::kSimple, 32),
            32);
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllReduce, DataType::kFloat32, floats * 100, 2, EngineProtocol::kSimple, 4), 4);
  // All-gather and reduce-scatter count every rank's block.
  EXPECT_EQ(engineChannelsFor(EngineOp::kAllGather, DataType::kFloat32, floats * 3, 4, EngineProtocol::kSimple, 32), 12);
  EXPECT_EQ(engineChannelsFor(EngineOp::kReduceScatter, DataType::kInt8, kBytesPerChannel * 5, 4,
                              EngineProtocol::kSimple, 32),
            20);
}

}  // namespace
}  // namespace loom::kernels::cuda::engine
