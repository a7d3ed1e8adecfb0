// The test's own fp16/bf16 encoding and its value sets, checked against
// known bit patterns and (for fp16) the compiler's _Float16, so that the
// reference the matrix compares against is itself trustworthy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tests/integration/case_matrix.h"
#include "tests/integration/element_codec.h"

namespace loom::integration {
namespace {

TEST(Reference, Fp16KnownValues) {
  EXPECT_EQ(Fp16Codec::fromInt(1), 0x3c00);
  EXPECT_EQ(Fp16Codec::fromInt(-2), 0xc000);
  EXPECT_EQ(Fp16Codec::fromInt(256), 0x5c00);
  EXPECT_EQ(Fp16Codec::fromInt(99), 0x5630);
  EXPECT_EQ(Fp16Codec::fromInt(0), 0x0000);
  EXPECT_EQ(Fp16Codec::fromReal(1.0 / 3.0), 0x3555);
  EXPECT_EQ(Fp16Codec::fromReal(-0.125), 0xb000);
  EXPECT_EQ(Fp16Codec::fromReal(1.0 + 1.0 / 2048), 0x3c00);  // tie: rounds to even
  EXPECT_EQ(Fp16Codec::fromReal(1.0 + 3.0 / 2048), 0x3c02);  // tie: rounds to even (up)
  EXPECT_DOUBLE_EQ(Fp16Codec::toDouble(0x3555), 0.333251953125);
  EXPECT_TRUE(std::isnan(Fp16Codec::toDouble(0x7e00)));
}

TEST(Reference, Bf16KnownValues) {
  EXPECT_EQ(Bf16Codec::fromInt(1), 0x3f80);
  EXPECT_EQ(Bf16Codec::fromInt(-4), 0xc080);
  EXPECT_EQ(Bf16Codec::fromInt(256), 0x4380);
  EXPECT_EQ(Bf16Codec::fromInt(99), 0x42c6);
  EXPECT_EQ(Bf16Codec::fromReal(1.0 / 3.0), 0x3eab);
  EXPECT_EQ(Bf16Codec::fromReal(1.0 + 1.0 / 256), 0x3f80);  // tie: rounds to even
  EXPECT_DOUBLE_EQ(Bf16Codec::toDouble(0x3eab), 0.333984375);
}

// Every finite normal pattern survives decode + encode.
template <class C>
void expectRoundTrip() {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto s = static_cast<uint16_t>(bits);
    const double v = C::toDouble(s);
    if (!std::isfinite(v) || (v != 0 && std::fabs(v) < std::ldexp(1.0, 1 - C::kBias))) continue;
    ASSERT_EQ(C::fromReal(v), s) << "pattern 0x" << std::hex << bits;
  }
}
TEST(Reference, Fp16RoundTrip) { expectRoundTrip<Fp16Codec>(); }
TEST(Reference, Bf16RoundTrip) { expectRoundTrip<Bf16Codec>(); }

#ifdef __FLT16_MAX__
// Averages of small integers, as the avg reference produces them.
TEST(Reference, Fp16AgreesWithCompilerFloat16) {
  for (int sum = -64; sum <= 64; ++sum) {
    for (int n = 1; n <= 8; ++n) {
      const double mean = static_cast<double>(sum) / n;
      const _Float16 h = static_cast<_Float16>(mean);
      uint16_t bits;
      std::memcpy(&bits, &h, sizeof bits);
      EXPECT_EQ(Fp16Codec::fromReal(mean), bits) << sum << "/" << n;
    }
  }
}
#endif

TEST(Reference, UlpAt) {
  EXPECT_EQ(ulpAt(1.0, 10), std::ldexp(1.0, -10));
  EXPECT_EQ(ulpAt(1.9, 7), std::ldexp(1.0, -7));
  EXPECT_EQ(ulpAt(-3.0, 23), std::ldexp(1.0, -22));
  EXPECT_EQ(ulpAt(0.0, 52), 0.0);
}

// The matrix covers every (dtype, op, in-place) pair at the small counts
// and, over the ten ctest entries, runs 4M+3 once per dtype per collective.
TEST(Reference, MatrixCoverage) {
  MatrixOptions options;
  const int sizes[] = {1, 2, 3, 4, 8};
  for (int c = 0; c < kNumColls; ++c) {
    const auto coll = static_cast<Coll>(c);
    const size_t opsPerType = collTakesOp(coll) ? kMatrixOps : 1;
    int largeByType[loomNumTypes] = {};
    for (Mode mode : {Mode::kThreads, Mode::kProcesses}) {
      for (int n : sizes) {
        const auto cases = buildCases(coll, n, mode, options);
        size_t large = 0;
        for (const CaseSpec& s : cases) {
          if (s.count != kLargeCount) continue;
          ++large;
          ++largeByType[s.dtype];
          const bool narrow = s.dtype == loomInt8 || s.dtype == loomUint8 || s.dtype == loomFloat16 ||
                              s.dtype == loomBfloat16;
          if (n == 8 && (coll == Coll::kReduceScatter || coll == Coll::kAllGather)) {
            EXPECT_TRUE(narrow) << "only 1- and 2-byte types at 8 ranks: " << describe(s);
          }
        }
        EXPECT_EQ(large, 1u) << collName(coll) << " n=" << n;
        EXPECT_EQ(cases.size(), loomNumTypes * opsPerType * 2 * 6 + large) << collName(coll);
        for (const CaseSpec& s : cases) EXPECT_LT(s.root, n);
      }
    }
    for (int d = 0; d < loomNumTypes; ++d) EXPECT_EQ(largeByType[d], 1) << collName(coll) << " dtype " << d;
  }
}

// Forced-algorithm entries rotate the large case with --large-rotation;
// above four ranks ReduceScatter and AllGather still take only 1- and 2-byte
// types there, and every rotation keeps one large case per collective.
TEST(Reference, LargeRotationKeepsWideBuffersSmall) {
  for (int rotation = 0; rotation < 20; ++rotation) {
    MatrixOptions options;
    options.largeRotation = rotation;
    for (int n : {3, 4, 5, 6, 7, 8}) {
      for (int c = 0; c < kNumColls; ++c) {
        const auto coll = static_cast<Coll>(c);
        size_t large = 0;
        for (const CaseSpec& s : buildCases(coll, n, Mode::kThreads, options)) {
          if (s.count != kLargeCount) continue;
          ++large;
          const bool narrow = s.dtype == loomInt8 || s.dtype == loomUint8 || s.dtype == loomFloat16 ||
                              s.dtype == loomBfloat16;
          if (n > 4 && (coll == Coll::kReduceScatter || coll == Coll::kAllGather)) {
            EXPECT_TRUE(narrow) << "rotation " << rotation << ": " << describe(s);
          }
        }
        EXPECT_EQ(large, 1u) << collName(coll) << " n=" << n << " rotation " << rotation;
      }
    }
  }
}

}  // namespace
}  // namespace loom::integration
