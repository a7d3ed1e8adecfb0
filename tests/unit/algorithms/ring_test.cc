// Ring and chain algorithms over the loopback transport: data placement,
// piece boundaries and in-place handling for many (ranks, count, chunk, slots)
// combinations, checked against references computed here with plain loops.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#include "algorithms/ring.h"
#include "kernels/stream_copy.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo {
namespace {

using testing::LoopbackFabric;

struct Case {
  int nranks;
  size_t count;
  size_t chunkBytes;
  int slots;
};

int64_t inputValue(int rank, size_t i) { return static_cast<int64_t>(rank + 1) * 1000003 + static_cast<int64_t>(i) * 7 - 50; }

// Runs `fn` on every rank of a fresh fabric.
void runAll(const Case& c, const std::function<Status(const AlgoContext&)>& fn) {
  LoopbackFabric fabric(c.nranks, c.chunkBytes, c.slots);
  std::vector<Status> results(static_cast<size_t>(c.nranks));
  loom::testing::runRankThreads(c.nranks, [&](int rank) {
    AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = c.nranks;
    ctx.links = &fabric.linksOf(rank);
    ctx.wait.deadline = Deadline::after(20);
    ctx.chunkBytes = c.chunkBytes;
    results[static_cast<size_t>(rank)] = fn(ctx);
  });
  for (int r = 0; r < c.nranks; ++r) ASSERT_TRUE(results[static_cast<size_t>(r)].isOk()) << "rank " << r << ": " << results[static_cast<size_t>(r)].message();
}

class RingTest : public ::testing::TestWithParam<std::tuple<int, size_t, size_t, int>> {
 protected:
  Case param() const {
    auto [n, count, chunk, slots] = GetParam();
    return {n, count, chunk, slots};
  }
};

TEST_P(RingTest, AllReduceSumAndAvg) {
  const Case c = param();
  for (RedOp op : {RedOp::kSum, RedOp::kAvg}) {
    for (bool inPlace : {false, true}) {
      std::vector<std::vector<int64_t>> in(c.nranks), out(c.nranks);
      for (int r = 0; r < c.nranks; ++r) {
        for (size_t i = 0; i < c.count; ++i) in[r].push_back(inputValue(r, i));
        out[r].assign(c.count, -1);
      }
      runAll(c, [&](const AlgoContext& ctx) {
        CollArgs a{CollType::kAllReduce, in[ctx.rank].data(), inPlace ? in[ctx.rank].data() : out[ctx.rank].data(),
                   c.count, DataType::kInt64, op, 0};
        return ringAllReduce(a, ctx);
      });
      for (int r = 0; r < c.nranks; ++r) {
        const auto& got = inPlace ? in[r] : out[r];
        for (size_t i = 0; i < c.count; ++i) {
          int64_t sum = 0;
          for (int q = 0; q < c.nranks; ++q) sum += inputValue(q, i);
          int64_t want = op == RedOp::kAvg ? sum / c.nranks : sum;
          ASSERT_EQ(got[i], want) << "rank " << r << " index " << i << " inPlace " << inPlace;
        }
      }
    }
  }
}

TEST_P(RingTest, ReduceScatterMax) {
  const Case c = param();
  for (bool inPlace : {false, true}) {
    std::vector<std::vector<int64_t>> in(c.nranks), out(c.nranks);
    for (int r = 0; r < c.nranks; ++r) {
      for (size_t i = 0; i < c.count * c.nranks; ++i) in[r].push_back(inputValue((r * 3 + static_cast<int>(i)) % c.nranks, i));
      out[r].assign(c.count, -1);
    }
    runAll(c, [&](const AlgoContext& ctx) {
      int64_t* recv = inPlace ? in[ctx.rank].data() + ctx.rank * c.count : out[ctx.rank].data();
      CollArgs a{CollType::kReduceScatter, in[ctx.rank].data(), recv, c.count, DataType::kInt64, RedOp::kMax, 0};
      return ringReduceScatter(a, ctx);
    });
    for (int r = 0; r < c.nranks; ++r) {
      const int64_t* got = inPlace ? in[r].data() + r * c.count : out[r].data();
      for (size_t i = 0; i < c.count; ++i) {
        size_t g = r * c.count + i;
        int64_t want = INT64_MIN;
        for (int q = 0; q < c.nranks; ++q) want = std::max(want, inputValue((q * 3 + static_cast<int>(g)) % c.nranks, g));
        ASSERT_EQ(got[i], want) << "rank " << r << " index " << i;
      }
    }
  }
}

TEST_P(RingTest, AllGather) {
  const Case c = param();
  for (bool inPlace : {false, true}) {
    std::vector<std::vector<int64_t>> in(c.nranks), out(c.nranks);
    for (int r = 0; r < c.nranks; ++r) {
      for (size_t i = 0; i < c.count; ++i) in[r].push_back(inputValue(r, i));
      out[r].assign(c.count * c.nranks, -1);
      if (inPlace) std::copy(in[r].begin(), in[r].end(), out[r].begin() + r * c.count);
    }
    runAll(c, [&](const AlgoContext& ctx) {
      const int64_t* send = inPlace ? out[ctx.rank].data() + ctx.rank * c.count : in[ctx.rank].data();
      CollArgs a{CollType::kAllGather, send, out[ctx.rank].data(), c.count, DataType::kInt64, RedOp::kSum, 0};
      return ringAllGather(a, ctx);
    });
    for (int r = 0; r < c.nranks; ++r)
      for (int q = 0; q < c.nranks; ++q)
        for (size_t i = 0; i < c.count; ++i) ASSERT_EQ(out[r][q * c.count + i], inputValue(q, i)) << "rank " << r << " block " << q;
  }
}

TEST_P(RingTest, BroadcastEveryRoot) {
  const Case c = param();
  for (int root = 0; root < c.nranks; ++root) {
    std::vector<std::vector<int64_t>> in(c.nranks), out(c.nranks);
    for (int r = 0; r < c.nranks; ++r) {
      for (size_t i = 0; i < c.count; ++i) in[r].push_back(inputValue(r, i));
      out[r].assign(c.count, -1);
    }
    runAll(c, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kBroadcast, in[ctx.rank].data(), out[ctx.rank].data(), c.count, DataType::kInt64, RedOp::kSum, root};
      return chainBroadcast(a, ctx);
    });
    for (int r = 0; r < c.nranks; ++r)
      for (size_t i = 0; i < c.count; ++i) ASSERT_EQ(out[r][i], inputValue(root, i)) << "rank " << r << " root " << root;
  }
}

