// The fused send/recv engine over the loopback transport with tiny chunks and
// two slots, so every message spans many chunks and every FIFO wraps: data
// placement, call order per peer, self pairs, zero-byte messages, in-place
// (overlapping) exchanges and the errors (size mismatch, unmatched self
// ops, bad peer, timeout). Expected bytes come from a formula of
// (sender, receiver, message index, offset), never from the engine.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algorithms/p2p.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo {
namespace {

using testing::LoopbackFabric;

std::byte pattern(int from, int to, int message, size_t offset) {
  return static_cast<std::byte>((from * 131 + to * 31 + message * 7 + offset * 13 + offset / 251) & 0xFF);
}

std::vector<std::byte> payload(int from, int to, int message, size_t bytes) {
  std::vector<std::byte> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(from, to, message, i);
  return v;
}

// Returns the first offset where `got` differs from what `from` sent, or -1.
long firstMismatch(const std::vector<std::byte>& got, int from, int to, int message) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != pattern(from, to, message, i)) return static_cast<long>(i);
  return -1;
}

// Runs fn(ctx) on every rank of a fresh fabric; returns each rank's status.
std::vector<Status> runRanks(int nranks, size_t chunkBytes, int slots, double timeoutSeconds,
                             const std::function<Status(const AlgoContext&)>& fn) {
  LoopbackFabric fabric(nranks, chunkBytes, slots);
  std::vector<Status> results(static_cast<size_t>(nranks));
  loom::testing::runRankThreads(nranks, [&](int rank) {
    AlgoContext ctx;
    ctx.rank = rank;
    ctx.nranks = nranks;
    ctx.links = &fabric.linksOf(rank);
    ctx.wait.deadline = Deadline::after(timeoutSeconds);
    ctx.chunkBytes = chunkBytes;
    results[static_cast<size_t>(rank)] = fn(ctx);
  });
  return results;
}

void expectAllOk(const std::vector<Status>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_TRUE(results[r].isOk()) << "rank " << r << ": " << results[r].message();
}

// Sizes around the header and chunk boundaries of 32-byte chunks (8-byte header).
const size_t kSizes[] = {0, 1, 23, 24, 25, 56, 57, 1000, 4099};

TEST(P2P, BidirectionalExchangeEverySize) {
  for (size_t chunk : {size_t{8}, size_t{9}, size_t{32}, size_t{4096}}) {
    for (size_t bytes : kSizes) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + " bytes " + std::to_string(bytes));
      std::vector<std::vector<std::byte>> out(2), in(2, std::vector<std::byte>(bytes, std::byte{0x5A}));
      for (int r = 0; r < 2; ++r) out[r] = payload(r, 1 - r, 0, bytes);
      auto results = runRanks(2, chunk, 2, 20, [&](const AlgoContext& ctx) {
        const int peer = 1 - ctx.rank;
        // Rank 0 lists its send first, rank 1 its recv first: order across peers/directions is free.
        std::vector<P2POp> ops = {P2POp::send(peer, out[ctx.rank].data(), bytes),
                                  P2POp::recv(peer, in[ctx.rank].data(), bytes)};
        if (ctx.rank == 1) std::swap(ops[0], ops[1]);
        return runP2P(ops, ctx);
      });
      expectAllOk(results);
      for (int r = 0; r < 2; ++r) EXPECT_EQ(firstMismatch(in[r], 1 - r, r, 0), -1) << "rank " << r;
    }
  }
}

// Every rank sends kMessages messages of different sizes to every rank
// (itself included) and receives as many from each, all in one fused op
// whose op list interleaves peers and directions differently per rank.
TEST(P2P, ManyOpsToEveryPeerInCallOrder) {
  constexpr int kMessages = 6;
  for (int n : {1, 2, 3, 5}) {
    SCOPED_TRACE("nranks " + std::to_string(n));
    auto sizeOf = [](int from, int to, int m) { return kSizes[(from * 3 + to * 5 + m) % std::size(kSizes)]; };
    // in[r][from][m]
    std::vector<std::vector<std::vector<std::vector<std::byte>>>> in(n), out(n);
    for (int r = 0; r < n; ++r) {
      in[r].resize(n);
      out[r].resize(n);
      for (int p = 0; p < n; ++p)
        for (int m = 0; m < kMessages; ++m) {
          out[r][p].push_back(payload(r, p, m, sizeOf(r, p, m)));
          in[r][p].emplace_back(sizeOf(p, r, m), std::byte{0x5A});
        }
    }
    auto results = runRanks(n, 32, 2, 30, [&](const AlgoContext& ctx) {
      const int r = ctx.rank;
      std::vector<P2POp> ops;
      for (int m = 0; m < kMessages; ++m)
        for (int i = 0; i < n; ++i) {
          const int p = (m % 2 ? r + n - i : r + i) % n;  // peer order differs per message and rank
          P2POp s = P2POp::send(p, out[r][p][m].data(), out[r][p][m].size());
          P2POp v = P2POp::recv(p, in[r][p][m].data(), in[r][p][m].size());
          if ((r + m) % 2) std::swap(s, v);
          ops.push_back(s);
          ops.push_back(v);
        }
      return runP2P(ops, ctx);
    });
    expectAllOk(results);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (int m = 0; m < kMessages; ++m)
          EXPECT_EQ(firstMismatch(in[r][p][m], p, r, m), -1) << "rank " << r << " from " << p << " message " << m;
  }
}

