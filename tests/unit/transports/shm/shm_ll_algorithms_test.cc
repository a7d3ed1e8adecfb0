// Every registered algorithm, unchanged, over the shared-memory transport's
// LL connections (ranks as threads): the LL FIFO keeps the acquire/commit/
// release contract the algorithms rely on. Results are checked against sums
// and copies computed here with plain loops (int32 sums are exact).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "algorithms/registry.h"
#include "tests/support/rank_threads.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

using algo::CollType;
using transport::Protocol;

// Links of one rank: every peer through its ShmTransport, over one protocol.
class ShmLinks final : public algo::Links {
 public:
  ShmLinks(transport::Transport& t, Protocol proto) : t_(t), proto_(proto) {}
  transport::SendConnection& sendTo(int peer) override { return t_.sendTo(peer, proto_); }
  transport::RecvConnection& recvFrom(int peer) override { return t_.recvFrom(peer, proto_); }

 private:
  transport::Transport& t_;
  Protocol proto_;
};

int32_t inputValue(int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 1009 + i * 7) % 100003 - 500; }

// Elements each rank contributes, and the receive size, for `count` (NCCL meaning).
size_t sendElems(CollType type, size_t count, int nranks) {
  return type == CollType::kReduceScatter ? count * nranks : count;
}
size_t recvElems(CollType type, size_t count, int nranks) {
  return type == CollType::kAllGather ? count * nranks : count;
}

// What rank `rank` must hold after the collective; empty where the recv buffer is unspecified.
std::vector<int32_t> expected(CollType type, size_t count, int nranks, int rank, int root) {
  std::vector<int32_t> out;
  auto sumAt = [&](size_t i) {
    int32_t s = 0;
    for (int r = 0; r < nranks; ++r) s += inputValue(r, i);
    return s;
  };
  switch (type) {
    case CollType::kAllReduce:
      for (size_t i = 0; i < count; ++i) out.push_back(sumAt(i));
      break;
    case CollType::kReduce:
      if (rank == root)
        for (size_t i = 0; i < count; ++i) out.push_back(sumAt(i));
      break;
    case CollType::kBroadcast:
      for (size_t i = 0; i < count; ++i) out.push_back(inputValue(root, i));
      break;
    case CollType::kReduceScatter:
      for (size_t i = 0; i < count; ++i) out.push_back(sumAt(rank * count + i));
      break;
    case CollType::kAllGather:
      for (int r = 0; r < nranks; ++r)
        for (size_t i = 0; i < count; ++i) out.push_back(inputValue(r, r * count + i));
      break;
  }
  return out;
}

TEST(ShmLLAlgorithms, EveryAlgorithmRunsOverLL) {
  constexpr int kRanks = 3;
  constexpr int kRoot = 1;
  World w = connectWorld(Backend::kShm, kRanks, uniqueJobTag(), smallConfig(), [](int r) { return allPeersOf(r, kRanks); });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  int ran = 0;
  for (const algo::AlgorithmInfo& info : algo::allAlgorithms()) {
    // 3001 int32 per rank span two LL chunks (and several for the reduce-scatter input).
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{3001}}) {
      algo::CollArgs args;
      args.type = info.type;
      args.count = count;
      args.dtype = DataType::kInt32;
      args.op = RedOp::kSum;
      args.root = kRoot;
      std::vector<std::vector<int32_t>> in(kRanks), out(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        // All-gather rank r contributes elements r*count.., so the result is one index space.
        size_t base = info.type == CollType::kAllGather ? r * count : 0;
        for (size_t i = 0; i < sendElems(info.type, count, kRanks); ++i) in[r].push_back(inputValue(r, base + i));
        out[r].assign(recvElems(info.type, count, kRanks), -1);
      }
      std::vector<algo::AlgoContext> ctxs(kRanks);
      std::vector<ShmLinks> links;
      for (int r = 0; r < kRanks; ++r) links.emplace_back(*w.transports[r], Protocol::kLL);
      bool applies = true;
      for (int r = 0; r < kRanks; ++r) {
        ctxs[r].rank = r;
        ctxs[r].nranks = kRanks;
        ctxs[r].links = &links[r];
        ctxs[r].wait = waitFor(20);
        ctxs[r].chunkBytes = transport::shm::kLLChunkBytes;
        ctxs[r].proto = Protocol::kLL;
        ctxs[r].singleHost = true;
        algo::CollArgs mine = args;
        mine.sendbuf = in[r].data();
        mine.recvbuf = out[r].data();
        if (info.applies && !info.applies(mine, ctxs[r])) applies = false;
      }
      if (!applies) {
        std::printf("[shm LL] %s %s count %zu: not applicable, not run\n", info.name, algo::collTypeName(info.type),
                    count);
        continue;
      }
      std::vector<Status> results(kRanks);
      runRankThreads(kRanks, [&](int r) {
        algo::CollArgs mine = args;
        mine.sendbuf = in[r].data();
        mine.recvbuf = out[r].data();
        results[r] = info.run(mine, ctxs[r]);
      });
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_TRUE(results[r].isOk()) << info.name << " " << algo::collTypeName(info.type) << " count " << count
                                       << " rank " << r << ": " << results[r].message();
        std::vector<int32_t> want = expected(info.type, count, kRanks, r, kRoot);
        if (info.type == CollType::kReduce && r != kRoot) continue;
        ASSERT_EQ(out[r], want) << info.name << " " << algo::collTypeName(info.type) << " count " << count
                                << " rank " << r;
      }
      ++ran;
    }
  }
  EXPECT_GT(ran, 0);
  std::printf("[shm LL] %d algorithm runs checked\n", ran);
}

}  // namespace
}  // namespace loom::testing::shm