TEST_P(RingTest, ReduceEveryRootLeavesOthersUntouched) {
  const Case c = param();
  for (int root = 0; root < c.nranks; ++root) {
    std::vector<std::vector<int64_t>> in(c.nranks), out(c.nranks);
    for (int r = 0; r < c.nranks; ++r) {
      for (size_t i = 0; i < c.count; ++i) in[r].push_back(inputValue(r, i));
      out[r].assign(c.count, -1);
    }
    runAll(c, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kReduce, in[ctx.rank].data(), out[ctx.rank].data(), c.count, DataType::kInt64, RedOp::kSum, root};
      return chainReduce(a, ctx);
    });
    for (int r = 0; r < c.nranks; ++r)
      for (size_t i = 0; i < c.count; ++i) {
        int64_t sum = 0;
        for (int q = 0; q < c.nranks; ++q) sum += inputValue(q, i);
        ASSERT_EQ(out[r][i], r == root ? sum : -1) << "rank " << r << " root " << root << " index " << i;
      }
  }
}

// Chunks of 64 and 200 bytes force many pieces per block; 2 slots is the
// tightest FIFO the pipelines must survive without deadlock.
INSTANTIATE_TEST_SUITE_P(Matrix, RingTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{101}, size_t{1000}),
                                            ::testing::Values(size_t{64}, size_t{200}, size_t{4096}),
                                            ::testing::Values(2, 4)));

