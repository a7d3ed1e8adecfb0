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

constexpr size_t kMiB = 1u << 20;
constexpr size_t kFloatsPerMiB = kMiB / sizeof(float);

TEST(BucketPlan, DefaultsArePyTorchs) {
  DdpOptions options;
  EXPECT_EQ(options.firstBucketCapBytes, 1 * kMiB);
  EXPECT_EQ(options.bucketCapBytes, 25 * kMiB);
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
    const size_t count = 1 + rng() % 40;
    std::vector<size_t> sizes(count);
    for (auto& s : sizes) s = 1 + rng() % (rng() % 4 == 0 ? 5000 : 300);
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

TEST(BucketPlan, ZeroCapIsRejected) {
  ParameterStore store = storeOf({3});
  EXPECT_THROW(planBuckets(store, 0, 100), std::invalid_argument);
  EXPECT_THROW(planBuckets(store, 100, 0), std::invalid_argument);
}

}  // namespace
}  // namespace loom::ddp
