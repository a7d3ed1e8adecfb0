#include "src/tuner/tuner.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "algorithms/patterns/host_layout.h"
#include "common/format.h"
#include "src/tuner/multi_host_cost.h"

namespace loom::tuner {
namespace {

using algo::CollType;
using transport::Protocol;

// Whether `a` can run `args` over `proto`, whose context is `ctx` (null: no
// links of that protocol).
bool runsHere(const algo::AlgorithmInfo& a, Protocol proto, const algo::CollArgs& args, const algo::AlgoContext* ctx) {
  return ctx && (a.protocols & algo::protocolBit(proto)) && (!a.applies || a.applies(args, *ctx));
}

bool reducesData(CollType t) {
  return t == CollType::kAllReduce || t == CollType::kReduce || t == CollType::kReduceScatter;
}

const std::string& protoKey(Protocol p) {
  static const std::string names[transport::kNumProtocols] = {lowerCase(transport::protocolName(Protocol::kSimple)),
                                                              lowerCase(transport::protocolName(Protocol::kLL))};
  return names[static_cast<int>(p)];
}

void logOnceKeyed(const Logger& log, LogLevel level, const std::string& key, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> done;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!done.insert(key).second) return;
  }
  if (level == LogLevel::kWarn) LOOM_WARN(log, kSubsysTuner, "%s", message.c_str());
  else LOOM_INFO(log, kSubsysTuner, "%s", message.c_str());
}

}  // namespace

bool isFloatingPoint(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kBfloat16;
}

void logOnce(const Logger& log, LogLevel level, const std::string& message) {
  logOnceKeyed(log, level, message, message);
}

Tuner::Tuner(const TunerOptions& options, int nranks, const std::vector<algo::AlgorithmInfo>& algorithms, Logger log,
             std::vector<std::string>* warnings)
    : nranks_(nranks), algorithms_(algorithms), deterministic_(options.deterministic), log_(log) {
  for (const auto& a : algorithms_) {
    names_.push_back(lowerCase(a.name));
    for (int p = 0; p < transport::kNumProtocols; ++p) {
      const auto proto = static_cast<Protocol>(p);
      models_.push_back({options.table.params(a.type, names_.back(), proto, nranks),
                         options.table.points(a.type, names_.back(), proto, nranks)});
    }
  }
  for (int c = 0; c < algo::kNumCollTypes; ++c)
    for (int p = 0; p < transport::kNumProtocols; ++p)
      network_.push_back(
          options.table.params(static_cast<CollType>(c), kNetworkAlgoName, static_cast<Protocol>(p), nranks));
  algoFilter_ = NameFilter::parse(
      options.algo, "LOOM_ALGO", "algorithm",
      [this](int coll, const std::string& name) {
        for (size_t i = 0; i < algorithms_.size(); ++i)
          if (names_[i] == name && (coll < 0 || static_cast<int>(algorithms_[i].type) == coll)) return true;
        return false;
      },
      warnings);
  protoFilter_ = NameFilter::parse(
      options.proto, "LOOM_PROTO", "protocol", [](int, const std::string& name) { return parseProtoName(name) >= 0; },
      warnings);
}

double Tuner::predict(size_t algorithm, Protocol proto, double bytes, double chunkBytes, bool copiesInProcess) const {
  const auto& info = algorithms_[algorithm];
  const Model& m = model(algorithm, proto);
  const CostParams& net = networkParams(info.type, proto);
  auto alphaBeta = [&](double s) {
    return predictMicros(info, {nranks_, 1, nranks_, s, chunkBytes, copiesInProcess}, m.params, net);
  };
  const auto& pts = m.points;
  if (pts.empty()) return alphaBeta(bytes);
  if (bytes <= pts.front().first) return pts.front().second;
  if (bytes >= pts.back().first) {
    const double at = alphaBeta(pts.back().first);
    const double ratio = at > 0 ? alphaBeta(bytes) / at : bytes / std::max(pts.back().first, 1.0);
    return pts.back().second * ratio;
  }
  size_t hi = 1;
  while (pts[hi].first < bytes) ++hi;
  const auto& [s0, t0] = pts[hi - 1];
  const auto& [s1, t1] = pts[hi];
  const double x0 = std::log(std::max(s0, 1.0)), x1 = std::log(std::max(s1, 1.0));
  const double f = x1 > x0 ? (std::log(std::max(bytes, 1.0)) - x0) / (x1 - x0) : 1.0;
  return std::exp(std::log(t0) + f * (std::log(t1) - std::log(t0)));
}

