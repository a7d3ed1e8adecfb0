// The C API's lifecycle and error channel, and the C++ wrapper over it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "loom/loom.hpp"

namespace {

std::vector<loomComm_t> clique(int n) {
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  EXPECT_EQ(loomCommInitAll(comms.data(), n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  return comms;
}

void destroyAll(std::vector<loomComm_t>& comms) {
  for (auto c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

TEST(Api, VersionAndErrorStrings) {
  int v = 0;
  EXPECT_EQ(loomGetVersion(&v), loomSuccess);
  EXPECT_EQ(v, LOOM_VERSION_CODE);
  EXPECT_STREQ(loomGetErrorString(loomSuccess), "success");
  EXPECT_STREQ(loomGetErrorString(loomTimeout), "timeout");
  EXPECT_STREQ(loomGetErrorString(static_cast<loomResult_t>(99)), "unknown result code");
  EXPECT_EQ(loomGetVersion(nullptr), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("version"), std::string::npos);
}

TEST(Api, CountRankAndDestroyedCommIsRejected) {
  auto comms = clique(3);
  for (int i = 0; i < 3; ++i) {
    int n = 0, r = -1;
    EXPECT_EQ(loomCommCount(comms[i], &n), loomSuccess);
    EXPECT_EQ(loomCommUserRank(comms[i], &r), loomSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(r, i);
  }
  loomComm_t gone = comms[0];
  destroyAll(comms);
  int n = 0;
  EXPECT_EQ(loomCommCount(gone, &n), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("not a live communicator"), std::string::npos);
  float x = 0;
  EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat, loomSum, gone, nullptr), loomInvalidArgument);
}

// Calls on a handle that recently passed the registry take a lock-free path
// (src/api/handles.h); once destroyed, such a handle must be refused exactly
// like one that never existed, however many handles came and went since.
TEST(Api, RecentlyUsedHandlesAreRefusedOnceDestroyed) {
  std::vector<loomComm_t> gone;
  for (int round = 0; round < 12; ++round) {
    auto comms = clique(1);
    int n = 0;
    float x = 1.0f;
    EXPECT_EQ(loomCommCount(comms[0], &n), loomSuccess);
    EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat, loomSum, comms[0], nullptr), loomSuccess);
    EXPECT_EQ(x, 1.0f);
    gone.push_back(comms[0]);
    destroyAll(comms);
    // The freshest handle first (still in the recent list), then all older ones.
    for (auto it = gone.rbegin(); it != gone.rend(); ++it) {
      float y = 0;
      EXPECT_EQ(loomAllReduce(&y, &y, 1, loomFloat, loomSum, *it, nullptr), loomInvalidArgument) << "round " << round;
      EXPECT_NE(std::string(loomGetLastError(nullptr)).find("not a live communicator"), std::string::npos)
          << loomGetLastError(nullptr);
    }
  }
  // A live handle next to all those dead ones still works.
  auto live = clique(1);
  int n = 0;
  EXPECT_EQ(loomCommCount(live[0], &n), loomSuccess);
  EXPECT_EQ(n, 1);
  destroyAll(live);
}

// A stream that was just used (so its handle is in the lookup's fast path)
// is refused once destroyed, by address only: nothing reads its memory.
TEST(Api, RecentlyUsedStreamsAreRefusedOnceDestroyed) {
  auto comms = clique(1);
  std::vector<loomStream_t> gone;
  for (int round = 0; round < 12; ++round) {
    loomStream_t stream = nullptr;
    ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
    float x = 2.0f;
    EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat, loomSum, comms[0], stream), loomSuccess);
    EXPECT_EQ(loomStreamSynchronize(stream), loomSuccess);
    EXPECT_EQ(x, 2.0f);
    gone.push_back(stream);
    ASSERT_EQ(loomStreamDestroy(stream), loomSuccess);
    for (auto it = gone.rbegin(); it != gone.rend(); ++it) {
      float y = 0;
      EXPECT_EQ(loomAllReduce(&y, &y, 1, loomFloat, loomSum, comms[0], *it), loomInvalidArgument) << "round " << round;
      EXPECT_NE(std::string(loomGetLastError(nullptr)).find("not a live stream"), std::string::npos)
          << loomGetLastError(nullptr);
    }
  }
  destroyAll(comms);
}

