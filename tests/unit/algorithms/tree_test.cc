// Tree algorithms: the tree construction itself, then the double binary tree
// all-reduce and the rooted tree broadcast and reduce over the loopback
// transport with 2-slot FIFOs, tiny (64 B) and normal (4 KiB) pieces, checked
// against references computed here with plain loops; finally a count of the
// causal chain of messages, which must grow with log2(ranks), not ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "algorithms/ring.h"
#include "algorithms/tree.h"
#include "algorithms/patterns/tree_topology.h"
#include "kernels/stream_copy.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo {
namespace {

using testing::LoopbackFabric;

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// ---------------------------------------------------------------- topology

// Checks one tree over n ranks: a single root, parent and child links that
// agree, depths that follow the links, every rank reachable, and depth within
// ceil(log2 n) + 1 (the construction promises floor(log2 n)).
void checkTree(int n, int shift, std::vector<TreeNode>* nodesOut) {
  std::vector<TreeNode> nodes;
  for (int r = 0; r < n; ++r) nodes.push_back(binaryTreeNode(n, r, shift));
  int roots = 0;
  for (int r = 0; r < n; ++r) {
    const TreeNode& node = nodes[r];
    ASSERT_LE(node.nchildren, 2);
    ASSERT_LE(node.depth, ceilLog2(n) + 1) << "n " << n << " rank " << r;
    ASSERT_LE(node.depth, binaryTreeDepth(n)) << "n " << n << " rank " << r;
    if (node.parent < 0) {
      ++roots;
      ASSERT_EQ(r, binaryTreeRoot(n, shift));
      ASSERT_EQ(node.depth, 0);
    } else {
      ASSERT_GE(node.parent, 0);
      ASSERT_LT(node.parent, n);
      const TreeNode& parent = nodes[node.parent];
      int seen = 0;
      for (int i = 0; i < parent.nchildren; ++i) seen += parent.children[i] == r ? 1 : 0;
      ASSERT_EQ(seen, 1) << "n " << n << " rank " << r << " is not a child of its parent " << node.parent;
      ASSERT_EQ(node.depth, parent.depth + 1);
    }
    for (int i = 0; i < node.nchildren; ++i) {
      const int child = node.children[i];
      ASSERT_GE(child, 0);
      ASSERT_LT(child, n);
      ASSERT_EQ(nodes[child].parent, r) << "n " << n << " rank " << r << " child " << child;
    }
    if (node.nchildren == 2) ASSERT_NE(node.children[0], node.children[1]);
  }
  ASSERT_EQ(roots, 1) << "n " << n;
  int maxDepth = 0;
  for (const auto& node : nodes) maxDepth = std::max(maxDepth, node.depth);
  ASSERT_EQ(maxDepth, binaryTreeDepth(n)) << "n " << n;
  ASSERT_EQ(binaryTreeDepth(n), static_cast<int>(std::floor(std::log2(n))));
  *nodesOut = nodes;
}

TEST(TreeTopology, DoubleTreeIsConsistentShallowAndSharesNoInteriorRank) {
  for (int n = 1; n <= 300; ++n) {
    std::vector<TreeNode> tree0, tree1;
    ASSERT_NO_FATAL_FAILURE(checkTree(n, 0, &tree0));
    ASSERT_NO_FATAL_FAILURE(checkTree(n, 1, &tree1));
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(doubleTreeNode(n, r, 0).parent, tree0[r].parent);
      ASSERT_EQ(doubleTreeNode(n, r, 1).parent, tree1[r].parent);
      ASSERT_FALSE(tree0[r].nchildren > 0 && tree1[r].nchildren > 0) << "n " << n << ": rank " << r << " is interior in both trees";
    }
  }
}

TEST(TreeTopology, EveryRootCanBePlacedAtTheTop) {
  for (int n = 1; n <= 40; ++n) {
    for (int root = 0; root < n; ++root) {
      const int shift = shiftForRoot(n, root);
      std::vector<TreeNode> nodes;
      ASSERT_NO_FATAL_FAILURE(checkTree(n, shift, &nodes));
      ASSERT_EQ(binaryTreeRoot(n, shift), root) << "n " << n;
      ASSERT_EQ(nodes[root].parent, -1);
    }
  }
}

