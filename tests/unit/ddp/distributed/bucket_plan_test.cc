// Bucket layout: reverse registration order, first bucket capped at 1 MiB,
// the others at 25 MiB (the defaults), a parameter never split, and greedy
// filling (a bucket closes only when the next parameter would not fit).
#include <gtest/gtest.h>

#include <random>

#include "ddp/distributed/bucket_plan.h"
#include "ddp/distributed/distributed_data_parallel.h"

namespace loom::ddp {
namespace {

ParameterStore storeOf(const std::vector<size_t>& sizes) {
  ParameterStore store;
  for (size_t i = 0; i < sizes.size(); ++i) store.add("p" + std::to_string(i), {sizes[i]});
  store.finalize();
  return store;
}

// 1..maxCount parameters of 1-300 elements, a quarter of them up to 5000.
std::vector<size_t> randomSizes(std::mt19937_64& rng, size_t maxCount) {
  std::vector<size_t> sizes(1 + rng() % maxCount);
  for (auto& s : sizes) s = 1 + rng() % (rng() % 4 == 0 ? 5000 : 300);
  return sizes;
}

// Each bucket as its (first, last) parameter index.
using Ranges = std::vector<std::pair<size_t, size_t>>;
Ranges ranges(const std::vector<BucketRange>& buckets) {
  Ranges r;
  for (const BucketRange& b : buckets) r.emplace_back(b.firstParam, b.lastParam);
  return r;
}

constexpr size_t kMiB = 1u << 20;
constexpr size_t kFloatsPerMiB = kMiB / sizeof(float);

TEST(BucketPlan, DefaultsArePyTorchs) {
  DdpOptions options;
  EXPECT_EQ(options.firstBucketCapBytes, 1 * kMiB);
  EXPECT_EQ(options.bucketCapBytes, 25 * kMiB);
  EXPECT_EQ(options.lastBucketCapBytes, 0u) << "PyTorch's plan unless asked";
  EXPECT_EQ(options.closeAfterBytes, 0u) << "PyTorch's plan unless asked";
  EXPECT_TRUE(options.overlap);
  EXPECT_EQ(options.hook, CommHook::kNone);
}

TEST(BucketPlan, HandWorkedExample) {
  // Registration order p0..p6; backward produces p6 first.
  //   p6 0.25 MiB + p5 0.5 MiB fit the 1 MiB first bucket; p4 (0.5) would not.
  //   p4 0.5 + p3 10 + p2 14 = 24.5 MiB fit 25; p1 (1 MiB) would not.
  //   p1 1 MiB, then p0 30 MiB alone (larger than the cap, never split).
  const std::vector<size_t> sizes = {30 * kFloatsPerMiB, kFloatsPerMiB, 14 * kFloatsPerMiB, 10 * kFloatsPerMiB,
                                     kFloatsPerMiB / 2, kFloatsPerMiB / 2, kFloatsPerMiB / 4};
  ParameterStore store = storeOf(sizes);
  const auto buckets = planBuckets(store, 1 * kMiB, 25 * kMiB);
  ASSERT_EQ(buckets.size(), 4u);
  auto expect = [&](size_t b, size_t first, size_t last) {
    EXPECT_EQ(buckets[b].firstParam, first) << "bucket " << b;
    EXPECT_EQ(buckets[b].lastParam, last) << "bucket " << b;
    EXPECT_EQ(buckets[b].offset, store.info(first).offset) << "bucket " << b;
    size_t size = 0;
    for (size_t i = first; i <= last; ++i) size += sizes[i];
    EXPECT_EQ(buckets[b].size, size) << "bucket " << b;
  };
  expect(0, 5, 6);
  expect(1, 2, 4);
  expect(2, 1, 1);  // p1 alone
  expect(3, 0, 0);          // p0 alone, 30 MiB > 25 MiB cap
}

TEST(BucketPlan, RandomLayoutsObeyTheRules) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<size_t> sizes = randomSizes(rng, 40);
    const size_t count = sizes.size();
    ParameterStore store = storeOf(sizes);
    const size_t firstCap = 4 * (1 + rng() % 2000), cap = 4 * (1 + rng() % 6000);
    const auto buckets = planBuckets(store, firstCap, cap);
    ASSERT_FALSE(buckets.empty());
    size_t expectNextLast = count - 1;  // buckets walk the parameters backwards, without gaps
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto& k = buckets[b];
      const size_t capElements = (b == 0 ? firstCap : cap) / 4;
      ASSERT_EQ(k.lastParam, expectNextLast) << "trial " << trial << " bucket " << b;
      ASSERT_LE(k.firstParam, k.lastParam);
      size_t size = 0;
      for (size_t i = k.firstParam; i <= k.lastParam; ++i) size += sizes[i];
      EXPECT_EQ(k.size, size);
      EXPECT_EQ(k.offset, store.info(k.firstParam).offset);
      EXPECT_EQ(k.offset + k.size, store.info(k.lastParam).offset + sizes[k.lastParam]) << "contiguous";
      if (k.firstParam != k.lastParam) {
        EXPECT_LE(size, capElements) << "over the cap with more than one parameter";
      }
      if (k.firstParam > 0) {
        EXPECT_GT(size + sizes[k.firstParam - 1], capElements) << "closed although the next one fit";
      }
      expectNextLast = k.firstParam - 1;
    }
    EXPECT_EQ(buckets.back().firstParam, 0u);
  }
}

