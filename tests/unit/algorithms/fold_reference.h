// Test-side references for the reduction algorithms: element types (with
// fp16/bf16 encoded here, sharing no code with kernels/), the op semantics
// the kernels promise, and the rank-order left fold
//   acc = x_0; acc = acc (op) x_1; ...; acc = acc (op) x_{n-1}; finalize(acc)
// computed one element at a time. Plus a runner that drives every rank of a
// LoopbackFabric on its own thread.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "algorithms/algorithm.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo::testref {

// The 16-bit floats, as raw bits.
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

struct Format16 {
  int mantissaBits, exponentBits;
};
inline constexpr Format16 kF16{10, 5}, kBF16{7, 8};

// Finite values only (the tests use no inf or NaN).
inline double decode16(Format16 f, uint16_t bits) {
  const int bias = (1 << (f.exponentBits - 1)) - 1;
  const int e = (bits >> f.mantissaBits) & ((1 << f.exponentBits) - 1);
  const double m = bits & ((1u << f.mantissaBits) - 1u);
  const double mag = e == 0 ? std::ldexp(m, 1 - bias - f.mantissaBits)
                            : std::ldexp(m + std::ldexp(1.0, f.mantissaBits), e - bias - f.mantissaBits);
  return (bits & 0x8000u) ? -mag : mag;
}

// Round to nearest, ties to even (std::nearbyint in the default rounding mode).
inline uint16_t encode16(Format16 f, double x) {
  const int bias = (1 << (f.exponentBits - 1)) - 1;
  const uint32_t sign = std::signbit(x) ? 0x8000u : 0u;
  const double a = std::fabs(x);
  if (a == 0) return static_cast<uint16_t>(sign);
  int e = std::max(std::ilogb(a), 1 - bias);
  double q = std::nearbyint(std::ldexp(a, f.mantissaBits - e));
  if (q == std::ldexp(1.0, f.mantissaBits + 1)) q /= 2, ++e;
  const uint32_t infinity = ((1u << f.exponentBits) - 1u) << f.mantissaBits;
  if (e > bias) return static_cast<uint16_t>(sign | infinity);
  const auto units = static_cast<uint32_t>(q);
  if (units < (1u << f.mantissaBits)) return static_cast<uint16_t>(sign | units);  // subnormal
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e + bias) << f.mantissaBits) |
                               (units - (1u << f.mantissaBits)));
}

template <class T> struct Elem;
template <> struct Elem<float> { static constexpr DataType kType = DataType::kFloat32; };
template <> struct Elem<double> { static constexpr DataType kType = DataType::kFloat64; };
template <> struct Elem<F16> { static constexpr DataType kType = DataType::kFloat16; static constexpr Format16 kFormat = kF16; };
template <> struct Elem<BF16> { static constexpr DataType kType = DataType::kBfloat16; static constexpr Format16 kFormat = kBF16; };
template <> struct Elem<int64_t> { static constexpr DataType kType = DataType::kInt64; };
template <> struct Elem<int32_t> { static constexpr DataType kType = DataType::kInt32; };
template <> struct Elem<uint8_t> { static constexpr DataType kType = DataType::kUint8; };

template <class T>
constexpr bool kIs16 = std::is_same_v<T, F16> || std::is_same_v<T, BF16>;

template <class T>
T fromDouble(double v) {
  if constexpr (kIs16<T>) return T{encode16(Elem<T>::kFormat, v)};
  else return static_cast<T>(v);
}

template <class T>
double toDouble(T v) {
  if constexpr (kIs16<T>) return decode16(Elem<T>::kFormat, v.bits);
  else return static_cast<double>(v);
}

// a (op) b as the kernels define it: integers wrap, 16-bit floats compute in
// fp32 and round back, min/max return the second operand on ties.
template <class T>
T combine(RedOp op, T a, T b) {
  if constexpr (kIs16<T>) {
    const float x = static_cast<float>(toDouble(a)), y = static_cast<float>(toDouble(b));
    return fromDouble<T>(combine<float>(op, x, y));
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RedOp::kSum: case RedOp::kAvg: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case RedOp::kProd: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case RedOp::kMin: return a < b ? a : b;
      case RedOp::kMax: return a > b ? a : b;
    }
    return a;
  } else {
    switch (op) {
      case RedOp::kSum: case RedOp::kAvg: return a + b;
      case RedOp::kProd: return a * b;
      case RedOp::kMin: return a < b ? a : b;
      case RedOp::kMax: return a > b ? a : b;
    }
    return a;
  }
}

