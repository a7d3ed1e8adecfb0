// fp16/bf16 <-> fp32 conversions of kernels/reduce_ops.h against the
// reference rounding (reference.h) and, where the CPU has F16C, against the
// hardware converters; then rounding edge cases through reduce() on every
// instruction set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reduce.h"
#include "kernels/reduce_ops.h"
#include "tests/unit/kernels/reference.h"
#include "tests/unit/kernels/test_data.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace loom::kernels {
namespace {

using testref::kBf16;
using testref::kHalf;

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 inputs that probe rounding in a 16-bit format: every finite value, the
// midpoints between neighbours (exact in fp32) and one fp32 ulp either side.
std::vector<float> roundingProbes(testref::Format16 format) {
  std::vector<float> probes;
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const auto next = static_cast<uint16_t>(bits + 1);
    if (testref::isNan16(format, h) || std::isinf(testref::decode16(format, h))) continue;
    probes.push_back(static_cast<float>(testref::decode16(format, h)));
    if ((h & 0x7FFF) == 0x7FFF || testref::isNan16(format, next)) continue;
    const double high = testref::decode16(format, next);  // inf past the largest finite value
    const double low = testref::decode16(format, h);
    const double mid = std::isinf(high) ? low + (low - testref::decode16(format, static_cast<uint16_t>(h - 1))) / 2
                                        : (low + high) / 2;
    const float m = static_cast<float>(mid);
    probes.push_back(m);
    probes.push_back(std::nextafter(m, 0.0f));
    probes.push_back(std::nextafter(m, m > 0 ? INFINITY : -INFINITY));
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) probes.push_back(floatOf(static_cast<uint32_t>(bits)));
  return probes;
}

TEST(Conversion, HalfToFloatIsExactAndQuietsNan) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = halfToFloat(h);
    if (testref::isNan16(kHalf, h)) {
      const uint32_t want = (static_cast<uint32_t>(h & 0x8000) << 16) | 0x7FC00000u | ((h & 0x3FFu) << 13);
      ASSERT_EQ(bitsOf(f), want) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), testref::decode16(kHalf, h)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    }
  }
}

TEST(Conversion, FloatToHalfRoundsToNearestEven) {
  for (float f : roundingProbes(kHalf)) {
    const uint16_t got = floatToHalf(f);
    if (std::isnan(f)) {
      const uint32_t u = bitsOf(f);
      ASSERT_EQ(got, ((u >> 16) & 0x8000u) | 0x7E00u | ((u >> 13) & 0x3FFu)) << std::hex << u;
    } else {
      ASSERT_EQ(got, testref::encode16(kHalf, f)) << std::hex << bitsOf(f) << " = " << f;
    }
  }
}

TEST(Conversion, HalfKnownValues) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.996f), 0x7BFF);    // just below the tie: largest finite
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);      // tie between 65504 (odd) and 2^16: to inf
  EXPECT_EQ(floatToHalf(-1e10f), 0xFC00);
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3C00);   // tie: stays on even 1.0
  EXPECT_EQ(floatToHalf(1.0f + 0x3p-11f), 0x3C02);   // tie: rounds up to even
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);          // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);          // tie with zero: even
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);   // just above the tie
  EXPECT_EQ(floatToHalf(0x3p-25f), 0x0002);          // 1.5 units: to even 2
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400);      // 1023.5 units: tie, rounds up into the smallest normal
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(floatOf(0x7F800001u)), 0x7E00);  // sNaN with a low payload: still NaN
  EXPECT_EQ(floatToHalf(floatOf(0xFFC02000u)), 0xFE01);
}

TEST(Conversion, Bf16ToFloatIsExact) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    ASSERT_EQ(bitsOf(bf16ToFloat(b)), bits << 16);
  }
}

TEST(Conversion, FloatToBf16RoundsToNearestEven) {
  for (float f : roundingProbes(kBf16)) {
    const uint16_t got = floatToBf16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(got, (bitsOf(f) >> 16) | 0x40u) << std::hex << bitsOf(f);
    } else {
      ASSERT_EQ(got, testref::encode16(kBf16, f)) << std::hex << bitsOf(f) << " = " << f;
    }
  }
}

