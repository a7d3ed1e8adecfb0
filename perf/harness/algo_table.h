// The table of the --algos comparison (algo_compare.h): per size, each
// forced algorithm's median time, Loom's own choice (auto) with what it ran,
// the fastest forced algorithm and auto/best. Pure formatting, so that tests
// can feed it made-up measurements.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace loom::perf {

// One communicator's result at one size.
struct AlgoCell {
  double medianUs = -1;  // median over the rounds; < 0: not measured
  std::string ran;       // loomCommGetLastAlgorithm after its timed calls, "ring/Simple";
                         // "a|b" when rounds ran different ones
  std::vector<double> roundsUs{};  // the time of each round (round r at [r]; < 0: not timed); may be empty
};

struct AlgoRow {
  size_t bytes = 0;
  std::vector<AlgoCell> cells;  // in the order of the names
};

// Whether a communicator created with LOOM_ALGO=name ran that algorithm in
// every round (Loom falls back to another where the forced one does not
// apply, e.g. oneshot above its size limit). A name "algo/proto" must match
// the protocol too (case-insensitive: "ring/ll" ran "ring/LL"). "auto"
// always counts as ran.
bool ranForced(const std::string& name, const std::string& ran);

// Round-paired ratio: the rounds of one size interleave every communicator,
// so auto's time in round r and a forced algorithm's time in the same round
// saw the same state of the machine (which on an oversubscribed machine
// drifts by 2-3x over seconds). The median over rounds of auto_r / forced_r
// cancels that drift, which the ratio of two medians does not. "paired" is
// the largest such median over the forced algorithms that ran: auto against
// the one it loses to most, that is, the best one when the noise is small.
struct AlgoRowSummary {
  int best = -1;                   // index of the fastest forced algorithm that ran; -1: none
  int autoIndex = -1;              // index of "auto"; -1: not listed
  double autoOverBest = -1;        // auto's time / best's; < 0 where either is missing
  int pairedAgainst = -1;          // the forced algorithm of pairedAutoOverBest; -1: no paired rounds
  double pairedAutoOverBest = -1;  // max over forced X of median_r(auto_r / X_r); < 0 where not measured
};
AlgoRowSummary summarizeAlgoRow(const std::vector<std::string>& names, const AlgoRow& row);

// Median over the rounds both timed of a_r / b_r; < 0 when none did.
double pairedMedianRatio(const std::vector<double>& a, const std::vector<double>& b);

// Column titles, one data row per size (forced algorithms that did not run
// print "n/a"; "paired" last, "-" without per-round times), then "#" lines:
// the worst auto/best and paired ratios, what each forced
// algorithm ran where it shows n/a, and what every communicator ran per size.
void printAlgoTable(FILE* out, const std::vector<std::string>& names, const std::vector<AlgoRow>& rows);

}  // namespace loom::perf
