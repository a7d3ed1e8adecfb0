#include "tools/loomrun/signal_channel.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace loom::launcher {

Result<std::unique_ptr<SignalChannel>> SignalChannel::open() {
  std::unique_ptr<SignalChannel> channel(new SignalChannel());
  // SIGCHLD must not be ignored: an inherited SIG_IGN would make the kernel
  // reap the ranks itself and waitid could never report their status.
  struct sigaction dflt{};
  dflt.sa_handler = SIG_DFL;
  sigemptyset(&dflt.sa_mask);
  struct sigaction ignore = dflt;
  ignore.sa_handler = SIG_IGN;
  if (sigaction(SIGCHLD, &dflt, &channel->originalChild_) != 0 ||
      sigaction(SIGPIPE, &ignore, &channel->originalPipe_) != 0) {
    return makeSystemError(errno, "sigaction");
  }
  sigset_t watched;
  sigemptyset(&watched);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&watched, sig);
  if (sigprocmask(SIG_BLOCK, &watched, &channel->originalMask_) != 0) {
    return makeSystemError(errno, "sigprocmask");
  }
  channel->fd_ = signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC);
  if (channel->fd_ < 0) return makeSystemError(errno, "signalfd");
  return channel;
}

SignalChannel::~SignalChannel() {
  if (fd_ >= 0) close(fd_);
  sigprocmask(SIG_SETMASK, &originalMask_, nullptr);
  sigaction(SIGPIPE, &originalPipe_, nullptr);
  sigaction(SIGCHLD, &originalChild_, nullptr);
}

std::vector<int> SignalChannel::drain() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (true) {
    ssize_t n = read(fd_, &info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(info))) break;  // EAGAIN: nothing left
    signals.push_back(static_cast<int>(info.ssi_signo));
  }
  return signals;
}

void SignalChannel::restoreInChild() const {
  sigaction(SIGPIPE, &originalPipe_, nullptr);
  sigaction(SIGCHLD, &originalChild_, nullptr);
  sigprocmask(SIG_SETMASK, &originalMask_, nullptr);
}

}  // namespace loom::launcher