TEST(Conversion, Bf16KnownValues) {
  EXPECT_EQ(floatToBf16(floatOf(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds past the largest bf16: inf
  EXPECT_EQ(floatToBf16(floatOf(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3F80);         // tie: even
  EXPECT_EQ(floatToBf16(1.0f + 0x3p-8f), 0x3F82);         // tie: up to even
  EXPECT_EQ(floatToBf16(floatOf(0x00008000u)), 0x0000);   // fp32 subnormal tie: even (not flushed)
  EXPECT_EQ(floatToBf16(floatOf(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBf16(floatOf(0x7F800001u)), 0x7FC0);   // NaN payload below the cut stays NaN
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hardwareToHalf(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set1_ps(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hardwareToFloat(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))));
}

// The scalar conversions must agree with F16C, NaNs included, because the
// vector kernels use F16C and the scalar ones handle the tails.
TEST(Conversion, HalfMatchesF16cHardware) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C";
  for (uint32_t bits = 0; bits < 0x10000; ++bits)
    ASSERT_EQ(bitsOf(halfToFloat(static_cast<uint16_t>(bits))), bitsOf(hardwareToFloat(static_cast<uint16_t>(bits))))
        << std::hex << bits;
  for (float f : roundingProbes(kHalf)) ASSERT_EQ(floatToHalf(f), hardwareToHalf(f)) << std::hex << bitsOf(f);
}
#endif

// Rounding edge cases through the kernels: each (a, b, op, expected) case is
// repeated across a buffer long enough for both vector bodies and tails.
struct EdgeCase {
  RedOp op;
  uint16_t a, b, expected;
};

void checkEdgeCases(Isa isa, DataType type, const std::vector<EdgeCase>& cases) {
  constexpr size_t kCount = 45;
  for (const EdgeCase& c : cases) {
    std::vector<uint16_t> a(kCount, c.a), b(kCount, c.b), dst(kCount, 0x1234);
    reduceWithIsa(isa, type, c.op, dst.data(), a.data(), b.data(), kCount);
    const testref::Format16 format = type == DataType::kFloat16 ? kHalf : kBf16;
    const std::vector<unsigned char> ref = testref::referenceReduce(type, c.op, a.data(), b.data(), 1);
    uint16_t refBits;
    std::memcpy(&refBits, ref.data(), 2);
    for (size_t i = 0; i < kCount; ++i) {
      const std::string what = testdata::describe(type, c.op, isa, kCount) + " element " + std::to_string(i);
      if (testref::isNan16(format, c.expected)) {
        ASSERT_TRUE(testref::isNan16(format, dst[i])) << what << std::hex << " got " << dst[i];
      } else {
        ASSERT_EQ(dst[i], c.expected) << what << std::hex << " a=" << c.a << " b=" << c.b;
        ASSERT_EQ(refBits, c.expected) << "reference disagrees: " << what;
      }
    }
  }
}

class RoundingEdgeTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isaSupported(GetParam())) GTEST_SKIP() << isaName(GetParam()) << " not supported on this CPU/build";
  }
};

TEST_P(RoundingEdgeTest, Half) {
  checkEdgeCases(GetParam(), DataType::kFloat16,
                 {{RedOp::kSum, 0x7BFF, 0x4C00, 0x7C00},   // 65504 + 16 = 65520: tie, to inf
                  {RedOp::kSum, 0x7BFF, 0x4800, 0x7BFF},   // 65504 + 8: down to 65504
                  {RedOp::kProd, 0x7BFF, 0x4000, 0x7C00},  // overflow to inf
                  {RedOp::kSum, 0x3C00, 0x1000, 0x3C00},   // 1 + 2^-11: tie, stays even
                  {RedOp::kSum, 0x3C01, 0x1000, 0x3C02},   // tie, up to even
                  {RedOp::kSum, 0x0001, 0x0001, 0x0002},   // subnormal + subnormal
                  {RedOp::kProd, 0x0001, 0x3800, 0x0000},  // 2^-24 * 0.5: tie with 0, even
                  {RedOp::kProd, 0x0003, 0x3800, 0x0002},  // 1.5 units: to even 2
                  {RedOp::kProd, 0x0001, 0x3E00, 0x0002},  // 1.5 units
                  {RedOp::kAvg, 0x0400, 0x8001, 0x03FF},   // normal - subnormal = subnormal
                  {RedOp::kSum, 0x7E00, 0x3C00, 0x7E00},   // NaN stays NaN
                  {RedOp::kSum, 0x7C00, 0xFC00, 0x7E00},   // inf - inf = NaN
                  {RedOp::kMax, 0x3C00, 0x7C01, 0x7E00},   // NaN wins max
                  {RedOp::kMin, 0x7E00, 0x3C00, 0x7E00},   // NaN wins min
                  {RedOp::kMin, 0x8000, 0x0000, 0x0000},   // equal: the second operand
                  {RedOp::kMax, 0xBC00, 0x3C00, 0x3C00}});
}

TEST_P(RoundingEdgeTest, Bf16) {
  checkEdgeCases(GetParam(), DataType::kBfloat16,
                 {{RedOp::kSum, 0x7F7F, 0x7F7F, 0x7F80},   // overflow to inf
                  {RedOp::kSum, 0x7F7F, 0x7300, 0x7F7F},   // max + small: stays
                  {RedOp::kSum, 0x3F80, 0x3B80, 0x3F80},   // 1 + 2^-8: tie, even
                  {RedOp::kSum, 0x3F81, 0x3B80, 0x3F82},   // tie, up to even
                  {RedOp::kProd, 0x0001, 0x3F00, 0x0000},  // smallest subnormal * 0.5: tie, even
                  {RedOp::kProd, 0x0003, 0x3F00, 0x0002},
                  {RedOp::kSum, 0x0001, 0x0001, 0x0002},   // subnormals are not flushed
                  {RedOp::kSum, 0x7FC0, 0x3F80, 0x7FC0},
                  {RedOp::kSum, 0x7F80, 0xFF80, 0x7FC0},
                  {RedOp::kMin, 0x3F80, 0x7F81, 0x7FC0},
                  {RedOp::kMax, 0x7FC0, 0x3F80, 0x7FC0}});
}

INSTANTIATE_TEST_SUITE_P(Isas, RoundingEdgeTest, ::testing::ValuesIn(testdata::allIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) { return std::string(isaName(info.param)); });

}  // namespace
}  // namespace loom::kernels
