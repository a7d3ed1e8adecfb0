// DistributedDataParallel with ranks as threads: broadcast, averaging,
// overlap, no_sync, hooks, misuse, and the overlap statistics. Each rank's
// gradients come from grad_patterns.h, so the expected average is computed
// independently here in double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "ddp/distributed/distributed_data_parallel.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::fakeBackward;
using testing::finishFakeBackward;
using testing::gradPattern;
using testing::makeStore;
using testing::meanPattern;
using testing::RankContext;
using testing::runThreads;

// Odd sizes, small caps: a dozen buckets, some holding one parameter.
// The last bucket holds p0 and p1 (the overlap test leaves p0 for last).
const std::vector<size_t> kSizes = {37, 5, 4096, 1000, 3000, 1, 777, 2048, 129, 6000};
DdpOptions smallBuckets(bool overlap, CommHook hook = CommHook::kNone) {
  DdpOptions o;
  o.firstBucketCapBytes = 1024;
  o.bucketCapBytes = 8192;
  o.overlap = overlap;
  o.hook = hook;
  return o;
}

// Float average over n ranks: a few ulps of the magnitude.
void expectAveraged(const ParameterStore& store, int nranks, const std::vector<int>& steps, int rank) {
  for (size_t i = 0; i < store.totalSize(); ++i) {
    const double want = meanPattern(nranks, steps, i);
    ASSERT_NEAR(store.grads()[i], want, 1e-6 * steps.size() * nranks) << "rank " << rank << " element " << i;
  }
}

TEST(Ddp, BroadcastsRankZerosParameters) {
  runThreads(3, [](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(true));
    for (size_t i = 0; i < store->totalSize(); ++i) ASSERT_EQ(store->values()[i], gradPattern(0, -1, i)) << "rank " << w.rank;
  });
}

class DdpAverage : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(DdpAverage, GradsAreTheMeanOverRanks) {
  const auto [nranks, overlap] = GetParam();
  runThreads(nranks, [&](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(overlap));
    EXPECT_GT(ddp.buckets().size(), 5u);
    for (int step = 0; step < 3; ++step) {
      store->zeroGrads();
      fakeBackward(*store, w.rank, step);
      ddp.finishGradientSync();
      expectAveraged(*store, w.nranks, {step}, w.rank);
    }
    EXPECT_EQ(ddp.stats().steps, 3u);
  });
}
INSTANTIATE_TEST_SUITE_P(Ranks, DdpAverage, ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()));

// Overlap: with every parameter but p0 ready, all buckets but the last must
// finish (and hold averaged gradients) while "backward" is still running;
// with overlap off, nothing may be reduced before finishGradientSync.
TEST(Ddp, BucketsFinishBeforeTheLastGradient) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(true));
    const size_t nb = ddp.buckets().size();
    ASSERT_EQ(ddp.buckets().back().firstParam, 0u);
    ASSERT_GT(ddp.buckets().back().lastParam, 0u) << "p0 must not be alone in the last bucket for this test";
    // Mark everything but p0: every bucket except the last becomes ready.
    store->zeroGrads();
    fakeBackward(*store, w.rank, 0, /*stopBefore=*/1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ddp.finishedBuckets() < nb - 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(ddp.finishedBuckets(), nb - 1) << "rank " << w.rank << ": buckets were not reduced during backward";
    const size_t lastBucketStart = ddp.buckets().back().offset + ddp.buckets().back().size;
    for (size_t i = lastBucketStart; i < store->totalSize(); ++i)
      ASSERT_NEAR(store->grads()[i], meanPattern(2, {0}, i), 1e-6) << "element " << i << " not yet averaged";
    finishFakeBackward(*store, w.rank, 0, 1);
    ddp.finishGradientSync();
    expectAveraged(*store, 2, {0}, w.rank);
  });
}

