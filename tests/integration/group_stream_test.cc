// Groups (one thread driving every communicator of a clique, several
// collectives per group, nested groups) and streams (several operations
// enqueued in order, loomStreamQuery, loomStreamSynchronize).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/collective_case.h"
#include "tests/integration/fixtures.h"
#include "tests/integration/scoped_env.h"

namespace loom::integration {
namespace {

// Mixed collectives, dtypes, ops, counts (multi-chunk ones too) and
// in-place positions; roots spread over the ranks.
std::vector<CaseSpec> groupSpecs(int nranks) {
  struct Row {
    Coll coll;
    loomDataType_t dtype;
    loomRedOp_t op;
    size_t count;
    bool inPlace;
  };
  const Row rows[] = {
      {Coll::kAllReduce, loomInt32, loomSum, 1023, false},  {Coll::kAllReduce, loomFloat32, loomAvg, 65537, true},
      {Coll::kBroadcast, loomFloat64, loomSum, 7, true},     {Coll::kReduce, loomBfloat16, loomMax, 1023, false},
      {Coll::kReduceScatter, loomFloat16, loomSum, 1023, true}, {Coll::kAllGather, loomUint8, loomSum, 262145, false},
      {Coll::kReduce, loomInt64, loomProd, 1, true},         {Coll::kAllReduce, loomUint64, loomMin, 0, false},
  };
  std::vector<CaseSpec> specs;
  for (const Row& row : rows) {
    CaseSpec s;
    s.coll = row.coll;
    s.dtype = row.dtype;
    s.op = row.op;
    s.count = row.count;
    s.inPlace = row.inPlace;
    s.root = static_cast<int>(specs.size() * 5 + 3) % nranks;
    s.seed = 7000 + specs.size();
    specs.push_back(s);
  }
  return specs;
}

enum class GroupVariant { kNullStream, kStreamPerComm, kNested };

const char* variantName(GroupVariant v) {
  switch (v) {
    case GroupVariant::kNullStream: return "group, NULL streams";
    case GroupVariant::kStreamPerComm: return "group, one stream per communicator";
    case GroupVariant::kNested: return "nested group, NULL streams";
  }
  return "?";
}

// Expects loomSuccess; false (after reporting) otherwise.
bool succeeded(loomResult_t rc, const std::string& what, loomComm_t comm) {
  if (rc == loomSuccess) return true;
  ADD_FAILURE() << what << " returned " << loomGetErrorString(rc) << ": " << loomGetLastError(comm);
  return false;
}

// Launches every run (in list order) inside one group from this thread;
// commOfRun[i]/streamOfRun[i] belong to runs[i]'s rank. Then verifies all.
// Returns false if a call failed (the ranks' sequences may be out of step).
bool runGroup(GroupVariant variant, std::vector<CaseRun>& runs, const std::vector<loomComm_t>& commOfRun,
              const std::vector<loomStream_t>& streamOfRun) {
  SCOPED_TRACE(variantName(variant));
  for (CaseRun& run : runs) run.prepare();
  const bool nested = variant == GroupVariant::kNested;
  bool ok = succeeded(loomGroupStart(), "loomGroupStart", nullptr);
  if (nested) ok = succeeded(loomGroupStart(), "inner loomGroupStart", nullptr) && ok;
  for (size_t i = 0; i < runs.size(); ++i)
    ok = succeeded(runs[i].launch(commOfRun[i], streamOfRun[i]), runs[i].trace(), commOfRun[i]) && ok;
  if (nested) ok = succeeded(loomGroupEnd(), "inner loomGroupEnd", nullptr) && ok;
  ok = succeeded(loomGroupEnd(), "loomGroupEnd", nullptr) && ok;
  for (size_t i = 0; i < runs.size(); ++i)
    if (streamOfRun[i] != nullptr)
      ok = succeeded(loomStreamSynchronize(streamOfRun[i]), "loomStreamSynchronize after " + runs[i].trace(),
                     commOfRun[i]) && ok;
  if (!ok) return false;
  for (CaseRun& run : runs) {
    SCOPED_TRACE(run.trace());
    run.verify();
  }
  return true;
}

TEST_F(Threads, GroupOneThreadDrivesAllComms) {
  const auto specs = groupSpecs(nranks_);
  std::vector<loomStream_t> streams(nranks_, nullptr);
  for (auto& s : streams) ASSERT_EQ(loomStreamCreate(&s), loomSuccess) << loomGetLastError(nullptr);
  for (GroupVariant variant : {GroupVariant::kNullStream, GroupVariant::kStreamPerComm, GroupVariant::kNested}) {
    std::vector<CaseRun> runs;
    std::vector<loomComm_t> comms;
    std::vector<loomStream_t> runStreams;
    for (const CaseSpec& spec : specs) {
      for (int r = 0; r < nranks_; ++r) {  // each collective on every comm before the next one
        runs.emplace_back(spec, r, nranks_);
        comms.push_back(comm(r));
        runStreams.push_back(variant == GroupVariant::kStreamPerComm ? streams[r] : nullptr);
      }
    }
    if (!runGroup(variant, runs, comms, runStreams)) break;
  }
  for (auto s : streams) EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
}

TEST_F(Process, GroupSeveralCollectives) {
  const auto specs = groupSpecs(world_->nranks);
  loomStream_t stream = nullptr;
  ASSERT_EQ(loomStreamCreate(&stream), loomSuccess) << loomGetLastError(nullptr);
  bool ok = true;
  for (GroupVariant variant : {GroupVariant::kNullStream, GroupVariant::kStreamPerComm, GroupVariant::kNested}) {
    std::vector<CaseRun> runs;
    for (const CaseSpec& spec : specs) runs.emplace_back(spec, world_->rank, world_->nranks);
    std::vector<loomComm_t> comms(runs.size(), world_->comm);
    std::vector<loomStream_t> streams(runs.size(), variant == GroupVariant::kStreamPerComm ? stream : nullptr);
    if (!(ok = runGroup(variant, runs, comms, streams))) break;
  }
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  markBrokenUnless(ok);
}

// On one rank: three in-place AllReduce(sum) on A, Broadcast A -> B, then
// AllGather of B's first kSlice elements into C, all on one stream, with
// independent collectives enqueued in between. Each step reads the previous
// one's output, so C is right only if the stream ran them in order:
// C[r*kSlice + i] = n^2 * (sum over ranks of A's input at i).
// Returns false if a call failed (the ranks' sequences may be out of step).
bool streamScenario(loomComm_t comm, int rank, int nranks) {
  SCOPED_TRACE("stream scenario, rank " + std::to_string(rank));
  constexpr size_t kCount = 300000;  // 1.2 MB of int32: several chunks, so work is still queued
  constexpr size_t kSlice = 4099;
  auto inputAt = [](int r, size_t i) { return static_cast<int32_t>((r + 1) * (static_cast<int>(i % 13) - 6)); };
  std::vector<int32_t> a(kCount), b(kCount, -1), c(kSlice * nranks, -1);
  for (size_t i = 0; i < kCount; ++i) a[i] = inputAt(rank, i);

  std::vector<CaseRun> side;
  for (const CaseSpec& spec : groupSpecs(nranks)) side.emplace_back(spec, rank, nranks);
  for (CaseRun& run : side) run.prepare();

  loomStream_t stream = nullptr;
  if (!succeeded(loomStreamCreate(&stream), "loomStreamCreate", nullptr)) return false;
  const int root = nranks - 1;
  bool ok = true;
  auto expectOk = [&](loomResult_t rc, const std::string& what) { ok = succeeded(rc, what, comm) && ok; };
  for (int k = 0; k < 3; ++k) {
    expectOk(loomAllReduce(a.data(), a.data(), kCount, loomInt32, loomSum, comm, stream), "AllReduce");
    expectOk(side[k].launch(comm, stream), side[k].trace());
  }
  expectOk(loomBroadcast(a.data(), b.data(), kCount, loomInt32, root, comm, stream), "Broadcast");
  expectOk(side[3].launch(comm, stream), side[3].trace());
  expectOk(loomAllGather(b.data(), c.data(), kSlice, loomInt32, comm, stream), "AllGather");
  for (size_t k = 4; k < side.size(); ++k) expectOk(side[k].launch(comm, stream), side[k].trace());

  const loomResult_t queried = loomStreamQuery(stream);
  EXPECT_TRUE(queried == loomInProgress || queried == loomSuccess) << loomGetErrorString(queried);
  expectOk(loomStreamSynchronize(stream), "loomStreamSynchronize");
  EXPECT_EQ(loomStreamQuery(stream), loomSuccess) << "after loomStreamSynchronize";
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  if (!ok) return false;

  const int64_t rankSum = static_cast<int64_t>(nranks) * (nranks + 1) / 2;
  size_t bad = 0;
  for (size_t j = 0; j < c.size(); ++j) {
    const size_t i = j % kSlice;
    const int64_t want = int64_t{nranks} * nranks * rankSum * (static_cast<int>(i % 13) - 6);
    if (c[j] != want && ++bad <= 4)
      ADD_FAILURE() << "chained result C[" << j << "]: got " << c[j] << " expected " << want;
  }
  EXPECT_EQ(bad, 0u) << "elements of the chained AllReduce x3 -> Broadcast -> AllGather result that differ";
  for (CaseRun& run : side) {
    SCOPED_TRACE(run.trace());
    run.verify();
  }
  loomResult_t async = loomInternalError;
  EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess) << "asynchronous error after a clean stream";
  return true;
}

TEST_F(Threads, StreamOrderAndQuery) {
  runOnRankThreads(nranks_, [&](int rank) { streamScenario(comm(rank), rank, nranks_); });
}

TEST_F(Process, StreamOrderAndQuery) {
  markBrokenUnless(streamScenario(world_->comm, world_->rank, world_->nranks));
}

// A small collective on an idle stream may run on the calling thread when
// its peers are already in it (LOOM_ASYNC_INLINE_US), but the call must
// still return before its peers make theirs: here rank 0 makes its call,
// then signals the others through `signal` (a blocking all-reduce on a second
// communicator), and only then do they make theirs. A call that waited for
// its peers would deadlock: rank 0 inside the stream call, the others inside
// the signal. Run several times, since a late peer is what the inline path
// has to notice each time. Every third call is 2400 bytes (over the links
// rather than the bulletin). Returns false if a call failed.
bool asyncCallReturnsBeforePeers(loomComm_t comm, loomComm_t signal, int rank, int nranks) {
  SCOPED_TRACE("asynchronous call before its peers, rank " + std::to_string(rank));
  loomStream_t stream = nullptr;
  if (!succeeded(loomStreamCreate(&stream), "loomStreamCreate", nullptr)) return false;
  bool ok = true;
  constexpr int kRounds = 20;
  constexpr size_t kLongCount = 300;
  auto countOf = [](int k) { return k % 3 == 2 ? kLongCount : size_t{1}; };
  // Buffers live until the stream is synchronized: a queued call reads them later.
  std::vector<std::vector<int64_t>> inputs(kRounds), sums(kRounds);
  for (int k = 0; k < kRounds && ok; ++k) {
    for (size_t i = 0; i < countOf(k); ++i) inputs[k].push_back(int64_t{rank + 1} * (k + 1) + static_cast<int64_t>(i));
    sums[k].assign(countOf(k), -1);
    int32_t one = 1, ranks = 0;
    auto call = [&] {
      ok = succeeded(loomAllReduce(inputs[k].data(), sums[k].data(), countOf(k), loomInt64, loomSum, comm, stream),
                     "stream AllReduce", comm) &&
           ok;
    };
    auto wave = [&] {
      ok = succeeded(loomAllReduce(&one, &ranks, 1, loomInt32, loomSum, signal, nullptr), "signal AllReduce", signal) &&
           ok;
    };
    if (rank == 0) call();
    wave();
    if (rank != 0) call();
    EXPECT_EQ(ranks, nranks) << "signal of round " << k;
    // Every other round the stream is drained, so the next call finds it idle.
    if (k % 2 == 1) ok = succeeded(loomStreamSynchronize(stream), "loomStreamSynchronize", comm) && ok;
  }
  ok = succeeded(loomStreamSynchronize(stream), "loomStreamSynchronize", comm) && ok;
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  const int64_t rankSum = static_cast<int64_t>(nranks) * (nranks + 1) / 2;
  for (int k = 0; k < kRounds && ok; ++k)
    for (size_t i = 0; i < countOf(k); ++i)
      EXPECT_EQ(sums[k][i], rankSum * (k + 1) + static_cast<int64_t>(nranks) * static_cast<int64_t>(i))
          << "round " << k << " element " << i;
  return ok;
}

// Online tuning would run the first calls of each shape as trials (each
// after an agreement among the ranks), which never take the inline path:
// the stream calls' communicator goes without it, so every call does.
TEST_F(Threads, AsyncCallReturnsBeforePeers) {
  if (nranks_ < 2) GTEST_SKIP() << "needs at least two ranks";
  Clique signals(nranks_);
  ASSERT_EQ(signals.initResult(), loomSuccess) << signals.initError();
  std::optional<Clique> calls;
  {
    ScopedEnv noTrials({{"LOOM_TUNER_ONLINE", "0"}});
    calls.emplace(nranks_);
  }
  ASSERT_EQ(calls->initResult(), loomSuccess) << calls->initError();
  runOnRankThreads(nranks_,
                   [&](int rank) { asyncCallReturnsBeforePeers(calls->comm(rank), signals.comm(rank), rank, nranks_); });
}

TEST_F(Process, AsyncCallReturnsBeforePeers) {
  if (world_->nranks < 2) GTEST_SKIP() << "needs at least two ranks";
  loomComm_t signal = nullptr, calls = nullptr;
  ASSERT_EQ(loomCommSplit(world_->comm, 0, world_->rank, &signal), loomSuccess) << loomGetLastError(world_->comm);
  {
    ScopedEnv noTrials({{"LOOM_TUNER_ONLINE", "0"}});
    ASSERT_EQ(loomCommSplit(world_->comm, 0, world_->rank, &calls), loomSuccess) << loomGetLastError(world_->comm);
  }
  markBrokenUnless(asyncCallReturnsBeforePeers(calls, signal, world_->rank, world_->nranks));
  EXPECT_EQ(loomCommDestroy(calls), loomSuccess);
  EXPECT_EQ(loomCommDestroy(signal), loomSuccess);
}

// More calls on one stream than it may hold unfinished (LOOM_STREAM_DEPTH,
// 1024 by default), with the last rank starting late so that the others'
// queues fill: an enqueueing caller then waits for room, and must neither
// hang nor drop or reorder a call. Every call has its own input and output,
// checked after one synchronize.
bool deeperThanTheStream(loomComm_t comm, int rank, int nranks) {
  SCOPED_TRACE("more calls than the stream depth, rank " + std::to_string(rank));
  constexpr int kCalls = 2600;
  loomStream_t stream = nullptr;
  if (!succeeded(loomStreamCreate(&stream), "loomStreamCreate", nullptr)) return false;
  std::vector<int64_t> inputs(kCalls), sums(kCalls, -1);
  for (int k = 0; k < kCalls; ++k) inputs[k] = int64_t{rank + 1} * 100000 + k;
  if (rank == nranks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  bool ok = true;
  for (int k = 0; k < kCalls && ok; ++k)
    ok = succeeded(loomAllReduce(&inputs[k], &sums[k], 1, loomInt64, loomSum, comm, stream), "stream AllReduce", comm);
  ok = succeeded(loomStreamSynchronize(stream), "loomStreamSynchronize", comm) && ok;
  EXPECT_EQ(loomStreamDestroy(stream), loomSuccess);
  const int64_t rankSum = static_cast<int64_t>(nranks) * (nranks + 1) / 2;
  size_t bad = 0;
  for (int k = 0; k < kCalls && ok; ++k)
    if (sums[k] != rankSum * 100000 + int64_t{nranks} * k && ++bad <= 4)
      ADD_FAILURE() << "call " << k << ": got " << sums[k] << " expected " << rankSum * 100000 + int64_t{nranks} * k;
  EXPECT_EQ(bad, 0u) << "calls whose sum is wrong";
  return ok;
}

TEST_F(Threads, MoreCallsThanTheStreamHolds) {
  runOnRankThreads(nranks_, [&](int rank) { deeperThanTheStream(comm(rank), rank, nranks_); });
}

TEST_F(Process, MoreCallsThanTheStreamHolds) {
  markBrokenUnless(deeperThanTheStream(world_->comm, world_->rank, world_->nranks));
}

}  // namespace
}  // namespace loom::integration
