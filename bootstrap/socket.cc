#include "bootstrap/socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/socket_io.h"
#include "common/format.h"

namespace loom::bootstrap {
namespace {

void setNoDelay(int fd) {
  int one = 1;
  // Best effort: a socket without NODELAY is slower, not wrong.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Errors that mean "nobody is listening there yet", worth another try.
bool isRetriableConnectError(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EAGAIN:
      return true;
    default:
      return false;
  }
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  // Not retried on EINTR: on Linux the descriptor is released regardless.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> listenOn(const SockAddr& addr, bool reuseAddr) {
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return makeSystemError(errno, "socket() to listen on %s", addr.toString().c_str());
  Socket sock(fd);
  if (reuseAddr) {
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
      return makeSystemError(errno, "SO_REUSEADDR on %s", addr.toString().c_str());
    }
  }
  if (::bind(fd, addr.raw(), addr.length()) != 0) {
    return makeSystemError(errno, "bind to %s", addr.toString().c_str());
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    return makeSystemError(errno, "listen on %s", addr.toString().c_str());
  }
  return sock;
}

Result<Socket> connectOnce(const SockAddr& addr, const WaitContext& wait, int* errOut) {
  *errOut = 0;
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *errOut = errno;
    return makeSystemError(errno, "socket() to connect to %s", addr.toString().c_str());
  }
  Socket sock(fd);
  setNoDelay(fd);
  if (::connect(fd, addr.raw(), addr.length()) == 0) return sock;
  // EINTR on a non-blocking connect leaves the attempt running, like EINPROGRESS.
  if (errno != EINPROGRESS && errno != EINTR) {
    *errOut = errno;
    return makeSystemError(errno, "connect to %s", addr.toString().c_str());
  }
  pollfd pfd{fd, POLLOUT, 0};
  LOOM_TRY(pollFds(&pfd, 1, wait, "the connection to " + addr.toString()));
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    *errOut = err;
    return makeSystemError(err, "connect to %s", addr.toString().c_str());
  }
  return sock;
}

Result<Socket> connectWithRetry(const SockAddr& addr, const WaitContext& wait,
                                const std::string& what) {
  const auto start = Clock::now();
  int backoffMillis = 10;
  int attempts = 0;
  for (;;) {
    int err = 0;
    Result<Socket> sock = connectOnce(addr, wait, &err);
    ++attempts;
    if (sock.isOk()) return sock;
    if (err == 0) {
      // The wait itself ended: say what we were connecting to.
      return Status(sock.status().code(),
                    strprintf("%s after %.1f s connecting to %s (%d attempts)",
                              sock.status().code() == Code::kTimeout ? "timed out" : "aborted",
                              secondsSince(start), what.c_str(), attempts));
    }
    if (!isRetriableConnectError(err)) return sock.status().withContext("connecting to " + what + ": ");
    if (wait.aborted()) {
      return makeError(Code::kRemoteError, "aborted while connecting to %s", what.c_str());
    }
    if (wait.deadline.expired()) {
      return makeError(Code::kTimeout, "timed out after %.1f s connecting to %s (%d attempts, last error: %s)",
                       secondsSince(start), what.c_str(), attempts, std::strerror(err));
    }
    int sleepMillis = std::max(1, wait.deadline.remainingMillis(backoffMillis));
    std::this_thread::sleep_for(std::chrono::milliseconds(sleepMillis));
    backoffMillis = std::min(backoffMillis * 2, 200);
  }
}

Result<Socket> tryAccept(const Socket& listener, SockAddr* peer) {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket sock(fd);
      setNoDelay(fd);
      if (peer) {
        Result<SockAddr> addr = SockAddr::fromRaw(reinterpret_cast<sockaddr*>(&ss), len);
        *peer = addr.isOk() ? addr.value() : SockAddr();
      }
      return sock;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Socket();
    // A connection that died in the backlog, or a signal: try the next one.
    if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
    return makeSystemError(errno, "accept");
  }
}

Result<Socket> acceptOne(const Socket& listener, const WaitContext& wait, const std::string& what,
                         SockAddr* peer) {
  for (;;) {
    Result<Socket> sock = tryAccept(listener, peer);
    if (!sock.isOk() || sock.value().valid()) return sock;
    pollfd pfd{listener.fd(), POLLIN, 0};
    LOOM_TRY(pollFds(&pfd, 1, wait, what));
  }
}

}  // namespace loom::bootstrap
