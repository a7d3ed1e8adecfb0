// Loom's ring all-reduce (and all-gather), unchanged, over the verbs
// transport on the emulated fabric: 2-4 ranks as threads, each on its own
// emulated host, several calls in a row over the same connections, checked
// against sums computed here with plain loops.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "algorithms/ring.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/support/rank_threads.h"
#include "tests/unit/transports/transport_world.h"
#include "transports/verbs/emulated_verbs.h"

namespace loom::testing::verbs {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;
using transports::verbsConfig;

// Links of one rank: every peer through its verbs transport.
class VerbsLinks final : public algo::Links {
 public:
  explicit VerbsLinks(transport::Transport& t) : t_(t) {}
  transport::SendConnection& sendTo(int peer) override { return t_.sendTo(peer, transport::Protocol::kSimple); }
  transport::RecvConnection& recvFrom(int peer) override { return t_.recvFrom(peer, transport::Protocol::kSimple); }

 private:
  transport::Transport& t_;
};

int64_t valueOf(int rank, size_t i, int call) {
  return static_cast<int64_t>(rank + 1) * 1000003 - static_cast<int64_t>(i) * 31 + call * 7;
}

// Runs `fn(ctx)` on every rank at once and returns the per-rank statuses.
std::vector<Status> runOnAll(World& world, size_t chunkBytes,
                             const std::function<Status(const algo::AlgoContext&)>& fn) {
  const int n = static_cast<int>(world.transports.size());
  std::vector<Status> results(static_cast<size_t>(n));
  runRankThreads(n, [&](int rank) {
    VerbsLinks links(*world.transports[static_cast<size_t>(rank)]);
    algo::AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = n;
    ctx.links = &links;
    ctx.wait = shm::waitFor(20);
    ctx.chunkBytes = chunkBytes;
    ctx.singleHost = false;
    results[static_cast<size_t>(rank)] = fn(ctx);
  });
  return results;
}

TEST(VerbsAlgorithms, RingAllReduceMatchesPlainSums) {
  const size_t chunk = 4096;
  for (int n : {2, 3, 4}) {
    auto world = connectWorld(Backend::kVerbs, n, shm::uniqueJobTag(), verbsConfig(chunk, 4));
    ASSERT_EQ(world.firstError(), "");
    int call = 0;
    for (size_t count : {size_t{1}, size_t{1000}, size_t{4099}, size_t{30000}}) {
      for (bool inPlace : {false, true}) {
        ++call;
        std::vector<std::vector<int64_t>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) in[static_cast<size_t>(r)].push_back(valueOf(r, i, call));
          out[static_cast<size_t>(r)].assign(count, -1);
        }
        auto results = runOnAll(world, chunk, [&](const algo::AlgoContext& ctx) {
          auto& mine = in[static_cast<size_t>(ctx.rank)];
          algo::CollArgs a{algo::CollType::kAllReduce, mine.data(),
                           inPlace ? mine.data() : out[static_cast<size_t>(ctx.rank)].data(), count,
                           DataType::kInt64, RedOp::kSum, 0};
          return algo::ringAllReduce(a, ctx);
        });
        for (int r = 0; r < n; ++r)
          ASSERT_TRUE(results[static_cast<size_t>(r)].isOk())
              << n << " ranks, rank " << r << ": " << results[static_cast<size_t>(r)].message();
        for (int r = 0; r < n; ++r) {
          const auto& got = inPlace ? in[static_cast<size_t>(r)] : out[static_cast<size_t>(r)];
          for (size_t i = 0; i < count; ++i) {
            int64_t want = 0;
            for (int q = 0; q < n; ++q) want += valueOf(q, i, call);
            ASSERT_EQ(got[i], want) << n << " ranks, rank " << r << ", count " << count << ", index " << i;
          }
        }
      }
    }
    EXPECT_EQ(world.fabric->rnrErrors(), 0u);
  }
}

TEST(VerbsAlgorithms, RingAllGatherPlacesEveryRanksBlock) {
  const size_t chunk = 4096;
  const int n = 3;
  auto world = connectWorld(Backend::kVerbs, n, shm::uniqueJobTag(), verbsConfig(chunk, 2));
  ASSERT_EQ(world.firstError(), "");
  const size_t count = 2500;  // floats per rank: several chunks, the last partial
  std::vector<std::vector<float>> in(n), out(n, std::vector<float>(count * n, -1.0f));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) in[static_cast<size_t>(r)].push_back(static_cast<float>(r * 100000 + i));
  auto results = runOnAll(world, chunk, [&](const algo::AlgoContext& ctx) {
    algo::CollArgs a{algo::CollType::kAllGather, in[static_cast<size_t>(ctx.rank)].data(),
                     out[static_cast<size_t>(ctx.rank)].data(), count, DataType::kFloat32, RedOp::kSum, 0};
    return algo::ringAllGather(a, ctx);
  });
  for (int r = 0; r < n; ++r) ASSERT_TRUE(results[static_cast<size_t>(r)].isOk()) << results[static_cast<size_t>(r)].message();
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(q) * count + i], static_cast<float>(q * 100000 + i))
            << "rank " << r << " block " << q << " index " << i;
}

TEST(VerbsAlgorithms, AllReduceOverADeadPeerFailsEveryWaitingRankInTime) {
  auto world = connectWorld(Backend::kVerbs, 3, shm::uniqueJobTag(), verbsConfig(4096, 2));
  ASSERT_EQ(world.firstError(), "");
  world.fabric->killDevice(2);
  const size_t count = 20000;
  std::vector<std::vector<int64_t>> data(3, std::vector<int64_t>(count, 1));
  auto start = std::chrono::steady_clock::now();
  // Rank 2 "died": only ranks 0 and 1 run.
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    VerbsLinks links(*world.transports[static_cast<size_t>(rank)]);
    algo::AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = 3;
    ctx.links = &links;
    ctx.wait = shm::waitFor(15);
    ctx.wait.health = world.transports[static_cast<size_t>(rank)]->health();  // as the communicator does
    ctx.chunkBytes = 4096;
    algo::CollArgs a{algo::CollType::kAllReduce, data[static_cast<size_t>(rank)].data(),
                     data[static_cast<size_t>(rank)].data(), count, DataType::kInt64, RedOp::kSum, 0};
    results[static_cast<size_t>(rank)] = algo::ringAllReduce(a, ctx);
  });
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 5.0) << "not the 15 s deadline";
  // Rank 1 sends to rank 2 and rank 0 receives from it: both see it die.
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(results[static_cast<size_t>(r)].isOk()) << "rank " << r;
    EXPECT_NE(results[static_cast<size_t>(r)].message().find("rank 2 (host host2)"), std::string::npos)
        << "rank " << r << ": " << results[static_cast<size_t>(r)].message();
  }
}

}  // namespace
}  // namespace loom::testing::verbs
