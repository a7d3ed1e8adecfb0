// The rendezvous of elastic loomrun (--nnodes MIN:MAX), hosted by the agent
// that could bind --rdzv-endpoint, on a thread of its own.
//
// Rounds: agents JOIN; while no round runs, the open round closes when MAX
// agents joined, or when at least MIN did and the last call (last_call_timeout,
// counted from the moment MIN was reached) passed. The closing round's agents
// get node ranks (those of the previous round first, in their old order, then
// newcomers in join order); node 0's address (as this server sees it) and
// port become MASTER_ADDR/MASTER_PORT. Agents beyond MAX wait for a later round.
//
// While a round runs, each of these ends it, and the server tells the other
// agents of the round to stop their ranks and JOIN again (RESTART):
//  - an agent JOINs from outside the round while it has fewer than MAX nodes;
//  - an agent of the round JOINs again (one of its ranks failed);
//  - an agent's connection closes before it reported DONE (the node left).
// The next round does not close before every agent of the ended round has
// JOINed again or gone (bounded by the join timeout).
//
// Deadline: when fewer than MIN agents waited for join_timeout, every waiting
// agent gets ERROR naming the counts. The job is over when every agent of the
// running round reported DONE; waiting agents then get FINISHED.
//
// The host agent is a single point of failure, as the c10d store's host is
// for torchrun: when it dies the others cannot meet again.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"

namespace loom::launcher {

struct RendezvousConfig {
  std::string runId;
  int minNodes = 1;
  int maxNodes = 1;
  double joinTimeoutSeconds = 600;
  double lastCallSeconds = 30;
};

class RendezvousServer {
 public:
  // Binds host:port and starts serving. nullptr when the address is in use
  // or not one of this host's (another agent hosts, or will host, the
  // rendezvous); other failures kSystemError.
  static Result<std::unique_ptr<RendezvousServer>> host(const std::string& host, int port,
                                                        const RendezvousConfig& config);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // True once the job is over (every agent of the last round reported DONE,
  // or the rendezvous gave up): the host agent may exit without cutting off
  // agents that still need the server.
  bool finished() const { return finished_.load(); }

 private:
  struct State;
  RendezvousServer(int listenFd, int wakeReadFd, int wakeWriteFd, std::unique_ptr<State> state);
  void serve();

  int listenFd_;
  int wakeWriteFd_;
  int wakeReadFd_;
  std::unique_ptr<State> state_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace loom::launcher
