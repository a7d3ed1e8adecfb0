#include "tests/integration/collective_case.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include "tests/integration/element_codec.h"

namespace loom::integration {
namespace {

// A value that can never be a result (results are in [-32, 64] or powers of
// two up to 2^8): marks output elements the library must write, and
// non-root Reduce recvbuffs that it must not.
constexpr int64_t kPoison = 99;
// Mismatches reported one by one per buffer; the rest are only counted.
constexpr size_t kMaxReported = 4;

// splitmix64's finalizer: a cheap, well-mixed hash of (seed, rank, index).
inline uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The small-integer set inputs are drawn from (see collective_case.h).
struct ValueSet {
  int size;
  int64_t values[9];
};
constexpr ValueSet kSignedValues = {9, {-4, -3, -2, -1, 0, 1, 2, 3, 4}};
constexpr ValueSet kUnsignedValues = {9, {0, 1, 2, 3, 4, 5, 6, 7, 8}};
constexpr ValueSet kSignedFactors = {4, {-2, -1, 1, 2}};
constexpr ValueSet kUnsignedFactors = {2, {1, 2}};

// Which member of a set of `size` values sits at (rank key, index): the top
// 32 bits of the hash scaled to [0, size) (no division on this hot path).
inline int pick(uint64_t rankKey, size_t index, int size) {
  const uint64_t h = mix(index + rankKey);
  return static_cast<int>(((h >> 32) * static_cast<uint64_t>(size)) >> 32);
}

// Element counts of the send and receive buffers (per rank).
size_t sendCountOf(const CaseSpec& s, int nranks) {
  return s.coll == Coll::kReduceScatter ? s.count * nranks : s.count;
}
size_t recvCountOf(const CaseSpec& s, int nranks) {
  return s.coll == Coll::kAllGather ? s.count * nranks : s.count;
}

template <class C>
class TypedCase {
 public:
  using S = typename C::Storage;

  TypedCase(const CaseSpec& spec, int rank, int nranks) : s_(spec), rank_(rank), nranks_(nranks) {
    const bool prod = collTakesOp(spec.coll) && spec.op == loomProd;
    set_ = C::kSigned ? (prod ? kSignedFactors : kSignedValues) : (prod ? kUnsignedFactors : kUnsignedValues);
    for (int v = 0; v < set_.size; ++v) encoded_[v] = C::fromInt(set_.values[v]);
    rankKeys_.resize(nranks);
    for (int r = 0; r < nranks; ++r)
      rankKeys_[r] = (static_cast<uint64_t>(r) << 40) + spec.seed * 0x9e3779b97f4a7c15ull;
  }

  S input(int rank, size_t index) const { return encoded_[pick(rankKeys_[rank], index, set_.size)]; }
  S poison() const { return C::fromInt(kPoison); }

  // The reduction over all ranks of the inputs at `index`, as the library
  // must deliver it; *approximate is set for avg on floating types.
  S reduced(size_t index, bool* approximate) const {
    int64_t acc = set_.values[pick(rankKeys_[0], index, set_.size)];
    for (int r = 1; r < nranks_; ++r) {
      const int64_t v = set_.values[pick(rankKeys_[r], index, set_.size)];
      switch (s_.op) {
        case loomSum: case loomAvg: acc += v; break;
        case loomProd: acc *= v; break;
        case loomMax: acc = v > acc ? v : acc; break;
        case loomMin: acc = v < acc ? v : acc; break;
        default: break;
      }
    }
    if (s_.op != loomAvg) return C::fromInt(acc);
    if constexpr (C::kFloat) {
      *approximate = true;
      return C::fromReal(static_cast<double>(acc) / nranks_);
    }
    return C::fromInt(acc / nranks_);  // C division: truncated toward zero
  }

  // Exact, except avg on floating types: the library may divide in its own
  // way (sum * (1/n), or in float for fp16/bf16), so one unit in the last
  // place of the type, at the correctly rounded reference, is accepted.
  static bool matches(S got, S want, bool approximate) {
    if (got == want) return true;  // same bits (floats: NaN never comes from the reference)
    if constexpr (C::kFloat) {
      const double g = C::toDouble(got), w = C::toDouble(want);  // +0 == -0
      if (approximate) return std::fabs(g - w) <= ulpAt(w, C::kMantissaBits);
      return g == w;
    } else {
      return false;
    }
  }

  // Checks elements [0, n) of `data` against want(i) -> pair<S, approximate>.
  template <class Want>
  static void expectRange(const char* what, const void* data, size_t n, Want&& want) {
    const S* p = static_cast<const S*>(data);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      bool approximate = false;
      const S w = want(i, &approximate);
      if (matches(p[i], w, approximate)) continue;
      if (++bad <= kMaxReported)
        ADD_FAILURE() << what << "[" << i << "]: got " << C::toDouble(p[i]) << " expected " << C::toDouble(w)
                      << (approximate ? " (within 1 ulp)" : "");
    }
    if (bad > kMaxReported) ADD_FAILURE() << what << ": " << bad << " of " << n << " elements differ";
  }

