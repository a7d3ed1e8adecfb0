#include "tests/integration/forced_algorithm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace loom::integration {
namespace {

// Each algorithm's collectives and size limit, as documented next to it in
// algorithms/ (the headers and registry.cc). A limit is on the call's
// per-rank bytes, count x element size, with NCCL's count.
enum class Limit {
  kNone,
  kOneChunk,    // rd: the whole vector fits one chunk of the protocol in use
  kOneShotMax,  // oneshot: at most kOneShotMaxBytes (64 KiB) on one host
  kSimpleOnly,  // window, direct: any size, Simple protocol only (they move nothing over links)
};
struct AlgorithmLimits {
  const char* name;
  bool serves[kNumColls];  // AllReduce, Broadcast, Reduce, ReduceScatter, AllGather
  Limit limit;
};
constexpr AlgorithmLimits kAlgorithms[] = {
    {"ring", {true, false, false, true, true}, Limit::kNone},
    {"rd", {true, false, false, false, false}, Limit::kOneChunk},
    {"hd", {true, false, false, false, false}, Limit::kNone},
    {"tree", {true, true, true, false, false}, Limit::kNone},
    {"oneshot", {true, false, false, false, false}, Limit::kOneShotMax},
    {"window", {true, false, false, false, false}, Limit::kSimpleOnly},
    {"direct", {true, false, false, false, false}, Limit::kSimpleOnly},
    {"chain", {false, true, true, false, false}, Limit::kNone},
    {"deterministic", {true, false, true, true, false}, Limit::kNone},
};
constexpr size_t kOneShotMaxBytes = 64 * 1024;
// LL slots are a fixed size in the shared-memory transport (kLLChunkBytes in
// transports/shm/shm_layout.h); LL's chunk is the smaller of that and
// LOOM_CHUNK_SIZE.
constexpr size_t kLLChunkBytes = 8 * 1024;

const AlgorithmLimits* findAlgorithm(const std::string& name) {
  for (const auto& a : kAlgorithms)
    if (name == a.name) return &a;
  return nullptr;
}

std::string lowerCase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool isFloating(loomDataType_t t) {
  return t == loomFloat16 || t == loomFloat32 || t == loomFloat64 || t == loomBfloat16;
}

size_t elementBytes(loomDataType_t t) {
  switch (t) {
    case loomInt8: case loomUint8: return 1;
    case loomFloat16: case loomBfloat16: return 2;
    case loomInt32: case loomUint32: case loomFloat32: return 4;
    default: return 8;
  }
}

// "ring/LL" against a pattern whose empty parts match anything.
bool matchesPattern(const std::string& reported, const std::string& algo, const std::string& proto) {
  const size_t slash = reported.find('/');
  if (slash == std::string::npos) return false;
  return (algo.empty() || reported.compare(0, slash, algo) == 0) &&
         (proto.empty() || reported.compare(slash + 1, std::string::npos, proto) == 0);
}

}  // namespace

bool ForcedAlgorithm::parseEnvironment(size_t chunkBytes, std::string* error) {
  chunkBytes_ = chunkBytes;
  if (const char* v = std::getenv("LOOM_ALGO"); v && *v) {
    algo_ = lowerCase(v);
    if (!findAlgorithm(algo_)) {
      *error = std::string("LOOM_ALGO=") + v +
               ": collectives_test checks only one algorithm name (ring, rd, hd, tree, oneshot, window, direct, chain, "
               "deterministic); add the algorithm's limits to tests/integration/forced_algorithm.cc";
      return false;
    }
  }
  if (const char* v = std::getenv("LOOM_PROTO"); v && *v) {
    const std::string p = lowerCase(v);
    if (p == "simple") proto_ = "Simple";
    else if (p == "ll") proto_ = "LL";
    else {
      *error = std::string("LOOM_PROTO=") + v + ": collectives_test checks only one protocol name (simple, ll)";
      return false;
    }
  }
  if (const char* v = std::getenv("LOOM_DETERMINISTIC"); v && *v) deterministic_ = std::string(v) == "1";
  return true;
}

std::string ForcedAlgorithm::describe() const {
  std::string s = algo_.empty() ? std::string("any algorithm") : algo_;
  s += proto_.empty() ? std::string(" (any protocol)") : "/" + proto_;
  if (deterministic_) s += " (deterministic for floating-point reductions)";
  return s;
}

size_t ForcedAlgorithm::chunkBytesOfProto() const {
  // Without a forced protocol the larger (Simple) chunk bounds what can run.
  return proto_ == "LL" ? std::min(chunkBytes_, kLLChunkBytes) : chunkBytes_;
}

bool ForcedAlgorithm::canRun(const std::string& algo, const CaseSpec& spec) const {
  const AlgorithmLimits* a = findAlgorithm(algo);
  if (!a || !a->serves[static_cast<int>(spec.coll)]) return false;
  const size_t bytes = spec.count * elementBytes(spec.dtype);
  switch (a->limit) {
    case Limit::kNone: return true;
    case Limit::kOneChunk: return bytes <= chunkBytesOfProto();
    case Limit::kOneShotMax: return bytes <= kOneShotMaxBytes;
    case Limit::kSimpleOnly: return proto_ != "LL";
  }
  return false;
}

std::string ForcedAlgorithm::algorithmFor(const CaseSpec& spec) const {
  if (deterministic_ && collTakesOp(spec.coll) && isFloating(spec.dtype)) return "deterministic";
  return algo_;
}

bool ForcedAlgorithm::serves(Coll coll) const {
  if (algo_.empty()) return true;
  const AlgorithmLimits* a = findAlgorithm(algo_);
  return a && a->serves[static_cast<int>(coll)];
}

bool ForcedAlgorithm::governs(const CaseSpec& spec) const {
  const std::string algo = algorithmFor(spec);
  return algo.empty() || canRun(algo, spec);
}

bool ForcedAlgorithm::check(const CaseSpec& spec, const std::string& reported) const {
  const std::string algo = algorithmFor(spec);
  const bool matches = matchesPattern(reported, algo, proto_);
  if (governs(spec)) {
    EXPECT_TRUE(matches) << "forced " << (algo.empty() ? "any algorithm" : algo) << "/"
                         << (proto_.empty() ? "any protocol" : proto_) << " can run this call, but '" << reported
                         << "' ran it";
    return matches;
  }
  // The forced algorithm cannot run this call: something else must have.
  EXPECT_FALSE(matches) << "'" << reported << "' ran a call that " << algo
                        << " cannot run according to its documented limits (tests/integration/forced_algorithm.cc)";
  return !matches;
}

ForcedAlgorithm& forcedAlgorithm() {
  static ForcedAlgorithm forced;
  return forced;
}

}  // namespace loom::integration
