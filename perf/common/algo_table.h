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

struct AlgoRowSummary {
  int best = -1;             // index of the fastest forced algorithm that ran; -1: none
  int autoIndex = -1;        // index of "auto"; -1: not listed
  double autoOverBest = -1;  // auto's time / best's; < 0 where either is missing
};
AlgoRowSummary summarizeAlgoRow(const std::vector<std::string>& names, const AlgoRow& row);

// Column titles, one data row per size (forced algorithms that did not run
// print "n/a"), then "#" lines: the worst auto/best, what each forced
// algorithm ran where it shows n/a, and what every communicator ran per size.
void printAlgoTable(FILE* out, const std::vector<std::string>& names, const std::vector<AlgoRow>& rows);

}  // namespace loom::perf