// One thread keeps calling on a handle while another destroys it: every call
// either runs or is refused, nothing touches freed memory (run under ASan).
TEST(Api, CallsRacingDestroyEitherRunOrAreRefused) {
  for (int round = 0; round < 20; ++round) {
    auto comms = clique(1);
    loomComm_t comm = comms[0];
    int ok = 0, refused = 0;
    std::thread caller([&] {
      for (int i = 0; i < 100000 && refused == 0; ++i) {
        int n = 0;
        const loomResult_t r = loomCommCount(comm, &n);
        if (r == loomSuccess) ++ok;
        else if (r == loomInvalidArgument || r == loomInvalidUsage) ++refused;
        else ADD_FAILURE() << "unexpected " << loomGetErrorString(r) << ": " << loomGetLastError(nullptr);
      }
    });
    std::this_thread::sleep_for(std::chrono::microseconds(50 * round));
    EXPECT_EQ(loomCommDestroy(comm), loomSuccess) << loomGetLastError(nullptr);
    caller.join();
    EXPECT_GT(ok + refused, 0);
  }
}

TEST(Api, OneThreadCreatesAndDrivesACliqueInsideGroups) {
  // NCCL's single-thread multi-rank pattern: inits and collectives deferred
  // to loomGroupEnd, where they run concurrently.
  const int n = 4;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<loomComm_t> comms(n);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int i = 0; i < n; ++i) ASSERT_EQ(loomCommInitRank(&comms[i], n, id, i), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);

  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(1000));
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 1000; ++k) bufs[i][k] = i * k;
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(loomAllReduce(bufs[i].data(), bufs[i].data(), 1000, loomInt32, loomSum, comms[i], nullptr), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 1000; ++k) ASSERT_EQ(bufs[i][k], 6 * k) << "rank " << i;
  destroyAll(comms);
}

TEST(Api, AFailedInitInsideAGroupLeavesNoHandle) {
  // As outside a group, a communicator that could not be created is NULL:
  // the caller must not be left with a handle that names nothing.
  loomUniqueId good, bad;
  ASSERT_EQ(loomGetUniqueId(&good), loomSuccess);
  std::memset(&bad, 0, sizeof(bad));  // no bootstrap root behind it
  loomComm_t created = nullptr, failed = nullptr;
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomCommInitRank(&created, 1, good, 0), loomSuccess);
  ASSERT_EQ(loomCommInitRank(&failed, 1, bad, 0), loomSuccess);
  EXPECT_NE(failed, nullptr);  // deferred: filled in at loomGroupEnd
  EXPECT_NE(loomGroupEnd(), loomSuccess);
  EXPECT_FALSE(std::string(loomGetLastError(nullptr)).empty());
  EXPECT_EQ(failed, nullptr);
  ASSERT_NE(created, nullptr);
  float x = 2;
  EXPECT_EQ(loomAllReduce(&x, &x, 1, loomFloat, loomSum, created, nullptr), loomSuccess)
      << loomGetLastError(created);
  EXPECT_EQ(x, 2.0f);
  EXPECT_EQ(loomCommDestroy(created), loomSuccess);
}

TEST(Api, GroupMisuse) {
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("without a matching loomGroupStart"), std::string::npos);
  auto comms = clique(1);
  float x = 1;
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomAllReduce(&x, &x, 1, loomFloat, loomSum, comms[0], nullptr), loomSuccess);
  EXPECT_EQ(loomCommDestroy(comms[0]), loomInvalidUsage);  // work of it is pending in the group
  ASSERT_EQ(loomGroupEnd(), loomSuccess);
  destroyAll(comms);
}

TEST(Api, StreamsRunInOrderAcrossCommunicators) {
  // Two cliques of two ranks; each rank thread puts an allreduce on clique A
  // then one on clique B that consumes A's result, on one stream.
  auto a = clique(2);
  auto b = clique(2);
  std::vector<std::thread> threads;
  std::vector<int64_t> results(2);
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      loomStream_t s;
      ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
      std::vector<int64_t> x(50000, r + 1), y(50000, 0), z(50000, 0);
      ASSERT_EQ(loomAllReduce(x.data(), y.data(), x.size(), loomInt64, loomSum, a[r], s), loomSuccess);
      ASSERT_EQ(loomAllReduce(y.data(), z.data(), y.size(), loomInt64, loomProd, b[r], s), loomSuccess);
      loomResult_t q = loomStreamQuery(s);
      EXPECT_TRUE(q == loomSuccess || q == loomInProgress);
      ASSERT_EQ(loomStreamSynchronize(s), loomSuccess);
      EXPECT_EQ(loomStreamQuery(s), loomSuccess);
      results[r] = z[49999];
      EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0], 9);  // (1+2) * (1+2)
  EXPECT_EQ(results[1], 9);
  destroyAll(a);
  destroyAll(b);
}

