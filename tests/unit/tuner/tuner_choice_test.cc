// The tuner's choices: latency algorithms and LL for tiny calls, Simple for
// huge ones, the measured crossovers, filters, fallbacks, the deterministic override, and
// identical choices from identical inputs.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/registry.h"
#include "src/comm/algorithm_selection.h"
#include "src/tuner/online_tuner.h"
#include "src/tuner/tuner.h"
#include "tests/unit/tuner/tuner_test_util.h"

namespace loom::tuner {
namespace {

using algo::CollType;
using testing::callOf;
using testing::Contexts;
using testing::fakeRegistry;
using testing::nameOf;
using transport::Protocol;

constexpr size_t kTiny = 8;
constexpr size_t kHuge = size_t{256} << 20;

TunerOptions builtinOptions() {
  TunerOptions o;
  o.table = TuningTable::builtin();
  return o;
}

Choice choose(const TunerOptions& o, int n, CollType type, size_t bytes, DataType dtype = DataType::kFloat32,
              bool singleHost = true) {
  Tuner tuner(o, n, fakeRegistry(), Logger(), nullptr);
  Contexts ctx(n, singleHost);
  return tuner.choose(callOf(type, bytes, dtype), ctx.available());
}

TEST(TunerChoice, TinyAllReduceUsesALatencyAlgorithmOverLL) {
  for (int n : {2, 4, 8}) {
    Choice c = choose(builtinOptions(), n, CollType::kAllReduce, kTiny);
    const std::string name = nameOf(c);
    EXPECT_TRUE(name == "rd/LL" || name == "oneshot/LL") << "n=" << n << ": " << name;
  }
}

// One-shot's single step is a read of every peer's message: its latency
// grows with the rank count (on 16 cores, 8 B: 2.8 us at 4 ranks, 4.3 at 8,
// 28 at 16), where a log-depth algorithm adds one exchange per doubling. A
// tiny all-reduce keeps one-shot up to 8 ranks and leaves it from 16 on.
TEST(TunerChoice, TinyAllReduceLeavesOneShotFromSixteenRanks) {
  for (int n : {2, 3, 4, 8}) EXPECT_EQ(nameOf(choose(builtinOptions(), n, CollType::kAllReduce, kTiny)), "oneshot/LL") << n;
  for (int n : {16, 24, 32, 64}) {
    const std::string name = nameOf(choose(builtinOptions(), n, CollType::kAllReduce, kTiny));
    EXPECT_TRUE(name.rfind("oneshot", 0) != 0) << "n=" << n << ": " << name;
    EXPECT_TRUE(name.rfind("rd/", 0) == 0 || name.rfind("tree/", 0) == 0) << "n=" << n << ": " << name;
  }
}

// Huge all-reduce: Simple, over the double binary tree where interleaved
// runs measured it faster or level (2 ranks from 512 KiB; 4 ranks from
// 64 MiB: see tuning_defaults.cc), and over the ring elsewhere (no
// measurement there).
TEST(TunerChoice, HugeAllReduceUsesSimpleOverTheMeasuredFastestAlgorithm) {
  EXPECT_EQ(nameOf(choose(builtinOptions(), 2, CollType::kAllReduce, kHuge)), "tree/Simple");
  EXPECT_EQ(nameOf(choose(builtinOptions(), 4, CollType::kAllReduce, kHuge)), "tree/Simple");
  EXPECT_EQ(nameOf(choose(builtinOptions(), 8, CollType::kAllReduce, kHuge)), "ring/Simple");
}

// The crossovers of the interleaved measurements (tuning_defaults.cc).
TEST(TunerChoice, AllReduceFollowsTheMeasuredCrossovers) {
  const std::pair<size_t, const char*> two[] = {{8, "oneshot/LL"},         {64, "oneshot/LL"},
                                                {128, "rd/Simple"},         {1024, "rd/Simple"},
                                                {2048, "oneshot/Simple"},   {64 << 10, "oneshot/Simple"},
                                                {128 << 10, "rd/Simple"},   {256 << 10, "rd/Simple"},
                                                {512 << 10, "tree/Simple"}, {4 << 20, "tree/Simple"}};
  for (const auto& [bytes, want] : two)
    EXPECT_EQ(nameOf(choose(builtinOptions(), 2, CollType::kAllReduce, bytes)), want) << bytes;
  const std::pair<size_t, const char*> four[] = {{256, "oneshot/LL"},        {2048, "oneshot/Simple"},
                                                 {4096, "rd/Simple"},        {32 << 10, "rd/Simple"},
                                                 {64 << 10, "rd/Simple"},    {128 << 10, "hd/Simple"},
                                                 {256 << 10, "ring/Simple"}, {2 << 20, "ring/Simple"},
                                                 {32 << 20, "ring/Simple"},  {128 << 20, "tree/Simple"}};
  for (const auto& [bytes, want] : four)
    EXPECT_EQ(nameOf(choose(builtinOptions(), 4, CollType::kAllReduce, bytes)), want) << bytes;
}

// Windows that the tuner only sees exist (it never runs an algorithm).
class UnusedWindows final : public transport::SharedWindows {
 public:
  size_t bytes() const override { return size_t{2} << 20; }
  std::byte* own() override { return nullptr; }
  const std::byte* of(int) const override { return nullptr; }
  Status arrive(uint64_t, const WaitContext&) override { return makeError(Code::kInternalError, "not for running"); }
  uint64_t phasesEnded() const override { return 0; }
};

// With shared windows (one host, every rank on shared memory), the real
// registry and the built-in table: at 4 ranks on 2 cores the windowed
// all-reduce measured fastest from 16 KiB to 4 MiB and level up to 64 MiB,
// so the model takes it there; at 2 ranks it never led, and does not.
TEST(TunerChoice, SharedWindowsTakeTheMidSizesWhenRanksOutnumberCores) {
  UnusedWindows windows;
  auto chooseWith = [&](int n, size_t bytes, bool withWindows) {
    Tuner tuner(builtinOptions(), n, algo::allAlgorithms(), Logger(), nullptr);
    Contexts ctx(n);
    ctx.simple.windows = ctx.ll.windows = withWindows ? &windows : nullptr;
    return nameOf(tuner.choose(callOf(CollType::kAllReduce, bytes), ctx.available()));
  };
  for (size_t bytes : {size_t{16} << 10, size_t{64} << 10, size_t{1} << 20, size_t{4} << 20, size_t{32} << 20}) {
    EXPECT_EQ(chooseWith(4, bytes, true), "window/Simple") << bytes;
    EXPECT_NE(chooseWith(4, bytes, false), "window/Simple") << bytes;
  }
  EXPECT_EQ(chooseWith(4, 8, true), "oneshot/LL");
  for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{64} << 20})
    EXPECT_NE(chooseWith(2, bytes, true), "window/Simple") << bytes;
}

