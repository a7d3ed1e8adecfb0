// An in-process Bootstrap for tests whose ranks are threads of one process:
// allGather and barrier meet in a shared LocalBootstrapGroup (mutex +
// condition variable) instead of sockets.
//
//   auto group = LocalBootstrapGroup::create(nranks);      // once
//   runRankThreads(nranks, [&](int rank) {
//     LocalBootstrap boot(group, rank);                     // one per rank
//     ... boot.allGather(...) / boot.barrier(...)
//   });
//
// Waits honour the WaitContext's deadline and abort flag. A timeout names the
// ranks that had not arrived and breaks the group: every later call on any
// rank fails with the same message (as a real bootstrap would after a peer
// vanished).
//
// Thread safety: the group is shared by all rank threads; each LocalBootstrap
// is used by its own rank's thread only.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace loom::testing {

class LocalBootstrapGroup {
 public:
  static std::shared_ptr<LocalBootstrapGroup> create(int nranks);
  explicit LocalBootstrapGroup(int nranks);

  int nranks() const { return nranks_; }
  // One collective round: every rank contributes `bytes` bytes and receives all.
  Status exchange(int rank, void* data, size_t bytes, const WaitContext& wait);

 private:
  Status failLocked(std::string message);
  std::string missingRanksLocked() const;

  const int nranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t round_ = 0;          // rounds completed
  int arrived_ = 0;             // ranks in the current round
  size_t roundBytes_ = 0;       // slot size of the current round (first arrival sets it)
  std::vector<char> present_;   // per rank: arrived in the current round
  std::vector<std::byte> gathering_;
  // Results of the last two rounds: a rank may still be copying round r out
  // while faster ranks already gather round r + 1, but round r + 2 cannot
  // complete before every rank has left round r.
  std::vector<std::byte> results_[2];
  std::string broken_;  // non-empty once a round failed
};

class LocalBootstrap final : public bootstrap::Bootstrap {
 public:
  LocalBootstrap(std::shared_ptr<LocalBootstrapGroup> group, int rank);

  int rank() const override { return rank_; }
  int nranks() const override { return group_->nranks(); }
  Status allGather(void* data, size_t bytes, const WaitContext& wait) override;
  Status barrier(const WaitContext& wait) override;

 private:
  std::shared_ptr<LocalBootstrapGroup> group_;
  int rank_;
};

}  // namespace loom::testing
