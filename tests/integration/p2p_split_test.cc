// Point to point (loomSend/loomRecv alone and fused in groups, with
// collectives and self pairs), loomAllToAll, loomBarrier and loomCommSplit,
// over the public API, as threads of one process and as processes under
// loomrun. Every scenario runs on one rank and is shared by both modes;
// expected values come from formulas of (sender, receiver, index).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/fixtures.h"

namespace loom::integration {
namespace {

int32_t valueOf(int from, int to, size_t i) { return static_cast<int32_t>(from * 1000003 + to * 7919 + i * 31 + 1); }

std::vector<int32_t> dataFrom(int from, int to, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = valueOf(from, to, i);
  return v;
}

// Expects loomSuccess; false (after reporting) otherwise.
bool ok(loomResult_t rc, const std::string& what, loomComm_t comm) {
  if (rc == loomSuccess) return true;
  ADD_FAILURE() << what << " returned " << loomGetErrorString(rc) << ": " << loomGetLastError(comm);
  return false;
}

// Reports at most a few wrong elements of data received from `from`.
void expectFrom(const std::vector<int32_t>& got, int from, int to, const std::string& what, size_t first = 0) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != valueOf(from, to, first + i) && ++bad <= 3)
      ADD_FAILURE() << what << ": element " << i << " from rank " << from << " on rank " << to << " is " << got[i]
                    << ", expected " << valueOf(from, to, first + i);
  EXPECT_EQ(bad, 0u) << what << ": wrong elements from rank " << from << " on rank " << to;
}

// Several chunks at the default chunk size, and a size that is no multiple of it.
constexpr size_t kCount = 100003;

// ---- Point to point ----

// Blocking calls outside a group: pairs (0,1), (2,3)... exchange; the lower
// rank sends first, the higher receives first. An odd rank out talks to itself
// only through a group (a lone send to self is invalid usage, checked below).
bool blockingPairsScenario(loomComm_t comm, int rank, int nranks) {
  const int partner = rank ^ 1;
  if (partner >= nranks) return true;
  auto out = dataFrom(rank, partner, kCount);
  std::vector<int32_t> in(kCount, -1);
  bool good = true;
  for (int step = 0; step < 2 && good; ++step) {
    if ((step == 0) == (rank < partner))
      good = ok(loomSend(out.data(), kCount, loomInt32, partner, comm, nullptr), "loomSend", comm);
    else
      good = ok(loomRecv(in.data(), kCount, loomInt32, partner, comm, nullptr), "loomRecv", comm);
  }
  if (good) expectFrom(in, partner, rank, "blocking send/recv");
  return good;
}

// One group per rank: ring traffic both ways (to next and prev, several
// messages each, counts from 0 to many chunks) plus a self pair, on a NULL
// stream or a stream. All of it is one fused operation, so its order of calls
// may not match the peers' (only the order per peer and direction does).
bool groupRingScenario(loomComm_t comm, int rank, int nranks, bool useStream) {
  const int next = (rank + 1) % nranks, prev = (rank - 1 + nranks) % nranks;
  const size_t counts[] = {kCount, 0, 1, 4099};
  loomStream_t stream = nullptr;
  if (useStream && !ok(loomStreamCreate(&stream), "loomStreamCreate", nullptr)) return false;
  // Messages to `next` use tag to=next; to `prev` the index is offset by 1e6
  // so that with two ranks (next == prev) the two kinds stay distinguishable.
  std::vector<std::vector<int32_t>> toNext, toPrev, fromPrev, fromNext;
  for (size_t c : counts) {
    toNext.push_back(dataFrom(rank, next, c));
    std::vector<int32_t> back(c);
    for (size_t i = 0; i < c; ++i) back[i] = valueOf(rank, prev, 1000000 + i);
    toPrev.push_back(std::move(back));
    fromPrev.emplace_back(c, -1);
    fromNext.emplace_back(c, -1);
  }
  auto self = dataFrom(rank, rank, 777);
  std::vector<int32_t> selfIn(777, -1);
  bool good = ok(loomGroupStart(), "loomGroupStart", nullptr);
  for (size_t k = 0; k < std::size(counts); ++k) {
    // With two ranks next == prev: messages to that peer match in call order,
    // so both kinds go in the same order on every rank (toNext[k] then toPrev[k]).
    good = ok(loomRecv(fromPrev[k].data(), counts[k], loomInt32, prev, comm, stream), "loomRecv(prev)", comm) && good;
    good = ok(loomSend(toNext[k].data(), counts[k], loomInt32, next, comm, stream), "loomSend(next)", comm) && good;
    good = ok(loomSend(toPrev[k].data(), counts[k], loomInt32, prev, comm, stream), "loomSend(prev)", comm) && good;
    good = ok(loomRecv(fromNext[k].data(), counts[k], loomInt32, next, comm, stream), "loomRecv(next)", comm) && good;
  }
  good = ok(loomRecv(selfIn.data(), selfIn.size(), loomInt32, rank, comm, stream), "loomRecv(self)", comm) && good;
  good = ok(loomSend(self.data(), self.size(), loomInt32, rank, comm, stream), "loomSend(self)", comm) && good;
  good = ok(loomGroupEnd(), "loomGroupEnd", comm) && good;
  if (stream) {
    good = ok(loomStreamSynchronize(stream), "loomStreamSynchronize", comm) && good;
    EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  }
  if (!good) return false;
  for (size_t k = 0; k < std::size(counts); ++k) {
    // fromPrev: what prev sent to its next (me), with the plain tag.
    expectFrom(fromPrev[k], prev, rank, "group ring from prev, message " + std::to_string(k));
    // fromNext: what next sent to its prev (me), with the offset tag.
    expectFrom(fromNext[k], next, rank, "group ring from next, message " + std::to_string(k), 1000000);
  }
  expectFrom(selfIn, rank, rank, "self pair");
  return true;
}