// With direct copies between the ranks' buffers as well: between processes
// (system calls) the tree stays the pick at 2 ranks from 512 KiB, as without
// the copies: with the ranks started on cores of their own, direct took
// 1.4-2x its time at 64 KiB-1 MiB (tuning_defaults.cc). Between threads of
// one process (memcpy) direct led every algorithm from 64 KiB to 4 MiB at 2
// and 4 ranks, and lost its lead at 16 MiB (cost_formulas.cc).
TEST(TunerChoice, DirectCopiesWinBetweenThreadsNotBetweenProcesses) {
  UnusedWindows windows;
  auto chooseWith = [&](int n, size_t bytes, bool copies, bool inProcess) {
    Tuner tuner(builtinOptions(), n, algo::allAlgorithms(), Logger(), nullptr);
    Contexts ctx(n);
    ctx.simple.windows = ctx.ll.windows = &windows;
    ctx.simple.peerCopies = ctx.ll.peerCopies = copies;
    ctx.simple.peerCopiesInProcess = ctx.ll.peerCopiesInProcess = copies && inProcess;
    return nameOf(tuner.choose(callOf(CollType::kAllReduce, bytes), ctx.available()));
  };
  for (size_t bytes : {size_t{512} << 10, size_t{1} << 20, size_t{4} << 20, size_t{64} << 20}) {
    EXPECT_EQ(chooseWith(2, bytes, true, false), "tree/Simple") << bytes;
    EXPECT_EQ(chooseWith(2, bytes, false, false), "tree/Simple") << bytes;
  }
  for (size_t bytes : {size_t{8}, size_t{1024}, size_t{64} << 10})
    EXPECT_EQ(chooseWith(2, bytes, true, false), chooseWith(2, bytes, false, false)) << bytes;
  EXPECT_EQ(chooseWith(2, size_t{64} << 20, true, true), "tree/Simple");
  for (int n : {2, 4}) {
    for (size_t bytes : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20, size_t{4} << 20})
      EXPECT_EQ(chooseWith(n, bytes, true, true), "direct/Simple") << n << " ranks, " << bytes;
    // Above 4 MiB both kinds of copy are priced alike.
    EXPECT_EQ(chooseWith(n, size_t{64} << 20, true, true), chooseWith(n, size_t{64} << 20, true, false)) << n;
    EXPECT_NE(chooseWith(n, 8, true, true), "direct/Simple") << n << " ranks";
  }
}