TEST(Ddp, OverlapOffReducesOnlyInFinish) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(false));
    store->zeroGrads();
    fakeBackward(*store, w.rank, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(ddp.finishedBuckets(), 0u);
    for (size_t i = 0; i < store->totalSize(); ++i) ASSERT_EQ(store->grads()[i], gradPattern(w.rank, 0, i));
    ddp.finishGradientSync();
    expectAveraged(*store, 2, {0}, w.rank);
    // All of the communication happened inside finishGradientSync.
    EXPECT_EQ(ddp.stats().hiddenShare(), 0.0);
    EXPECT_GE(ddp.stats().exposedSeconds, ddp.stats().commSeconds);
  });
}

// A last-bucket cap puts p0 (37 floats) alone in the last bucket; the
// gradients are still the mean over ranks, and the other buckets are the
// plan of p1.. without a last cap.
TEST(Ddp, LastBucketCapAveragesAndIsolatesTheTail) {
  for (int nranks : {2, 4}) {
    runThreads(nranks, [&](const RankContext& w) {
      auto store = makeStore(kSizes, w.rank);
      DdpOptions options = smallBuckets(true);
      options.lastBucketCapBytes = 37 * sizeof(float);
      DistributedDataParallel ddp(w.comm, *store, options);
      ASSERT_EQ(ddp.buckets().back().firstParam, 0u);
      ASSERT_EQ(ddp.buckets().back().lastParam, 0u) << "p1 does not fit the last cap with p0";
      ASSERT_GT(ddp.buckets().size(), 2u);
      EXPECT_EQ(ddp.buckets()[ddp.buckets().size() - 2].firstParam, 1u);
      for (int step = 0; step < 2; ++step) {
        store->zeroGrads();
        fakeBackward(*store, w.rank, step);
        ddp.finishGradientSync();
        expectAveraged(*store, w.nranks, {step}, w.rank);
      }
    });
  }
}

// The bound on the hidden share holds by construction, on any machine:
// hidden communication lies between the first launch and the
// finishGradientSync call (window), and the last bucket's run after that
// call is part of the exposed time (tail). Timing-independent checks only.
TEST(Ddp, StatsBoundTheHiddenShare) {
  for (bool overlap : {true, false}) {
    runThreads(2, [&](const RankContext& w) {
      auto store = makeStore({100, 200000}, w.rank);  // bucket 0 = p1, bucket 1 = p0
      DdpOptions options;
      options.firstBucketCapBytes = 800000;
      options.lastBucketCapBytes = 400;
      options.overlap = overlap;
      DistributedDataParallel ddp(w.comm, *store, options);
      ASSERT_EQ(ddp.buckets().size(), 2u);
      for (int step = 0; step < 3; ++step) {
        store->zeroGrads();
        fakeBackward(*store, w.rank, step, 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        finishFakeBackward(*store, w.rank, step, 1);
        ddp.finishGradientSync();
      }
      const auto st = ddp.stats();
      const double slack = 1e-9 * static_cast<double>(st.steps);  // rounding of summed durations
      EXPECT_EQ(st.steps, 3u);
      EXPECT_GT(st.commSeconds, 0.0);
      EXPECT_GE(st.tailSeconds, 0.0);
      EXPECT_LE(st.tailSeconds, st.exposedSeconds + slack);
      EXPECT_LE(st.tailSeconds, st.commSeconds + slack);
      EXPECT_GE(st.windowSeconds + st.exposedSeconds + slack, st.commSeconds) << "hidden comm outside the window";
      EXPECT_GE(st.maxHiddenShare() + 1e-9, st.hiddenShare());
      EXPECT_LE(st.maxHiddenShare(), 1.0);
      if (!overlap) {
        EXPECT_EQ(st.windowSeconds, 0.0) << "nothing is launched before finishGradientSync";
        EXPECT_EQ(st.maxHiddenShare(), 0.0);
      } else {
        EXPECT_GT(st.windowSeconds, 0.0) << "bucket 0 was launched before the 5 ms pause";
      }
      ddp.resetStats();
      EXPECT_EQ(ddp.stats().windowSeconds, 0.0);
      EXPECT_EQ(ddp.stats().tailSeconds, 0.0);
    });
  }
}

// Stats: backward that keeps computing (a 60 ms sleep) after its first
// bucket (8 MB) is ready, as a real model's earlier layers do, hides that
// bucket's all-reduce; the small last bucket, and any skew between the
// ranks or scheduling delay on a busy machine, stay exposed.
TEST(Ddp, StatsShowHiddenCommunication) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore({100, 2000000}, w.rank);  // bucket 0 = p1 (8 MB), bucket 1 = p0
    DdpOptions options;
    options.firstBucketCapBytes = 8000000;  // exactly p1
    options.bucketCapBytes = 400;
    DistributedDataParallel ddp(w.comm, *store, options);
    ASSERT_EQ(ddp.buckets().size(), 2u);
    for (int step = 0; step < 3; ++step) {
      store->zeroGrads();
      fakeBackward(*store, w.rank, step, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      finishFakeBackward(*store, w.rank, step, 1);
      ddp.finishGradientSync();
    }
    const auto stats = ddp.stats();
    EXPECT_EQ(stats.steps, 3u);
    EXPECT_GT(stats.commSeconds, 0.0);
    EXPECT_LT(stats.exposedSeconds, stats.commSeconds);
    EXPECT_GT(stats.hiddenShare(), 0.3) << "comm " << stats.commSeconds << " s, exposed " << stats.exposedSeconds << " s";
    ddp.resetStats();
    EXPECT_EQ(ddp.stats().steps, 0u);
    EXPECT_EQ(ddp.stats().commSeconds, 0.0);
  });
}

