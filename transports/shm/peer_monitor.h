// Peer-death and stall detection among the ranks of one host.
//
// The lowest rank on a host creates a "health board": one shared-memory page
// (named like the FIFO segments, "/loom-<tag>-health-<rank>", and unlinked
// once every local rank mapped it) holding, per local rank, a liveness state
// (alive / departed after a clean destroy), its pid and a heartbeat (the
// CLOCK_MONOTONIC time it was last seen waiting), plus one job-wide failure
// word. Each rank also holds a pidfd of every other local rank's process.
//
// check(), called by every wait that has begun to sleep:
//   1. reads the failure word: if another rank already found a peer dead,
//      it fails at once with the same message (so ranks that were not
//      connected to the dead one fail as promptly as its neighbours);
//   2. at most every kPollMillis: bumps this rank's heartbeat and polls the
//      pidfds; a peer whose process exited while its slot still says alive
//      died: the failure word is set and the wait fails with
//      "rank 2 (host h, pid p) died: killed by signal 9 (SIGKILL)".
// describeStalls(), on a timeout, names the local peers whose heartbeat is
// older than min(1 s, LOOM_TIMEOUT / 2) or whose process is stopped.
//
// Ranks on other hosts are not watched (a network transport will report
// connection loss itself). Ranks that are threads of one process share a
// pid: they have heartbeats but no pidfds; so do ranks in another pid
// namespace (a container sharing the host's /dev/shm), whose pid means
// nothing here.
//
// Thread safety: check() and describeStalls() may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace loom::transport::shm {

class PeerMonitor final : public PeerHealth {
 public:
  // `local` lists this host's ranks of the communicator, this rank included, sorted.
  PeerMonitor(const SetupContext& ctx, std::vector<int> local);
  ~PeerMonitor();  // marks this rank departed, closes the pidfds, unmaps
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  // Setup, in the steps of ShmTransport::connect(): the lowest local rank
  // creates the board before the first exchange; every local rank maps it
  // after that exchange; the creator unlinks it after the second.
  bool isOwner() const { return local_.front() == rank_; }
  Status createBoard();
  Status attach();
  void unlinkBoard();

  Status check() override;
  std::string describeStalls() override;

 private:
  struct Board;
  static constexpr int kPollMillis = 5;
  // pidfds_ values other than a descriptor.
  static constexpr int kNotWatched = -1;         // self, a thread of this process, or another pid namespace
  static constexpr int kPollWithKill = -2;       // no pidfd_open: kill(pid, 0) and /proc
  static constexpr int kExitedBeforeWatch = -3;  // gone before the first check

  std::string describePeer(int localIndex) const;
  Status failureFromBoard() const;
  // Whether local peer `i`'s process has exited (pidfd readable or gone).
  bool processExited(size_t i) const;
  void startWatching();  // under pollMu_

  int rank_;
  std::vector<int> local_;          // sorted global ranks on this host
  std::vector<PeerInfo> peerInfo_;  // indexed like local_
  double timeoutSeconds_;
  std::string jobTag_;
  SegmentLocation where_;
  bool linked_ = false;
  Mapping mapping_;
  Board* board_ = nullptr;
  size_t self_ = 0;                 // index of this rank in local_
  std::vector<int> pidfds_;         // indexed like local_: a pidfd or one of the k* values above
  bool watching_ = false;           // pidfds_ opened (first check(), under pollMu_)
  std::atomic<long long> lastPollNs_{0};
  std::mutex pollMu_;               // one thread polls at a time; others skip
};

}  // namespace loom::transport::shm