  void fill(void* send, void* recv, void* inPlaceAlloc) const {
    const size_t sendCount = sendCountOf(s_, nranks_), recvCount = recvCountOf(s_, nranks_);
    if (!s_.inPlace) {
      S* sp = static_cast<S*>(send);
      for (size_t i = 0; i < sendCount; ++i) sp[i] = input(rank_, i);
      S* rp = static_cast<S*>(recv);
      for (size_t i = 0; i < recvCount; ++i) rp[i] = poison();
      return;
    }
    S* all = static_cast<S*>(inPlaceAlloc);
    if (s_.coll == Coll::kAllGather) {  // the rank's own slice is its input
      for (size_t i = 0; i < recvCount; ++i) all[i] = poison();
      S* own = static_cast<S*>(send);
      for (size_t i = 0; i < s_.count; ++i) own[i] = input(rank_, i);
      return;
    }
    for (size_t i = 0; i < sendCount; ++i) all[i] = input(rank_, i);
  }

  // `sendCopy` is the out-of-place sendbuff as filled (null in place).
  void verify(const void* send, const void* recv, const uint8_t* sendCopy) const {
    const size_t sendCount = sendCountOf(s_, nranks_);
    if (sendCopy != nullptr && std::memcmp(send, sendCopy, sendCount * sizeof(S)) != 0)
      expectRange("sendbuff (must be unchanged)", send, sendCount, [&](size_t i, bool*) { return input(rank_, i); });
    const size_t n = recvCountOf(s_, nranks_);
    const size_t count = s_.count;
    switch (s_.coll) {
      case Coll::kAllReduce:
        expectRange("recvbuff", recv, n, [&](size_t i, bool* a) { return reduced(i, a); });
        break;
      case Coll::kReduceScatter:
        expectRange("recvbuff", recv, n, [&](size_t i, bool* a) { return reduced(rank_ * count + i, a); });
        break;
      case Coll::kBroadcast:
        expectRange("recvbuff", recv, n, [&](size_t i, bool*) { return input(s_.root, i); });
        break;
      case Coll::kAllGather:
        expectRange("recvbuff", recv, n, [&](size_t i, bool*) { return input(int(i / count), i % count); });
        break;
      case Coll::kReduce:
        if (rank_ == s_.root)
          expectRange("recvbuff", recv, n, [&](size_t i, bool* a) { return reduced(i, a); });
        else if (s_.inPlace)  // the non-root's buffer is only its input
          expectRange("non-root buffer (must be unchanged)", recv, n, [&](size_t i, bool*) { return input(rank_, i); });
        else
          expectRange("non-root recvbuff (must be untouched)", recv, n, [&](size_t, bool*) { return poison(); });
        break;
    }
  }

 private:
  CaseSpec s_;
  int rank_;
  int nranks_;
  ValueSet set_;
  S encoded_[9];                    // set_.values in the element type
  std::vector<uint64_t> rankKeys_;  // the hash key of each rank's inputs
};

inline uint8_t guardByte(size_t i, bool after) { return static_cast<uint8_t>(0xa5 ^ (i * 7) ^ (after ? 0x3c : 0)); }

// `offset` bytes past the first 64-byte boundary at least kGuardBytes into
// the raw storage.
uint8_t* placeData(uint8_t* raw, size_t offset) {
  auto p = reinterpret_cast<uintptr_t>(raw) + GuardedBuffer::kGuardBytes;
  return reinterpret_cast<uint8_t*>(((p + 63) & ~uintptr_t{63}) + offset);
}

}  // namespace

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kReduce: return "Reduce";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAllGather: return "AllGather";
  }
  return "?";
}

const char* dtypeName(loomDataType_t dtype) {
  static const char* const kNames[] = {"int8",    "uint8", "int32",   "uint32", "int64",
                                       "uint64",  "fp16",  "fp32",    "fp64",   "bf16"};
  return dtype >= 0 && dtype < loomNumTypes ? kNames[dtype] : "invalid-dtype";
}

const char* opName(loomRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor"};
  return op >= 0 && op < loomNumOps ? kNames[op] : "invalid-op";
}

bool collTakesOp(Coll coll) {
  return coll == Coll::kAllReduce || coll == Coll::kReduce || coll == Coll::kReduceScatter;
}
bool collTakesRoot(Coll coll) { return coll == Coll::kBroadcast || coll == Coll::kReduce; }

std::string describe(const CaseSpec& s) {
  std::ostringstream out;
  out << collName(s.coll) << " " << dtypeName(s.dtype);
  if (collTakesOp(s.coll)) out << " " << opName(s.op);
  out << " count=" << s.count << (s.inPlace ? " in-place" : " out-of-place");
  if (s.useBcast) out << " (loomBcast)";
  if (s.misaligned) out << " misaligned";
  if (collTakesRoot(s.coll)) out << " root=" << s.root;
  out << " seed=" << s.seed;
  return out.str();
}