TEST(BucketPlan, LastCapHandWorkedExample) {
  // p0 3 MiB (produced last), p1 0.25, p2 0.5, p3 12.5, p4 12.5, p5 0.5.
  // Last cap 1 MiB: the tail is p0 alone (larger than the cap; p1 would
  // not join a bucket already over it). The rest, p1..p5 as without a last
  // cap: first bucket p5 (0.5 <= 1), then p4 + p3 = 25 <= 25, then p2 + p1.
  // Without the last cap p2, p1 and p0 (3.75 MiB) share the last bucket.
  const size_t big = 12 * kFloatsPerMiB + kFloatsPerMiB / 2;
  const std::vector<size_t> sizes = {3 * kFloatsPerMiB, kFloatsPerMiB / 4, kFloatsPerMiB / 2, big, big,
                                     kFloatsPerMiB / 2};
  ParameterStore store = storeOf(sizes);
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 1 * kMiB)), (Ranges{{5, 5}, {3, 4}, {1, 2}, {0, 0}}));
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB)), (Ranges{{5, 5}, {3, 4}, {0, 2}}));
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 0)), (Ranges{{5, 5}, {3, 4}, {0, 2}}));
  // A last cap of 4 MiB takes p0 + p1 + p2 (3.75 MiB); p3 would not fit.
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 4 * kMiB)), (Ranges{{5, 5}, {3, 4}, {0, 2}}));
  // 3.5 MiB: p0 + p1 only; p2 gets a bucket of its own (p4 + p3 are full).
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 3 * kMiB + kMiB / 2)),
            (Ranges{{5, 5}, {3, 4}, {2, 2}, {0, 1}}));
}

TEST(BucketPlan, LastCapCoveringEverythingKeepsThePlainPlan) {
  ParameterStore store = storeOf({100, 200, 300});
  const auto plain = planBuckets(store, 400, 800);
  const auto capped = planBuckets(store, 400, 800, 1u << 20);
  ASSERT_EQ(plain.size(), capped.size());
  for (size_t b = 0; b < plain.size(); ++b) {
    EXPECT_EQ(plain[b].firstParam, capped[b].firstParam);
    EXPECT_EQ(plain[b].lastParam, capped[b].lastParam);
  }
  ParameterStore single = storeOf({5000});
  ASSERT_EQ(planBuckets(single, 4, 4, 4).size(), 1u);
}

