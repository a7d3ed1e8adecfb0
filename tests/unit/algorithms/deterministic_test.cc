// Deterministic all-reduce, reduce and reduce-scatter over the loopback
// transport with 2 slots per link: world sizes 1..9; tiny (24 B, 64 B) and
// normal chunks. Results must equal, bit for bit, the rank-order left fold
// computed here, for floats whose sums depend on association (1e8 + 1 - 1e8
// mixes), and must not change with the chunk size.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "algorithms/deterministic.h"
#include "tests/unit/algorithms/fold_reference.h"

namespace loom::algo {
namespace {

using namespace testref;

constexpr std::initializer_list<RedOp> kAllOps = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                                                  RedOp::kAvg};

template <class T>
std::vector<std::vector<T>> inputsFor(int n, size_t count, RedOp op) {
  return makeInputs<T>(n, count, [op](int r, size_t i) {
    if constexpr (std::is_integral_v<T>) return integerValue<T>(r, i);
    else return fromDouble<T>(mixedValue<T>(op, r, i));
  });
}

std::string describe(DataType t, RedOp op, size_t count, bool inPlace) {
  return std::string(dataTypeName(t)) + " " + redOpName(op) + " count " + std::to_string(count) +
         (inPlace ? " in place" : " out of place");
}

// Reduce to `root`: returns the root's recvbuf (empty if a rank failed).
// Non-root ranks pass a null recvbuf: it is not theirs to write.
template <class T>
std::vector<T> runReduce(int n, size_t chunkBytes, const std::vector<std::vector<T>>& in, RedOp op, int root,
                         bool inPlace) {
  const size_t count = in[0].size();
  std::vector<std::vector<T>> send = in;
  std::vector<T> out(count);
  if (count) std::memset(static_cast<void*>(out.data()), 0xEE, count * sizeof(T));
  const bool ok = runRanks(n, chunkBytes, 2, [&](const AlgoContext& ctx) {
    T* recv = ctx.rank != root ? nullptr : inPlace ? send[root].data() : out.data();
    CollArgs a{CollType::kReduce, send[ctx.rank].data(), recv, count, Elem<T>::kType, op, root};
    return deterministicReduce(a, ctx);
  });
  if (!ok) return {};
  return inPlace ? send[root] : out;
}

// Reduce-scatter of in[rank] (n * recvcount elements each): returns each
// rank's recvcount results (empty if a rank failed). In place, rank r's
// recvbuf is its sendbuf + r * recvcount, as NCCL defines.
template <class T>
std::vector<std::vector<T>> runReduceScatter(int n, size_t chunkBytes, const std::vector<std::vector<T>>& in,
                                             RedOp op, bool inPlace) {
  const size_t recvcount = in[0].size() / static_cast<size_t>(n);
  std::vector<std::vector<T>> send = in, out(static_cast<size_t>(n), std::vector<T>(recvcount));
  const bool ok = runRanks(n, chunkBytes, 2, [&](const AlgoContext& ctx) {
    T* recv = inPlace ? send[ctx.rank].data() + static_cast<size_t>(ctx.rank) * recvcount : out[ctx.rank].data();
    CollArgs a{CollType::kReduceScatter, send[ctx.rank].data(), recv, recvcount, Elem<T>::kType, op, 0};
    return deterministicReduceScatter(a, ctx);
  });
  if (!ok) return {};
  if (inPlace)
    for (int r = 0; r < n; ++r)
      out[r].assign(send[r].begin() + static_cast<ptrdiff_t>(r * recvcount),
                    send[r].begin() + static_cast<ptrdiff_t>((r + 1) * recvcount));
  return out;
}

class DeterministicTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  int n() const { return std::get<0>(GetParam()); }
  size_t chunkBytes() const { return std::get<1>(GetParam()); }
  size_t manyElements(size_t elemSize) const { return chunkBytes() / elemSize * static_cast<size_t>(n()) * 3; }

  template <class T>
  void checkAllReduce(std::initializer_list<RedOp> ops) {
    for (size_t count : interestingCounts(manyElements(sizeof(T)))) {
      for (RedOp op : ops) {
        auto in = inputsFor<T>(n(), count, op);
        for (bool inPlace : {false, true}) {
          auto out = runAllReduce<T>(deterministicAllReduce, n(), chunkBytes(), in, op, inPlace);
          expectLeftFold(in, out, op, "all-reduce " + describe(Elem<T>::kType, op, count, inPlace));
          if (HasFatalFailure()) return;
        }
      }
    }
  }

  template <class T>
  void checkReduce(std::initializer_list<RedOp> ops) {
    for (size_t count : interestingCounts(manyElements(sizeof(T)))) {
      for (RedOp op : ops) {
        auto in = inputsFor<T>(n(), count, op);
        for (int root : {0, n() - 1, static_cast<int>(count % static_cast<size_t>(n()))}) {
          for (bool inPlace : {false, true}) {
            auto out = runReduce<T>(n(), chunkBytes(), in, op, root, inPlace);
            const std::string what = "reduce to " + std::to_string(root) + " " + describe(Elem<T>::kType, op, count, inPlace);
            ASSERT_EQ(out.size(), count) << what << ": the run failed";
            for (size_t i = 0; i < count; ++i)
              ASSERT_TRUE(sameBits(out[i], leftFold(op, in, i)))
                  << what << ": element " << i << " is " << toDouble(out[i]) << ", want " << toDouble(leftFold(op, in, i));
          }
        }
      }
    }
  }

