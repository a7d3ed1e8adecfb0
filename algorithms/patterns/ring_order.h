// The order ranks take around a ring: host-grouped (HostLayout::ringOrder)
// when a layout of this rank's hosts is given, so that the ring crosses
// between hosts as few times as possible, else rank order. Built from plain
// numbers (an algorithm passes its AlgoContext's rank, nranks and hosts), so
// it stays rank arithmetic with no dependency on the algorithms above it.
//
// Ring algorithms index their blocks by ring *position*; the collectives
// whose output layout is by rank (reduce-scatter, all-gather) map a
// position's block to the rank at that position (rankAt), so the result is
// the same as the rank-order ring's.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/patterns/host_layout.h"
#include "common/ring_schedule.h"

namespace loom::algo {

class RingOrder {
 public:
  // `hosts` may be null (rank order); a layout of another rank or size is ignored.
  RingOrder(int rank, int nranks, const HostLayout* hosts)
      : n_(nranks),
        order_(hosts && hosts->nranks == nranks && hosts->rank == rank ? &hosts->ringOrder : nullptr),
        position_(order_ ? hosts->ringPosition[static_cast<size_t>(rank)] : rank) {}

  int size() const { return n_; }
  int position() const { return position_; }
  // The rank at ring position p (taken modulo the ring size, negatives too).
  int rankAt(int p) const {
    const int wrapped = ring::wrap(p, n_);
    return order_ ? (*order_)[static_cast<size_t>(wrapped)] : wrapped;
  }
  int next() const { return rankAt(ring::next(position_, n_)); }
  int prev() const { return rankAt(ring::prev(position_, n_)); }

 private:
  int n_;
  const std::vector<int>* order_;  // null: rank order
  int position_;
};

}  // namespace loom::algo
