// The host's monotonic clock as nanoseconds, comparable across the processes
// of one host (CLOCK_MONOTONIC, the clock of std::chrono::steady_clock).
#pragma once

#include <cstdint>

namespace loom {

int64_t monotonicNanos();
// The same clock read at tick resolution (CLOCK_MONOTONIC_COARSE: 1-4 ms
// behind, ~8 ns instead of ~26 here): enough for always-on timestamps such
// as the flight recorder's, and for deadlines of a second or more.
int64_t coarseMonotonicNanos();
// The coarse clock's tick in nanoseconds (how far it may lag), -1 if unknown.
int64_t coarseTickNanos();

}  // namespace loom