  template <class T>
  void checkReduceScatter(std::initializer_list<RedOp> ops) {
    for (size_t recvcount : interestingCounts(manyElements(sizeof(T)) / static_cast<size_t>(n()))) {
      for (RedOp op : ops) {
        auto in = inputsFor<T>(n(), recvcount * static_cast<size_t>(n()), op);
        for (bool inPlace : {false, true}) {
          auto out = runReduceScatter<T>(n(), chunkBytes(), in, op, inPlace);
          ASSERT_EQ(out.size(), static_cast<size_t>(n())) << "the run failed";
          for (int r = 0; r < n(); ++r) {
            for (size_t i = 0; i < recvcount; ++i) {
              const T want = leftFold(op, in, static_cast<size_t>(r) * recvcount + i);
              ASSERT_TRUE(sameBits(out[r][i], want))
                  << "reduce-scatter " << describe(Elem<T>::kType, op, recvcount, inPlace) << ": rank " << r
                  << " element " << i << " is " << toDouble(out[r][i]) << ", want " << toDouble(want);
            }
          }
        }
      }
    }
  }
};

TEST_P(DeterministicTest, AllReduceFloatsEqualTheLeftFoldBitForBit) {
  checkAllReduce<float>(kAllOps);
  checkAllReduce<double>({RedOp::kSum, RedOp::kAvg});
  checkAllReduce<F16>({RedOp::kSum, RedOp::kProd, RedOp::kAvg});
  checkAllReduce<BF16>({RedOp::kSum, RedOp::kMin, RedOp::kAvg});
}

TEST_P(DeterministicTest, AllReduceIntegersEqualLoops) {
  checkAllReduce<int64_t>(kAllOps);
  checkAllReduce<uint8_t>({RedOp::kSum, RedOp::kAvg});
}

TEST_P(DeterministicTest, ReduceEqualsTheLeftFoldOnTheRoot) {
  checkReduce<float>({RedOp::kSum, RedOp::kAvg});
  checkReduce<BF16>({RedOp::kSum});
  checkReduce<int32_t>({RedOp::kProd, RedOp::kMax});
}

TEST_P(DeterministicTest, ReduceScatterEqualsTheLeftFold) {
  checkReduceScatter<float>({RedOp::kSum, RedOp::kMax});
  checkReduceScatter<double>({RedOp::kAvg});
  checkReduceScatter<F16>({RedOp::kSum});
  checkReduceScatter<int64_t>({RedOp::kSum, RedOp::kMin});
}

INSTANTIATE_TEST_SUITE_P(WorldsAndChunks, DeterministicTest,
                         ::testing::Combine(::testing::Range(1, 10),
                                            ::testing::Values(size_t{24}, size_t{64}, size_t{4096})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_chunk" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The inputs really are order-sensitive (so the tests above can fail), and
// the results are the same bits for every chunk size.
template <class T>
void checkChunkSizeIndependence(int n) {
  const size_t count = 1000;
  auto in = inputsFor<T>(n, count, RedOp::kSum);
  size_t differing = 0;
  for (size_t i = 0; i < count; ++i)
    differing += sameBits(leftFold(RedOp::kSum, in, i), rightFold(RedOp::kSum, in, i)) ? 0 : 1;
  EXPECT_GT(differing, 0u) << dataTypeName(Elem<T>::kType) << " n " << n
                           << ": the inputs do not depend on association, the test would prove nothing";

  std::vector<std::vector<T>> first;
  for (size_t chunk : {size_t{8}, size_t{24}, size_t{64}, size_t{1000}, size_t{4096}, size_t{1} << 20}) {
    auto out = runAllReduce<T>(deterministicAllReduce, n, chunk, in, RedOp::kSum, false);
    ASSERT_EQ(out.size(), static_cast<size_t>(n)) << "chunk " << chunk;
    if (first.empty()) first = out;
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(std::memcmp(out[r].data(), first[0].data(), count * sizeof(T)), 0)
          << dataTypeName(Elem<T>::kType) << " chunk " << chunk << " rank " << r << " differs";
  }
  expectLeftFold(in, first, RedOp::kSum, "chunk-size sweep");
}

TEST(Deterministic, SameBitsForEveryChunkSizeOnOrderSensitiveData) {
  for (int n : {3, 5, 8}) {
    checkChunkSizeIndependence<float>(n);
    checkChunkSizeIndependence<double>(n);
    checkChunkSizeIndependence<F16>(n);
    checkChunkSizeIndependence<BF16>(n);
  }
}

TEST(Deterministic, RejectsARootOutsideTheCommunicator) {
  std::vector<float> buf(4, 1.0f);
  runRanks(2, 4096, 2, [&](const AlgoContext& ctx) {
    CollArgs a{CollType::kReduce, buf.data(), nullptr, buf.size(), DataType::kFloat32, RedOp::kSum, 2};
    Status st = deterministicReduce(a, ctx);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("root 2"), std::string::npos) << st.message();
    return Status::ok();
  });
}

TEST(Deterministic, RejectsAChunkSmallerThanAnElement) {
  std::vector<double> in(4, 1.0), out(4);
  runRanks(2, 4, 2, [&](const AlgoContext& ctx) {
    CollArgs a{CollType::kAllReduce, in.data(), out.data(), in.size(), DataType::kFloat64, RedOp::kSum, 0};
    Status st = deterministicAllReduce(a, ctx);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
    return Status::ok();
  });
}

}  // namespace
}  // namespace loom::algo
