#include "bootstrap/socket_io.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

#include "common/format.h"

namespace loom::bootstrap {
namespace {

// Long enough not to spin, short enough to notice an abort quickly.
constexpr int kPollSliceMillis = 100;

bool wouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

Status peerClosed(const std::string& what) {
  return {Code::kRemoteError, "connection closed by the peer during " + what};
}

// Sends what the kernel takes now; sets `progressed` if any byte moved.
Status sendSome(int fd, const uint8_t* data, size_t length, size_t& done, bool& progressed,
                const std::string& what) {
  ssize_t n = ::send(fd, data + done, length - done, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    done += static_cast<size_t>(n);
    progressed = true;
    return Status::ok();
  }
  if (n < 0 && wouldBlock(errno)) return Status::ok();
  if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return peerClosed(what);
  return makeSystemError(errno, "send during %s", what.c_str());
}

// Receives what has arrived; end of stream before `length` is an error.
Status recvSome(int fd, uint8_t* data, size_t length, size_t& done, bool& progressed,
                const std::string& what) {
  ssize_t n = ::recv(fd, data + done, length - done, MSG_DONTWAIT);
  if (n > 0) {
    done += static_cast<size_t>(n);
    progressed = true;
    return Status::ok();
  }
  if (n == 0) return peerClosed(what);
  if (wouldBlock(errno)) return Status::ok();
  if (errno == ECONNRESET) return peerClosed(what);
  return makeSystemError(errno, "recv during %s", what.c_str());
}

}  // namespace

Status pollFds(pollfd* fds, nfds_t count, const WaitContext& wait, const std::string& what) {
  for (;;) {
    if (wait.aborted()) return {Code::kRemoteError, "aborted while waiting for " + what};
    int rc = ::poll(fds, count, wait.deadline.remainingMillis(kPollSliceMillis));
    if (rc > 0) return Status::ok();
    if (rc < 0 && errno != EINTR) return makeSystemError(errno, "poll while waiting for %s", what.c_str());
    if (rc == 0 && wait.deadline.expired()) return {Code::kTimeout, "timed out waiting for " + what};
  }
}

Status sendAll(int fd, const void* data, size_t length, const WaitContext& wait,
               const std::string& what) {
  return sendRecv(fd, data, length, -1, nullptr, 0, wait, what);
}

Status recvAll(int fd, void* data, size_t length, const WaitContext& wait,
               const std::string& what) {
  return sendRecv(-1, nullptr, 0, fd, data, length, wait, what);
}

Status sendRecv(int sendFd, const void* sendData, size_t sendLength, int recvFd, void* recvData,
                size_t recvLength, const WaitContext& wait, const std::string& what) {
  const auto* out = static_cast<const uint8_t*>(sendData);
  auto* in = static_cast<uint8_t*>(recvData);
  size_t sent = 0;
  size_t received = 0;
  while (sent < sendLength || received < recvLength) {
    // Try first, poll only when nothing moved: most small transfers finish
    // without a poll() call.
    bool progressed = false;
    if (sent < sendLength) LOOM_TRY(sendSome(sendFd, out, sendLength, sent, progressed, what));
    if (received < recvLength) LOOM_TRY(recvSome(recvFd, in, recvLength, received, progressed, what));
    if (progressed) continue;
    pollfd fds[2];
    nfds_t count = 0;
    if (sent < sendLength) fds[count++] = {sendFd, POLLOUT, 0};
    if (received < recvLength) fds[count++] = {recvFd, POLLIN, 0};
    LOOM_TRY(pollFds(fds, count, wait, what));
  }
  return Status::ok();
}

}  // namespace loom::bootstrap
