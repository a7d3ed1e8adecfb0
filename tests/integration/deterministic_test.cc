// LOOM_DETERMINISTIC=1: floating-point all-reduce, reduce and reduce-scatter
// return the same bits whatever LOOM_ALGO, LOOM_PROTO and LOOM_CHUNK_SIZE
// say, and those bits are the left fold over ranks
//   acc = x_0; acc = acc (op) x_1; ...; acc = acc (op) x_{n-1}; avg: acc / n
// computed here with the library's documented arithmetic (kernels/reduce.h):
// fp32 and fp64 natively; fp16 and bf16 widened to fp32, combined, and
// rounded back to nearest-even after every operation; avg divides the
// rounded sum in the type's own precision (fp16/bf16 in fp32, rounded back).
//
// The inputs make the association visible: sums mix magnitudes 2^-q..2^m of
// the type (an early large partial sum swallows later small terms), and
// products multiply full-mantissa factors in [0.5, 2) (every product is
// rounded). They are multiples of 2^-q, so sums never fall below 2^-q (no
// subnormals, whose handling is not what this test is about), and every
// product stays within [2^-7, 2^7].
//
// Threads mode: one clique per (world size, configuration), the knobs set
// in the environment before the clique is created (the library reads them
// then) and restored after.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tests/integration/collective_case.h"
#include "tests/integration/element_codec.h"
#include "tests/integration/scoped_env.h"
#include "tests/integration/test_world.h"

