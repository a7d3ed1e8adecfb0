#include "perf/harness/test_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "perf/harness/datatypes.h"

namespace loom::perf {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: every input bit affects every output bit
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The largest integer magnitude a sum may reach and stay exact (and in range).
int64_t exactSumLimit(loomDataType_t type) {
  switch (type) {
    case loomInt8: return 127;
    case loomUint8: return 255;
    case loomFloat16: return 2048;
    case loomBfloat16: return 256;
    default: return std::numeric_limits<int32_t>::max();
  }
}

// How many factors of 2 a product may hold and stay exact (and in range).
int maxDoublings(loomDataType_t type) {
  switch (type) {
    case loomInt8: return 6;
    case loomUint8: return 7;
    case loomInt32: return 30;
    case loomUint32: return 31;
    case loomInt64: return 62;
    case loomUint64: return 63;
    case loomFloat16: return 15;
    default: return 100;  // float, double, bfloat16: 2^100 is exact and finite
  }
}

// The value rule of one (type, op, nranks), resolved once per buffer so the
// per-element work is a hash and a modulo.
struct ValueRule {
  enum Kind { kRange, kAverage, kProduct } kind = kRange;
  int64_t low = 0;       // kRange: values are low + h % span
  uint64_t span = 1;
  int64_t noise = 0;     // kAverage: low + hash(index) % span, plus -noise..noise per rank
  int window = 0;        // kProduct: ranks (index + k) % nranks, k < window, draw a factor
  bool isSigned = true;
  int nranks = 1;
  uint64_t seed = 0;

  explicit ValueRule(const DataSpec& spec) : isSigned(isSignedType(spec.type)), nranks(spec.nranks), seed(spec.seed) {
    if (spec.op == loomAvg) {
      // Sum's rule would make averages of many ranks nearly constant (integer
      // avg truncates), so ranks share a per-index base and differ by a little
      // noise: the average follows the base and still spans the range.
      const int64_t m = std::min<int64_t>(exactSumLimit(spec.type) / std::max(spec.nranks, 1), 99);
      kind = kAverage;
      noise = m / 4;
      low = isSigned ? -(m - noise) : noise;
      span = static_cast<uint64_t>(isSigned ? 2 * (m - noise) + 1 : m - 2 * noise + 1);
    } else if (spec.op == loomSum) {
      // |v| <= m with nranks * m within the limit: every partial sum is exact.
      const int64_t m = std::min<int64_t>(exactSumLimit(spec.type) / std::max(spec.nranks, 1), 99);
      low = isSigned ? -m : 0;
      span = static_cast<uint64_t>(isSigned ? 2 * m + 1 : m + 1);
    } else if (spec.op == loomProd) {
      kind = kProduct;
      window = std::min(maxDoublings(spec.type), spec.nranks);
    } else {
      low = isSigned ? -100 : 0;
      span = 201;
    }
  }

  int64_t operator()(int rank, size_t index) const {
    const uint64_t h = mix(seed ^ mix(static_cast<uint64_t>(rank) * 0x100000001b3ull + index));
    if (kind == kRange) return low + static_cast<int64_t>(h % span);
    if (kind == kAverage) {
      const int64_t base = low + static_cast<int64_t>(mix(seed ^ index) % span);
      return base + static_cast<int64_t>(h % static_cast<uint64_t>(2 * noise + 1)) - noise;
    }
    const size_t offset = (static_cast<size_t>(rank) + nranks - index % nranks) % nranks;
    if (static_cast<int>(offset) >= window) return 1;
    static constexpr int64_t kSignedFactors[3] = {-1, 1, 2};
    return isSigned ? kSignedFactors[h % 3] : 1 + static_cast<int64_t>(h % 2);
  }
};

// The exact result of `op` over all ranks at one index (avg: the quotient).
double reducedValue(const ValueRule& rule, const DataSpec& spec, size_t index) {
  int64_t acc = rule(0, index);
  double product = static_cast<double>(acc);  // products are +-2^k, exact in a double
  for (int r = 1; r < spec.nranks; ++r) {
    const int64_t v = rule(r, index);
    switch (spec.op) {
      case loomProd: product *= static_cast<double>(v); break;
      case loomMax: acc = std::max(acc, v); break;
      case loomMin: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  if (spec.op == loomProd) return product;
  if (spec.op == loomAvg) {
    if (isFloatType(spec.type)) return static_cast<double>(acc) / spec.nranks;
    return static_cast<double>(acc / spec.nranks);  // C division truncates toward zero
  }
  return static_cast<double>(acc);
}

template <class C>
bool matches(typename C::Storage got, double expected, bool tolerant, loomDataType_t type) {
  if constexpr (C::kIsFloat) {
    const double value = C::load(got);
    if (value == expected) return true;
    return tolerant && std::fabs(value - expected) <= kAvgUlps * unitInLastPlace(type, std::fabs(expected));
  } else {
    return got == C::store(expected);  // integers compare in their own type, never through rounding
  }
}

template <class ExpectedFn>
int64_t countMismatches(const DataSpec& spec, const void* buffer, size_t count, bool tolerant,
                        ExpectedFn&& expected) {
  return visitType(spec.type, [&](auto codec) {
    using C = decltype(codec);
    const auto* elements = static_cast<const typename C::Storage*>(buffer);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += !matches<C>(elements[i], expected(i), tolerant, spec.type);
    return wrong;
  });
}

}  // namespace

int64_t inputValue(const DataSpec& spec, int rank, size_t index) { return ValueRule(spec)(rank, index); }

void fillInputs(const DataSpec& spec, int rank, size_t firstIndex, void* buffer, size_t count) {
  const ValueRule rule(spec);
  visitType(spec.type, [&](auto codec) {
    using C = decltype(codec);
    auto* elements = static_cast<typename C::Storage*>(buffer);
    for (size_t i = 0; i < count; ++i) elements[i] = C::store(static_cast<double>(rule(rank, firstIndex + i)));
  });
}

void fillPoison(loomDataType_t type, void* buffer, size_t count) {
  visitType(type, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    const S poison = C::kIsFloat ? C::store(std::numeric_limits<double>::quiet_NaN())
                                 : std::numeric_limits<S>::max();
    std::fill_n(static_cast<S*>(buffer), count, poison);
  });
}

int64_t countWrongReduced(const DataSpec& spec, size_t firstIndex, const void* buffer, size_t count) {
  const ValueRule rule(spec);
  const bool tolerant = spec.op == loomAvg && isFloatType(spec.type);
  return countMismatches(spec, buffer, count, tolerant,
                         [&](size_t i) { return reducedValue(rule, spec, firstIndex + i); });
}

int64_t countWrongCopied(const DataSpec& spec, int sourceRank, size_t firstIndex, const void* buffer,
                         size_t count) {
  const ValueRule rule(spec);
  return countMismatches(spec, buffer, count, false,
                         [&](size_t i) { return static_cast<double>(rule(sourceRank, firstIndex + i)); });
}

}  // namespace loom::perf
