// loomrun --nnodes MIN:MAX on shell "programs": options, the environment of
// each round, rank failures restarting every node, and the MIN deadline.
// (tests/unit/tools/loomrun/elastic_membership_test.sh runs train_demo with
// nodes leaving and joining.)
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

constexpr const char* kSecret = "00112233445566778899aabbccddeeff";

// A port below the kernel's ephemeral range that nobody holds right now. A
// port the kernel picks (bind to port 0) comes from the range that every
// connection of the tests running alongside takes its local port from: one
// of them can take it before the agents bind it, and then no agent can host
// the rendezvous and each waits for a host that never comes (a 20 s timeout
// under a parallel ctest run).
int freePort() {
  int ephemeralLow = 32768, ephemeralHigh = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &ephemeralLow, &ephemeralHigh) != 2) ephemeralLow = 32768;
    std::fclose(f);
  }
  constexpr int kLowest = 10000;
  const int span = std::max(ephemeralLow - kLowest, 1);
  const int start = static_cast<int>(std::random_device{}() % static_cast<unsigned>(span));
  for (int i = 0; i < span; ++i) {
    const int port = kLowest + (start + i) % span;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (bound) return port;
  }
  ADD_FAILURE() << "no free port in [" << kLowest << ", " << ephemeralLow << ")";
  return 0;
}

// Polls for `path` (a rank touches it once it runs), at most `timeout`.
bool waitForFile(const std::string& path, Seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    usleep(20 * 1000);
  }
  return true;
}

std::vector<std::string> agentArgs(const std::string& nnodes, int localRanks, int port,
                                   const std::vector<std::string>& more) {
  std::vector<std::string> args{"--nnodes", nnodes, "-n", std::to_string(localRanks), "--rdzv-endpoint",
                                "127.0.0.1:" + std::to_string(port), "--rdzv-id", "gtest"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Lines "KEY=VALUE ..." printed by the ranks, as maps.
std::vector<std::map<std::string, std::string>> parseRankLines(const std::string& out) {
  std::vector<std::map<std::string, std::string>> ranks;
  for (const std::string& line : splitLines(out)) {
    std::istringstream words(line);
    std::map<std::string, std::string> fields;
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      if (eq != std::string::npos) fields[w.substr(0, eq)] = w.substr(eq + 1);
    }
    if (fields.count("RANK") != 0) ranks.push_back(fields);
  }
  return ranks;
}

const char* kPrintEnv =
    "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK GROUP_RANK=$GROUP_RANK "
    "GROUP_WORLD_SIZE=$GROUP_WORLD_SIZE MASTER=$MASTER_ADDR:$MASTER_PORT RESTART=$TORCHELASTIC_RESTART_COUNT";

TEST(LoomrunElastic, BadElasticOptionsExitTwoNamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    const char* expect;
  };
  const Case cases[] = {
      {{"--nnodes", "3:2", "--rdzv-endpoint", "127.0.0.1:1", "-n", "1", "true"}, "MIN <= MAX, got 3:2"},
      {{"--nnodes", "1:2", "-n", "1", "true"}, "needs --rdzv-endpoint HOST:PORT"},
      {{"--nnodes", "1:2", "--node-rank", "1", "--rdzv-endpoint", "127.0.0.1:1", "-n", "1", "true"},
       "the rendezvous assigns node ranks"},
      {{"--rdzv-conf", "join_timout=3", "-n", "1", "true"}, "knows join_timeout and last_call_timeout"},
      {{"--rdzv-timeout", "0", "-n", "1", "true"}, "option '--rdzv-timeout' expects seconds"},
      {{"--nnodes", "1:x", "-n", "1", "true"}, "--nnodes"},
  };
  // Nodes of an elastic job share a secret as those of a static one.
  ProcessResult noSecret = runLoomrun({"--nnodes", "1:3", "--rdzv-endpoint", "127.0.0.1:1", "-n", "1", "true"},
                                      {{"LOOM_JOB_SECRET", std::nullopt}});
  ASSERT_TRUE(noSecret.finished);
  EXPECT_EQ(noSecret.exitCode, 2);
  EXPECT_NE(noSecret.err.find("LOOM_JOB_SECRET is not set: with --nnodes 1:3"), std::string::npos) << noSecret.err;
  for (const Case& c : cases) {
    ProcessResult r = runLoomrun(c.args, {{"LOOM_JOB_SECRET", kSecret}});
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exitCode, 2) << c.expect;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
  }
}