// Between processes at 2 ranks the model does not pick direct, but the
// online tuner times it at 1-4 MiB: on a VM whose copies between cores slow
// down for a while, the tree and the ring took 2x its time there
// (tuning_defaults.cc), and only a timed candidate can win.
TEST(TunerChoice, DirectIsTimedBesideTheTreeAtOneToFourMiB) {
  UnusedWindows windows;
  Tuner tuner(builtinOptions(), 2, algo::allAlgorithms(), Logger(), nullptr);
  Contexts ctx(2);
  ctx.simple.windows = ctx.ll.windows = &windows;
  ctx.simple.peerCopies = ctx.ll.peerCopies = true;
  for (size_t bytes : {size_t{1} << 20, size_t{2} << 20, (size_t{4} << 20) - 4}) {
    const algo::CollArgs args = callOf(CollType::kAllReduce, bytes);
    OnlineTuner online;
    OnlineSlot* slot = online.slotFor({args.type, args.count, args.dtype, args.op, args.root},
                                      static_cast<double>(bytes), [&] { return tuner.shortlist(args, ctx.available()); });
    ASSERT_NE(slot, nullptr) << bytes;
    std::string names;
    for (const Choice& c : slot->candidates()) names += nameOf(c) + " ";
    EXPECT_EQ(nameOf(slot->candidates().front()), "tree/Simple") << bytes << ": " << names;
    EXPECT_NE(names.find("direct/Simple"), std::string::npos) << bytes << ": " << names;
  }
}

// A phase end waits for every peer: on 16 cores, at 8 and 16 ranks, the
// windowed and direct all-reduces took up to 2.4x recursive doubling's time
// at 8 B and 1 KiB (docs/performance.md). From 8 ranks small calls go to
// the log-depth or one-step algorithms.
TEST(TunerChoice, SmallCallsAvoidPhaseEndsFromEightRanks) {
  UnusedWindows windows;
  for (int n : {8, 16}) {
    Tuner tuner(builtinOptions(), n, algo::allAlgorithms(), Logger(), nullptr);
    Contexts ctx(n);
    ctx.simple.windows = ctx.ll.windows = &windows;
    ctx.simple.peerCopies = ctx.ll.peerCopies = true;
    for (size_t bytes : {size_t{8}, size_t{1024}}) {
      const std::string chosen = nameOf(tuner.choose(callOf(CollType::kAllReduce, bytes), ctx.available()));
      EXPECT_TRUE(chosen.rfind("rd/", 0) == 0 || chosen.rfind("oneshot/", 0) == 0 || chosen.rfind("tree/", 0) == 0)
          << n << " ranks, " << bytes << " B: " << chosen;
    }
  }
}

// With more ranks than cores LL measured slower than Simple for the ring,
// tree and halving-doubling at every size (tuning_defaults.cc), so forcing
// one of them must not bring LL along; only one-shot's bulletin keeps LL.
TEST(TunerChoice, ForcedAlgorithmsAtFourRanksRunSimple) {
  TunerOptions o = builtinOptions();
  for (const char* algo : {"ring", "tree", "hd", "rd"}) {
    o.algo = algo;
    for (size_t bytes = 8; bytes <= (256u << 10); bytes *= 4) {
      const Choice c = choose(o, 4, CollType::kAllReduce, bytes);
      EXPECT_STREQ(c.algorithm->name, algo) << bytes;
      EXPECT_EQ(c.proto, Protocol::kSimple) << algo << " at " << bytes << " B";
    }
  }
  o.algo = "oneshot";
  EXPECT_EQ(nameOf(choose(o, 4, CollType::kAllReduce, 64)), "oneshot/LL");
}

