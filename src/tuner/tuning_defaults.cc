// The built-in tuning table (format: tuning_table.h), set from perf/tune.sh
// runs on the development machine (2 cores, ranks as processes, shared
// memory; min over 3 repetitions of 8 B..64 MiB sweeps, 2026-11-22).
//
// Those runs were made while other jobs loaded the machine, so the values
// are the lower envelope of the measurements rounded to a few structural
// numbers rather than a per-algorithm fit: the crossovers they give matter
// more than absolute times. The all-reduce lines for 2 and 4 ranks come
// from interleaved runs instead (all_reduce_perf --algos, see
// perf/auto_vs_forced.sh: every algorithm and protocol timed in turn in the
// same processes, medians of 7-15 rounds), which compare algorithms far more
// reliably than separate runs on a busy machine. Resulting choices (float, 256 KiB chunks):
//   all-reduce 2 ranks: oneshot/LL <= 64 B, rd/Simple <= 1 KiB,
//                       oneshot/Simple <= 64 KiB, rd/Simple <= 256 KiB, then tree/Simple
//   all-reduce 4 ranks: oneshot/LL <= 256 B, oneshot/Simple <= 2 KiB, then
//                       window/Simple (all ranks on one host's shared memory);
//                       otherwise rd/Simple <= 64 KiB, hd/Simple at 128 KiB,
//                       ring/Simple <= 32 MiB, then tree/Simple
//   broadcast, reduce 2 ranks: chain/LL <= 512 B, then chain/Simple
//   broadcast, reduce 4 ranks: tree/LL <= 1 KiB, tree/Simple <= 8 KiB, then chain/Simple
// A LOOM_TUNING_FILE written by perf/tune.sh on a quiet machine overrides them.
#include "src/tuner/tuning_table.h"

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
# LL needs its reader running while the writer stores; with more ranks than
# cores it does not pay for the ring, tree or halving-doubling. Interleaved,
# 4 ranks, two runs (2026-11-23), LL/Simple per size 8 B-32 KiB: ring 0.9-1.1
# up to 512 B and 1.2-2.4 above; hd 0.8-1.5 and 1.9-3.8; tree 0.9-1.6 and
# 1.4-3.5. Hence no lower step cost than Simple's: Simple always wins for
# them. (One-shot's bulletin, below, is another matter.)
*  *  ll      *  15   0.3

# All-reduce, 2 ranks, from interleaved runs. Below 64 KiB buffers stay in
# the caches: a step costs ~0.8-1 us and the data moves at ~8-12 GB/s
# (rd/Simple 8 B..32 KiB: 0.93 us + 12 GB/s; rd/LL: 0.77 us + 1.3 GB/s, so
# LL only pays up to ~256 B: at 512 B rd/LL 1.22 us vs rd/Simple 1.01 us).
# One-step algorithms (rd, oneshot: 6.2 us at 32 KiB) beat two-step ones
# (tree 7.7, ring 8.0 us) until the reduction of the whole vector costs more
# than a step (tree wins at 128 KiB: 30 vs rd 41 us); oneshot, its sends
# overlapping, was as fast as rd or up to 15% faster in every run, hence its
# lower alpha. With 2 ranks the double binary tree moves and reduces the
# ring's bytes in fewer pipelined steps; it measured faster at 128-256 KiB
# and 8-64 MiB and within noise (+-15%, either way) at 512 KiB-4 MiB and
# 256 MiB, hence its lower alpha. Absolute times of large buffers are
# underestimated (only the choice matters here).
#
# A second machine (AMD EPYC VM, 32 MiB L3; 2026-11-23, each protocol forced,
# 11 interleaved rounds, two runs in opposite creation orders) moved the
# small end: LL pays only to 64 B (oneshot/LL 0.52-0.57 us at 8-64 B, but
# 0.69-0.71 at 256 B where rd/Simple took 0.58-0.59), and at 512 B-1 KiB
# rd/Simple beat oneshot/Simple by 5-15% (0.54 vs 0.58, 0.48 vs 0.55 us),
# level at 2 KiB, oneshot ahead from 8 KiB (32 KiB: 6.8 vs 7.3 us); rd/LL
# lost to rd/Simple from 128 B on (256 B: 0.70 vs 0.59 us). At the large
# end of one-shot's range, oneshot beat the tree at 64 KiB (10.6 vs 11.4,
# 11.7 vs 14.2 us), and above it, where one-shot does not apply, rd (one step
# for the whole vector) beat the tree's two at 128-256 KiB in four runs out of
# four (128 KiB 18.2 vs 19.6, 18.4 vs 21.5 us; 256 KiB 21.6 vs 26.3, 20.6 vs
# 24.6 us): hence rd and oneshot cheaper per byte than the tree here.
allreduce  *        simple  2  1.0   8     8
allreduce  tree     simple  2  0.9   8     8
allreduce  rd       simple  2  0.85  10    14
allreduce  oneshot  simple  2  0.9   12    16
allreduce  rd       ll      2  0.77  0.6

