// The tuner: picks the algorithm and protocol of each collective call.
//
// Candidates are the registered algorithms of the call's collective whose
// `applies` holds, over every protocol the communicator has links for; the
// filters (LOOM_ALGO, LOOM_PROTO) narrow them, and the cost model (with the
// tuning table's parameters) predicts each one's time: the fastest wins, ties
// going to the earlier algorithm in the registry, then Simple before LL.
//
// Candidates over a protocol their record does not list are skipped. A
// deterministic record (AlgorithmInfo::deterministic) is never picked by the
// cost model: only when LOOM_DETERMINISTIC=1 (all-reduce, reduce and
// reduce-scatter of floating point types, whatever LOOM_ALGO says) or when
// LOOM_ALGO names it.
//
// If the filters exclude every candidate the call still runs: the filter
// that excludes them is ignored for it (warned once).
//
// choose() is a pure function of the options every rank agreed on, the
// call's arguments and the protocol contexts, so all ranks pick alike.
// It is cheap (no allocation) and thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "common/log.h"
#include "src/tuner/name_filter.h"
#include "src/tuner/tuning_table.h"

namespace loom::tuner {

// What all ranks of a communicator agree on (rank 0's values).
struct TunerOptions {
  std::string algo;   // LOOM_ALGO
  std::string proto;  // LOOM_PROTO
  bool deterministic = false;
  bool online = true;  // LOOM_TUNER_ONLINE (online_tuner.h); off where algo or proto is set
  TuningTable table;  // built-in defaults, then LOOM_TUNING_FILE
};

// The context an algorithm gets per protocol; null where the communicator has
// no links of that protocol.
using ProtoContexts = std::array<const algo::AlgoContext*, transport::kNumProtocols>;

struct Choice {
  const algo::AlgorithmInfo* algorithm = nullptr;
  transport::Protocol proto = transport::Protocol::kSimple;
  double predictedMicros = 0;
};

class Tuner {
 public:
  // `algorithms` must outlive the tuner (normally algo::allAlgorithms()).
  Tuner(const TunerOptions& options, int nranks, const std::vector<algo::AlgorithmInfo>& algorithms, Logger log,
        std::vector<std::string>* warnings);

  // Null algorithm only if no registered algorithm applies to the call.
  // Not thread-safe (its cache): one caller at a time, as the communicator's
  // executor guarantees.
  Choice choose(const algo::CollArgs& args, const ProtoContexts& ctxs) const;

  // Every applicable (algorithm, protocol) with its predicted time, in
  // registry order, ignoring the filters (for logs, tools and tests).
  std::vector<Choice> predictAll(const algo::CollArgs& args, const ProtoContexts& ctxs) const;

  // The candidates that choose() weighs for `args` (the filters applied;
  // never a deterministic record), fastest predicted first, ties as choose() breaks
  // them: what the online tuner explores. Empty where LOOM_DETERMINISTIC
  // decides the call.
  std::vector<Choice> shortlist(const algo::CollArgs& args, const ProtoContexts& ctxs) const;

  // Predicted time of one algorithm (index into `algorithms`) and protocol.
  double predict(size_t algorithm, transport::Protocol proto, double bytes, double chunkBytes,
                 bool copiesInProcess = false) const;
  // The same for a call in `ctx`: across hosts (ctx.hosts with two or more)
  // the multi-host model (multi_host_cost.h), else predict().
  double predictIn(size_t algorithm, transport::Protocol proto, double bytes, const algo::AlgoContext& ctx) const;

  // LOOM_ALGO and LOOM_PROTO as parsed (names in lower case), for the
  // paths that choose outside the registry (the device engine).
  const NameFilter& algorithmFilter() const { return algoFilter_; }
  const NameFilter& protocolFilter() const { return protoFilter_; }

 private:
  struct Model {
    CostParams params;
    std::vector<std::pair<double, double>> points;  // measured (bytes, us)
  };
  enum Filtered : unsigned { kPassAlgo = 1, kPassProto = 2 };

  Choice pick(const algo::CollArgs& args, const ProtoContexts& ctxs, bool deterministicOnly) const;
  void logChoice(const algo::CollArgs& args, const ProtoContexts& ctxs, const Choice& choice) const;
  const Model& model(size_t algorithm, transport::Protocol proto) const {
    return models_[algorithm * transport::kNumProtocols + static_cast<size_t>(proto)];
  }
  const CostParams& networkParams(algo::CollType type, transport::Protocol proto) const {
    return network_[static_cast<size_t>(type) * transport::kNumProtocols + static_cast<size_t>(proto)];
  }

  // Recent choices: a collective loop repeats the same call, and a lookup
  // costs ~40 ns where choosing costs ~0.5 us (20% of an 8 B all-reduce).
  // Assumes, as the registry's do, that `applies` depends only on the fields
  // in the key and on the context.
  struct CacheKey {
    algo::CollType type;
    size_t count;
    DataType dtype;
    RedOp op;
    int root;
    bool inPlace;
    bool present[transport::kNumProtocols];
    int nranks[transport::kNumProtocols];
    size_t chunk[transport::kNumProtocols];
    bool singleHost[transport::kNumProtocols];
    const algo::HostLayout* hosts[transport::kNumProtocols];
    bool copiesInProcess[transport::kNumProtocols];
    bool operator==(const CacheKey&) const = default;
  };
  struct CacheEntry {
    bool valid = false;
    CacheKey key;
    Choice choice;
  };
  static constexpr size_t kCacheEntries = 16;
  static CacheKey keyOf(const algo::CollArgs& args, const ProtoContexts& ctxs);
  Choice chooseUncached(const algo::CollArgs& args, const ProtoContexts& ctxs) const;
  // No lock: choose() runs only inside Communicator::execute, which the
  // communicator's executor runs one at a time (its run lock).
  mutable CacheEntry cache_[kCacheEntries];

  const int nranks_;
  const std::vector<algo::AlgorithmInfo>& algorithms_;
  std::vector<std::string> names_;  // lower case, by algorithm index
  std::vector<Model> models_;       // by algorithm index x protocol
  std::vector<CostParams> network_; // the links between hosts, by collective x protocol
  NameFilter algoFilter_;
  NameFilter protoFilter_;
  bool deterministic_;
  Logger log_;
  // Bit b of loggedSizes_[coll]: a choice for sizes in [2^(b-1), 2^b) was logged.
  mutable std::array<std::atomic<uint64_t>, algo::kNumCollTypes> loggedSizes_{};
};

// Logs `message` at `level` once per process (warnings that every
// communicator of a job would otherwise repeat).
void logOnce(const Logger& log, LogLevel level, const std::string& message);

bool isFloatingPoint(DataType type);

}  // namespace loom::tuner
