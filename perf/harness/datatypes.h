// Element types of the perf tools: names as nccl-tests spells them, sizes,
// and conversions between stored elements and exact numeric values.
//
// The tools only ever store small integers (or, for avg, quotients of small
// integers), so every conversion here is exact except the rounding of avg
// results, which the checker compares with a tolerance of a few ulp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <loom/loom.h>

namespace loom::perf {

// nccl-tests' names: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16.
const char* typeName(loomDataType_t type);
size_t typeSize(loomDataType_t type);
bool isFloatType(loomDataType_t type);
bool isSignedType(loomDataType_t type);
std::optional<loomDataType_t> parseTypeName(std::string_view name);

// nccl-tests' names: sum prod max min avg.
const char* opName(loomRedOp_t op);
std::optional<loomRedOp_t> parseOpName(std::string_view name);

// IEEE binary16 and bfloat16, rounded to nearest-even (NaN stays NaN).
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);
uint16_t floatToBfloat16(float value);
float bfloat16ToFloat(uint16_t bits);

// Reads element `index` of a buffer of `type` as a double (exact for every
// value a perf tool stores).
double loadElement(loomDataType_t type, const void* buffer, size_t index);
// Writes `value` (rounded to the type) to element `index`.
void storeElement(loomDataType_t type, void* buffer, size_t index, double value);

// The distance between adjacent representable values of `type` near
// `magnitude` (for floating types; 1 for integers).
double unitInLastPlace(loomDataType_t type, double magnitude);

// Per-type storage and exact conversions, for loops that must not switch on
// the type per element: visitType(type, [](auto codec) { ... }) calls the
// lambda with the codec of `type`; decltype(codec)::Storage is the element.
template <class S, bool kFloat>
struct Codec {
  using Storage = S;
  static constexpr bool kIsFloat = kFloat;
  static double load(Storage s) { return static_cast<double>(s); }
  static Storage store(double v) { return static_cast<Storage>(v); }
};
struct HalfCodec {
  using Storage = uint16_t;
  static constexpr bool kIsFloat = true;
  static double load(Storage s) { return halfToFloat(s); }
  static Storage store(double v) { return floatToHalf(static_cast<float>(v)); }
};
struct Bfloat16Codec {
  using Storage = uint16_t;
  static constexpr bool kIsFloat = true;
  static double load(Storage s) { return bfloat16ToFloat(s); }
  static Storage store(double v) { return floatToBfloat16(static_cast<float>(v)); }
};

template <class F>
decltype(auto) visitType(loomDataType_t type, F&& f) {
  switch (type) {
    case loomInt8: return f(Codec<int8_t, false>{});
    case loomUint8: return f(Codec<uint8_t, false>{});
    case loomInt32: return f(Codec<int32_t, false>{});
    case loomUint32: return f(Codec<uint32_t, false>{});
    case loomInt64: return f(Codec<int64_t, false>{});
    case loomUint64: return f(Codec<uint64_t, false>{});
    case loomFloat16: return f(HalfCodec{});
    case loomFloat32: return f(Codec<float, true>{});
    case loomFloat64: return f(Codec<double, true>{});
    default: return f(Bfloat16Codec{});  // loomBfloat16; callers validate types first
  }
}

}  // namespace loom::perf
