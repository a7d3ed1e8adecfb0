#include "src/tuner/online_tuner.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace loom::tuner {

OnlineSlot::OnlineSlot(std::vector<Choice> candidates, int trials, int callsPerTurn, Periods periods)
    : candidates_(std::move(candidates)),
      rounds_(static_cast<size_t>(std::max(trials, 1)) + 1),
      perTurn_(static_cast<size_t>(std::max(callsPerTurn, 1))),
      times_(candidates_.size()),
      evidence_(candidates_.size(), 0),
      periods_(periods) {}

void OnlineSlot::countSettledCall() {
  if (phase_ != Phase::kSettled || --left_ > 0) return;
  phase_ = Phase::kExploring;
  step_ = 0;
  turnNanos_ = 0;
  for (auto& t : times_) t.clear();
}

bool OnlineSlot::agreementDue() const {
  return phase_ == Phase::kExploring && step_ >= rounds_ * candidates_.size() * perTurn_;
}

size_t OnlineSlot::current() const {
  const size_t m = candidates_.size(), turn = step_ / perTurn_;
  const size_t round = turn / m, pos = turn % m;
  // Alternate the order per round so that no candidate always follows the
  // same one (a call can leave caches and peers in a state the next pays for).
  return round % 2 == 0 ? pos : m - 1 - pos;
}

void OnlineSlot::finishTrial(int64_t nanos) {
  if (phase_ != Phase::kExploring || agreementDue()) return;
  if (timed()) {
    // A turn's first call also waits out the skew the previous candidate
    // left (a tree's leaves leave early and wait in the next call): with
    // more than one call a turn, only the later ones count. One call a turn
    // at 4 ranks, 128 MiB, kept choosing the tree where the ring was 5-20%
    // faster.
    if (perTurn_ == 1 || step_ % perTurn_ != 0) turnNanos_ += std::max<int64_t>(nanos, 0);
    if ((step_ + 1) % perTurn_ == 0) {
      times_[current()].push_back(turnNanos_);
      turnNanos_ = 0;
    }
  }
  ++step_;
}

std::vector<double> OnlineSlot::evidence() const {
  Wide least = 0;
  for (Wide e : evidence_)
    if (e > 0 && (least == 0 || e < least)) least = e;
  std::vector<double> relative;
  for (Wide e : evidence_) relative.push_back(least == 0 ? 0.0 : static_cast<double>(e) / static_cast<double>(least));
  return relative;
}

std::vector<int64_t> OnlineSlot::summary() const {
  std::vector<int64_t> medians;
  for (std::vector<int64_t> t : times_) {
    if (t.empty()) {
      medians.push_back(0);
      continue;
    }
    std::sort(t.begin(), t.end());
    const size_t half = t.size() / 2;
    medians.push_back(t.size() % 2 ? t[half] : (t[half - 1] + t[half]) / 2);
  }
  return medians;
}

