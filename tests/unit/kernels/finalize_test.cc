// finalize() and reduceFinal(): avg's division (C truncation for integers,
// rounding for floats) against the reference, the fused pass against two
// passes, copies for the other ops, and exhaustive small-integer division.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <vector>

#include "kernels/reduce.h"
#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"

namespace loom::kernels {
namespace {

using Bytes = std::vector<unsigned char>;

std::string what(DataType type, int nranks, size_t count) {
  return std::string(dataTypeName(type)) + " nranks=" + std::to_string(nranks) + " count=" + std::to_string(count);
}

TEST(Finalize, AvgDividesLikeTheReference) {
  for (DataType type : testdata::allTypes())
    for (int nranks = 1; nranks <= 8; ++nranks)
      for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{33}, size_t{67}, size_t{1001}}) {
        const Bytes src = testdata::randomBuffer(type, count, nranks * 1000 + count);
        const Bytes expected = testref::referenceDivide(type, nranks, src.data(), count);
        Bytes out(src.size() + 1);
        finalize(type, RedOp::kAvg, nranks, out.data(), src.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, expected.data(), out.data(), count), count) << what(type, nranks, count);
        Bytes inPlace = src;  // dst == src
        finalize(type, RedOp::kAvg, nranks, inPlace.data(), inPlace.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, expected.data(), inPlace.data(), count), count)
            << "in place: " << what(type, nranks, count);
      }
}

TEST(Finalize, ReduceFinalAvgFusesSumAndDivide) {
  for (DataType type : testdata::allTypes())
    for (int nranks = 1; nranks <= 8; ++nranks)
      for (size_t count : {size_t{1}, size_t{17}, size_t{64}, size_t{1003}}) {
        const Bytes a = testdata::randomBuffer(type, count, nranks * 7 + count);
        const Bytes b = testdata::randomBuffer(type, count, nranks * 13 + count);
        const Bytes expected = testref::referenceSumDivide(type, nranks, a.data(), b.data(), count);
        Bytes fused(a.size());
        reduceFinal(type, RedOp::kAvg, nranks, fused.data(), a.data(), b.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, expected.data(), fused.data(), count), count) << what(type, nranks, count);

        Bytes twoPass(a.size());  // reduce then finalize must give the same bits
        reduce(type, RedOp::kAvg, twoPass.data(), a.data(), b.data(), count);
        finalize(type, RedOp::kAvg, nranks, twoPass.data(), twoPass.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, twoPass.data(), fused.data(), count), count) << what(type, nranks, count);

        Bytes aliased = a;  // dst == a
        reduceFinal(type, RedOp::kAvg, nranks, aliased.data(), aliased.data(), b.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, expected.data(), aliased.data(), count), count)
            << "dst == a: " << what(type, nranks, count);
      }
}

TEST(Finalize, OtherOpsCopyAndReduceFinalEqualsReduce) {
  for (DataType type : testdata::allTypes())
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax}) {
      const size_t count = 77;
      const Bytes a = testdata::randomBuffer(type, count, 5), b = testdata::randomBuffer(type, count, 6);
      Bytes copy(a.size(), 0);
      finalize(type, op, 3, copy.data(), a.data(), count);
      ASSERT_EQ(copy, a) << dataTypeName(type) << " " << redOpName(op);
      Bytes same = a;
      finalize(type, op, 3, same.data(), same.data(), count);
      ASSERT_EQ(same, a);
      Bytes viaReduce(a.size()), viaFinal(a.size());
      reduce(type, op, viaReduce.data(), a.data(), b.data(), count);
      reduceFinal(type, op, 5, viaFinal.data(), a.data(), b.data(), count);
      ASSERT_EQ(testref::firstMismatch(type, viaReduce.data(), viaFinal.data(), count), count);
    }
}

template <class T>
std::vector<T> divideAll(const std::vector<T>& values, int nranks, DataType type) {
  std::vector<T> out(values.size());
  finalize(type, RedOp::kAvg, nranks, out.data(), values.data(), values.size());
  return out;
}

TEST(Finalize, IntegerAvgTruncatesTowardZero) {
  EXPECT_EQ(divideAll<int8_t>({-7, 7, -128, 127, -1, 1}, 2, DataType::kInt8),
            (std::vector<int8_t>{-3, 3, -64, 63, 0, 0}));
  EXPECT_EQ(divideAll<int32_t>({INT32_MIN, INT32_MAX, -5, 5}, 3, DataType::kInt32),
            (std::vector<int32_t>{-715827882, 715827882, -1, 1}));
  EXPECT_EQ(divideAll<int64_t>({INT64_MIN, -9, 9}, 4, DataType::kInt64),
            (std::vector<int64_t>{INT64_MIN / 4, -2, 2}));
  EXPECT_EQ(divideAll<uint64_t>({UINT64_MAX, 7}, 2, DataType::kUint64), (std::vector<uint64_t>{UINT64_MAX / 2, 3}));
}

// 8- and 32-bit avg divide through fp32/fp64; check that equals C division
// for every 8-bit value and the 32-bit extremes, including huge rank counts
// where the divisor itself is not exact in fp32.
TEST(Finalize, SmallIntegerDivisionIsExactForEveryValue) {
  std::vector<int> divisors;
  for (int n = 1; n <= 300; ++n) divisors.push_back(n);
  for (int n : {65535, 65793, (1 << 24) - 1, (1 << 24) + 1, INT_MAX}) divisors.push_back(n);
  std::vector<int8_t> s8(256);
  std::vector<uint8_t> u8(256);
  for (int v = 0; v < 256; ++v) {
    s8[v] = static_cast<int8_t>(v - 128);
    u8[v] = static_cast<uint8_t>(v);
  }
  const std::vector<int32_t> s32 = {INT32_MIN, INT32_MIN + 1, -2147483000, -65536, -3, -1, 0, 1, 2, 65535,
                                    2147483000, INT32_MAX - 1, INT32_MAX};
  const std::vector<uint32_t> u32 = {0, 1, 2, 4294967295u, 4294967294u, 4294967000u, 2147483648u, 16777217u};
  for (int n : divisors) {
    const auto d8 = divideAll(s8, n, DataType::kInt8);
    const auto du8 = divideAll(u8, n, DataType::kUint8);
    for (size_t i = 0; i < 256; ++i) {
      ASSERT_EQ(d8[i], s8[i] / n) << int(s8[i]) << " / " << n;
      ASSERT_EQ(du8[i], u8[i] / n) << int(u8[i]) << " / " << n;
    }
    const auto d32 = divideAll(s32, n, DataType::kInt32);
    const auto du32 = divideAll(u32, n, DataType::kUint32);
    for (size_t i = 0; i < s32.size(); ++i) ASSERT_EQ(d32[i], s32[i] / n) << s32[i] << " / " << n;
    for (size_t i = 0; i < u32.size(); ++i) ASSERT_EQ(du32[i], u32[i] / static_cast<uint32_t>(n)) << u32[i] << " / " << n;
  }
}

TEST(Finalize, InvalidRankCountWritesNothing) {
  std::vector<float> src(8, 3.0f), dst(8, -1.0f);
  finalize(DataType::kFloat32, RedOp::kAvg, 0, dst.data(), src.data(), dst.size());
  EXPECT_EQ(dst, std::vector<float>(8, -1.0f));
  reduceFinal(DataType::kFloat32, RedOp::kAvg, -2, dst.data(), src.data(), src.data(), dst.size());
  EXPECT_EQ(dst, std::vector<float>(8, -1.0f));
}

}  // namespace
}  // namespace loom::kernels