TEST(TreeTopology, SmallTreesLookAsDocumented) {
  // n = 6, positions 1..6 hold ranks 0..5: root 4 (rank 3) with children 2
  // and 6; 2 has 1 and 3; 6 has 5.
  const TreeNode root = binaryTreeNode(6, 3, 0);
  EXPECT_EQ(root.parent, -1);
  ASSERT_EQ(root.nchildren, 2);
  EXPECT_EQ(root.children[0], 1);
  EXPECT_EQ(root.children[1], 5);
  const TreeNode six = binaryTreeNode(6, 5, 0);
  ASSERT_EQ(six.nchildren, 1);
  EXPECT_EQ(six.children[0], 4);
  EXPECT_EQ(binaryTreeNode(6, 4, 0).depth, 2);
  // Tree 1 is tree 0 moved up by one rank.
  EXPECT_EQ(binaryTreeRoot(6, 1), 4);
  // Position 6 wraps to rank 0: a child of the root (rank 4) with one child,
  // position 5 (rank 5).
  const TreeNode wrapped = binaryTreeNode(6, 0, 1);
  EXPECT_EQ(wrapped.parent, 4);
  ASSERT_EQ(wrapped.nchildren, 1);
  EXPECT_EQ(wrapped.children[0], 5);
}

// ---------------------------------------------------------------- runs

struct FabricShape {
  int nranks;
  size_t chunkBytes;
  int slots = 2;
};

// Runs `fn` on every rank of a fresh fabric; every rank must succeed.
void runAll(const FabricShape& s, const std::function<Status(const AlgoContext&)>& fn) {
  LoopbackFabric fabric(s.nranks, s.chunkBytes, s.slots);
  std::vector<Status> results(static_cast<size_t>(s.nranks));
  loom::testing::runRankThreads(s.nranks, [&](int rank) {
    AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = s.nranks;
    ctx.links = &fabric.linksOf(rank);
    ctx.wait.deadline = Deadline::after(20);
    ctx.chunkBytes = s.chunkBytes;
    results[static_cast<size_t>(rank)] = fn(ctx);
  });
  for (int r = 0; r < s.nranks; ++r)
    ASSERT_TRUE(results[static_cast<size_t>(r)].isOk()) << "rank " << r << ": " << results[static_cast<size_t>(r)].message();
}

// Element types with their arithmetic as the kernels define it: integers wrap.
template <class T, bool = std::is_integral_v<T>>
struct WrapType { using type = T; };
template <class T>
struct WrapType<T, true> { using type = std::make_unsigned_t<T>; };

template <class T>
T combine(RedOp op, T a, T b) {
  using U = typename WrapType<T>::type;
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case RedOp::kProd: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case RedOp::kMax: return std::max(a, b);
    case RedOp::kMin: return std::min(a, b);
  }
  return a;
}

template <class T>
T inputOf(int rank, size_t i) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(1.0 / (rank * 13 + static_cast<double>(i % 97) + 3));
  else return static_cast<T>(static_cast<int64_t>(rank + 1) * 1000003 + static_cast<int64_t>(i) * 7 - 50 + (i % 5 == 0 ? -(rank * 11) : 0));
}

template <class T> DataType dataTypeOf();
template <> DataType dataTypeOf<int64_t>() { return DataType::kInt64; }
template <> DataType dataTypeOf<int32_t>() { return DataType::kInt32; }
template <> DataType dataTypeOf<uint8_t>() { return DataType::kUint8; }
template <> DataType dataTypeOf<float>() { return DataType::kFloat32; }

template <class T>
std::vector<std::vector<T>> inputs(int n, size_t count) {
  std::vector<std::vector<T>> in(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) in[r].push_back(inputOf<T>(r, i));
  return in;
}

template <class T>
T reference(RedOp op, int n, size_t i) {
  T acc = inputOf<T>(0, i);
  for (int r = 1; r < n; ++r) acc = combine(op, acc, inputOf<T>(r, i));
  if (op == RedOp::kAvg) acc = static_cast<T>(acc / static_cast<T>(n));
  return acc;
}

template <class T>
void expectClose(T got, T want, const char* what, int rank, size_t i) {
  if constexpr (std::is_floating_point_v<T>) {
    ASSERT_NEAR(got, want, std::fabs(want) * 1e-5) << what << " rank " << rank << " index " << i;
  } else {
    ASSERT_EQ(got, want) << what << " rank " << rank << " index " << i;
  }
}

