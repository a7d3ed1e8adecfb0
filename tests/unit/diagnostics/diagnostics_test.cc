// LOOM_CHECK, the flight recorder (dumps on timeout, loomCommAbort and
// LOOM_DUMP_ON_SIGNAL) and LOOM_TRACE, through the public API. The expected
// messages are spelled out here, not built with Loom's own formatting.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/diagnostics/diagnostics_harness.h"

namespace loom::diagtest {
namespace {

enum class Kind { kAllReduce, kBroadcast, kReduce, kReduceScatter, kAllGather, kAllToAll, kBarrier };

// One rank's call: what it passes to Loom.
struct Call {
  Kind kind;
  size_t count = 0;
  loomDataType_t dtype = loomFloat32;
  loomRedOp_t op = loomSum;
  int root = 0;
};

// Buffers big enough for any call here, at any rank count used.
constexpr size_t kBufferBytes = 1 << 16;

loomResult_t issue(const Call& c, loomComm_t comm, const void* send, void* recv) {
  switch (c.kind) {
    case Kind::kAllReduce: return loomAllReduce(send, recv, c.count, c.dtype, c.op, comm, nullptr);
    case Kind::kBroadcast: return loomBroadcast(send, recv, c.count, c.dtype, c.root, comm, nullptr);
    case Kind::kReduce: return loomReduce(send, recv, c.count, c.dtype, c.op, c.root, comm, nullptr);
    case Kind::kReduceScatter: return loomReduceScatter(send, recv, c.count, c.dtype, c.op, comm, nullptr);
    case Kind::kAllGather: return loomAllGather(send, recv, c.count, c.dtype, comm, nullptr);
    case Kind::kAllToAll: return loomAllToAll(send, recv, c.count, c.dtype, comm, nullptr);
    case Kind::kBarrier: return loomBarrier(comm, nullptr);
  }
  return loomInternalError;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

const char* const kPrefix = "LOOM_CHECK: ranks called different collectives: ";

std::string msg(const std::string& body) { return kPrefix + body; }

// ---- LOOM_CHECK: calls that match run normally and give right results ----

TEST(LoomCheck, MatchingCallsOfEveryCollectiveRunAndAreCorrect) {
  ScopedEnv env({{"LOOM_CHECK", "1"}, {"LOOM_TIMEOUT", "30"}});
  constexpr int n = 3;
  constexpr size_t count = 1000;
  std::atomic<int> failures{0};
  runThreads(n, [&](int rank, loomComm_t comm) {
    auto fail = [&](const char* what) {
      ADD_FAILURE() << "rank " << rank << ": " << what << ": " << loomGetLastError(comm);
      ++failures;
    };
    std::vector<float> in(count * n), out(count * n);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rank * 1000 + static_cast<int>(i % 997));
    // all-reduce: sum over ranks of rank*1000 + i%997
    if (loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr) != loomSuccess) fail("allreduce");
    for (size_t i = 0; i < count; ++i)
      if (out[i] != static_cast<float>(3000 + 3 * static_cast<int>(i % 997))) return fail("allreduce result");
    if (loomBroadcast(in.data(), out.data(), count, loomFloat32, 1, comm, nullptr) != loomSuccess) fail("broadcast");
    for (size_t i = 0; i < count; ++i)
      if (out[i] != static_cast<float>(1000 + static_cast<int>(i % 997))) return fail("broadcast result");
    if (loomReduce(in.data(), out.data(), count, loomFloat32, loomMax, 2, comm, nullptr) != loomSuccess) fail("reduce");
    if (rank == 2)
      for (size_t i = 0; i < count; ++i)
        if (out[i] != static_cast<float>(2000 + static_cast<int>(i % 997))) return fail("reduce result");
    if (loomReduceScatter(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr) != loomSuccess)
      fail("reducescatter");
    for (size_t i = 0; i < count; ++i) {
      const size_t j = static_cast<size_t>(rank) * count + i;
      if (out[i] != static_cast<float>(3000 + 3 * static_cast<int>(j % 997))) return fail("reducescatter result");
    }
    if (loomAllGather(in.data(), out.data(), count, loomFloat32, comm, nullptr) != loomSuccess) fail("allgather");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        if (out[static_cast<size_t>(r) * count + i] != static_cast<float>(r * 1000 + static_cast<int>(i % 997)))
          return fail("allgather result");
    if (loomAllToAll(in.data(), out.data(), count, loomFloat32, comm, nullptr) != loomSuccess) fail("alltoall");
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) {
        const size_t j = static_cast<size_t>(rank) * count + i;  // block `rank` of rank r's input
        if (out[static_cast<size_t>(r) * count + i] != static_cast<float>(r * 1000 + static_cast<int>(j % 997)))
          return fail("alltoall result");
      }
    if (loomBarrier(comm, nullptr) != loomSuccess) fail("barrier");
    loomResult_t async = loomSuccess;
    if (loomCommGetAsyncError(comm, &async) != loomSuccess || async != loomSuccess) fail("async error");
  });
  EXPECT_EQ(failures.load(), 0);
}

