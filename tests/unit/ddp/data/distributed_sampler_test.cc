// DistributedSampler against torch's semantics, with every expectation
// computed independently here: the count formulas as torch writes them (in
// floating point), the unshuffled shard of rank r as (r + k*n) mod size.
#include "ddp/data/distributed_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

namespace loom::ddp {
namespace {

// torch: if drop_last and len % n != 0: ceil((len - n) / n) else ceil(len / n).
size_t torchNumSamples(size_t len, int n, bool dropLast) {
  double l = static_cast<double>(len);
  double r = static_cast<double>(n);
  double v = (dropLast && len % static_cast<size_t>(n) != 0) ? std::ceil((l - r) / r)
                                                             : std::ceil(l / r);
  return v <= 0 ? 0 : static_cast<size_t>(v);
}

std::vector<std::vector<size_t>> allShards(SamplerOptions o, uint64_t epoch) {
  std::vector<std::vector<size_t>> shards;
  for (int r = 0; r < o.numReplicas; ++r) {
    o.rank = r;
    DistributedSampler s(o);
    s.setEpoch(epoch);
    shards.push_back(s.indices());
  }
  return shards;
}

const size_t kSizes[] = {1, 2, 3, 7, 10, 13, 16, 100, 101, 60000};
const int kReplicas[] = {1, 2, 3, 4, 5, 7};

TEST(DistributedSampler, CountsMatchTorchFormulas) {
  for (size_t size : kSizes) {
    for (int n : kReplicas) {
      for (bool dropLast : {false, true}) {
        DistributedSampler s({size, n, 0, true, 0, dropLast});
        size_t expected = torchNumSamples(size, n, dropLast);
        EXPECT_EQ(s.numSamples(), expected) << "size " << size << " n " << n << " drop " << dropLast;
        EXPECT_EQ(s.totalSize(), expected * static_cast<size_t>(n));
        EXPECT_EQ(s.indices().size(), expected);
      }
    }
  }
}

TEST(DistributedSampler, AwkwardSizesByHand) {
  // 10 items on 3 ranks: padded to 12 (4 each) or cut to 9 (3 each).
  EXPECT_EQ(DistributedSampler({10, 3, 0, false, 0, false}).numSamples(), 4u);
  EXPECT_EQ(DistributedSampler({10, 3, 0, false, 0, true}).numSamples(), 3u);
  // Fewer items than ranks: padding wraps around, drop_last leaves nothing.
  EXPECT_EQ(DistributedSampler({2, 4, 3, false, 0, false}).indices(), std::vector<size_t>{1});
  EXPECT_EQ(DistributedSampler({2, 4, 0, false, 0, true}).numSamples(), 0u);
  EXPECT_EQ(DistributedSampler({1, 3, 2, false, 0, false}).indices(), std::vector<size_t>{0});
  // Unshuffled 10 on 3 ranks, padded: [0..9, 0, 1] split by stride.
  EXPECT_EQ(DistributedSampler({10, 3, 0, false, 0, false}).indices(),
            (std::vector<size_t>{0, 3, 6, 9}));
  EXPECT_EQ(DistributedSampler({10, 3, 1, false, 0, false}).indices(),
            (std::vector<size_t>{1, 4, 7, 0}));
  EXPECT_EQ(DistributedSampler({10, 3, 2, false, 0, false}).indices(),
            (std::vector<size_t>{2, 5, 8, 1}));
  EXPECT_EQ(DistributedSampler({10, 3, 2, false, 0, true}).indices(),
            (std::vector<size_t>{2, 5, 8}));
}

TEST(DistributedSampler, UnshuffledRankTakesStridedPositions) {
  for (size_t size : kSizes) {
    for (int n : kReplicas) {
      for (bool dropLast : {false, true}) {
        auto shards = allShards({size, n, 0, false, 0, dropLast}, 0);
        for (int r = 0; r < n; ++r) {
          for (size_t k = 0; k < shards[r].size(); ++k) {
            ASSERT_EQ(shards[r][k], (static_cast<size_t>(r) + k * n) % size)
                << "size " << size << " n " << n << " rank " << r << " k " << k;
          }
        }
      }
    }
  }
}

TEST(DistributedSampler, ShardsAreDisjointAndCoverTheDataset) {
  for (size_t size : kSizes) {
    for (int n : kReplicas) {
      for (uint64_t epoch : {0u, 3u}) {
        // Padded: every item appears, and only padding repeats one.
        auto shards = allShards({size, n, 0, true, 42, false}, epoch);
        std::vector<int> seen(size, 0);
        for (const auto& shard : shards) {
          for (size_t i : shard) {
            ASSERT_LT(i, size);
            ++seen[i];
          }
        }
        size_t total = torchNumSamples(size, n, false) * n;
        size_t repeats = 0;
        for (size_t item = 0; item < size; ++item) {
          ASSERT_GE(seen[item], 1) << "item " << item << " missing; size " << size << " n " << n;
          repeats += static_cast<size_t>(seen[item] - 1);
        }
        EXPECT_EQ(repeats, total - size) << "only padding may repeat an item";

        // drop_last: no item twice, and all but the cut tail present.
        auto cut = allShards({size, n, 0, true, 42, true}, epoch);
        std::set<size_t> distinct;
        size_t count = 0;
        for (const auto& shard : cut) {
          distinct.insert(shard.begin(), shard.end());
          count += shard.size();
        }
        EXPECT_EQ(distinct.size(), count) << "drop_last shards overlap";
        EXPECT_EQ(count, (size / n) * n);
      }
    }
  }
}

TEST(DistributedSampler, PaddingRepeatsTheStartOfTheShuffledList) {
  for (size_t size : {3u, 10u, 13u}) {
    DistributedSampler s({size, 7, 0, true, 9, false});
    s.setEpoch(2);
    std::vector<size_t> all = s.globalIndices();
    ASSERT_EQ(all.size(), s.totalSize());
    std::vector<size_t> head(all.begin(), all.begin() + static_cast<ptrdiff_t>(size));
    std::vector<size_t> sorted = head;
    std::sort(sorted.begin(), sorted.end());
    std::vector<size_t> iota(size);
    std::iota(iota.begin(), iota.end(), size_t{0});
    EXPECT_EQ(sorted, iota) << "the first `size` entries are a permutation";
    for (size_t i = size; i < all.size(); ++i) EXPECT_EQ(all[i], head[i % size]) << i;
  }
}

TEST(DistributedSampler, EpochReshufflesAndSameSeedGivesSameOrder) {
  SamplerOptions o{1000, 4, 1, true, 1234, false};
  DistributedSampler a(o);
  DistributedSampler b(o);
  a.setEpoch(0);
  b.setEpoch(0);
  std::vector<size_t> epoch0 = a.indices();
  EXPECT_EQ(epoch0, b.indices()) << "same seed and epoch: same order";
  a.setEpoch(1);
  std::vector<size_t> epoch1 = a.indices();
  EXPECT_NE(epoch0, epoch1) << "a new epoch reshuffles";
  a.setEpoch(0);
  EXPECT_EQ(a.indices(), epoch0) << "going back to an epoch restores its order";
  // Seeded by seed + epoch, as torch: (1234, 1) is (1235, 0).
  DistributedSampler c({1000, 4, 1, true, 1235, false});
  EXPECT_EQ(c.indices(), epoch1);
  DistributedSampler d({1000, 4, 1, true, 99, false});
  EXPECT_NE(d.indices(), epoch0) << "another seed, another order";
  // Not the identity either.
  DistributedSampler plain({1000, 4, 1, false, 0, false});
  EXPECT_NE(plain.indices(), epoch0);
}

TEST(DistributedSampler, ShuffleIsRoughlyUniform) {
  // Over 4000 epochs each of 5 items should lead the list about 800 times;
  // a biased shuffle (e.g. swapping with any position) fails this clearly.
  std::vector<int> first(5, 0);
  DistributedSampler s({5, 1, 0, true, 7, false});
  for (uint64_t e = 0; e < 4000; ++e) {
    s.setEpoch(e);
    ++first[s.indices()[0]];
  }
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(first[i], 800, 120) << "item " << i;
}

TEST(DistributedSampler, RejectsBadRankOrReplicas) {
  EXPECT_THROW(DistributedSampler({10, 0, 0, true, 0, false}), std::invalid_argument);
  EXPECT_THROW(DistributedSampler({10, 2, 2, true, 0, false}), std::invalid_argument);
  EXPECT_THROW(DistributedSampler({10, 2, -1, true, 0, false}), std::invalid_argument);
}

}  // namespace
}  // namespace loom::ddp