const size_t kCounts[] = {0, 1, 7, 47, 48, 49, 1025};

class TreeTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  FabricShape shape() const { return {std::get<0>(GetParam()), std::get<1>(GetParam())}; }

  template <class T>
  void allReduce(RedOp op) {
    const FabricShape s = shape();
    const int n = s.nranks;
    for (size_t count : kCounts) {
      for (bool inPlace : {false, true}) {
        auto send = inputs<T>(n, count);
        std::vector<std::vector<T>> recv(static_cast<size_t>(n), std::vector<T>(count, T(99)));
        ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
          T* out = inPlace ? send[ctx.rank].data() : recv[ctx.rank].data();
          CollArgs a{CollType::kAllReduce, send[ctx.rank].data(), out, count, dataTypeOf<T>(), op, 0};
          return treeAllReduce(a, ctx);
        }));
        const auto& result = inPlace ? send : recv;
        for (int r = 0; r < n; ++r) {
          // The broadcast delivers the root's bits: identical everywhere.
          if (count) ASSERT_EQ(std::memcmp(result[r].data(), result[0].data(), count * sizeof(T)), 0) << "rank " << r << " count " << count;
          for (size_t i = 0; i < count; ++i)
            ASSERT_NO_FATAL_FAILURE(expectClose(result[r][i], reference<T>(op, n, i), inPlace ? "in place" : "out of place", r, i));
        }
        if (!inPlace)  // the input is left alone
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) ASSERT_EQ(send[r][i], inputOf<T>(r, i));
      }
    }
  }
};

TEST_P(TreeTest, AllReduceInt64SumAvgMax) {
  allReduce<int64_t>(RedOp::kSum);
  allReduce<int64_t>(RedOp::kAvg);
  allReduce<int64_t>(RedOp::kMax);
}

TEST_P(TreeTest, AllReduceInt32ProdMinUint8Sum) {
  allReduce<int32_t>(RedOp::kProd);
  allReduce<int32_t>(RedOp::kMin);
  allReduce<uint8_t>(RedOp::kSum);
}

TEST_P(TreeTest, AllReduceFloatSumAvg) {
  allReduce<float>(RedOp::kSum);
  allReduce<float>(RedOp::kAvg);
}

TEST_P(TreeTest, BroadcastEveryRoot) {
  const FabricShape s = shape();
  const int n = s.nranks;
  for (int root = 0; root < n; ++root) {
    for (size_t count : kCounts) {
      for (bool inPlace : {false, true}) {
        auto send = inputs<int64_t>(n, count);
        std::vector<std::vector<int64_t>> recv(static_cast<size_t>(n), std::vector<int64_t>(count, -1));
        ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
          int64_t* out = inPlace ? send[ctx.rank].data() : recv[ctx.rank].data();
          CollArgs a{CollType::kBroadcast, send[ctx.rank].data(), out, count, DataType::kInt64, RedOp::kSum, root};
          return treeBroadcast(a, ctx);
        }));
        const auto& result = inPlace ? send : recv;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(result[r][i], inputOf<int64_t>(root, i)) << "root " << root << " rank " << r << " count " << count << " index " << i;
      }
    }
  }
}

TEST_P(TreeTest, BroadcastBytes) {
  // One-byte elements: 64 per tiny piece, so piece boundaries fall elsewhere.
  const FabricShape s = shape();
  const int n = s.nranks;
  const int root = n / 2;
  for (size_t count : {size_t{63}, size_t{64}, size_t{65}, size_t{1000}}) {
    auto send = inputs<uint8_t>(n, count);
    std::vector<std::vector<uint8_t>> recv(static_cast<size_t>(n), std::vector<uint8_t>(count, 0));
    ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kBroadcast, send[ctx.rank].data(), recv[ctx.rank].data(), count, DataType::kUint8, RedOp::kSum, root};
      return treeBroadcast(a, ctx);
    }));
    for (int r = 0; r < n; ++r) ASSERT_EQ(recv[r], send[root]) << "rank " << r << " count " << count;
  }
}

