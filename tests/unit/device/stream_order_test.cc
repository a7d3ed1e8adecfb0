// Stream ordering of Loom operations on (emulated) CUDA streams, ranks as
// threads of one process with real communicators: the hang scenarios of
// stream ordering, each run with the stream gate (must complete, values
// checked) and with the blocking host function it replaced (must NOT
// complete in a bound several times the gate's time: the test would fail on
// that design). A provoked deadlock is cleaned up by aborting the
// communicators, which fails their operations and so releases every stream.
//
// How the old design deadlocks here: all host functions of a process run on
// one callback thread, and each of the old design's blocks it until its
// operation is done. Rank 1's thread is held (as if descheduled) between
// queueing its first operation and ordering its stream after it, until a
// peer's stream has started waiting after its SECOND operation. Rank 1's
// host function then queues behind the peer's, which waits for rank 1's
// second operation, which waits (prior work on rank 1's stream) for rank 1's host
// function: a cycle, reached without any timing assumption. The gate keeps
// every wait on its own stream, so nothing is shared and no cycle exists;
// the same hold must not matter to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/device/stream_gate.h"
#include "tests/unit/device/emulated_cuda.h"
#include "tests/unit/device/emulated_device_stream.h"

namespace loom::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The gate's runs take well under a second (the slow kernel's 200 ms
// included); the old design is declared hung when it has not finished in
// this long.
constexpr Millis kHangBound{1500};
// What a gate run may take on a loaded CI machine.
constexpr Millis kGateLimit{30000};

struct RankEnv {
  int rank = 0;
  loomComm_t comm = nullptr;
  EmulatedStream* cuda = nullptr;
  loomStream_t stream = nullptr;
  EmulatedDeviceStream* binding = nullptr;
};

// N ranks as threads, each with a communicator and an emulated CUDA stream
// bound to a Loom stream with the given ordering.
class EmulatedWorld {
 public:
  EmulatedWorld(int nranks, StreamOrdering ordering, double timeoutSeconds = 0) : envs_(static_cast<size_t>(nranks)) {
    loomUniqueId id;
    EXPECT_EQ(loomGetUniqueId(&id), loomSuccess);
    std::vector<std::thread> init;
    for (int r = 0; r < nranks; ++r) {
      streams_.push_back(std::make_unique<EmulatedStream>());
      RankEnv& e = envs_[static_cast<size_t>(r)];
      e.rank = r;
      e.cuda = streams_.back().get();
      e.stream = bindEmulatedStream(*e.cuda, ordering, &e.binding);
      init.emplace_back([&e, nranks, id, timeoutSeconds] {
        loomConfig_t config = LOOM_CONFIG_INITIALIZER;
        config.timeoutSeconds = timeoutSeconds;
        EXPECT_EQ(loomCommInitRankConfig(&e.comm, nranks, id, e.rank, &config), loomSuccess)
            << loomGetLastError(nullptr);
      });
    }
    for (auto& t : init) t.join();
  }

  ~EmulatedWorld() {
    // Streams first (each synchronizes its Loom operations, all done or
    // failed by now, and aborts its gate), then the communicators together.
    for (RankEnv& e : envs_) EXPECT_EQ(loomStreamDestroy(e.stream), loomSuccess);
    std::vector<std::thread> destroy;
    for (RankEnv& e : envs_)
      destroy.emplace_back([&e] { EXPECT_EQ(loomCommDestroy(e.comm), loomSuccess) << loomGetLastError(nullptr); });
    for (auto& t : destroy) t.join();
    streams_.clear();  // each waits for its stream to drain
  }

  RankEnv& rank(int r) { return envs_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(envs_.size()); }

  // Runs body on one thread per rank. True if all returned within `limit`;
  // otherwise calls onHang (which may inspect the hung state), aborts every
  // communicator (their operations fail, which releases every stream and
  // every blocked host function), joins, and returns false.
  bool run(const std::function<void(RankEnv&)>& body, Millis limit, const std::function<void()>& onHang = {}) {
    std::atomic<int> finished{0};
    std::vector<std::thread> threads;
    for (RankEnv& e : envs_)
      threads.emplace_back([&, env = &e] {
        body(*env);
        finished.fetch_add(1);
      });
    const auto deadline = Clock::now() + limit;
    while (finished.load() < size() && Clock::now() < deadline) std::this_thread::sleep_for(Millis(5));
    const bool completed = finished.load() == size();
    if (!completed) {
      if (onHang) onHang();
      aborted_.store(true);  // before the aborts: calls failing after them are expected
      for (RankEnv& e : envs_) (void)loomCommAbort(e.comm);
    }
    for (auto& t : threads) t.join();
    return completed;
  }
  bool aborted() const { return aborted_.load(); }