// Avg's division by the rank count; every other op leaves the value alone.
template <class T>
T finalizeValue(RedOp op, T v, int n) {
  if (op != RedOp::kAvg) return v;
  if constexpr (kIs16<T>) return fromDouble<T>(static_cast<float>(toDouble(v)) / static_cast<float>(n));
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return static_cast<T>(static_cast<int64_t>(v) / n);
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(v) / static_cast<uint64_t>(n));
  else return v / static_cast<T>(n);
}

// finalize(((x_0 op x_1) op x_2) ... op x_{n-1}) for element i of in[rank].
template <class T>
T leftFold(RedOp op, const std::vector<std::vector<T>>& in, size_t i) {
  T acc = in[0][i];
  for (size_t r = 1; r < in.size(); ++r) acc = combine(op, acc, in[r][i]);
  return finalizeValue(op, acc, static_cast<int>(in.size()));
}

// The same ranks folded from the other end, to show the data is order-sensitive.
template <class T>
T rightFold(RedOp op, const std::vector<std::vector<T>>& in, size_t i) {
  T acc = in.back()[i];
  for (size_t r = in.size() - 1; r-- > 0;) acc = combine(op, acc, in[r][i]);
  return finalizeValue(op, acc, static_cast<int>(in.size()));
}

template <class T>
bool sameBits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Inputs whose sums depend on association: huge values of both signs mixed
// with small ones (for the format's precision), or, for products, factors
// near one so n of them neither overflow nor underflow.
template <class T>
double mixedValue(RedOp op, int rank, size_t i) {
  const uint64_t h = (static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull);
  const int pick = static_cast<int>((h >> 29) % 7);
  if (op == RedOp::kProd) {
    static const double factors[7] = {1.5, 0.75, 1.25, -1.125, 0.875, 1.0625, -0.5};
    return factors[pick];
  }
  double big = 1e8;  // fp32: spacing 8 near 1e8, so + 1 or + 3 is lost or rounded
  if constexpr (std::is_same_v<T, double>) big = 1e17;  // spacing 16
  if constexpr (std::is_same_v<T, F16>) big = 2048;     // spacing 2
  if constexpr (std::is_same_v<T, BF16>) big = 256;     // spacing 2
  const double values[7] = {big, 1, -big, 3, 0.5, -big / 2, 0.25};
  return values[pick];
}

// Small exact integers (products wrap, as the kernels define).
template <class T>
T integerValue(int rank, size_t i) {
  return static_cast<T>((rank * 37 + static_cast<int64_t>(i) * 11) % 101 - (std::is_signed_v<T> ? 50 : 0));
}

// Runs fn on every rank of a fresh fabric with `slots` slots per link and
// returns whether every rank succeeded (failures are reported).
// Rank `rank`'s context on `fabric`: its links, the fabric's chunk, 30 s to wait.
inline AlgoContext contextOn(testing::LoopbackFabric& fabric, int rank, int n) {
  AlgoContext ctx;
  ctx.rank = rank;
  ctx.nranks = n;
  ctx.links = &fabric.linksOf(rank);
  ctx.wait.deadline = Deadline::after(30);
  ctx.chunkBytes = fabric.chunkBytes();
  return ctx;
}

inline bool runRanks(int n, size_t chunkBytes, int slots, const std::function<Status(const AlgoContext&)>& fn,
                     bool singleHost = true) {
  testing::LoopbackFabric fabric(n, chunkBytes, slots);
  std::vector<Status> results(static_cast<size_t>(n));
  testing::runRankThreads(n, [&](int rank) {
    AlgoContext ctx = contextOn(fabric, rank, n);
    ctx.singleHost = singleHost;
    results[static_cast<size_t>(rank)] = fn(ctx);
  });
  bool ok = true;
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(results[static_cast<size_t>(r)].isOk()) << "rank " << r << ": " << results[static_cast<size_t>(r)].message();
    ok = ok && results[static_cast<size_t>(r)].isOk();
  }
  return ok;
}

// Counts that matter for a chunked algorithm: empty, one element, fewer than
// one chunk, and many chunks -1, +0, +1.
inline std::vector<size_t> interestingCounts(size_t many) { return {0, 1, 7, many - 1, many, many + 1}; }

