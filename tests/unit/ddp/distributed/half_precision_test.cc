// The hooks' fp32 -> fp16/bf16 conversions against independent references:
// the compiler's _Float16 conversion (round to nearest even) and, for bf16,
// picking the nearer of the two truncation neighbours in double arithmetic.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "ddp/distributed/half_precision.h"

namespace loom::ddp {
namespace {

uint16_t referenceHalf(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

uint16_t referenceBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t lower = x & 0xffff0000u;
  const uint32_t upper = lower + 0x10000u;  // next bf16 away from zero (may become inf)
  const double dl = std::fabs(static_cast<double>(f) - std::bit_cast<float>(lower));
  // Rounding acts as if the exponent were unbounded: past bf16's largest
  // finite value the upper neighbour is 2^128 (then becomes infinity).
  const double upperValue = (upper & 0x7fffffffu) == 0x7f800000u ? std::copysign(std::ldexp(1.0, 128), f)
                                                                  : static_cast<double>(std::bit_cast<float>(upper));
  const double du = std::fabs(upperValue - f);
  if (dl < du) return static_cast<uint16_t>(lower >> 16);
  if (du < dl) return static_cast<uint16_t>(upper >> 16);
  return static_cast<uint16_t>(((lower >> 16) & 1u) ? upper >> 16 : lower >> 16);  // tie: even
}

std::vector<float> probeValues() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 70000.0f, -70000.0f,
                          0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 1e-10f, 3.14159f, 1.0f + 0x1p-11f,
                          1.0f + 0x1p-11f + 0x1p-23f, 1.0f + 0x1.8p-10f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    if ((bits & 0x7f800000u) == 0x7f800000u) continue;  // NaNs are checked apart
    // Bias toward fp16's range (exponents around 2^-26..2^16).
    if (i % 2 == 0) bits = (bits & 0x807fffffu) | ((100u + rng() % 46u) << 23);
    v.push_back(std::bit_cast<float>(bits));
  }
  return v;
}

TEST(HalfPrecision, Fp16RoundsLikeTheCompiler) {
  for (float f : probeValues()) {
    ASSERT_EQ(floatToHalf(f), referenceHalf(f)) << std::hexfloat << f;
  }
}

TEST(HalfPrecision, Fp16WidensExactly) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const _Float16 ref = std::bit_cast<_Float16>(static_cast<uint16_t>(h));
    const float want = static_cast<float>(ref);
    const float got = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << h;
    }
  }
}

TEST(HalfPrecision, Bf16RoundsToNearestEven) {
  for (float f : probeValues()) {
    if (std::isinf(f)) {
      ASSERT_EQ(floatToBfloat16(f), static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16));
      continue;
    }
    ASSERT_EQ(floatToBfloat16(f), referenceBf16(f)) << std::hexfloat << f;
    ASSERT_EQ(std::bit_cast<uint32_t>(bfloat16ToFloat(floatToBfloat16(f))) & 0xffffu, 0u);
  }
}

// compressScaled/decompress (vectorised where the CPU allows) agree with the
// scalar conversions bit for bit on every non-NaN value, tails included.
TEST(HalfPrecision, BulkConversionsMatchScalar) {
  std::vector<float> in = probeValues();
  in.resize(in.size() - in.size() % 8 + 5);  // a tail the vector loop leaves over
  for (HalfFormat format : {HalfFormat::kFp16, HalfFormat::kBf16}) {
    const float scale = 0.25f;
    std::vector<uint16_t> packed(in.size());
    compressScaled(in, scale, format, packed);
    std::vector<float> back(in.size());
    decompress(packed, format, back);
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t want = format == HalfFormat::kFp16 ? floatToHalf(in[i] * scale) : floatToBfloat16(in[i] * scale);
      ASSERT_EQ(packed[i], want) << i << " " << std::hexfloat << in[i];
      const float wide = format == HalfFormat::kFp16 ? halfToFloat(want) : bfloat16ToFloat(want);
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(wide)) << i;
    }
  }
}

TEST(HalfPrecision, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(nan))));
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(nan))));
  // A signalling NaN whose payload lies only in the low 16 bits must not become infinity.
  const float low = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(low))));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(low))));
  std::vector<float> many(19, nan);
  std::vector<uint16_t> packed(19);
  std::vector<float> back(19);
  compressScaled(many, 0.5f, HalfFormat::kFp16, packed);
  decompress(packed, HalfFormat::kFp16, back);
  for (float f : back) EXPECT_TRUE(std::isnan(f));
}

TEST(HalfPrecision, CompressScalesFirst) {
  // 100000 overflows fp16 unscaled; divided by 4 it is finite.
  std::vector<float> in = {100000.0f, -3.0f, 0.5f};
  std::vector<uint16_t> out(3);
  compressScaled(in, 0.25f, HalfFormat::kFp16, out);
  std::vector<float> back(3);
  decompress(out, HalfFormat::kFp16, back);
  EXPECT_EQ(back[0], static_cast<float>(static_cast<_Float16>(25000.0f)));
  EXPECT_EQ(back[1], -0.75f);
  EXPECT_EQ(back[2], 0.125f);
  std::vector<uint16_t> wrong(2);
  EXPECT_THROW(compressScaled(in, 1.0f, HalfFormat::kBf16, wrong), std::invalid_argument);
}

}  // namespace
}  // namespace loom::ddp