// Two agents of two ranks each: one round of 2 nodes, every rank's torchrun
// variables consistent (ranks 0..3 once each, node of a rank = rank / 2).
TEST(LoomrunElastic, TwoAgentsFormOneRoundWithTheTorchrunEnvironment) {
  const int port = freePort();
  EnvChanges env{{"LOOM_JOB_SECRET", kSecret}};
  auto args = agentArgs("1:2", 2, port, {"--rdzv-conf", "last_call_timeout=5", "sh", "-c", kPrintEnv});
  ChildProcess first(loomrunCommand(args), env);
  ChildProcess second(loomrunCommand(args), env);
  ProcessResult a = first.wait(Seconds(20));
  ProcessResult b = second.wait(Seconds(20));
  ASSERT_TRUE(a.finished && b.finished);
  EXPECT_EQ(a.exitCode, 0) << a.err;
  EXPECT_EQ(b.exitCode, 0) << b.err;
  // MAX joined: the round closed at once, not after the 5 s last call.
  EXPECT_LT(std::max(a.seconds, b.seconds), 4.0);
  auto ranks = parseRankLines(a.out + b.out);
  ASSERT_EQ(ranks.size(), 4u) << a.out << b.out;
  std::set<int> seen;
  for (const auto& r : ranks) {
    const int rank = std::stoi(r.at("RANK"));
    seen.insert(rank);
    EXPECT_EQ(r.at("WORLD_SIZE"), "4");
    EXPECT_EQ(r.at("GROUP_WORLD_SIZE"), "2");
    EXPECT_EQ(r.at("LOCAL_RANK"), std::to_string(rank % 2));
    EXPECT_EQ(r.at("GROUP_RANK"), std::to_string(rank / 2));
    EXPECT_EQ(r.at("MASTER"), ranks[0].at("MASTER"));
    EXPECT_EQ(r.at("RESTART"), "0");
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3}));
}

// With MIN joined and nobody else, the round closes after the last call.
TEST(LoomrunElastic, RoundClosesWithMinAfterTheLastCall) {
  auto args = agentArgs("1:3", 1, freePort(), {"--rdzv-conf", "last_call_timeout=0.5", "sh", "-c", kPrintEnv});
  ProcessResult r = runLoomrun(args, {{"LOOM_JOB_SECRET", kSecret}}, Seconds(20));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_GE(r.seconds, 0.5);
  auto ranks = parseRankLines(r.out);
  ASSERT_EQ(ranks.size(), 1u) << r.out;
  EXPECT_EQ(ranks[0].at("WORLD_SIZE"), "1");
}