// Runs an all-reduce `fn` over n ranks and returns every rank's recvbuf
// (empty if a rank failed). Out-of-place outputs start as 0xEE garbage.
template <class T>
std::vector<std::vector<T>> runAllReduce(CollFn fn, int n, size_t chunkBytes, const std::vector<std::vector<T>>& in,
                                         RedOp op, bool inPlace, int slots = 2) {
  const size_t count = in[0].size();
  std::vector<std::vector<T>> send = in, out(static_cast<size_t>(n), std::vector<T>(count));
  for (auto& v : out)
    if (count) std::memset(static_cast<void*>(v.data()), 0xEE, count * sizeof(T));
  const bool ok = runRanks(n, chunkBytes, slots, [&](const AlgoContext& ctx) {
    T* recv = inPlace ? send[ctx.rank].data() : out[ctx.rank].data();
    CollArgs a{CollType::kAllReduce, send[ctx.rank].data(), recv, count, Elem<T>::kType, op, 0};
    return fn(a, ctx);
  });
  if (!ok) return {};
  return inPlace ? send : out;
}

// in[rank][i] for `count` elements from value(rank, i).
template <class T>
std::vector<std::vector<T>> makeInputs(int n, size_t count, const std::function<T(int, size_t)>& value) {
  std::vector<std::vector<T>> in(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) in[static_cast<size_t>(r)].push_back(value(r, i));
  return in;
}

// Every element of every rank's result must be exactly the left fold.
template <class T>
void expectLeftFold(const std::vector<std::vector<T>>& in, const std::vector<std::vector<T>>& out, RedOp op,
                    const std::string& what) {
  ASSERT_EQ(out.size(), in.size()) << what << ": the run failed";
  for (size_t i = 0; i < in[0].size(); ++i) {
    const T want = leftFold(op, in, i);
    for (size_t r = 0; r < out.size(); ++r)
      ASSERT_TRUE(sameBits(out[r][i], want)) << what << ": rank " << r << " element " << i << " is "
                                             << toDouble(out[r][i]) << ", want " << toDouble(want);
  }
}

// Every op in `ops` on n ranks' all-reduce by `fn`, out of place and in
// place, at interestingCounts(manyBytes / sizeof(T)): each result must equal
// the left fold bit for bit. Inputs are integerValue's, or mixedValue's with
// `mixedFloats`.
template <class T>
void expectAllReduceIsLeftFold(CollFn fn, int n, size_t manyBytes, std::initializer_list<RedOp> ops,
                               bool mixedFloats) {
  for (size_t count : interestingCounts(manyBytes / sizeof(T))) {
    for (RedOp op : ops) {
      auto in = makeInputs<T>(n, count, [&](int r, size_t i) {
        return mixedFloats ? fromDouble<T>(mixedValue<T>(op, r, i)) : integerValue<T>(r, i);
      });
      for (bool inPlace : {false, true}) {
        auto out = runAllReduce<T>(fn, n, 4096, in, op, inPlace);
        expectLeftFold(in, out, op,
                       std::string(dataTypeName(Elem<T>::kType)) + " " + redOpName(op) + " count " +
                           std::to_string(count) + (inPlace ? " in place" : " out of place"));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// The type and op matrix of a rank-order algorithm's fold tests.
inline void expectIntegersAreLeftFold(CollFn fn, int n, size_t manyBytes) {
  expectAllReduceIsLeftFold<int64_t>(fn, n, manyBytes, {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg},
                                     false);
  if (::testing::Test::HasFatalFailure()) return;
  expectAllReduceIsLeftFold<uint8_t>(fn, n, manyBytes, {RedOp::kSum, RedOp::kProd, RedOp::kAvg}, false);
}
inline void expectFloatsAreLeftFold(CollFn fn, int n, size_t manyBytes) {
  expectAllReduceIsLeftFold<float>(fn, n, manyBytes, {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg},
                                   true);
  if (::testing::Test::HasFatalFailure()) return;
  expectAllReduceIsLeftFold<double>(fn, n, manyBytes, {RedOp::kSum, RedOp::kAvg}, true);
  if (::testing::Test::HasFatalFailure()) return;
  expectAllReduceIsLeftFold<F16>(fn, n, manyBytes, {RedOp::kSum, RedOp::kProd, RedOp::kAvg}, true);
  if (::testing::Test::HasFatalFailure()) return;
  expectAllReduceIsLeftFold<BF16>(fn, n, manyBytes, {RedOp::kSum, RedOp::kMax, RedOp::kAvg}, true);
}

}  // namespace loom::algo::testref