TEST(TunerChoice, HugeBroadcastAndReduceUseSimple) {
  for (int n : {2, 4, 8})
    for (auto type : {CollType::kBroadcast, CollType::kReduce})
      EXPECT_EQ(choose(builtinOptions(), n, type, kHuge).proto, Protocol::kSimple) << n;
}

TEST(TunerChoice, NeverPicksWhatDoesNotApply) {
  // One shot needs a single host; rd needs the vector to fit one chunk.
  for (int n : {2, 4, 8}) {
    for (size_t bytes = 8; bytes <= kHuge; bytes *= 4) {
      Choice multi = choose(builtinOptions(), n, CollType::kAllReduce, bytes, DataType::kFloat32, false);
      EXPECT_STRNE(multi.algorithm->name, "oneshot") << bytes;
      if (std::string(multi.algorithm->name) == "rd")
        EXPECT_LE(bytes, multi.proto == Protocol::kLL ? testing::kLLChunk : testing::kSimpleChunk);
      EXPECT_STRNE(multi.algorithm->name, "deterministic") << bytes;
    }
  }
}

TEST(TunerChoice, SimpleOnlyCommunicatorNeverUsesLL) {
  Tuner tuner(builtinOptions(), 4, fakeRegistry(), Logger(), nullptr);
  Contexts ctx(4);
  for (size_t bytes = 8; bytes <= kHuge; bytes *= 8)
    EXPECT_EQ(tuner.choose(callOf(CollType::kAllReduce, bytes), ctx.simpleOnly()).proto, Protocol::kSimple);
}

TEST(TunerChoice, FiltersForceAlgorithmAndProtocol) {
  TunerOptions o = builtinOptions();
  o.algo = "RING";
  EXPECT_EQ(nameOf(choose(o, 4, CollType::kAllReduce, kTiny)).substr(0, 5), "ring/");
  o.algo = "";
  o.proto = "ll";
  EXPECT_EQ(choose(o, 4, CollType::kAllReduce, kHuge).proto, Protocol::kLL);
  o.proto = "^ll";
  EXPECT_EQ(choose(o, 4, CollType::kAllReduce, kTiny).proto, Protocol::kSimple);
  o.proto = "";
  o.algo = "allreduce:hd;broadcast:tree";
  EXPECT_STREQ(choose(o, 4, CollType::kAllReduce, kTiny).algorithm->name, "hd");
  EXPECT_STREQ(choose(o, 4, CollType::kBroadcast, kHuge).algorithm->name, "tree");
  EXPECT_STREQ(choose(o, 4, CollType::kReduceScatter, kHuge).algorithm->name, "ring");  // unfiltered
}

TEST(TunerChoice, FilterExcludingEveryCandidateFallsBack) {
  TunerOptions o = builtinOptions();
  // rd only fits one chunk: at 64 MiB nothing LOOM_ALGO allows can run.
  o.algo = "rd";
  Choice c = choose(o, 4, CollType::kAllReduce, 64 << 20);
  ASSERT_NE(c.algorithm, nullptr);
  EXPECT_STRNE(c.algorithm->name, "rd");
  // rd and LL together: rd fits neither chunk at 1 MiB, so LOOM_ALGO is
  // ignored, and the protocol filter still holds.
  o.proto = "ll";
  c = choose(o, 4, CollType::kAllReduce, 1 << 20);
  ASSERT_NE(c.algorithm, nullptr);
  EXPECT_EQ(c.proto, Protocol::kLL);
}

TEST(TunerChoice, DeterministicOverridesLoomAlgoForFloatingPointReductions) {
  TunerOptions o = builtinOptions();
  o.deterministic = true;
  o.algo = "ring";
  for (int n : {2, 4})
    for (size_t bytes : {kTiny, size_t{1} << 20, kHuge})
      for (auto dtype : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64})
        for (auto type : {CollType::kAllReduce, CollType::kReduce, CollType::kReduceScatter})
          EXPECT_STREQ(choose(o, n, type, bytes, dtype).algorithm->name, "deterministic")
              << n << " " << bytes << " " << algo::collTypeName(type);
  // Integers are exact in any order: the usual choice.
  EXPECT_STREQ(choose(o, 4, CollType::kAllReduce, kTiny, DataType::kInt32).algorithm->name, "ring");
  // Broadcast does not reduce.
  EXPECT_STRNE(choose(o, 4, CollType::kBroadcast, kTiny).algorithm->name, "deterministic");
}