GuardedBuffer::GuardedBuffer(size_t bytes, size_t offset)
    : bytes_(bytes),
      storage_(std::make_unique_for_overwrite<uint8_t[]>(bytes + 2 * kGuardBytes + 64 + kMaxOffset)),
      data_(placeData(storage_.get(), std::min(offset, kMaxOffset))) {
  uint8_t* before = data_ - kGuardBytes;
  uint8_t* after = data_ + bytes_;
  for (size_t i = 0; i < kGuardBytes; ++i) before[i] = guardByte(i, false), after[i] = guardByte(i, true);
}

void GuardedBuffer::expectGuardsIntact(const char* what) const {
  const uint8_t* before = data_ - kGuardBytes;
  const uint8_t* after = data_ + bytes_;
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (before[i] != guardByte(i, false)) {
      ADD_FAILURE() << what << ": byte " << (kGuardBytes - i) << " before the buffer was overwritten";
      break;
    }
  }
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (after[i] != guardByte(i, true)) {
      ADD_FAILURE() << what << ": byte " << i << " after the end (" << bytes_ << " bytes) was overwritten";
      break;
    }
  }
}

struct CaseRun::Buffers {
  std::optional<GuardedBuffer> sendAlloc;  // out-of-place only
  std::unique_ptr<uint8_t[]> sendCopy;     // out-of-place: sendbuff as filled, to find changes fast
  std::optional<GuardedBuffer> recvAlloc;  // in place: the one shared allocation
  const void* send = nullptr;
  void* recv = nullptr;
};

CaseRun::CaseRun(const CaseSpec& spec, int rank, int nranks) : spec_(spec), rank_(rank), nranks_(nranks) {}
CaseRun::CaseRun(CaseRun&&) noexcept = default;
CaseRun& CaseRun::operator=(CaseRun&&) noexcept = default;
CaseRun::~CaseRun() = default;

std::string CaseRun::trace() const {
  return describe(spec_) + " rank=" + std::to_string(rank_) + " nranks=" + std::to_string(nranks_);
}

void CaseRun::prepare() {
  withCodec(spec_.dtype, [&]<class C>() {
    using S = typename C::Storage;
    buffers_ = std::make_unique<Buffers>();
    Buffers& b = *buffers_;
    const size_t sendBytes = sendCountOf(spec_, nranks_) * sizeof(S);
    const size_t recvBytes = recvCountOf(spec_, nranks_) * sizeof(S);
    const size_t ownOffset = static_cast<size_t>(rank_) * spec_.count * sizeof(S);
    if (spec_.inPlace) {
      b.recvAlloc.emplace(std::max(sendBytes, recvBytes), spec_.misaligned ? sizeof(S) : 0);
      uint8_t* base = b.recvAlloc->data();
      b.send = spec_.coll == Coll::kAllGather ? base + ownOffset : base;
      b.recv = spec_.coll == Coll::kReduceScatter ? base + ownOffset : base;
    } else {
      b.sendAlloc.emplace(sendBytes, spec_.misaligned ? sizeof(S) : 0);
      b.recvAlloc.emplace(recvBytes, spec_.misaligned ? 3 * sizeof(S) : 0);
      b.send = b.sendAlloc->data();
      b.recv = b.recvAlloc->data();
    }
    TypedCase<C>(spec_, rank_, nranks_)
        .fill(const_cast<void*>(b.send), b.recv, spec_.inPlace ? b.recvAlloc->data() : nullptr);
    if (!spec_.inPlace) {
      b.sendCopy = std::make_unique_for_overwrite<uint8_t[]>(sendBytes);
      if (sendBytes) std::memcpy(b.sendCopy.get(), b.send, sendBytes);
    }
  });
}

loomResult_t CaseRun::launch(loomComm_t comm, loomStream_t stream) {
  const Buffers& b = *buffers_;
  const CaseSpec& s = spec_;
  switch (s.coll) {
    case Coll::kAllReduce: return loomAllReduce(b.send, b.recv, s.count, s.dtype, s.op, comm, stream);
    case Coll::kBroadcast:
      if (s.inPlace && s.useBcast) return loomBcast(b.recv, s.count, s.dtype, s.root, comm, stream);
      return loomBroadcast(b.send, b.recv, s.count, s.dtype, s.root, comm, stream);
    case Coll::kReduce: return loomReduce(b.send, b.recv, s.count, s.dtype, s.op, s.root, comm, stream);
    case Coll::kReduceScatter: return loomReduceScatter(b.send, b.recv, s.count, s.dtype, s.op, comm, stream);
    case Coll::kAllGather: return loomAllGather(b.send, b.recv, s.count, s.dtype, comm, stream);
  }
  return loomInternalError;
}

void CaseRun::verify() {
  const Buffers& b = *buffers_;
  if (b.sendAlloc) b.sendAlloc->expectGuardsIntact("sendbuff guard");
  b.recvAlloc->expectGuardsIntact(spec_.inPlace ? "in-place buffer guard" : "recvbuff guard");
  withCodec(spec_.dtype, [&]<class C>() {
    TypedCase<C>(spec_, rank_, nranks_).verify(b.send, b.recv, b.sendCopy.get());
  });
}

}  // namespace loom::integration