double Tuner::predictIn(size_t algorithm, Protocol proto, double bytes, const algo::AlgoContext& ctx) const {
  const algo::HostLayout* hosts = ctx.hosts;
  if (!hosts || hosts->nHosts() < 2)
    return predict(algorithm, proto, bytes, static_cast<double>(ctx.chunkBytes), ctx.peerCopiesInProcess);
  // Measured points (one host) do not describe a network: alpha-beta only.
  const auto& info = algorithms_[algorithm];
  return predictAcrossHosts(info, nranks_, {hosts->nHosts(), hosts->maxRanksPerHost()}, bytes,
                            static_cast<double>(ctx.chunkBytes), model(algorithm, proto).params,
                            networkParams(info.type, proto));
}

Choice Tuner::pick(const algo::CollArgs& args, const ProtoContexts& ctxs, bool deterministicOnly) const {
  const double bytes = collectiveBytes(args, nranks_);
  // Best candidate per filter outcome: [both pass, algo only, proto only, neither].
  Choice best[4];
  auto tier = [](unsigned pass) { return pass == 3 ? 0 : pass == kPassAlgo ? 1 : pass == kPassProto ? 2 : 3; };
  for (size_t i = 0; i < algorithms_.size(); ++i) {
    const auto& a = algorithms_[i];
    if (a.type != args.type) continue;
    if (deterministicOnly && !a.deterministic) continue;
    if (!deterministicOnly && a.deterministic && !algoFilter_.names(args.type, names_[i])) continue;
    for (int p = 0; p < transport::kNumProtocols; ++p) {
      const auto proto = static_cast<Protocol>(p);
      const algo::AlgoContext* ctx = ctxs[static_cast<size_t>(p)];
      if (!runsHere(a, proto, args, ctx)) continue;
      unsigned pass = 0;
      if (deterministicOnly || algoFilter_.allows(args.type, names_[i])) pass |= kPassAlgo;
      if (protoFilter_.allows(args.type, protoKey(proto))) pass |= kPassProto;
      const double t = predictIn(i, proto, bytes, *ctx);
      Choice& b = best[tier(pass)];
      if (!b.algorithm || t < b.predictedMicros) b = {&a, proto, t};
    }
  }
  if (best[0].algorithm) return best[0];
  const char* coll = algo::collTypeName(args.type);
  for (int t = 1; t < 4; ++t) {
    if (!best[t].algorithm) continue;
    const char* ignored = t == 1 ? "LOOM_PROTO" : t == 2 ? "LOOM_ALGO" : "LOOM_ALGO and LOOM_PROTO";
    logOnceKeyed(log_, LogLevel::kWarn, strprintf("fallback %s %s", coll, ignored),
                 strprintf("%s excludes every candidate that can run some %s calls (first: %.0f bytes); "
                           "ignoring it for them (%s/%s runs that one)",
                           ignored, coll, bytes, best[t].algorithm->name, transport::protocolName(best[t].proto)));
    return best[t];
  }
  return {};
}

Tuner::CacheKey Tuner::keyOf(const algo::CollArgs& args, const ProtoContexts& ctxs) {
  CacheKey k{args.type, args.count, args.dtype, args.op, args.root, args.sendbuf == args.recvbuf, {}, {}, {}, {}, {}, {}};
  for (size_t p = 0; p < ctxs.size(); ++p) {
    k.present[p] = ctxs[p] != nullptr;
    k.nranks[p] = ctxs[p] ? ctxs[p]->nranks : 0;
    k.chunk[p] = ctxs[p] ? ctxs[p]->chunkBytes : 0;
    k.singleHost[p] = ctxs[p] && ctxs[p]->singleHost;
    k.hosts[p] = ctxs[p] ? ctxs[p]->hosts : nullptr;
    k.copiesInProcess[p] = ctxs[p] && ctxs[p]->peerCopiesInProcess;
  }
  return k;
}

Choice Tuner::choose(const algo::CollArgs& args, const ProtoContexts& ctxs) const {
  const CacheKey key = keyOf(args, ctxs);
  CacheEntry& slot = cache_[(args.count * 31 + static_cast<size_t>(args.type)) % kCacheEntries];
  if (slot.valid && slot.key == key) return slot.choice;
  const Choice choice = chooseUncached(args, ctxs);
  slot = {true, key, choice};
  return choice;
}

