// The communicator's side of algorithm selection: the tuner options every
// rank of a communicator agrees on.
//
// Each rank reads LOOM_ALGO, LOOM_PROTO, LOOM_DETERMINISTIC and the tuning
// file (built-in defaults, then LOOM_TUNING_FILE) itself; ranks then compare
// a hash of those through one bootstrap allGather and, if any differs, take
// rank 0's (a second allGather), warning on the ranks that differed. Choosing
// the algorithm is then a pure function of the agreed options and the call's
// arguments, so every rank picks the same one (a mismatch would deadlock).
#pragma once

#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "common/log.h"
#include "src/device/device_engine.h"
#include "src/tuner/tuner.h"

namespace loom {

// This rank's tuner options; a tuning file that cannot be read or parsed is
// reported in `warnings` (naming file and line) and the defaults are used.
tuner::TunerOptions localTunerOptions(const Config& config, std::vector<std::string>* warnings);

// The options of rank 0, collectively over the bootstrap.
Result<tuner::TunerOptions> agreeOnTunerOptions(const tuner::TunerOptions& local, bootstrap::Bootstrap& boot,
                                                const WaitContext& wait, const Logger& log);

// The device engine's share of LOOM_ALGO and LOOM_PROTO: its ring and tree
// and its Simple and LL protocols, per collective, as the agreed filters allow.
cuda::EngineChoiceRules engineChoiceRules(const tuner::Tuner& tuner);

// The serialized form exchanged (exposed for tests): parse(serialize(x)) == x.
std::string serializeTunerOptions(const tuner::TunerOptions& options);
Result<tuner::TunerOptions> parseTunerOptions(const std::string& text);

}  // namespace loom
