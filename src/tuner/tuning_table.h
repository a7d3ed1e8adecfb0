// The tuning table: the cost model's parameters per (collective, algorithm,
// protocol, nranks), from the built-in defaults and LOOM_TUNING_FILE.
//
// Text format, one entry per line; `#` starts a comment; fields are separated
// by blanks; names are case-insensitive; `*` in any of the first four fields
// matches everything:
//
//   <collective> <algorithm> <protocol> <nranks> <alpha_us> <bandwidth_GBps> [<reduce_GBps>]
//   point <collective> <algorithm> <protocol> <nranks> <bytes> <time_us>
//
//   collective  allreduce, broadcast, reduce, reducescatter, allgather
//               (underscores ignored: all_reduce works too)
//   protocol    simple, ll
//   alpha_us    latency of one step (chunk hop), microseconds, >= 0
//   bandwidth   bytes per second on one rank's critical path, in GB/s (1e9), > 0
//   reduce_GBps reduction throughput, GB/s; optional (the most specific entry
//               that gives it wins, independently of alpha and bandwidth)
//   point       a measured time of one call of `bytes`; an exact key (no `*`).
//               Where points exist for a key they replace the alpha-beta
//               prediction: log-log interpolation between points, the first
//               point's time below it, and above the last the alpha-beta
//               model scaled to meet the last point.
//
// Lookup: the entry with the most non-`*` key fields that matches wins; on a
// tie the later line wins, so a file read after the built-in defaults
// overrides them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"
#include "common/status.h"
#include "transports/transport.h"
#include "src/tuner/cost_model.h"

namespace loom::tuner {

// Key fields; -1 / "" / 0 mean `*`.
struct TuningKey {
  int coll = -1;      // algo::CollType
  std::string algo;   // lower case
  int proto = -1;     // transport::Protocol
  int nranks = 0;
  int specificity() const { return (coll >= 0) + !algo.empty() + (proto >= 0) + (nranks > 0); }
  bool matches(algo::CollType c, const std::string& a, transport::Protocol p, int n) const;
};

struct TuningEntry {
  TuningKey key;
  double alphaMicros = 0;
  double bandwidthGBps = 0;
  double reduceGBps = 0;  // 0: not given
};

struct TuningPoint {
  TuningKey key;  // exact
  double bytes = 0;
  double micros = 0;
};

class TuningTable {
 public:
  // `source` names the text in errors ("tuning.txt:12: ...").
  static Result<TuningTable> parse(const std::string& text, const std::string& source);
  static Result<TuningTable> readFile(const std::string& path);
  // The defaults measured on the development machine (tuning_defaults.cc).
  static const TuningTable& builtin();

  // Adds `later`'s lines after this table's (they win ties).
  void append(const TuningTable& later);
  // Canonical text that parse() reads back to an identical table.
  std::string toText() const;
  bool empty() const { return entries_.empty() && points_.empty(); }

  // Alpha, beta and gamma for one key (zeros where nothing matches).
  CostParams params(algo::CollType coll, const std::string& algo, transport::Protocol proto, int nranks) const;
  // Measured (bytes, micros) for one exact key, sorted by bytes; empty if none.
  std::vector<std::pair<double, double>> points(algo::CollType coll, const std::string& algo,
                                                transport::Protocol proto, int nranks) const;

  const std::vector<TuningEntry>& entries() const { return entries_; }

 private:
  std::vector<TuningEntry> entries_;
  std::vector<TuningPoint> points_;
};

// Name <-> enum helpers shared with the filters (case-insensitive; `_` and
// `-` ignored in collective names). Return -1 for an unknown name.
int parseCollName(const std::string& name);
int parseProtoName(const std::string& name);
const char* collKeyName(algo::CollType type);  // "allreduce", ...
std::string lowerCase(std::string s);

// The text of the built-in defaults (tuning_defaults.cc).
extern const char* const kBuiltinTuningText;

}  // namespace loom::tuner
