// Element-wise reduction functors and the fp16/bf16 <-> fp32 conversions
// they rely on. Header-only and free of host-only calls, so CUDA kernels can
// reuse exactly the same arithmetic (every function is LOOM_HOST_DEVICE).
//
// Semantics (the contract every instruction-set path must match bit for bit):
//   - Integers wrap: sums and products are computed in the unsigned type, so
//     overflow is defined and the result is independent of reduction order.
//   - fp16 and bf16 are widened to fp32, combined, and rounded back to
//     nearest-even after every operation. Conversions preserve NaN: fp16 ->
//     fp32 quiets a signalling NaN and shifts the payload up (as F16C's
//     VCVTPH2PS does); fp32 -> fp16 keeps the top 10 payload bits and sets
//     the quiet bit (as VCVTPS2PH does); fp32 -> bf16 keeps the top 7 payload
//     bits and sets the quiet bit. Which payload an arithmetic result carries
//     when both operands are NaN is unspecified (only "is NaN" is).
//   - Min/Max return NaN when either operand is NaN; otherwise the smaller
//     (larger) value, and the second operand when both compare equal (which
//     only matters for -0 versus +0).
//   - Avg reduces as Sum; DivideBy applies the division by the rank count:
//     integers truncate toward zero (C division), floats divide in their own
//     precision, fp16/bf16 divide in fp32 and round back.
//
// Thread safety: everything here is a pure function of its arguments.
//
// The functors live in an inline namespace whose name each instruction-set
// translation unit overrides (LOOM_KERNELS_ISA_NS), so inline functions
// compiled with -mavx512f never replace the portable ones at link time.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

#ifndef LOOM_KERNELS_ISA_NS
#define LOOM_KERNELS_ISA_NS generic
#endif

namespace loom::kernels {
inline namespace LOOM_KERNELS_ISA_NS {

// Storage types for the 16-bit floats: raw bits, arithmetic happens in fp32.
struct Half {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};

LOOM_HOST_DEVICE inline uint32_t floatToBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
LOOM_HOST_DEVICE inline float bitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// fp16 -> fp32 is exact (every fp16 value is an fp32 value).
LOOM_HOST_DEVICE inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) {  // inf, or NaN: quiet it, keep the payload
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return bitsToFloat(sign | 0x7F800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return bitsToFloat(sign | floatToBits(magnitude));
  }
  return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// fp32 -> fp16, round to nearest even; overflow gives inf, tiny values give
// subnormals or zero.
LOOM_HOST_DEVICE inline uint16_t floatToHalf(float f) {
  const uint32_t u = floatToBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u)  // NaN: top payload bits, quiet bit set
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  if (magnitude >= 0x477FF000u)  // >= 65520 rounds past 65504 (or is inf)
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude >= 0x38800000u) {  // normal fp16 range: rebias, round 13 bits away
    const uint32_t rebiased = magnitude - (112u << 23);
    const uint32_t rounded = (rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13;
    return static_cast<uint16_t>(sign | rounded);
  }
  // Subnormal fp16: value / 2^-24 = significand * 2^(exponent - 126).
  const uint32_t exponent = magnitude >> 23;
  const uint32_t shift = 126u - exponent;  // >= 14 here
  if (exponent == 0 || shift > 24u) return static_cast<uint16_t>(sign);
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const uint32_t quotient = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1u);
  const bool roundUp = remainder > halfway || (remainder == halfway && (quotient & 1u));
  return static_cast<uint16_t>(sign | (quotient + (roundUp ? 1u : 0u)));
}

// bf16 -> fp32 is exact: bf16 is the top half of an fp32.
LOOM_HOST_DEVICE inline float bf16ToFloat(uint16_t b) { return bitsToFloat(static_cast<uint32_t>(b) << 16); }

// fp32 -> bf16, round to nearest even on the bit pattern (the carry walks
// into the exponent, so overflow becomes inf by itself).
// Written as a select rather than a branch so gcc vectorizes it.
LOOM_HOST_DEVICE inline uint16_t floatToBf16(float f) {
  const uint32_t u = floatToBits(f);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quietNan : rounded);
}

