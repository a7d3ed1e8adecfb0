#include "perf/harness/datatypes.h"

#include <bit>
#include <cmath>
#include <iterator>

namespace loom::perf {
namespace {

struct TypeInfo {
  loomDataType_t type;
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
};

constexpr TypeInfo kTypes[] = {
    {loomInt8, "int8", 1, false, true},        {loomUint8, "uint8", 1, false, false},
    {loomInt32, "int32", 4, false, true},      {loomUint32, "uint32", 4, false, false},
    {loomInt64, "int64", 8, false, true},      {loomUint64, "uint64", 8, false, false},
    {loomFloat16, "half", 2, true, true},      {loomFloat32, "float", 4, true, true},
    {loomFloat64, "double", 8, true, true},    {loomBfloat16, "bfloat16", 2, true, true},
};

constexpr const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
static_assert(std::size(kOpNames) == loomNumOps, "a name for every loomRedOp_t");
// The perf tools check results through doubles (test_data.cc), which fits the
// arithmetic ops only: the bitwise ones are not offered.
constexpr int kMeasurableOps = loomBand;

const TypeInfo& info(loomDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return t;
  return kTypes[7];  // unreachable for validated types; float is the harmless default
}

}  // namespace

const char* typeName(loomDataType_t type) { return info(type).name; }
size_t typeSize(loomDataType_t type) { return info(type).size; }
bool isFloatType(loomDataType_t type) { return info(type).isFloat; }
bool isSignedType(loomDataType_t type) { return info(type).isSigned; }

std::optional<loomDataType_t> parseTypeName(std::string_view name) {
  for (const TypeInfo& t : kTypes)
    if (name == t.name) return t.type;
  // nccl-tests also accepts these aliases.
  if (name == "int" ) return loomInt32;
  if (name == "char") return loomInt8;
  if (name == "fp16" || name == "float16") return loomFloat16;
  if (name == "fp32" || name == "float32") return loomFloat32;
  if (name == "fp64" || name == "float64") return loomFloat64;
  if (name == "bf16") return loomBfloat16;
  return std::nullopt;
}

const char* opName(loomRedOp_t op) {
  return op >= 0 && op < loomNumOps ? kOpNames[op] : "none";
}

std::optional<loomRedOp_t> parseOpName(std::string_view name) {
  for (int op = 0; op < kMeasurableOps; ++op)
    if (name == kOpNames[op]) return static_cast<loomRedOp_t>(op);
  return std::nullopt;
}

uint16_t floatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to infinity (>= 65520)
  if (magnitude < 0x38800000u) {                        // below 2^-14: subnormal half
    // Scaling by 2^24 is exact; the rounding mode (nearest-even) does the rest.
    // A result of 0x400 is the smallest normal, which is also its encoding.
    const float scaled = std::bit_cast<float>(magnitude) * 0x1p24f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  const uint32_t exponent = (magnitude >> 23) - 127 + 15;
  const uint32_t mantissa = magnitude & 0x7fffffu;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // a carry moves into the exponent
  return sign | static_cast<uint16_t>(half);
}

float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float value = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -value : value;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t floatToBfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bfloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

double loadElement(loomDataType_t type, const void* buffer, size_t index) {
  return visitType(type, [&](auto codec) {
    using C = decltype(codec);
    return C::load(static_cast<const typename C::Storage*>(buffer)[index]);
  });
}

void storeElement(loomDataType_t type, void* buffer, size_t index, double value) {
  visitType(type, [&](auto codec) {
    using C = decltype(codec);
    static_cast<typename C::Storage*>(buffer)[index] = C::store(value);
  });
}

double unitInLastPlace(loomDataType_t type, double magnitude) {
  int mantissaBits = 0, minExponent = 0;
  switch (type) {
    case loomFloat16: mantissaBits = 10; minExponent = -14; break;
    case loomBfloat16: mantissaBits = 7; minExponent = -126; break;
    case loomFloat32: mantissaBits = 23; minExponent = -126; break;
    case loomFloat64: mantissaBits = 52; minExponent = -1022; break;
    default: return 1.0;
  }
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : minExponent;
  if (exponent < minExponent) exponent = minExponent;
  return std::ldexp(1.0, exponent - mantissaBits);
}

}  // namespace loom::perf