# One-shot over LL goes through the shared-memory bulletin (one post per
# rank instead of a send per peer; transports/shm/shm_bulletin.h) when every
# rank has one: interleaved, 2 ranks, against rd/LL 8 B 0.49 vs 0.56 us,
# 256 B 0.69 vs 0.79, 1 KiB 1.42 vs 1.69. Its bandwidth here is set low so
# that rd/Simple takes over above 64 B, as measured on the second machine.
allreduce  oneshot  ll      2  0.67  0.47
# With more ranks the bulletin is still one post and one read per peer, no
# lockstep hand-offs: it keeps LL's lower step cost.
allreduce  oneshot  ll      *  12   0.3

# All-reduce, 4 ranks on 2 cores: the double binary tree was 10-40% faster
# than the ring from 2 MiB on in 4 of 5 interleaved runs (16 MiB 26 vs 34 ms,
# 256 MiB 411 vs 569 ms; the fifth had the ring up to 15% ahead at 8-128 MiB,
# all on a loaded machine): it moves the same total bytes as the ring (a rank is
# interior in one tree only) in a third of the steps, and with more ranks than
# cores the total work, not one rank's link, bounds the time. Each of its
# steps, however, waits for all four ranks in lockstep (~120 us), so below
# a few MiB the ring wins (512 KiB: 1.7 vs 2.5 ms; on a quiet machine, with
# outputs from 8 MiB written non-temporally: 2 MiB 1.04-1.09 vs 1.30-1.34 ms
# in two interleaved runs, 8-32 MiB either one ahead by up to 20%, 128 MiB
# tree 89 vs 103 ms). On the second machine the ring led at 8 MiB in all six
# measurements of three interleaved runs (by 3-30%), at 32 MiB in four of six,
# and at 128 MiB the two traded places. Hence the crossover near 64 MiB: at
# 8-32 MiB the ring wins on one machine and ties on the other, and from
# 128 MiB the tree wins on one and ties on the other.
allreduce  tree     simple  4  120   1.18  8
# The tree's step cost above comes from large buffers; it must not make LL
# (8 KiB chunks, so more steps) look cheaper for a forced tree at 4 ranks:
# tree/LL took 2-7x tree/Simple's time at 8-256 KiB (64 KiB 172 vs 63 us,
# 177 vs 31 us).
allreduce  tree     ll      4  120   0.3

# Recursive doubling at 4 ranks, 2 steps against one-shot's 1, but 2 vector
# copies on the wire against 3: on the second machine rd/Simple beat
# oneshot/Simple at 8 KiB in three interleaved runs (9.3-11.8 vs 10.3-13.0
# us) while one-shot kept 2 KiB (6.0 vs 7.1 us): a lower step cost for rd
# puts the crossover near 3 KiB and leaves rd's upper end (64 KiB) in place.
allreduce  rd  simple  4  9.6  0.8

