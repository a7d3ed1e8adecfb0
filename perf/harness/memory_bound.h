// The memory-traffic bound of a collective on one host.
//
// On one host every byte a collective moves goes through host memory, so the
// machine's streaming bandwidth bounds how fast it can run. The tools measure
// that bandwidth in the same run (all ranks copying a large buffer at once, as
// the ranks of a collective share the memory system) and report, per size,
// which share of the bound a call achieved:
//
//   bound time = traffic factor x size / stream bandwidth
//   share      = bound time / measured time
//
// The traffic factor is what a one-copy implementation must move (reads plus
// writes, summed over ranks) per byte of the size column. All-reduce: every
// rank's input is read once (n x S), every rank's output written once (n x S),
// and each reduced slice is read by the n-1 other ranks ((n-1) x S): 3n-1.
#pragma once

#include <cstddef>

#include "perf/harness/collective.h"

namespace loom::perf {

// Below this the call's time is latency, not traffic; no share is reported.
constexpr size_t kMemoryBoundMinBytes = size_t{1} << 20;

struct StreamBandwidth {
  double bytesPerSecond = 0;  // aggregate over ranks: (bytes read + written) / time
  size_t bufferBytes = 0;     // copied by each rank, per copy
  int copies = 0;             // timed copies per rank in one trial
  int trials = 0;             // the best trial counts
};

// The copy size that keeps the buffers of all ranks within 1 GiB: 64 MiB up
// to 8 ranks, less for more, never below 16 MiB (still past any cache).
size_t streamBufferBytes(int nranks);

// Collective over the executor's ranks: each rank copies `bufferBytes`
// `copies` times between two buffers of its own, all ranks at the same time
// (a barrier before); a trial lasts as long as its slowest rank. The result is
// the best of `trials`. Every rank returns the same value.
StreamBandwidth measureStreamBandwidth(RankExecutor& executor, size_t bufferBytes, int copies = 4, int trials = 3);

// bound time / measured time for `bytes` (the size column) taking `seconds`;
// negative when it does not apply (below kMemoryBoundMinBytes, or no
// bandwidth or time to divide by).
double memoryBoundShare(double trafficFactor, size_t bytes, double seconds, double streamBytesPerSecond);

// The one-copy all-reduce traffic: 3n-1 bytes per byte of the buffer (for a
// single rank, 2: the copy of the input to the output).
double allReduceMemTrafficFactor(int nranks);

}  // namespace loom::perf