TEST(TunerChoice, DeterministicIsNeverPickedByTheCostModel) {
  // Even when the table makes it look free.
  auto table = TuningTable::parse("* deterministic * * 0 1000000\n", "cheap");
  ASSERT_TRUE(table.isOk());
  TunerOptions o = builtinOptions();
  o.table.append(table.value());
  for (size_t bytes = 8; bytes <= kHuge; bytes *= 16)
    for (auto type : {CollType::kAllReduce, CollType::kReduce, CollType::kReduceScatter})
      EXPECT_STRNE(choose(o, 4, type, bytes).algorithm->name, "deterministic") << bytes;
  // Unless LOOM_ALGO names it.
  o.algo = "deterministic";
  EXPECT_STREQ(choose(o, 4, CollType::kAllReduce, kTiny).algorithm->name, "deterministic");
}

TEST(TunerChoice, IdenticalInputsGiveIdenticalChoices) {
  // Rank 0's options as every rank receives them (serialized and parsed back).
  TunerOptions o = builtinOptions();
  o.algo = "^tree";
  auto copy = parseTunerOptions(serializeTunerOptions(o));
  ASSERT_TRUE(copy.isOk()) << copy.status().message();
  for (int n : {2, 3, 4, 8}) {
    Tuner a(o, n, fakeRegistry(), Logger(), nullptr);
    Tuner b(copy.value(), n, fakeRegistry(), Logger(), nullptr);
    Contexts ctx(n);
    for (auto type : {CollType::kAllReduce, CollType::kBroadcast, CollType::kReduce, CollType::kReduceScatter,
                      CollType::kAllGather})
      for (size_t bytes = 0; bytes <= kHuge; bytes = bytes ? bytes * 2 : 4) {
        const auto args = callOf(type, bytes);
        Choice first = a.choose(args, ctx.available());
        Choice again = a.choose(args, ctx.available());
        Choice other = b.choose(args, ctx.available());
        EXPECT_EQ(first.algorithm, again.algorithm);
        EXPECT_EQ(first.algorithm, other.algorithm) << n << " " << bytes;
        EXPECT_EQ(first.proto, other.proto) << n << " " << bytes;
        EXPECT_EQ(first.predictedMicros, other.predictedMicros);
      }
  }
}

TEST(TunerChoice, PicksThePredictedFastestCandidate) {
  Tuner tuner(builtinOptions(), 4, fakeRegistry(), Logger(), nullptr);
  Contexts ctx(4);
  for (size_t bytes = 8; bytes <= kHuge; bytes *= 2) {
    const auto args = callOf(CollType::kAllReduce, bytes);
    Choice c = tuner.choose(args, ctx.available());
    for (const Choice& other : tuner.predictAll(args, ctx.available())) {
      if (std::string(other.algorithm->name) == "deterministic") continue;
      EXPECT_LE(c.predictedMicros, other.predictedMicros) << bytes << " " << nameOf(other);
    }
  }
}

}  // namespace
}  // namespace loom::tuner

namespace loom::tuner {
namespace {

TEST(TunerChoice, RememberedChoicesFollowTheContexts) {
  // The same call under other contexts must not get a remembered choice.
  Tuner tuner(builtinOptions(), 4, testing::fakeRegistry(), Logger(), nullptr);
  testing::Contexts ctx(4);
  const auto args = testing::callOf(algo::CollType::kAllReduce, 8);
  EXPECT_EQ(tuner.choose(args, ctx.available()).proto, transport::Protocol::kLL);
  EXPECT_EQ(tuner.choose(args, ctx.simpleOnly()).proto, transport::Protocol::kSimple);
  EXPECT_EQ(tuner.choose(args, ctx.available()).proto, transport::Protocol::kLL);
  testing::Contexts multiHost(4, false);
  EXPECT_STRNE(tuner.choose(args, multiHost.available()).algorithm->name, "oneshot");
  EXPECT_STREQ(tuner.choose(args, ctx.available()).algorithm->name, "oneshot");
}

}  // namespace
}  // namespace loom::tuner
