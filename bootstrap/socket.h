// Socket: an owned, non-blocking TCP file descriptor, and the three ways the
// bootstrap gets one (listen, connect, accept).
//
// Every socket is created non-blocking and close-on-exec; connected sockets
// have TCP_NODELAY because bootstrap messages are small and latency-bound.
// Waiting happens in poll() against the WaitContext's deadline and abort
// flag (see socket_io.h), never in a blocking system call.
//
// Thread safety: a Socket is owned by one thread at a time.
#pragma once

#include <string>

#include "bootstrap/sock_addr.h"
#include "common/status.h"
#include "common/wait.h"

namespace loom::bootstrap {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

// A listening socket bound to `addr` (port 0: the kernel picks one; read it
// back with localAddressOf). reuseAddr sets SO_REUSEADDR so a well-known root
// port can be re-bound while old connections sit in TIME_WAIT.
Result<Socket> listenOn(const SockAddr& addr, bool reuseAddr);

// One connection attempt, waiting for completion until wait's deadline. On
// failure *errOut holds the errno (0 if the wait itself timed out or aborted).
Result<Socket> connectOnce(const SockAddr& addr, const WaitContext& wait, int* errOut);

// Connects, retrying with backoff (10 ms doubling to 200 ms) while the peer
// refuses or is unreachable: at startup the peer may simply not listen yet.
// `what` names the peer for messages ("the root at 10.0.0.1:29500"); the
// timeout message says how long was tried and the last error seen.
Result<Socket> connectWithRetry(const SockAddr& addr, const WaitContext& wait,
                                const std::string& what);

// Accepts one pending connection without waiting; an invalid Socket when none
// is pending. `peer` (may be null) receives the peer's address.
Result<Socket> tryAccept(const Socket& listener, SockAddr* peer);

// Waits (deadline, abort) for a connection and accepts it. `what` says who is
// expected, for the timeout message.
Result<Socket> acceptOne(const Socket& listener, const WaitContext& wait, const std::string& what,
                         SockAddr* peer);

}  // namespace loom::bootstrap