// A group mixing collectives and point to point on one buffer: the
// AllReduce runs first (group rule), so the ring carries its result.
bool groupWithCollectiveScenario(loomComm_t comm, int rank, int nranks) {
  const int next = (rank + 1) % nranks, prev = (rank - 1 + nranks) % nranks;
  constexpr size_t kN = 5003;
  std::vector<int32_t> a(kN), fromPrev(kN, -1);
  for (size_t i = 0; i < kN; ++i) a[i] = static_cast<int32_t>(rank * 10 + i);
  bool good = ok(loomGroupStart(), "loomGroupStart", nullptr);
  // Listed before the collective: still runs after it.
  good = ok(loomSend(a.data(), kN, loomInt32, next, comm, nullptr), "loomSend", comm) && good;
  good = ok(loomRecv(fromPrev.data(), kN, loomInt32, prev, comm, nullptr), "loomRecv", comm) && good;
  good = ok(loomAllReduce(a.data(), a.data(), kN, loomInt32, loomSum, comm, nullptr), "loomAllReduce", comm) && good;
  good = ok(loomGroupEnd(), "loomGroupEnd", comm) && good;
  if (!good) return false;
  const int64_t rankSum = int64_t{10} * nranks * (nranks - 1) / 2;
  size_t bad = 0;
  for (size_t i = 0; i < kN; ++i)
    if (fromPrev[i] != rankSum + static_cast<int64_t>(nranks) * static_cast<int64_t>(i) && ++bad <= 3)
      ADD_FAILURE() << "rank " << rank << " element " << i << ": got " << fromPrev[i] << " (the AllReduce's result "
                    << "must be what the grouped send carries)";
  EXPECT_EQ(bad, 0u);
  return true;
}

// ---- All-to-all ----

bool allToAllScenario(loomComm_t comm, int rank, int nranks) {
  bool good = true;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, kCount / 4}) {
    for (int variant = 0; variant < 3 && good; ++variant) {  // 0 blocking, 1 stream, 2 in place
      const std::string what = "loomAllToAll count " + std::to_string(count) + " variant " + std::to_string(variant);
      std::vector<int32_t> send(count * nranks), recv(count * nranks, -1);
      for (int to = 0; to < nranks; ++to)
        for (size_t i = 0; i < count; ++i) send[to * count + i] = valueOf(rank, to, i);
      loomStream_t stream = nullptr;
      if (variant == 1) good = ok(loomStreamCreate(&stream), "loomStreamCreate", nullptr);
      std::vector<int32_t>& out = variant == 2 ? send : recv;
      good = good && ok(loomAllToAll(send.data(), out.data(), count, loomInt32, comm, stream), what, comm);
      if (stream) {
        good = ok(loomStreamSynchronize(stream), what + ": loomStreamSynchronize", comm) && good;
        EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
      }
      if (!good) break;
      for (int from = 0; from < nranks; ++from)
        expectFrom(std::vector<int32_t>(out.begin() + from * count, out.begin() + (from + 1) * count), from, rank,
                   what);
    }
  }
  return good;
}

