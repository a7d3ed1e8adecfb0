#include "src/comm/algorithm_selection.h"

#include <cstring>
#include <utility>

#include "common/format.h"

namespace loom {
namespace {

// FNV-1a: equal texts give equal hashes on every rank (no per-process seed).
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string oneLine(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

struct Digest {
  uint64_t hash;
  uint64_t length;
};

}  // namespace

tuner::TunerOptions localTunerOptions(const Config& config, std::vector<std::string>* warnings) {
  tuner::TunerOptions options;
  options.algo = config.algo;
  options.proto = config.proto;
  options.deterministic = config.deterministic;
  options.online = config.onlineTuning;
  options.table = tuner::TuningTable::builtin();
  if (!config.tuningFile.empty()) {
    auto file = tuner::TuningTable::readFile(config.tuningFile);
    if (file.isOk()) options.table.append(file.value());
    else if (warnings) warnings->push_back(file.status().message() + "; using the built-in tuning defaults");
  }
  return options;
}

std::string serializeTunerOptions(const tuner::TunerOptions& o) {
  return strprintf("algo=%s\nproto=%s\ndeterministic=%d\nonline=%d\n", oneLine(o.algo).c_str(),
                   oneLine(o.proto).c_str(), o.deterministic ? 1 : 0, o.online ? 1 : 0) +
         o.table.toText();
}

Result<tuner::TunerOptions> parseTunerOptions(const std::string& text) {
  tuner::TunerOptions o;
  size_t pos = 0;
  auto field = [&](const char* name) -> Result<std::string> {
    const std::string prefix = std::string(name) + "=";
    const size_t end = text.find('\n', pos);
    if (end == std::string::npos || text.compare(pos, prefix.size(), prefix) != 0)
      return makeError(Code::kInternalError, "tuner options from rank 0 lack '%s'", name);
    std::string value = text.substr(pos + prefix.size(), end - pos - prefix.size());
    pos = end + 1;
    return value;
  };
  auto algo = field("algo");
  LOOM_TRY(algo.status());
  auto proto = field("proto");
  LOOM_TRY(proto.status());
  auto det = field("deterministic");
  LOOM_TRY(det.status());
  auto online = field("online");
  LOOM_TRY(online.status());
  o.algo = algo.value();
  o.proto = proto.value();
  o.deterministic = det.value() == "1";
  o.online = online.value() == "1";
  auto table = tuner::TuningTable::parse(text.substr(pos), "tuning table of rank 0");
  LOOM_TRY(table.status());
  o.table = std::move(table).value();
  return o;
}

Result<tuner::TunerOptions> agreeOnTunerOptions(const tuner::TunerOptions& local, bootstrap::Bootstrap& boot,
                                                const WaitContext& wait, const Logger& log) {
  const std::string mine = serializeTunerOptions(local);
  const int n = boot.nranks();
  std::vector<Digest> digests(static_cast<size_t>(n));
  digests[static_cast<size_t>(boot.rank())] = {fnv1a(mine), mine.size()};
  LOOM_TRY(boot.allGather(digests.data(), sizeof(Digest), wait));
  bool same = true;
  uint64_t longest = 0;
  for (const auto& d : digests) {
    same = same && d.hash == digests[0].hash && d.length == digests[0].length;
    longest = std::max(longest, d.length);
  }
  // The common case (every rank has the same environment): one small exchange.
  if (same) return parseTunerOptions(mine);

  std::vector<char> texts(static_cast<size_t>(n) * longest, '\0');
  std::memcpy(texts.data() + static_cast<size_t>(boot.rank()) * longest, mine.data(), mine.size());
  LOOM_TRY(boot.allGather(texts.data(), longest, wait));
  const std::string rank0(texts.data(), digests[0].length);
  if (rank0 != mine)
    LOOM_WARN(log, kSubsysTuner,
              "LOOM_ALGO, LOOM_PROTO, LOOM_DETERMINISTIC, LOOM_TUNER_ONLINE or the tuning table differ from rank 0's; "
              "using rank 0's so that every rank picks the same algorithms");
  return parseTunerOptions(rank0);
}

cuda::EngineChoiceRules engineChoiceRules(const tuner::Tuner& tuner) {
  namespace engine = kernels::cuda::engine;
  // The names LOOM_ALGO and LOOM_PROTO use for the engine's choices (the
  // host ring, tree and protocols go by the same names).
  const std::pair<engine::EngineAlgorithm, const char*> algorithms[] = {{engine::EngineAlgorithm::kRing, "ring"},
                                                                        {engine::EngineAlgorithm::kTree, "tree"}};
  const std::pair<engine::EngineProtocol, const char*> protocols[] = {{engine::EngineProtocol::kSimple, "simple"},
                                                                      {engine::EngineProtocol::kLL, "ll"}};
  cuda::EngineChoiceRules rules;
  for (int c = 0; c < algo::kNumCollTypes; ++c) {
    const auto coll = static_cast<algo::CollType>(c);
    rules.algorithms[c] = 0;
    rules.protocols[c] = 0;
    for (const auto& [a, name] : algorithms)
      if (tuner.algorithmFilter().allows(coll, name)) rules.algorithms[c] |= static_cast<uint8_t>(1u << static_cast<int>(a));
    for (const auto& [p, name] : protocols)
      if (tuner.protocolFilter().allows(coll, name)) rules.protocols[c] |= static_cast<uint8_t>(1u << static_cast<int>(p));
  }
  return rules;
}

}  // namespace loom
