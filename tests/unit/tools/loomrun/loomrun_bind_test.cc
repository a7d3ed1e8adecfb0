// loomrun --bind really sets each rank's affinity: every rank runs
// print_affinity (sched_getaffinity) and the test compares with the plan and,
// independently, with the cores Linux reports in /sys.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "src/topology/binding_plan.h"

namespace loom::topology {
namespace {

struct RunResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

RunResult run(const std::string& command) {
  RunResult r;
  FILE* p = popen(("timeout 20 " + command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  r.status = pclose(p);
  return r;
}

// "[3] affinity 0,1" lines -> rank -> "0,1"
std::map<int, std::string> affinityByRank(const std::string& output) {
  std::map<int, std::string> out;
  std::stringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    int rank = -1;
    char list[512] = {0};
    if (std::sscanf(line.c_str(), "[%d] affinity %511s", &rank, list) == 2) out[rank] = list;
  }
  return out;
}

std::string joined(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

std::string ownAffinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof(set), &set);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return joined(cpus);
}

std::string loomrun(const std::string& args) {
  std::string command = LOOMRUN_PATH;
  command += " --tag-output ";
  command += args;
  command += " ";
  command += PRINT_AFFINITY_PATH;
  return command;
}

// The hardware threads of `cpu`'s core, from sysfs ("0-1" or "0,4").
std::string coreSiblings(int cpu) {
  std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  std::string text;
  std::getline(in, text);
  std::string out;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    size_t dash = part.find('-');
    int lo = std::stoi(part.substr(0, dash)), hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

class LoomrunBindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Topology> detected = detectTopology();
    ASSERT_TRUE(detected.isOk()) << detected.status().message();
    topo_ = detected.value();
  }
  Topology topo_;
};

TEST_F(LoomrunBindTest, CoreGivesEachRankItsPlannedCore) {
  const int cores = static_cast<int>(topo_.cores.size());
  for (int k : {std::min(cores, 2), cores + 1}) {  // one rank per core, then sharing
    RunResult r = run(loomrun("--bind core -n " + std::to_string(k)));
    ASSERT_EQ(r.status, 0) << r.output;
    std::map<int, std::string> seen = affinityByRank(r.output);
    ASSERT_EQ(seen.size(), static_cast<size_t>(k)) << r.output;
    auto plan = planBinding(topo_, BindMode::kCore, k);
    std::set<std::string> distinct;
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(seen[i], joined(plan[i].cpus)) << "rank " << i << "\n" << r.output;
      // Independently of hwloc: exactly the threads of one core, per sysfs.
      EXPECT_EQ(seen[i], coreSiblings(plan[i].cpus.at(0))) << "rank " << i;
      distinct.insert(seen[i]);
    }
    EXPECT_EQ(distinct.size(), static_cast<size_t>(std::min(k, cores))) << r.output;
  }
}

// A bound rank's own mask shows one core; loomrun tells it how many cores the
// host's ranks share (LOOM_LOCAL_CORES), which decides whether its waits spin.
TEST_F(LoomrunBindTest, BoundRanksLearnHowManyCoresTheyShare) {
  const int cores = static_cast<int>(topo_.cores.size());
  for (int k : {std::min(cores, 2), cores + 1}) {
    RunResult r = run(loomrun("--bind core -n " + std::to_string(k)));
    ASSERT_EQ(r.status, 0) << r.output;
    std::set<int> used;
    for (const auto& rank : planBinding(topo_, BindMode::kCore, k)) used.insert(rank.cpus.begin(), rank.cpus.end());
    for (int i = 0; i < k; ++i) {
      const std::string line = "[" + std::to_string(i) + "] local_cores " + std::to_string(used.size());
      EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
    }
  }
  RunResult unbound = run(loomrun("-n 2"));
  ASSERT_EQ(unbound.status, 0) << unbound.output;
  EXPECT_NE(unbound.output.find("[0] local_cores -"), std::string::npos) << unbound.output;
}

TEST_F(LoomrunBindTest, NumaGivesEachRankItsNodesCpus) {
  RunResult r = run(loomrun("--bind numa -n 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::map<int, std::string> seen = affinityByRank(r.output);
  auto plan = planBinding(topo_, BindMode::kNuma, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(seen[i], joined(plan[i].cpus)) << r.output;
    std::ifstream in("/sys/devices/system/node/node" + std::to_string(plan[i].numaNode) + "/cpulist");
    EXPECT_TRUE(in.good()) << "numa node " << plan[i].numaNode << " missing in sysfs";
  }
}

TEST_F(LoomrunBindTest, NoneKeepsLoomrunsAffinity) {
  RunResult r = run(loomrun("-n 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::map<int, std::string> seen = affinityByRank(r.output);
  ASSERT_EQ(seen.size(), 2u) << r.output;
  for (const auto& [rank, cpus] : seen) EXPECT_EQ(cpus, ownAffinity()) << "rank " << rank;
}

TEST_F(LoomrunBindTest, VerbosePrintsTheBindingPerRank) {
  RunResult r = run(loomrun("--bind core --bind-verbose -n 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  auto plan = planBinding(topo_, BindMode::kCore, 2);
  for (int i = 0; i < 2; ++i) {
    std::string line = "loomrun: --bind core: local rank " + std::to_string(i) + " (rank " + std::to_string(i) +
                       ") -> cpus " + formatCpuList(plan[i].cpus);
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  }
  RunResult quiet = run(loomrun("--bind core -n 2"));
  EXPECT_EQ(quiet.output.find("loomrun: --bind"), std::string::npos) << quiet.output;
}

TEST_F(LoomrunBindTest, UnknownModeIsAUsageError) {
  RunResult r = run(LOOMRUN_PATH " --bind socket -n 2 true");
  EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2) << r.output;
  EXPECT_NE(r.output.find("option '--bind' expects none, core or numa, got 'socket'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace loom::topology