// Outputs of kStreamingOutputBytes and more are stored non-temporally
// (kernels/stream_copy.h): odd counts, so every copy has a ragged tail.
TEST(RingLarge, StreamedOutputsMatchTheReference) {
  const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) + 13;
  for (int n : {2, 3, 4}) {
    for (bool inPlace : {false, true}) {
      const Case c{n, count, 256 * 1024 + 8, 4};
      std::vector<std::vector<int64_t>> send(n), recv(n, std::vector<int64_t>(count, -1));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) send[r].push_back(inputValue(r, i));
      ASSERT_NO_FATAL_FAILURE(runAll(c, [&](const AlgoContext& ctx) {
        int64_t* out = inPlace ? send[ctx.rank].data() : recv[ctx.rank].data();
        CollArgs a{CollType::kAllReduce, send[ctx.rank].data(), out, count, DataType::kInt64, RedOp::kSum, 0};
        return ringAllReduce(a, ctx);
      }));
      const auto& result = inPlace ? send : recv;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) {
          int64_t want = 0;
          for (int q = 0; q < n; ++q) want += inputValue(q, i);
          ASSERT_EQ(result[r][i], want) << n << " ranks, rank " << r << " index " << i << (inPlace ? " in place" : "");
        }
    }
  }
}

// All-gather and chain broadcast also write recvbufs of kStreamingOutputBytes
// and more non-temporally; the root or owner sends from sendbuf meanwhile.
TEST(RingLarge, AllGatherStreamedOutputsMatchTheReference) {
  for (int n : {2, 3, 4}) {
    // Odd per-rank counts, so blocks start at every alignment modulo 16.
    const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) / static_cast<size_t>(n) + 13;
    for (bool inPlace : {false, true}) {
      const Case c{n, count, 256 * 1024 + 8, 4};
      std::vector<std::vector<int64_t>> in(n), out(n, std::vector<int64_t>(count * n, -1));
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) in[r].push_back(inputValue(r, i));
        if (inPlace) std::copy(in[r].begin(), in[r].end(), out[r].begin() + static_cast<ptrdiff_t>(r * count));
      }
      ASSERT_NO_FATAL_FAILURE(runAll(c, [&](const AlgoContext& ctx) {
        const int64_t* send = inPlace ? out[ctx.rank].data() + ctx.rank * count : in[ctx.rank].data();
        CollArgs a{CollType::kAllGather, send, out[ctx.rank].data(), count, DataType::kInt64, RedOp::kSum, 0};
        return ringAllGather(a, ctx);
      }));
      for (int r = 0; r < n; ++r)
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(out[r][q * count + i], inputValue(q, i))
                << n << " ranks, rank " << r << " block " << q << " index " << i << (inPlace ? " in place" : "");
    }
  }
}

TEST(RingLarge, ChainBroadcastStreamedOutputsMatchTheRoot) {
  const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) + 13;
  for (int n : {2, 3, 4}) {
    const int root = n - 1;
    for (bool inPlace : {false, true}) {
      const Case c{n, count, 256 * 1024 + 8, 4};
      std::vector<std::vector<int64_t>> in(n), out(n, std::vector<int64_t>(count, -1));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) in[r].push_back(inputValue(r, i));
      ASSERT_NO_FATAL_FAILURE(runAll(c, [&](const AlgoContext& ctx) {
        int64_t* recv = inPlace && ctx.rank == root ? in[ctx.rank].data() : out[ctx.rank].data();
        CollArgs a{CollType::kBroadcast, in[ctx.rank].data(), recv, count, DataType::kInt64, RedOp::kSum, root};
        return chainBroadcast(a, ctx);
      }));
      for (int r = 0; r < n; ++r) {
        const auto& got = inPlace && r == root ? in[r] : out[r];
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(got[i], inputValue(root, i)) << n << " ranks, rank " << r << " index " << i << (inPlace ? " in place" : "");
      }
    }
  }
}

