// loomCommAbort while another thread is inside a call on the same
// communicator, as NCCL allows: a watchdog thread aborts
// to unblock a hung call. The blocked call must return promptly with
// loomRemoteError saying the communicator was aborted, nothing may touch the
// freed handle (run this test under AddressSanitizer too), later calls must
// fail with a message that names the abort, abort must be repeatable and
// loomCommDestroy after it must succeed at once. Ranks run as threads of
// this process and, in one case, as a forked process.
//
// Also: a communicator made by loomCommSplit keeps the deadline its parent
// got from loomCommInitRankConfig.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Waits poll the abort flag at least every ~20 ms; abort itself never waits
// for peers. Generous for 2 oversubscribed cores and sanitizer builds.
constexpr double kPromptSeconds = 2.0;
// The deadline of every communicator here unless a test sets its own: far
// longer than any bound checked, so an error seen earlier cannot be a timeout.
constexpr const char* kLongTimeout = "60";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What a call that ran on its own thread returned.
struct CallOutcome {
  loomResult_t code = loomInternalError;
  std::string message;  // loomGetLastError of that thread
  Clock::time_point returnedAt;
};

std::future<CallOutcome> startCall(std::function<loomResult_t()> call) {
  return std::async(std::launch::async, [call = std::move(call)] {
    CallOutcome out;
    out.code = call();
    out.message = out.code == loomSuccess ? "" : loomGetLastError(nullptr);
    out.returnedAt = Clock::now();
    return out;
  });
}

// A blocking (NULL stream) call by rank 0 of a 2-rank communicator that can
// only finish once rank 1 joins it, which it never does.
struct BlockingCall {
  const char* name;
  std::function<loomResult_t(loomComm_t, std::vector<float>&)> run;
};

const std::vector<BlockingCall>& blockingCalls() {
  static const std::vector<BlockingCall> calls = {
      {"allreduce",
       [](loomComm_t c, std::vector<float>& b) {
         return loomAllReduce(b.data(), b.data(), b.size(), loomFloat32, loomSum, c, nullptr);
       }},
      {"broadcast_from_peer",
       [](loomComm_t c, std::vector<float>& b) { return loomBcast(b.data(), b.size(), loomFloat32, 1, c, nullptr); }},
      {"recv", [](loomComm_t c, std::vector<float>& b) { return loomRecv(b.data(), b.size(), loomFloat32, 1, c, nullptr); }},
      {"barrier", [](loomComm_t c, std::vector<float>&) { return loomBarrier(c, nullptr); }},
  };
  return calls;
}

const BlockingCall& callNamed(const std::string& name) {
  for (const auto& c : blockingCalls())
    if (name == c.name) return c;
  throw std::runtime_error("unknown call " + name);
}

// The whole scenario on rank 0's communicator `comm` (rank 1 never calls):
// block in `call` on a second thread, abort from this one, then check the
// blocked call, later calls, a repeated abort and destroy after abort.
void abortWhileBlocked(loomComm_t comm, const BlockingCall& call) {
  std::vector<float> buf(4096, 1.0f);
  auto blocked = startCall([&] { return call.run(comm, buf); });
  ASSERT_EQ(blocked.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << call.name << " returned without its peer: " << loomGetErrorString(blocked.get().code);

  const auto abortStart = Clock::now();
  EXPECT_EQ(loomCommAbort(comm), loomSuccess) << loomGetLastError(nullptr);
  const double abortSeconds = secondsSince(abortStart);
  EXPECT_LT(abortSeconds, kPromptSeconds) << "loomCommAbort blocked";

  // LOOM_TIMEOUT is 60 s: a call still blocked after 10 s ignored the abort.
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << call.name << " is still blocked 10 s after loomCommAbort";
  const CallOutcome out = blocked.get();
  const double returnSeconds = std::chrono::duration<double>(out.returnedAt - abortStart).count();
  std::printf("[%s] abort took %.4f s, the blocked call returned %.4f s after it: %s: %s\n", call.name, abortSeconds,
              returnSeconds, loomGetErrorString(out.code), out.message.c_str());
  EXPECT_EQ(out.code, loomRemoteError) << out.message;
  EXPECT_TRUE(contains(out.message, "aborted by loomCommAbort during the call")) << out.message;
  EXPECT_TRUE(contains(out.message, "rank 0")) << out.message;
  EXPECT_LT(returnSeconds, kPromptSeconds);

  // Every later call fails at once and says why.
  std::vector<float> more(8, 1.0f);
  EXPECT_EQ(loomAllReduce(more.data(), more.data(), more.size(), loomFloat32, loomSum, comm, nullptr),
            loomInvalidUsage);
  const std::string later = loomGetLastError(comm);
  EXPECT_TRUE(contains(later, "loomAllReduce: comm")) << later;
  EXPECT_TRUE(contains(later, "was aborted (loomCommAbort)")) << later;
  int count = -1;
  EXPECT_EQ(loomCommCount(comm, &count), loomInvalidUsage);
  EXPECT_EQ(count, -1);
  loomResult_t async = loomSuccess;
  EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomInvalidUsage);

  EXPECT_EQ(loomCommAbort(comm), loomSuccess) << "a repeated abort: " << loomGetLastError(nullptr);

  const auto destroyStart = Clock::now();
  EXPECT_EQ(loomCommDestroy(comm), loomSuccess) << "destroy after abort: " << loomGetLastError(nullptr);
  EXPECT_LT(secondsSince(destroyStart), kPromptSeconds) << "loomCommDestroy after loomCommAbort blocked";
  // Destroyed now: the handle is gone for good.
  EXPECT_EQ(loomCommDestroy(comm), loomInvalidArgument);
  EXPECT_TRUE(contains(loomGetLastError(nullptr), "is not a live communicator")) << loomGetLastError(nullptr);
}