// ---- LOOM_CHECK: each kind of mismatch fails every rank with one message ----

struct MismatchCase {
  const char* name;
  std::vector<Call> calls;  // per rank
  const char* expected;     // the message every rank must report
};

class LoomCheckMismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(LoomCheckMismatch, FailsEveryRankWithTheSameMessageAndWritesNothing) {
  const MismatchCase& tc = GetParam();
  ScopedEnv env({{"LOOM_CHECK", "1"}, {"LOOM_TIMEOUT", "30"}});
  const int n = static_cast<int>(tc.calls.size());
  std::vector<loomResult_t> results(static_cast<size_t>(n), loomSuccess), after(results);
  std::vector<std::string> messages(static_cast<size_t>(n));
  // One char per rank, not vector<bool>: ranks are threads writing their own
  // entries at once, and vector<bool> packs them into shared words.
  std::vector<char> untouched(static_cast<size_t>(n), 0);
  const auto start = std::chrono::steady_clock::now();
  runThreads(n, [&](int rank, loomComm_t comm) {
    std::vector<unsigned char> send(kBufferBytes, 0x11), recv(kBufferBytes, 0xAB);
    // One matching call first, so sequence numbers are past zero.
    std::vector<float> a(8, 1.0f), b(8);
    if (loomAllReduce(a.data(), b.data(), 8, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return;
    results[rank] = issue(tc.calls[static_cast<size_t>(rank)], comm, send.data(), recv.data());
    messages[rank] = loomGetLastError(comm);
    untouched[rank] = std::all_of(recv.begin(), recv.end(), [](unsigned char c) { return c == 0xAB; }) &&
                      std::all_of(send.begin(), send.end(), [](unsigned char c) { return c == 0x11; });
    // Sticky: the communicator stays failed.
    after[rank] = loomAllReduce(a.data(), b.data(), 8, loomFloat32, loomSum, comm, nullptr);
  });
  EXPECT_LT(secondsSince(start), 10.0) << "a mismatch must fail at once, not wait for LOOM_TIMEOUT";
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r], loomInvalidUsage) << "rank " << r;
    EXPECT_EQ(messages[r], tc.expected) << "rank " << r;
    EXPECT_TRUE(untouched[r]) << "rank " << r << " had its buffers written";
    EXPECT_NE(after[r], loomSuccess) << "rank " << r << ": the failure must be sticky";
  }
}


// Stored as static strings so the parameter's const char* stays valid.
const std::string kTypeMsg = msg("rank 0: allreduce count=1024 float sum seq=1; rank 1: broadcast count=1024 float root=0 seq=1");
const std::string kCountMsg = msg("rank 0: allreduce count=1024 float sum seq=1; rank 1: allreduce count=1000 float sum seq=1");
const std::string kDtypeMsg = msg("rank 0: allreduce count=1024 float sum seq=1; rank 1: allreduce count=1024 int32 sum seq=1");
const std::string kOpMsg = msg("rank 0: allreduce count=1024 float sum seq=1; rank 1: allreduce count=1024 float max seq=1");
const std::string kRootMsg = msg("rank 0: broadcast count=256 double root=0 seq=1; rank 1: broadcast count=256 double root=1 seq=1");
const std::string kThreeMsg = msg("rank 0: reduce count=64 int64 min root=0 seq=1; rank 1: reduce count=64 int64 min root=0 seq=1; "
                                  "rank 2: reduce count=64 int64 min root=2 seq=1");
