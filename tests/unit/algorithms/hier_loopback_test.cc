// The host-aware ring collectives and the two-level all-reduce on the
// in-memory loopback fabric (threads), for emulated host layouts: results
// against a reference computed here in int64, and the links actually used
// (a host-grouped ring uses exactly its ring's edges; hier only intra-host
// links and rails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/hierarchical.h"
#include "algorithms/patterns/host_layout.h"
#include "algorithms/ring.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo {
namespace {

using Edges = std::set<std::pair<int, int>>;

// The parent's links, noting every (from, to) that carries a chunk.
class RecordingLinks final : public Links {
 public:
  RecordingLinks(Links& inner, int rank, Edges* edges, std::mutex* mu)
      : inner_(inner), rank_(rank), edges_(edges), mu_(mu) {}
  transport::SendConnection& sendTo(int peer) override {
    std::lock_guard<std::mutex> lock(*mu_);
    edges_->insert({rank_, peer});
    return inner_.sendTo(peer);
  }
  transport::RecvConnection& recvFrom(int peer) override { return inner_.recvFrom(peer); }

 private:
  Links& inner_;
  int rank_;
  Edges* edges_;
  std::mutex* mu_;
};

std::vector<uint64_t> keysOf(const std::string& hosts) {
  std::vector<uint64_t> keys;
  for (char c : hosts) keys.push_back(static_cast<uint64_t>(c));
  return keys;
}

template <class T>
constexpr DataType typeOf() {
  if constexpr (std::is_same_v<T, int32_t>) return DataType::kInt32;
  if constexpr (std::is_same_v<T, uint8_t>) return DataType::kUint8;
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  return DataType::kFloat64;
}

// Small values whose sums and products are exact in every type used here.
template <class T>
T inputOf(RedOp op, int rank, size_t i) {
  const auto h = static_cast<int64_t>((static_cast<uint64_t>(rank) * 7919 + i * 104729) % 9);
  if (op == RedOp::kProd) return static_cast<T>(1 + h % 2);                    // 1 or 2
  return static_cast<T>(std::is_signed_v<T> || std::is_floating_point_v<T> ? h - 4 : h);  // [-4,4] / [0,8]
}

template <class T>
T referenceOf(RedOp op, int n, size_t i) {
  int64_t acc = static_cast<int64_t>(inputOf<T>(op, 0, i));
  for (int r = 1; r < n; ++r) {
    const auto x = static_cast<int64_t>(inputOf<T>(op, r, i));
    switch (op) {
      case RedOp::kSum: case RedOp::kAvg: acc += x; break;
      case RedOp::kProd: acc *= x; break;
      case RedOp::kMax: acc = std::max(acc, x); break;
      case RedOp::kMin: acc = std::min(acc, x); break;
    }
  }
  if (op != RedOp::kAvg) return static_cast<T>(acc);
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(static_cast<T>(acc) / static_cast<T>(n));
  return static_cast<T>(acc / n);  // truncates toward zero, as the kernels promise
}

struct LayoutRun {
  std::vector<Status> status;
  Edges edges;
};

// Runs fn(rank, ctx) on every rank of a fresh fabric, each with its layout.
LayoutRun runOnLayout(const std::string& hosts, size_t chunkBytes, const std::function<Status(const AlgoContext&)>& fn) {
  const int n = static_cast<int>(hosts.size());
  testing::LoopbackFabric fabric(n, chunkBytes, 2);
  LayoutRun run;
  run.status.resize(static_cast<size_t>(n));
  std::mutex mu;
  testing::runRankThreads(n, [&](int rank) {
    const HostLayout layout = HostLayout::fromHostKeys(keysOf(hosts), rank);
    RecordingLinks links(fabric.linksOf(rank), rank, &run.edges, &mu);
    AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = n;
    ctx.links = &links;
    ctx.wait.deadline = Deadline::after(30);
    ctx.chunkBytes = chunkBytes;
    ctx.singleHost = layout.nHosts() == 1;
    ctx.hosts = &layout;
    run.status[static_cast<size_t>(rank)] = fn(ctx);
  });
  return run;
}

void expectAllOk(const LayoutRun& run) {
  for (size_t r = 0; r < run.status.size(); ++r) EXPECT_TRUE(run.status[r].isOk()) << "rank " << r << ": " << run.status[r].message();
}

template <class T>
void expectEqual(T got, T want, const std::string& where) {
  if constexpr (std::is_floating_point_v<T>) EXPECT_NEAR(got, want, std::fabs(want) * 1e-6) << where;
  else EXPECT_EQ(static_cast<int64_t>(got), static_cast<int64_t>(want)) << where;
}

const RedOp kOps[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
const std::vector<size_t> kCounts = {0, 1, 2, 5, 7, 64, 1003};
constexpr size_t kChunkBytes = 64;  // many chunks per call, 2 slots: pipelines wrap

template <class T>
void checkAllReduce(CollFn fn, const std::string& hosts) {
  const int n = static_cast<int>(hosts.size());
  for (RedOp op : kOps)
    for (size_t count : kCounts)
      for (bool inPlace : {false, true}) {
        const std::string what = hosts + " " + redOpName(op) + " count " + std::to_string(count) +
                                 (inPlace ? " in place" : " out of place");
        std::vector<std::vector<T>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) in[static_cast<size_t>(r)].push_back(inputOf<T>(op, r, i));
          out[static_cast<size_t>(r)].assign(count, static_cast<T>(99));
        }
        LayoutRun run = runOnLayout(hosts, kChunkBytes, [&](const AlgoContext& ctx) {
          auto& mine = in[static_cast<size_t>(ctx.rank)];
          void* recv = inPlace ? static_cast<void*>(mine.data()) : out[static_cast<size_t>(ctx.rank)].data();
          return fn({CollType::kAllReduce, mine.data(), recv, count, typeOf<T>(), op, 0}, ctx);
        });
        expectAllOk(run);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            const T got = inPlace ? in[static_cast<size_t>(r)][i] : out[static_cast<size_t>(r)][i];
            expectEqual(got, referenceOf<T>(op, n, i), what + " rank " + std::to_string(r) + " [" + std::to_string(i) + "]");
            if (::testing::Test::HasFailure()) return;
          }
      }
}

