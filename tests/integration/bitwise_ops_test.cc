// loomBand, loomBor and loomBxor through the public API: all-reduce, reduce
// and reduce-scatter on every integer datatype, at counts that take the
// small- and large-message algorithms, against the bitwise combination of
// every rank's input computed here; and floating-point datatypes rejected
// with loomInvalidArgument naming the op. (The case matrix covers the ops
// defined on every datatype; these are defined on integers only.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/integration/fixtures.h"

namespace loom::integration {
namespace {

const loomDataType_t kIntegerTypes[] = {loomInt8, loomUint8, loomInt32, loomUint32, loomInt64, loomUint64};
const loomRedOp_t kBitwiseOps[] = {loomBand, loomBor, loomBxor};
const size_t kCounts[] = {1, 1023, 70001};

size_t sizeOf(loomDataType_t t) {
  switch (t) {
    case loomInt8: case loomUint8: return 1;
    case loomInt32: case loomUint32: return 4;
    default: return 8;
  }
}

// Rank r's element i: bits that differ between ranks and elements, all widths.
uint64_t pattern(int rank, size_t i) {
  uint64_t x = (static_cast<uint64_t>(rank) + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
  return x ^ (x >> 29);
}

std::vector<unsigned char> input(loomDataType_t t, int rank, size_t count) {
  std::vector<unsigned char> v(count * sizeOf(t));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t x = pattern(rank, i);
    std::memcpy(v.data() + i * sizeOf(t), &x, sizeOf(t));  // the low bytes (little-endian)
  }
  return v;
}

// The combination of every rank's element i, in the type's low bytes.
std::vector<unsigned char> expected(loomDataType_t t, loomRedOp_t op, int nranks, size_t count, size_t first) {
  std::vector<unsigned char> v(count * sizeOf(t));
  for (size_t i = 0; i < count; ++i) {
    uint64_t acc = pattern(0, first + i);
    for (int r = 1; r < nranks; ++r) {
      const uint64_t x = pattern(r, first + i);
      acc = op == loomBand ? (acc & x) : op == loomBor ? (acc | x) : (acc ^ x);
    }
    std::memcpy(v.data() + i * sizeOf(t), &acc, sizeOf(t));
  }
  return v;
}

std::string what(const char* coll, loomDataType_t t, loomRedOp_t op, size_t count) {
  return std::string(coll) + " type " + std::to_string(t) + " op " + std::to_string(op) + " count " +
         std::to_string(count);
}

void bitwiseOnRank(loomComm_t comm, int rank, int nranks) {
  for (loomDataType_t t : kIntegerTypes)
    for (loomRedOp_t op : kBitwiseOps)
      for (size_t count : kCounts) {
        const std::vector<unsigned char> in = input(t, rank, count);
        std::vector<unsigned char> out(in.size());
        ASSERT_EQ(loomAllReduce(in.data(), out.data(), count, t, op, comm, nullptr), loomSuccess)
            << what("allreduce", t, op, count) << ": " << loomGetLastError(comm);
        EXPECT_EQ(out, expected(t, op, nranks, count, 0)) << what("allreduce", t, op, count) << " rank " << rank;

        const int root = nranks - 1;
        std::vector<unsigned char> reduced(in.size(), 0);
        ASSERT_EQ(loomReduce(in.data(), reduced.data(), count, t, op, root, comm, nullptr), loomSuccess)
            << what("reduce", t, op, count) << ": " << loomGetLastError(comm);
        if (rank == root) {
          EXPECT_EQ(reduced, expected(t, op, nranks, count, 0)) << what("reduce", t, op, count);
        }

        // Reduce-scatter: rank r's input holds nranks blocks; block j of the
        // result lands on rank j, so elements are indexed over the whole input.
        const std::vector<unsigned char> all = input(t, rank, count * nranks);
        std::vector<unsigned char> block(count * sizeOf(t));
        ASSERT_EQ(loomReduceScatter(all.data(), block.data(), count, t, op, comm, nullptr), loomSuccess)
            << what("reducescatter", t, op, count) << ": " << loomGetLastError(comm);
        EXPECT_EQ(block, expected(t, op, nranks, count, count * rank)) << what("reducescatter", t, op, count);
      }
}

void floatsRejectedOnRank(loomComm_t comm) {
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  for (loomDataType_t t : {loomFloat16, loomFloat32, loomFloat64, loomBfloat16})
    for (loomRedOp_t op : kBitwiseOps) {
      EXPECT_EQ(loomAllReduce(x, y, 1, t, op, comm, nullptr), loomInvalidArgument) << "type " << t << " op " << op;
      const std::string message = loomGetLastError(comm);
      EXPECT_NE(message.find("integer"), std::string::npos) << message;
      EXPECT_NE(message.find("rank"), std::string::npos) << message;
    }
}

TEST_F(Threads, BitwiseOps) {
  runOnRankThreads(nranks_, [&](int r) { bitwiseOnRank(comm(r), r, nranks_); });
}

TEST_F(Threads, BitwiseOpsRejectFloats) {
  // Argument checks fail on each rank alone: no collective starts.
  runOnRankThreads(nranks_, [&](int r) { floatsRejectedOnRank(comm(r)); });
}

TEST_F(Process, BitwiseOps) {
  bitwiseOnRank(world_->comm, world_->rank, world_->nranks);
  markBrokenUnless(!::testing::Test::HasFailure());
}

}  // namespace
}  // namespace loom::integration