const std::string kAllToAllMsg = msg("rank 0: alltoall count=16 float seq=1; rank 1: barrier seq=1");
const std::string kGatherMsg = msg("rank 0: allgather count=100 uint8 seq=1; rank 1: reducescatter count=100 uint8 sum seq=1");

INSTANTIATE_TEST_SUITE_P(
    Kinds, LoomCheckMismatch,
    ::testing::Values(
        MismatchCase{"type", {{Kind::kAllReduce, 1024}, {Kind::kBroadcast, 1024}}, kTypeMsg.c_str()},
        MismatchCase{"count", {{Kind::kAllReduce, 1024}, {Kind::kAllReduce, 1000}}, kCountMsg.c_str()},
        MismatchCase{"dtype", {{Kind::kAllReduce, 1024}, {Kind::kAllReduce, 1024, loomInt32}}, kDtypeMsg.c_str()},
        MismatchCase{"op", {{Kind::kAllReduce, 1024}, {Kind::kAllReduce, 1024, loomFloat32, loomMax}}, kOpMsg.c_str()},
        MismatchCase{"root",
                     {{Kind::kBroadcast, 256, loomFloat64, loomSum, 0}, {Kind::kBroadcast, 256, loomFloat64, loomSum, 1}},
                     kRootMsg.c_str()},
        MismatchCase{"root_three_ranks",
                     {{Kind::kReduce, 64, loomInt64, loomMin, 0},
                      {Kind::kReduce, 64, loomInt64, loomMin, 0},
                      {Kind::kReduce, 64, loomInt64, loomMin, 2}},
                     kThreeMsg.c_str()},
        MismatchCase{"alltoall_vs_barrier", {{Kind::kAllToAll, 16}, {Kind::kBarrier}}, kAllToAllMsg.c_str()},
        MismatchCase{"allgather_vs_reducescatter",
                     {{Kind::kAllGather, 100, loomUint8}, {Kind::kReduceScatter, 100, loomUint8}},
                     kGatherMsg.c_str()}),
    [](const ::testing::TestParamInfo<MismatchCase>& info) { return std::string(info.param.name); });

// Ranks as processes (shared memory between address spaces): same message.
TEST(LoomCheck, MismatchAcrossProcessesFailsEveryRankWithTheSameMessage) {
  ScopedEnv env({{"LOOM_CHECK", "1"}, {"LOOM_TIMEOUT", "30"}});
  const auto start = std::chrono::steady_clock::now();
  auto pids = forkRanks(2, [](int rank, loomComm_t comm) {
    std::vector<double> send(4096, 2.0), recv(4096, -7.0);
    if (loomAllReduce(send.data(), recv.data(), 16, loomFloat64, loomSum, comm, nullptr) != loomSuccess) return 1;
    std::fill(recv.begin(), recv.end(), -7.0);
    const loomResult_t r = rank == 0 ? loomAllReduce(send.data(), recv.data(), 4096, loomFloat64, loomSum, comm, nullptr)
                                     : loomReduce(send.data(), recv.data(), 4096, loomFloat64, loomSum, 1, comm, nullptr);
    const std::string expected = msg("rank 0: allreduce count=4096 double sum seq=1; rank 1: reduce count=4096 double sum "
                                     "root=1 seq=1");
    if (r != loomInvalidUsage || expected != loomGetLastError(comm)) {
      std::fprintf(stderr, "rank %d: result %d, message '%s'\n", rank, static_cast<int>(r), loomGetLastError(comm));
      return 2;
    }
    for (double v : recv)
      if (v != -7.0) return 3;  // written although the calls did not match
    return 0;
  });
  EXPECT_EQ(waitRanks(pids, 30), (std::vector<int>{0, 0}));
  EXPECT_LT(secondsSince(start), 10.0);
}

