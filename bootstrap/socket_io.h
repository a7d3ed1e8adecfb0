// Deadline-bounded byte transfer over non-blocking sockets.
//
// All functions poll() in slices of at most 100 ms so that an abort flag set
// by another thread is noticed promptly, retry on EINTR, and never raise
// SIGPIPE (MSG_NOSIGNAL). Failures come back as:
//   kTimeout      "timed out waiting for <what>"
//   kRemoteError  "aborted while waiting for <what>" or the peer closed
//   kSystemError  any other socket error, with strerror
// `what` is a noun phrase naming the transfer and the peer, e.g.
// "the address table from the root at 10.0.0.1:29500".
#pragma once

#include <poll.h>

#include <cstddef>
#include <string>

#include "common/status.h"
#include "common/wait.h"

namespace loom::bootstrap {

// Returns once at least one of `fds` has a returned event (POLLERR/POLLHUP
// included), or fails at the deadline / on abort.
Status pollFds(pollfd* fds, nfds_t count, const WaitContext& wait, const std::string& what);

Status sendAll(int fd, const void* data, size_t length, const WaitContext& wait,
               const std::string& what);
Status recvAll(int fd, void* data, size_t length, const WaitContext& wait,
               const std::string& what);

// Sends `sendLength` bytes on sendFd while receiving `recvLength` bytes on
// recvFd, so that a ring of ranks each sending more than a socket buffer
// holds cannot deadlock. Either side may have length 0.
Status sendRecv(int sendFd, const void* sendData, size_t sendLength, int recvFd, void* recvData,
                size_t recvLength, const WaitContext& wait, const std::string& what);

}  // namespace loom::bootstrap