// ---- Barrier ----

// Rank 0 enters 150 ms late; nobody may leave before it arrives. Ranks are
// aligned by a barrier first, so the others wait (almost) the whole delay.
bool barrierScenario(loomComm_t comm, int rank, int nranks) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kDelay = std::chrono::milliseconds(150);
  if (!ok(loomBarrier(comm, nullptr), "loomBarrier (align)", comm)) return false;
  const auto start = Clock::now();
  if (rank == 0) std::this_thread::sleep_for(kDelay);
  if (!ok(loomBarrier(comm, nullptr), "loomBarrier", comm)) return false;
  const auto waited = Clock::now() - start;
  if (nranks > 1) {
    EXPECT_GE(waited, kDelay / 2) << "rank " << rank << " left the barrier before rank 0 entered it";
  }
  // On a stream, between two collectives, ten times in a row.
  loomStream_t stream = nullptr;
  if (!ok(loomStreamCreate(&stream), "loomStreamCreate", nullptr)) return false;
  int32_t x = rank + 1;
  bool good = true;
  for (int k = 0; k < 10 && good; ++k) good = ok(loomBarrier(comm, stream), "loomBarrier on a stream", comm);
  good = good && ok(loomAllReduce(&x, &x, 1, loomInt32, loomSum, comm, stream), "loomAllReduce", comm);
  good = ok(loomStreamSynchronize(stream), "loomStreamSynchronize", comm) && good;
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  if (good) {
    EXPECT_EQ(x, nranks * (nranks + 1) / 2);
  }
  return good;
}

// ---- Argument errors (local: no rank communicates) ----

void expectError(loomResult_t rc, loomResult_t want, loomComm_t comm, const std::vector<std::string>& words) {
  EXPECT_EQ(rc, want) << loomGetErrorString(rc);
  const std::string msg = loomGetLastError(comm);
  for (const auto& w : words) EXPECT_NE(msg.find(w), std::string::npos) << "message lacks '" << w << "': " << msg;
}

void argumentErrorsScenario(loomComm_t comm, int rank, int nranks) {
  int32_t x[4] = {};
  const std::string r = "rank " + std::to_string(rank);
  expectError(loomSend(x, 1, loomInt32, nranks, comm, nullptr), loomInvalidArgument, comm,
              {"loomSend", r, "peer " + std::to_string(nranks) + " out of range"});
  expectError(loomRecv(x, 1, loomInt32, -1, comm, nullptr), loomInvalidArgument, comm, {"loomRecv", r, "peer -1"});
  expectError(loomSend(nullptr, 3, loomInt32, 0, comm, nullptr), loomInvalidArgument, comm, {"sendbuff is NULL", r});
  expectError(loomRecv(nullptr, 3, loomInt32, 0, comm, nullptr), loomInvalidArgument, comm, {"recvbuff is NULL", r});
  expectError(loomSend(x, SIZE_MAX / 2, loomInt32, 0, comm, nullptr), loomInvalidArgument, comm, {"overflows", r});
  expectError(loomSend(x, 1, static_cast<loomDataType_t>(42), 0, comm, nullptr), loomInvalidArgument, comm,
              {"datatype", r});
  expectError(loomSend(x, 1, loomInt32, rank, comm, nullptr), loomInvalidUsage, comm, {"self", r});
  expectError(loomRecv(x, 1, loomInt32, rank, comm, nullptr), loomInvalidUsage, comm, {"self", r});
  std::vector<int32_t> buf(4 * nranks + 1);
  expectError(loomAllToAll(buf.data(), buf.data() + 1, 4, loomInt32, comm, nullptr), loomInvalidArgument, comm,
              {"loomAllToAll", r, "overlap"});
  expectError(loomAllToAll(nullptr, buf.data(), 4, loomInt32, comm, nullptr), loomInvalidArgument, comm,
              {"sendbuff is NULL", r});
  expectError(loomAllToAll(buf.data(), buf.data(), SIZE_MAX / 2, loomInt32, comm, nullptr), loomInvalidArgument, comm,
              {"overflows", r});
  expectError(loomBarrier(nullptr, nullptr), loomInvalidArgument, nullptr, {"loomBarrier", "comm is NULL"});
  loomComm_t child = reinterpret_cast<loomComm_t>(x);
  expectError(loomCommSplit(comm, 0, 0, nullptr), loomInvalidArgument, comm, {"newcomm is NULL", r});
  expectError(loomCommSplit(nullptr, 0, 0, &child), loomInvalidArgument, nullptr, {"loomCommSplit", "comm is NULL"});
  // Still usable: a clean exchange afterwards.
  loomResult_t async = loomInternalError;
  EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess) << "argument errors must leave the communicator usable";
}

