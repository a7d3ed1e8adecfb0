// The cost model's formulas and the monotonicity of its predictions.
#include <gtest/gtest.h>

#include <string>

#include "algorithms/registry.h"
#include "src/tuner/cost_model.h"
#include "src/tuner/tuner.h"
#include "tests/unit/tuner/tuner_test_util.h"

namespace loom::tuner {
namespace {

using algo::CollType;
using testing::fakeRegistry;
using transport::Protocol;
using Shape = algo::CostShape;

// The one-host shape of the registry's record (type, name).
Shape shapeOf(CollType type, const std::string& name, int n, double bytes, double chunk) {
  for (const auto& a : algo::allAlgorithms())
    if (a.type == type && a.name == name) return oneHostShape(a, n, bytes, chunk);
  ADD_FAILURE() << "no " << algo::collTypeName(type) << " '" << name << "' in the registry";
  return {};
}

TEST(CostModel, StepAndByteFormulas) {
  const double MiB = 1 << 20, K = 256 * 1024;
  // Ring all-reduce, 4 ranks, 4 MiB in 256 KiB chunks: 4 rounds of 2(n-1) = 6 hops.
  Shape ring = shapeOf(CollType::kAllReduce, "ring", 4, 4 * MiB, K);
  EXPECT_EQ(ring.steps, 24);
  EXPECT_DOUBLE_EQ(ring.wireBytes, 1.5 * 4 * MiB);
  EXPECT_DOUBLE_EQ(ring.reducedBytes, 0.75 * 4 * MiB);
  // Recursive doubling: log2(n) whole-vector exchanges; +2 (fold, unfold) for n = 3.
  EXPECT_EQ(shapeOf(CollType::kAllReduce, "rd", 4, 64, K).steps, 2);
  EXPECT_DOUBLE_EQ(shapeOf(CollType::kAllReduce, "rd", 4, 64, K).wireBytes, 128);
  EXPECT_EQ(shapeOf(CollType::kAllReduce, "rd", 3, 64, K).steps, 3);
  // Halving-doubling, 8 ranks, small: 2 log2(8) steps, ~2 S on the wire.
  Shape hd = shapeOf(CollType::kAllReduce, "hd", 8, 1024, K);
  EXPECT_EQ(hd.steps, 6);
  EXPECT_DOUBLE_EQ(hd.wireBytes, 2.0 * 7 / 8 * 1024);
  // One shot: one round, (n-1) S.
  Shape one = shapeOf(CollType::kAllReduce, "oneshot", 4, 1000, K);
  EXPECT_EQ(one.steps, 1);
  EXPECT_DOUBLE_EQ(one.wireBytes, 3000);
  // Double binary tree, 8 ranks, 1 MiB: 2 x 3 levels + 2 pieces of each half - 1.
  EXPECT_EQ(shapeOf(CollType::kAllReduce, "tree", 8, MiB, K).steps, 6 + 2 - 1);
  // With 2 ranks each rank roots one tree and has one child: S on the wire and
  // half of it reduced, the ring's bytes; with more, an interior node reduces S.
  Shape tree2 = shapeOf(CollType::kAllReduce, "tree", 2, MiB, K);
  Shape ring2 = shapeOf(CollType::kAllReduce, "ring", 2, MiB, K);
  EXPECT_DOUBLE_EQ(tree2.wireBytes, ring2.wireBytes);
  EXPECT_DOUBLE_EQ(tree2.reducedBytes, ring2.reducedBytes);
  EXPECT_DOUBLE_EQ(tree2.reducedBytes, 0.5 * MiB);
  EXPECT_DOUBLE_EQ(shapeOf(CollType::kAllReduce, "tree", 4, MiB, K).reducedBytes, MiB);
  // Chain broadcast, 4 ranks, 1 MiB: 3 hops + 4 pieces - 1.
  Shape chain = shapeOf(CollType::kBroadcast, "chain", 4, MiB, K);
  EXPECT_EQ(chain.steps, 6);
  EXPECT_DOUBLE_EQ(chain.wireBytes, MiB);
  EXPECT_EQ(chain.reducedBytes, 0);
  EXPECT_DOUBLE_EQ(shapeOf(CollType::kReduce, "chain", 4, MiB, K).reducedBytes, MiB);
  // Ring all-gather over the whole 4 MiB buffer of 4 ranks: 3 hops x 4 rounds.
  Shape ag = shapeOf(CollType::kAllGather, "ring", 4, 4 * MiB, K);
  EXPECT_EQ(ag.steps, 12);
  EXPECT_DOUBLE_EQ(ag.wireBytes, 0.75 * 4 * MiB);
  EXPECT_EQ(ag.reducedBytes, 0);
  // One rank: nothing moves.
  EXPECT_EQ(shapeOf(CollType::kAllReduce, "ring", 1, MiB, K).steps, 0);
  // Hier on one host: its two intra-host rings are a ring all-reduce.
  Shape hier = shapeOf(CollType::kAllReduce, "hier", 4, 4 * MiB, K);
  EXPECT_EQ(hier.steps, ring.steps);
  EXPECT_DOUBLE_EQ(hier.wireBytes, ring.wireBytes);
  EXPECT_DOUBLE_EQ(hier.reducedBytes, ring.reducedBytes);
}

TEST(CostModel, PredictionIsTheLinearCombination) {
  Shape s{10, 1000, 500};
  CostParams p{2.0, 0.001, 0.0005};
  EXPECT_DOUBLE_EQ(predictMicros(s, p), 10 * 2.0 + 1000 * 0.001 + 500 * 0.0005);
}

TEST(CostModel, CollectiveBytesCountsTheWholeBufferOfReduceScatterAndAllGather) {
  algo::CollArgs a = testing::callOf(CollType::kAllGather, 400);
  EXPECT_DOUBLE_EQ(collectiveBytes(a, 4), 1600);
  a.type = CollType::kAllReduce;
  EXPECT_DOUBLE_EQ(collectiveBytes(a, 4), 400);
}

TEST(CostModel, BuiltinPredictionsGrowWithSize) {
  TunerOptions options;
  options.table = TuningTable::builtin();
  for (int n : {2, 3, 4, 8, 16}) {
    Tuner tuner(options, n, fakeRegistry(), Logger(), nullptr);
    for (size_t i = 0; i < fakeRegistry().size(); ++i)
      for (auto proto : {Protocol::kSimple, Protocol::kLL}) {
        const double chunk = proto == Protocol::kLL ? testing::kLLChunk : testing::kSimpleChunk;
        double previous = -1;
        for (double bytes = 0; bytes <= double(1ull << 30); bytes = bytes < 8 ? 8 : bytes * 1.5) {
          const double t = tuner.predict(i, proto, bytes, chunk);
          EXPECT_GE(t, previous) << fakeRegistry()[i].name << " " << transport::protocolName(proto) << " n=" << n
                                 << " at " << bytes << " B";
          EXPECT_GT(t, 0) << fakeRegistry()[i].name << " n=" << n;
          previous = t;
        }
      }
  }
}

TEST(CostModel, MeasuredPointsAreInterpolatedLogLog) {
  auto table = TuningTable::parse(
      "allreduce ring simple 2 1 1\n"
      "point allreduce ring simple 2 1000 10\n"
      "point allreduce ring simple 2 100000 1000\n",
      "points");
  ASSERT_TRUE(table.isOk()) << table.status().message();
  TunerOptions options;
  options.table = table.value();
  Tuner tuner(options, 2, fakeRegistry(), Logger(), nullptr);
  const double chunk = testing::kSimpleChunk;
  EXPECT_NEAR(tuner.predict(0, Protocol::kSimple, 10000, chunk), 100, 1e-9);  // halfway in log-log
  EXPECT_DOUBLE_EQ(tuner.predict(0, Protocol::kSimple, 1000, chunk), 10);
  EXPECT_DOUBLE_EQ(tuner.predict(0, Protocol::kSimple, 8, chunk), 10);  // flat below the first point
  // Above the last point the alpha-beta model's growth scales the last time.
  Shape atLast = shapeOf(CollType::kAllReduce, "ring", 2, 100000, chunk);
  Shape beyond = shapeOf(CollType::kAllReduce, "ring", 2, 1e7, chunk);
  const CostParams p{1, 1e-3, 0};
  EXPECT_NEAR(tuner.predict(0, Protocol::kSimple, 1e7, chunk),
              1000 * predictMicros(beyond, p) / predictMicros(atLast, p), 1e-6);
  // Nothing in this table matches LL: zero parameters.
  EXPECT_EQ(tuner.predict(0, Protocol::kLL, 1000, chunk), 0);
}

}  // namespace
}  // namespace loom::tuner
