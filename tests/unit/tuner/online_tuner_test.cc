// Online tuning's bookkeeping (tuner/online_tuner.h) without communication:
// the exploration schedule, the medians each rank reports, the decision from
// summed medians, re-exploration, and which predictions become candidates.
#include "src/tuner/online_tuner.h"

#include <gtest/gtest.h>

#include <vector>

#include "algorithms/cost_formulas.h"

namespace loom::tuner {
namespace {

// Three distinct algorithms to tell candidates apart (only the pointers matter).
const algo::AlgorithmInfo kA{"a", algo::CollType::kAllReduce, nullptr, algo::ringAllReduceCost};
const algo::AlgorithmInfo kB{"b", algo::CollType::kAllReduce, nullptr, algo::ringAllReduceCost};
const algo::AlgorithmInfo kC{"c", algo::CollType::kAllReduce, nullptr, algo::ringAllReduceCost};

std::vector<Choice> three() {
  return {{&kA, transport::Protocol::kSimple, 10},
          {&kB, transport::Protocol::kSimple, 12},
          {&kC, transport::Protocol::kLL, 14}};
}

constexpr OnlineSlot::Periods kPeriods{0, 100, 1000, 6, 0};

// Runs one exploration: `nanos(candidate)` is the time of one call.
template <typename Nanos>
std::vector<size_t> explore(OnlineSlot& slot, Nanos nanos) {
  std::vector<size_t> order;
  while (!slot.agreementDue()) {
    EXPECT_FALSE(slot.settled());
    order.push_back(slot.current());
    slot.finishTrial(nanos(slot.current()));
  }
  return order;
}

// Settled calls until the next exploration starts.
uint64_t callsUntilExploring(OnlineSlot& slot) {
  uint64_t calls = 0;
  while (slot.settled()) {
    slot.countSettledCall();
    ++calls;
  }
  return calls;
}

TEST(OnlineSlot, ExploresInTurnsOfConsecutiveCallsAlternatingTheOrder) {
  OnlineSlot slot(three(), /*trials=*/2, /*callsPerTurn=*/2, kPeriods);
  EXPECT_FALSE(slot.timed());  // the warm-up round
  const std::vector<size_t> order = explore(slot, [](size_t) { return 1; });
  // Warm-up round 0 1 2, then round 1 reversed, round 2 forward; two calls a turn.
  const std::vector<size_t> expected{0, 0, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2};
  EXPECT_EQ(order, expected);
}

TEST(OnlineSlot, ReportsEachCandidatesMedianTurnTimeIgnoringTheWarmUp) {
  OnlineSlot slot(three(), /*trials=*/3, /*callsPerTurn=*/1, kPeriods);
  int calls[3] = {0, 0, 0};
  explore(slot, [&](size_t c) -> int64_t {
    const int k = calls[c]++;
    if (k == 0) return 1'000'000;               // warm-up: must not count
    if (c == 0) return k == 2 ? 900 : 100 * k;  // 100, 900, 300 -> median 300
    if (c == 1) return 50;
    return 70 + k;  // 71, 72, 73 -> 72
  });
  EXPECT_EQ(slot.summary(), (std::vector<int64_t>{300, 50, 72}));
}

TEST(OnlineSlot, TurnsAreTimedAsWholesButTheirFirstCall) {
  OnlineSlot slot(three(), /*trials=*/1, /*callsPerTurn=*/4, kPeriods);
  int call = 0;
  // Every turn's first call waits 1000 extra (the skew of the one before).
  explore(slot, [&](size_t c) -> int64_t { return static_cast<int64_t>(c + 1) * 10 + (call++ % 4 == 0 ? 1000 : 0); });
  EXPECT_EQ(slot.summary(), (std::vector<int64_t>{30, 60, 90}));
}

TEST(OnlineSlot, TheSmallestSumWinsTiesGoToTheModelsOrder) {
  OnlineSlot slot(three(), 1, 1, kPeriods);
  explore(slot, [](size_t) { return 5; });
  slot.decide({30, 20, 20}, 2);
  ASSERT_TRUE(slot.settled());
  EXPECT_EQ(slot.winner().algorithm, &kB);
  EXPECT_EQ(slot.decisions(), 1);
}

TEST(OnlineSlot, TheIncumbentStaysUnlessBeatenByMoreThanTheMinimumGain) {
  OnlineSlot slot(three(), 1, 1, kPeriods);
  explore(slot, [](size_t) { return 5; });
  slot.decide({1000, 970, 990}, 2);  // 3% faster: the model's pick stays
  EXPECT_EQ(slot.winner().algorithm, &kA);
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  slot.decide({1000, 950, 990}, 2);  // 5%: the challenger wins
  EXPECT_EQ(slot.winner().algorithm, &kB);
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  slot.decide({980, 1000, 990}, 2);  // now B is the incumbent and A only 2% ahead
  EXPECT_EQ(slot.winner().algorithm, &kB);
}

TEST(OnlineSlot, ThePeriodIsAboutRecheckTimeOfTheWinnersCalls) {
  // recheck 1 ms; the winner's turns summed over 2 ranks: 2 x 4 calls x 10 us.
  const OnlineSlot::Periods periods{1'000'000, 4, 1 << 20, 2, 0};
  OnlineSlot slot(three(), 1, /*callsPerTurn=*/4, periods);
  explore(slot, [](size_t) { return 5; });
  slot.decide({80'000, 90'000, 95'000}, 2);  // 10 us a call: 100 calls in 1 ms
  EXPECT_EQ(slot.period(), 100u);
  EXPECT_EQ(callsUntilExploring(slot), 100u);
  EXPECT_FALSE(slot.timed());  // a fresh exploration starts with its warm-up
  explore(slot, [](size_t) { return 5; });
  slot.decide({80'000, 90'000, 95'000}, 2);  // the same winner: look half as often
  EXPECT_EQ(slot.period(), 200u);
  EXPECT_EQ(callsUntilExploring(slot), 200u);
  explore(slot, [](size_t) { return 5; });
  slot.decide({80'000, 90'000, 95'000}, 2);
  EXPECT_EQ(slot.period(), 400u);
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  slot.decide({80'000, 90'000, 95'000}, 2);
  EXPECT_EQ(slot.period(), 400u);  // at most 2 doublings here
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  slot.decide({900'000, 8'000, 95'000}, 2);  // a new winner, 1 us a call: 1000 calls, no doubling
  EXPECT_EQ(slot.winner().algorithm, &kB);
  EXPECT_EQ(slot.period(), 1000u);
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  slot.decide({1, 0, 3}, 2);  // faster than a nanosecond: capped at maxCalls
  EXPECT_EQ(slot.period(), uint64_t{1} << 20);
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  slot.decide({1'000'000'000, 2'000'000'000, 3'000'000'000}, 2);  // A, 125 ms a call, but B's record outweighs it
  EXPECT_EQ(slot.winner().algorithm, &kB);
  EXPECT_EQ(slot.period(), 16u);  // B, 250 ms a call: minCalls, doubled twice as B stays
}

TEST(OnlineSlot, APeriodHoldsAtLeastAMultipleOfTheExplorationsCalls) {
  // 3 candidates x (1 warm-up + 2 timed rounds) x 2 calls = 18 calls an
  // exploration; at 10 us a call, 1 ms of calls is 100, fewer than 5 x 18.
  const OnlineSlot::Periods periods{1'000'000, 4, 1 << 20, 2, 5};
  OnlineSlot slot(three(), /*trials=*/2, /*callsPerTurn=*/2, periods);
  EXPECT_EQ(explore(slot, [](size_t) { return 5; }).size(), 18u);
  slot.decide({40'000, 90'000, 95'000}, 2);
  EXPECT_EQ(slot.period(), 100u);  // 100 calls of the winner already hold 5 explorations
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  // A again, now 500 us a call: 2 calls in 1 ms, so 5 x 18, doubled as A stays.
  slot.decide({2'000'000, 2'100'000, 2'200'000}, 2);
  EXPECT_EQ(slot.winner().algorithm, &kA);
  EXPECT_EQ(slot.period(), 180u);
}

TEST(OnlineSlot, EarlierExplorationsCountHalfAsMuchEachTime) {
  OnlineSlot slot(three(), 1, 1, kPeriods);
  auto again = [&](std::vector<int64_t> summed) {
    callsUntilExploring(slot);
    explore(slot, [](size_t) { return 5; });
    slot.decide(summed, 2);
    return slot.winner().algorithm;
  };
  explore(slot, [](size_t) { return 5; });
  slot.decide({1000, 1200, 1500}, 2);  // A; evidence 1, 1.2, 1.5
  EXPECT_EQ(slot.winner().algorithm, &kA);
  ASSERT_EQ(slot.evidence().size(), 3u);
  EXPECT_NEAR(slot.evidence()[0], 1.0, 1e-9);
  EXPECT_NEAR(slot.evidence()[1], 1.2, 1e-6);
  EXPECT_NEAR(slot.evidence()[2], 1.5, 1e-6);
  // One exploration with B 6% ahead does not undo A's 20% lead: A 0.5 + 1.06,
  // B 0.6 + 1.
  EXPECT_EQ(again({1060, 1000, 1500}), &kA);
  // The same again: A 0.78 + 1.06 = 1.84, B 0.8 + 1 = 1.8, 2% apart, A stays.
  EXPECT_EQ(again({1060, 1000, 1500}), &kA);
  // A third time: A 0.92 + 1.06 = 1.98, B 0.9 + 1 = 1.9, 4.2% apart: B.
  EXPECT_EQ(again({1060, 1000, 1500}), &kB);
  // A large gain wins at once: C at half B's time.
  EXPECT_EQ(again({2000, 1000, 500}), &kC);
  // Times are relative to each exploration's fastest: a machine twice as slow
  // (everything doubled) ranks the candidates the same.
  OnlineSlot fast(three(), 1, 1, kPeriods), slow(three(), 1, 1, kPeriods);
  explore(fast, [](size_t) { return 5; });
  explore(slow, [](size_t) { return 5; });
  fast.decide({1000, 1100, 1300}, 2);
  slow.decide({2000, 2200, 2600}, 2);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(fast.evidence()[i], slow.evidence()[i], 1e-9);
}

TEST(OnlineSlot, ASlowerExplorationCountsLessItWasTheMoreDisturbed) {
  OnlineSlot slot(three(), 1, 1, kPeriods);
  explore(slot, [](size_t) { return 5; });
  slot.decide({4000, 3600, 6000}, 2);  // a disturbed start: B 10% ahead
  EXPECT_EQ(slot.winner().algorithm, &kB);
  callsUntilExploring(slot);
  explore(slot, [](size_t) { return 5; });
  // A steady machine, 3.6x faster, with A 8% ahead. Weighed by 1/fastest:
  // A 0.5 x 1.111 / 3600 + 1 / 1000, B 0.5 x 1 / 3600 + 1.08 / 1000, A 5.6%
  // ahead. Weighed alike, B would stay (A 1.556, B 1.58: 1.6%).
  slot.decide({1000, 1080, 1500}, 2);
  EXPECT_EQ(slot.winner().algorithm, &kA);
  EXPECT_NEAR(slot.evidence()[1], (0.5 / 3600 + 1.08 / 1000) / (0.5 * 4000 / 3600 / 3600 + 1.0 / 1000), 1e-6);
}

TEST(OnlineSlot, AHungCandidateCannotOverflowTheEvidence) {
  OnlineSlot slot(three(), 1, 1, kPeriods);
  for (int i = 0; i < 100; ++i) {
    explore(slot, [](size_t) { return 5; });
    slot.decide({1, INT64_MAX / 4, 0}, 2);
    callsUntilExploring(slot);
  }
  EXPECT_EQ(slot.winner().algorithm, &kC);  // 0 ns: the fastest (relative to 1 ns)
  // B's ratio is capped (2^20) and its evidence stays finite and ordered.
  EXPECT_GT(slot.evidence()[1], slot.evidence()[0]);
  EXPECT_LE(slot.evidence()[1], double{1 << 20} * 1.0001);
}

TEST(OnlineTuner, CandidatesAreThePredictionsWithinTheMarginOfThePick) {
  OnlineTuner tuner;
  int asked = 0;
  auto ranked = [&] {
    ++asked;
    return std::vector<Choice>{{&kA, transport::Protocol::kSimple, 10},
                               {&kB, transport::Protocol::kSimple, 10 * OnlineTuner::marginFor(64) - 0.01},
                               {&kC, transport::Protocol::kSimple, 10 * OnlineTuner::marginFor(64) + 0.01}};
  };
  const OnlineKey key{algo::CollType::kAllReduce, 16, DataType::kFloat32, RedOp::kSum, 0};
  OnlineSlot* slot = tuner.slotFor(key, 64, ranked);
  ASSERT_NE(slot, nullptr);
  ASSERT_EQ(slot->candidates().size(), 2u);
  EXPECT_EQ(slot->candidates()[0].algorithm, &kA);
  EXPECT_EQ(slot->candidates()[1].algorithm, &kB);
  EXPECT_EQ(tuner.slotFor(key, 64, ranked), slot);  // the same call, the same slot
  EXPECT_EQ(asked, 1);
  // Another root is another call.
  EXPECT_NE(tuner.slotFor({algo::CollType::kAllReduce, 16, DataType::kFloat32, RedOp::kSum, 1}, 64, ranked), slot);
}

TEST(OnlineTuner, NothingToTuneWithOneCandidateOrAFullTable) {
  OnlineTuner tuner;
  auto alone = [] {
    return std::vector<Choice>{{&kA, transport::Protocol::kSimple, 10}, {&kB, transport::Protocol::kSimple, 1000}};
  };
  EXPECT_EQ(tuner.slotFor({algo::CollType::kAllReduce, 1, DataType::kInt8, RedOp::kSum, 0}, 1, alone), nullptr);
  auto pair = [] {
    return std::vector<Choice>{{&kA, transport::Protocol::kSimple, 10}, {&kB, transport::Protocol::kSimple, 11}};
  };
  for (size_t i = 1; i < OnlineTuner::kMaxSlots; ++i)
    EXPECT_NE(tuner.slotFor({algo::CollType::kAllReduce, 100 + i, DataType::kInt8, RedOp::kSum, 0}, 1, pair), nullptr);
  EXPECT_EQ(tuner.slotFor({algo::CollType::kAllReduce, 99, DataType::kInt8, RedOp::kSum, 0}, 1, pair), nullptr);
}

TEST(OnlineTuner, LargeCallsExploreTheTwoBestPredictions) {
  OnlineTuner tuner;
  auto close = [] {
    return std::vector<Choice>{{&kA, transport::Protocol::kSimple, 100},
                               {&kB, transport::Protocol::kSimple, 101},
                               {&kC, transport::Protocol::kSimple, 102}};
  };
  OnlineSlot* slot =
      tuner.slotFor({algo::CollType::kAllReduce, 1 << 24, DataType::kFloat32, RedOp::kSum, 0}, 64.0 * (1 << 20), close);
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->candidates().size(), 2u);
}

TEST(OnlineTuner, MiBCallsExploreTheFourBestPredictions) {
  OnlineTuner tuner;
  auto close = [] {
    return std::vector<Choice>{{&kA, transport::Protocol::kSimple, 100},
                               {&kB, transport::Protocol::kSimple, 100},
                               {&kC, transport::Protocol::kSimple, 103},
                               {&kA, transport::Protocol::kLL, 104},
                               {&kB, transport::Protocol::kLL, 105}};
  };
  OnlineSlot* slot =
      tuner.slotFor({algo::CollType::kAllReduce, 1 << 18, DataType::kFloat32, RedOp::kSum, 0}, 1.0 * (1 << 20), close);
  ASSERT_NE(slot, nullptr);
  ASSERT_EQ(slot->candidates().size(), 4u);
  EXPECT_EQ(slot->candidates()[2].algorithm, &kC);
  EXPECT_EQ(slot->candidates()[3].proto, transport::Protocol::kLL);
  OnlineSlot* larger =
      tuner.slotFor({algo::CollType::kAllReduce, 1 << 20, DataType::kFloat32, RedOp::kSum, 0}, 4.0 * (1 << 20), close);
  ASSERT_NE(larger, nullptr);
  EXPECT_EQ(larger->candidates().size(), 2u);
}

}  // namespace
}  // namespace loom::tuner