 private:
  std::vector<RankEnv> envs_;
  std::vector<std::unique_ptr<EmulatedStream>> streams_;
  std::atomic<bool> aborted_{false};
};

// The highest ordering wait started on a rank other than 1.
uint64_t furthestWaitBesidesRankOne(EmulatedWorld& world) {
  uint64_t furthest = 0;
  for (int r = 0; r < world.size(); ++r)
    if (r != 1) furthest = std::max(furthest, world.rank(r).binding->reachedOrder());
  return furthest;
}

// Holds rank 1's thread before it orders its stream after its first
// operation, until another rank's stream waits after its second one (or
// 10 s: then the precondition failed, which is reported).
void holdRankOneUntilAPeerWaitsOnItsSecondOperation(EmulatedWorld& world) {
  EmulatedWorld* w = &world;
  world.rank(1).binding->setBeforeOrderLaunch([w](uint64_t sequence) {
    if (sequence != 1) return;
    const auto deadline = Clock::now() + Millis(10000);
    while (furthestWaitBesidesRankOne(*w) < 2 && Clock::now() < deadline) std::this_thread::sleep_for(Millis(1));
    EXPECT_GE(furthestWaitBesidesRankOne(*w), 2u) << "no peer's stream reached its second operation's ordering";
  });
}

// On a hang: it is the predicted cycle. A peer's wait after its second
// operation holds the callback thread, and rank 1's wait after its first
// has not started (it queues behind).
void expectTheCallbackThreadCycle(EmulatedWorld& world) {
  EXPECT_EQ(furthestWaitBesidesRankOne(world), 2u) << "no peer is waiting after its second operation";
  EXPECT_EQ(world.rank(1).binding->reachedOrder(), 0u) << "rank 1's first wait started: not the predicted cycle";
}

// Rank r's input of operation k: element i is i*(r+1) + 1000k + 7r.
int32_t input(int rank, int op, size_t i) { return static_cast<int32_t>(i) * (rank + 1) + 1000 * op + 7 * rank; }
int32_t sumOfInputs(int nranks, int op, size_t i) {
  int32_t s = 0;
  for (int r = 0; r < nranks; ++r) s += input(r, op, i);
  return s;
}

// Buffers of one rank, written and read by emulated kernels.
struct Buffers {
  Buffers(int ops, size_t n) : send(static_cast<size_t>(ops), std::vector<int32_t>(n, -1)),
                               recv(send), out(send) {}
  std::vector<std::vector<int32_t>> send, recv, out;
};

constexpr size_t kCount = 4099;

// A fill kernel (after `sleep`), then the all-reduce, then a kernel that
// reads the result (out = 3 * recv): per operation k, on rank e's stream.
void enqueueStep(const EmulatedWorld& world, RankEnv& e, Buffers& b, int k, Millis sleep) {
  auto* send = &b.send[static_cast<size_t>(k)];
  auto* recv = &b.recv[static_cast<size_t>(k)];
  auto* out = &b.out[static_cast<size_t>(k)];
  const int rank = e.rank;
  e.cuda->launchKernel([=] {
    std::this_thread::sleep_for(sleep);
    for (size_t i = 0; i < send->size(); ++i) (*send)[i] = input(rank, k, i);
  });
  const loomResult_t enqueued =
      loomAllReduce(send->data(), recv->data(), kCount, loomInt32, loomSum, e.comm, e.stream);
  // A hung run's cleanup aborts the communicators while ranks still enqueue.
  if (!world.aborted()) EXPECT_EQ(enqueued, loomSuccess) << loomGetLastError(e.comm);
  e.cuda->launchKernel([=] {
    for (size_t i = 0; i < recv->size(); ++i) (*out)[i] = 3 * (*recv)[i];
  });
}

void expectResults(const Buffers& b, int nranks, int ops, int rank) {
  for (int k = 0; k < ops; ++k)
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(b.recv[static_cast<size_t>(k)][i], sumOfInputs(nranks, k, i)) << "rank " << rank << " op " << k << " i " << i;
      ASSERT_EQ(b.out[static_cast<size_t>(k)][i], 3 * sumOfInputs(nranks, k, i))
          << "later kernel on rank " << rank << " op " << k << " i " << i;
    }
}

