// Supervision: exit statuses, failure reports, stopping the other ranks (and
// what they started) promptly, SIGTERM/SIGKILL escalation, and loomrun being
// signalled or killed itself. Ranks record their pids in files so the test
// can check afterwards that no process of the job survived.
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

// Writes the shell's pid (or $! of a background job) atomically.
const std::string kWritePid = "echo $$ > $D/pid.$RANK.tmp && mv $D/pid.$RANK.tmp $D/pid.$RANK";

std::string waitForPidsOf(const std::vector<int>& ranks) {
  std::string script;
  for (int rank : ranks) {
    script += "while [ ! -f $D/pid." + std::to_string(rank) + " ]; do sleep 0.01; done; ";
  }
  return script;
}

class LoomrunSupervision : public ::testing::Test {
 protected:
  void SetUp() override { becomeSubreaper(); }

  // A failed test may leave ranks behind; do not let them outlive it. (Only
  // then: after a pass the pids are gone and could name someone else.)
  void TearDown() override {
    if (!HasFailure()) return;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      std::string name = entry.path().filename().string();
      if (!name.starts_with("pid.") || name.ends_with(".tmp")) continue;
      std::optional<pid_t> pid = waitForPidFile(entry.path().string(), Seconds(0.1));
      if (pid) kill(*pid, SIGKILL);
    }
  }

  EnvChanges env() const { return {{"D", dir_.path()}}; }

  pid_t pidOf(int rank, const std::string& name = "pid") {
    std::optional<pid_t> pid = waitForPidFile(dir_.file(name + "." + std::to_string(rank)),
                                              Seconds(5));
    EXPECT_TRUE(pid.has_value()) << "rank " << rank << " wrote no " << name << " file";
    return pid.value_or(-1);
  }

  void expectGone(pid_t pid, const char* what) {
    EXPECT_TRUE(pid > 0 && waitUntilGone(pid, Seconds(2))) << what << " " << pid << " survived";
  }

  TempDir dir_;
};

