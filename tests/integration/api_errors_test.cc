// Bad input through the public API: every call must return
// loomInvalidArgument / loomInvalidUsage with a message that names the
// argument (loomGetLastError), never crash or hang, and the communicator must
// stay usable afterwards (checked with a collective on every rank).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/integration/collective_case.h"
#include "tests/integration/fixtures.h"

namespace loom::integration {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Expects `rc == want` and that the last error of `comm` (of this thread for
// a NULL comm) mentions every word in `words` (case-insensitive).
void expectError(const char* call, loomResult_t rc, loomResult_t want, loomComm_t comm,
                 std::initializer_list<const char*> words) {
  EXPECT_EQ(rc, want) << call << " returned " << loomGetErrorString(rc);
  if (rc != want) return;
  const char* raw = loomGetLastError(comm);
  ASSERT_NE(raw, nullptr) << call << ": loomGetLastError returned NULL";
  const std::string message = lower(raw);
  for (const char* word : words)
    EXPECT_NE(message.find(word), std::string::npos) << call << ": message \"" << raw << "\" does not name " << word;
}
#define EXPECT_LOOM_ERROR(call, want, comm, ...) expectError(#call, (call), (want), (comm), {__VA_ARGS__})

// Invalid values that a C++ enum object can still hold: its range is that
// of the smallest bit-field holding every enumerator ([0, 15] for
// loomDataType_t and loomRedOp_t); 42 or -1 would already be
// undefined behaviour in this C++ caller (UBSan reports the load), though a
// C caller may pass them.
const auto kBadType = static_cast<loomDataType_t>(loomNumTypes);
const auto kLastBadType = static_cast<loomDataType_t>(15);
const auto kBadOp = static_cast<loomRedOp_t>(loomNumOps);
const auto kLastBadOp = static_cast<loomRedOp_t>(15);

void expectNoCommRejected(float* x, float* y) {
  EXPECT_LOOM_ERROR(loomAllReduce(x, y, 1, loomFloat32, loomSum, nullptr, nullptr), loomInvalidArgument, nullptr,
                    "comm");
  EXPECT_LOOM_ERROR(loomBroadcast(x, y, 1, loomFloat32, 0, nullptr, nullptr), loomInvalidArgument, nullptr, "comm");
  EXPECT_LOOM_ERROR(loomReduce(x, y, 1, loomFloat32, loomSum, 0, nullptr, nullptr), loomInvalidArgument, nullptr,
                    "comm");
  EXPECT_LOOM_ERROR(loomReduceScatter(x, y, 1, loomFloat32, loomSum, nullptr, nullptr), loomInvalidArgument,
                    nullptr, "comm");
  EXPECT_LOOM_ERROR(loomAllGather(x, y, 1, loomFloat32, nullptr, nullptr), loomInvalidArgument, nullptr, "comm");
  int value = 0;
  EXPECT_LOOM_ERROR(loomCommCount(nullptr, &value), loomInvalidArgument, nullptr, "comm");
  EXPECT_LOOM_ERROR(loomCommUserRank(nullptr, &value), loomInvalidArgument, nullptr, "comm");
  loomResult_t async;
  EXPECT_LOOM_ERROR(loomCommGetAsyncError(nullptr, &async), loomInvalidArgument, nullptr, "comm");
}

// Every rank-bound error message also names the rank (loom.h).
void expectBadTypeAndOpRejected(loomComm_t c, float* x, float* y) {
  for (loomDataType_t t : {kBadType, kLastBadType}) {
    SCOPED_TRACE("datatype " + std::to_string(static_cast<int>(t)));
    EXPECT_LOOM_ERROR(loomAllReduce(x, y, 1, t, loomSum, c, nullptr), loomInvalidArgument, c, "type", "rank");
    EXPECT_LOOM_ERROR(loomBroadcast(x, y, 1, t, 0, c, nullptr), loomInvalidArgument, c, "type");
    EXPECT_LOOM_ERROR(loomBcast(x, 1, t, 0, c, nullptr), loomInvalidArgument, c, "type");
    EXPECT_LOOM_ERROR(loomReduce(x, y, 1, t, loomSum, 0, c, nullptr), loomInvalidArgument, c, "type");
    EXPECT_LOOM_ERROR(loomReduceScatter(x, y, 1, t, loomSum, c, nullptr), loomInvalidArgument, c, "type");
    EXPECT_LOOM_ERROR(loomAllGather(x, y, 1, t, c, nullptr), loomInvalidArgument, c, "type");
  }
  for (loomRedOp_t op : {kBadOp, kLastBadOp}) {
    SCOPED_TRACE("op " + std::to_string(static_cast<int>(op)));
    EXPECT_LOOM_ERROR(loomAllReduce(x, y, 1, loomFloat32, op, c, nullptr), loomInvalidArgument, c, "op", "rank");
    EXPECT_LOOM_ERROR(loomReduce(x, y, 1, loomFloat32, op, 0, c, nullptr), loomInvalidArgument, c, "op");
    EXPECT_LOOM_ERROR(loomReduceScatter(x, y, 1, loomFloat32, op, c, nullptr), loomInvalidArgument, c, "op");
  }
}

void expectBadRootRejected(loomComm_t c, int nranks, float* x, float* y) {
  for (int root : {nranks, -1, nranks + 100}) {
    SCOPED_TRACE("root " + std::to_string(root));
    EXPECT_LOOM_ERROR(loomBroadcast(x, y, 1, loomFloat32, root, c, nullptr), loomInvalidArgument, c, "root", "rank");
    EXPECT_LOOM_ERROR(loomBcast(x, 1, loomFloat32, root, c, nullptr), loomInvalidArgument, c, "root");
    EXPECT_LOOM_ERROR(loomReduce(x, y, 1, loomFloat32, loomSum, root, c, nullptr), loomInvalidArgument, c, "root");
  }
}

// Buffers the call must use on this rank are NULL with count > 0.
void expectNullBuffersRejected(loomComm_t c, int rank, float* x, float* y) {
  EXPECT_LOOM_ERROR(loomAllReduce(nullptr, y, 4, loomFloat32, loomSum, c, nullptr), loomInvalidArgument, c, "send");
  EXPECT_LOOM_ERROR(loomAllReduce(x, nullptr, 4, loomFloat32, loomSum, c, nullptr), loomInvalidArgument, c, "recv");
  EXPECT_LOOM_ERROR(loomBroadcast(nullptr, y, 4, loomFloat32, rank, c, nullptr), loomInvalidArgument, c, "send");
  EXPECT_LOOM_ERROR(loomBroadcast(x, nullptr, 4, loomFloat32, rank, c, nullptr), loomInvalidArgument, c, "recv");
  EXPECT_LOOM_ERROR(loomBcast(nullptr, 4, loomFloat32, rank, c, nullptr), loomInvalidArgument, c, "buff");
  EXPECT_LOOM_ERROR(loomReduce(nullptr, y, 4, loomFloat32, loomSum, rank, c, nullptr), loomInvalidArgument, c,
                    "send");
  EXPECT_LOOM_ERROR(loomReduce(x, nullptr, 4, loomFloat32, loomSum, rank, c, nullptr), loomInvalidArgument, c,
                    "recv");
  EXPECT_LOOM_ERROR(loomReduceScatter(nullptr, y, 4, loomFloat32, loomSum, c, nullptr), loomInvalidArgument, c,
                    "send");
  EXPECT_LOOM_ERROR(loomReduceScatter(x, nullptr, 4, loomFloat32, loomSum, c, nullptr), loomInvalidArgument, c,
                    "recv");
  EXPECT_LOOM_ERROR(loomAllGather(nullptr, y, 4, loomFloat32, c, nullptr), loomInvalidArgument, c, "send");
  EXPECT_LOOM_ERROR(loomAllGather(x, nullptr, 4, loomFloat32, c, nullptr), loomInvalidArgument, c, "recv");
}

// count * sizeof(type) (times nranks for the per-rank counts of
// ReduceScatter and AllGather) does not fit in size_t.
void expectCountOverflowRejected(loomComm_t c, int nranks, float* x, float* y) {
  const size_t tooMany = SIZE_MAX / sizeof(float) + 1;
  EXPECT_LOOM_ERROR(loomAllReduce(x, y, tooMany, loomFloat32, loomSum, c, nullptr), loomInvalidArgument, c, "count");
  EXPECT_LOOM_ERROR(loomAllReduce(x, y, SIZE_MAX, loomFloat64, loomSum, c, nullptr), loomInvalidArgument, c, "count");
  EXPECT_LOOM_ERROR(loomBroadcast(x, y, tooMany, loomFloat32, 0, c, nullptr), loomInvalidArgument, c, "count");
  EXPECT_LOOM_ERROR(loomReduce(x, y, tooMany, loomFloat32, loomSum, 0, c, nullptr), loomInvalidArgument, c, "count");
  // For nranks > 1 only the product with nranks overflows.
  const size_t perRankTooMany = SIZE_MAX / sizeof(float) / nranks + 1;
  EXPECT_LOOM_ERROR(loomReduceScatter(x, y, perRankTooMany, loomFloat32, loomSum, c, nullptr), loomInvalidArgument,
                    c, "count");
  EXPECT_LOOM_ERROR(loomAllGather(x, y, perRankTooMany, loomFloat32, c, nullptr), loomInvalidArgument, c, "count");
}

void expectGroupMisuseRejected(loomComm_t c, float* x, float* y) {
  EXPECT_LOOM_ERROR(loomGroupEnd(), loomInvalidUsage, nullptr, "group");
  EXPECT_EQ(loomGroupStart(), loomSuccess) << "an empty group is fine";
  EXPECT_EQ(loomGroupEnd(), loomSuccess) << "an empty group is fine";
  // Calls inside a group are validated at once; the group still closes.
  ASSERT_EQ(loomGroupStart(), loomSuccess) << loomGetLastError(nullptr);
  EXPECT_LOOM_ERROR(loomAllReduce(x, y, 1, kBadType, loomSum, c, nullptr), loomInvalidArgument, c, "type");
  const loomResult_t end = loomGroupEnd();
  EXPECT_TRUE(end == loomSuccess || end == loomInvalidArgument) << loomGetErrorString(end);
  EXPECT_LOOM_ERROR(loomGroupEnd(), loomInvalidUsage, nullptr, "group");
}

void expectQueriesWork(loomComm_t c, int rank, int nranks) {
  int value = -1;
  EXPECT_EQ(loomCommCount(c, &value), loomSuccess);
  EXPECT_EQ(value, nranks);
  EXPECT_EQ(loomCommUserRank(c, &value), loomSuccess);
  EXPECT_EQ(value, rank);
  EXPECT_EQ(loomCommCount(c, nullptr), loomInvalidArgument);
  EXPECT_EQ(loomCommUserRank(c, nullptr), loomInvalidArgument);
  loomResult_t async = loomInternalError;
  EXPECT_EQ(loomCommGetAsyncError(c, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess);
  EXPECT_EQ(loomCommGetAsyncError(c, nullptr), loomInvalidArgument);
  int version = 0;
  EXPECT_EQ(loomGetVersion(&version), loomSuccess);
  EXPECT_EQ(version, LOOM_VERSION_CODE);
  EXPECT_EQ(loomGetVersion(nullptr), loomInvalidArgument);
  EXPECT_EQ(loomStreamCreate(nullptr), loomInvalidArgument);
  for (int r = 0; r < loomNumResults; ++r) {
    const char* s = loomGetErrorString(static_cast<loomResult_t>(r));
    EXPECT_TRUE(s != nullptr && s[0] != '\0') << "loomGetErrorString(" << r << ")";
  }
}

// All the local checks on one rank, then a collective on every rank: the
// communicator is still usable after loomInvalidArgument.
bool badInputScenario(loomComm_t c, int rank, int nranks) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  std::vector<float> x(8 * nranks, 1.0f), y(8 * nranks, 0.0f);
  expectNoCommRejected(x.data(), y.data());
  expectBadTypeAndOpRejected(c, x.data(), y.data());
  expectBadRootRejected(c, nranks, x.data(), y.data());
  expectNullBuffersRejected(c, rank, x.data(), y.data());
  expectCountOverflowRejected(c, nranks, x.data(), y.data());
  expectGroupMisuseRejected(c, x.data(), y.data());
  expectQueriesWork(c, rank, nranks);
  // Count 0 needs no buffers (as in NCCL); every rank makes these calls.
  bool ok = true;
  auto expectZeroOk = [&](loomResult_t rc, const char* call) {
    EXPECT_EQ(rc, loomSuccess) << call << " with count 0 and NULL buffers: " << loomGetLastError(c);
    ok = ok && rc == loomSuccess;
  };
  expectZeroOk(loomAllReduce(nullptr, nullptr, 0, loomFloat32, loomSum, c, nullptr), "loomAllReduce");
  expectZeroOk(loomBroadcast(nullptr, nullptr, 0, loomFloat32, 0, c, nullptr), "loomBroadcast");
  expectZeroOk(loomReduce(nullptr, nullptr, 0, loomFloat32, loomSum, 0, c, nullptr), "loomReduce");
  expectZeroOk(loomReduceScatter(nullptr, nullptr, 0, loomFloat32, loomSum, c, nullptr), "loomReduceScatter");
  expectZeroOk(loomAllGather(nullptr, nullptr, 0, loomFloat32, c, nullptr), "loomAllGather");
  if (!ok) return false;
  CaseSpec after;
  after.coll = Coll::kAllReduce;
  after.dtype = loomInt32;
  after.op = loomSum;
  after.count = 1023;
  after.seed = 4242;
  return runCasesOnRank({after}, c, rank, nranks);
}

TEST_F(Threads, InvalidArguments) {
  runOnRankThreads(nranks_, [&](int rank) { badInputScenario(comm(rank), rank, nranks_); });
}

TEST_F(Process, InvalidArguments) {
  markBrokenUnless(badInputScenario(world_->comm, world_->rank, world_->nranks));
}

// CommInitAll rejects what it cannot build (no comm to ask: this thread's error).
TEST(ThreadsInit, InvalidCommInitAll) {
  loomComm_t comms[2] = {nullptr, nullptr};
  EXPECT_LOOM_ERROR(loomCommInitAll(comms, 0, nullptr), loomInvalidArgument, nullptr, "ndev");
  EXPECT_LOOM_ERROR(loomCommInitAll(comms, -1, nullptr), loomInvalidArgument, nullptr, "ndev");
  EXPECT_LOOM_ERROR(loomCommInitAll(nullptr, 2, nullptr), loomInvalidArgument, nullptr, "comms");
}

}  // namespace
}  // namespace loom::integration