// ---- A rank that calls nothing: timeout naming it, and the dump shows where ----

TEST(LoomCheck, RankThatCallsNothingIsNamedInTheTimeout) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_CHECK", "1"}, {"LOOM_TIMEOUT", "1"}, {"LOOM_DUMP_DIR", dir}});
  std::vector<loomResult_t> results(3, loomSuccess);
  std::vector<std::string> messages(3);
  runThreads(3, [&](int rank, loomComm_t comm) {
    std::vector<float> a(64, 1.0f), b(64);
    if (loomAllReduce(a.data(), b.data(), 64, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return;
    if (rank == 2) return;  // skips the second all-reduce
    results[rank] = loomAllReduce(a.data(), b.data(), 64, loomFloat32, loomSum, comm, nullptr);
    messages[rank] = loomGetLastError(comm);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], loomTimeout) << "rank " << r;
    EXPECT_NE(messages[r].find("LOOM_CHECK on rank " + std::to_string(r) + ": timed out"), std::string::npos)
        << messages[r];
    EXPECT_NE(messages[r].find("rank(s) 2 did not show up"), std::string::npos) << messages[r];
    const std::string dump = dumpOfRank(dir, r);
    const size_t stuck = dump.find("=> stuck in op 1: allreduce count=64 float sum seq=1 (");
    ASSERT_NE(stuck, std::string::npos) << dump;
    EXPECT_NE(dump.find("in LOOM_CHECK exchange, 0 chunks moved", stuck), std::string::npos) << dump;
    EXPECT_NE(dump.find("op 0 allreduce count=64 float sum seq=0: state=done"), std::string::npos) << dump;
  }
  removeTree(dir);
}

// ---- Flight recorder ----

// ---- Every way to run an operation passes LOOM_CHECK and the recorder ----

// Stream-queued calls take the executor's worker, not the caller's thread:
// a mismatch there fails every rank alike, before any data moves.
TEST(LoomCheck, MismatchOnAStreamFailsEveryRankAtSynchronize) {
  ScopedEnv env({{"LOOM_CHECK", "1"}, {"LOOM_TIMEOUT", "30"}});
  std::vector<loomResult_t> synced(2, loomSuccess), async(2, loomSuccess);
  std::vector<char> untouched(2, 0);
  runThreads(2, [&](int rank, loomComm_t comm) {
    loomStream_t stream = nullptr;
    ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
    // One matching call first: the stream path runs and checks it.
    std::vector<float> a(8, 1.0f), b(8, 0.0f);
    ASSERT_EQ(loomAllReduce(a.data(), b.data(), 8, loomFloat32, loomSum, comm, stream), loomSuccess);
    ASSERT_EQ(loomStreamSynchronize(stream), loomSuccess);
    EXPECT_EQ(b, std::vector<float>(8, 2.0f)) << "rank " << rank;
    // Rank 0 queues an all-to-all, rank 1 a barrier.
    std::vector<float> send(32, 1.0f), recv(32, -1.0f);
    if (rank == 0) EXPECT_EQ(loomAllToAll(send.data(), recv.data(), 16, loomFloat32, comm, stream), loomSuccess);
    else EXPECT_EQ(loomBarrier(comm, stream), loomSuccess);
    synced[rank] = loomStreamSynchronize(stream);
    (void)loomCommGetAsyncError(comm, &async[rank]);
    untouched[rank] = std::all_of(recv.begin(), recv.end(), [](float v) { return v == -1.0f; });
    EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(synced[r], loomInvalidUsage) << "rank " << r;
    EXPECT_EQ(async[r], loomInvalidUsage) << "rank " << r;
    EXPECT_TRUE(untouched[r]) << "rank " << r << " had its buffers written";
  }
}

TEST(FlightRecorder, AbortDumpListsTheCollectivesRun) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_DUMP_DIR", dir}, {"LOOM_CHECK", "0"}});
  runThreads(
      2,
      [&](int rank, loomComm_t comm) {
        std::vector<float> a(8, 1.0f), b(8);
        EXPECT_EQ(loomAllReduce(a.data(), b.data(), 8, loomFloat32, loomSum, comm, nullptr), loomSuccess);
        EXPECT_EQ(loomBroadcast(a.data(), b.data(), 8, loomFloat32, 1, comm, nullptr), loomSuccess);
        EXPECT_EQ(loomBarrier(comm, nullptr), loomSuccess);
        EXPECT_EQ(loomCommAbort(comm), loomSuccess);
      },
      /*destroy=*/false);
  for (int r = 0; r < 2; ++r) {
    const std::string dump = dumpOfRank(dir, r);
    EXPECT_NE(dump.find("Loom flight recorder (loomCommAbort): rank " + std::to_string(r) + " of 2"), std::string::npos)
        << dump;
    EXPECT_NE(dump.find("op 0 allreduce count=8 float sum seq=0: state=done algo="), std::string::npos) << dump;
    EXPECT_NE(dump.find("op 1 broadcast count=8 float root=1 seq=1: state=done"), std::string::npos) << dump;
    EXPECT_NE(dump.find("op 2 barrier seq=2: state=done algo=dissemination/Simple peers=all 2 ranks"),
              std::string::npos)
        << dump;
    EXPECT_NE(dump.find("=> idle"), std::string::npos) << dump;
  }
  removeTree(dir);
}