// Independent reference: with a last cap, the last bucket is the longest
// prefix p0..pk within the cap (at least p0), and the buckets before it are
// what the plain plan makes of the store without that prefix.
TEST(BucketPlan, RandomLayoutsWithALastCap) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<size_t> sizes = randomSizes(rng, 30);
    const size_t count = sizes.size();
    ParameterStore store = storeOf(sizes);
    const size_t firstCap = 4 * (1 + rng() % 2000), cap = 4 * (1 + rng() % 6000), lastCap = 4 * (1 + rng() % 3000);
    const auto buckets = planBuckets(store, firstCap, cap, lastCap);

    size_t tail = 1, tailSize = sizes[0];
    while (tail < count && tailSize + sizes[tail] <= lastCap / 4) tailSize += sizes[tail++];
    if (tail == count) {
      const auto plain = planBuckets(store, firstCap, cap);
      ASSERT_EQ(buckets.size(), plain.size()) << "trial " << trial;
      for (size_t b = 0; b < plain.size(); ++b) ASSERT_EQ(buckets[b].firstParam, plain[b].firstParam);
      continue;
    }
    ASSERT_GE(buckets.size(), 2u) << "trial " << trial;
    EXPECT_EQ(buckets.back().firstParam, 0u) << "trial " << trial;
    EXPECT_EQ(buckets.back().lastParam, tail - 1) << "trial " << trial;
    EXPECT_EQ(buckets.back().offset, 0u);
    EXPECT_EQ(buckets.back().size, tailSize);

    const std::vector<size_t> rest(sizes.begin() + static_cast<std::ptrdiff_t>(tail), sizes.end());
    ParameterStore restStore = storeOf(rest);
    const auto expected = planBuckets(restStore, firstCap, cap);
    ASSERT_EQ(buckets.size(), expected.size() + 1) << "trial " << trial;
    for (size_t b = 0; b < expected.size(); ++b) {
      EXPECT_EQ(buckets[b].firstParam, expected[b].firstParam + tail) << "trial " << trial << " bucket " << b;
      EXPECT_EQ(buckets[b].lastParam, expected[b].lastParam + tail) << "trial " << trial << " bucket " << b;
      EXPECT_EQ(buckets[b].size, expected[b].size);
      EXPECT_EQ(buckets[b].offset, store.info(buckets[b].firstParam).offset);
    }
  }
}

// An MLP 784-2048-2048-2048-2048-10 registers w0, b0, w1, b1, ..., w4, b4;
// backward produces b4 first. With a 1 MiB close-after, each 16 MiB weight
// closes its bucket instead of waiting for the next layer's bias (which
// comes only after that layer's input gradient).
TEST(BucketPlan, CloseAfterLargeParameterHandWorkedExample) {
  const size_t w = 2048;
  const std::vector<size_t> sizes = {784 * w, w, w * w, w, w * w, w, w * w, w, w * 10, 10};
  ParameterStore store = storeOf(sizes);
  // Caps only: the 16 MiB weights each take the bias below them (16 MiB +
  // 8 KiB fit 25 MiB); the 1 MiB last cap leaves w0 (6.1 MiB) alone.
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 1 * kMiB)),
            (Ranges{{7, 9}, {5, 6}, {3, 4}, {1, 2}, {0, 0}}));
  // Closing after 1 MiB: b4 + w4 + b3 (first bucket), then each weight with
  // the bias produced just before it, b0 alone, w0 last.
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 1 * kMiB, 1 * kMiB)),
            (Ranges{{7, 9}, {6, 6}, {4, 5}, {2, 3}, {1, 1}, {0, 0}}));
  // Without a last cap, w0 closes nothing (it is the last parameter): b0 + w0.
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 0, 1 * kMiB)),
            (Ranges{{7, 9}, {6, 6}, {4, 5}, {2, 3}, {0, 1}}));
  // A threshold above every parameter is the plain plan; one of exactly
  // 16 MiB still closes after each 16 MiB weight.
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 1 * kMiB, 17 * kMiB)),
            ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 1 * kMiB)));
  EXPECT_EQ(ranges(planBuckets(store, 1 * kMiB, 25 * kMiB, 1 * kMiB, 16 * kMiB)),
            (Ranges{{7, 9}, {6, 6}, {4, 5}, {2, 3}, {1, 1}, {0, 0}}));
}