// ---- Split ----

struct SplitExpectation {
  int color;
  int key;
};

// Splits with (color, key) from `choose`, checks rank and size against the
// MPI rule computed here, runs an AllReduce and an AllGather of parent ranks
// on the result (so the order is visible), and returns the new communicator
// (null for a negative color) through *child.
bool splitAndCheck(loomComm_t comm, int rank, int nranks, const std::function<SplitExpectation(int)>& choose,
                   loomComm_t* child, const std::string& what) {
  SCOPED_TRACE(what + ", parent rank " + std::to_string(rank));
  const SplitExpectation mine = choose(rank);
  static int sentinel;
  *child = reinterpret_cast<loomComm_t>(&sentinel);  // must be overwritten
  if (!ok(loomCommSplit(comm, mine.color, mine.key, child), "loomCommSplit", comm)) return false;
  if (mine.color < 0) {
    EXPECT_EQ(*child, nullptr) << "a negative color gets no communicator";
    return true;
  }
  std::vector<int> members;  // parent ranks of my color, in (key, parent rank) order
  for (int r = 0; r < nranks; ++r)
    if (choose(r).color == mine.color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return choose(a).key < choose(b).key; });
  const int wantRank = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
  int newRank = -1, newSize = -1;
  if (!ok(loomCommUserRank(*child, &newRank), "loomCommUserRank", *child) ||
      !ok(loomCommCount(*child, &newSize), "loomCommCount", *child))
    return false;
  EXPECT_EQ(newSize, static_cast<int>(members.size()));
  EXPECT_EQ(newRank, wantRank);
  int32_t sum = rank;
  std::vector<int32_t> order(members.size(), -1);
  const int32_t me = rank;
  bool good = ok(loomAllReduce(&sum, &sum, 1, loomInt32, loomSum, *child, nullptr), "loomAllReduce", *child);
  good = good && ok(loomAllGather(&me, order.data(), 1, loomInt32, *child, nullptr), "loomAllGather", *child);
  if (!good) return false;
  EXPECT_EQ(sum, std::accumulate(members.begin(), members.end(), 0));
  EXPECT_EQ(order, std::vector<int32_t>(members.begin(), members.end())) << "new ranks in (key, parent rank) order";
  return true;
}

bool destroy(loomComm_t c) { return c == nullptr || ok(loomCommDestroy(c), "loomCommDestroy", c); }

bool splitParityScenario(loomComm_t comm, int rank, int nranks) {
  loomComm_t child = nullptr;
  auto parity = [](int r) { return SplitExpectation{r % 2, r}; };
  if (!splitAndCheck(comm, rank, nranks, parity, &child, "split by parity")) return false;
  // Point to point on the split communicator too: a ring within it.
  int n = 0, r = 0;
  bool good = ok(loomCommCount(child, &n), "loomCommCount", child) && ok(loomCommUserRank(child, &r), "rank", child);
  auto out = dataFrom(rank, -1, 1000);
  std::vector<int32_t> in(1000, -1);
  good = good && ok(loomGroupStart(), "loomGroupStart", nullptr);
  if (good) {
    good = ok(loomSend(out.data(), out.size(), loomInt32, (r + 1) % n, child, nullptr), "loomSend", child) && good;
    good = ok(loomRecv(in.data(), in.size(), loomInt32, (r - 1 + n) % n, child, nullptr), "loomRecv", child) && good;
    good = ok(loomGroupEnd(), "loomGroupEnd", child) && good;
  }
  // The parent rank of my child-ring predecessor: same parity, two below (wrapping within the parity class).
  const int members = (nranks - rank % 2 + 1) / 2;
  const int prevParent = ((r - 1 + members) % members) * 2 + rank % 2;
  if (good) expectFrom(in, prevParent, -1, "ring on the parity communicator");
  return destroy(child) && good;
}