TEST(P2P, ZeroByteMessagesSynchronize) {
  // Rank 1 only returns once rank 0's zero-byte send arrived: it cannot finish first.
  std::atomic<bool> sent{false};
  auto results = runRanks(2, 32, 2, 20, [&](const AlgoContext& ctx) -> Status {
    if (ctx.rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      sent = true;
      return runP2P({P2POp::send(1, nullptr, 0)}, ctx);
    }
    Status s = runP2P({P2POp::recv(0, nullptr, 0)}, ctx);
    EXPECT_TRUE(sent.load()) << "a zero-byte recv returned before its send was posted";
    return s;
  });
  expectAllOk(results);
}

// In place: each rank sends its buffer to the next and receives the previous
// rank's into the same buffer (nccl-tests' in-place sendrecv), and the same
// for all-to-all blocks. Every byte must be read before it is overwritten.
TEST(P2P, InPlaceRingAndAllToAll) {
  constexpr size_t kBytes = 1000;
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("nranks " + std::to_string(n));
    std::vector<std::vector<std::byte>> buf(n);
    for (int r = 0; r < n; ++r) buf[r] = payload(r, (r + 1) % n, 0, kBytes);
    expectAllOk(runRanks(n, 32, 2, 20, [&](const AlgoContext& ctx) {
      const int r = ctx.rank;
      return runP2P({P2POp::recv((r - 1 + n) % n, buf[r].data(), kBytes), P2POp::send((r + 1) % n, buf[r].data(), kBytes)},
                    ctx);
    }));
    for (int r = 0; r < n; ++r) EXPECT_EQ(firstMismatch(buf[r], (r - 1 + n) % n, r, 0), -1) << "ring, rank " << r;

    constexpr size_t kBlock = 100;
    std::vector<std::vector<std::byte>> a2a(n, std::vector<std::byte>(kBlock * n));
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        auto block = payload(r, p, 1, kBlock);
        std::copy(block.begin(), block.end(), a2a[r].begin() + static_cast<long>(p * kBlock));
      }
    expectAllOk(runRanks(n, 32, 2, 20, [&](const AlgoContext& ctx) {
      std::vector<P2POp> ops;
      for (int p = 0; p < n; ++p) {
        std::byte* block = a2a[ctx.rank].data() + p * kBlock;
        ops.push_back(P2POp::recv(p, block, kBlock));
        ops.push_back(P2POp::send(p, block, kBlock));
      }
      return runP2P(ops, ctx);
    }));
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        std::vector<std::byte> got(a2a[r].begin() + static_cast<long>(p * kBlock),
                                   a2a[r].begin() + static_cast<long>((p + 1) * kBlock));
        EXPECT_EQ(firstMismatch(got, p, r, 1), -1) << "all-to-all, rank " << r << " block " << p;
      }
  }
}

TEST(P2P, SizeMismatchNamesThePeer) {
  // 40 bytes fit the two slots, so the sender finishes; the receiver expected 64.
  auto out = payload(0, 1, 0, 40);
  std::vector<std::byte> in(64);
  auto results = runRanks(2, 32, 2, 5, [&](const AlgoContext& ctx) {
    if (ctx.rank == 0) return runP2P({P2POp::send(1, out.data(), out.size())}, ctx);
    return runP2P({P2POp::recv(0, in.data(), in.size())}, ctx);
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_EQ(results[1].code(), Code::kRemoteError);
  const std::string& msg = results[1].message();
  EXPECT_NE(msg.find("recv of 64 bytes from peer 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("send of 40 bytes"), std::string::npos) << msg;
}

TEST(P2P, SelfOpsMustPairUp) {
  std::vector<std::byte> a(16), b(8);
  auto mismatch = runRanks(1, 32, 2, 5, [&](const AlgoContext& ctx) {
    return runP2P({P2POp::send(0, a.data(), 16), P2POp::recv(0, b.data(), 8)}, ctx);
  });
  EXPECT_EQ(mismatch[0].code(), Code::kInvalidUsage) << mismatch[0].message();
  EXPECT_NE(mismatch[0].message().find("send to self"), std::string::npos) << mismatch[0].message();

  auto unmatched = runRanks(2, 32, 2, 5, [&](const AlgoContext& ctx) {
    return runP2P({P2POp::send(ctx.rank, a.data(), 16)}, ctx);
  });
  for (const Status& s : unmatched) {
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    EXPECT_NE(s.message().find("1 send(s) to self but 0 recv(s)"), std::string::npos) << s.message();
  }
}

TEST(P2P, BadPeerAndMissingSenderFailCleanly) {
  std::vector<std::byte> buf(8);
  auto bad = runRanks(2, 32, 2, 5, [&](const AlgoContext& ctx) { return runP2P({P2POp::send(2, buf.data(), 8)}, ctx); });
  for (const Status& s : bad) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("peer 2"), std::string::npos) << s.message();
  }

  const auto start = Clock::now();
  auto lonely = runRanks(2, 32, 2, 0.3, [&](const AlgoContext& ctx) {
    return ctx.rank == 1 ? runP2P({P2POp::recv(0, buf.data(), 8)}, ctx) : Status::ok();
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  EXPECT_EQ(lonely[1].code(), Code::kTimeout);
  EXPECT_NE(lonely[1].message().find("recv of 8 bytes from peer 0"), std::string::npos) << lonely[1].message();
}

TEST(P2P, AbortStopsTheWait) {
  std::atomic<bool> abort{false};
  std::vector<std::byte> buf(8);
  LoopbackFabric fabric(2, 32, 2);
  AlgoContext ctx;
  ctx.rank = 1;
  ctx.nranks = 2;
  ctx.links = &fabric.linksOf(1);
  ctx.wait.deadline = Deadline::after(20);
  ctx.wait.abort = &abort;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort = true;
  });
  const Status s = runP2P({P2POp::recv(0, buf.data(), 8)}, ctx);
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
}

}  // namespace
}  // namespace loom::algo