template <class T>
void reduceEveryRoot(const FabricShape& s, RedOp op) {
  const int n = s.nranks;
  for (int root = 0; root < n; ++root) {
    for (size_t count : kCounts) {
      for (bool inPlace : {false, true}) {
        auto send = inputs<T>(n, count);
        std::vector<std::vector<T>> recv(static_cast<size_t>(n), std::vector<T>(count, T(99)));
        ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
          T* out = inPlace ? send[ctx.rank].data() : recv[ctx.rank].data();
          CollArgs a{CollType::kReduce, send[ctx.rank].data(), out, count, dataTypeOf<T>(), op, root};
          return treeReduce(a, ctx);
        }));
        for (int r = 0; r < n; ++r) {
          const auto& result = inPlace ? send[r] : recv[r];
          for (size_t i = 0; i < count; ++i) {
            if (r == root) {
              ASSERT_NO_FATAL_FAILURE(expectClose(result[i], reference<T>(op, n, i), "reduce root", r, i));
            } else if (inPlace) {  // a non-root's buffer still holds its input
              ASSERT_EQ(result[i], inputOf<T>(r, i)) << "root " << root << " rank " << r << " index " << i;
            } else {  // a non-root's recvbuf is not written at all
              ASSERT_EQ(result[i], T(99)) << "root " << root << " rank " << r << " index " << i;
            }
          }
        }
      }
    }
  }
}

TEST_P(TreeTest, ReduceEveryRootInt64Sum) { reduceEveryRoot<int64_t>(shape(), RedOp::kSum); }
TEST_P(TreeTest, ReduceEveryRootFloatAvg) { reduceEveryRoot<float>(shape(), RedOp::kAvg); }

// 64-byte pieces force many pieces per half and a deep pipeline through
// 2-slot FIFOs; 4 KiB pieces are the normal case (one or two per half).
INSTANTIATE_TEST_SUITE_P(Matrix, TreeTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 16),
                                            ::testing::Values(size_t{64}, size_t{4096})));

// Outputs of kStreamingOutputBytes and more are stored non-temporally
// (kernels/stream_copy.h), and interior nodes copy the received piece to both
// children and to recvbuf: every rank must still hold the root's bits.
TEST(TreeLarge, StreamedOutputsMatchTheReference) {
  const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) + 13;
  for (int n : {2, 3, 5, 7}) {
    const FabricShape s{n, 256 * 1024 + 8, 4};
    std::vector<std::vector<int64_t>> send = inputs<int64_t>(n, count);
    std::vector<std::vector<int64_t>> recv(static_cast<size_t>(n), std::vector<int64_t>(count, -1));
    ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kAllReduce, send[ctx.rank].data(), recv[ctx.rank].data(), count, DataType::kInt64,
                 RedOp::kSum, 0};
      return treeAllReduce(a, ctx);
    }));
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::memcmp(recv[r].data(), recv[0].data(), count * sizeof(int64_t)), 0) << n << " ranks, rank " << r;
      for (size_t i = 0; i < count; i += 997)
        ASSERT_EQ(recv[r][i], reference<int64_t>(RedOp::kSum, n, i)) << n << " ranks, rank " << r << " index " << i;
    }
    ASSERT_EQ(recv[n - 1][count - 1], reference<int64_t>(RedOp::kSum, n, count - 1));
  }
}

// Tree broadcast writes recvbufs of kStreamingOutputBytes and more
// non-temporally, interior nodes while forwarding to one or two children.
TEST(TreeLarge, BroadcastStreamedOutputsMatchTheRoot) {
  const size_t count = kernels::kStreamingOutputBytes + 13;  // bytes: pieces end at every alignment
  for (int n : {2, 3, 5, 7}) {
    const int root = n / 2;
    const FabricShape s{n, 256 * 1024 + 8, 4};
    auto send = inputs<uint8_t>(n, count);
    std::vector<std::vector<uint8_t>> recv(static_cast<size_t>(n), std::vector<uint8_t>(count, 0));
    ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kBroadcast, send[ctx.rank].data(), recv[ctx.rank].data(), count, DataType::kUint8,
                 RedOp::kSum, root};
      return treeBroadcast(a, ctx);
    }));
    for (int r = 0; r < n; ++r) ASSERT_TRUE(recv[r] == send[root]) << n << " ranks, rank " << r;
  }
}

