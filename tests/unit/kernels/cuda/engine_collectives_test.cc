// The device engine's collectives under the host emulation: ranks are
// threads, with random delays before every flag operation, fence and LL line
// access, over every collective (all-reduce on the ring and on the tree) x
// protocol (Simple, LL) x DataType x RedOp x size x in/out of place x ranks x
// channels. The default run samples the
// matrix (every (collective, protocol, type, op) at least once); the label
// engine_full runs all of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/kernels/cuda/engine_test_support.h"
#include "tests/unit/kernels/test_data.h"

namespace loom::kernels::cuda::engine::testing {
namespace {

constexpr int kChannelsAllocated = 4;
constexpr size_t kSlotBytes = 64;  // small, so that small counts span many slots
constexpr size_t kLLSlotBytes = 64;  // 8 lines: 32 bytes of data per LL step

struct MatrixPoint {
  int nranks;
  int slots;
  int threadsPerBlock;
  CollectiveCase c;
};

const EngineOp kReductions[] = {EngineOp::kAllReduce, EngineOp::kReduceScatter, EngineOp::kReduce};
const EngineOp kCopies[] = {EngineOp::kAllGather, EngineOp::kBroadcast, EngineOp::kAllToAll};

std::vector<size_t> sizesFor(DataType type, EngineProtocol protocol) {
  const size_t slotData = protocol == EngineProtocol::kLL ? kLLSlotBytes / 2 : kSlotBytes;
  const size_t slotElems = slotData / dataTypeSize(type);
  return {0, 1, 7, slotElems - 1, slotElems, slotElems + 1, 3 * slotElems + 5, 1237};
}

MatrixPoint point(int nranks, int channels, EngineOp op, DataType type, RedOp redOp, size_t count, bool inPlace,
                  uint64_t seed, EngineProtocol protocol = EngineProtocol::kSimple,
                  EngineAlgorithm algorithm = EngineAlgorithm::kRing) {
  MatrixPoint p;
  p.c.protocol = protocol;
  p.c.algorithm = algorithm;
  p.nranks = nranks;
  p.slots = 2 + static_cast<int>(seed % 3);
  p.threadsPerBlock = (seed % 4 == 1 && nranks <= 4) ? 2 : 1;
  p.c.op = op;
  p.c.type = type;
  p.c.redOp = redOp;
  p.c.count = count;
  p.c.inPlace = inPlace;
  p.c.channels = channels;
  p.c.root = static_cast<int>(seed % static_cast<uint64_t>(nranks));
  p.c.misalign = seed % 5 == 3 ? 1 : 0;
  p.c.seed = seed;
  return p;
}

std::vector<MatrixPoint> fullMatrix() {
  std::vector<MatrixPoint> points;
  uint64_t seed = 1;
  for (EngineProtocol protocol : {EngineProtocol::kSimple, EngineProtocol::kLL})
    for (int nranks : {2, 3, 4, 5, 6, 7, 8})
      for (int channels : {1, 2, 4})
        for (DataType type : testdata::allTypes())
          for (size_t count : sizesFor(type, protocol))
            for (bool inPlace : {false, true}) {
              // The tree at every rank count (each gives another shape); the
              // rest at 2, 3, 4 and 8.
              for (RedOp redOp : testdata::allOps())
                points.push_back(point(nranks, channels, EngineOp::kAllReduce, type, redOp, count, inPlace, seed++,
                                       protocol, EngineAlgorithm::kTree));
              if (nranks >= 5 && nranks <= 7) continue;
              for (EngineOp op : kReductions)
                for (RedOp redOp : testdata::allOps())
                  points.push_back(point(nranks, channels, op, type, redOp, count, inPlace, seed++, protocol));
              for (EngineOp op : kCopies) {
                if (op == EngineOp::kAllToAll && protocol == EngineProtocol::kLL) continue;  // Simple only
                points.push_back(point(nranks, channels, op, type, RedOp::kSum, count, inPlace, seed++, protocol));
              }
            }
  return points;
}

// Every (collective, protocol, type, op) once at a random point, plus random points.
std::vector<MatrixPoint> sampledMatrix() {
  std::vector<MatrixPoint> all = fullMatrix();
  std::mt19937_64 rng(20);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<MatrixPoint> picked;
  std::vector<std::string> seen;
  for (const MatrixPoint& p : all) {
    const std::string key = std::string(engineOpName(p.c.op)) + engineAlgorithmName(p.c.algorithm) +
                            engineProtocolName(p.c.protocol) + dataTypeName(p.c.type) + redOpName(p.c.redOp);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    picked.push_back(p);
  }
  for (size_t i = 0; i < 120 && i < all.size(); ++i) picked.push_back(all[i]);
  return picked;
}

void runPoint(const MatrixPoint& p) {
  setDelaySeed(p.c.seed);
  EngineRanks ranks(p.nranks, kChannelsAllocated, p.slots, kSlotBytes, kLLSlotBytes);
  CollectiveRun run(p.c, p.nranks);
  const std::vector<EngineStatus> status = ranks.run<DelayingMemory>(run.calls(), p.threadsPerBlock);
  for (int r = 0; r < p.nranks; ++r)
    ASSERT_EQ(status[static_cast<size_t>(r)], EngineStatus::kOk)
        << p.c.describe(p.nranks) << ": rank " << r << " " << engineStatusName(status[static_cast<size_t>(r)]);
  const std::string problem = run.check();
  ASSERT_TRUE(problem.empty()) << problem << " (slots " << p.slots << ", threads/block " << p.threadsPerBlock << ")";
}

TEST(EngineCollectives, SampledMatrixWithRandomDelays) {
  for (const MatrixPoint& p : sampledMatrix()) {
    runPoint(p);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The whole matrix: ctest -L engine_full runs it (with LOOM_ENGINE_FULL=1); it takes minutes.
TEST(EngineCollectivesFull, WholeMatrixWithRandomDelays) {
  if (!std::getenv("LOOM_ENGINE_FULL")) GTEST_SKIP() << "the whole matrix runs under ctest -L engine_full (LOOM_ENGINE_FULL=1)";
  const std::vector<MatrixPoint> all = fullMatrix();
  for (const MatrixPoint& p : all) {
    runPoint(p);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Blocks of several emulated threads (odd counts too): the strided split of
// the data, the block syncs and syncOr's spreading of a wait's outcome.
TEST(EngineCollectives, BlocksOfSeveralThreads) {
  uint64_t seed = 500;
  for (EngineProtocol protocol : {EngineProtocol::kSimple, EngineProtocol::kLL})
    for (int threads : {3, 5})
      for (EngineOp op : {EngineOp::kAllReduce, EngineOp::kReduceScatter, EngineOp::kAllGather, EngineOp::kBroadcast,
                          EngineOp::kReduce, EngineOp::kAllToAll}) {
        if (op == EngineOp::kAllToAll && protocol == EngineProtocol::kLL) continue;
        // LL: every thread polls its own lines; fp64 spans two lines per element.
        const DataType type = protocol == EngineProtocol::kLL && threads == 5 ? DataType::kFloat64 : DataType::kFloat16;
        MatrixPoint p = point(3, 2, op, type, RedOp::kSum, 777, seed % 2 == 0, seed, protocol);
        p.threadsPerBlock = threads;
        ++seed;
        runPoint(p);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(EngineCollectives, OneRankCopiesOutOfPlaceAndLeavesInPlaceAlone) {
  for (EngineOp op : {EngineOp::kAllReduce, EngineOp::kReduceScatter, EngineOp::kAllGather, EngineOp::kBroadcast,
                      EngineOp::kReduce, EngineOp::kAllToAll})
    for (bool inPlace : {false, true})
      for (size_t count : {size_t{0}, size_t{1}, size_t{33}, size_t{1000}}) {
        MatrixPoint p = point(1, 2, op, DataType::kFloat32, RedOp::kAvg, count, inPlace, count + 3);
        if (op == EngineOp::kAllGather || op == EngineOp::kBroadcast || op == EngineOp::kAllToAll)
          p.c.redOp = RedOp::kSum;
        runPoint(p);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(EngineCollectives, PostMultiplyByScalar) {
  for (DataType type : testdata::allTypes())
    for (int nranks : {1, 3, 4}) {
      // Three ranks on Simple, four on LL.
      MatrixPoint p = point(nranks, 2, EngineOp::kAllReduce, type, RedOp::kSum, 301, nranks == 1, 7,
                            nranks == 4 ? EngineProtocol::kLL : EngineProtocol::kSimple);
      p.c.post = PostOp::kMultiplyByScalar;
      p.c.scalar = 3;
      runPoint(p);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(EngineCollectives, SendRecvBatchesIncludingSelfAndEmptyTransfers) {
  struct Batch {
    int nranks;
    std::vector<int> shifts;
    std::vector<size_t> bytes;
    int channels;
  };
  const std::vector<Batch> batches = {
      {2, {1}, {1000}, 1},
      {2, {1, 0}, {333, 64}, 2},             // a send and a recv with the same peer, and one to itself
      {3, {1, 2}, {5000, 1}, 4},
      {4, {1, 3, 2, 0}, {0, 129, 4096, 7}, 2},
      {8, {1, 7, 4}, {2048, 63, 65}, 1},
      {8, {0, 1, 2, 3, 4, 5, 6, 7}, {16, 17, 0, 64, 300, 1, 2, 700}, 1},
  };
  uint64_t seed = 1;
  for (const Batch& b : batches) {
    setDelaySeed(seed);
    EngineRanks ranks(b.nranks, kChannelsAllocated, 2, kSlotBytes);
    SendRecvRun run(b.nranks, b.shifts, b.bytes, b.channels, seed++);
    const std::vector<EngineStatus> status = ranks.run<DelayingMemory>(run.calls());
    for (EngineStatus s : status) ASSERT_EQ(s, EngineStatus::kOk) << engineStatusName(s);
    const std::string problem = run.check();
    ASSERT_TRUE(problem.empty()) << problem;
  }
}

// Counters persist across calls: many calls of mixed collectives on the same
// engine memory, each checked, channels varying between calls.
TEST(EngineCollectives, BackToBackMixedCallsOnTheSameEngine) {
  for (int nranks : {2, 3, 4}) {
    EngineRanks ranks(nranks, 2, 3, 128);
    std::mt19937_64 rng(static_cast<uint64_t>(nranks));
    const std::vector<DataType> types = testdata::allTypes();
    const std::vector<RedOp> ops = testdata::allOps();
    for (int call = 0; call < 24; ++call) {
      setDelaySeed(rng());
      if (call % 6 == 5) {
        // To the next rank and the previous one (itself when there are two).
        const std::vector<int> shifts = {1, nranks == 2 ? 0 : nranks - 1};
        SendRecvRun run(nranks, shifts, {rng() % 700, rng() % 70}, 1 + static_cast<int>(rng() % 2), rng());
        const std::vector<EngineStatus> status = ranks.run<DelayingMemory>(run.calls());
        for (EngineStatus s : status) ASSERT_EQ(s, EngineStatus::kOk);
        ASSERT_TRUE(run.check().empty()) << "call " << call << ": " << run.check();
        continue;
      }
      const EngineOp all[] = {EngineOp::kAllReduce, EngineOp::kReduceScatter, EngineOp::kAllGather,
                              EngineOp::kBroadcast, EngineOp::kReduce, EngineOp::kAllToAll};
      MatrixPoint p = point(nranks, 1 + static_cast<int>(rng() % 2), all[rng() % 6], types[rng() % types.size()],
                            ops[rng() % ops.size()], rng() % 900, rng() % 2 == 0, rng());
      // Both protocols on the same connections: each keeps its own counters and lines across calls.
      if (p.c.op != EngineOp::kAllToAll && rng() % 2 == 0) p.c.protocol = EngineProtocol::kLL;
      CollectiveRun run(p.c, nranks);
      const std::vector<EngineStatus> status = ranks.run<DelayingMemory>(run.calls());
      for (int r = 0; r < nranks; ++r) {
        const char* error = engineCallError(run.calls()[static_cast<size_t>(r)], nranks, r);
        ASSERT_EQ(status[static_cast<size_t>(r)], EngineStatus::kOk)
            << p.c.describe(nranks) << ": rank " << r << " " << (error ? error : "");
      }
      const std::string problem = run.check();
      ASSERT_TRUE(problem.empty()) << "call " << call << ": " << problem;
    }
  }
}

// All-reduce of arbitrary data (NaNs, huge values, rounding ties): every rank's
// output is the same bytes, and running again gives the same bytes.
TEST(EngineCollectives, AllReduceIsBitIdenticalOnEveryRankAndDeterministic) {
  struct Shape {
    EngineAlgorithm algorithm;
    int nranks;  // 5: the tree has a node with two children below the root
  };
  for (Shape shape : {Shape{EngineAlgorithm::kRing, 4}, Shape{EngineAlgorithm::kTree, 5}})
    for (EngineProtocol protocol : {EngineProtocol::kSimple, EngineProtocol::kLL})
      for (DataType type : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64})
        for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kAvg}) {
          MatrixPoint p =
              point(shape.nranks, 3, EngineOp::kAllReduce, type, op, 2000, false, 11, protocol, shape.algorithm);
          p.c.exactData = false;
          std::vector<unsigned char> first;
          for (int attempt = 0; attempt < 2; ++attempt) {
            setDelaySeed(static_cast<uint64_t>(attempt) + 100);
            EngineRanks ranks(p.nranks, kChannelsAllocated, 2, kSlotBytes);
            CollectiveRun run(p.c, p.nranks);
            const std::vector<EngineStatus> status = ranks.run<DelayingMemory>(run.calls());
            for (EngineStatus s : status) ASSERT_EQ(s, EngineStatus::kOk);
            for (int r = 1; r < p.nranks; ++r)
              ASSERT_EQ(run.output(r), run.output(0)) << p.c.describe(p.nranks) << ": rank " << r << " differs from rank 0";
            if (attempt == 0) first = run.output(0);
            else EXPECT_EQ(run.output(0), first) << p.c.describe(p.nranks) << ": a second run gave other bytes";
          }
        }
}

// The tree at every shape up to 8 ranks, with one FIFO slot's worth of
// pieces per channel and more, both protocols, against the reference.
TEST(EngineCollectives, TreeAllReduceAtEveryRankCount) {
  uint64_t seed = 300;
  for (int nranks = 2; nranks <= 8; ++nranks)
    for (EngineProtocol protocol : {EngineProtocol::kSimple, EngineProtocol::kLL})
      for (size_t count : {size_t{1}, size_t{9}, size_t{4099}}) {
        MatrixPoint p = point(nranks, 2, EngineOp::kAllReduce, DataType::kInt32, RedOp::kSum, count, seed % 2 == 0,
                              seed, protocol, EngineAlgorithm::kTree);
        ++seed;
        runPoint(p);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

}  // namespace
}  // namespace loom::kernels::cuda::engine::testing