bool splitReversedKeysScenario(loomComm_t comm, int rank, int nranks) {
  loomComm_t child = nullptr;
  // Colors 0, 1, 2 by rank modulo 3 (at most three groups), keys reversed.
  auto reversed = [](int r) { return SplitExpectation{r % 3, 100 - r}; };
  return splitAndCheck(comm, rank, nranks, reversed, &child, "split by rank mod 3, reversed keys") && destroy(child);
}

bool splitAllNoColorButOneScenario(loomComm_t comm, int rank, int nranks) {
  loomComm_t child = nullptr;
  const int chosen = nranks - 1;
  // Other negative colors mean NOCOLOR too.
  auto one = [chosen](int r) { return SplitExpectation{r == chosen ? 5 : (r % 2 ? LOOM_SPLIT_NOCOLOR : -7), 0}; };
  return splitAndCheck(comm, rank, nranks, one, &child, "split: all NOCOLOR but one") && destroy(child);
}

bool splitOfSplitScenario(loomComm_t comm, int rank, int nranks) {
  loomComm_t half = nullptr, quarter = nullptr;
  // First by halves (lower/upper), then each half by parity of its new rank,
  // with equal keys: the order falls back to the rank in the half.
  auto halves = [nranks](int r) { return SplitExpectation{r < (nranks + 1) / 2 ? 0 : 1, 0}; };
  if (!splitAndCheck(comm, rank, nranks, halves, &half, "split by halves")) return false;
  int halfRank = 0, halfSize = 0;
  bool good = ok(loomCommUserRank(half, &halfRank), "rank", half) && ok(loomCommCount(half, &halfSize), "count", half);
  auto parity = [](int r) { return SplitExpectation{r % 2, 0}; };
  good = good && splitAndCheck(half, halfRank, halfSize, parity, &quarter, "split of the split by parity");
  return destroy(quarter) && destroy(half) && good;
}

// ---- Threads: one thread per rank of a clique ----