// How each storage type enters arithmetic: 16-bit floats widen to fp32.
template <class T>
struct Arith {
  using Compute = T;
  LOOM_HOST_DEVICE static Compute widen(T x) { return x; }
  LOOM_HOST_DEVICE static T narrow(Compute x) { return x; }
};
template <>
struct Arith<Half> {
  using Compute = float;
  LOOM_HOST_DEVICE static float widen(Half x) { return halfToFloat(x.bits); }
  LOOM_HOST_DEVICE static Half narrow(float x) { return Half{floatToHalf(x)}; }
};
template <>
struct Arith<Bfloat16> {
  using Compute = float;
  LOOM_HOST_DEVICE static float widen(Bfloat16 x) { return bf16ToFloat(x.bits); }
  LOOM_HOST_DEVICE static Bfloat16 narrow(float x) { return Bfloat16{floatToBf16(x)}; }
};

// The unsigned type integer arithmetic wraps in; narrow types are promoted to
// `unsigned` first, because uint8 * uint8 would otherwise promote to int.
template <class T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
struct SumOp {
  LOOM_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    else
      return Arith<T>::narrow(Arith<T>::widen(a) + Arith<T>::widen(b));
  }
};

template <class T>
struct ProdOp {
  LOOM_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    else
      return Arith<T>::narrow(Arith<T>::widen(a) * Arith<T>::widen(b));
  }
};

template <class T>
struct MinOp {
  LOOM_HOST_DEVICE T operator()(T a, T b) const {
    const auto x = Arith<T>::widen(a), y = Arith<T>::widen(b);
    if constexpr (std::is_integral_v<T>) return x < y ? x : y;
    else return Arith<T>::narrow((x < y || x != x) ? x : y);
  }
};

template <class T>
struct MaxOp {
  LOOM_HOST_DEVICE T operator()(T a, T b) const {
    const auto x = Arith<T>::widen(a), y = Arith<T>::widen(b);
    if constexpr (std::is_integral_v<T>) return x > y ? x : y;
    else return Arith<T>::narrow((x > y || x != x) ? x : y);
  }
};

// Avg reduces exactly like Sum.
template <class T>
using AvgOp = SumOp<T>;

// The final step of Avg: x / nranks (nranks >= 1). Integers of up to 32 bits
// divide through fp32 (8-bit) or fp64 (32-bit): the quotient's rounding error
// is far smaller than its distance to the next integer, so truncating gives
// exactly C's division, and unlike integer division it vectorizes.
template <class T>
struct DivideBy {
  LOOM_HOST_DEVICE explicit DivideBy(int nranks)
      : asFloat(static_cast<float>(nranks)), asDouble(static_cast<double>(nranks)),
        asInt(nranks) {}

  LOOM_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_integral_v<T> && sizeof(T) <= 2)
      return static_cast<T>(static_cast<int>(static_cast<float>(x) / asFloat));
    else if constexpr (std::is_integral_v<T> && sizeof(T) == 4)
      return static_cast<T>(static_cast<double>(x) / asDouble);
    else if constexpr (std::is_integral_v<T>)
      return static_cast<T>(x / static_cast<T>(asInt));
    else if constexpr (std::is_same_v<T, double>)
      return x / asDouble;
    else
      return Arith<T>::narrow(Arith<T>::widen(x) / asFloat);
  }

  float asFloat;
  double asDouble;
  long long asInt;
};

// The last step of a collective with Avg: sum, round, then divide.
template <class T>
struct SumThenDivide {
  LOOM_HOST_DEVICE explicit SumThenDivide(int nranks) : divide(nranks) {}
  LOOM_HOST_DEVICE T operator()(T a, T b) const { return divide(SumOp<T>{}(a, b)); }
  DivideBy<T> divide;
};

}  // namespace LOOM_KERNELS_ISA_NS
}  // namespace loom::kernels