// The edges a host-grouped ring of this layout uses.
Edges ringEdges(const std::string& hosts) {
  const HostLayout l = HostLayout::fromHostKeys(keysOf(hosts), 0);
  Edges e;
  for (int p = 0; p < l.nranks; ++p)
    e.insert({l.ringOrder[static_cast<size_t>(p)], l.ringOrder[static_cast<size_t>((p + 1) % l.nranks)]});
  return e;
}

const char* const kLayouts[] = {"AABB", "ABAB", "AAABBB", "ABCABC", "AABBCC", "ABBA", "AB"};

TEST(HierarchicalAllReduce, MatchesTheReferenceOnEveryLayout) {
  for (const char* hosts : kLayouts) {
    checkAllReduce<int32_t>(hierarchicalAllReduce, hosts);
    checkAllReduce<float>(hierarchicalAllReduce, hosts);
    if (HasFailure()) return;
  }
  checkAllReduce<uint8_t>(hierarchicalAllReduce, "ABAB");
  checkAllReduce<double>(hierarchicalAllReduce, "AAABBB");
}

TEST(HierarchicalAllReduce, UsesOnlyIntraHostLinksAndRails) {
  for (const char* hosts : kLayouts) {
    const int n = static_cast<int>(std::string(hosts).size());
    std::vector<std::vector<int32_t>> data(static_cast<size_t>(n), std::vector<int32_t>(1003, 1));
    LayoutRun run = runOnLayout(hosts, kChunkBytes, [&](const AlgoContext& ctx) {
      auto& mine = data[static_cast<size_t>(ctx.rank)];
      return hierarchicalAllReduce({CollType::kAllReduce, mine.data(), mine.data(), mine.size(), DataType::kInt32,
                                    RedOp::kSum, 0},
                                   ctx);
    });
    expectAllOk(run);
    const HostLayout l = HostLayout::fromHostKeys(keysOf(hosts), 0);
    int crossing = 0;
    for (const auto& [from, to] : run.edges) {
      const bool sameHost = l.hostOf[static_cast<size_t>(from)] == l.hostOf[static_cast<size_t>(to)];
      const bool sameRail = l.localRankOf[static_cast<size_t>(from)] == l.localRankOf[static_cast<size_t>(to)];
      EXPECT_TRUE(sameHost || sameRail) << hosts << ": hier sent from rank " << from << " to rank " << to;
      crossing += sameHost ? 0 : 1;
    }
    // Every rail is a ring over the hosts: H edges per rail if H > 2, else 2.
    const int hostsCount = l.nHosts(), perHost = l.maxRanksPerHost();
    EXPECT_EQ(crossing, perHost * (hostsCount > 2 ? hostsCount : 2)) << hosts;
    for (int r = 0; r < n; ++r) EXPECT_EQ(data[static_cast<size_t>(r)][0], n) << hosts;
  }
}

TEST(HierarchicalAllReduce, AppliesOnlyToEqualHostsOfTwoOrMore) {
  auto applies = [](const std::string& hosts) {
    const HostLayout l = HostLayout::fromHostKeys(keysOf(hosts), 0);
    AlgoContext ctx;
    ctx.nranks = static_cast<int>(hosts.size());
    ctx.hosts = &l;
    return hierarchicalApplies({}, ctx);
  };
  EXPECT_TRUE(applies("AABB"));
  EXPECT_TRUE(applies("ABAB"));
  EXPECT_TRUE(applies("AB"));
  EXPECT_FALSE(applies("AAAA"));  // one host
  EXPECT_FALSE(applies("AAB"));   // uneven hosts
  AlgoContext none;
  none.nranks = 4;
  EXPECT_FALSE(hierarchicalApplies({}, none));  // no layout known
}

