// Every DataType x RedOp x instruction set against the scalar reference, over
// counts that cover the empty call, every vector tail length, large odd
// sizes, misaligned buffers and dst aliasing a source.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/reduce.h"
#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"

namespace loom::kernels {
namespace {

using testdata::describe;

enum class Alias { kNone, kDstIsA, kDstIsB };

struct Layout {
  size_t byteOffset = 0;  // added to every buffer's address
  Alias alias = Alias::kNone;
};

constexpr size_t kGuardElements = 16;
constexpr unsigned char kSentinel = 0xA5;

// Runs one reduce and compares it with the reference; checks that the
// elements past `count` (a guard zone) are untouched.
void checkReduce(Isa isa, DataType type, RedOp op, size_t count, Layout layout, uint64_t seed) {
  const size_t size = dataTypeSize(type);
  const std::vector<unsigned char> a = testdata::randomBuffer(type, count, seed);
  const std::vector<unsigned char> b = testdata::randomBuffer(type, count, seed + 1);
  const std::vector<unsigned char> expected = testref::referenceReduce(type, op, a.data(), b.data(), count);

  // Private copies at the requested offset, followed by a guard zone.
  const size_t span = layout.byteOffset + (count + kGuardElements) * size;
  std::vector<unsigned char> bufA(span, kSentinel), bufB(span, kSentinel), bufDst(span, kSentinel);
  unsigned char* pa = bufA.data() + layout.byteOffset;
  unsigned char* pb = bufB.data() + layout.byteOffset;
  if (!a.empty()) std::memcpy(pa, a.data(), a.size());
  if (!b.empty()) std::memcpy(pb, b.data(), b.size());
  unsigned char* dst = layout.alias == Alias::kDstIsA   ? pa
                       : layout.alias == Alias::kDstIsB ? pb
                                                        : bufDst.data() + layout.byteOffset;

  reduceWithIsa(isa, type, op, dst, pa, pb, count);

  const std::string what = describe(type, op, isa, count) + " offset=" + std::to_string(layout.byteOffset) +
                           " alias=" + std::to_string(static_cast<int>(layout.alias));
  const size_t bad = testref::firstMismatch(type, expected.data(), dst, count);
  ASSERT_EQ(bad, count) << what << ": first wrong element " << bad;
  for (size_t i = count * size; i < (count + kGuardElements) * size; ++i)
    ASSERT_EQ(dst[i], kSentinel) << what << ": wrote past the end (byte " << i << ")";
  if (layout.alias != Alias::kDstIsB && count > 0) {
    ASSERT_EQ(std::memcmp(pb, b.data(), b.size()), 0) << what << ": source b modified";
  }
  if (layout.alias != Alias::kDstIsA && count > 0) {
    ASSERT_EQ(std::memcmp(pa, a.data(), a.size()), 0) << what << ": source a modified";
  }
}

class ReduceMatrixTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isaSupported(GetParam())) GTEST_SKIP() << isaName(GetParam()) << " not supported on this CPU/build";
  }
};

TEST_P(ReduceMatrixTest, SmallCountsCoverEveryTail) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : testdata::opsFor(type))
      for (size_t count = 0; count <= 67; ++count)
        ASSERT_NO_FATAL_FAILURE(checkReduce(GetParam(), type, op, count, {}, count * 131 + 7));
}

TEST_P(ReduceMatrixTest, LargeOddCounts) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : testdata::opsFor(type))
      for (size_t count : {size_t{100003}, size_t{4099}})
        ASSERT_NO_FATAL_FAILURE(checkReduce(GetParam(), type, op, count, {}, count));
}

TEST_P(ReduceMatrixTest, MisalignedBuffers) {
  for (DataType type : testdata::allTypes()) {
    // One element off, and (for multi-byte types) one byte off: no alignment is assumed.
    std::vector<size_t> offsets = {dataTypeSize(type)};
    if (dataTypeSize(type) > 1) offsets.push_back(1);
    for (size_t offset : offsets)
      for (RedOp op : testdata::opsFor(type))
        for (size_t count : {size_t{1}, size_t{31}, size_t{67}, size_t{1027}})
          ASSERT_NO_FATAL_FAILURE(checkReduce(GetParam(), type, op, count, {offset, Alias::kNone}, count + 3));
  }
}

TEST_P(ReduceMatrixTest, DstMayAliasEitherSource) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : testdata::opsFor(type))
      for (Alias alias : {Alias::kDstIsA, Alias::kDstIsB})
        for (size_t count : {size_t{5}, size_t{64}, size_t{1029}})
          for (size_t offset : {size_t{0}, dataTypeSize(type)})
            ASSERT_NO_FATAL_FAILURE(checkReduce(GetParam(), type, op, count, {offset, alias}, count + 11));
}

TEST_P(ReduceMatrixTest, ZeroCountAcceptsNullPointers) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : testdata::opsFor(type)) reduceWithIsa(GetParam(), type, op, nullptr, nullptr, nullptr, 0);
}

INSTANTIATE_TEST_SUITE_P(Isas, ReduceMatrixTest, ::testing::ValuesIn(testdata::allIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isaName(info.param)); });

}  // namespace
}  // namespace loom::kernels
