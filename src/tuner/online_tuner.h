// Online tuning: the cost model proposes, measurement decides.
//
// Why: where two algorithms are close, which one is faster depends on the
// state of the machine, not only on the call. With more ranks than cores
// (4 ranks on 2 cores here) the fastest all-reduce at 8-32 KiB was rd in one
// run and one-shot, by 15-20%, in the next; ring and tree trade places at
// 8-128 MiB. A static table cannot be within a few percent of the best there.
//
// How: for a call the communicator repeats (same collective, count, type, op
// and root: every rank sees the same sequence of them), the model's shortlist
// (the candidates predicted within a margin of its pick, at most a few) runs
// in turns, each turn a run of consecutive calls timed as a whole (at 4 ranks
// on 2 cores one call may wait milliseconds for a descheduled peer: a run
// averages that in as a loop of calls does; its first call, which waits out
// the previous candidate's skew, does not count): one untimed warm-up round, then
// `trials` timed rounds in alternating order. Each rank then holds its median
// run time per candidate; one
// all-reduce (sum, int64 nanoseconds: exact, so every rank computes the same
// winner) adds up the ranks' times; the winner, which every later call runs,
// is the fastest over this and, at half weight each time back, the earlier
// explorations, each also weighed by 1 / its fastest time (the least
// disturbed counts most). After a period the
// slot explores again (the machine may have changed). The period is counted
// in calls, so that every rank re-explores at the same call, but sized from
// the winner's summed time (the same on every rank) to about 0.1 s of calls;
// it doubles while the winner stays, up to 64x (6.4 s), and resets when the
// winner changes. At 8 B (0.2 us a call) a fixed count of a few thousand
// calls re-explored every millisecond: ~1-2% of a latency benchmark. A short
// first period bounds how long a decision made in a passing state of the
// machine lasts (at 4 ranks on 2 cores one exploration chose hd at 512 KiB
// where the ring was 1.36x faster for the rest of the run).
//
// Pure logic, no communication: the communicator runs the agreement.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "algorithms/algorithm.h"
#include "src/tuner/tuner.h"

namespace loom::tuner {

class OnlineSlot {
 public:
  // How long a winner runs before the next exploration.
  struct Periods {
    int64_t recheckNanos = 100'000'000;  // the winner's time per period, at first
    uint64_t minCalls = 256;
    uint64_t maxCalls = uint64_t{1} << 26;
    int maxDoublings = 6;  // while the same winner keeps winning
    // A period is at least this many times the exploration's own calls, so
    // that exploring costs at most a few percent of the calls even where
    // recheckNanos holds few of them (4 ranks on 2 cores, 1 MiB: three
    // candidates, 36 calls of ~0.3-0.9 ms, against ~350 calls of the winner
    // in 0.1 s, which spent a sixth of the first period exploring).
    uint64_t explorationMultiple = 20;
  };

  // candidates[0] is the model's pick; `trials` timed rounds (>= 1) of
  // `callsPerTurn` consecutive calls per candidate.
  OnlineSlot(std::vector<Choice> candidates, int trials, int callsPerTurn, Periods periods);

  // Settled: the winner runs, and countSettledCall() counts the call.
  bool settled() const { return phase_ == Phase::kSettled; }
  const Choice& winner() const { return candidates_[static_cast<size_t>(winner_)]; }
  void countSettledCall();

  // Exploring: before the call, an agreement may be due (all ranks at the
  // same call); else the call runs candidate(current()) and reports its time
  // (nanoseconds; ignored in the warm-up round) through finishTrial().
  bool agreementDue() const;
  size_t current() const;
  bool timed() const { return step_ >= candidates_.size() * perTurn_; }
  void finishTrial(int64_t nanos);
  // This rank's median turn time per candidate, to be summed over ranks.
  std::vector<int64_t> summary() const;
  // Sets the winner from the summaries summed over `nranks` ranks, weighed
  // with the earlier explorations' (halved at each one, each exploration
  // also weighed by 1 / its fastest time): the fastest, unless
  // the incumbent, the model's pick at first, is within kMinGainPercent of
  // it; ties go to the earlier candidate. Sizes the period from it and
  // settles.
  static constexpr int64_t kMinGainPercent = 4;
  void decide(const std::vector<int64_t>& summed, int nranks);

  const std::vector<Choice>& candidates() const { return candidates_; }
  // The weighed evidence after the last decision, per candidate, relative to
  // the best's (1.0; all 0 before the first decision).
  std::vector<double> evidence() const;
  uint64_t period() const { return period_; }
  int decisions() const { return decisions_; }

 private:
  enum class Phase { kExploring, kSettled };
  std::vector<Choice> candidates_;
  size_t rounds_;                            // warm-up + timed rounds
  size_t perTurn_;                           // consecutive calls of one candidate
  std::vector<std::vector<int64_t>> times_;  // per candidate, this exploration's timed turns
  int64_t turnNanos_ = 0;                    // the current turn's calls so far
  // Per candidate: the sum over explorations of (its time / the fastest's)
  // / the fastest's time in ns, x 2^80, each earlier exploration halved once
  // per later one. 128 bits: ratios up to kMaxRatio, times from 1 ns.
  __extension__ typedef unsigned __int128 Wide;
  static constexpr int64_t kMaxRatio = int64_t{1} << 20;
  std::vector<Wide> evidence_;
  Phase phase_ = Phase::kExploring;
  size_t step_ = 0;  // calls of this exploration so far
  int winner_ = 0;
  uint64_t left_ = 0;  // settled calls before the next exploration
  Periods periods_;
  uint64_t period_ = 0;
  int doublings_ = 0;
  int decisions_ = 0;
};

// The key of a repeated call: what every rank passes alike (not the buffers:
// one rank may run in place and another not).
struct OnlineKey {
  algo::CollType type;
  size_t count;
  DataType dtype;
  RedOp op;
  int root;
  bool operator==(const OnlineKey&) const = default;
};

class OnlineTuner {
 public:
  // Distinct calls tuned per communicator; later ones keep the model's choice.
  static constexpr size_t kMaxSlots = 64;

  // The slot of `key`, created from the model's ranked predictions (the
  // tuner's shortlist, first = its pick) on first use; null when there is
  // nothing to choose (fewer than two candidates) or the table is full.
  // Every rank creates the same slots in the same order.
  // `shortlist` is asked only when the key is new.
  OnlineSlot* slotFor(const OnlineKey& key, double bytes, const std::function<std::vector<Choice>()>& shortlist);

  // Timed rounds per exploration. From 1 MiB a turn times one call: three
  // per candidate were too few at 4 ranks on 2 cores, where ring and tree
  // are 5-10% apart at 8-128 MiB.
  static constexpr int kTrials = 5;
  // By size: how many consecutive calls a turn, how many candidates, and how
  // far (x the model's pick) a prediction may be to be one. Small calls are
  // cheap to time often and the model is least sure there (at 4 ranks on 2
  // cores it put the tree at 2.1x hd at 128 KiB, where the tree was fastest
  // in some runs); 1-4 MiB calls the four best, larger ones the two best
  // predictions.
  static int callsPerTurnFor(double bytes);
  static size_t candidatesFor(double bytes);
  static double marginFor(double bytes);

 private:
  struct Entry {
    OnlineKey key;
    OnlineSlot* slot;  // null: nothing to tune for this key
  };
  std::vector<Entry> entries_;
  std::deque<OnlineSlot> slots_;  // stable addresses
};

}  // namespace loom::tuner