// Blocking calls run on the caller's thread, recorded in one step
// (src/comm/op_runner.cc), unless queued work is ahead of them: either way the
// record keeps call order, and every entry has its times and algorithm.
TEST(FlightRecorder, BlockingCallsAroundQueuedOnesAreRecordedInCallOrder) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_DUMP_DIR", dir}, {"LOOM_CHECK", "0"}});
  constexpr size_t kLarge = 1 << 16;
  runThreads(
      2,
      [&](int rank, loomComm_t comm) {
        loomStream_t stream = nullptr;
        ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
        std::vector<float> small(4, static_cast<float>(rank + 1)), sum(4, 0.0f);
        std::vector<float> large(kLarge, 1.0f), largeSum(kLarge, 0.0f);
        EXPECT_EQ(loomAllReduce(small.data(), sum.data(), 4, loomFloat32, loomSum, comm, nullptr), loomSuccess);
        EXPECT_EQ(loomAllReduce(large.data(), largeSum.data(), kLarge, loomFloat32, loomSum, comm, stream),
                  loomSuccess);
        // In place on the first result: 3 + 3 on both ranks.
        EXPECT_EQ(loomAllReduce(sum.data(), sum.data(), 4, loomFloat32, loomSum, comm, nullptr), loomSuccess);
        EXPECT_EQ(loomStreamSynchronize(stream), loomSuccess);
        EXPECT_EQ(sum, std::vector<float>(4, 6.0f));
        EXPECT_EQ(largeSum, std::vector<float>(kLarge, 2.0f));
        EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
        EXPECT_EQ(loomCommAbort(comm), loomSuccess);
      },
      /*destroy=*/false);
  for (int r = 0; r < 2; ++r) {
    const std::string dump = dumpOfRank(dir, r);
    const size_t op0 = dump.find("op 0 allreduce count=4 float sum seq=0: state=done algo=");
    const size_t op1 = dump.find("op 1 allreduce count=65536 float sum seq=1: state=done algo=");
    const size_t op2 = dump.find("op 2 allreduce count=4 float sum seq=2: state=done algo=");
    ASSERT_NE(op0, std::string::npos) << dump;
    ASSERT_NE(op1, std::string::npos) << dump;
    ASSERT_NE(op2, std::string::npos) << dump;
    EXPECT_LT(op0, op1) << dump;
    EXPECT_LT(op1, op2) << dump;
    // Every entry has its three times and an algorithm ("-" means missing).
    for (size_t at : {op0, op1, op2}) {
      const std::string line = dump.substr(at, dump.find('\n', at) - at);
      EXPECT_EQ(line.find("algo=-"), std::string::npos) << line;
      EXPECT_EQ(line.find("=-"), std::string::npos) << line;
      EXPECT_NE(line.find("ended="), std::string::npos) << line;
    }
    EXPECT_NE(dump.find("=> idle"), std::string::npos) << dump;
  }
  removeTree(dir);
}