// The rules, checked on random layouts: buckets cover the parameters in
// reverse order without gaps; a bucket over its cap holds one parameter; a
// parameter of at least closeAfter elements is the last one its bucket
// takes (the lowest index), except in the capped last bucket; and a bucket
// closes only at such a parameter or because the next one would not fit.
TEST(BucketPlan, RandomLayoutsCloseAfterLargeParameters) {
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<size_t> sizes = randomSizes(rng, 40);
    const size_t count = sizes.size();
    ParameterStore store = storeOf(sizes);
    const size_t firstCap = 4 * (1 + rng() % 2000), cap = 4 * (1 + rng() % 6000);
    const size_t lastCap = rng() % 2 ? 0 : 4 * (1 + rng() % 3000);
    const size_t closeAfter = 1 + rng() % 3000;  // elements
    const auto buckets = planBuckets(store, firstCap, cap, lastCap, 4 * closeAfter);
    ASSERT_FALSE(buckets.empty());
    // The capped last bucket: the longest prefix p0..pk within lastCap (at
    // least p0), planned apart unless it would hold every parameter.
    size_t tail = 1, tailSize = sizes[0];
    while (lastCap > 0 && tail < count && tailSize + sizes[tail] <= lastCap / 4) tailSize += sizes[tail++];
    const bool separateLast = lastCap > 0 && tail < count;
    if (separateLast) {
      EXPECT_EQ(buckets.back().lastParam, tail - 1) << "trial " << trial;
    }
    EXPECT_EQ(buckets.back().firstParam, 0u);
    size_t expectNextLast = count - 1;
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto& k = buckets[b];
      ASSERT_EQ(k.lastParam, expectNextLast) << "trial " << trial << " bucket " << b;
      ASSERT_LE(k.firstParam, k.lastParam);
      size_t size = 0;
      for (size_t i = k.firstParam; i <= k.lastParam; ++i) size += sizes[i];
      EXPECT_EQ(k.size, size);
      EXPECT_EQ(k.offset, store.info(k.firstParam).offset);
      const bool isLast = b + 1 == buckets.size();
      const size_t capElements = isLast && separateLast ? lastCap / 4 : (b == 0 ? firstCap : cap) / 4;
      if (k.firstParam != k.lastParam) {
        EXPECT_LE(size, capElements) << "trial " << trial << " bucket " << b;
      }
      if (!(isLast && separateLast)) {
        for (size_t i = k.firstParam + 1; i <= k.lastParam; ++i) {
          EXPECT_LT(sizes[i], closeAfter) << "trial " << trial << " bucket " << b << ": p" << i
                                          << " is large but did not close its bucket";
        }
      }
      const bool nextIsLastBucket = b + 2 == buckets.size() && separateLast;
      if (k.firstParam > 0 && !nextIsLastBucket && sizes[k.firstParam] < closeAfter) {
        EXPECT_GT(size + sizes[k.firstParam - 1], capElements) << "trial " << trial << " bucket " << b
                                                                << ": closed although the next one fit";
      }
      expectNextLast = k.firstParam - 1;
    }
  }
}

TEST(BucketPlan, ZeroCapIsRejected) {
  ParameterStore store = storeOf({3});
  EXPECT_THROW(planBuckets(store, 0, 100), std::invalid_argument);
  EXPECT_THROW(planBuckets(store, 100, 0), std::invalid_argument);
}

}  // namespace
}  // namespace loom::ddp
