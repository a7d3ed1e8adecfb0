// The registration cache over an emulated protection domain: hits, misses,
// LRU eviction, overlapping and upgraded ranges, invalidation, and that a
// region is deregistered only once nobody holds it.
#include <gtest/gtest.h>

#include <cstdlib>

#include "transports/verbs/emulated_verbs.h"
#include "transports/verbs/registration_cache.h"

namespace loom::transport::verbs {
namespace {

constexpr size_t kPage = 4096;

class RegistrationCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric_ = emulated::Fabric::create();
    device_ = std::move(fabric_->provider(0)->openDevice()).value();
    pd_ = std::move(device_->allocPd()).value();
    arena_ = static_cast<char*>(std::aligned_alloc(kPage, 16 * kPage));
  }
  void TearDown() override { std::free(arena_); }
  char* page(size_t i) { return arena_ + i * kPage; }
  int live() const { return fabric_->liveMemoryRegions(); }

  std::shared_ptr<emulated::Fabric> fabric_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<ProtectionDomain> pd_;
  char* arena_ = nullptr;
};

TEST_F(RegistrationCacheTest, RepeatedAndContainedRangesHit) {
  RegistrationCache cache(*pd_, 8);
  auto a = cache.get(page(1) + 100, 2 * kPage, kAccessLocalWrite);
  ASSERT_TRUE(a.isOk());
  const MemoryRegion& mr = *a.value();
  EXPECT_EQ(mr.addr, page(1)) << "widened to whole pages";
  EXPECT_EQ(mr.length, 3 * kPage);
  auto again = cache.get(page(1) + 100, 2 * kPage, kAccessLocalWrite);
  auto inside = cache.get(page(2), 10, kAccessLocalWrite);
  ASSERT_TRUE(again.isOk() && inside.isOk());
  EXPECT_EQ(again.value().get(), a.value().get());
  EXPECT_EQ(inside.value().get(), a.value().get());
  auto s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(fabric_->registrations(), 1u);
}

TEST_F(RegistrationCacheTest, OverlapRegistersTheUnionOnce) {
  RegistrationCache cache(*pd_, 8);
  auto first = cache.get(page(0), 3 * kPage, kAccessLocalWrite);
  auto second = cache.get(page(2), 3 * kPage, kAccessLocalWrite);
  ASSERT_TRUE(first.isOk() && second.isOk());
  EXPECT_EQ(second.value()->addr, page(0));
  EXPECT_EQ(second.value()->length, 5 * kPage);
  EXPECT_EQ(cache.size(), 1u) << "no two entries for one page";
  EXPECT_EQ(cache.stats().merged, 1u);
  auto middle = cache.get(page(1), 3 * kPage, kAccessLocalWrite);
  ASSERT_TRUE(middle.isOk());
  EXPECT_EQ(middle.value().get(), second.value().get());
  // Adjacent ranges do not overlap.
  auto next = cache.get(page(5), kPage, kAccessLocalWrite);
  ASSERT_TRUE(next.isOk());
  EXPECT_EQ(next.value()->addr, page(5));
  EXPECT_EQ(cache.size(), 2u);
  // The replaced region lives while held, then is deregistered.
  EXPECT_EQ(live(), 3);
  first = Status(Code::kInternalError, "dropped");
  EXPECT_EQ(live(), 2);
}

TEST_F(RegistrationCacheTest, MoreRightsMeanANewRegistrationWithBoth) {
  RegistrationCache cache(*pd_, 8);
  auto local = cache.get(page(0), kPage, kAccessLocalWrite);
  auto remote = cache.get(page(0), kPage, kAccessLocalWrite | kAccessRemoteWrite);
  ASSERT_TRUE(local.isOk() && remote.isOk());
  EXPECT_NE(local.value().get(), remote.value().get());
  EXPECT_EQ(remote.value()->access, kAccessLocalWrite | kAccessRemoteWrite);
  auto again = cache.get(page(0), kPage, kAccessLocalWrite);
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(again.value().get(), remote.value().get()) << "a superset of rights serves a lesser request";
}