// The blocking path skips the second clock read of a small operation whose
// waits all ended within their first polls (src/comm/op_runner.cc). A rank that
// waited for a late peer must still show the wait in its end time.
TEST(FlightRecorder, BlockingCallRecordsTheTimeSpentWaitingForALatePeer) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_DUMP_DIR", dir}, {"LOOM_CHECK", "0"}});
  runThreads(
      2,
      [&](int rank, loomComm_t comm) {
        std::vector<float> a(2, 1.0f), b(2, 0.0f);
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_EQ(loomAllReduce(a.data(), b.data(), 2, loomFloat32, loomSum, comm, nullptr), loomSuccess);
        EXPECT_EQ(loomAllReduce(a.data(), b.data(), 2, loomFloat32, loomSum, comm, nullptr), loomSuccess);
        EXPECT_EQ(b, std::vector<float>(2, 2.0f));
        EXPECT_EQ(loomCommAbort(comm), loomSuccess);
      },
      /*destroy=*/false);
  auto times = [](const std::string& dump, const std::string& op) {
    const size_t at = dump.find(op);
    if (at == std::string::npos) return std::pair<double, double>{-1, -1};
    const std::string line = dump.substr(at, dump.find('\n', at) - at);
    const size_t s = line.find("started="), e = line.find("ended=");
    if (s == std::string::npos || e == std::string::npos) return std::pair<double, double>{-1, -1};
    return std::pair<double, double>{std::atof(line.c_str() + s + 8), std::atof(line.c_str() + e + 6)};
  };
  const std::string dump = dumpOfRank(dir, 0);
  const auto [start0, end0] = times(dump, "op 0 allreduce count=2 float sum seq=0: state=done");
  const auto [start1, end1] = times(dump, "op 1 allreduce count=2 float sum seq=1: state=done");
  ASSERT_GE(start0, 0.0) << dump;
  ASSERT_GE(start1, 0.0) << dump;
  // Rank 0 waited about 300 ms for rank 1 (the clock is coarse: a few ms).
  EXPECT_GE(end0 - start0, 0.2) << dump;
  EXPECT_GE(end1, start1) << dump;
  EXPECT_GE(start1, end0) << dump;
  removeTree(dir);
}

// A small stream call posts its input on the calling thread and records
// itself there (src/comm/op_runner.cc, runSplit); when a peer is late, the
// worker finishes it. Either way it is one entry, done, with its algorithm,
// and the late one ends after the peer arrived.
TEST(FlightRecorder, StreamCallThatALatePeerHandsToTheWorkerIsOneEntry) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_DUMP_DIR", dir}, {"LOOM_CHECK", "0"}, {"LOOM_TUNER_ONLINE", "0"}});
  runThreads(
      2,
      [&](int rank, loomComm_t comm) {
        loomStream_t stream = nullptr;
        ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
        std::vector<float> a(2, static_cast<float>(rank + 1)), b(2, 0.0f), c(2, 0.0f);
        // Both in step: the call finishes on the calling thread.
        EXPECT_EQ(loomAllReduce(a.data(), b.data(), 2, loomFloat32, loomSum, comm, stream), loomSuccess);
        EXPECT_EQ(loomStreamSynchronize(stream), loomSuccess);
        // Rank 1 comes 300 ms late: rank 0's call returns and its worker finishes it.
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        const auto before = std::chrono::steady_clock::now();
        EXPECT_EQ(loomAllReduce(a.data(), c.data(), 2, loomFloat32, loomSum, comm, stream), loomSuccess);
        if (rank == 0) {
          EXPECT_LT(secondsSince(before), 0.2) << "the stream call waited for the late peer";
        }
        EXPECT_EQ(loomStreamSynchronize(stream), loomSuccess);
        EXPECT_EQ(b, std::vector<float>(2, 3.0f));
        EXPECT_EQ(c, std::vector<float>(2, 3.0f));
        EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
        EXPECT_EQ(loomCommAbort(comm), loomSuccess);
      },
      /*destroy=*/false);
  const std::string dump = dumpOfRank(dir, 0);
  for (const char* op : {"op 0 allreduce count=2 float sum seq=0: state=done algo=",
                         "op 1 allreduce count=2 float sum seq=1: state=done algo="}) {
    const size_t at = dump.find(op);
    ASSERT_NE(at, std::string::npos) << op << "\n" << dump;
    const std::string line = dump.substr(at, dump.find('\n', at) - at);
    EXPECT_EQ(line.find("=-"), std::string::npos) << line;
    EXPECT_NE(line.find("ended="), std::string::npos) << line;
  }
  EXPECT_EQ(dump.find("op 2 "), std::string::npos) << "one entry per call\n" << dump;
  const size_t late = dump.find("op 1 allreduce");
  const std::string line = dump.substr(late, dump.find('\n', late) - late);
  const size_t s = line.find("started="), e = line.find("ended=");
  ASSERT_NE(s, std::string::npos) << line;
  ASSERT_NE(e, std::string::npos) << line;
  EXPECT_GE(std::atof(line.c_str() + e + 6) - std::atof(line.c_str() + s + 8), 0.2) << line;
  removeTree(dir);
}

