// An elastic agent's side of the rendezvous (rendezvous_protocol.h): one
// connection to --rdzv-endpoint, kept open while the agent lives.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "tools/loomrun/rendezvous_protocol.h"
#include "tools/loomrun/signal_channel.h"

namespace loom::launcher {

// What ended the wait for a round.
struct RoundReply {
  enum class Kind { kRound, kError, kFinished, kSignal } kind = Kind::kError;
  RoundAssignment round;  // kRound
  std::string text;       // kError: the reason
  int signo = 0;          // kSignal: SIGINT, SIGTERM or SIGHUP reached loomrun
};

class RendezvousClient {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to host:port, retrying until `deadline` (the host agent may
  // start later than this one).
  static Result<std::unique_ptr<RendezvousClient>> connect(const std::string& host, int port,
                                                           Clock::time_point deadline);

  int fd() const { return channel_->fd(); }
  // This end's address, as the other nodes reach this host.
  std::string localAddress() const;

  Status join(const JoinRequest& request);
  void sendDone() { channel_->send("DONE"); }

  // Waits for ROUND, ERROR or FINISHED (RESTARTs of a round that already
  // ended are skipped). A lost connection or the deadline is kError.
  RoundReply awaitRound(Clock::time_point deadline, SignalChannel& signals);

  // Called while ranks run, when fd() is readable: true when the server asks
  // to end `round` (reason in `reason`). A closed connection returns false
  // and sets lost(): the ranks go on, but the job can no longer re-meet.
  bool restartRequested(int round, std::string& reason);
  bool lost() const { return lost_; }

 private:
  explicit RendezvousClient(int fd) : channel_(std::make_unique<LineChannel>(fd)) {}
  bool readLines();  // false when the connection closed

  std::unique_ptr<LineChannel> channel_;
  std::deque<std::string> lines_;
  bool lost_ = false;
};

}  // namespace loom::launcher