// Tree reduce streams the root's result (kStreamingOutputBytes and more)
// from a scratch chunk, after one or two children's inputs (recv2ReduceFinal).
TEST(TreeLarge, ReduceStreamedOutputsMatchTheReference) {
  const size_t count = kernels::kStreamingOutputBytes / sizeof(int64_t) + 13;
  for (int n : {2, 3, 5}) {
    const int root = n / 2;
    const FabricShape s{n, 256 * 1024 + 8, 4};
    auto send = inputs<int64_t>(n, count);
    std::vector<std::vector<int64_t>> recv(static_cast<size_t>(n), std::vector<int64_t>(count, -1));
    ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kReduce, send[ctx.rank].data(), recv[ctx.rank].data(), count, DataType::kInt64,
                 RedOp::kAvg, root};
      return treeReduce(a, ctx);
    }));
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[root][i], reference<int64_t>(RedOp::kAvg, n, i)) << n << " ranks, index " << i;
    for (int r = 0; r < n; ++r)
      if (r != root) ASSERT_EQ(recv[r][count / 2], -1) << "rank " << r << " is not the root";
  }
}

TEST(TreeSlots, DeepFifosLetRanksRunAheadWithoutReordering) {
  // With 8 slots senders run several steps ahead of their receivers; the
  // pieces of both trees and both directions must still pair up in order.
  for (int n : {3, 6, 7, 16}) {
    const FabricShape s{n, 64, 8};
    const size_t count = 1000;
    auto send = inputs<int64_t>(n, count);
    std::vector<std::vector<int64_t>> recv(static_cast<size_t>(n), std::vector<int64_t>(count, 0));
    ASSERT_NO_FATAL_FAILURE(runAll(s, [&](const AlgoContext& ctx) {
      CollArgs a{CollType::kAllReduce, send[ctx.rank].data(), recv[ctx.rank].data(), count, DataType::kInt64, RedOp::kSum, 0};
      return treeAllReduce(a, ctx);
    }));
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[r][i], reference<int64_t>(RedOp::kSum, n, i)) << "n " << n << " rank " << r;
  }
}

TEST(TreeErrors, MismatchedCountsFailInsteadOfHanging) {
  // Rank 0 thinks count is 10, the others 40 (several 64 B pieces): somebody
  // receives a piece of the wrong length (kRemoteError) or waits in vain
  // until the deadline (kTimeout); nobody hangs and nobody succeeds silently
  // with corrupt data.
  for (CollType type : {CollType::kAllReduce, CollType::kBroadcast, CollType::kReduce}) {
    const int n = 5;
    LoopbackFabric fabric(n, 64, 2);
    std::vector<Status> results(n);
    loom::testing::runRankThreads(n, [&](int rank) {
      std::vector<int64_t> in(40, rank), out(40, 0);
      AlgoContext ctx;
      ctx.rank = rank;
      ctx.nranks = n;
      ctx.links = &fabric.linksOf(rank);
      ctx.wait.deadline = Deadline::after(1);
      ctx.chunkBytes = 64;
      CollArgs a{type, in.data(), out.data(), rank == 0 ? size_t{10} : size_t{40}, DataType::kInt64, RedOp::kSum, 0};
      results[rank] = type == CollType::kAllReduce ? treeAllReduce(a, ctx)
                      : type == CollType::kBroadcast ? treeBroadcast(a, ctx)
                                                     : treeReduce(a, ctx);
    });
    bool someoneNoticed = false;
    for (auto& st : results)
      if (!st.isOk()) {
        someoneNoticed = true;
        EXPECT_TRUE(st.code() == Code::kRemoteError || st.code() == Code::kTimeout) << st.message();
      }
    EXPECT_TRUE(someoneNoticed) << collTypeName(type);
  }
}

TEST(TreeErrors, BadRootAndTinyChunkAreInvalidArguments) {
  LoopbackFabric fabric(2, 64, 2);
  std::vector<int64_t> buf(4, 1);
  AlgoContext ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.links = &fabric.linksOf(0);
  ctx.wait.deadline = Deadline::after(1);
  ctx.chunkBytes = 64;
  CollArgs a{CollType::kBroadcast, buf.data(), buf.data(), 4, DataType::kInt64, RedOp::kSum, 2};
  Status st = treeBroadcast(a, ctx);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  a.type = CollType::kReduce;
  a.root = -1;
  st = treeReduce(a, ctx);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  ctx.chunkBytes = 4;  // less than one int64
  a.type = CollType::kAllReduce;
  st = treeAllReduce(a, ctx);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
}

