// --max-restarts: after a rank fails, all ranks are stopped and started
// again with a fresh rendezvous, at most N times; each attempt sees its
// number in LOOM_RESTART_COUNT / TORCHELASTIC_RESTART_COUNT. Every rank
// appends one line per attempt to a file, so the test counts attempts from
// what the ranks saw, not from loomrun's own messages.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

// "<LOOM_RESTART_COUNT> <TORCHELASTIC_RESTART_COUNT> <TORCHELASTIC_MAX_RESTARTS> <port> <secret>"
const std::string kRecordAttempt =
    "echo $LOOM_RESTART_COUNT $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS "
    "$MASTER_PORT $LOOM_JOB_SECRET >> $D/attempts.$RANK; ";

class LoomrunRestart : public ::testing::Test {
 protected:
  void SetUp() override { becomeSubreaper(); }
  EnvChanges env() const { return {{"D", dir_.path()}, {"LOOM_JOB_SECRET", std::nullopt}}; }

  std::vector<std::vector<std::string>> attemptsOf(int rank) const {
    std::ifstream in(dir_.file("attempts." + std::to_string(rank)));
    std::vector<std::vector<std::string>> rows;
    std::string a, b, c, port, secret;
    while (in >> a >> b >> c >> port >> secret) rows.push_back({a, b, c, port, secret});
    return rows;
  }

  static size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  TempDir dir_;
};

TEST_F(LoomrunRestart, RankFailingOnFirstAttemptIsRestartedAndJobSucceeds) {
  // Attempt 0: rank 0 sleeps; rank 1 fails once rank 0 has recorded itself.
  // Attempt 1: both succeed.
  std::string script = kRecordAttempt +
                       "if [ $LOOM_RESTART_COUNT = 0 ]; then "
                       "  if [ $RANK = 1 ]; then "
                       "    while [ ! -s $D/attempts.0 ]; do sleep 0.01; done; exit 3; "
                       "  fi; exec sleep 1000; "
                       "fi; exit 0";
  ProcessResult r = runLoomrun({"-n", "2", "--max-restarts", "2", "sh", "-c", script}, env(),
                               Seconds(15));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  for (int rank : {0, 1}) {
    auto rows = attemptsOf(rank);
    ASSERT_EQ(rows.size(), 2u) << "rank " << rank << " should run in exactly two attempts\n" << r.err;
    for (size_t attempt = 0; attempt < rows.size(); ++attempt) {
      EXPECT_EQ(rows[attempt][0], std::to_string(attempt)) << "LOOM_RESTART_COUNT";
      EXPECT_EQ(rows[attempt][1], std::to_string(attempt)) << "TORCHELASTIC_RESTART_COUNT";
      EXPECT_EQ(rows[attempt][2], "2") << "TORCHELASTIC_MAX_RESTARTS";
    }
    // A fresh rendezvous: a new secret (the port may repeat by chance).
    EXPECT_NE(rows[0][4], rows[1][4]) << "attempt 1 reused attempt 0's LOOM_JOB_SECRET";
  }
  EXPECT_EQ(attemptsOf(0)[1][3], attemptsOf(1)[1][3]) << "ranks of one attempt share MASTER_PORT";
  EXPECT_NE(r.err.find("loomrun: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("loomrun: attempt 0 failed with status 3; restarting all 2 local ranks "
                       "(restart 1 of 2)\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(count(r.err, "restarting"), 1u) << r.err;
}

TEST_F(LoomrunRestart, RankKilledBySignalIsRestartedToo) {
  std::string script = kRecordAttempt +
                       "if [ $LOOM_RESTART_COUNT = 0 ] && [ $RANK = 0 ]; then kill -9 $$; fi; exit 0";
  ProcessResult r = runLoomrun({"-n", "2", "--max-restarts=1", "sh", "-c", script}, env());
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(attemptsOf(0).size(), 2u) << r.err;
  EXPECT_NE(r.err.find("attempt 0 failed with status 137; restarting"), std::string::npos) << r.err;
}

TEST_F(LoomrunRestart, AlwaysFailingRankUsesAllRestartsAndKeepsItsStatus) {
  std::string script = kRecordAttempt + "[ $RANK != 1 ] || exit 5";
  ProcessResult r = runLoomrun({"-n", "3", "--max-restarts", "2", "sh", "-c", script}, env(),
                               Seconds(15));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 5) << r.err;
  auto rows = attemptsOf(1);
  ASSERT_EQ(rows.size(), 3u) << "N + 1 attempts\n" << r.err;
  std::set<std::string> secrets;
  for (size_t attempt = 0; attempt < rows.size(); ++attempt) {
    EXPECT_EQ(rows[attempt][0], std::to_string(attempt));
    secrets.insert(rows[attempt][4]);
  }
  EXPECT_EQ(secrets.size(), 3u) << "every attempt gets its own rendezvous";
  EXPECT_EQ(count(r.err, "loomrun: rank 1 (pid "), 3u) << r.err;
  EXPECT_NE(r.err.find("(restart 1 of 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(restart 2 of 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("loomrun: attempt 2 failed with status 5; no restarts left (--max-restarts 2)"),
            std::string::npos)
      << r.err;
}

TEST_F(LoomrunRestart, WithoutTheOptionAFailureIsFinal) {
  std::string script = kRecordAttempt + "[ $RANK != 0 ] || exit 4";
  ProcessResult r = runLoomrun({"-n", "2", "sh", "-c", script}, env());
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 4);
  ASSERT_EQ(attemptsOf(0).size(), 1u);
  EXPECT_EQ(attemptsOf(0)[0][2], "0") << "TORCHELASTIC_MAX_RESTARTS";
  EXPECT_EQ(r.err.find("restart"), std::string::npos) << r.err;
}

TEST_F(LoomrunRestart, SignalToLoomrunNeverRestarts) {
  std::string script = kRecordAttempt + "exec sleep 1000";
  ChildProcess loomrun(loomrunCommand({"-n", "2", "--max-restarts", "3", "sh", "-c", script}), env());
  for (int rank : {0, 1}) {
    for (int i = 0; i < 500 && attemptsOf(rank).empty(); ++i) usleep(10000);
    ASSERT_EQ(attemptsOf(rank).size(), 1u) << "rank " << rank << " did not start";
  }
  ASSERT_EQ(kill(loomrun.pid(), SIGTERM), 0);
  ProcessResult r = loomrun.wait(Seconds(8));
  ASSERT_TRUE(r.finished);
  // `sleep` dies of the forwarded SIGTERM, which is not a rank failure.
  EXPECT_EQ(r.exitCode, 128 + SIGTERM) << r.err;
  EXPECT_EQ(r.err.find("restarting"), std::string::npos) << r.err;
  EXPECT_EQ(attemptsOf(0).size(), 1u);
}

TEST_F(LoomrunRestart, ProgramThatCannotStartIsNotRestarted) {
  ProcessResult r = runLoomrun({"-n", "2", "--max-restarts", "3", dir_.file("no-such-program")}, env());
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_EQ(r.err.find("restarting"), std::string::npos) << r.err;
}

TEST_F(LoomrunRestart, BadValuesAreRejected) {
  for (const char* bad : {"-1", "x", ""}) {
    ProcessResult r = runLoomrun({"-n", "1", "--max-restarts", bad, "true"});
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exitCode, 2) << bad;
    EXPECT_NE(r.err.find("option '--max-restarts'"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace loom::launcher::testing