TEST_F(RegistrationCacheTest, LeastRecentlyUsedIsEvictedFirst) {
  RegistrationCache cache(*pd_, 2);
  ASSERT_TRUE(cache.get(page(0), kPage, kAccessLocalWrite).isOk());  // A
  ASSERT_TRUE(cache.get(page(2), kPage, kAccessLocalWrite).isOk());  // B
  ASSERT_TRUE(cache.get(page(0), kPage, kAccessLocalWrite).isOk());  // A again: B is now least recent
  ASSERT_TRUE(cache.get(page(4), kPage, kAccessLocalWrite).isOk());  // C evicts B
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(live(), 2) << "the evicted, unheld region is deregistered";
  uint64_t misses = cache.stats().misses;
  ASSERT_TRUE(cache.get(page(0), kPage, kAccessLocalWrite).isOk());
  EXPECT_EQ(cache.stats().misses, misses) << "A survived";
  ASSERT_TRUE(cache.get(page(2), kPage, kAccessLocalWrite).isOk());
  EXPECT_EQ(cache.stats().misses, misses + 1) << "B was evicted";
}

TEST_F(RegistrationCacheTest, EvictedRegionInUseStaysRegisteredUntilReleased) {
  RegistrationCache cache(*pd_, 1);
  auto held = cache.get(page(0), kPage, kAccessLocalWrite);
  ASSERT_TRUE(held.isOk());
  ASSERT_TRUE(cache.get(page(3), kPage, kAccessLocalWrite).isOk());
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(live(), 2);
  held = Status(Code::kInternalError, "dropped");
  EXPECT_EQ(live(), 1);
}

TEST_F(RegistrationCacheTest, InvalidateDropsOverlappingEntries) {
  RegistrationCache cache(*pd_, 8);
  ASSERT_TRUE(cache.get(page(0), 2 * kPage, kAccessLocalWrite).isOk());
  ASSERT_TRUE(cache.get(page(4), 2 * kPage, kAccessLocalWrite).isOk());
  ASSERT_TRUE(cache.get(page(8), kPage, kAccessLocalWrite).isOk());
  cache.invalidate(page(1), 4 * kPage);  // touches the first two
  EXPECT_EQ(cache.stats().invalidations, 2u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(live(), 1);
  uint64_t misses = cache.stats().misses;
  ASSERT_TRUE(cache.get(page(0), kPage, kAccessLocalWrite).isOk());
  EXPECT_EQ(cache.stats().misses, misses + 1);
}

TEST_F(RegistrationCacheTest, AnotherIdentityReplacesOverlappedEntriesWithoutMergingThem) {
  RegistrationCache cache(*pd_, 8);
  auto old = cache.get(page(0), 2 * kPage, kAccessLocalWrite, 7);
  ASSERT_TRUE(old.isOk());
  auto same = cache.get(page(1), 10, kAccessLocalWrite, 7);
  ASSERT_TRUE(same.isOk());
  EXPECT_EQ(same.value().get(), old.value().get()) << "the same identity hits";
  same = Status(Code::kInternalError, "dropped");
  // Memory at page 1 "freed and reallocated": a new registration of only
  // the new range, and the old entry leaves the cache (kept while held).
  auto fresh = cache.get(page(1), 2 * kPage, kAccessLocalWrite, 8);
  ASSERT_TRUE(fresh.isOk());
  EXPECT_NE(fresh.value().get(), old.value().get());
  EXPECT_EQ(fresh.value()->addr, page(1)) << "not merged with the stale range";
  EXPECT_EQ(fresh.value()->length, 2 * kPage);
  EXPECT_EQ(cache.stats().stale, 1u);
  EXPECT_EQ(cache.stats().merged, 0u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(live(), 2);
  old = Status(Code::kInternalError, "dropped");
  EXPECT_EQ(live(), 1) << "the stale registration goes with its last handle";
  // An untagged request is another identity too.
  auto untagged = cache.get(page(2), kPage, kAccessLocalWrite);
  ASSERT_TRUE(untagged.isOk());
  EXPECT_EQ(cache.stats().stale, 2u);
  EXPECT_EQ(cache.stats().misses, 3u);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST_F(RegistrationCacheTest, DestructionDeregistersEverythingNotHeld) {
  RegistrationCache::Handle keep;
  {
    RegistrationCache cache(*pd_, 8);
    keep = std::move(cache.get(page(0), kPage, kAccessLocalWrite)).value();
    ASSERT_TRUE(cache.get(page(2), kPage, kAccessLocalWrite).isOk());
    EXPECT_EQ(live(), 2);
  }
  EXPECT_EQ(live(), 1);
  keep.reset();
  EXPECT_EQ(live(), 0);
}

TEST_F(RegistrationCacheTest, EmptyOrNullRangesAreRejected) {
  RegistrationCache cache(*pd_, 8);
  EXPECT_EQ(cache.get(nullptr, 10, kAccessLocalWrite).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(cache.get(page(0), 0, kAccessLocalWrite).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace loom::transport::verbs