// A rank failing on one node ends the round on every node; both meet again
// and the second round (TORCHELASTIC_RESTART_COUNT 1) succeeds. Without
// restarts left the failing status is loomrun's.
TEST(LoomrunElastic, RankFailureRestartsEveryNodeWithinMaxRestarts) {
  const std::string program = std::string("if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 1 ]; then exit 3; fi; "
                                           "[ $RANK = 1 ] || sleep 0.3; ") + kPrintEnv;
  EnvChanges env{{"LOOM_JOB_SECRET", kSecret}};
  for (int maxRestarts : {1, 0}) {
    auto args = agentArgs("2:2", 1, freePort(),
                          {"--max-restarts", std::to_string(maxRestarts), "--kill-timeout", "1", "sh", "-c", program});
    ChildProcess first(loomrunCommand(args), env);
    ChildProcess second(loomrunCommand(args), env);
    ProcessResult a = first.wait(Seconds(20));
    ProcessResult b = second.wait(Seconds(20));
    // What each agent said: a round that never ends is otherwise silent.
    ASSERT_TRUE(a.finished && b.finished) << "max-restarts " << maxRestarts << "\nfirst agent (finished "
                                          << a.finished << "):\n" << a.err << "\nsecond agent (finished "
                                          << b.finished << "):\n" << b.err;
    if (maxRestarts == 1) {
      EXPECT_EQ(a.exitCode, 0) << a.err;
      EXPECT_EQ(b.exitCode, 0) << b.err;
      auto ranks = parseRankLines(a.out + b.out);
      ASSERT_EQ(ranks.size(), 2u) << a.out << b.out;
      for (const auto& r : ranks) EXPECT_EQ(r.at("RESTART"), "1");
      EXPECT_NE((a.err + b.err).find("a node had a rank fail"), std::string::npos) << a.err << b.err;
    } else {
      // The failing node exits with its rank's status; the other with 1 or
      // the status its stopped rank got, never 0.
      EXPECT_TRUE(a.exitCode == 3 || b.exitCode == 3) << a.err << b.err;
      EXPECT_NE(a.exitCode, 0);
      EXPECT_NE(b.exitCode, 0);
      EXPECT_NE((a.err + b.err).find("no restarts left (--max-restarts 0)"), std::string::npos) << a.err << b.err;
    }
  }
}

// An agent joining a running round with room (fewer than MAX nodes) ends it;
// the next round has both nodes. Like torchrun, that restart is not a
// failure: it happens under --max-restarts 0.
TEST(LoomrunElastic, LateAgentRestartsTheRoundWithMoreNodesWithoutUsingARestart) {
  const int port = freePort();
  EnvChanges env{{"LOOM_JOB_SECRET", kSecret}};
  TempDir dir;
  const std::string program =
      std::string(kPrintEnv) + "; [ $WORLD_SIZE = 2 ] || { touch " + dir.file("alone") + "; exec sleep 30; }";
  auto args = agentArgs("1:2", 1, port,
                        {"--rdzv-conf", "last_call_timeout=0.2", "--max-restarts", "0", "--kill-timeout", "1", "sh",
                         "-c", program});
  ChildProcess first(loomrunCommand(args), env);
  ASSERT_TRUE(waitForFile(dir.file("alone"), Seconds(10)));  // round 0 (one node) runs its `sleep 30`
  ChildProcess late(loomrunCommand(args), env);
  ProcessResult a = first.wait(Seconds(20));
  ProcessResult b = late.wait(Seconds(20));
  ASSERT_TRUE(a.finished && b.finished);
  EXPECT_EQ(a.exitCode, 0) << a.err;
  EXPECT_EQ(b.exitCode, 0) << b.err;
  EXPECT_LT(a.seconds, 10.0);  // the sleep was cut short by the new round
  EXPECT_NE(a.err.find("rendezvous round 0 ended (a node joined)"), std::string::npos) << a.err;
  // TORCHELASTIC_RESTART_COUNT counts this agent's earlier rounds.
  auto firstRanks = parseRankLines(a.out);
  auto lateRanks = parseRankLines(b.out);
  ASSERT_EQ(firstRanks.size(), 2u) << a.out;  // round 0 alone, round 1 with the late agent
  ASSERT_EQ(lateRanks.size(), 1u) << b.out;
  EXPECT_EQ(firstRanks[0].at("WORLD_SIZE"), "1");
  EXPECT_EQ(firstRanks[0].at("RESTART"), "0");
  EXPECT_EQ(firstRanks[1].at("WORLD_SIZE"), "2");
  EXPECT_EQ(firstRanks[1].at("RESTART"), "1");
  EXPECT_EQ(lateRanks[0].at("WORLD_SIZE"), "2");
  EXPECT_EQ(lateRanks[0].at("RESTART"), "0");
  // The first agent keeps node 0; the newcomer follows.
  EXPECT_EQ(firstRanks[1].at("RANK"), "0");
  EXPECT_EQ(lateRanks[0].at("RANK"), "1");
  EXPECT_EQ(firstRanks[1].at("MASTER"), lateRanks[0].at("MASTER"));
}