class AbortFromAnotherThread : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { setenv("LOOM_TIMEOUT", kLongTimeout, 1); }
};

TEST_P(AbortFromAnotherThread, RanksAsThreads) {
  loomComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(loomCommInitAll(comms, 2, nullptr), loomSuccess) << loomGetLastError(nullptr);
  abortWhileBlocked(comms[0], callNamed(GetParam()));
  // Rank 1 never called anything: it can still be destroyed normally.
  const auto start = Clock::now();
  EXPECT_EQ(loomCommDestroy(comms[1]), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_LT(secondsSince(start), kPromptSeconds);
}

// Rank 1 is a forked process: it joins the communicator and then waits,
// never calling the collective, until rank 0 (this process) is done.
TEST_P(AbortFromAnotherThread, RanksAsProcesses) {
  int idPipe[2], donePipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  ASSERT_EQ(pipe(donePipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(idPipe[1]);
    close(donePipe[1]);
    loomUniqueId id;
    if (read(idPipe[0], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(10);
    loomComm_t comm = nullptr;
    if (loomCommInitRank(&comm, 2, id, 1) != loomSuccess) _exit(11);
    pollfd pfd{donePipe[0], POLLIN, 0};
    if (poll(&pfd, 1, 30000) != 1) _exit(12);  // rank 0 never finished
    // Its peer aborted: abort too, as after any peer failure.
    _exit(loomCommAbort(comm) == loomSuccess ? 0 : 13);
  }
  close(idPipe[0]);
  close(donePipe[0]);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
  ASSERT_EQ(write(idPipe[1], &id, sizeof id), static_cast<ssize_t>(sizeof id));
  loomComm_t comm = nullptr;
  const loomResult_t init = loomCommInitRank(&comm, 2, id, 0);
  if (init == loomSuccess) abortWhileBlocked(comm, callNamed(GetParam()));
  EXPECT_EQ(init, loomSuccess) << loomGetLastError(nullptr);
  ASSERT_EQ(write(donePipe[1], "x", 1), 1);
  close(idPipe[1]);
  close(donePipe[1]);
  int status = -1;
  const auto start = Clock::now();
  while (waitpid(child, &status, WNOHANG) == 0) {
    if (secondsSince(start) > 10) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      ADD_FAILURE() << "rank 1 (pid " << child << ") did not finish within 10 s";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1 exit status " << status;
}

INSTANTIATE_TEST_SUITE_P(BlockingCalls, AbortFromAnotherThread,
                         ::testing::Values("allreduce", "broadcast_from_peer", "recv", "barrier"),
                         [](const auto& info) { return std::string(info.param); });

// loomCommDestroy blocks while work it must wait for is outstanding; an abort
// from a third thread must release it as well as the blocked call.
TEST(AbortFromAnotherThreadExtra, AbortReleasesABlockedDestroy) {
  setenv("LOOM_TIMEOUT", kLongTimeout, 1);
  loomComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(loomCommInitAll(comms, 2, nullptr), loomSuccess) << loomGetLastError(nullptr);
  std::vector<float> buf(4096, 1.0f);
  auto blocked = startCall(
      [&] { return loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto destroy = startCall([&] { return loomCommDestroy(comms[0]); });
  ASSERT_EQ(destroy.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "loomCommDestroy returned while an all-reduce without its peer was outstanding";
  EXPECT_EQ(loomCommAbort(comms[0]), loomSuccess) << loomGetLastError(nullptr);
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(destroy.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const CallOutcome call = blocked.get(), destroyed = destroy.get();
  EXPECT_EQ(call.code, loomRemoteError) << call.message;
  EXPECT_EQ(destroyed.code, loomSuccess) << "destroy interrupted by abort: " << destroyed.message;
  EXPECT_EQ(loomCommDestroy(comms[0]), loomInvalidArgument) << "the handle is gone after destroy and abort";
  EXPECT_EQ(loomCommDestroy(comms[1]), loomSuccess) << loomGetLastError(nullptr);
}

// Abort or destroy at an arbitrary moment while two threads call in a loop on
// a 1-rank communicator: a call starts before it (and completes or reports
// the abort), or after it (and is refused). Under AddressSanitizer this is
// the check that no call touches a freed handle.
void raceRetireWithCalls(bool abort) {
  setenv("LOOM_TIMEOUT", kLongTimeout, 1);
  constexpr int kRounds = 25;
  for (int round = 0; round < kRounds; ++round) {
    loomComm_t comm = nullptr;
    ASSERT_EQ(loomCommInitAll(&comm, 1, nullptr), loomSuccess) << loomGetLastError(nullptr);
    std::atomic<int> started{0};
    auto caller = [&] {
      std::vector<double> v(16, 2.0);
      int calls = 0;
      for (;;) {
        const loomResult_t rc = loomAllReduce(v.data(), v.data(), v.size(), loomFloat64, loomSum, comm, nullptr);
        if (rc != loomSuccess) return CallOutcome{rc, loomGetLastError(nullptr), Clock::now()};
        // One rank: the sum is the input itself.
        if (v[0] != 2.0) return CallOutcome{loomInternalError, "wrong result", Clock::now()};
        if (++calls == 1) started.fetch_add(1);
      }
    };
    auto a = std::async(std::launch::async, caller);
    auto b = std::async(std::launch::async, caller);
    while (started.load() < 2) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (round % 7)));
    ASSERT_EQ(abort ? loomCommAbort(comm) : loomCommDestroy(comm), loomSuccess) << loomGetLastError(nullptr);
    for (auto* f : {&a, &b}) {
      ASSERT_EQ(f->wait_for(std::chrono::seconds(10)), std::future_status::ready) << "round " << round;
      const CallOutcome out = f->get();
      if (abort) {
        // Refused after the abort, or interrupted by it.
        EXPECT_TRUE((out.code == loomInvalidUsage && contains(out.message, "was aborted (loomCommAbort)")) ||
                    (out.code == loomRemoteError && contains(out.message, "aborted")))
            << "round " << round << ": " << loomGetErrorString(out.code) << ": " << out.message;
      } else {
        EXPECT_EQ(out.code, loomInvalidArgument) << "round " << round << ": " << out.message;
        EXPECT_TRUE(contains(out.message, "is not a live communicator")) << out.message;
      }
    }
    if (abort) {
      EXPECT_EQ(loomCommDestroy(comm), loomSuccess) << loomGetLastError(nullptr);
    }
  }
}

TEST(AbortFromAnotherThreadExtra, AbortRacesCalls) { raceRetireWithCalls(true); }
TEST(AbortFromAnotherThreadExtra, DestroyRacesCalls) { raceRetireWithCalls(false); }

// A split communicator keeps the 1 s deadline its parent got from
// loomCommInitRankConfig, although LOOM_TIMEOUT says 120 s: a collective that
// rank 1 never joins times out on rank 0 after about 1 s.
TEST(SplitConfig, ChildInheritsTheParentsTimeout) {
  setenv("LOOM_TIMEOUT", "120", 1);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess) << loomGetLastError(nullptr);
  loomComm_t parents[2] = {nullptr, nullptr}, children[2] = {nullptr, nullptr};
  loomResult_t initRc[2] = {loomInternalError, loomInternalError}, splitRc[2] = {loomInternalError, loomInternalError};
  {
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        loomConfig_t config = LOOM_CONFIG_INITIALIZER;
        config.timeoutSeconds = 1.0;
        initRc[r] = loomCommInitRankConfig(&parents[r], 2, id, r, &config);
        if (initRc[r] == loomSuccess) splitRc[r] = loomCommSplit(parents[r], 0, r, &children[r]);
      });
    for (auto& t : ranks) t.join();
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(initRc[r], loomSuccess) << "rank " << r;
    ASSERT_EQ(splitRc[r], loomSuccess) << "rank " << r;
  }
  std::vector<float> buf(1024, 1.0f);
  const auto start = Clock::now();
  auto call = startCall(
      [&] { return loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, children[0], nullptr); });
  // Were the child's deadline 120 s, abort after 15 s so the test ends with a
  // clear failure instead of a ctest timeout.
  if (call.wait_for(std::chrono::seconds(15)) != std::future_status::ready) {
    ADD_FAILURE() << "the split communicator's collective did not time out within 15 s: its deadline is not the "
                     "parent's 1 s";
    loomCommAbort(children[0]);
  }
  const CallOutcome out = call.get();
  const double seconds = std::chrono::duration<double>(out.returnedAt - start).count();
  std::printf("child all-reduce without its peer returned after %.3f s: %s: %s\n", seconds,
              loomGetErrorString(out.code), out.message.c_str());
  EXPECT_EQ(out.code, loomTimeout) << out.message;
  EXPECT_TRUE(contains(out.message, "timed out (LOOM_TIMEOUT)")) << out.message;
  EXPECT_GT(seconds, 0.9);
  EXPECT_LT(seconds, 10.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(loomCommAbort(children[r]), loomSuccess) << "rank " << r;
    EXPECT_EQ(loomCommAbort(parents[r]), loomSuccess) << "rank " << r;
  }
}

}  // namespace
