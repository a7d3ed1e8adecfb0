// Tests that prove the engine tests can fail, and the engine's failure
// reports: a protocol without the receiver's flag wait, or without the fence
// before the flag store (under a memory layer that publishes plain stores
// only at fences), or (LL) with a line's data and flag stored apart, gives
// wrong results that the checks catch; a wait that never gets its flag
// returns kTimedOut, or kAborted once the abort flag is set, on either
// protocol.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/kernels/cuda/engine_test_support.h"

namespace loom::kernels::cuda::engine::testing {
namespace {

CollectiveCase allReduceCase(size_t count, uint64_t seed, EngineProtocol protocol = EngineProtocol::kSimple,
                             EngineAlgorithm algorithm = EngineAlgorithm::kRing) {
  CollectiveCase c;
  c.protocol = protocol;
  c.algorithm = algorithm;
  c.op = EngineOp::kAllReduce;
  c.type = DataType::kInt32;
  c.redOp = RedOp::kSum;
  c.count = count;
  c.channels = 2;
  c.seed = seed;
  return c;
}

template <class Memory>
std::string runAndCheck(const CollectiveCase& c, int nranks, int slots) {
  EngineRanks ranks(nranks, 2, slots, 64);
  CollectiveRun run(c, nranks);
  const std::vector<EngineStatus> status = ranks.run<Memory, Int32SumInstantiations>(run.calls());
  for (EngineStatus s : status)
    if (s != EngineStatus::kOk) return std::string("status ") + engineStatusName(s);
  return run.check();
}

// The checks pass with the real protocol under the same delays...
TEST(EngineMutation, RealProtocolPassesUnderDelays) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    setDelaySeed(seed);
    EXPECT_EQ(runAndCheck<DelayingMemory>(allReduceCase(3000, seed), 4, 2), "");
  }
}

// ...and fail when the receiver reads its slot without waiting for the flag,
// on the ring and on the tree.
TEST(EngineMutation, RemovingTheReceiversFlagWaitBreaksResults) {
  for (EngineAlgorithm algorithm : {EngineAlgorithm::kRing, EngineAlgorithm::kTree}) {
    const int nranks = algorithm == EngineAlgorithm::kTree ? 5 : 4;
    setDelaySeed(1);
    EXPECT_EQ(runAndCheck<DelayingMemory>(allReduceCase(3000, 1, EngineProtocol::kSimple, algorithm), nranks, 2), "")
        << engineAlgorithmName(algorithm) << ": the real protocol";
    int failures = 0;
    for (uint64_t seed = 1; seed <= 5 && failures == 0; ++seed) {
      setDelaySeed(seed);
      CollectiveCase c = allReduceCase(3000, seed, EngineProtocol::kSimple, algorithm);
      if (!runAndCheck<NoReceiverWaitMemory>(c, nranks, 2).empty()) ++failures;
    }
    EXPECT_GT(failures, 0) << engineAlgorithmName(algorithm) << ": a protocol whose receiver does not wait still "
                           << "passed the checks";
  }
}

// Under a memory layer that publishes plain stores only at release fences,
// the protocol with its fence passes, and without it fails.
TEST(EngineMutation, FenceBeforeTheFlagIsNeededUnderDelayedStores) {
  for (int nranks : {2, 3}) {
    CollectiveCase c = allReduceCase(2000, 5);
    EXPECT_EQ(runAndCheck<BufferedStoreMemory<true>>(c, nranks, 2), "") << "with the fence, nranks " << nranks;
    EXPECT_NE(runAndCheck<BufferedStoreMemory<false>>(c, nranks, 2), "")
        << "without the fence the results still matched, nranks " << nranks;
    c.op = EngineOp::kAllGather;
    EXPECT_EQ(runAndCheck<BufferedStoreMemory<true>>(c, nranks, 2), "") << "all-gather with the fence";
    EXPECT_NE(runAndCheck<BufferedStoreMemory<false>>(c, nranks, 2), "") << "all-gather without the fence";
  }
  CollectiveCase tree = allReduceCase(2000, 5, EngineProtocol::kSimple, EngineAlgorithm::kTree);
  EXPECT_EQ(runAndCheck<BufferedStoreMemory<true>>(tree, 5, 2), "") << "tree all-reduce with the fence";
  EXPECT_NE(runAndCheck<BufferedStoreMemory<false>>(tree, 5, 2), "") << "tree all-reduce without the fence";
}

