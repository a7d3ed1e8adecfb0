// An in-memory transport for algorithm tests: one bounded FIFO of chunks per
// ordered pair of ranks, guarded by a mutex. It honours the transport
// contract (slot capacity, in-order delivery, blocking acquire with the
// WaitContext deadline), so algorithms can be tested without shared memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/algorithm.h"

namespace loom::testing {

class LoopbackFabric {
 public:
  LoopbackFabric(int nranks, size_t chunkBytes, int slots);
  // The links rank `rank` uses.
  algo::Links& linksOf(int rank) { return *links_[static_cast<size_t>(rank)]; }

  struct Fifo {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::vector<std::byte>> committed;
    int inFlight = 0;  // committed + being read
    std::vector<std::byte> writing;
  };
  Fifo& fifo(int from, int to) { return *fifos_[static_cast<size_t>(from * nranks_ + to)]; }
  size_t chunkBytes() const { return chunkBytes_; }
  int slots() const { return slots_; }

 private:
  int nranks_;
  size_t chunkBytes_;
  int slots_;
  std::vector<std::unique_ptr<Fifo>> fifos_;
  std::vector<std::unique_ptr<algo::Links>> links_;
};

}  // namespace loom::testing
