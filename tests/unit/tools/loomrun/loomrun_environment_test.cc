// The environment each rank gets: torchrun's variables, the rank arithmetic
// of multi-node jobs, and a LOOM_JOB_SECRET shared by all ranks.
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/unit/tools/loomrun/process_runner.h"

namespace loom::launcher::testing {
namespace {

// Variables each rank echoes, in this order, after its tag.
const std::vector<std::string> kVariables = {
    "RANK",        "WORLD_SIZE",      "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
    "GROUP_RANK",  "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "LOOM_JOB_SECRET", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID"};

std::string echoVariablesScript() {
  std::string script = "echo";
  for (const std::string& v : kVariables) script += " \"${" + v + ":-unset}\"";
  return script;
}

// Rank (from the "[r] " tag) -> variable -> value.
using RankValues = std::map<int, std::map<std::string, std::string>>;

RankValues parseRankLines(const std::string& out) {
  RankValues values;
  for (const std::string& line : splitLines(out)) {
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    EXPECT_TRUE(tag.size() > 2 && tag.front() == '[' && tag.back() == ']') << line;
    int rank = std::stoi(tag.substr(1, tag.size() - 2));
    EXPECT_EQ(values.count(rank), 0u) << "rank " << rank << " printed twice";
    for (const std::string& v : kVariables) in >> values[rank][v];
  }
  return values;
}

bool isSecret(const std::string& s) { return std::regex_match(s, std::regex("[0-9a-f]{32}")); }

// Variables a caller might have exported; loomrun must replace them.
const EnvChanges kStaleEnvironment = {{"RANK", "99"},
                                      {"WORLD_SIZE", "99"},
                                      {"LOOM_JOB_SECRET", std::nullopt},
                                      {"TORCHELASTIC_RUN_ID", std::nullopt}};

TEST(LoomrunEnvironment, SingleNodeRanksGetTorchrunVariables) {
  const int n = 3;
  ProcessResult r = runLoomrun({"-n", std::to_string(n), "--tag-output", "sh", "-c", echoVariablesScript()},
                               kStaleEnvironment);
  ASSERT_TRUE(r.finished);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  RankValues values = parseRankLines(r.out);
  ASSERT_EQ(values.size(), static_cast<size_t>(n)) << r.out;
  const std::map<std::string, std::string>& first = values.begin()->second;
  int port = std::stoi(first.at("MASTER_PORT"));
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
  EXPECT_TRUE(isSecret(first.at("LOOM_JOB_SECRET"))) << first.at("LOOM_JOB_SECRET");
  for (int rank = 0; rank < n; ++rank) {
    ASSERT_EQ(values.count(rank), 1u) << "no output from rank " << rank;
    const auto& v = values[rank];
    EXPECT_EQ(v.at("RANK"), std::to_string(rank));
    EXPECT_EQ(v.at("WORLD_SIZE"), std::to_string(n));
    EXPECT_EQ(v.at("LOCAL_RANK"), std::to_string(rank));
    EXPECT_EQ(v.at("LOCAL_WORLD_SIZE"), std::to_string(n));
    EXPECT_EQ(v.at("GROUP_RANK"), "0");
    EXPECT_EQ(v.at("GROUP_WORLD_SIZE"), "1");
    EXPECT_EQ(v.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(v.at("MASTER_PORT"), first.at("MASTER_PORT"));
    EXPECT_EQ(v.at("LOOM_JOB_SECRET"), first.at("LOOM_JOB_SECRET"));
    EXPECT_EQ(v.at("TORCHELASTIC_RESTART_COUNT"), "0");
    EXPECT_EQ(v.at("TORCHELASTIC_MAX_RESTARTS"), "0");
    EXPECT_EQ(v.at("TORCHELASTIC_RUN_ID"), "none");
  }
}

TEST(LoomrunEnvironment, EachSingleNodeJobGetsItsOwnSecret) {
  std::set<std::string> secrets;
  for (int job = 0; job < 3; ++job) {
    ProcessResult r = runLoomrun({"-n", "1", "sh", "-c", "echo $LOOM_JOB_SECRET"},
                                 kStaleEnvironment);
    ASSERT_TRUE(r.finished);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::string secret = r.out.substr(0, r.out.find('\n'));
    EXPECT_TRUE(isSecret(secret)) << secret;
    secrets.insert(secret);
  }
  EXPECT_EQ(secrets.size(), 3u);
}

TEST(LoomrunEnvironment, MultiNodeRankArithmeticAndInheritedSecret) {
  const int perNode = 2, nodes = 3;
  const std::string secret = "0123456789abcdefFEDCBA9876543210";
  for (int node = 0; node < nodes; ++node) {
    ProcessResult r = runLoomrun(
        {"-n", std::to_string(perNode), "--nnodes", std::to_string(nodes), "--node-rank",
         std::to_string(node), "--master-addr", "10.1.2.3", "--master-port", "29555", "--tag-output", "sh", "-c",
         echoVariablesScript()},
        {{"LOOM_JOB_SECRET", secret}, {"TORCHELASTIC_RUN_ID", "job42"}, {"RANK", "99"}});
    ASSERT_TRUE(r.finished);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    RankValues values = parseRankLines(r.out);
    ASSERT_EQ(values.size(), static_cast<size_t>(perNode)) << r.out;
    for (int local = 0; local < perNode; ++local) {
      int rank = node * perNode + local;
      ASSERT_EQ(values.count(rank), 1u) << "node " << node << " lacks rank " << rank;
      const auto& v = values[rank];
      EXPECT_EQ(v.at("RANK"), std::to_string(rank));
      EXPECT_EQ(v.at("WORLD_SIZE"), std::to_string(perNode * nodes));
      EXPECT_EQ(v.at("LOCAL_RANK"), std::to_string(local));
      EXPECT_EQ(v.at("LOCAL_WORLD_SIZE"), std::to_string(perNode));
      EXPECT_EQ(v.at("GROUP_RANK"), std::to_string(node));
      EXPECT_EQ(v.at("GROUP_WORLD_SIZE"), std::to_string(nodes));
      EXPECT_EQ(v.at("MASTER_ADDR"), "10.1.2.3");
      EXPECT_EQ(v.at("MASTER_PORT"), "29555");
      EXPECT_EQ(v.at("LOOM_JOB_SECRET"), secret);
      EXPECT_EQ(v.at("TORCHELASTIC_RUN_ID"), "job42");
    }
  }
}

TEST(LoomrunEnvironment, MultiNodeWithoutSecretIsRejected) {
  ProcessResult r = runLoomrun({"-n", "2", "--nnodes", "2", "--node-rank", "0",
                                "--master-port", "29555", "sh", "-c", "echo ran"},
                               {{"LOOM_JOB_SECRET", std::nullopt}});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("LOOM_JOB_SECRET"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("every node"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << "no rank may start: " << r.out;
}

TEST(LoomrunEnvironment, MultiNodeWithoutPortIsRejected) {
  ProcessResult r = runLoomrun({"-n", "2", "--nnodes", "2", "--node-rank", "1", "sh", "-c",
                                "echo ran"},
                               {{"LOOM_JOB_SECRET", "00112233445566778899aabbccddeeff"}});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("'--master-port'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(LoomrunEnvironment, MalformedInheritedSecretIsRejected) {
  for (const char* bad : {"abc", "0123456789abcdef0123456789abcdeg",
                          "0123456789abcdef0123456789abcdef0"}) {
    ProcessResult r = runLoomrun({"-n", "1", "sh", "-c", "echo ran"}, {{"LOOM_JOB_SECRET", bad}});
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.exitCode, 2) << bad;
    EXPECT_NE(r.err.find("LOOM_JOB_SECRET"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(LoomrunEnvironment, FreePortIsPickedOnTheMasterAddress) {
  ProcessResult r = runLoomrun({"-n", "1", "--master-addr", "::1", "sh", "-c",
                                "echo $MASTER_ADDR $MASTER_PORT"});
  ASSERT_TRUE(r.finished);
  if (r.exitCode != 0 && r.err.find("cannot bind") != std::string::npos) {
    GTEST_SKIP() << "no IPv6 loopback here: " << r.err;
  }
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream in(r.out);
  std::string addr;
  int port = 0;
  in >> addr >> port;
  EXPECT_EQ(addr, "::1");
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
}

TEST(LoomrunEnvironment, MasterAddressNotOnThisMachineNeedsAPort) {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address.
  ProcessResult r = runLoomrun({"-n", "1", "--master-addr", "192.0.2.1", "sh", "-c", "echo ran"});
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--master-addr '192.0.2.1'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--master-port"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace loom::launcher::testing
