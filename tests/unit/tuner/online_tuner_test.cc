// Online tuning's bookkeeping (tuner/online_tuner.h) without communication:
// the exploration schedule, the medians each rank reports, the decision from
// summed medians, re-exploration, and which predictions become candidates.
#include "tuner/online_tuner.h"

#include <gtest/gtest.h>

#include <vector>

namespace loom::tuner {
namespace {

// Three distinct algorithms to tell candidates apart (only the pointers matter).
const algo::AlgorithmInfo kA{"a", algo::CollType::kAllReduce, nullptr, nullptr};
const algo::AlgorithmInfo kB{"b", algo::CollType::kAllReduce, nullptr, nullptr};
const algo::AlgorithmInfo kC{"c", algo::CollType::kAllReduce, nullptr, nullptr};

std::vector<Choice> three() {
  return {{&kA, transport::Protocol::kSimple, 10},
          {&kB, transport::Protocol::kSimple, 12},
          {&kC, transport::Protocol::kLL, 14}};
}

constexpr OnlineSlot::Periods kPeriods{0, 100, 1000, 6};

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
  const OnlineSlot::Periods periods{1'000'000, 4, 1 << 20, 2};
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
  slot.decide({1'000'000'000, 2'000'000'000, 3'000'000'000}, 2);  // 125 ms a call: minCalls
  EXPECT_EQ(slot.winner().algorithm, &kA);
  EXPECT_EQ(slot.period(), 4u);
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

}  // namespace
}  // namespace loom::tuner