TEST(Ddp, NoSyncAccumulatesLocallyThenReducesTheSum) {
  runThreads(3, [](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(true));
    store->zeroGrads();
    {
      auto guard = ddp.noSync();
      fakeBackward(*store, w.rank, 0);
      fakeBackward(*store, w.rank, 1);  // a second micro-batch: a new pass, not a double mark
      ddp.finishGradientSync();         // inside no_sync: nothing to do
      EXPECT_EQ(ddp.finishedBuckets(), 0u);
      for (size_t i = 0; i < store->totalSize(); ++i)
        ASSERT_FLOAT_EQ(store->grads()[i], gradPattern(w.rank, 0, i) + gradPattern(w.rank, 1, i)) << "reduced inside no_sync";
    }
    fakeBackward(*store, w.rank, 2);
    ddp.finishGradientSync();
    expectAveraged(*store, 3, {0, 1, 2}, w.rank);
    EXPECT_EQ(ddp.stats().steps, 1u);
  });
}

class DdpHook : public ::testing::TestWithParam<std::tuple<CommHook, int>> {};

// Error bound: each rank's g/n is rounded once (relative 2^-p), and the sum
// is rounded to 16 bits after each of at most n-1 additions: within
// (2n) * 2^-p * (sum |g_r| / n), plus n times fp16's subnormal spacing
// (2^-24) for results below fp16's normal range.
TEST_P(DdpHook, CompressedAverageWithinTolerance) {
  const auto [hook, nranks] = GetParam();
  const bool fp16 = hook == CommHook::kFp16Compress;
  const double unit = fp16 ? 0x1p-11 : 0x1p-8;
  runThreads(nranks, [&](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(true, hook));
    for (int step = 0; step < 2; ++step) {
      store->zeroGrads();
      fakeBackward(*store, w.rank, step);
      ddp.finishGradientSync();
      double worst = 0;
      for (size_t i = 0; i < store->totalSize(); ++i) {
        double magnitude = 0;
        for (int r = 0; r < w.nranks; ++r) magnitude += std::fabs(gradPattern(r, step, i)) / w.nranks;
        const double err = std::fabs(store->grads()[i] - meanPattern(w.nranks, {step}, i));
        ASSERT_LE(err, 2 * w.nranks * unit * magnitude + w.nranks * 0x1p-24) << "element " << i;
        worst = std::max(worst, err);
        // It really went through 16 bits: the result is a 16-bit value.
        const float g = store->grads()[i];
        const float roundTrip = fp16 ? static_cast<float>(static_cast<_Float16>(g))
                                     : std::bit_cast<float>(std::bit_cast<uint32_t>(g) & 0xffff0000u);
        ASSERT_EQ(g, roundTrip) << "element " << i << " is not a " << (fp16 ? "fp16" : "bf16") << " value";
      }
      EXPECT_GT(worst, 0.0) << "no rounding at all: was the hook applied?";
    }
  });
}
INSTANTIATE_TEST_SUITE_P(Hooks, DdpHook,
                         ::testing::Combine(::testing::Values(CommHook::kFp16Compress, CommHook::kBf16Compress),
                                            ::testing::Values(2, 4)));

