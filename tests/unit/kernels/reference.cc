#include "tests/unit/kernels/reference.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace loom::kernels::testref {

double decode16(Format16 f, uint16_t bits) {
  const int bias = (1 << (f.exponentBits - 1)) - 1;
  const int allOnes = (1 << f.exponentBits) - 1;
  const int exponent = (bits >> f.mantissaBits) & allOnes;
  const uint32_t mantissa = bits & ((1u << f.mantissaBits) - 1u);
  double magnitude;
  if (exponent == allOnes)
    magnitude = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - bias - f.mantissaBits);
  else
    magnitude = std::ldexp(static_cast<double>((1u << f.mantissaBits) + mantissa), exponent - bias - f.mantissaBits);
  return (bits & 0x8000u) ? -magnitude : magnitude;
}

bool isNan16(Format16 f, uint16_t bits) {
  const uint32_t allOnes = (1u << f.exponentBits) - 1u;
  return ((bits >> f.mantissaBits) & allOnes) == allOnes && (bits & ((1u << f.mantissaBits) - 1u)) != 0;
}

uint16_t encode16(Format16 f, double x) {
  const int mb = f.mantissaBits;
  const int bias = (1 << (f.exponentBits - 1)) - 1;
  const uint32_t allOnes = (1u << f.exponentBits) - 1u;
  const uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return static_cast<uint16_t>(sign | (allOnes << mb) | (1u << (mb - 1)));
  const double a = std::fabs(x);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | (allOnes << mb));
  if (a == 0) return static_cast<uint16_t>(sign);
  const int emin = 1 - bias;
  int exponent = std::ilogb(a);
  const bool subnormal = exponent < emin;
  if (subnormal) exponent = emin;
  // a in units of the target's spacing at this exponent (power-of-two scaling: exact).
  const double units = std::ldexp(a, mb - exponent);
  double whole = std::floor(units);
  const double fraction = units - whole;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(whole, 2.0) == 1.0)) whole += 1.0;
  uint32_t rounded = static_cast<uint32_t>(whole);
  if (subnormal) return static_cast<uint16_t>(sign | rounded);  // 2^mb encodes the smallest normal
  if (rounded == (2u << mb)) {
    rounded >>= 1;
    exponent += 1;
  }
  if (exponent > bias) return static_cast<uint16_t>(sign | (allOnes << mb));
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent + bias) << mb) | (rounded - (1u << mb)));
}

namespace {

bool isSignedInt(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt32 || t == DataType::kInt64;
}
bool isFloatType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kBfloat16;
}

// Truncates an integer Value to its width and re-extends it.
Value wrap(Value v) {
  if (v.isFloat) return v;
  if (v.bytes < 8) v.u &= (uint64_t{1} << (8 * v.bytes)) - 1u;
  v.i = static_cast<int64_t>(v.u);
  if (v.isSigned && v.bytes < 8 && (v.u >> (8 * v.bytes - 1)) & 1u) v.i -= int64_t{1} << (8 * v.bytes);
  return v;
}

}  // namespace

Value load(DataType type, const void* base, size_t index) {
  Value v;
  v.bytes = static_cast<int>(dataTypeSize(type));
  v.isFloat = isFloatType(type);
  v.isSigned = isSignedInt(type);
  const auto* p = static_cast<const unsigned char*>(base) + index * dataTypeSize(type);
  if (!v.isFloat) {
    std::memcpy(&v.u, p, dataTypeSize(type));  // little-endian: the low bytes
    return wrap(v);
  }
  uint16_t bits16;
  float f;
  switch (type) {
    case DataType::kFloat32: std::memcpy(&f, p, 4); v.d = f; break;
    case DataType::kFloat64: std::memcpy(&v.d, p, 8); break;
    case DataType::kFloat16: std::memcpy(&bits16, p, 2); v.d = decode16(kHalf, bits16); break;
    default: std::memcpy(&bits16, p, 2); v.d = decode16(kBf16, bits16); break;
  }
  return v;
}

