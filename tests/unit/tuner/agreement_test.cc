// Ranks agree on rank 0's tuner options, whatever their own environment says.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "algorithms/registry.h"
#include "src/comm/algorithm_selection.h"
#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"

namespace loom {
namespace {

WaitContext shortWait() {
  WaitContext w;
  w.deadline = Deadline::after(20.0);
  return w;
}

std::vector<std::string> agreedTexts(const std::vector<tuner::TunerOptions>& local) {
  const int n = static_cast<int>(local.size());
  auto group = testing::LocalBootstrapGroup::create(n);
  std::vector<std::string> agreed(local.size());
  std::mutex mu;
  testing::runRankThreads(n, [&](int rank) {
    testing::LocalBootstrap boot(group, rank);
    auto o = agreeOnTunerOptions(local[static_cast<size_t>(rank)], boot, shortWait(), Logger());
    ASSERT_TRUE(o.isOk()) << o.status().message();
    std::lock_guard<std::mutex> lock(mu);
    agreed[static_cast<size_t>(rank)] = serializeTunerOptions(o.value());
  });
  return agreed;
}

TEST(TunerAgreement, EveryRankTakesRankZerosOptions) {
  std::vector<tuner::TunerOptions> local(3);
  for (auto& o : local) o.table = tuner::TuningTable::builtin();
  local[0].algo = "ring,rd";
  local[1].algo = "tree";
  local[1].deterministic = true;
  auto extra = tuner::TuningTable::parse("allreduce ring ll 3 0.5 1\n", "extra");
  ASSERT_TRUE(extra.isOk());
  local[2].table.append(extra.value());
  local[2].proto = "LL";
  const auto agreed = agreedTexts(local);
  for (const auto& text : agreed) EXPECT_EQ(text, serializeTunerOptions(local[0]));
}

TEST(TunerAgreement, IdenticalOptionsStayAsTheyAre) {
  std::vector<tuner::TunerOptions> local(2);
  for (auto& o : local) {
    o.table = tuner::TuningTable::builtin();
    o.proto = "^LL";
  }
  for (const auto& text : agreedTexts(local)) EXPECT_EQ(text, serializeTunerOptions(local[0]));
}

TEST(TunerAgreement, SerializedOptionsRoundTrip) {
  tuner::TunerOptions o;
  o.algo = "allreduce:tree,ring;broadcast:chain";
  o.proto = "^ll";
  o.deterministic = true;
  o.table = tuner::TuningTable::builtin();
  auto back = parseTunerOptions(serializeTunerOptions(o));
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back.value().algo, o.algo);
  EXPECT_EQ(back.value().proto, o.proto);
  EXPECT_TRUE(back.value().deterministic);
  EXPECT_EQ(back.value().table.toText(), o.table.toText());
  EXPECT_FALSE(parseTunerOptions("proto=x\n").isOk());
}

TEST(TunerAgreement, BadTuningFileIsReportedAndDefaultsUsed) {
  char path[] = "/tmp/loom-tuning-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream(path) << "# ok\nallreduce ring simple 2 1\n";
  }
  Config config;
  config.tuningFile = path;
  std::vector<std::string> warnings;
  tuner::TunerOptions o = localTunerOptions(config, &warnings);
  std::remove(path);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(std::string(path) + ":2:"), std::string::npos) << warnings[0];
  EXPECT_EQ(o.table.toText(), tuner::TuningTable::builtin().toText());
}

TEST(TunerAgreement, GoodTuningFileComesAfterTheDefaults) {
  char path[] = "/tmp/loom-tuning-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream(path) << "* * simple * 42 1\n";
  }
  Config config;
  config.tuningFile = path;
  config.algo = "ring";
  std::vector<std::string> warnings;
  tuner::TunerOptions o = localTunerOptions(config, &warnings);
  std::remove(path);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(o.algo, "ring");
  EXPECT_EQ(o.table.params(algo::CollType::kAllReduce, "nameless", transport::Protocol::kSimple, 7).alphaMicros, 42);
}

// LOOM_ALGO / LOOM_PROTO reach the device engine: its ring and tree and its
// two protocols, per collective, as the agreed filters allow them.
TEST(EngineChoiceRules, FollowTheAgreedAlgorithmAndProtocolFilters) {
  using kernels::cuda::engine::EngineAlgorithm;
  using kernels::cuda::engine::EngineProtocol;
  tuner::TunerOptions o;
  o.algo = "allreduce:tree;reducescatter:ring";
  o.proto = "ll";
  tuner::Tuner tuner(o, 8, algo::allAlgorithms(), Logger(), nullptr);
  const cuda::EngineChoiceRules rules = engineChoiceRules(tuner);
  EXPECT_TRUE(rules.allows(algo::CollType::kAllReduce, EngineAlgorithm::kTree));
  EXPECT_FALSE(rules.allows(algo::CollType::kAllReduce, EngineAlgorithm::kRing));
  EXPECT_TRUE(rules.allows(algo::CollType::kReduceScatter, EngineAlgorithm::kRing));
  EXPECT_FALSE(rules.allows(algo::CollType::kReduceScatter, EngineAlgorithm::kTree));
  for (int c = 0; c < algo::kNumCollTypes; ++c) {
    EXPECT_TRUE(rules.allows(static_cast<algo::CollType>(c), EngineProtocol::kLL)) << c;
    EXPECT_FALSE(rules.allows(static_cast<algo::CollType>(c), EngineProtocol::kSimple)) << c;
  }
  // Nothing set: everything allowed.
  tuner::Tuner free(tuner::TunerOptions{}, 8, algo::allAlgorithms(), Logger(), nullptr);
  const cuda::EngineChoiceRules all = engineChoiceRules(free);
  for (int c = 0; c < algo::kNumCollTypes; ++c) {
    const auto coll = static_cast<algo::CollType>(c);
    EXPECT_TRUE(all.allows(coll, EngineAlgorithm::kRing) && all.allows(coll, EngineAlgorithm::kTree) &&
                all.allows(coll, EngineProtocol::kSimple) && all.allows(coll, EngineProtocol::kLL))
        << c;
  }
}

}  // namespace
}  // namespace loom