TEST(HostGroupedRing, AllReduceMatchesAndCrossesHostsOncePerHost) {
  for (const char* hosts : {"ABAB", "ABCABC", "ABA", "AABB", "AAAA"}) {
    checkAllReduce<int32_t>(ringAllReduce, hosts);
    checkAllReduce<float>(ringAllReduce, hosts);
    const int n = static_cast<int>(std::string(hosts).size());
    std::vector<std::vector<int32_t>> data(static_cast<size_t>(n), std::vector<int32_t>(100, 1));
    LayoutRun run = runOnLayout(hosts, kChunkBytes, [&](const AlgoContext& ctx) {
      auto& mine = data[static_cast<size_t>(ctx.rank)];
      return ringAllReduce({CollType::kAllReduce, mine.data(), mine.data(), 100, DataType::kInt32, RedOp::kSum, 0},
                           ctx);
    });
    expectAllOk(run);
    EXPECT_EQ(run.edges, ringEdges(hosts)) << hosts;
  }
}

// Reduce-scatter and all-gather keep their by-rank output layout whatever
// the ring order: rank r gets block r / every block r holds rank r's input.
template <class T>
void checkReduceScatterAndAllGather(const std::string& hosts) {
  const int n = static_cast<int>(hosts.size());
  for (RedOp op : kOps)
    for (size_t count : kCounts)
      for (bool inPlace : {false, true}) {
        const std::string what = hosts + " " + redOpName(op) + " count " + std::to_string(count) +
                                 (inPlace ? " in place" : " out of place");
        // Reduce-scatter: element b*count+i of every rank's input.
        std::vector<std::vector<T>> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count * static_cast<size_t>(n); ++i) in[static_cast<size_t>(r)].push_back(inputOf<T>(op, r, i));
          out[static_cast<size_t>(r)].assign(count, static_cast<T>(99));
        }
        LayoutRun rs = runOnLayout(hosts, kChunkBytes, [&](const AlgoContext& ctx) {
          auto& mine = in[static_cast<size_t>(ctx.rank)];
          void* recv = inPlace ? static_cast<void*>(mine.data() + static_cast<size_t>(ctx.rank) * count)
                               : out[static_cast<size_t>(ctx.rank)].data();
          return ringReduceScatter({CollType::kReduceScatter, mine.data(), recv, count, typeOf<T>(), op, 0}, ctx);
        });
        expectAllOk(rs);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            const size_t at = static_cast<size_t>(r) * count + i;
            const T got = inPlace ? in[static_cast<size_t>(r)][at] : out[static_cast<size_t>(r)][i];
            expectEqual(got, referenceOf<T>(op, n, at), "reduce-scatter " + what + " rank " + std::to_string(r));
            if (::testing::Test::HasFailure()) return;
          }
        if (op != RedOp::kSum) continue;  // all-gather has no op
        // All-gather: rank r contributes value(r, i); everyone gets all blocks in rank order.
        std::vector<std::vector<T>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) send[static_cast<size_t>(r)].push_back(inputOf<T>(op, r, i));
          recv[static_cast<size_t>(r)].assign(count * static_cast<size_t>(n), static_cast<T>(99));
          if (inPlace)
            std::copy(send[static_cast<size_t>(r)].begin(), send[static_cast<size_t>(r)].end(),
                      recv[static_cast<size_t>(r)].begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * count));
        }
        LayoutRun ag = runOnLayout(hosts, kChunkBytes, [&](const AlgoContext& ctx) {
          auto& all = recv[static_cast<size_t>(ctx.rank)];
          const T* src = inPlace ? all.data() + static_cast<size_t>(ctx.rank) * count : send[static_cast<size_t>(ctx.rank)].data();
          return ringAllGather({CollType::kAllGather, src, all.data(), count, typeOf<T>(), op, 0}, ctx);
        });
        expectAllOk(ag);
        for (int r = 0; r < n; ++r)
          for (int b = 0; b < n; ++b)
            for (size_t i = 0; i < count; ++i)
              expectEqual(recv[static_cast<size_t>(r)][static_cast<size_t>(b) * count + i], inputOf<T>(op, b, i),
                          "all-gather " + what + " rank " + std::to_string(r) + " block " + std::to_string(b));
        if (::testing::Test::HasFailure()) return;
      }
}

TEST(HostGroupedRing, ReduceScatterAndAllGatherKeepTheirRankLayout) {
  for (const char* hosts : {"ABAB", "ABCABC", "ABA", "BAAB"}) {
    checkReduceScatterAndAllGather<int32_t>(hosts);
    checkReduceScatterAndAllGather<float>(hosts);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace loom::algo
