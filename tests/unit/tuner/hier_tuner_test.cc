// The tuner across hosts, with the real registry and the built-in table:
// large all-reduces across two or more equal hosts go to "hier", tiny ones
// over 2 x 2 ranks to a latency algorithm; a one-host layout changes no choice at all; uneven
// hosts never get hier.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/patterns/host_layout.h"
#include "algorithms/registry.h"
#include "common/format.h"
#include "src/tuner/multi_host_cost.h"
#include "src/tuner/tuner.h"

namespace loom::tuner {
namespace {

using algo::CollType;

std::vector<uint64_t> keysOf(const std::string& hosts) {
  std::vector<uint64_t> keys;
  for (char c : hosts) keys.push_back(static_cast<uint64_t>(c));
  return keys;
}

struct TunerOnLayout {
  explicit TunerOnLayout(const std::string& hosts, bool withLayout = true)
      : layout(algo::HostLayout::fromHostKeys(keysOf(hosts), 0)) {
    options.table = TuningTable::builtin();
    const int n = static_cast<int>(hosts.size());
    for (auto* c : {&simple, &ll}) {
      c->nranks = n;
      c->singleHost = layout.nHosts() == 1;
      c->hosts = withLayout ? &layout : nullptr;
    }
    simple.chunkBytes = 256 * 1024;
    simple.proto = transport::Protocol::kSimple;
    ll.chunkBytes = 8 * 1024;
    ll.proto = transport::Protocol::kLL;
    tuner = std::make_unique<Tuner>(options, n, algo::allAlgorithms(), Logger(), nullptr);
  }
  std::string choose(CollType type, size_t bytes) const {
    algo::CollArgs a;
    a.type = type;
    a.count = bytes / 4;
    const Choice c = tuner->choose(a, {&simple, &ll});
    return c.algorithm ? strprintf("%s/%s", c.algorithm->name, transport::protocolName(c.proto)) : "(none)";
  }
  algo::HostLayout layout;
  TunerOptions options;
  algo::AlgoContext simple, ll;
  std::unique_ptr<Tuner> tuner;
};

constexpr CollType kColls[] = {CollType::kAllReduce, CollType::kBroadcast, CollType::kReduce,
                               CollType::kReduceScatter, CollType::kAllGather};

TEST(HierTuner, OneHostLayoutChangesNoChoice) {
  for (const char* hosts : {"AA", "AAAA", "AAAAAAAA"}) {
    const TunerOnLayout with(hosts), without(hosts, false);
    for (CollType type : kColls)
      for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes *= 2)
        EXPECT_EQ(with.choose(type, bytes), without.choose(type, bytes))
            << hosts << " " << algo::collTypeName(type) << " " << bytes << " B";
  }
}

TEST(HierTuner, LargeAllReduceAcrossEqualHostsIsHierarchical) {
  for (const char* hosts : {"AABB", "ABAB", "AAABBB", "AABBCC", "AAAABBBB"}) {
    const TunerOnLayout s(hosts);
    for (size_t bytes : {size_t{1} << 20, size_t{64} << 20, size_t{256} << 20})
      EXPECT_EQ(s.choose(CollType::kAllReduce, bytes), "hier/Simple") << hosts << " " << bytes << " B";
  }
  // 2 x 2, 8 B: recursive doubling takes 2 network steps, hier 2 network
  // steps plus 2 intra-host ones. (With 3 or more ranks per host hier's 2
  // network steps beat rd's 3-4 even there, and the model says so.)
  for (const char* hosts : {"AABB", "ABAB"}) EXPECT_NE(TunerOnLayout(hosts).choose(CollType::kAllReduce, 8).rfind("hier", 0), 0u) << hosts;
}

TEST(HierTuner, UnevenHostsNeverGetHier) {
  for (const char* hosts : {"AAB", "AABBB"}) {
    const TunerOnLayout s(hosts);
    for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes *= 4)
      EXPECT_NE(s.choose(CollType::kAllReduce, bytes).rfind("hier", 0), 0u) << hosts << " " << bytes << " B";
  }
}

// The registry's all-reduce record called `name`.
const algo::AlgorithmInfo& recordOf(const std::string& name) {
  for (const auto& a : algo::allAlgorithms())
    if (a.type == CollType::kAllReduce && a.name == name) return a;
  ADD_FAILURE() << "no all-reduce '" << name << "' in the registry";
  return algo::allAlgorithms().front();
}

TEST(HierTuner, ModelChargesTheNetworkOnlyForWhatCrossesIt) {
  const CostParams shm{2.0, 1.0 / 2400, 1.0 / 8000}, net{30.0, 1.0 / 500, 0};
  const HostShape twoByTwo{2, 2};
  const double S = 64.0 * (1 << 20), C = 256 * 1024;
  const double ring = predictAcrossHosts(recordOf("ring"), 4, twoByTwo, S, C, shm, net);
  const double hier = predictAcrossHosts(recordOf("hier"), 4, twoByTwo, S, C, shm, net);
  // Ring: 2(n-1)/n S = 1.5 S over the network; hier: 2(H-1)/H x S/L = 0.5 S.
  EXPECT_NEAR(ring, 2.0 * 3 * (S / 4 / C) * 30 + 1.5 * S / 500 + 0.75 * S / 8000, 1e-6 * ring);
  EXPECT_LT(hier, ring / 2);
  EXPECT_GT(hier, 0.5 * S / 500);
}

}  // namespace
}  // namespace loom::tuner