void OnlineSlot::decide(const std::vector<int64_t>& summed, int nranks) {
  // Evidence builds up over explorations: each adds its times relative to
  // its fastest candidate, and what came before counts half as much each
  // time. One exploration has few samples (at 8 MiB, 4 ranks on 2 cores, two
  // of eight single explorations put the tree ahead of a ring that was 1.2x
  // faster over the run, and their winner then ran a whole period); a state
  // of the machine that lasts decides within two or three, a large gain at
  // once. An exploration also counts in inverse proportion to its fastest
  // time: being descheduled only ever adds time, so the faster exploration
  // was the less disturbed one (a first exploration at 8 MiB read 4x the
  // later times, and ranked the ring and the tree the other way round).
  // Integers only: every rank must reach the same winner bit for bit.
  int64_t fastest = INT64_MAX;
  for (size_t i = 0; i < summed.size() && i < candidates_.size(); ++i) fastest = std::min(fastest, summed[i]);
  fastest = std::max<int64_t>(fastest, 1);
  for (size_t i = 0; i < evidence_.size(); ++i) {
    const int64_t t = i < summed.size() ? std::max<int64_t>(summed[i], 0) : fastest;
    // t / fastest in 1/2^32 units, capped so that sums cannot overflow
    // (at most 2^52 here, 2^100 after the shift, 2^101 summed).
    const Wide ratio = t / fastest >= kMaxRatio ? Wide{kMaxRatio} << 32
                                                : (Wide(t / fastest) << 32) + (Wide(t % fastest) << 32) / Wide(fastest);
    evidence_[i] = evidence_[i] / 2 + (ratio << 48) / Wide(fastest);
  }
  int best = 0;
  for (size_t i = 1; i < evidence_.size(); ++i)
    if (evidence_[i] < evidence_[static_cast<size_t>(best)]) best = static_cast<int>(i);
  // The incumbent (the model's pick at first, then the last winner) keeps
  // its place unless beaten clearly: at 2 ranks, 8 B, an exploration that
  // overlapped the program's start measured every candidate within 1% of the
  // others (122 us a turn, peers arriving late), and a bare argmin there is
  // a coin toss that can trade a 0.16 us algorithm for a slower one.
  const size_t incumbent = decisions_ > 0 ? static_cast<size_t>(winner_) : 0;
  if (evidence_[static_cast<size_t>(best)] * (100 + kMinGainPercent) >= evidence_[incumbent] * 100u)
    best = static_cast<int>(incumbent);
  // The same winner again: the machine is steady, look less often.
  doublings_ = decisions_ > 0 && best == winner_ ? std::min(doublings_ + 1, periods_.maxDoublings) : 0;
  winner_ = best;
  ++decisions_;
  const int64_t perCall = std::max<int64_t>(
      summed.empty() ? 1 : summed[static_cast<size_t>(best)] / std::max(nranks, 1) / static_cast<int64_t>(perTurn_), 1);
  const uint64_t explorationCalls = rounds_ * candidates_.size() * perTurn_;
  const uint64_t base = std::clamp<uint64_t>(std::max<uint64_t>(static_cast<uint64_t>(periods_.recheckNanos / perCall),
                                                                explorationCalls * periods_.explorationMultiple),
                                             periods_.minCalls, periods_.maxCalls);
  period_ = std::min(base << doublings_, periods_.maxCalls);
  phase_ = Phase::kSettled;
  left_ = period_;
}

int OnlineTuner::callsPerTurnFor(double bytes) {
  if (bytes < (64 << 10)) return 16;
  if (bytes < (1 << 20)) return 4;
  return 2;
}

size_t OnlineTuner::candidatesFor(double bytes) {
  if (bytes < (1 << 20)) return 4;
  // At 1-4 MiB the model puts several algorithms within a few percent of
  // each other (4 ranks on 2 cores: window and direct 2084 us, ring 2154),
  // and which one leads depends on the machine's state (on one 2-core VM the
  // window led the ring by 11-24% in some runs and trailed it by 7-49% in
  // others): two would leave the ring untimed. A call there costs at most a
  // few ms, so a third candidate adds little to an exploration. A fourth:
  // at 2 ranks the model ranks the tree, the ring and halving-doubling
  // (the ring's exchange there) within 1% and the direct all-reduce next,
  // and direct is the one that holds up when the machine slows the others
  // down (tuning_defaults.cc).
  if (bytes < (4 << 20)) return 4;
  return 2;
}

double OnlineTuner::marginFor(double bytes) { return bytes < (1 << 20) ? 2.5 : 1.5; }

OnlineSlot* OnlineTuner::slotFor(const OnlineKey& key, double bytes,
                                 const std::function<std::vector<Choice>()>& ranked) {
  for (const Entry& e : entries_)
    if (e.key == key) return e.slot;
  if (entries_.size() >= kMaxSlots) return nullptr;
  const std::vector<Choice> shortlist = ranked();
  std::vector<Choice> candidates;
  for (const Choice& c : shortlist) {
    if (candidates.size() >= candidatesFor(bytes)) break;
    if (c.predictedMicros <= shortlist.front().predictedMicros * marginFor(bytes)) candidates.push_back(c);
  }
  OnlineSlot* slot = nullptr;
  if (candidates.size() >= 2) {
    // Re-exploring costs (candidates - 1) x (trials + 1) turns of slower
    // algorithms: after about 0.1 s of calls, then rarer.
    slot = &slots_.emplace_back(std::move(candidates), kTrials, callsPerTurnFor(bytes), OnlineSlot::Periods{});
  }
  entries_.push_back({key, slot});
  return slot;
}

}  // namespace loom::tuner