namespace loom::integration {
namespace {

inline uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The library's arithmetic for one floating type, on the test's own codecs.
// Compute is the type arithmetic happens in; round() brings a Compute value
// back to storage (fp16/bf16: round to nearest even, here in element_codec.h).
struct Fp32Math {
  using S = float;
  static constexpr loomDataType_t kType = loomFloat32;
  static constexpr int kMantissa = 24, kQuantumExp = -30, kMaxExp = 20;
  static float widen(S s) { return s; }
  static S round(float v) { return v; }
  static S fromDouble(double v) { return static_cast<float>(v); }  // exact for generated inputs
  static float divide(float v, int n) { return v / static_cast<float>(n); }
  static double toDouble(S s) { return s; }
};
struct Fp64Math {
  using S = double;
  static constexpr loomDataType_t kType = loomFloat64;
  static constexpr int kMantissa = 53, kQuantumExp = -60, kMaxExp = 40;
  static double widen(S s) { return s; }
  static S round(double v) { return v; }
  static S fromDouble(double v) { return v; }
  static double divide(double v, int n) { return v / static_cast<double>(n); }
  static double toDouble(S s) { return s; }
};
template <class Codec, loomDataType_t Type, int Mantissa, int QuantumExp, int MaxExp>
struct SmallFloatMath {
  using S = uint16_t;
  static constexpr loomDataType_t kType = Type;
  static constexpr int kMantissa = Mantissa, kQuantumExp = QuantumExp, kMaxExp = MaxExp;
  static float widen(S s) { return static_cast<float>(Codec::toDouble(s)); }  // exact
  static S round(float v) { return Codec::fromReal(static_cast<double>(v)); }  // v is exact in double
  static S fromDouble(double v) { return Codec::fromReal(v); }
  static float divide(float v, int n) { return v / static_cast<float>(n); }
  static double toDouble(S s) { return Codec::toDouble(s); }
};
// fp16: quantum 2^-10 (above its smallest normal, 2^-14), values below 2^12
// (7 of them sum below its largest, 65504).
using Fp16Math = SmallFloatMath<Fp16Codec, loomFloat16, 11, -10, 11>;
using Bf16Math = SmallFloatMath<Bf16Codec, loomBfloat16, 8, -20, 20>;

template <class M>
using Storage = typename M::S;

// Input element `index` of `rank` (one vector per (seed, rank)).
template <class M>
Storage<M> inputValue(loomRedOp_t op, uint64_t seed, int rank, size_t index) {
  const uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + (static_cast<uint64_t>(rank) << 40) + index);
  const double sign = (h & 1) ? -1.0 : 1.0;
  const uint64_t mantissa = (h >> 1) & ((uint64_t{1} << (M::kMantissa - 1)) - 1);
  if (op == loomProd) {
    // A full mantissa in [1, 2), halved for a quarter of the elements.
    const double m = 1.0 + std::ldexp(static_cast<double>(mantissa), 1 - M::kMantissa);
    return M::fromDouble(sign * (((h >> 60) & 3) == 0 ? m / 2 : m));
  }
  // An integer of up to kMantissa bits times 2^e, e chosen so the value is a
  // multiple of 2^kQuantumExp and below 2^(kMaxExp + 1).
  const int span = M::kMaxExp - M::kQuantumExp - M::kMantissa + 2;  // choices of e
  const int e = M::kQuantumExp + static_cast<int>((h >> 56) % static_cast<uint64_t>(span));
  const double m = static_cast<double>(mantissa | (uint64_t{1} << (M::kMantissa - 1)));
  return M::fromDouble(sign * std::ldexp(m, e));
}

// The left fold over ranks of element `index`, then avg's division.
template <class M>
Storage<M> foldReference(loomRedOp_t op, uint64_t seed, int nranks, size_t index) {
  auto acc = M::widen(inputValue<M>(op, seed, 0, index));
  for (int r = 1; r < nranks; ++r) {
    const auto x = M::widen(inputValue<M>(op, seed, r, index));
    acc = M::widen(M::round(op == loomProd ? acc * x : acc + x));  // round after every operation
  }
  if (op == loomAvg) acc = M::widen(M::round(M::divide(acc, nranks)));
  return M::round(acc);
}

constexpr Coll kColls[] = {Coll::kAllReduce, Coll::kReduce, Coll::kReduceScatter};
constexpr loomRedOp_t kOps[] = {loomSum, loomProd, loomAvg};
// 1031 and 12007: several 4 KiB chunks per slice at every world size (for
// 12007 also in 2-byte types); at 256 KiB one piece per slice.
constexpr size_t kCounts[] = {1, 7, 1031, 12007};

struct Configuration {
  std::string algo, proto, chunk;
  std::string name() const { return "LOOM_ALGO=" + algo + " LOOM_PROTO=" + proto + " LOOM_CHUNK_SIZE=" + chunk; }
};

constexpr const char* kAlgos[] = {"ring", "rd", "tree", "hd", "oneshot", "deterministic"};
constexpr const char* kProtos[] = {"simple", "ll"};
constexpr const char* kChunks[] = {"4K", "256K"};

// Every forced all-reduce algorithm under both protocols at every world
// size; the chunk size alternates with (algorithm, protocol, size), so that
// over two world sizes each (algorithm, protocol) runs with both chunks.
std::vector<Configuration> configurations(int nranks) {
  std::vector<Configuration> out;
  for (size_t a = 0; a < std::size(kAlgos); ++a)
    for (size_t p = 0; p < std::size(kProtos); ++p)
      out.push_back({kAlgos[a], kProtos[p], kChunks[(a + p + static_cast<size_t>(nranks)) % 2]});
  return out;
}

// What loomCommGetLastAlgorithm must report under `c`.
std::string expectedReport(const Configuration& c) {
  return std::string("deterministic/") + (c.proto == "ll" ? "LL" : "Simple");
}

// One call of one rank: element type M, collective, op, count, placement.
struct Call {
  Coll coll;
  loomRedOp_t op;
  size_t count;
  bool inPlace;
  int root;
  uint64_t seed;
};

// FNV-1a over the output bytes, as text: equal outputs give equal digests.
std::string digestOf(const void* data, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return std::to_string(h) + ":" + std::to_string(bytes);
}

// Runs `call` on `rank` and checks its output against the fold bit for bit.
// Returns a digest of the output (empty for a non-root Reduce) for the
// comparison across configurations.
template <class M>
std::string runAndCheck(const Call& call, loomComm_t comm, int rank, int nranks, const std::string& expectedAlgo) {
  using S = Storage<M>;
  const size_t total = call.coll == Coll::kReduceScatter ? call.count * nranks : call.count;
  std::vector<S> send(total), recv(call.count);
  for (size_t i = 0; i < total; ++i) send[i] = inputValue<M>(call.op, call.seed, rank, i);
  const void* sendbuf = send.data();
  void* recvbuf = recv.data();
  if (call.inPlace) recvbuf = call.coll == Coll::kReduceScatter ? send.data() + rank * call.count : send.data();
  loomResult_t rc = loomInternalError;
  switch (call.coll) {
    case Coll::kAllReduce: rc = loomAllReduce(sendbuf, recvbuf, call.count, M::kType, call.op, comm, nullptr); break;
    case Coll::kReduce:
      rc = loomReduce(sendbuf, recvbuf, call.count, M::kType, call.op, call.root, comm, nullptr);
      break;
    case Coll::kReduceScatter:
      rc = loomReduceScatter(sendbuf, recvbuf, call.count, M::kType, call.op, comm, nullptr);
      break;
    default: break;
  }
  if (rc != loomSuccess) {
    ADD_FAILURE() << "returned " << loomGetErrorString(rc) << ": " << loomGetLastError(comm);
    return "failed";
  }
  char name[64] = {};
  EXPECT_EQ(loomCommGetLastAlgorithm(comm, name, sizeof name), loomSuccess) << loomGetLastError(comm);
  EXPECT_EQ(std::string(name), expectedAlgo) << "LOOM_DETERMINISTIC=1 must run the deterministic algorithm";
  if (call.coll == Coll::kReduce && rank != call.root) return "";

  const S* out = static_cast<const S*>(recvbuf);
  const size_t first = call.coll == Coll::kReduceScatter ? rank * call.count : 0;
  size_t bad = 0;
  for (size_t i = 0; i < call.count; ++i) {
    const S want = foldReference<M>(call.op, call.seed, nranks, first + i);
    if (std::memcmp(&out[i], &want, sizeof(S)) == 0) continue;
    if (++bad <= 3)
      ADD_FAILURE() << "element " << i << ": got " << M::toDouble(out[i]) << " expected " << M::toDouble(want)
                    << " (the left fold over ranks; bits differ)";
  }
  if (bad > 3) ADD_FAILURE() << bad << " of " << call.count << " elements differ from the left fold";
  return digestOf(out, call.count * sizeof(S));
}

template <class F>
void withMath(loomDataType_t t, F&& f) {
  switch (t) {
    case loomFloat16: f.template operator()<Fp16Math>(); break;
    case loomBfloat16: f.template operator()<Bf16Math>(); break;
    case loomFloat32: f.template operator()<Fp32Math>(); break;
    case loomFloat64: f.template operator()<Fp64Math>(); break;
    default: break;
  }
}

// The reference itself: the fold differs from other association orders on
// these inputs (else the test could not tell orders apart), and a hand-worked
// fp16 fold.
TEST(DeterministicReference, InputsMakeTheOrderVisible) {
  // fp16 has an ulp of 1 at 1024: (1024 + 0.5) + 0.25 rounds 1024.5 to the
  // even 1024, then 1024.25 to 1024; 1024 + (0.5 + 0.25) rounds 1024.75 to 1025.
  auto add = [](uint16_t x, uint16_t y) { return Fp16Math::round(Fp16Math::widen(x) + Fp16Math::widen(y)); };
  const uint16_t a = Fp16Codec::fromReal(1024), b = Fp16Codec::fromReal(0.5), c = Fp16Codec::fromReal(0.25);
  EXPECT_EQ(add(add(a, b), c), Fp16Codec::fromReal(1024));
  EXPECT_EQ(add(a, add(b, c)), Fp16Codec::fromReal(1025));

  // Over the test's own inputs, the rank-order fold and the reverse fold
  // disagree on a good share of elements for every type and op.
  for (loomDataType_t t : {loomFloat16, loomBfloat16, loomFloat32, loomFloat64}) {
    withMath(t, [&]<class M>() {
      for (loomRedOp_t op : kOps) {
        size_t differ = 0;
        constexpr size_t kN = 1000;
        for (size_t i = 0; i < kN; ++i) {
          const auto forward = foldReference<M>(op, 77, 5, i);
          auto acc = M::widen(inputValue<M>(op, 77, 4, i));
          for (int r = 3; r >= 0; --r) {
            const auto x = M::widen(inputValue<M>(op, 77, r, i));
            acc = M::widen(M::round(op == loomProd ? acc * x : acc + x));
          }
          if (op == loomAvg) acc = M::widen(M::round(M::divide(acc, 5)));
          const auto reverse = M::round(acc);
          differ += std::memcmp(&forward, &reverse, sizeof forward) != 0 ? 1 : 0;
          // Every result is normal (or zero): no subnormals, no overflow.
          const double v = std::fabs(M::toDouble(forward));
          EXPECT_TRUE(v == 0 || (std::isfinite(v) && v >= std::ldexp(1.0, M::kQuantumExp - 3)))
              << dtypeName(t) << " " << opName(op) << " element " << i << " = " << v;
        }
        EXPECT_GT(differ, kN / 20) << dtypeName(t) << " " << opName(op)
                                   << ": the inputs hardly depend on the reduction order";
      }
    });
  }
}

TEST(Deterministic, SameBitsForEveryAlgorithmProtocolAndChunkSize) {
  for (int nranks : {3, 4, 5, 7}) {
    const auto configs = configurations(nranks);
    // Output digests by (collective, dtype, op, count, rank), from the first configuration.
    std::map<std::tuple<int, int, int, size_t, int>, std::string> firstOutput;
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const Configuration& config = configs[ci];
      SCOPED_TRACE(config.name() + " LOOM_DETERMINISTIC=1 nranks=" + std::to_string(nranks));
      ScopedEnv env({{"LOOM_DETERMINISTIC", "1"},
                     {"LOOM_ALGO", config.algo},
                     {"LOOM_PROTO", config.proto},
                     {"LOOM_CHUNK_SIZE", config.chunk}});
      const auto started = std::chrono::steady_clock::now();
      Clique clique(nranks);
      ASSERT_EQ(clique.initResult(), loomSuccess) << clique.initError();
      // Each rank's outputs, in call order, then compared on this thread.
      std::vector<std::vector<std::tuple<std::tuple<int, int, int, size_t, int>, std::string>>> outputs(nranks);
      runOnRankThreads(nranks, [&](int rank) {
        int callIndex = 0;
        for (Coll coll : kColls) {
          for (loomDataType_t t : {loomFloat16, loomBfloat16, loomFloat32, loomFloat64}) {
            for (loomRedOp_t op : kOps) {
              for (size_t count : kCounts) {
                const Call call{coll, op, count, callIndex % 2 == 1, callIndex % nranks,
                                static_cast<uint64_t>(callIndex) + 1};
                ++callIndex;
                SCOPED_TRACE(std::string(collName(coll)) + " " + dtypeName(t) + " " + opName(op) +
                             " count=" + std::to_string(count) + (call.inPlace ? " in-place" : "") +
                             " root=" + std::to_string(call.root) + " rank=" + std::to_string(rank));
                std::string digest;
                withMath(t, [&]<class M>() {
                  digest = runAndCheck<M>(call, clique.comm(rank), rank, nranks, expectedReport(config));
                });
                if (digest == "failed") return;  // later calls would not match across ranks
                outputs[rank].push_back({{static_cast<int>(coll), t, op, count, rank}, std::move(digest)});
              }
            }
          }
        }
      });
      std::printf("  %d ranks, %s: %.2f s\n", nranks, config.name().c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      std::fflush(stdout);
      for (const auto& perRank : outputs) {
        for (const auto& [key, digest] : perRank) {
          auto [it, inserted] = firstOutput.emplace(key, digest);
          if (inserted) continue;
          EXPECT_TRUE(it->second == digest)
              << collName(static_cast<Coll>(std::get<0>(key))) << " "
              << dtypeName(static_cast<loomDataType_t>(std::get<1>(key))) << " "
              << opName(static_cast<loomRedOp_t>(std::get<2>(key))) << " count=" << std::get<3>(key)
              << " rank=" << std::get<4>(key) << ": output bits differ from those under " << configs[0].name();
        }
      }
    }
    std::printf("  %d ranks: %zu configurations, identical bits, equal to the rank-order fold\n", nranks,
                configs.size());
  }
}

}  // namespace
}  // namespace loom::integration
