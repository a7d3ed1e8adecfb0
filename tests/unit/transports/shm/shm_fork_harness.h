// Forked rank processes for the shared-memory transport tests. The test
// process forks the ranks and acts as their rendezvous: each child reaches it
// through a socketpair, and an allGather is "every child sends its slot, the
// parent sends back the whole table" (a stand-in for bootstrap/, which is
// developed separately). Children report failures through their exit status
// and stderr.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/config.h"
#include "transports/transport.h"

namespace loom::testing::shm {

// The child's end of the rendezvous.
class SocketPairBootstrap final : public bootstrap::Bootstrap {
 public:
  SocketPairBootstrap(int fd, int rank, int nranks) : fd_(fd), rank_(rank), nranks_(nranks) {}
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status allGather(void* data, size_t bytes, const WaitContext& wait) override;
  Status barrier(const WaitContext& wait) override;

 private:
  int fd_;
  int rank_;
  int nranks_;
};

// Forks `nranks` children; child `rank` runs body(rank, bootstrap) and exits 0
// if it returns an empty string, else prints the string to stderr and exits
// 1 (a body may also _exit() itself). The parent serves the rendezvous until
// every child hangs up or `seconds` pass, then reaps the children and returns
// each one's exit code (128 + signal number if it was killed).
std::vector<int> runForkedRanks(int nranks, const std::function<std::string(int rank, bootstrap::Bootstrap& boot)>& body,
                                double seconds = 60);

// In a forked rank: connects a shared-memory transport with every other rank
// (job `tag`, settings `cfg`, which must outlive the transport), waits until
// all ranks have connected and checks that no segment name outlived
// connect(). Returns "" and the transport in *out, or what went wrong.
std::string connectForkedRank(bootstrap::Bootstrap& boot, int rank, int nranks, const std::string& tag,
                              const Config& cfg, std::unique_ptr<transport::Transport>* out);

}  // namespace loom::testing::shm