// LL: the same checks catch a receiver that reads its lines without
// looking at their flags, and a sender whose line is two 4-byte stores
// (data and flag apart, in either order); the real LL protocol passes
// under the same delays, and needs no fence: it passes under the layer
// that publishes plain stores only at fences, with the fence removed.
TEST(EngineMutation, LLPassesUnderDelaysAndWithoutAnyFence) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    setDelaySeed(seed);
    EXPECT_EQ(runAndCheck<DelayingMemory>(allReduceCase(3000, seed, EngineProtocol::kLL), 4, 2), "");
    CollectiveCase c = allReduceCase(2000, seed, EngineProtocol::kLL);
    EXPECT_EQ(runAndCheck<BufferedStoreMemory<false>>(c, 3, 2), "") << "LL all-reduce without fences";
    c.op = EngineOp::kAllGather;
    EXPECT_EQ(runAndCheck<BufferedStoreMemory<false>>(c, 3, 2), "") << "LL all-gather without fences";
  }
}

TEST(EngineMutation, LLReceiverThatIgnoresTheFlagsBreaksResults) {
  int failures = 0;
  for (uint64_t seed = 1; seed <= 5 && failures == 0; ++seed) {
    setDelaySeed(seed);
    if (!runAndCheck<NoReceiverWaitMemory>(allReduceCase(3000, seed, EngineProtocol::kLL), 4, 2).empty()) ++failures;
  }
  EXPECT_GT(failures, 0) << "an LL receiver that ignores the line flags still passed the checks";
}

TEST(EngineMutation, LLLineStoredAsTwoHalvesBreaksResults) {
  for (EngineOp op : {EngineOp::kAllReduce, EngineOp::kBroadcast}) {
    int failures = 0;
    for (uint64_t seed = 1; seed <= 8 && failures == 0; ++seed) {
      setDelaySeed(seed);
      CollectiveCase c = allReduceCase(3000, seed, EngineProtocol::kLL);
      c.op = op;
      if (!runAndCheck<SplitLineMemory>(c, 4, 2).empty()) ++failures;
    }
    EXPECT_GT(failures, 0) << engineOpName(op) << ": LL lines stored as two halves still passed the checks";
  }
}

// LL flags are 32 bits of a 64-bit step counter; a line must never keep a
// flag until it comes round again. The first `slots` steps of each refresh
// period write their slots whole, so lines planted with a future step's
// flag (as an ancient line would carry) are gone after them, while other
// steps write only the lines their data needs.
TEST(EngineLL, RefreshStepsWriteEverySlotWhole) {
  constexpr int kSlots = 3;
  constexpr size_t kLines = 8;  // 64-byte LL slots
  EngineRanks ranks(2, 1, kSlots, 64, kLines * kLLLineBytes);
  const EngineSendConnection& send = ranks.view(0).send[0][1];
  const EngineRecvConnection& recv = ranks.view(1).recv[0][0];
  const uint64_t start = (uint64_t{1} << 32) - kLLRefreshSteps;  // a period's first step
  *send.llStep = start;
  *recv.llStep = start;
  *const_cast<uint64_t*>(send.llHead) = start;
  uint64_t* lines = send.llLines;
  const uint64_t planted = (static_cast<uint64_t>(static_cast<uint32_t>(start + kSlots + 1)) << 32) | 0xDEADu;
  for (size_t i = 0; i < kSlots * kLines; ++i) lines[i] = planted;
  auto flagAt = [&](int slot, size_t line) { return static_cast<uint32_t>(lines[slot * kLines + line] >> 32); };
  auto broadcastOneElement = [&](uint64_t seed) {
    CollectiveCase c;
    c.op = EngineOp::kBroadcast;
    c.type = DataType::kInt32;
    c.count = 1;  // one line per step
    c.channels = 1;
    c.protocol = EngineProtocol::kLL;
    c.seed = seed;
    CollectiveRun run(c, 2);
    for (EngineStatus status : ranks.run<DelayingMemory, Int32SumInstantiations>(run.calls()))
      ASSERT_EQ(status, EngineStatus::kOk);
    ASSERT_EQ(run.check(), "");
  };
  for (int k = 0; k < kSlots; ++k) broadcastOneElement(static_cast<uint64_t>(k) + 1);
  for (int slot = 0; slot < kSlots; ++slot)
    for (size_t line = 0; line < kLines; ++line)
      EXPECT_EQ(flagAt(slot, line), static_cast<uint32_t>(start + slot + 1)) << "slot " << slot << " line " << line;
  // The next round is past the refresh steps: line 0 only.
  for (int k = 0; k < kSlots; ++k) broadcastOneElement(static_cast<uint64_t>(k) + 10);
  for (int slot = 0; slot < kSlots; ++slot) {
    EXPECT_EQ(flagAt(slot, 0), static_cast<uint32_t>(start + kSlots + slot + 1)) << "slot " << slot;
    for (size_t line = 1; line < kLines; ++line)
      EXPECT_EQ(flagAt(slot, line), static_cast<uint32_t>(start + slot + 1)) << "slot " << slot << " line " << line;
  }
  EXPECT_EQ(*send.llStep, start + 2 * kSlots);
  EXPECT_EQ(*recv.llStep, start + 2 * kSlots);
}

