// The algorithm registry's records: every one states a usable cost shape
// (the tuner prices an algorithm from its record alone), a leaving-out of the
// cost does not compile, and (collective, name) identifies one record.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "algorithms/cost_formulas.h"
#include "algorithms/registry.h"

namespace loom::algo {
namespace {

// A record that names no cost function: must not compile.
template <typename Record>
concept BuildsWithoutCost = requires { Record{"x", CollType::kAllReduce, nullptr}; };
template <typename Record>
concept BuildsWithNullCost = requires { Record{"x", CollType::kAllReduce, nullptr, nullptr}; };
template <typename Record>
concept BuildsWithCost = requires { Record{"x", CollType::kAllReduce, nullptr, ringAllReduceCost}; };
static_assert(!BuildsWithoutCost<AlgorithmInfo>, "a record without a cost shape must not compile");
static_assert(!BuildsWithNullCost<AlgorithmInfo>, "a record with a null cost shape must not compile");
static_assert(BuildsWithCost<AlgorithmInfo>, "the checks above must fail for the cost alone");

TEST(Registry, EveryRecordHasACostShapeThatIsFiniteAndMovesSomething) {
  for (const AlgorithmInfo& a : allAlgorithms()) {
    const std::string what = std::string(collTypeName(a.type)) + " " + a.name;
    ASSERT_NE(a.cost.fn(), nullptr) << what;
    ASSERT_NE(a.run, nullptr) << what;
    EXPECT_NE(a.protocols, 0u) << what << " runs over no protocol";
    EXPECT_EQ(a.protocols & ~kEveryProtocol, 0u) << what;
    for (int n = 2; n <= 16; ++n)
      for (const auto& [hosts, perHost] : {std::pair{1, n}, std::pair{2, (n + 1) / 2}, std::pair{n, 1}})
        for (double bytes = 8; bytes <= 1024.0 * 1024 * 1024; bytes *= 4)
          for (double chunk : {8.0 * 1024, 256.0 * 1024}) {
            const Cost c = a.cost({n, hosts, perHost, bytes, chunk});
            ASSERT_GE(c.count, 1) << what;
            ASSERT_LE(c.count, Cost::kMaxParts) << what;
            double steps = 0;
            for (int i = 0; i < c.count; ++i) {
              const CostShape& s = c.parts[i].shape;
              for (double v : {s.steps, s.wireBytes, s.reducedBytes})
                ASSERT_TRUE(std::isfinite(v) && v >= 0) << what << " n=" << n << " hosts=" << hosts << " " << bytes;
              steps += s.steps;
            }
            EXPECT_GT(steps, 0) << what << " n=" << n << " hosts=" << hosts << " " << bytes << " B";
          }
  }
}

TEST(Registry, CollectiveAndNameIdentifyOneRecord) {
  std::set<std::pair<CollType, std::string>> seen;
  for (const AlgorithmInfo& a : allAlgorithms())
    EXPECT_TRUE(seen.insert({a.type, a.name}).second) << collTypeName(a.type) << " " << a.name << " registered twice";
}

}  // namespace
}  // namespace loom::algo