TEST_F(LoomrunSupervision, AllRanksSucceedingExitsZero) {
  ProcessResult r = runLoomrun({"-n", "4", "sh", "-c", "exit 0"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(LoomrunSupervision, FailingRankStatusIsPropagated) {
  ProcessResult r = runLoomrun({"-n", "3", "sh", "-c", kWritePid + "; [ $RANK != 1 ] || exit 7"},
                               env());
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 7);
  pid_t failed = pidOf(1);
  EXPECT_NE(r.err.find("loomrun: rank 1 (pid " + std::to_string(failed) +
                       ") exited with status 7"),
            std::string::npos)
      << r.err;
}

TEST_F(LoomrunSupervision, FailureStopsSleepingRanksPromptly) {
  // Ranks 0, 1, 3 become `sleep 1000`; rank 2 fails once they all exist.
  std::string script = "if [ $RANK = 2 ]; then " + waitForPidsOf({0, 1, 3}) +
                       "echo giving up >&2; exit 3; fi; " + kWritePid + "; exec sleep 1000";
  ProcessResult r = runLoomrun({"-n", "4", "sh", "-c", script}, env(), Seconds(8));
  ASSERT_TRUE(r.finished) << "loomrun did not stop the sleeping ranks";
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_LT(r.seconds, 4.0) << "SIGTERM should end `sleep` at once";
  EXPECT_NE(r.err.find("giving up\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") exited with status 3; stopping the other 3 ranks\n"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("loomrun: rank 2 (pid "), std::string::npos) << r.err;
  EXPECT_LT(r.err.find("giving up"), r.err.find("loomrun: rank 2")) << r.err;
  for (int rank : {0, 1, 3}) expectGone(pidOf(rank), "rank");
}

TEST_F(LoomrunSupervision, FailureStopsProcessesTheRanksStarted) {
  // The shell is not replaced by `sleep` here: the sleep is its child and
  // must be stopped with it.
  std::string script = "if [ $RANK = 0 ]; then " + waitForPidsOf({1, 2}) +
                       "exit 5; fi; sleep 1000 & echo $! > $D/pid.$RANK.tmp && "
                       "mv $D/pid.$RANK.tmp $D/pid.$RANK; wait";
  ProcessResult r = runLoomrun({"-n", "3", "sh", "-c", script}, env(), Seconds(8));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 5);
  EXPECT_LT(r.seconds, 4.0);
  for (int rank : {1, 2}) expectGone(pidOf(rank), "sleep started by rank");
}

TEST_F(LoomrunSupervision, RankKilledBySignalIsReported) {
  std::string script = kWritePid + "; if [ $RANK = 1 ]; then " + waitForPidsOf({0}) +
                       "kill -9 $$; fi; exec sleep 1000";
  ProcessResult r = runLoomrun({"-n", "2", "sh", "-c", script}, env(), Seconds(8));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 128 + SIGKILL);
  pid_t killed = pidOf(1);
  EXPECT_NE(r.err.find("loomrun: rank 1 (pid " + std::to_string(killed) +
                       ") was killed by signal 9 (Killed); stopping the other 1 rank\n"),
            std::string::npos)
      << r.err;
  expectGone(pidOf(0), "rank");
}

TEST_F(LoomrunSupervision, RankIgnoringSigtermIsKilledAfterTimeout) {
  std::string script = "if [ $RANK = 1 ]; then " + waitForPidsOf({0}) +
                       "exit 1; fi; trap '' TERM; " + kWritePid + "; exec sleep 1000";
  ProcessResult r = runLoomrun({"-n", "2", "--kill-timeout", "0.5", "sh", "-c", script}, env(),
                               Seconds(8));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_GE(r.seconds, 0.5) << "SIGKILL came before the kill timeout";
  EXPECT_LT(r.seconds, 4.0);
  expectGone(pidOf(0), "rank ignoring SIGTERM");
}

TEST_F(LoomrunSupervision, ProcessHoldingOutputAfterRanksFinishIsStopped) {
  // The rank exits at once, but its background `sleep` keeps the pipe open.
  std::string script = "sleep 1000 & echo $! > $D/pid.$RANK.tmp && mv $D/pid.$RANK.tmp $D/pid.$RANK";
  ProcessResult r = runLoomrun({"-n", "2", "sh", "-c", script}, env(), Seconds(8));
  ASSERT_TRUE(r.finished) << "loomrun waited for the rank's background process";
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_LT(r.seconds, 4.0);
  for (int rank : {0, 1}) expectGone(pidOf(rank), "background sleep");
}

TEST_F(LoomrunSupervision, SigtermToLoomrunStopsTheRanks) {
  ChildProcess loomrun(loomrunCommand({"-n", "3", "sh", "-c", kWritePid + "; exec sleep 1000"}),
                       env());
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 3; ++rank) pids.push_back(pidOf(rank));
  ASSERT_EQ(kill(loomrun.pid(), SIGTERM), 0);
  ProcessResult r = loomrun.wait(Seconds(8));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 128 + SIGTERM);
  EXPECT_NE(r.err.find("loomrun: got signal 15"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("loomrun: rank"), std::string::npos) << "not a rank failure: " << r.err;
  for (pid_t pid : pids) expectGone(pid, "rank");
}

TEST_F(LoomrunSupervision, SigintIsForwardedToTheRanks) {
  // The ranks exit 0 on SIGINT, so loomrun's status shows it got SIGINT.
  std::string script = "trap 'echo interrupted; exit 0' INT; " + kWritePid +
                       "; while :; do sleep 0.05; done";
  ChildProcess loomrun(loomrunCommand({"-n", "2", "sh", "-c", script}), env());
  for (int rank = 0; rank < 2; ++rank) pidOf(rank);
  ASSERT_EQ(kill(loomrun.pid(), SIGINT), 0);
  ProcessResult r = loomrun.wait(Seconds(8));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 128 + SIGINT);
  std::vector<std::string> out = splitLines(r.out);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"interrupted", "interrupted"})) << r.err;
}

TEST_F(LoomrunSupervision, RanksDieWhenLoomrunIsKilled) {
  ChildProcess loomrun(loomrunCommand({"-n", "2", "sh", "-c", kWritePid + "; exec sleep 1000"}),
                       env());
  std::vector<pid_t> pids{pidOf(0), pidOf(1)};
  ASSERT_EQ(kill(loomrun.pid(), SIGKILL), 0);
  ProcessResult r = loomrun.wait(Seconds(5));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.termSignal, SIGKILL);
  for (pid_t pid : pids) expectGone(pid, "rank (PR_SET_PDEATHSIG)");
}

}  // namespace
}  // namespace loom::launcher::testing
