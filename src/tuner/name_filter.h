// LOOM_ALGO / LOOM_PROTO: which algorithms or protocols the tuner may pick,
// in NCCL_ALGO's syntax plus an optional per-collective form:
//
//   ring,tree                  only these
//   ^ring,tree                 all but these
//   allreduce:tree,ring;broadcast:^tree
//                              per collective; a segment without "coll:"
//                              applies to every collective without its own
//
// A list without "coll:" that names no algorithm of some collective leaves
// that collective unfiltered: LOOM_ALGO=ring means ring where there is one
// (all-reduce, reduce-scatter, all-gather), not "no broadcast algorithm".
//
// Names are case-insensitive. Unknown names (and collectives) are reported as
// warnings and ignored; a list left empty by that filters nothing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"

namespace loom::tuner {

class NameFilter {
 public:
  // Whether `name` (lower case) means something for collective `coll`
  // (-1: for some collective; used by segments without "coll:").
  using KnownFn = std::function<bool(int coll, const std::string& name)>;

  NameFilter() = default;
  // `knob` ("LOOM_ALGO") and `what` ("algorithm") word the warnings.
  static NameFilter parse(const std::string& spec, const char* knob, const char* what, const KnownFn& known,
                          std::vector<std::string>* warnings);

  // `name` in lower case.
  bool allows(algo::CollType coll, const std::string& name) const;
  // Whether the filter lists `name` explicitly as allowed for `coll` (an
  // include list naming it), as opposed to allowing everything.
  bool names(algo::CollType coll, const std::string& name) const;

 private:
  struct Rule {
    bool set = false;
    bool exclude = false;
    std::vector<std::string> names;
  };
  const Rule& ruleFor(algo::CollType coll) const;
  Rule perColl_[algo::kNumCollTypes];
  Rule all_;
  // Whether all_ names something that collective has (else it is unfiltered).
  bool allCovers_[algo::kNumCollTypes] = {};
};

}  // namespace loom::tuner
