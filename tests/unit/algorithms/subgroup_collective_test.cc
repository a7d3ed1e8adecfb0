// runOnSubgroup: each collective among a subset of the ranks (a rail), with
// two rails running at once over one loopback fabric, roots given as
// sub-ranks, and an average dividing by the whole communicator's size rather
// than the rail's. Results against references computed here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/subgroup.h"
#include "tests/support/rank_threads.h"
#include "tests/unit/algorithms/loopback_links.h"

namespace loom::algo {
namespace {

constexpr int kRanks = 6;
// Two rails, interleaved over the ranks, and in no sorted order for the second.
const std::vector<std::vector<int>> kRails = {{0, 2, 4}, {5, 1, 3}};

// Integral, so that sums in any order are exact.
float inputOf(int rank, size_t i) { return static_cast<float>((rank * 7919 + i * 104729) % 100); }

const std::vector<int>& railOf(int rank) {
  for (const auto& rail : kRails)
    for (int r : rail)
      if (r == rank) return rail;
  return kRails[0];
}

struct Case {
  CollType type;
  RedOp op;
  int root;  // sub-rank
};

// Every rank's receive buffer after `c` with `count` on every rail.
std::vector<std::vector<float>> run(const Case& c, size_t count, std::vector<std::string>* errors) {
  const size_t m = kRails[0].size();
  const size_t sendCount = c.type == CollType::kReduceScatter ? m * count : count;
  const size_t recvCount = c.type == CollType::kAllGather ? m * count : count;
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(recvCount, -1.0f));
  errors->assign(kRanks, "");
  testing::LoopbackFabric fabric(kRanks, 1024, 2);
  testing::runRankThreads(kRanks, [&](int rank) {
    AlgoContext parent;
    parent.rank = rank;
    parent.nranks = kRanks;
    parent.links = &fabric.linksOf(rank);
    parent.wait.deadline = Deadline::after(30);
    parent.chunkBytes = 1024;
    parent.singleHost = false;
    const std::vector<int>& rail = railOf(rank);
    Subgroup group(parent, rail, false);
    std::vector<float> send(sendCount);
    for (size_t i = 0; i < sendCount; ++i) send[i] = inputOf(rank, i);
    CollArgs args;
    args.type = c.type;
    args.op = c.op;
    args.root = c.root;
    args.count = count;
    args.sendbuf = send.data();
    args.recvbuf = out[static_cast<size_t>(rank)].data();
    Status s = runOnSubgroup(args, group, kRanks);
    if (!s.isOk()) (*errors)[static_cast<size_t>(rank)] = s.message();
  });
  return out;
}

std::vector<float> reference(const Case& c, size_t count, int rank) {
  const std::vector<int>& rail = railOf(rank);
  const size_t m = rail.size();
  size_t me = 0;
  while (rail[me] != rank) ++me;
  auto fold = [&](size_t i) {
    float v = inputOf(rail[0], i);
    for (size_t k = 1; k < m; ++k) v = c.op == RedOp::kMax ? std::max(v, inputOf(rail[k], i)) : v + inputOf(rail[k], i);
    return c.op == RedOp::kAvg ? v / static_cast<float>(kRanks) : v;
  };
  std::vector<float> want(c.type == CollType::kAllGather ? m * count : count, -1.0f);
  for (size_t i = 0; i < count; ++i) switch (c.type) {
      case CollType::kAllReduce: want[i] = fold(i); break;
      case CollType::kReduceScatter: want[i] = fold(me * count + i); break;
      case CollType::kBroadcast: want[i] = inputOf(rail[static_cast<size_t>(c.root)], i); break;
      case CollType::kReduce:
        if (me == static_cast<size_t>(c.root)) want[i] = fold(i);
        break;
      case CollType::kAllGather:
        for (size_t k = 0; k < m; ++k) want[k * count + i] = inputOf(rail[k], i);
        break;
    }
  return want;
}

TEST(SubgroupCollective, EachCollectiveRunsAmongItsMembersAndAveragesOverTheCommunicator) {
  const std::vector<Case> cases = {
      {CollType::kAllReduce, RedOp::kAvg, 0},     {CollType::kAllReduce, RedOp::kMax, 0},
      {CollType::kReduceScatter, RedOp::kAvg, 0}, {CollType::kReduceScatter, RedOp::kSum, 0},
      {CollType::kAllGather, RedOp::kSum, 0},     {CollType::kBroadcast, RedOp::kSum, 2},
      {CollType::kReduce, RedOp::kAvg, 1},        {CollType::kReduce, RedOp::kMax, 2},
  };
  for (const Case& c : cases)
    for (size_t count : {size_t{1}, size_t{1001}}) {
      SCOPED_TRACE(std::string(collTypeName(c.type)) + " " + redOpName(c.op) + " root " + std::to_string(c.root) +
                   " count " + std::to_string(count));
      std::vector<std::string> errors;
      const auto out = run(c, count, &errors);
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
        const std::vector<float> want = reference(c, count, r);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_EQ(out[static_cast<size_t>(r)][i], want[i]) << "rank " << r << " element " << i;
      }
    }
}

}  // namespace
}  // namespace loom::algo