// Only rank 0 of two calls: its first receive never gets its flag (Simple:
// the tail counter; LL: the first line of its receive slot).
TEST(EngineFailures, AWaitWithoutItsFlagTimesOut) {
  for (EngineProtocol protocol : {EngineProtocol::kSimple, EngineProtocol::kLL})
    for (int threads : {1, 3}) {
      EngineRanks ranks(2, 2, 2, 64);
      CollectiveRun run(allReduceCase(100, 1, protocol), 2);
      EngineCall call = run.calls()[0];
      call.timeoutNs = 30'000'000;  // 30 ms
      uint32_t reported = 0;
      call.status = &reported;
      const auto start = std::chrono::steady_clock::now();
      EXPECT_EQ(runEngineEmulated(ranks.view(0), call, threads), EngineStatus::kTimedOut)
          << engineProtocolName(protocol) << ", " << threads << " threads per block";
      EXPECT_EQ(reported, static_cast<uint32_t>(EngineStatus::kTimedOut));
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    }
}

// LL: a sender that laps its receiver waits on the LL head; that wait times out too.
TEST(EngineFailures, AnLLSenderWithoutFreeSlotsTimesOut) {
  EngineRanks ranks(2, 1, 2, 64, 64);
  CollectiveCase c = allReduceCase(5000, 1, EngineProtocol::kLL);
  c.op = EngineOp::kBroadcast;
  c.root = 0;
  c.channels = 1;
  CollectiveRun run(c, 2);
  EngineCall call = run.calls()[0];  // the root only sends
  call.timeoutNs = 30'000'000;
  EXPECT_EQ(runEngineEmulated(ranks.view(0), call), EngineStatus::kTimedOut);
}

TEST(EngineFailures, TheAbortFlagStopsAWaitWithoutTimeout) {
  for (EngineOp op : {EngineOp::kAllReduce, EngineOp::kSendRecv, EngineOp::kBroadcast}) {
    EngineRanks ranks(2, 2, 2, 64);
    // Broadcast to rank 0 from rank 1 on LL: rank 0 polls its LL lines.
    CollectiveCase c = allReduceCase(100, 1, op == EngineOp::kBroadcast ? EngineProtocol::kLL : EngineProtocol::kSimple);
    if (op == EngineOp::kBroadcast) {
      c.op = op;
      c.root = 1;
    }
    CollectiveRun run(c, 2);
    EngineCall call = run.calls()[0];
    if (op == EngineOp::kSendRecv) {
      call = EngineCall{};
      call.op = EngineOp::kSendRecv;
      static unsigned char buffer[64];
      call.nrecvs = 1;
      call.recvPeer[0] = 1;
      call.recvBuf[0] = buffer;
      call.recvBytes[0] = sizeof(buffer);
    }
    call.timeoutNs = 0;
    uint32_t abortFlag = 0;
    call.abortFlag = &abortFlag;
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::atomic_ref<uint32_t>(abortFlag).store(1, std::memory_order_relaxed);
    });
    EXPECT_EQ(runEngineEmulated(ranks.view(0), call), EngineStatus::kAborted) << engineOpName(op);
    aborter.join();
  }
}

// The emulation refuses, without running anything, a call the checks reject
// or one asking for more channels than the engine has.
TEST(EngineFailures, InvalidCallsRunNothing) {
  EngineRanks ranks(2, 2, 2, 64);
  CollectiveRun run(allReduceCase(100, 1), 2);
  EngineCall call = run.calls()[0];
  call.channels = 3;
  EXPECT_EQ(runEngineEmulated(ranks.view(0), call), EngineStatus::kInvalidCall);
  call.channels = 0;
  call.send = nullptr;
  EXPECT_EQ(runEngineEmulated(ranks.view(0), call), EngineStatus::kInvalidCall);
  call = run.calls()[0];
  call.op = EngineOp::kBroadcast;
  call.algorithm = EngineAlgorithm::kTree;  // the tree runs all-reduce only
  EXPECT_EQ(runEngineEmulated(ranks.view(0), call), EngineStatus::kInvalidCall);
  call = run.calls()[0];
  EXPECT_EQ(runEngineEmulated(ranks.view(0), call, 0), EngineStatus::kInvalidCall);
  EXPECT_EQ(*ranks.view(0).send[0][1].step, 0u) << "a refused call moved the counters";
}

}  // namespace
}  // namespace loom::kernels::cuda::engine::testing