TEST(Ddp, DoubleMarkIsAnError) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(true));
    store->zeroGrads();
    fakeBackward(*store, w.rank, 0, 3);  // p9..p3 marked
    try {
      store->markGradReady(5);
      ADD_FAILURE() << "a second markGradReady(5) was accepted";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("\"p5\""), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
    }
    finishFakeBackward(*store, w.rank, 0, 3);
    ddp.finishGradientSync();
    expectAveraged(*store, 2, {0}, w.rank);
    // A new backward before finishGradientSync of the previous one.
    fakeBackward(*store, w.rank, 1);
    EXPECT_THROW(store->markGradReady(9), std::logic_error);
    ddp.finishGradientSync();
  });
}

TEST(Ddp, MissingGradientIsNamed) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore(kSizes, w.rank);
    DistributedDataParallel ddp(w.comm, *store, smallBuckets(true));
    store->zeroGrads();
    for (size_t i = store->count(); i-- > 0;)
      if (i != 4) store->markGradReady(i);
    try {
      ddp.finishGradientSync();
      ADD_FAILURE() << "finishGradientSync accepted a step where p4 never got markGradReady";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("\"p4\""), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(w.rank)), std::string::npos) << e.what();
    }
    // Both ranks launched the same buckets, so the next step still works.
    store->zeroGrads();
    fakeBackward(*store, w.rank, 1);
    ddp.finishGradientSync();
    expectAveraged(*store, 2, {1}, w.rank);
  });
}

TEST(Ddp, DifferentLayoutsAreRejected) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore(w.rank == 0 ? std::vector<size_t>{10, 20} : std::vector<size_t>{10, 21}, w.rank);
    try {
      DistributedDataParallel ddp(w.comm, *store);
      ADD_FAILURE() << "rank " << w.rank << " accepted a layout that differs between ranks";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(1 - w.rank)), std::string::npos) << e.what();
    }
  });
}

TEST(Ddp, RejectsAnUnfinalizedStore) {
  runThreads(1, [](const RankContext& w) {
    ParameterStore store;
    store.add("w", {4});
    EXPECT_THROW(DistributedDataParallel(w.comm, store), std::invalid_argument);
  });
}

}  // namespace
}  // namespace loom::ddp

namespace loom::ddp {
namespace {

// A peer that never joins the gradient all-reduce: rank 0's buckets time out
// (LOOM_TIMEOUT=1 for these communicators) and finishGradientSync reports
// Loom's error instead of hanging or returning unreduced gradients.
TEST(DdpErrors, FailedCollectiveIsReported) {
  const char* saved = std::getenv("LOOM_TIMEOUT");
  const std::string previous = saved ? saved : "";
  setenv("LOOM_TIMEOUT", "1", 1);  // read once, when the communicators are created
  std::atomic<bool> rank0Done{false};
  runThreads(2, [&](const RankContext& w) {
    if (w.rank == 0) {
      if (saved) setenv("LOOM_TIMEOUT", previous.c_str(), 1);
      else unsetenv("LOOM_TIMEOUT");
    }
    auto store = makeStore({1000, 1000}, w.rank);
    DistributedDataParallel ddp(w.comm, *store);
    if (w.rank == 0) {
      fakeBackward(*store, 0, 0);
      try {
        ddp.finishGradientSync();
        ADD_FAILURE() << "finishGradientSync returned although rank 1 never joined";
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(loomGetErrorString(loomTimeout)), std::string::npos) << e.what();
      }
      rank0Done = true;
    } else {
      while (!rank0Done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

}  // namespace
}  // namespace loom::ddp
