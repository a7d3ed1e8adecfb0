// Splits DDP's exposed communication time (CommStats::exposedSeconds) into
// the part that waits for a slower rank's backward and the rest.
//
// Why: a rank that ends backward first waits in finishGradientSync until the
// last rank has produced and reduced its last bucket. That wait is counted as
// exposed communication, yet it is load imbalance: no bucket plan can hide
// it. At 2 ranks on 2 busy cores the same backward took 695-848 ms of CPU
// from step to step, and the rank ahead then waited up to 170 ms, against
// 0-10 ms on the rank that ended backward last.
//
// How: in each step the rank with the least exposed time is taken as the one
// that ended backward last; what every rank has exposed beyond that least is
// waiting for it. The least itself is communication that nothing overlapped.
#pragma once

#include <cstddef>
#include <span>

namespace loom::ddp {

struct ExposureSplit {
  double exposedSeconds = 0;       // summed over ranks and steps
  double waitingSeconds = 0;       // of it, waiting for a slower rank's backward
  double lastRankExposedSeconds = 0;  // summed over steps: exposed on the rank that ended backward last
};

// exposed[r * steps + s]: rank r's exposed seconds in step s (every rank ran
// the same steps). Throws std::invalid_argument unless exposed.size() ==
// ranks * steps, with ranks >= 1.
ExposureSplit splitExposure(std::span<const double> exposed, size_t ranks, size_t steps);

}  // namespace loom::ddp