// A rank alone has no peer to wait for, so a small call on an idle stream
// runs on the calling thread: done when it returns, with no query or
// synchronize needed. A large one still goes to the stream's worker.
TEST(Api, SmallStreamCallOfARankAloneIsDoneWhenItReturns) {
  auto comms = clique(1);
  loomStream_t s = nullptr;
  ASSERT_EQ(loomStreamCreate(&s), loomSuccess);
  for (int k = 0; k < 200; ++k) {
    const int64_t in[2] = {k, -3 * k};
    int64_t out[2] = {-1, -1};
    ASSERT_EQ(loomAllReduce(in, out, 2, loomInt64, loomMax, comms[0], s), loomSuccess) << "call " << k;
    ASSERT_EQ(loomStreamQuery(s), loomSuccess) << "call " << k << " was still running when it returned";
    EXPECT_EQ(out[0], k) << "call " << k;
    EXPECT_EQ(out[1], -3 * k) << "call " << k;
  }
  std::vector<float> big(1 << 20), bigOut(1 << 20, 0.0f);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000);
  ASSERT_EQ(loomAllReduce(big.data(), bigOut.data(), big.size(), loomFloat32, loomSum, comms[0], s), loomSuccess);
  ASSERT_EQ(loomStreamSynchronize(s), loomSuccess);
  EXPECT_EQ(bigOut, big);
  EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  destroyAll(comms);
}

TEST(Api, AsyncErrorIsSuccessOnHealthyComm) {
  auto comms = clique(1);
  loomResult_t e = loomInternalError;
  EXPECT_EQ(loomCommGetAsyncError(comms[0], &e), loomSuccess);
  EXPECT_EQ(e, loomSuccess);
  EXPECT_EQ(loomCommAbort(comms[0]), loomSuccess);
}

TEST(Api, UniqueIdFromEnvExplainsWhatIsMissing) {
  const char* all[] = {"RANK", "WORLD_SIZE", "MASTER_PORT", "LOOM_JOB_SECRET", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK"};
  for (const char* v : all) unsetenv(v);
  auto lastError = [] { return std::string(loomGetLastError(nullptr)); };
  loomUniqueId id;
  // No launcher at all: it says which launchers it knows.
  EXPECT_EQ(loomGetUniqueIdFromEnv(&id, nullptr, nullptr), loomInvalidArgument);
  EXPECT_NE(lastError().find("SLURM_"), std::string::npos) << lastError();
  // A rank without a size.
  setenv("RANK", "1", 1);
  EXPECT_EQ(loomGetUniqueIdFromEnv(&id, nullptr, nullptr), loomInvalidArgument);
  EXPECT_NE(lastError().find("WORLD_SIZE"), std::string::npos) << lastError();
  // loomrun's secret without its port.
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOOM_JOB_SECRET", "00112233445566778899aabbccddeeff", 1);
  EXPECT_EQ(loomGetUniqueIdFromEnv(&id, nullptr, nullptr), loomInvalidArgument);
  EXPECT_NE(lastError().find("MASTER_PORT"), std::string::npos) << lastError();
  // rank >= size.
  setenv("MASTER_PORT", "29999", 1);
  setenv("RANK", "5", 1);
  EXPECT_EQ(loomGetUniqueIdFromEnv(&id, nullptr, nullptr), loomInvalidArgument);
  EXPECT_NE(lastError().find("RANK"), std::string::npos) << lastError();
  for (const char* v : all) unsetenv(v);
}

TEST(Api, LaunchEnvReportsThePlaceOrNoLauncher) {
  const char* all[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                       "OMPI_COMM_WORLD_LOCAL_RANK"};
  for (const char* v : all) unsetenv(v);
  int rank = -1, nranks = -1, local = -1;
  const char* launcher = nullptr;
  ASSERT_EQ(loomGetLaunchEnv(&rank, &nranks, &local, &launcher), loomSuccess);
  EXPECT_EQ(nranks, 0);
  EXPECT_STREQ(launcher, "");
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  ASSERT_EQ(loomGetLaunchEnv(&rank, &nranks, &local, &launcher), loomSuccess);
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(nranks, 4);
  EXPECT_EQ(local, 0);
  EXPECT_STREQ(launcher, "Open MPI");
  setenv("OMPI_COMM_WORLD_RANK", "4", 1);
  EXPECT_EQ(loomGetLaunchEnv(&rank, &nranks, &local, &launcher), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(nullptr)).find("OMPI_COMM_WORLD_RANK"), std::string::npos);
  for (const char* v : all) unsetenv(v);
}