# The windowed all-reduce (algorithms/window_allreduce.h) ends two phases
# per round of 1 MiB, each waiting for all peers at once, where the ring
# makes 2(n-1) hand-offs per chunk. Interleaved, 4 ranks on 2 cores (medians
# of 5-7 rounds, 2026-11-27), window against the best other: 4 KiB 20.1 vs
# oneshot 18.0 us, 16 KiB 21.8 vs oneshot 25.3, 64 KiB 38.8 vs oneshot 69.3
# (ring 93), 256 KiB 140 vs hd 169, 1 MiB 700 vs ring 915, 4 MiB 2667 vs
# ring/tree 3480; 16-64 MiB within 6% of the ring. So a phase end costs
# about 10 us here, and the bytes move at the ring's pace. At 2 ranks it
# was never clearly ahead (1 MiB 243 vs tree 224 us, 64 MiB 20.0 vs 18.0
# ms): a lower bandwidth there leaves it to the online tuner where close.
# On the same kind of VM another day (`all_reduce_perf --algos` at 4 ranks,
# three runs) the ring led at 1 MiB in all three (314 vs window 463, 282 vs
# 420, 514 vs 548 us) and the window at 256 KiB by a few percent: the two
# swap with the machine's state, so from 1 MiB the online tuner times the
# four best predictions (at 4 ranks window, direct, ring and one more).
allreduce  window  simple  *  10   0.8  8
allreduce  window  simple  2  1.0  7.5  8

# The direct all-reduce (algorithms/direct_allreduce.h) copies between the
# ranks' buffers once instead of through windows, but each copy is a system
# call that pins the peer's pages. At 4 ranks on 2 cores it was level with
# the windowed all-reduce (1 MiB 630-800 vs 690 us): the same parameters, so
# the online tuner times both. At 2 ranks it once measured fastest from
# 16 KiB to 4 MiB (forced, 40 calls per size, 2026-11-27), but those short
# runs fell in the first milliseconds after init, when both ranks often
# shared one core (docs/performance.md): the ring and the tree, which need
# both ranks running, paid for it and the kernel's copies did not. With the
# ranks started apart (2026-11-28, all_reduce_perf --algos, 7 interleaved
# rounds, two runs) direct took 1.4-2x the tree's time at 64 KiB-1 MiB
# (1 MiB 184 vs 95-98 us, 213 vs 149), and at 4-64 MiB it led in one run
# (4 MiB 1370 vs 1567, 16 MiB 4832 vs 5688) and trailed in the other (4 MiB
# 1148 vs 832, 16 MiB 5101 vs 3496). This VM also has a slow mode, lasting
# from a fraction of a second to minutes, in which the tree and the ring at
# 1 MiB take 240-450 us and direct, whose kernel copies do not hand cache
# lines back and forth, 170-210 (docs/performance.md). So at 2 ranks its
# bytes are priced at 7.7 GB/s: never the model's pick, yet close enough
# behind the tree, the ring and halving-doubling to be the fourth candidate
# the online tuner times at 1-4 MiB. These lines price copies between
# processes; between threads of one process they are memcpy, which the
# cost function prices lower (cost_formulas.cc).
allreduce  direct  simple  *  10   0.8  8
allreduce  direct  simple  2  1.5  7.7  8

# Halving-doubling changes partner every step; at 4 ranks its large-buffer
# times were 2-10x the ring's (1 MiB: 13.8 ms vs 1.6 ms). At 128 KiB,
# though, the ring's 6 lockstep steps cost more than hd's 4: on the second
# machine the ring was 1.5-1.9x the best there in 4 of 6 interleaved runs,
# where hd was best in 3 (41.9, 39.5, 53.3 us against the ring's 70.6, 66.5,
# 80.1) and within 7-22% of the best in the others; from 256 KiB the ring
# (or the tree) was ahead again. These values make hd the choice at 128 KiB
# only (96-192 KiB), between rd's range and the ring's.
allreduce  hd  simple  4  16.8  0.748
# hd's LL likewise: no cheaper step than its Simple (measured LL/Simple 0.8-1.5
# up to 512 B, 1.9-3.8 above).
allreduce  hd  ll      4  16.8  0.3
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
