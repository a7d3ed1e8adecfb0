// The signals loomrun reacts to, delivered as readable events on a signalfd
// so the supervision loop can poll them together with the ranks' pipes:
//   SIGCHLD                   a rank changed state (exit details via waitid);
//   SIGINT, SIGTERM, SIGHUP   forwarded to the ranks, which are then stopped.
// Construction blocks those signals and ignores SIGPIPE (a closed stdout must
// surface as EPIPE, not kill loomrun before it stops the ranks). A child must
// call restoreInChild() between fork and exec so the program starts with the
// signal state loomrun itself was started with.
//
// Ownership: one instance per loomrun process; not thread-safe.
#pragma once

#include <signal.h>

#include <memory>
#include <vector>

#include "common/status.h"

namespace loom::launcher {

class SignalChannel {
 public:
  static Result<std::unique_ptr<SignalChannel>> open();
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  // Descriptor to poll for POLLIN.
  int fd() const { return fd_; }

  // Reads every pending signal without waiting, in arrival order. Standard
  // signals do not queue: several SIGCHLDs may arrive as one.
  std::vector<int> drain();

  // Async-signal-safe: restores the original mask and SIGPIPE / SIGCHLD
  // dispositions. Only for a forked child about to exec.
  void restoreInChild() const;

 private:
  SignalChannel() = default;

  int fd_ = -1;
  sigset_t originalMask_{};
  struct sigaction originalPipe_{};
  struct sigaction originalChild_{};
};

}  // namespace loom::launcher