TEST(FlightRecorder, TimeoutDumpShowsTheStuckCollectiveAndKeepsTheLastEntries) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_DUMP_DIR", dir}, {"LOOM_TIMEOUT", "1"}, {"LOOM_FLIGHT_RECORDER_ENTRIES", "4"},
                 {"LOOM_CHECK", "0"}, {"LOOM_ALGO", "ring"}, {"LOOM_PROTO", "simple"}});
  loomResult_t stuck = loomSuccess;
  runThreads(2, [&](int rank, loomComm_t comm) {
    std::vector<float> a(1 << 20, 1.0f), b(1 << 20);
    for (int i = 0; i < 5; ++i)
      if (loomAllReduce(a.data(), b.data(), 16, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return;
    // Rank 1 skips the sixth: rank 0 waits in it until LOOM_TIMEOUT.
    if (rank == 0) stuck = loomAllReduce(a.data(), b.data(), 1 << 20, loomFloat32, loomSum, comm, nullptr);
  });
  EXPECT_EQ(stuck, loomTimeout);
  const std::string dump = dumpOfRank(dir, 0);
  EXPECT_NE(dump.find("Loom flight recorder (timeout in allreduce count=1048576 float sum seq=5"), std::string::npos)
      << dump;
  EXPECT_NE(dump.find("op 5 allreduce count=1048576 float sum seq=5: state=running algo=ring/Simple"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("=> stuck in op 5: allreduce count=1048576 float sum seq=5 (ring/Simple, in data movement"),
            std::string::npos)
      << dump;
  // Four entries kept: ops 2..5.
  EXPECT_EQ(dump.find("op 1 allreduce"), std::string::npos) << dump;
  EXPECT_NE(dump.find("op 2 allreduce count=16 float sum seq=2: state=done"), std::string::npos) << dump;
  removeTree(dir);
}

// ---- Signal dump and trace, ranks as processes ----

TEST(FlightRecorder, SignalDumpsEveryRankAndTraceSurvivesExitWithoutDestroy) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_DUMP_DIR", dir}, {"LOOM_DUMP_ON_SIGNAL", "SIGUSR1"}, {"LOOM_TIMEOUT", "20"},
                 {"LOOM_TRACE", dir + "/trace.json"}, {"LOOM_CHECK", "1"},
                 // Pinned so the expected dump does not follow the tuner's defaults.
                 {"LOOM_ALGO", "ring"}, {"LOOM_PROTO", "simple"}});
  const std::string ready = dir + "/ready", go = dir + "/go";
  auto pids = forkRanks(2, [&](int rank, loomComm_t comm) {
    std::vector<float> a(1 << 20, 1.0f), b(1 << 20);
    for (int i = 0; i < 2; ++i)
      if (loomAllReduce(a.data(), b.data(), 1024, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return 1;
    if (rank == 1) {
      std::fclose(std::fopen(ready.c_str(), "w"));
      while (!fileExists(go)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (loomAllReduce(a.data(), b.data(), 1 << 20, loomFloat32, loomSum, comm, nullptr) != loomSuccess) return 2;
    return 0;  // exit() without loomCommDestroy: the trace must still be complete
  });
  const auto start = std::chrono::steady_clock::now();
  while (!fileExists(ready) && secondsSince(start) < 15) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 is now inside the third all-reduce
  for (pid_t pid : pids) ::kill(pid, SIGUSR1);
  std::string dump0, dump1;
  while (secondsSince(start) < 15 && (dump0.find("=> ") == std::string::npos || dump1.find("=> ") == std::string::npos)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    dump0 = dumpOfRank(dir, 0);
    dump1 = dumpOfRank(dir, 1);
  }
  std::fclose(std::fopen(go.c_str(), "w"));
  const auto codes = waitRanks(pids, 20);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
  EXPECT_NE(dump0.find("Loom flight recorder (signal " + std::to_string(SIGUSR1) + "): rank 0 of 2"), std::string::npos)
      << dump0;
  // LOOM_CHECK is on and rank 1 has not called it yet: rank 0 waits in the exchange.
  EXPECT_NE(dump0.find("=> stuck in op 2: allreduce count=1048576 float sum seq=2 (ring/Simple, in LOOM_CHECK exchange"),
            std::string::npos)
      << dump0;
  EXPECT_NE(dump1.find("op 1 allreduce count=1024 float sum seq=1: state=done"), std::string::npos) << dump1;
  EXPECT_NE(dump1.find("=> idle"), std::string::npos) << dump1;

  for (int r = 0; r < 2; ++r) {
    const std::string path = dir + "/trace.rank" + std::to_string(r) + ".json";
    std::vector<std::string> names;
    bool skipped = false;
    EXPECT_EQ(checkTraceJson(path, &names, &skipped), "");
    if (skipped) GTEST_SKIP() << "python3 is not installed: trace JSON not checked";
    auto count = [&](const std::string& name) { return std::count(names.begin(), names.end(), name); };
    EXPECT_EQ(count("allreduce count=1024 float sum"), 2) << path;
    EXPECT_EQ(count("allreduce count=1048576 float sum"), 1) << path;
    EXPECT_EQ(count("queued allreduce count=1024 float sum"), 2) << path;
    EXPECT_EQ(count("desync check"), 3) << path;
    EXPECT_EQ(count("data movement"), 3) << path;
    EXPECT_EQ(count("process_name"), 1) << path;
  }
  removeTree(dir);
}

TEST(Trace, PercentRPatternPerRankValidAfterDestroy) {
  const std::string dir = makeTempDir();
  ScopedEnv env({{"LOOM_TRACE", dir + "/t_%r.json"}, {"LOOM_CHECK", "0"}});
  runThreads(2, [&](int, loomComm_t comm) {
    std::vector<int32_t> a(100, 1), b(100 * 2);
    EXPECT_EQ(loomAllGather(a.data(), b.data(), 100, loomInt32, comm, nullptr), loomSuccess);
    EXPECT_EQ(loomBarrier(comm, nullptr), loomSuccess);
  });
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> names;
    bool skipped = false;
    const std::string path = dir + "/t_" + std::to_string(r) + ".json";
    EXPECT_EQ(checkTraceJson(path, &names, &skipped), "");
    if (skipped) GTEST_SKIP() << "python3 is not installed: trace JSON not checked";
    EXPECT_EQ(std::count(names.begin(), names.end(), "allgather count=100 int32"), 1) << path;
    EXPECT_EQ(std::count(names.begin(), names.end(), "barrier"), 1) << path;
    EXPECT_EQ(std::count(names.begin(), names.end(), "desync check"), 0) << path;  // LOOM_CHECK=0
  }
  removeTree(dir);
}

}  // namespace
}  // namespace loom::diagtest
