// The tuner reads an algorithm only through its record: a new record is
// priced by its own cost function, its protocol set limits the candidates,
// and its deterministic flag (not its name) decides whether cost alone may
// pick it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/cost_formulas.h"
#include "src/tuner/tuner.h"
#include "tests/unit/tuner/tuner_test_util.h"

namespace loom::tuner {
namespace {

using algo::AlgorithmInfo;
using algo::CollType;
using testing::callOf;
using testing::Contexts;
using testing::nameOf;
using transport::Protocol;

Status noop(const algo::CollArgs&, const algo::AlgoContext&) { return Status::ok(); }

// One step and nothing on the wire, whatever the size: cheaper than any ring.
algo::Cost oneStep(const algo::CostQuery&) { return algo::Cost::of({1, 0, 0}); }

TunerOptions flatTable() {
  TunerOptions o;
  auto table = TuningTable::parse("* * * * 10 1 1\n", "record_test");
  EXPECT_TRUE(table.isOk()) << table.status().message();
  o.table = table.value();
  return o;
}

std::vector<std::string> namesOf(const std::vector<Choice>& choices) {
  std::vector<std::string> out;
  for (const Choice& c : choices) out.push_back(nameOf(c));
  return out;
}

TEST(TunerRecord, ANewRecordIsPricedByItsOwnCostFunction) {
  const std::vector<AlgorithmInfo> registry = {
      {.name = "ring", .type = CollType::kAllReduce, .run = noop, .cost = algo::ringAllReduceCost},
      {.name = "newalgo", .type = CollType::kAllReduce, .run = noop, .cost = oneStep},
  };
  Tuner tuner(flatTable(), 4, registry, Logger(), nullptr);
  Contexts ctx(4);
  // alpha 10 us x 1 step; the ring: 6 steps plus 1.5 MiB at 1 GB/s.
  const auto all = tuner.predictAll(callOf(CollType::kAllReduce, 1 << 20), ctx.simpleOnly());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ(all[1].predictedMicros, 10);
  EXPECT_GT(all[0].predictedMicros, 1000);
  EXPECT_EQ(nameOf(tuner.choose(callOf(CollType::kAllReduce, 1 << 20), ctx.simpleOnly())), "newalgo/Simple");
}

TEST(TunerRecord, ProtocolsOutsideTheRecordsSetAreNeverCandidates) {
  const std::vector<AlgorithmInfo> registry = {
      {.name = "ring", .type = CollType::kAllReduce, .run = noop, .cost = algo::ringAllReduceCost},
      {.name = "simpleonly", .type = CollType::kAllReduce, .run = noop, .cost = oneStep,
       .protocols = algo::protocolBit(Protocol::kSimple)},
  };
  Tuner tuner(flatTable(), 4, registry, Logger(), nullptr);
  Contexts ctx(4);
  const auto args = callOf(CollType::kAllReduce, 1024);
  EXPECT_EQ(namesOf(tuner.predictAll(args, ctx.available())),
            (std::vector<std::string>{"ring/Simple", "ring/LL", "simpleonly/Simple"}));
  // LL only: the record cannot run, so the ring does, however cheap it would be.
  EXPECT_EQ(nameOf(tuner.choose(args, {nullptr, &ctx.ll})), "ring/LL");
}

TEST(TunerRecord, TheDeterministicFlagNotTheNameKeepsCostFromPickingIt) {
  const std::vector<AlgorithmInfo> registry = {
      {.name = "ring", .type = CollType::kAllReduce, .run = noop, .cost = algo::ringAllReduceCost},
      {.name = "ordered", .type = CollType::kAllReduce, .run = noop, .cost = oneStep, .deterministic = true},
      {.name = "deterministic", .type = CollType::kReduce, .run = noop, .cost = oneStep},
      {.name = "chain", .type = CollType::kReduce, .run = noop, .cost = algo::chainReduceCost},
  };
  Contexts ctx(4);
  const auto allReduce = callOf(CollType::kAllReduce, 1 << 20), reduce = callOf(CollType::kReduce, 1 << 20);
  TunerOptions o = flatTable();
  {
    Tuner tuner(o, 4, registry, Logger(), nullptr);
    // "ordered" is the cheapest but deterministic: cost alone never picks it.
    EXPECT_EQ(nameOf(tuner.choose(allReduce, ctx.simpleOnly())), "ring/Simple");
    EXPECT_EQ(namesOf(tuner.shortlist(allReduce, ctx.simpleOnly())), (std::vector<std::string>{"ring/Simple"}));
    // A record merely named "deterministic" is an ordinary candidate.
    EXPECT_EQ(nameOf(tuner.choose(reduce, ctx.simpleOnly())), "deterministic/Simple");
  }
  o.deterministic = true;
  Tuner tuner(o, 4, registry, Logger(), nullptr);
  EXPECT_EQ(nameOf(tuner.choose(allReduce, ctx.simpleOnly())), "ordered/Simple");
  o.deterministic = false;
  o.algo = "ordered";
  Tuner named(o, 4, registry, Logger(), nullptr);
  EXPECT_EQ(nameOf(named.choose(allReduce, ctx.simpleOnly())), "ordered/Simple");
}

}  // namespace
}  // namespace loom::tuner