// Reduce-scatter and chain reduce reduce each final piece into a scratch
// chunk and stream it to recvbufs of kStreamingOutputBytes and more; avg
// checks that the division happens on the way.
TEST(RingLarge, ReduceScatterStreamedOutputsMatchTheReference) {
  const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) + 13;
  for (int n : {2, 3}) {
    for (bool inPlace : {false, true}) {
      const Case c{n, count, 256 * 1024 + 8, 4};
      std::vector<std::vector<int64_t>> in(n), out(n, std::vector<int64_t>(count, -1));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count * n; ++i) in[r].push_back(inputValue(r, i));
      const std::vector<std::vector<int64_t>> original = in;
      ASSERT_NO_FATAL_FAILURE(runAll(c, [&](const AlgoContext& ctx) {
        int64_t* recv = inPlace ? in[ctx.rank].data() + ctx.rank * count : out[ctx.rank].data();
        CollArgs a{CollType::kReduceScatter, in[ctx.rank].data(), recv, count, DataType::kInt64, RedOp::kAvg, 0};
        return ringReduceScatter(a, ctx);
      }));
      for (int r = 0; r < n; ++r) {
        const int64_t* got = inPlace ? in[r].data() + r * count : out[r].data();
        for (size_t i = 0; i < count; ++i) {
          int64_t sum = 0;
          for (int q = 0; q < n; ++q) sum += original[q][r * count + i];
          ASSERT_EQ(got[i], sum / n) << n << " ranks, rank " << r << " index " << i << (inPlace ? " in place" : "");
        }
      }
    }
  }
}

TEST(RingLarge, ChainReduceStreamedOutputsMatchTheReference) {
  const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) + 13;
  for (int n : {2, 3, 4}) {
    const int root = 1;
    const Case c{n, count, 256 * 1024 + 8, 4};
    std::vector<std::vector<int64_t>> in(n), out(n, std::vector<int64_t>(count, -1));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) in[r].push_back(inputValue(r, i));
    ASSERT_NO_FATAL_FAILURE(runAll(c, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kReduce, in[ctx.rank].data(), out[ctx.rank].data(), count, DataType::kInt64, RedOp::kSum, root};
      return chainReduce(a, ctx);
    }));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        int64_t sum = 0;
        for (int q = 0; q < n; ++q) sum += inputValue(q, i);
        ASSERT_EQ(out[r][i], r == root ? sum : -1) << n << " ranks, rank " << r << " index " << i;
      }
  }
}

TEST(RingErrors, MismatchedCountsAreReportedNotCorrupted) {
  // Rank 0 thinks count is 10, rank 1 thinks 12: the receiver sees a chunk
  // of the wrong length and fails with kRemoteError instead of reading garbage.
  LoopbackFabric fabric(2, 4096, 2);
  std::vector<Status> results(2);
  loom::testing::runRankThreads(2, [&](int rank) {
    std::vector<int64_t> in(12, rank), out(12, 0);
    AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = 2;
    ctx.links = &fabric.linksOf(rank);
    ctx.wait.deadline = Deadline::after(2);
    ctx.chunkBytes = 4096;
    CollArgs a{CollType::kAllReduce, in.data(), out.data(), rank == 0 ? size_t{10} : size_t{12}, DataType::kInt64, RedOp::kSum, 0};
    results[static_cast<size_t>(rank)] = ringAllReduce(a, ctx);
  });
  bool someoneNoticed = false;
  for (auto& s : results)
    if (!s.isOk()) {
      someoneNoticed = true;
      EXPECT_TRUE(s.code() == Code::kRemoteError || s.code() == Code::kTimeout) << s.message();
    }
  EXPECT_TRUE(someoneNoticed);
}

}  // namespace
}  // namespace loom::algo