// ---------------------------------------------------------------- latency

// Links that give every message a Lamport timestamp, carried beside the data
// in FIFO order: a send stamps the sender's clock + 1 (and advances it), a
// receive moves the receiver's clock up to the stamp. The largest clock at the
// end is the length of the longest chain of messages each of which had to
// wait for the previous one (counting a rank's successive sends as a chain
// too): the number of sequential steps, whatever the thread timing.
class CausalFabric {
 public:
  CausalFabric(int nranks, size_t chunkBytes, int slots)
      : n_(nranks), inner_(nranks, chunkBytes, slots), stamps_(static_cast<size_t>(nranks * nranks)),
        clock_(static_cast<size_t>(nranks)), sent_(static_cast<size_t>(nranks)), received_(static_cast<size_t>(nranks)) {
    for (int r = 0; r < nranks; ++r) links_.push_back(std::make_unique<RankLinks>(*this, r));
  }
  Links& linksOf(int rank) { return *links_[static_cast<size_t>(rank)]; }
  int clock(int rank) const { return clock_[static_cast<size_t>(rank)]; }
  int sent(int rank) const { return sent_[static_cast<size_t>(rank)]; }
  int received(int rank) const { return received_[static_cast<size_t>(rank)]; }

 private:
  struct Stamps {
    std::mutex mu;
    std::deque<int> queue;
  };
  Stamps& edge(int from, int to) { return stamps_[static_cast<size_t>(from * n_ + to)]; }

  class Send final : public transport::SendConnection {
   public:
    Send(CausalFabric& f, int from, int to) : f_(f), from_(from), to_(to), inner_(f.inner_.linksOf(from).sendTo(to)) {}
    size_t chunkBytes() const override { return inner_.chunkBytes(); }
    Status acquire(std::byte** slot, const WaitContext& wait) override { return inner_.acquire(slot, wait); }
    bool tryAcquire(std::byte** slot) override { return inner_.tryAcquire(slot); }
    void commit(size_t bytes) override {
      int stamp = ++f_.clock_[static_cast<size_t>(from_)];
      ++f_.sent_[static_cast<size_t>(from_)];
      {
        std::lock_guard<std::mutex> lock(f_.edge(from_, to_).mu);
        f_.edge(from_, to_).queue.push_back(stamp);
      }
      inner_.commit(bytes);
    }

   private:
    CausalFabric& f_;
    int from_, to_;
    transport::SendConnection& inner_;
  };

  class Recv final : public transport::RecvConnection {
   public:
    Recv(CausalFabric& f, int from, int to) : f_(f), from_(from), to_(to), inner_(f.inner_.linksOf(to).recvFrom(from)) {}
    size_t chunkBytes() const override { return inner_.chunkBytes(); }
    Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override {
      Status st = inner_.acquire(data, bytes, wait);
      if (st.isOk()) observe();
      return st;
    }
    bool tryAcquire(const std::byte** data, size_t* bytes) override {
      bool got = inner_.tryAcquire(data, bytes);
      if (got) observe();
      return got;
    }
    void release() override { inner_.release(); }

   private:
    void observe() {
      int stamp = 0;
      {
        std::lock_guard<std::mutex> lock(f_.edge(from_, to_).mu);
        stamp = f_.edge(from_, to_).queue.front();
        f_.edge(from_, to_).queue.pop_front();
      }
      int& clock = f_.clock_[static_cast<size_t>(to_)];
      clock = std::max(clock, stamp);
      ++f_.received_[static_cast<size_t>(to_)];
    }
    CausalFabric& f_;
    int from_, to_;
    transport::RecvConnection& inner_;
  };

  class RankLinks final : public Links {
   public:
    RankLinks(CausalFabric& f, int rank) {
      for (int p = 0; p < f.n_; ++p) {
        sends_.push_back(std::make_unique<Send>(f, rank, p));
        recvs_.push_back(std::make_unique<Recv>(f, p, rank));
      }
    }
    transport::SendConnection& sendTo(int peer) override { return *sends_[static_cast<size_t>(peer)]; }
    transport::RecvConnection& recvFrom(int peer) override { return *recvs_[static_cast<size_t>(peer)]; }