TEST(Api, GarbageUniqueIdIsRejected) {
  loomUniqueId id;
  std::memset(id.internal, 0x5a, sizeof(id.internal));
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRank(&comm, 2, id, 0), loomInvalidArgument);
  EXPECT_EQ(comm, nullptr);
}

TEST(CppWrapper, AllReduceBroadcastAndErrors) {
  auto raw = clique(2);
  // Adopt nothing: the wrapper creates its own communicators from an id.
  destroyAll(raw);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      loompp::Comm comm(2, id, r);
      EXPECT_EQ(comm.rank(), r);
      EXPECT_EQ(comm.size(), 2);
      std::vector<double> v(10, r + 0.5);
      comm.allReduce(std::span<double>(v), loomMax);
      EXPECT_EQ(v[9], 1.5);
      loompp::Stream s;
      std::vector<int32_t> w(5, r == 1 ? 7 : 0);
      comm.broadcast(std::span<int32_t>(w), 1, &s);
      s.synchronize();
      EXPECT_EQ(w[4], 7);
      try {
        comm.broadcast(std::span<int32_t>(w), 5);
        ADD_FAILURE() << "root 5 accepted";
      } catch (const loompp::Error& e) {
        EXPECT_EQ(e.code(), loomInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("root 5"), std::string::npos) << e.what();
      }
    });
  for (auto& t : threads) t.join();
}

TEST(CppWrapper, PointToPointAllToAllBarrierAndSplit) {
  constexpr int kRanks = 3;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      loompp::Comm comm(kRanks, id, r);
      // A ring exchange in both directions at once: only safe inside a group.
      const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
      std::vector<int64_t> out(1000, 100 * r), fromPrev(1000, -1);
      {
        loompp::Group group;
        comm.send(std::span<const int64_t>(out), next);
        comm.recv(std::span<int64_t>(fromPrev), prev);
        group.end();
      }
      EXPECT_EQ(fromPrev.front(), 100 * prev);
      EXPECT_EQ(fromPrev.back(), 100 * prev);

      std::vector<int32_t> blocks(2 * kRanks), got(2 * kRanks, -1);
      for (int j = 0; j < kRanks; ++j) blocks[2 * j] = blocks[2 * j + 1] = 10 * r + j;  // to rank j
      comm.allToAll(std::span<const int32_t>(blocks), std::span<int32_t>(got));
      for (int i = 0; i < kRanks; ++i) EXPECT_EQ(got[2 * i + 1], 10 * i + r) << "block from rank " << i;
      comm.barrier();

      // Even ranks in one communicator ordered by descending rank, odd ranks alone.
      loompp::Comm half = comm.split(r % 2, -r);
      ASSERT_TRUE(half.valid());
      const int expectedSize = r % 2 == 0 ? (kRanks + 1) / 2 : kRanks / 2;
      EXPECT_EQ(half.size(), expectedSize);
      if (r % 2 == 0) EXPECT_EQ(half.rank(), (kRanks - 1 - r) / 2) << "key -rank reverses the order";
      std::vector<int32_t> one(1, r);
      half.allReduce(std::span<int32_t>(one));
      EXPECT_EQ(one[0], r % 2 == 0 ? 0 + 2 : 1);
      loompp::Comm none = comm.split(r == 0 ? LOOM_SPLIT_NOCOLOR : 1, 0);
      EXPECT_EQ(none.valid(), r != 0);
    });
  for (auto& t : threads) t.join();
}

}  // namespace
