#include "ddp/distributed/half_precision.h"

#include <bit>
#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LOOM_DDP_HAVE_F16C_PATH 1
#endif

namespace loom::ddp {

uint16_t floatToHalf(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN (quiet) or infinity
  // 65520 is halfway between fp16's largest finite value (65504) and 2^16;
  // the tie goes to the even neighbour, which is infinity.
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) {
    // Below fp16's smallest normal (2^-14): a multiple of 2^-24. Adding 0.5
    // puts the value in the binade [0.5, 1) whose ulp is exactly 2^-24, so
    // the FPU's own round-to-nearest-even does the rounding.
    const float shifted = std::bit_cast<float>(x) + 0.5f;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped
  // mantissa bits to nearest even; a carry correctly bumps the exponent.
  const uint32_t oddMantissa = (x >> 13) & 1u;
  x += 0xc8000fffu + oddMantissa;  // 0xc8000000 == -(112 << 23) modulo 2^32
  return sign | static_cast<uint16_t>(x >> 13);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal, exact
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t floatToBfloat16(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // keep NaN a (quiet) NaN
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bfloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

#ifdef LOOM_DDP_HAVE_F16C_PATH
namespace {
// The hardware conversions (F16C) round to nearest even exactly like
// floatToHalf; the only difference is which quiet NaN comes out. Used when
// the CPU has them (checked at run time; the build targets plain x86-64):
// the scalar loops would cost more than the all-reduce they shrink.
bool haveF16c() {
  static const bool have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return have;
}

__attribute__((target("avx,f16c"))) size_t compressF16c(const float* in, float scale, uint16_t* out, size_t n) {
  const __m256 factor = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(in + i), factor);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;  // elements done; the caller finishes the tail
}

__attribute__((target("avx,f16c"))) size_t decompressF16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  return i;
}
}  // namespace
#endif

void compressScaled(std::span<const float> in, float scale, HalfFormat format, std::span<uint16_t> out) {
  if (in.size() != out.size()) throw std::invalid_argument("compressScaled: in and out differ in length");
  if (format == HalfFormat::kFp16) {
    size_t done = 0;
#ifdef LOOM_DDP_HAVE_F16C_PATH
    if (haveF16c()) done = compressF16c(in.data(), scale, out.data(), in.size());
#endif
    for (size_t i = done; i < in.size(); ++i) out[i] = floatToHalf(in[i] * scale);
  } else {
    for (size_t i = 0; i < in.size(); ++i) out[i] = floatToBfloat16(in[i] * scale);
  }
}

void decompress(std::span<const uint16_t> in, HalfFormat format, std::span<float> out) {
  if (in.size() != out.size()) throw std::invalid_argument("decompress: in and out differ in length");
  if (format == HalfFormat::kFp16) {
    size_t done = 0;
#ifdef LOOM_DDP_HAVE_F16C_PATH
    if (haveF16c()) done = decompressF16c(in.data(), out.data(), in.size());
#endif
    for (size_t i = done; i < in.size(); ++i) out[i] = halfToFloat(in[i]);
  } else {
    for (size_t i = 0; i < in.size(); ++i) out[i] = bfloat16ToFloat(in[i]);
  }
}

}  // namespace loom::ddp