   private:
    std::vector<std::unique_ptr<Send>> sends_;
    std::vector<std::unique_ptr<Recv>> recvs_;
  };

  int n_;
  LoopbackFabric inner_;
  std::vector<Stamps> stamps_;
  // Each rank's counters are touched only by that rank's thread.
  std::vector<int> clock_, sent_, received_;
  std::vector<std::unique_ptr<RankLinks>> links_;
};

struct Causality {
  int sequentialSteps = 0;  // the largest clock
  int maxMessagesPerRank = 0;  // sent + received by the busiest rank
};

Causality measure(int n, size_t count, CollFn fn, CollType type) {
  CausalFabric fabric(n, 4096, 2);
  std::vector<std::vector<int64_t>> send(static_cast<size_t>(n), std::vector<int64_t>(count, 1)),
      recv(static_cast<size_t>(n), std::vector<int64_t>(count, 0));
  std::vector<Status> results(static_cast<size_t>(n));
  loom::testing::runRankThreads(n, [&](int rank) {
    AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = n;
    ctx.links = &fabric.linksOf(rank);
    ctx.wait.deadline = Deadline::after(20);
    ctx.chunkBytes = 4096;
    CollArgs a{type, send[rank].data(), recv[rank].data(), count, DataType::kInt64, RedOp::kSum, 0};
    results[static_cast<size_t>(rank)] = fn(a, ctx);
  });
  Causality c;
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(results[static_cast<size_t>(r)].isOk()) << results[static_cast<size_t>(r)].message();
    if (type != CollType::kReduce || r == 0)
      EXPECT_EQ(recv[static_cast<size_t>(r)][0], type == CollType::kBroadcast ? 1 : n) << collTypeName(type) << " n " << n << " rank " << r;
    c.sequentialSteps = std::max(c.sequentialSteps, fabric.clock(r));
    c.maxMessagesPerRank = std::max(c.maxMessagesPerRank, fabric.sent(r) + fabric.received(r));
  }
  return c;
}

TEST(TreeLatency, SequentialStepsGrowWithLog2OfRanks) {
  // A one-piece call per tree (count 2: one element per half). Depth d =
  // floor(log2 n): the all-reduce's chain is d up and d down, plus one per
  // level where a parent sends to its second child after the first (measured:
  // 2, 5, 8, 11, 14, 17 for n = 2 .. 64); the busiest rank handles a bounded
  // number of messages whatever n is. The ring needs 2(n-1) for the same call.
  int previous = 0;
  for (int n : {2, 4, 8, 16, 32, 64}) {
    const int d = binaryTreeDepth(n);
    const Causality tree = measure(n, 2, treeAllReduce, CollType::kAllReduce);
    const Causality bcast = measure(n, 2, treeBroadcast, CollType::kBroadcast);
    const Causality reduce = measure(n, 2, treeReduce, CollType::kReduce);
    const Causality ring = measure(n, 2, ringAllReduce, CollType::kAllReduce);
    std::cout << "n " << n << ": tree all-reduce " << tree.sequentialSteps << " sequential steps (at most "
              << tree.maxMessagesPerRank << " messages on a rank), broadcast " << bcast.sequentialSteps << ", reduce "
              << reduce.sequentialSteps << "; ring all-reduce " << ring.sequentialSteps << "\n";
    EXPECT_LE(tree.sequentialSteps, 3 * d + 1) << "n " << n;
    EXPECT_LE(tree.maxMessagesPerRank, 10) << "n " << n;
    EXPECT_LE(bcast.sequentialSteps, 2 * d + 1) << "n " << n;
    EXPECT_LE(reduce.sequentialSteps, d + 1) << "n " << n;
    EXPECT_EQ(ring.sequentialSteps, 2 * (n - 1)) << "n " << n;
    if (n >= 16) EXPECT_LT(tree.sequentialSteps, ring.sequentialSteps) << "n " << n;
    // Doubling the ranks adds a level, hence a bounded number of steps.
    if (previous) EXPECT_LE(tree.sequentialSteps - previous, 3) << "n " << n;
    previous = tree.sequentialSteps;
  }
}

}  // namespace
}  // namespace loom::algo
