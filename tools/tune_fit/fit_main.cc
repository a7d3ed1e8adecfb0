// loom_tune_fit: turns measured times into a tuning file (perf/tune.sh).
//
//   loom_tune_fit [--points] [--chunk BYTES] [--ll-chunk BYTES] < measurements > tuning.txt
//   loom_tune_fit --help | --version
//
// Input lines: <collective> <algorithm> <protocol> <nranks> <bytes> <time_us>
// ('#' comments; repeated (key, bytes) rows keep the fastest, since on a busy
// machine interference only ever adds time). For each (collective, algorithm,
// protocol, nranks) it fits alpha and bandwidth of the cost model
// (cost_model.h) by least squares on relative error, and with --points also
// writes the measured minima as `point` lines (which then take precedence
// over the fit inside the measured range).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/registry.h"
#include "src/tuner/cost_model.h"
#include "src/tuner/tuning_table.h"

namespace {

using loom::tuner::CostParams;
using Shape = loom::algo::CostShape;

struct Key {
  std::string coll, algo, proto;
  int nranks;
  bool operator<(const Key& o) const {
    return std::tie(coll, algo, proto, nranks) < std::tie(o.coll, o.algo, o.proto, o.nranks);
  }
};

// The registry's record of `algo` (lower case) for `type`, or null.
const loom::algo::AlgorithmInfo* recordOf(loom::algo::CollType type, const std::string& algo) {
  for (const auto& a : loom::algo::allAlgorithms())
    if (a.type == type && loom::tuner::lowerCase(a.name) == algo) return &a;
  return nullptr;
}

// A time this far above that of a larger size counts as interference.
constexpr double kOutlierFactor = 1.25;

struct Fit {
  double alpha, beta;
};

// Minimizes sum(((a*s + b*w) - y) / t)^2 with a, b >= 0.
Fit fitAlphaBeta(const std::vector<Shape>& shapes, const std::vector<double>& y, const std::vector<double>& t) {
  double ss = 0, sw = 0, ww = 0, sy = 0, wy = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double k = 1.0 / (t[i] * t[i]);
    ss += k * shapes[i].steps * shapes[i].steps;
    sw += k * shapes[i].steps * shapes[i].wireBytes;
    ww += k * shapes[i].wireBytes * shapes[i].wireBytes;
    sy += k * shapes[i].steps * y[i];
    wy += k * shapes[i].wireBytes * y[i];
  }
  const double det = ss * ww - sw * sw;
  Fit f{0, 0};
  if (std::fabs(det) > 1e-30 * ss * ww) f = {(sy * ww - wy * sw) / det, (ss * wy - sw * sy) / det};
  if (f.alpha < 0 || !std::isfinite(f.alpha)) f = {0, ww > 0 ? wy / ww : 0};
  if (f.beta <= 0 || !std::isfinite(f.beta)) f = {ss > 0 ? std::max(0.0, sy / ss) : 0, 1e-9};
  return f;
}

constexpr const char* kUsage = "usage: loom_tune_fit [--points] [--chunk BYTES] [--ll-chunk BYTES] < measurements\n";

int usage(const char* why) {
  std::fprintf(stderr, "loom_tune_fit: %s\n%s", why, kUsage);
  return 2;
}

