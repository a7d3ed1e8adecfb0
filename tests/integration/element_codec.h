// How the integration tests write and read one element of each loom data
// type, independently of the library: integer types wrap like unsigned
// arithmetic (C++20 conversions are modular), fp32/fp64 use the compiler's
// conversions, and fp16/bf16 are encoded here bit by bit (round to nearest,
// ties to even) so that a bug in the library's own conversions cannot hide.
//
// Each codec has: Storage (the in-memory element), kFloat, kSigned,
// kMantissaBits (floating types), fromInt(int64) (exact or wrapping),
// fromReal(double) (floating types: correctly rounded), toDouble(Storage).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <loom/loom.h>

namespace loom::integration {

template <class T>
struct IntCodec {
  using Storage = T;
  static constexpr bool kFloat = false;
  static constexpr bool kSigned = std::is_signed_v<T>;
  static constexpr int kMantissaBits = 0;
  static Storage fromInt(int64_t v) { return static_cast<T>(v); }  // modular, as the library wraps
  static Storage fromReal(double v) { return static_cast<T>(static_cast<int64_t>(v)); }
  static double toDouble(Storage s) { return static_cast<double>(s); }
};

template <class T, int MantissaBits>
struct NativeFloatCodec {
  using Storage = T;
  static constexpr bool kFloat = true;
  static constexpr bool kSigned = true;
  static constexpr int kMantissaBits = MantissaBits;
  static Storage fromInt(int64_t v) { return static_cast<T>(v); }  // exact: |v| <= 2^8 in these tests
  static Storage fromReal(double v) { return static_cast<T>(v); }  // round to nearest even
  static double toDouble(Storage s) { return static_cast<double>(s); }
};

// A 16-bit binary float with `MantissaBits` stored fraction bits and
// `ExponentBits` exponent bits: fp16 is <10, 5>, bf16 is <7, 8>.
template <int MantissaBits, int ExponentBits>
struct SmallFloatCodec {
  using Storage = uint16_t;
  static constexpr bool kFloat = true;
  static constexpr bool kSigned = true;
  static constexpr int kMantissaBits = MantissaBits;
  static constexpr int kBias = (1 << (ExponentBits - 1)) - 1;
  static constexpr int kMaxField = (1 << ExponentBits) - 1;

  // Integers in [-1024, 1024] (every input and non-avg result) come from a
  // table: this is the hot path of filling and checking buffers.
  static Storage fromInt(int64_t v) {
    static const std::array<Storage, 2049> table = [] {
      std::array<Storage, 2049> t{};
      for (int i = 0; i <= 2048; ++i) t[i] = fromReal(static_cast<double>(i - 1024));
      return t;
    }();
    return v >= -1024 && v <= 1024 ? table[v + 1024] : fromReal(static_cast<double>(v));
  }

  // Rounds a finite double that lies in the normal range of the format (all
  // the values these tests produce do: 1/8 <= |x| <= 2^8, or 0).
  static Storage fromReal(double x) {
    const Storage sign = std::signbit(x) ? Storage(1u << 15) : Storage(0);
    double a = std::fabs(x);
    if (a == 0) return sign;
    int e2 = 0;
    std::frexp(a, &e2);  // a = f * 2^e2 with f in [0.5, 1)
    int exponent = e2 - 1;  // a = 1.m * 2^exponent
    const double ulp = std::ldexp(1.0, exponent - MantissaBits);
    auto q = static_cast<int64_t>(std::nearbyint(a / ulp));  // in [2^m, 2^(m+1)], ties to even
    if (q == (int64_t{1} << (MantissaBits + 1))) q >>= 1, ++exponent;
    const int field = exponent + kBias;
    // Outside the normal range (never produced by these tests): infinity.
    if (field <= 0 || field >= kMaxField) return Storage(sign | Storage(kMaxField << MantissaBits));
    const auto fraction = static_cast<Storage>(q - (int64_t{1} << MantissaBits));
    return static_cast<Storage>(sign | (field << MantissaBits) | fraction);
  }

  static double toDouble(Storage s) {
    const int field = (s >> MantissaBits) & kMaxField;
    const int fraction = s & ((1 << MantissaBits) - 1);
    const double sign = (s & 0x8000) ? -1.0 : 1.0;
    if (field == kMaxField) return fraction ? std::nan("") : sign * INFINITY;
    if (field == 0) return sign * std::ldexp(fraction, 1 - kBias - MantissaBits);
    return sign * std::ldexp(fraction + (1 << MantissaBits), field - kBias - MantissaBits);
  }
};

using Fp16Codec = SmallFloatCodec<10, 5>;
using Bf16Codec = SmallFloatCodec<7, 8>;

// Calls f.template operator()<Codec>() with the codec of `dtype`; returns
// false (without calling) for a value outside loomDataType_t.
template <class F>
bool withCodec(loomDataType_t dtype, F&& f) {
  switch (dtype) {
    case loomInt8: f.template operator()<IntCodec<int8_t>>(); return true;
    case loomUint8: f.template operator()<IntCodec<uint8_t>>(); return true;
    case loomInt32: f.template operator()<IntCodec<int32_t>>(); return true;
    case loomUint32: f.template operator()<IntCodec<uint32_t>>(); return true;
    case loomInt64: f.template operator()<IntCodec<int64_t>>(); return true;
    case loomUint64: f.template operator()<IntCodec<uint64_t>>(); return true;
    case loomFloat16: f.template operator()<Fp16Codec>(); return true;
    case loomFloat32: f.template operator()<NativeFloatCodec<float, 23>>(); return true;
    case loomFloat64: f.template operator()<NativeFloatCodec<double, 52>>(); return true;
    case loomBfloat16: f.template operator()<Bf16Codec>(); return true;
    default: return false;
  }
}

// One unit in the last place of the format at |x| (x normal or 0).
inline double ulpAt(double x, int mantissaBits) {
  if (x == 0) return 0;
  int e2 = 0;
  std::frexp(std::fabs(x), &e2);
  return std::ldexp(1.0, e2 - 1 - mantissaBits);
}

}  // namespace loom::integration
