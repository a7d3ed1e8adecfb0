// The built-in tuning table (format: tuning_table.h), set from perf/tune.sh
// runs on the development machine (2 cores, ranks as processes, shared
// memory; min over 3 repetitions of 8 B..64 MiB sweeps, 2026-11-22).
//
// Those runs were made while other jobs loaded the machine, so the values
// are the lower envelope of the measurements rounded to a few structural
// numbers rather than a per-algorithm fit: the crossovers they give matter
// more than absolute times. Resulting choices (float, 256 KiB chunks):
//   all-reduce 2 ranks: rd/LL <= 512 B, rd/Simple <= 16 KiB, then ring/Simple
//   all-reduce 4 ranks: oneshot/LL <= 256 B, oneshot/Simple <= 8 KiB,
//                       rd/Simple <= 64 KiB, then ring/Simple
//   broadcast, reduce 2 ranks: chain/LL <= 512 B, then chain/Simple
//   broadcast, reduce 4 ranks: tree/LL <= 1 KiB, tree/Simple <= 8 KiB, then chain/Simple
// A LOOM_TUNING_FILE written by perf/tune.sh on a quiet machine overrides them.
#include "tuner/tuning_table.h"

namespace loom::tuner {

const char* const kBuiltinTuningText = R"(
# collective algorithm protocol nranks alpha_us bandwidth_GBps [reduce_GBps]

# Two ranks, one per core: a step (chunk hop) costs ~2 us with Simple and
# ~1.5 us with LL (measured 8-128 B: rd 2.0 vs 1.7-1.9 us); large buffers
# move at ~2.4 GB/s (64 MiB ring all-reduce: 32 ms) and reduce at ~8 GB/s;
# LL carries half payload per line and its slots hold only 8 KiB, ~0.8 GB/s
# (rd 8 KiB: 12.9 us), so it only pays below ~1 KiB.
*  *  simple  2  2.0  2.4  8
*  *  ll      2  1.5  0.8

# More ranks than the 2 cores: a step waits for a descheduled peer to run
# (~15 us, measured 35-50 us minimum per small all-reduce at 4 ranks), and
# bandwidth splits among the ranks (64 MiB ring all-reduce: 135 ms).
*  *  simple  *  15   0.8  8
*  *  ll      *  12   0.3

# Halving-doubling changes partner every step; at 4 ranks its large-buffer
# times were 2-10x the ring's (1 MiB: 13.8 ms vs 1.6 ms).
allreduce  hd  simple  4  15  0.6
allreduce  hd  simple  8  15  0.6

# Links between hosts ("network" is not an algorithm: multi_host_cost.h uses
# these for every step and byte that crosses hosts when the ranks span two or
# more). Measured between emulated hosts (LOOM_HOST_ID) over TCP on loopback,
# 2 ranks: ~160 us per small all-reduce step, 0.3-0.5 GB/s at 2-32 MiB. A
# real network is faster; a tuning file sets its own with the same lines.
*  network  simple  *  100  0.5
*  network  ll      *  100  0.3
)";

}  // namespace loom::tuner