int help() {
  std::printf("%s", kUsage);
  std::printf(
      "\n"
      "Reads measured times and writes a tuning file for LOOM_TUNING_FILE (perf/tune.sh runs it).\n"
      "Input lines: <collective> <algorithm> <protocol> <nranks> <bytes> <time_us> ('#' starts a\n"
      "comment; repeated rows keep the fastest). For each (collective, algorithm, protocol, nranks)\n"
      "it fits the cost model's latency and bandwidth by least squares on relative error.\n"
      "\n"
      "  --points          also write the measured minima as 'point' lines, which take precedence\n"
      "                    over the fit inside the measured range\n"
      "  --chunk BYTES     the Simple protocol's chunk size in the cost model (default 262144)\n"
      "  --ll-chunk BYTES  the LL protocol's chunk size (default 8192)\n"
      "  -h, --help        this text\n"
      "  --version         print the version\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool points = false;
  double chunk = 256 * 1024, llChunk = 8 * 1024;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) return help();
    if (!std::strcmp(argv[i], "--version")) {
      std::printf("loom_tune_fit (Loom) %s\n", LOOM_TOOL_VERSION);
      return 0;
    }
    if (!std::strcmp(argv[i], "--points")) points = true;
    else if (!std::strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--ll-chunk") && i + 1 < argc) llChunk = std::atof(argv[++i]);
    else return usage((std::string("bad argument ") + argv[i]).c_str());
  }
  if (chunk <= 0 || llChunk <= 0) return usage("chunk sizes must be positive");

  std::map<Key, std::map<double, double>> best;  // key -> bytes -> fastest time
  std::string line;
  for (int lineNo = 1; std::getline(std::cin, line); ++lineNo) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream in(line);
    Key k;
    double bytes = 0, us = 0;
    if (!(in >> k.coll)) continue;
    if (!(in >> k.algo >> k.proto >> k.nranks >> bytes >> us) || us <= 0 || bytes < 0 || k.nranks < 1 ||
        loom::tuner::parseCollName(k.coll) < 0 || loom::tuner::parseProtoName(k.proto) < 0) {
      std::fprintf(stderr, "loom_tune_fit: stdin:%d: expected '<collective> <algorithm> <protocol> <nranks> <bytes> <time_us>'\n",
                   lineNo);
      return 1;
    }
    k.coll = loom::tuner::collKeyName(static_cast<loom::algo::CollType>(loom::tuner::parseCollName(k.coll)));
    k.algo = loom::tuner::lowerCase(k.algo);
    if (!recordOf(static_cast<loom::algo::CollType>(loom::tuner::parseCollName(k.coll)), k.algo)) {
      std::fprintf(stderr, "loom_tune_fit: stdin:%d: no algorithm '%s' for %s in the registry (no cost shape to fit)\n",
                   lineNo, k.algo.c_str(), k.coll.c_str());
      return 1;
    }
    k.proto = loom::tuner::lowerCase(k.proto);
    auto [it, fresh] = best[k].emplace(bytes, us);
    if (!fresh) it->second = std::min(it->second, us);
  }

  const auto& defaults = loom::tuner::TuningTable::builtin();
  std::printf("# Loom tuning file written by loom_tune_fit (perf/tune.sh); format: src/tuner/tuning_table.h\n");
  std::printf("# collective algorithm protocol nranks alpha_us bandwidth_GBps   # fit: worst relative error\n");
  std::string pointLines;
  for (const auto& [k, rows] : best) {
    const auto type = static_cast<loom::algo::CollType>(loom::tuner::parseCollName(k.coll));
    const auto proto = static_cast<loom::transport::Protocol>(loom::tuner::parseProtoName(k.proto));
    const double c = proto == loom::transport::Protocol::kLL ? llChunk : chunk;
    const loom::algo::AlgorithmInfo& record = *recordOf(type, k.algo);
    // Reduction cost as the defaults have it; alpha and beta absorb the rest.
    const CostParams base = defaults.params(type, k.algo, proto, k.nranks);
    std::vector<Shape> shapes;
    std::vector<double> y, t;
    for (const auto& [bytes, us] : rows) {
      shapes.push_back(loom::tuner::oneHostShape(record, k.nranks, bytes, c));
      y.push_back(std::max(0.0, us - shapes.back().reducedBytes * base.gammaMicrosPerByte));
      t.push_back(us);
    }
    // Interference (other processes, a descheduled peer) only adds time,
    // and a call never gets cheaper with size: a time well above that of
    // some larger size is interference, left out of the fit.
    std::vector<bool> used(t.size(), true);
    double laterMin = 1e300;
    for (size_t i = t.size(); i-- > 0;) {
      used[i] = t[i] <= kOutlierFactor * laterMin;
      laterMin = std::min(laterMin, t[i]);
    }
    std::vector<Shape> s2;
    std::vector<double> y2, t2;
    for (size_t i = 0; i < t.size(); ++i)
      if (used[i]) s2.push_back(shapes[i]), y2.push_back(y[i]), t2.push_back(t[i]);
    const Fit f = fitAlphaBeta(s2, y2, t2);
    const CostParams fitted{f.alpha, f.beta, base.gammaMicrosPerByte};
    double worst = 0;
    size_t outliers = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (!used[i]) {
        ++outliers;
        continue;
      }
      worst = std::max(worst, std::fabs(loom::tuner::predictMicros(shapes[i], fitted) - t[i]) / t[i]);
    }
    std::printf("%s %s %s %d %.4g %.4g   # %zu sizes (%zu above the envelope left out), worst error %.0f%%\n",
                k.coll.c_str(), k.algo.c_str(), k.proto.c_str(), k.nranks, f.alpha, 1e-3 / f.beta, rows.size(),
                outliers, 100 * worst);
    if (points)
      for (const auto& [bytes, us] : rows)
        pointLines += "point " + k.coll + " " + k.algo + " " + k.proto + " " + std::to_string(k.nranks) + " " +
                      std::to_string(static_cast<long long>(bytes)) + " " + std::to_string(us) + "\n";
  }
  std::fputs(pointLines.c_str(), stdout);
  return 0;
}