// A node whose agent dies leaves: the others meet again without it (a
// restart used), or fail when none is left.
TEST(LoomrunElastic, KilledAgentLeavesAndTheOthersGoOnWithFewerNodes) {
  EnvChanges env{{"LOOM_JOB_SECRET", kSecret}};
  for (int maxRestarts : {1, 0}) {
    TempDir dir;
    const std::string program =
        std::string(kPrintEnv) + "; [ $WORLD_SIZE = 1 ] || { touch " + dir.path() + "/rank$RANK; exec sleep 30; }";
    const int port = freePort();
    auto args = agentArgs("1:2", 1, port,
                          {"--rdzv-conf", "last_call_timeout=0.5", "--max-restarts", std::to_string(maxRestarts),
                           "--kill-timeout", "1", "sh", "-c", program});
    ChildProcess stays(loomrunCommand(args), env);
    usleep(100 * 1000);  // the first agent hosts, so the one killed does not
    ChildProcess leaves(loomrunCommand(args), env);
    // Round 0 (two nodes) is running.
    ASSERT_TRUE(waitForFile(dir.file("rank0"), Seconds(10)) && waitForFile(dir.file("rank1"), Seconds(10)));
    kill(leaves.pid(), SIGKILL);
    ProcessResult r = stays.wait(Seconds(20));
    ASSERT_TRUE(r.finished);
    EXPECT_NE(r.err.find("rendezvous round 0 ended (a node left)"), std::string::npos) << r.err;
    if (maxRestarts == 1) {
      EXPECT_EQ(r.exitCode, 0) << r.err;
      auto ranks = parseRankLines(r.out);
      ASSERT_EQ(ranks.size(), 2u) << r.out << r.err;
      EXPECT_EQ(ranks[0].at("WORLD_SIZE"), "2");
      EXPECT_EQ(ranks[1].at("WORLD_SIZE"), "1");
      EXPECT_EQ(ranks[1].at("RANK"), "0");
      EXPECT_EQ(ranks[1].at("RESTART"), "1");
      EXPECT_NE(r.err.find("restarts used: 1 of 1"), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.exitCode, 1) << r.err;
      EXPECT_NE(r.err.find("no restarts left (--max-restarts 0)"), std::string::npos) << r.err;
    }
  }
}

TEST(LoomrunElastic, FewerThanMinIsAnErrorWithinTheJoinTimeout) {
  auto args = agentArgs("2:4", 1, freePort(), {"--rdzv-timeout", "0.5", "true"});
  ProcessResult r = runLoomrun(args, {{"LOOM_JOB_SECRET", kSecret}}, Seconds(20));
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("only 1 of the minimum 2 nodes joined rendezvous 'gtest' within the join timeout of 0.5 s "
                       "(--nnodes 2:4)"),
            std::string::npos)
      << r.err;
  EXPECT_GE(r.seconds, 0.5);
  EXPECT_LT(r.seconds, 3.0);
}

TEST(LoomrunElastic, AgentsWithDifferentRankCountsAreRejected) {
  const int port = freePort();
  EnvChanges env{{"LOOM_JOB_SECRET", kSecret}};
  ChildProcess host(loomrunCommand(agentArgs("2:2", 2, port, {"--rdzv-timeout", "1.5", "true"})), env);
  // Let the first agent host and join first, so the second is the odd one.
  usleep(300 * 1000);
  ProcessResult odd = runLoomrun(agentArgs("2:2", 1, port, {"--rdzv-timeout", "1.5", "true"}), env, Seconds(10));
  ASSERT_TRUE(odd.finished);
  EXPECT_EQ(odd.exitCode, 1);
  EXPECT_NE(odd.err.find("-n 1 differs from the other nodes' -n 2"), std::string::npos) << odd.err;
  ProcessResult rest = host.wait(Seconds(10));
  ASSERT_TRUE(rest.finished);
  EXPECT_EQ(rest.exitCode, 1);  // alone, below MIN
}

}  // namespace
}  // namespace loom::launcher::testing
