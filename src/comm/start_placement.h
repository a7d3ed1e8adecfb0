// Where the thread that creates a rank's first communicator runs next: a
// core of its own when no launcher bound the rank.
//
// Ranks that come out of init's socket exchanges together are often woken
// onto one core. Two ranks that hand small messages back and forth on one
// core pay a context switch per hand-off (2 ranks, 8 B all-reduce: 10-16 us a
// call instead of 0.4) until the scheduler moves one away, which took up to
// 12 ms on the 2-core development VM. Moving the thread once, to the core
// loomrun --bind core would give it, and then handing back its whole affinity
// mask, starts the ranks apart and leaves the scheduler free to move them.
#pragma once

#include <string>

namespace loom {

// Moves the calling thread to the CPUs topology::startingCpus gives local
// rank `localIndex` of `localRanks` within its affinity mask, then restores
// that mask. Only the first call of a process with two or more local ranks
// acts, and never when the mask has fewer cores than ranks (a bound rank, or
// ranks that must share cores). Returns what it did for the log; "" when it
// did nothing.
std::string startOnOwnCore(int localIndex, int localRanks);

}  // namespace loom
