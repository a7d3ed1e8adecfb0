// Online tuning through real communicators (ranks as threads, blocking calls
// on one thread per rank, so both one-step and separately recorded calls run):
// every call's result is exact, every rank runs the same algorithm at every
// call (the exploration schedules and the agreement stay in step), more than
// one candidate runs while exploring, and LOOM_TUNER_ONLINE=0 or LOOM_ALGO
// keep one algorithm throughout.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "tests/unit/tuner/scoped_env.h"

namespace {

using loom::testing::ScopedEnv;

// Each rank's algorithm per call, after `calls` blocking all-reduces of `count` int32.
std::vector<std::vector<std::string>> runCalls(int nranks, size_t count, int calls) {
  std::vector<loomComm_t> comms(static_cast<size_t>(nranks), nullptr);
  EXPECT_EQ(loomCommInitAll(comms.data(), nranks, nullptr), loomSuccess) << loomGetLastError(nullptr);
  std::vector<std::vector<std::string>> ran(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      loomComm_t comm = comms[static_cast<size_t>(r)];
      std::vector<int32_t> send(count), recv(count);
      for (int c = 0; c < calls; ++c) {
        for (size_t i = 0; i < count; ++i) send[i] = r + 1 + static_cast<int32_t>((i + c) % 11);
        ASSERT_EQ(loomAllReduce(send.data(), recv.data(), count, loomInt32, loomSum, comm, nullptr), loomSuccess)
            << loomGetLastError(comm);
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(recv[i], nranks * (nranks + 1) / 2 + nranks * static_cast<int32_t>((i + c) % 11))
              << "rank " << r << " call " << c << " index " << i;
        char name[64] = "";
        ASSERT_EQ(loomCommGetLastAlgorithm(comm, name, sizeof name), loomSuccess);
        ran[static_cast<size_t>(r)].push_back(name);
      }
    });
  for (auto& t : threads) t.join();
  for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
  return ran;
}

std::set<std::string> distinct(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

constexpr size_t kCount = 2048;  // 8 KiB: the model finds several candidates close
constexpr int kCalls = 500;      // more than one exploration's calls (up to 4 x 6 turns of 16)

TEST(OnlineTuning, RanksRunTheSameCandidatesCallByCallAndResultsStayExact) {
  for (int nranks : {2, 3}) {
    SCOPED_TRACE(std::to_string(nranks) + " ranks");
    const auto ran = runCalls(nranks, kCount, kCalls);
    if (::testing::Test::HasFatalFailure()) return;
    for (int r = 1; r < nranks; ++r) EXPECT_EQ(ran[static_cast<size_t>(r)], ran[0]) << "rank " << r;
    EXPECT_GE(distinct(ran[0]).size(), 2u) << "exploration ran one algorithm only: " << ran[0].front();
    // Settled by the end: the last 50 calls all ran the winner.
    const std::vector<std::string> tail(ran[0].end() - 50, ran[0].end());
    EXPECT_EQ(distinct(tail).size(), 1u);
  }
}

TEST(OnlineTuning, OffWithLoomTunerOnlineZero) {
  ScopedEnv off("LOOM_TUNER_ONLINE", "0");
  const auto ran = runCalls(3, kCount, 200);
  EXPECT_EQ(distinct(ran[0]).size(), 1u);
}

TEST(OnlineTuning, OffWhenLoomAlgoForcesTheChoice) {
  ScopedEnv algo("LOOM_ALGO", "ring,rd");
  const auto ran = runCalls(3, kCount, 200);
  EXPECT_EQ(distinct(ran[0]).size(), 1u);
}

}  // namespace
