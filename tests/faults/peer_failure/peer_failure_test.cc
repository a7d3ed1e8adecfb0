// Peer failure as the survivors see it: one rank of four is SIGKILLed (or
// SIGSTOPped) while every rank loops on one collective. Each survivor must
// fail its call with an error naming the victim's rank, host and pid, well
// before LOOM_TIMEOUT for a kill (connection loss, not the deadline) and at
// the deadline for a stop, and must leave no segment, descriptor or thread
// behind once it destroyed its communicator.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "loom/loom.h"
#include "tests/faults/peer_failure/forked_rank_faults.h"

namespace loom::testing::faults {
namespace {

// A kill must be seen through the process's death, long before the deadline.
constexpr double kKillTimeout = 30;
constexpr double kKillDetectBound = 3;  // seconds; detection is ~5-20 ms when idle
constexpr double kDestroyBound = 2;

std::string victimName(const FaultOutcome& o, int victim) {
  return "rank " + std::to_string(victim) + " (host " + o.hostName + ", pid " + std::to_string(o.victimPid) + ")";
}

void expectNoLeaks(const RankReport& rep) {
  EXPECT_EQ(rep.fdsAfter, rep.fdsBefore) << "rank " << rep.rank << " leaked descriptors";
  EXPECT_EQ(rep.tasksAfter, rep.tasksBefore) << "rank " << rep.rank << " leaked threads";
  EXPECT_EQ(rep.shmLeft, "") << "rank " << rep.rank << " left shared-memory segments";
  EXPECT_LT(rep.destroySeconds, kDestroyBound) << "rank " << rep.rank << " blocked in loomCommDestroy";
}

void printOutcome(const FaultCase& c, const FaultOutcome& o) {
  for (const auto& rep : o.reports)
    std::printf("[%s %s] rank %d after %.3f s (%d calls before, destroy %.3f s): code %d: %s\n", c.collective.c_str(),
                c.fault == Fault::kKill ? "SIGKILL" : c.fault == Fault::kStop ? "SIGSTOP" : "exit(7)", rep.rank, rep.failedAfter, rep.callsBeforeFault,
                rep.destroySeconds,
                rep.code, rep.message.c_str());
}

class KillDuringCollective : public ::testing::TestWithParam<std::string> {};

TEST_P(KillDuringCollective, EverySurvivorNamesTheDeadRank) {
  FaultCase c;
  c.collective = GetParam();
  c.fault = Fault::kKill;
  c.nranks = 4;
  c.victim = 2;
  c.timeoutSeconds = kKillTimeout;
  // Large enough that each call takes milliseconds, so the kill lands inside one.
  c.count = c.collective == "alltoall" || c.collective == "allgather" || c.collective == "reducescatter"
                ? (256u << 10)
                : (1u << 20);
  FaultOutcome o = runFaultCase(c);
  ASSERT_EQ(o.setupError, "");
  printOutcome(c, o);
  EXPECT_TRUE(o.missing.empty()) << "survivors without a report: " << o.missing.size();
  ASSERT_EQ(o.reports.size(), 3u);
  const std::string dead = victimName(o, c.victim) + " died: killed by signal 9 (SIGKILL)";
  for (const auto& rep : o.reports) {
    SCOPED_TRACE("rank " + std::to_string(rep.rank) + ": " + rep.message);
    EXPECT_EQ(rep.code, loomRemoteError);
    EXPECT_NE(rep.message.find(dead), std::string::npos) << "expected \"" << dead << "\"";
    // Seen inside the call that was running (a wait), not at the next call's start.
    EXPECT_NE(rep.message.find("(noticed while waiting for"), std::string::npos);
    EXPECT_NE(rep.message.find("on rank " + std::to_string(rep.rank)), std::string::npos);
    EXPECT_GE(rep.failedAfter, 0.0);
    EXPECT_LT(rep.failedAfter, kKillDetectBound);
    // The communicator is failed for good, and says so at once.
    EXPECT_EQ(rep.asyncCode, loomRemoteError);
    EXPECT_EQ(rep.nextCallCode, loomRemoteError);
    EXPECT_LT(rep.nextCallSeconds, 0.1);
    expectNoLeaks(rep);
  }
}

INSTANTIATE_TEST_SUITE_P(Collectives, KillDuringCollective, ::testing::ValuesIn(collectiveNames()),
                         [](const auto& info) { return info.param; });

// The same through a stream: the collective runs on the communicator's
// worker thread, and the error reaches loomStreamSynchronize and
// loomCommGetAsyncError; the worker thread is gone after destroy.
TEST(KillDuringStreamCollective, SynchronizeAndAsyncErrorReportTheDeadRank) {
  FaultCase c;
  c.collective = "allreduce";
  c.onStream = true;
  c.nranks = 3;
  c.victim = 0;
  c.timeoutSeconds = kKillTimeout;
  FaultOutcome o = runFaultCase(c);
  ASSERT_EQ(o.setupError, "");
  printOutcome(c, o);
  ASSERT_EQ(o.reports.size(), 2u);
  const std::string dead = victimName(o, c.victim) + " died: killed by signal 9 (SIGKILL)";
  for (const auto& rep : o.reports) {
    SCOPED_TRACE("rank " + std::to_string(rep.rank) + ": " + rep.message);
    EXPECT_EQ(rep.code, loomRemoteError);
    EXPECT_NE(rep.message.find(dead), std::string::npos) << "expected \"" << dead << "\"";
    EXPECT_LT(rep.failedAfter, kKillDetectBound);
    EXPECT_EQ(rep.asyncCode, loomRemoteError);
    EXPECT_EQ(rep.nextCallCode, loomRemoteError);
    expectNoLeaks(rep);
  }
}

// A rank that exits without destroying its communicator (exit status 7)
// died as far as its peers can tell; one that destroyed it first did not
// (the stop test checks that no survivor's exit reads as a death).
TEST(ExitWithoutDestroy, SurvivorsNameTheRankAndItsExitStatus) {
  FaultCase c;
  c.collective = "allreduce";
  c.fault = Fault::kExit;
  c.nranks = 3;
  c.victim = 1;
  c.timeoutSeconds = kKillTimeout;
  FaultOutcome o = runFaultCase(c);
  ASSERT_EQ(o.setupError, "");
  printOutcome(c, o);
  ASSERT_EQ(o.reports.size(), 2u);
  const std::string dead = victimName(o, c.victim) + " died: exited with status 7 without destroying its communicator";
  for (const auto& rep : o.reports) {
    SCOPED_TRACE("rank " + std::to_string(rep.rank) + ": " + rep.message);
    EXPECT_EQ(rep.code, loomRemoteError);
    EXPECT_NE(rep.message.find(dead), std::string::npos) << "expected \"" << dead << "\"";
    EXPECT_LT(rep.failedAfter, kKillDetectBound);
    expectNoLeaks(rep);
  }
}

TEST(StopDuringCollective, SurvivorsTimeOutNamingTheStoppedRank) {
  FaultCase c;
  c.collective = "allreduce";
  c.fault = Fault::kStop;
  c.nranks = 4;
  c.victim = 1;
  c.timeoutSeconds = 2;
  c.count = 1u << 20;
  FaultOutcome o = runFaultCase(c);
  ASSERT_EQ(o.setupError, "");
  printOutcome(c, o);
  ASSERT_EQ(o.reports.size(), 3u);
  const std::string stalled = victimName(o, c.victim) + " made no progress for";
  for (const auto& rep : o.reports) {
    SCOPED_TRACE("rank " + std::to_string(rep.rank) + ": " + rep.message);
    EXPECT_EQ(rep.code, loomTimeout);
    EXPECT_NE(rep.message.find("timed out (LOOM_TIMEOUT)"), std::string::npos);
    EXPECT_NE(rep.message.find(stalled), std::string::npos) << "expected \"" << stalled << "\"";
    EXPECT_NE(rep.message.find("(process stopped)"), std::string::npos);
    EXPECT_EQ(rep.message.find("died"), std::string::npos) << "a stopped rank is not dead";
    // The deadline counts from the start of the call the stop interrupted.
    EXPECT_LT(rep.failedAfter, c.timeoutSeconds + 1.5);
    EXPECT_EQ(rep.asyncCode, loomTimeout);
    EXPECT_EQ(rep.nextCallCode, loomTimeout);  // sticky: the first error
    expectNoLeaks(rep);
  }
}

}  // namespace
}  // namespace loom::testing::faults