// ---- (1) A collective behind a 200 ms kernel, before later kernels ----
// Two iterations, the first behind the slow kernel.
bool orderedBehindSlowKernel(StreamOrdering ordering, Millis limit) {
  EmulatedWorld world(2, ordering);
  holdRankOneUntilAPeerWaitsOnItsSecondOperation(world);
  std::vector<Buffers> buffers(2, Buffers(2, kCount));
  const bool completed = world.run(
      [&](RankEnv& e) {
        Buffers& b = buffers[static_cast<size_t>(e.rank)];
        enqueueStep(world, e, b, 0, Millis(200));
        // Only enqueued: the 200 ms kernel still runs (rank 1's thread was
        // held until rank 0 finished the first collective).
        if (e.rank == 0) EXPECT_EQ(loomStreamQuery(e.stream), loomInProgress);
        enqueueStep(world, e, b, 1, Millis(0));
        e.cuda->synchronize();
      },
      limit, [&] { expectTheCallbackThreadCycle(world); });
  if (completed && !world.aborted())
    for (int r = 0; r < 2; ++r) expectResults(buffers[static_cast<size_t>(r)], 2, 2, r);
  return completed;
}

// The device engine's kernels are on the CUDA stream only, not in the Loom
// stream's queue: a query must ask the CUDA stream too.
TEST(CudaHostStreamOrder, QueryReportsKernelsStillQueuedOnTheCudaStream) {
  EmulatedStream cuda;
  loomStream_t stream = bindEmulatedStream(cuda, StreamOrdering::kGate);
  ASSERT_NE(stream, nullptr);
  std::atomic<bool> release{false};
  cuda.launchKernel([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  EXPECT_EQ(loomStreamQuery(stream), loomInProgress);
  release.store(true);
  cuda.synchronize();
  EXPECT_EQ(loomStreamQuery(stream), loomSuccess);
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
}

TEST(CudaHostStreamOrder, CollectiveIsOrderedAfterASlowKernelAndBeforeLaterKernels) {
  EXPECT_TRUE(orderedBehindSlowKernel(StreamOrdering::kGate, kGateLimit));
}

TEST(CudaHostStreamOrder, BlockingHostFunctionDeadlocksBehindASlowKernel) {
  EXPECT_FALSE(orderedBehindSlowKernel(StreamOrdering::kBlockingHostFunction, kHangBound))
      << "the blocking host function ordering completed: the scenario no longer shows its deadlock";
}

// ---- (2) Several all-reduces back to back, one synchronize ----
constexpr int kBackToBack = 3;

bool backToBack(int nranks, StreamOrdering ordering, Millis limit, double timeoutSeconds = 0,
                std::vector<loomResult_t>* syncResults = nullptr) {
  EmulatedWorld world(nranks, ordering, timeoutSeconds);
  holdRankOneUntilAPeerWaitsOnItsSecondOperation(world);
  std::vector<Buffers> buffers(static_cast<size_t>(nranks), Buffers(kBackToBack, kCount));
  if (syncResults) syncResults->assign(static_cast<size_t>(nranks), loomInternalError);
  const bool completed = world.run(
      [&](RankEnv& e) {
        Buffers& b = buffers[static_cast<size_t>(e.rank)];
        for (int k = 0; k < kBackToBack; ++k) enqueueStep(world, e, b, k, Millis(0));
        e.cuda->synchronize();
        const loomResult_t sync = loomStreamSynchronize(e.stream);
        if (syncResults) (*syncResults)[static_cast<size_t>(e.rank)] = sync;
      },
      limit, [&] { expectTheCallbackThreadCycle(world); });
  if (completed && !syncResults)
    for (int r = 0; r < nranks; ++r) expectResults(buffers[static_cast<size_t>(r)], nranks, kBackToBack, r);
  return completed;
}

TEST(CudaHostStreamOrder, BackToBackAllReducesThenOneSynchronizeTwoRanks) {
  EXPECT_TRUE(backToBack(2, StreamOrdering::kGate, kGateLimit));
}

TEST(CudaHostStreamOrder, BackToBackAllReducesThenOneSynchronizeFourRanks) {
  EXPECT_TRUE(backToBack(4, StreamOrdering::kGate, kGateLimit));
}

TEST(CudaHostStreamOrder, BlockingHostFunctionDeadlocksBackToBackTwoRanks) {
  EXPECT_FALSE(backToBack(2, StreamOrdering::kBlockingHostFunction, kHangBound))
      << "the blocking host function ordering completed: the scenario no longer shows its deadlock";
}

TEST(CudaHostStreamOrder, BlockingHostFunctionDeadlocksBackToBackFourRanks) {
  EXPECT_FALSE(backToBack(4, StreamOrdering::kBlockingHostFunction, kHangBound))
      << "the blocking host function ordering completed: the scenario no longer shows its deadlock";
}

// ---- (3) A rank's thread synchronizes the device while a peer's collective is enqueued ----
bool deviceSynchronizeWhilePeerEnqueued(StreamOrdering ordering, Millis limit) {
  EmulatedWorld world(2, ordering);
  holdRankOneUntilAPeerWaitsOnItsSecondOperation(world);
  std::vector<Buffers> buffers(2, Buffers(2, kCount));
  const bool completed = world.run(
      [&](RankEnv& e) {
        Buffers& b = buffers[static_cast<size_t>(e.rank)];
        for (int k = 0; k < 2; ++k) enqueueStep(world, e, b, k, Millis(0));
        // Rank 0 waits for the whole device, rank 1's stream included, whose
        // collectives are still being enqueued by rank 1's thread.
        if (e.rank == 0) EmulatedStream::deviceSynchronize();
        else e.cuda->synchronize();
      },
      limit, [&] { expectTheCallbackThreadCycle(world); });
  if (completed)
    for (int r = 0; r < 2; ++r) expectResults(buffers[static_cast<size_t>(r)], 2, 2, r);
  return completed;
}

TEST(CudaHostStreamOrder, DeviceSynchronizeWhileAPeerHasACollectiveEnqueued) {
  EXPECT_TRUE(deviceSynchronizeWhilePeerEnqueued(StreamOrdering::kGate, kGateLimit));
}

TEST(CudaHostStreamOrder, BlockingHostFunctionDeadlocksADeviceSynchronize) {
  EXPECT_FALSE(deviceSynchronizeWhilePeerEnqueued(StreamOrdering::kBlockingHostFunction, kHangBound))
      << "the blocking host function ordering completed: the scenario no longer shows its deadlock";
}

// ---- (4) LOOM_TIMEOUT and abort reach the operation and release the stream ----
// Rank 0 enqueues an all-reduce that rank 1 never joins, then a later kernel;
// `stop` ends the operation (a short LOOM_TIMEOUT, or an abort).
void failedOperationReleasesTheStream(double timeoutSeconds, bool abort) {
  EmulatedWorld world(2, StreamOrdering::kGate, timeoutSeconds);
  RankEnv& e = world.rank(0);
  std::vector<int32_t> send(kCount, 1), recv(kCount, -1);
  std::atomic<bool> laterKernelRan{false};
  ASSERT_EQ(loomAllReduce(send.data(), recv.data(), kCount, loomInt32, loomSum, e.comm, e.stream), loomSuccess);
  e.cuda->launchKernel([&] { laterKernelRan.store(true); });
  std::this_thread::sleep_for(Millis(100));  // under the timeout of 0.5 s
  EXPECT_FALSE(laterKernelRan.load()) << "the later kernel ran before the collective finished";
  if (abort) ASSERT_EQ(loomCommAbort(e.comm), loomSuccess);
  // The stream is released within the timeout (or at the abort), not never.
  EXPECT_TRUE(e.cuda->synchronizeFor(Millis(20000))) << "the CUDA stream stayed blocked after the operation failed";
  EXPECT_TRUE(laterKernelRan.load());
  const loomResult_t sync = loomStreamSynchronize(e.stream);
  EXPECT_NE(sync, loomSuccess);
  if (!abort) EXPECT_EQ(sync, loomTimeout) << loomGetLastError(nullptr);
  const std::string error = loomGetLastError(nullptr);
  EXPECT_NE(error.find("rank 0"), std::string::npos) << error;
  if (!abort) {
    loomResult_t async = loomSuccess;
    EXPECT_EQ(loomCommGetAsyncError(e.comm, &async), loomSuccess);
    EXPECT_EQ(async, loomTimeout);
  }
}

TEST(CudaHostStreamOrder, TimeoutReachesTheOperationAndReleasesTheStream) {
  failedOperationReleasesTheStream(0.5, false);
}

TEST(CudaHostStreamOrder, AbortReachesTheOperationAndReleasesTheStream) { failedOperationReleasesTheStream(0, true); }

// With a short LOOM_TIMEOUT the old design's deadlock becomes timeouts,
// though every rank made every call; the gate's run succeeds.
TEST(CudaHostStreamOrder, BlockingHostFunctionTurnsBackToBackCallsIntoTimeouts) {
  std::vector<loomResult_t> gate, old;
  ASSERT_TRUE(backToBack(2, StreamOrdering::kGate, kGateLimit, 1.0, &gate));
  EXPECT_EQ(gate, std::vector<loomResult_t>(2, loomSuccess));
  ASSERT_TRUE(backToBack(2, StreamOrdering::kBlockingHostFunction, kGateLimit, 1.0, &old))
      << "LOOM_TIMEOUT did not reach the old design's operations";
  EXPECT_NE(old, std::vector<loomResult_t>(2, loomSuccess));
}

// ---- Graph capture on the host executor's path fails at once ----
TEST(CudaHostStreamOrder, CallOnACapturingStreamFailsAtOnceWithInvalidUsage) {
  EmulatedWorld world(2, StreamOrdering::kGate);
  std::vector<int32_t> send(kCount, 1), recv(kCount, -1);
  world.rank(1).binding->setCapturing(true);
  RankEnv& e = world.rank(1);
  const auto start = Clock::now();
  EXPECT_EQ(loomAllReduce(send.data(), recv.data(), kCount, loomInt32, loomSum, e.comm, e.stream), loomInvalidUsage);
  std::string error = loomGetLastError(e.comm);
  EXPECT_NE(error.find("rank 1"), std::string::npos) << error;
  EXPECT_NE(error.find("captured into a CUDA graph"), std::string::npos) << error;
  EXPECT_NE(error.find("device engine"), std::string::npos) << error;
  EXPECT_EQ(loomSend(send.data(), kCount, loomInt32, 0, e.comm, e.stream), loomInvalidUsage);
  EXPECT_EQ(loomBarrier(e.comm, e.stream), loomInvalidUsage);
  EXPECT_LT(Clock::now() - start, Millis(1000)) << "the refusal waited for something";
  EXPECT_EQ(loomStreamQuery(e.stream), loomSuccess) << "a refused call must queue nothing";
  // After the capture the same stream works (rank 0 joins here).
  world.rank(1).binding->setCapturing(false);
  std::vector<std::vector<int32_t>> recvs(2, std::vector<int32_t>(kCount, -1));
  EXPECT_TRUE(world.run(
      [&](RankEnv& r) {
        EXPECT_EQ(loomAllReduce(send.data(), recvs[static_cast<size_t>(r.rank)].data(), kCount, loomInt32, loomSum,
                                r.comm, r.stream),
                  loomSuccess);
        EXPECT_EQ(loomStreamSynchronize(r.stream), loomSuccess);
      },
      kGateLimit));
  for (auto& r : recvs) EXPECT_EQ(r, std::vector<int32_t>(kCount, 2));
}

// ---- The gate itself ----
TEST(CudaHostStreamGate, ReleasesInStreamOrderAndAbortEndsWaits) {
  auto words = std::make_shared<cuda::StreamGateWords>();
  auto gate = std::make_shared<cuda::StreamGate>(words.get(), words);
  cuda::StreamOrderTicket a(gate, gate->reserve()), b(gate, gate->reserve()), c(gate, gate->reserve());
  EXPECT_EQ(a.sequence(), 1u);
  EXPECT_EQ(c.sequence(), 3u);
  b.release();
  EXPECT_EQ(gate->released(), 0u) << "operation 2 finished before 1: the gate must not open 2 yet";
  a.release();
  EXPECT_EQ(gate->released(), 2u);
  a.release();  // once only
  EXPECT_EQ(gate->released(), 2u);
  auto noPause = [](uint32_t) { std::this_thread::yield(); };
  EXPECT_EQ(kernels::cuda::gateWait(words.get(), 2, noPause), kernels::cuda::kStreamGateOpen);
  { cuda::StreamOrderTicket dropped = std::move(c); }  // a ticket dropped unreleased releases
  EXPECT_EQ(gate->released(), 3u);
  const uint64_t never = gate->reserve();
  gate->abort();
  EXPECT_EQ(kernels::cuda::gateWait(words.get(), never, noPause), kernels::cuda::kStreamGateAborted);
}

}  // namespace
}  // namespace loom::testing
