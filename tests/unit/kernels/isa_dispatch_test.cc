// Instruction-set selection (names, LOOM_KERNEL_ISA capping, support) and the
// cross-check that every vector path gives the portable path's bits for every
// type and op (only NaN payloads may differ).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/isa_select.h"
#include "kernels/kernel_table.h"
#include "kernels/reduce.h"
#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"

namespace loom::kernels {
namespace {

using Bytes = std::vector<unsigned char>;

TEST(IsaDispatch, NamesParseBackCaseInsensitively) {
  for (Isa isa : testdata::allIsas()) {
    Isa parsed;
    ASSERT_TRUE(detail::parseIsaName(isaName(isa), &parsed));
    EXPECT_EQ(parsed, isa);
  }
  Isa parsed;
  EXPECT_TRUE(detail::parseIsaName("AVX512", &parsed));
  EXPECT_EQ(parsed, Isa::kAvx512);
  EXPECT_FALSE(detail::parseIsaName("sse4", &parsed));
  EXPECT_FALSE(detail::parseIsaName(nullptr, &parsed));
  EXPECT_STREQ(isaName(Isa::kAvx2), "avx2");
}

TEST(IsaDispatch, CapLowersButNeverRaises) {
  std::string warning;
  EXPECT_EQ(detail::capIsa(Isa::kAvx512, nullptr, &warning), Isa::kAvx512);
  EXPECT_EQ(detail::capIsa(Isa::kAvx512, "", &warning), Isa::kAvx512);
  EXPECT_EQ(detail::capIsa(Isa::kAvx512, "avx2", &warning), Isa::kAvx2);
  EXPECT_EQ(detail::capIsa(Isa::kAvx512, "portable", &warning), Isa::kPortable);
  EXPECT_EQ(detail::capIsa(Isa::kAvx2, "avx512", &warning), Isa::kAvx2);
  EXPECT_EQ(detail::capIsa(Isa::kPortable, "avx2", &warning), Isa::kPortable);
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(detail::capIsa(Isa::kAvx2, "fastest", &warning), Isa::kAvx2);
  EXPECT_NE(warning.find("fastest"), std::string::npos) << warning;
}

TEST(IsaDispatch, SupportIsConsistent) {
  EXPECT_TRUE(isaSupported(Isa::kPortable));
  const Isa best = detail::bestSupportedIsa();
  EXPECT_TRUE(isaSupported(best));
  for (Isa isa : testdata::allIsas()) {
    if (static_cast<int>(isa) > static_cast<int>(best)) {
      EXPECT_FALSE(isaSupported(isa)) << isaName(isa);
    }
  }
  // AVX-512 machines always have AVX2 as well.
  if (isaSupported(Isa::kAvx512)) {
    EXPECT_TRUE(isaSupported(Isa::kAvx2));
  }
  EXPECT_FALSE(isaSupported(static_cast<Isa>(7)));
}

// Also run by ctest with LOOM_KERNEL_ISA=portable and =avx2.
TEST(IsaDispatch, ActiveIsaFollowsEnvironmentCap) {
  const char* cap = std::getenv("LOOM_KERNEL_ISA");
  const Isa active = activeIsa();
  EXPECT_TRUE(isaSupported(active));
  EXPECT_EQ(active, detail::capIsa(detail::bestSupportedIsa(), cap, nullptr)) << (cap ? cap : "(unset)");
  Isa limit;
  if (detail::parseIsaName(cap, &limit)) {
    EXPECT_LE(static_cast<int>(active), static_cast<int>(limit));
  }
  // reduce() uses the active table.
  const Bytes a = testdata::randomBuffer(DataType::kFloat16, 999, 1), b = testdata::randomBuffer(DataType::kFloat16, 999, 2);
  Bytes viaReduce(a.size()), viaIsa(a.size());
  reduce(DataType::kFloat16, RedOp::kSum, viaReduce.data(), a.data(), b.data(), 999);
  reduceWithIsa(active, DataType::kFloat16, RedOp::kSum, viaIsa.data(), a.data(), b.data(), 999);
  EXPECT_EQ(viaReduce, viaIsa);
}

const detail::KernelTable* tableOf(Isa isa) {
  if (!isaSupported(isa)) return nullptr;
  if (isa == Isa::kAvx2) return detail::avx2KernelTable();
  if (isa == Isa::kAvx512) return detail::avx512KernelTable();
  return &detail::portableKernelTable();
}

// Inputs that reach every 16-bit pattern (as a) for the 16-bit floats, and
// random data with specials for everything else.
std::pair<Bytes, Bytes> crossCheckInputs(DataType type) {
  if (dataTypeSize(type) != 2 || type == DataType::kInt8) {
    return {testdata::randomBuffer(type, 20011, 3), testdata::randomBuffer(type, 20011, 4)};
  }
  std::vector<uint16_t> all(0x10000);
  std::iota(all.begin(), all.end(), uint16_t{0});
  Bytes a(all.size() * 2);
  std::memcpy(a.data(), all.data(), a.size());
  Bytes b = testdata::randomBuffer(type, all.size(), 5);
  return {a, b};
}

TEST(IsaDispatch, EveryIsaMatchesPortableBitForBit) {
  const detail::KernelTable& portable = detail::portableKernelTable();
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    const detail::KernelTable* table = tableOf(isa);
    if (table == nullptr) continue;
    for (DataType type : testdata::allTypes()) {
      const auto [a, b] = crossCheckInputs(type);
      const size_t count = a.size() / dataTypeSize(type);
      const int t = static_cast<int>(type);
      Bytes want(a.size()), got(a.size());
      for (RedOp op : testdata::allOps()) {
        portable.reduce[t][static_cast<int>(op)](want.data(), a.data(), b.data(), count);
        table->reduce[t][static_cast<int>(op)](got.data(), a.data(), b.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, want.data(), got.data(), count), count)
            << testdata::describe(type, op, isa, count);
        // Reversed operands too: min/max tie and NaN rules depend on the order.
        portable.reduce[t][static_cast<int>(op)](want.data(), b.data(), a.data(), count);
        table->reduce[t][static_cast<int>(op)](got.data(), b.data(), a.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, want.data(), got.data(), count), count)
            << "b, a: " << testdata::describe(type, op, isa, count);
      }
      for (int nranks = 1; nranks <= 8; ++nranks) {
        portable.divide[t](nranks, want.data(), a.data(), count);
        table->divide[t](nranks, got.data(), a.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, want.data(), got.data(), count), count)
            << "divide " << testdata::describe(type, RedOp::kAvg, isa, count) << " nranks=" << nranks;
        portable.sumDivide[t](nranks, want.data(), a.data(), b.data(), count);
        table->sumDivide[t](nranks, got.data(), a.data(), b.data(), count);
        ASSERT_EQ(testref::firstMismatch(type, want.data(), got.data(), count), count)
            << "sumDivide " << testdata::describe(type, RedOp::kAvg, isa, count) << " nranks=" << nranks;
      }
    }
  }
}

TEST(IsaDispatch, InvalidArgumentsWriteNothing) {
  std::vector<float> a(4, 1.0f), b(4, 2.0f), dst(4, -7.0f);
  const std::vector<float> untouched = dst;
  reduce(static_cast<DataType>(42), RedOp::kSum, dst.data(), a.data(), b.data(), 4);
  reduce(DataType::kFloat32, static_cast<RedOp>(9), dst.data(), a.data(), b.data(), 4);
  reduce(DataType::kFloat32, RedOp::kSum, dst.data(), nullptr, b.data(), 4);
  reduce(DataType::kFloat32, RedOp::kSum, nullptr, a.data(), b.data(), 4);
  reduceWithIsa(static_cast<Isa>(7), DataType::kFloat32, RedOp::kSum, dst.data(), a.data(), b.data(), 4);
  finalize(static_cast<DataType>(-1), RedOp::kAvg, 2, dst.data(), a.data(), 4);
  reduceFinal(DataType::kFloat32, static_cast<RedOp>(5), 2, dst.data(), a.data(), b.data(), 4);
  EXPECT_EQ(dst, untouched);
}

}  // namespace
}  // namespace loom::kernels
