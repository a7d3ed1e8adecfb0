// The two-part runs of algorithm.h's SplitRun (one-shot over links and over
// the bulletin, recursive doubling at two ranks), as a caller that must not
// wait for its peers uses them: post, poll peersPosted, finish. The result
// must be the full run's bits (the left fold in rank order); peersPosted must
// stay false until every peer has posted, and so must the bulletin's own
// answer where the post says it went to the bulletin (OpRunner polls that
// one); a post that would wait for a link still full sends nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/one_shot.h"
#include "algorithms/recursive_doubling.h"
#include "tests/unit/algorithms/fold_reference.h"
#include "tests/unit/algorithms/heap_bulletins.h"
#include "tests/unit/algorithms/loopback_links.h"

namespace loom::algo {
namespace {

using namespace testref;
using testing::HeapBulletins;

// The bulletins of the test running now (runAllReduce takes a plain function).
const HeapBulletins* gBulletins = nullptr;

// Post, poll until every peer has posted (the bulletin's answer when the post
// went there), finish; a refused post (or a call the split does not apply to)
// falls back to the full run, as OpRunner does.
Status splitOrFull(const SplitRun& split, CollFn full, const CollArgs& args, const AlgoContext& ctx) {
  if (!split.applies(args, ctx)) return full(args, ctx);
  SplitPosted posted = SplitPosted::kNothing;
  LOOM_TRY(split.post(args, ctx, &posted));
  if (posted == SplitPosted::kNothing) return full(args, ctx);
  auto peersPosted = [&] {
    return posted == SplitPosted::kOnBulletin ? ctx.bulletin->peersPosted() : split.peersPosted(args, ctx);
  };
  const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!peersPosted()) {
    if (std::chrono::steady_clock::now() > giveUp) return makeError(Code::kTimeout, "peers never posted");
    std::this_thread::yield();
  }
  return split.finish(args, ctx);
}

Status oneShotSplit(const CollArgs& args, const AlgoContext& ctx) {
  return splitOrFull(kOneShotSplit, oneShotAllReduce, args, ctx);
}

Status oneShotSplitWithBulletin(const CollArgs& args, const AlgoContext& ctx) {
  AlgoContext withBulletin = ctx;
  withBulletin.bulletin = gBulletins->of(ctx.rank);
  return splitOrFull(kOneShotSplit, oneShotAllReduce, args, withBulletin);
}

Status recursiveDoublingSplit(const CollArgs& args, const AlgoContext& ctx) {
  return splitOrFull(kRecursiveDoublingSplit, recursiveDoublingAllReduce, args, ctx);
}

constexpr size_t kChunkBytes = 8192;  // above the bulletin's largest message

// `beyondOneChunk`: the algorithm also runs messages of several chunks (in full).
template <class T>
void expectSplitEqualsFold(CollFn fn, int n, const char* name, bool beyondOneChunk) {
  // Counts around the bulletin's and the chunk's sizes.
  std::vector<size_t> counts = {1, 3, kOneShotBulletinMaxBytes / sizeof(T) + 1, kChunkBytes / sizeof(T)};
  if (beyondOneChunk) counts.push_back(kChunkBytes / sizeof(T) + 1);
  for (size_t count : counts) {
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kAvg}) {
      auto in = makeInputs<T>(n, count, [&](int r, size_t i) { return fromDouble<T>(mixedValue<T>(op, r, i)); });
      for (bool inPlace : {false, true}) {
        // Several rounds in a row: the links and bulletin rounds carry over.
        for (int round = 0; round < 3; ++round) {
          auto out = runAllReduce<T>(fn, n, kChunkBytes, in, op, inPlace);
          expectLeftFold(in, out, op,
                         std::string(name) + " " + dataTypeName(Elem<T>::kType) + " " + redOpName(op) + " count " +
                             std::to_string(count) + (inPlace ? " in place" : " out of place"));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

class SplitOneShot : public ::testing::TestWithParam<int> {};

TEST_P(SplitOneShot, OverLinksEqualsTheRankOrderFold) {
  expectSplitEqualsFold<float>(oneShotSplit, GetParam(), "one-shot split", true);
  expectSplitEqualsFold<int32_t>(oneShotSplit, GetParam(), "one-shot split", true);
}

TEST_P(SplitOneShot, OverTheBulletinEqualsTheRankOrderFold) {
  HeapBulletins bulletins(GetParam());
  gBulletins = &bulletins;
  expectSplitEqualsFold<float>(oneShotSplitWithBulletin, GetParam(), "one-shot split, bulletin", true);
  expectSplitEqualsFold<BF16>(oneShotSplitWithBulletin, GetParam(), "one-shot split, bulletin", true);
  gBulletins = nullptr;
}

INSTANTIATE_TEST_SUITE_P(Worlds, SplitOneShot, ::testing::Values(2, 3, 5));

TEST(SplitRecursiveDoubling, AtTwoRanksEqualsTheFold) {
  expectSplitEqualsFold<double>(recursiveDoublingSplit, 2, "rd split", false);
  expectSplitEqualsFold<F16>(recursiveDoublingSplit, 2, "rd split", false);
}

TEST(SplitRecursiveDoubling, AppliesOnlyToTwoRanksAndOneChunk) {
  AlgoContext ctx;
  ctx.chunkBytes = kChunkBytes;
  CollArgs args{CollType::kAllReduce, nullptr, nullptr, kChunkBytes / 4, DataType::kFloat32, RedOp::kSum, 0};
  ctx.nranks = 2;
  EXPECT_TRUE(kRecursiveDoublingSplit.applies(args, ctx));
  ctx.nranks = 3;  // a later step would wait for a partner that may not have started
  EXPECT_FALSE(kRecursiveDoublingSplit.applies(args, ctx));
  ctx.nranks = 2;
  args.count += 1;
  EXPECT_FALSE(kRecursiveDoublingSplit.applies(args, ctx));
  args.count = 0;
  EXPECT_FALSE(kRecursiveDoublingSplit.applies(args, ctx));
}

// One thread drives every rank, so each step happens in a known order.
struct Steps {
  testing::LoopbackFabric fabric;
  std::vector<AlgoContext> ctxs;
  Steps(int n, transport::Bulletin* (*bulletinOf)(int) = nullptr) : fabric(n, kChunkBytes, 2) {
    for (int r = 0; r < n; ++r) {
      ctxs.push_back(contextOn(fabric, r, n));
      ctxs.back().bulletin = bulletinOf ? bulletinOf(r) : nullptr;
    }
  }
};

transport::Bulletin* bulletinOfTest(int rank) { return gBulletins->of(rank); }

// Every rank posts in turn, where `where` says; until the last one has, no
// rank sees its peers posted. Then every rank finishes with the sum.
void expectPostedOnlyOnceAllPosted(const SplitRun& split, Steps& steps, size_t count, SplitPosted where) {
  const int n = static_cast<int>(steps.ctxs.size());
  std::vector<std::vector<int32_t>> in(n), out(n, std::vector<int32_t>(count, -1));
  for (int r = 0; r < n; ++r) in[r].assign(count, r + 1);
  auto args = [&](int r) {
    return CollArgs{CollType::kAllReduce, in[r].data(), out[r].data(), count, DataType::kInt32, RedOp::kSum, 0};
  };
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(split.applies(args(r), steps.ctxs[r])) << "rank " << r;
    SplitPosted posted = SplitPosted::kNothing;
    ASSERT_TRUE(split.post(args(r), steps.ctxs[r], &posted).isOk());
    ASSERT_EQ(static_cast<int>(posted), static_cast<int>(where)) << "rank " << r;
    for (int q = 0; q <= r; ++q) {
      EXPECT_EQ(split.peersPosted(args(q), steps.ctxs[q]), r == n - 1) << "rank " << q << " after rank " << r << " posted";
      if (where == SplitPosted::kOnBulletin)
        EXPECT_EQ(steps.ctxs[q].bulletin->peersPosted(), r == n - 1)
            << "the bulletin's answer, rank " << q << " after rank " << r << " posted";
    }
  }
  for (int r = 0; r < n; ++r) ASSERT_TRUE(split.finish(args(r), steps.ctxs[r]).isOk()) << "rank " << r;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r][i], n * (n + 1) / 2) << "rank " << r << " element " << i;
}

TEST(SplitRun, PeersPostedOnlyOnceEveryPeerPostedOverLinks) {
  Steps oneShot(3);
  expectPostedOnlyOnceAllPosted(kOneShotSplit, oneShot, 300, SplitPosted::kOnLinks);  // 1200 B: not the bulletin
  Steps rd(2);
  expectPostedOnlyOnceAllPosted(kRecursiveDoublingSplit, rd, 300, SplitPosted::kOnLinks);
}

TEST(SplitRun, PeersPostedOnlyOnceEveryPeerPostedOverTheBulletin) {
  HeapBulletins bulletins(4);
  gBulletins = &bulletins;
  Steps steps(4, bulletinOfTest);
  for (int round = 0; round < 5; ++round) expectPostedOnlyOnceAllPosted(kOneShotSplit, steps, 5, SplitPosted::kOnBulletin);
  gBulletins = nullptr;
}

// A link the last collective left full (two unread chunks in its two slots):
// the post must not wait for it, and must send nothing to any peer.
TEST(SplitRun, AFullLinkRefusesThePostAndSendsNothing) {
  Steps steps(3);
  std::byte* slot = nullptr;
  auto& toTwo = steps.ctxs[0].links->sendTo(2);
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(toTwo.tryAcquire(&slot));
    toTwo.commit(4);
  }
  std::vector<int32_t> in(10, 1), out(10);
  CollArgs args{CollType::kAllReduce, in.data(), out.data(), in.size(), DataType::kInt32, RedOp::kSum, 0};
  SplitPosted posted = SplitPosted::kOnLinks;
  ASSERT_TRUE(kOneShotSplit.post(args, steps.ctxs[0], &posted).isOk());
  EXPECT_EQ(static_cast<int>(posted), static_cast<int>(SplitPosted::kNothing));
  EXPECT_TRUE(steps.fabric.fifo(0, 1).committed.empty()) << "the post sent to rank 1 anyway";
  EXPECT_EQ(steps.fabric.fifo(0, 2).committed.size(), 2u);

  Steps pair(2);
  auto& toOne = pair.ctxs[0].links->sendTo(1);
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(toOne.tryAcquire(&slot));
    toOne.commit(4);
  }
  posted = SplitPosted::kOnLinks;
  ASSERT_TRUE(kRecursiveDoublingSplit.post(args, pair.ctxs[0], &posted).isOk());
  EXPECT_EQ(static_cast<int>(posted), static_cast<int>(SplitPosted::kNothing));
  EXPECT_EQ(pair.fabric.fifo(0, 1).committed.size(), 2u);
}

}  // namespace
}  // namespace loom::algo
