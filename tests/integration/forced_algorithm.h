// What LOOM_ALGO / LOOM_PROTO / LOOM_DETERMINISTIC force, seen from the test:
// which algorithm and protocol loomCommGetLastAlgorithm must report after
// each matrix call, so that an entry that forces an algorithm cannot quietly
// test another one (the library falls back when the forced algorithm cannot
// run a call).
//
// The test states each algorithm's limits itself (forced_algorithm.cc),
// from their documentation, and checks both directions: where the forced
// algorithm can run a call it must have run it, with the forced protocol;
// where it cannot, the library must not claim it did. A library change that
// moves a limit therefore fails here until the statement is updated.
//
// Only a single algorithm name (or none) is understood in LOOM_ALGO; the
// per-collective and exclusion forms are for interactive use of the library,
// and collectives_test refuses them rather than checking nothing.
#pragma once

#include <cstddef>
#include <string>

#include "tests/integration/collective_case.h"

namespace loom::integration {

class ForcedAlgorithm {
 public:
  // From LOOM_ALGO, LOOM_PROTO and LOOM_DETERMINISTIC; `chunkBytes` is the
  // Simple protocol's chunk (LOOM_CHUNK_SIZE). False with *error for a value
  // the test cannot model.
  bool parseEnvironment(size_t chunkBytes, std::string* error);

  bool active() const { return !algo_.empty() || !proto_.empty() || deterministic_; }
  // "ring/LL", "ring" (any protocol), "/LL" (any algorithm): for messages.
  std::string describe() const;

  // Whether the forced choice governs this call: then the call must report
  // exactly expected(); otherwise it must report anything but the forced
  // algorithm with the forced protocol.
  bool governs(const CaseSpec& spec) const;
  // Whether the forced algorithm is a candidate for this collective at all
  // (an entry forcing it should run only collectives it serves).
  bool serves(Coll coll) const;

  // EXPECTs that `reported` (loomCommGetLastAlgorithm after `spec`) agrees
  // with the forced choice; returns whether it did.
  bool check(const CaseSpec& spec, const std::string& reported) const;

 private:
  // The algorithm that must run `spec`: deterministic for floating-point
  // reductions under LOOM_DETERMINISTIC=1, else the forced one.
  std::string algorithmFor(const CaseSpec& spec) const;
  bool canRun(const std::string& algo, const CaseSpec& spec) const;
  size_t chunkBytesOfProto() const;

  std::string algo_;   // lower case; empty: the library chooses
  std::string proto_;  // "Simple" or "LL" as the library reports it; empty: any
  bool deterministic_ = false;
  size_t chunkBytes_ = 256 * 1024;
};

// The process's forced choice, parsed by parseTestOptions.
ForcedAlgorithm& forcedAlgorithm();

}  // namespace loom::integration