void store(DataType type, void* base, size_t index, const Value& v) {
  auto* p = static_cast<unsigned char*>(base) + index * dataTypeSize(type);
  if (!isFloatType(type)) {
    std::memcpy(p, &v.u, dataTypeSize(type));
    return;
  }
  uint16_t bits16;
  float f;
  switch (type) {
    case DataType::kFloat32: f = static_cast<float>(v.d); std::memcpy(p, &f, 4); break;
    case DataType::kFloat64: std::memcpy(p, &v.d, 8); break;
    case DataType::kFloat16: bits16 = encode16(kHalf, v.d); std::memcpy(p, &bits16, 2); break;
    default: bits16 = encode16(kBf16, v.d); std::memcpy(p, &bits16, 2); break;
  }
}

Value combine(RedOp op, const Value& a, const Value& b) {
  Value r = a;
  if (a.isFloat) {
    const bool anyNan = std::isnan(a.d) || std::isnan(b.d);
    switch (op) {
      case RedOp::kSum: case RedOp::kAvg: r.d = a.d + b.d; break;
      case RedOp::kProd: r.d = a.d * b.d; break;
      // Contract: NaN if either is NaN, else the smaller/larger, the second when equal.
      case RedOp::kMin: r.d = anyNan ? std::numeric_limits<double>::quiet_NaN() : (a.d < b.d ? a.d : b.d); break;
      case RedOp::kMax: r.d = anyNan ? std::numeric_limits<double>::quiet_NaN() : (a.d > b.d ? a.d : b.d); break;
      // Bitwise ops are not defined on floats: NaN fails any comparison with it.
      default: r.d = std::numeric_limits<double>::quiet_NaN(); break;
    }
    return r;
  }
  switch (op) {
    case RedOp::kSum: case RedOp::kAvg: r.u = a.u + b.u; break;
    case RedOp::kProd: r.u = a.u * b.u; break;
    case RedOp::kMin: r = a.isSigned ? (a.i < b.i ? a : b) : (a.u < b.u ? a : b); break;
    case RedOp::kMax: r = a.isSigned ? (a.i > b.i ? a : b) : (a.u > b.u ? a : b); break;
    // On the 64-bit two's-complement pattern; wrap() keeps the type's bits.
    case RedOp::kBand: r.u = a.u & b.u; break;
    case RedOp::kBor: r.u = a.u | b.u; break;
    case RedOp::kBxor: r.u = a.u ^ b.u; break;
  }
  return wrap(r);
}

Value divide(const Value& v, int nranks) {
  Value r = v;
  if (v.isFloat) {
    r.d = v.d / nranks;
  } else if (v.isSigned) {
    r.u = static_cast<uint64_t>(v.i / nranks);
  } else {
    r.u = v.u / static_cast<uint64_t>(nranks);
  }
  return wrap(r);
}

Value roundTo(DataType type, const Value& v) {
  unsigned char buf[8];
  store(type, buf, 0, v);
  return load(type, buf, 0);
}

std::vector<unsigned char> referenceReduce(DataType type, RedOp op, const void* a, const void* b, size_t count) {
  std::vector<unsigned char> out(count * dataTypeSize(type));
  for (size_t i = 0; i < count; ++i) store(type, out.data(), i, combine(op, load(type, a, i), load(type, b, i)));
  return out;
}

std::vector<unsigned char> referenceDivide(DataType type, int nranks, const void* src, size_t count) {
  std::vector<unsigned char> out(count * dataTypeSize(type));
  for (size_t i = 0; i < count; ++i) store(type, out.data(), i, divide(load(type, src, i), nranks));
  return out;
}

std::vector<unsigned char> referenceSumDivide(DataType type, int nranks, const void* a, const void* b,
                                              size_t count) {
  std::vector<unsigned char> out(count * dataTypeSize(type));
  for (size_t i = 0; i < count; ++i) {
    const Value sum = roundTo(type, combine(RedOp::kSum, load(type, a, i), load(type, b, i)));
    store(type, out.data(), i, divide(sum, nranks));
  }
  return out;
}

size_t firstMismatch(DataType type, const void* expected, const void* actual, size_t count) {
  const size_t size = dataTypeSize(type);
  const auto* e = static_cast<const unsigned char*>(expected);
  const auto* a = static_cast<const unsigned char*>(actual);
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(e + i * size, a + i * size, size) == 0) continue;
    const bool bothNan = isFloatType(type) && std::isnan(load(type, e, i).d) && std::isnan(load(type, a, i).d);
    if (!bothNan) return i;
  }
  return count;
}

}  // namespace loom::kernels::testref
