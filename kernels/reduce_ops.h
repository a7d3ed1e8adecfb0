// Element-wise reduction functors over the fp16/bf16 <-> fp32 conversions of
// kernels/float16.h.
// Header-only and free of host-only calls, so CUDA kernels can
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
//   - Band, Bor, Bxor are C's &, |, ^ on integer types (order-independent).
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

#include "kernels/float16.h"

namespace loom::kernels {
inline namespace LOOM_KERNELS_ISA_NS {

// Storage types for the 16-bit floats: raw bits, arithmetic happens in fp32.
struct Half {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};

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

// Bitwise and, or, xor: integer types only (the kernel table has no entry
// for the floating-point types, and the callers reject them).
template <class T>
struct BandOp {
  static_assert(std::is_integral_v<T>, "bitwise reductions take integer types");
  LOOM_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
template <class T>
struct BorOp {
  static_assert(std::is_integral_v<T>, "bitwise reductions take integer types");
  LOOM_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
template <class T>
struct BxorOp {
  static_assert(std::is_integral_v<T>, "bitwise reductions take integer types");
  LOOM_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
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