Choice Tuner::chooseUncached(const algo::CollArgs& args, const ProtoContexts& ctxs) const {
  Choice choice;
  if (deterministic_ && reducesData(args.type) && isFloatingPoint(args.dtype)) {
    choice = pick(args, ctxs, true);
    if (choice.algorithm)
      logOnce(log_, LogLevel::kInfo,
              strprintf("LOOM_DETERMINISTIC=1: floating-point %s uses the deterministic algorithm, whatever LOOM_ALGO says",
                        algo::collTypeName(args.type)));
    else
      logOnceKeyed(log_, LogLevel::kWarn, strprintf("no deterministic %s", algo::collTypeName(args.type)),
                   strprintf("LOOM_DETERMINISTIC=1 but no deterministic algorithm can run %s (count %zu); "
                             "results may depend on the algorithm chosen",
                             algo::collTypeName(args.type), args.count));
  }
  if (!choice.algorithm) choice = pick(args, ctxs, false);
  if (choice.algorithm && log_.enabled(LogLevel::kInfo, kSubsysTuner)) logChoice(args, ctxs, choice);
  return choice;
}

std::vector<Choice> Tuner::predictAll(const algo::CollArgs& args, const ProtoContexts& ctxs) const {
  const double bytes = collectiveBytes(args, nranks_);
  std::vector<Choice> all;
  for (size_t i = 0; i < algorithms_.size(); ++i) {
    const auto& a = algorithms_[i];
    if (a.type != args.type) continue;
    for (int p = 0; p < transport::kNumProtocols; ++p) {
      const algo::AlgoContext* ctx = ctxs[static_cast<size_t>(p)];
      if (!runsHere(a, static_cast<Protocol>(p), args, ctx)) continue;
      all.push_back({&a, static_cast<Protocol>(p), predictIn(i, static_cast<Protocol>(p), bytes, *ctx)});
    }
  }
  return all;
}

std::vector<Choice> Tuner::shortlist(const algo::CollArgs& args, const ProtoContexts& ctxs) const {
  if (deterministic_ && reducesData(args.type) && isFloatingPoint(args.dtype)) return {};
  const double bytes = collectiveBytes(args, nranks_);
  std::vector<Choice> all;
  for (size_t i = 0; i < algorithms_.size(); ++i) {
    const auto& a = algorithms_[i];
    if (a.type != args.type || a.deterministic || !algoFilter_.allows(args.type, names_[i])) continue;
    for (int p = 0; p < transport::kNumProtocols; ++p) {
      const auto proto = static_cast<Protocol>(p);
      const algo::AlgoContext* ctx = ctxs[static_cast<size_t>(p)];
      if (!runsHere(a, proto, args, ctx) || !protoFilter_.allows(args.type, protoKey(proto))) continue;
      all.push_back({&a, proto, predictIn(i, proto, bytes, *ctx)});
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const Choice& x, const Choice& y) { return x.predictedMicros < y.predictedMicros; });
  return all;
}

void Tuner::logChoice(const algo::CollArgs& args, const ProtoContexts& ctxs, const Choice& choice) const {
  const size_t bytes = static_cast<size_t>(collectiveBytes(args, nranks_));
  const int sizeClass = bytes == 0 ? 0 : 64 - __builtin_clzll(bytes);  // [2^(c-1), 2^c)
  const uint64_t bit = uint64_t{1} << std::min(sizeClass, 63);
  if (loggedSizes_[static_cast<size_t>(args.type)].fetch_or(bit) & bit) return;
  std::string others;
  for (const auto& c : predictAll(args, ctxs))
    others += strprintf(" %s/%s=%.1f", c.algorithm->name, transport::protocolName(c.proto), c.predictedMicros);
  LOOM_INFO(log_, kSubsysTuner, "%s %zu B (sizes %zu..%zu B, %d ranks): %s/%s, predicted us:%s",
            algo::collTypeName(args.type), bytes, sizeClass == 0 ? size_t{0} : size_t{1} << (sizeClass - 1),
            sizeClass == 0 ? size_t{0} : (size_t{1} << (sizeClass - 1)) * 2 - 1, nranks_, choice.algorithm->name,
            transport::protocolName(choice.proto), others.c_str());
}

}  // namespace loom::tuner