TEST_F(Threads, P2PBlockingPairs) {
  runOnRankThreads(nranks_, [&](int r) { blockingPairsScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, P2PGroupRing) {
  runOnRankThreads(nranks_, [&](int r) { groupRingScenario(comm(r), r, nranks_, false); });
  runOnRankThreads(nranks_, [&](int r) { groupRingScenario(comm(r), r, nranks_, true); });
}
TEST_F(Threads, P2PGroupRunsCollectivesFirst) {
  runOnRankThreads(nranks_, [&](int r) { groupWithCollectiveScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, P2PAllToAll) {
  runOnRankThreads(nranks_, [&](int r) { allToAllScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, P2PBarrier) {
  runOnRankThreads(nranks_, [&](int r) { barrierScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, P2PArgumentErrors) {
  runOnRankThreads(nranks_, [&](int r) { argumentErrorsScenario(comm(r), r, nranks_); });
}

// One thread drives every rank: only a group makes the ring possible.
TEST_F(Threads, P2POneThreadDrivesAllRanksInAGroup) {
  std::vector<std::vector<int32_t>> out(nranks_), in(nranks_, std::vector<int32_t>(kCount, -1));
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < nranks_; ++r) {
    out[r] = dataFrom(r, (r + 1) % nranks_, kCount);
    EXPECT_EQ(loomSend(out[r].data(), kCount, loomInt32, (r + 1) % nranks_, comm(r), nullptr), loomSuccess);
    EXPECT_EQ(loomRecv(in[r].data(), kCount, loomInt32, (r - 1 + nranks_) % nranks_, comm(r), nullptr), loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < nranks_; ++r) expectFrom(in[r], (r - 1 + nranks_) % nranks_, r, "one-thread ring");
}

TEST_F(Threads, P2PSizeMismatchNamesThePeer) {
  if (nranks_ < 2) GTEST_SKIP() << "needs two ranks (world size " << nranks_ << ")";
  runOnRankThreads(2, [&](int r) {
    std::vector<int32_t> buf(20);
    if (r == 0) {  // 10 elements fit one chunk: the sender finishes
      EXPECT_EQ(loomSend(buf.data(), 10, loomInt32, 1, comm(0), nullptr), loomSuccess) << loomGetLastError(comm(0));
      return;
    }
    expectError(loomRecv(buf.data(), 20, loomInt32, 0, comm(1), nullptr), loomRemoteError, comm(1),
                {"recv of 80 bytes from peer 0", "send of 40 bytes"});
  });
}

TEST_F(Threads, P2PGroupStreamsMustAgree) {
  loomStream_t s = nullptr;
  ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
  int32_t x = 0;
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  EXPECT_EQ(loomSend(&x, 1, loomInt32, 0, comm(0), nullptr), loomSuccess);
  expectError(loomRecv(&x, 1, loomInt32, 0, comm(0), s), loomInvalidUsage, comm(0), {"loomRecv", "stream"});
  EXPECT_EQ(loomRecv(&x, 1, loomInt32, 0, comm(0), nullptr), loomSuccess);
  EXPECT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
}

TEST_F(Threads, SplitByParity) {
  runOnRankThreads(nranks_, [&](int r) { splitParityScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, SplitReversedKeys) {
  runOnRankThreads(nranks_, [&](int r) { splitReversedKeysScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, SplitAllNoColorButOne) {
  runOnRankThreads(nranks_, [&](int r) { splitAllNoColorButOneScenario(comm(r), r, nranks_); });
}
TEST_F(Threads, SplitOfSplit) {
  runOnRankThreads(nranks_, [&](int r) { splitOfSplitScenario(comm(r), r, nranks_); });
}

// One thread splits every communicator of the clique inside a group.
TEST_F(Threads, SplitInsideAGroup) {
  std::vector<loomComm_t> children(nranks_, nullptr);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < nranks_; ++r)
    EXPECT_EQ(loomCommSplit(comm(r), r % 2 ? LOOM_SPLIT_NOCOLOR : 0, -r, &children[r]), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  const int evens = (nranks_ + 1) / 2;
  runOnRankThreads(nranks_, [&](int r) {
    if (r % 2) {
      EXPECT_EQ(children[r], nullptr);
      return;
    }
    int newRank = -1, newSize = -1;
    EXPECT_EQ(loomCommUserRank(children[r], &newRank), loomSuccess);
    EXPECT_EQ(loomCommCount(children[r], &newSize), loomSuccess);
    EXPECT_EQ(newSize, evens);
    EXPECT_EQ(newRank, evens - 1 - r / 2) << "keys -r reverse the order";
    EXPECT_TRUE(destroy(children[r]));
  });
}

// ---- Processes: this process is one rank of a loomrun job ----

TEST_F(Process, P2PBlockingPairs) { markBrokenUnless(blockingPairsScenario(world_->comm, world_->rank, world_->nranks)); }
TEST_F(Process, P2PGroupRing) {
  markBrokenUnless(groupRingScenario(world_->comm, world_->rank, world_->nranks, false) &&
                   groupRingScenario(world_->comm, world_->rank, world_->nranks, true));
}
TEST_F(Process, P2PGroupRunsCollectivesFirst) {
  markBrokenUnless(groupWithCollectiveScenario(world_->comm, world_->rank, world_->nranks));
}
TEST_F(Process, P2PAllToAll) { markBrokenUnless(allToAllScenario(world_->comm, world_->rank, world_->nranks)); }
TEST_F(Process, P2PBarrier) { markBrokenUnless(barrierScenario(world_->comm, world_->rank, world_->nranks)); }
TEST_F(Process, P2PArgumentErrors) { argumentErrorsScenario(world_->comm, world_->rank, world_->nranks); }
TEST_F(Process, SplitByParity) { markBrokenUnless(splitParityScenario(world_->comm, world_->rank, world_->nranks)); }
TEST_F(Process, SplitReversedKeys) {
  markBrokenUnless(splitReversedKeysScenario(world_->comm, world_->rank, world_->nranks));
}
TEST_F(Process, SplitAllNoColorButOne) {
  markBrokenUnless(splitAllNoColorButOneScenario(world_->comm, world_->rank, world_->nranks));
}
TEST_F(Process, SplitOfSplit) { markBrokenUnless(splitOfSplitScenario(world_->comm, world_->rank, world_->nranks)); }

}  // namespace
}  // namespace loom::integration
