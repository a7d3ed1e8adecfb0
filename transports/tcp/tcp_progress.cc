#include "transports/tcp/tcp_progress.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/format.h"

namespace loom::transport::tcp {

ProgressEngine::~ProgressEngine() {
  stop();
  if (epollFd_ >= 0) ::close(epollFd_);
  if (eventFd_ >= 0) ::close(eventFd_);
}

Status ProgressEngine::start(std::vector<PeerLink*> links) {
  links_ = std::move(links);
  epollFd_ = epoll_create1(EPOLL_CLOEXEC);
  LOOM_ENFORCE(epollFd_ >= 0, Code::kSystemError, "tcp: epoll_create1 failed: %s", std::strerror(errno));
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  LOOM_ENFORCE(eventFd_ >= 0, Code::kSystemError, "tcp: eventfd failed: %s", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered: drained after every wake
  ev.data.fd = eventFd_;
  LOOM_ENFORCE(epoll_ctl(epollFd_, EPOLL_CTL_ADD, eventFd_, &ev) == 0, Code::kSystemError,
               "tcp: epoll_ctl(eventfd) failed: %s", std::strerror(errno));
  for (PeerLink* link : links_) {
    for (auto& lane : link->lanes) {
      epoll_event sev{};
      sev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      sev.data.fd = lane.socket.fd();
      LOOM_ENFORCE(epoll_ctl(epollFd_, EPOLL_CTL_ADD, lane.socket.fd(), &sev) == 0, Code::kSystemError,
                   "tcp: epoll_ctl(socket to rank %d) failed: %s", link->state.peerRank(), std::strerror(errno));
    }
  }
  thread_ = std::thread([this] { run(); });
  return Status::ok();
}

void ProgressEngine::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  wake();
  thread_.join();
}

void ProgressEngine::wake() {
  uint64_t one = 1;
  // A full counter (never in practice) still leaves the fd readable: the wake is not lost.
  ssize_t n = ::write(eventFd_, &one, sizeof one);
  (void)n;
}

void ProgressEngine::run() {
  epoll_event events[64];
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved = false;
    nextHeldChunk_ = 0;
    for (PeerLink* link : links_) moved |= progressLink(*link);
    if (moved) continue;
    // Sleeps until a socket changes state or an executor commits/releases;
    // the timeout only bounds how long a lost wake (there should be none) could stall.
    // With the test delay, it also ends when the first held chunk may go.
    timespec timeout{0, 100 * 1000 * 1000};
    if (nextHeldChunk_) {
      const int64_t wait = std::max<int64_t>(0, std::min<int64_t>(nextHeldChunk_ - steadyNanos(), 100000000));
      timeout = {0, static_cast<long>(wait)};
    }
    int n = epoll_pwait2(epollFd_, events, 64, &timeout, nullptr);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == eventFd_) {
        uint64_t count;
        ssize_t r = ::read(eventFd_, &count, sizeof count);
        (void)r;
      }
    }
  }
}

bool ProgressEngine::progressLink(PeerLink& link) {
  if (link.state.failed()) return false;
  bool moved = false;
  const auto nlanes = static_cast<uint32_t>(link.lanes.size());
  for (auto& lane : link.lanes) {
    if (lane.closed) continue;
    moved |= sendOn(link, lane, nlanes);
    if (link.state.failed()) return moved;
    moved |= recvOn(link, lane, nlanes);
    if (link.state.failed()) return moved;
  }
  // Every lane said goodbye and closed: nothing more will ever arrive.
  bool allClosed = true;
  for (auto& lane : link.lanes) allClosed = allClosed && lane.closed;
  if (allClosed)
    link.state.fail(makeError(Code::kRemoteError,
                              "tcp: rank %d (host %s) closed its connection to rank %d (communicator destroyed)",
                              link.state.peerRank(), link.state.peerHost().c_str(), link.state.selfRank()),
                    /*clean=*/true);
  return moved;
}

void ProgressEngine::failLane(PeerLink& link, SocketLane& lane, int err, const std::string& why) {
  lane.closed = true;
  epoll_ctl(epollFd_, EPOLL_CTL_DEL, lane.socket.fd(), nullptr);
  std::string cause = err ? strprintf("%s (%s)", why.c_str(), std::strerror(err)) : why;
  link.state.fail(makeError(Code::kRemoteError, "tcp: connection between rank %d and rank %d (host %s) failed: %s",
                            link.state.selfRank(), link.state.peerRank(), link.state.peerHost().c_str(),
                            cause.c_str()));
}

bool ProgressEngine::sendOn(PeerLink& link, SocketLane& lane, uint32_t nlanes) {
  bool moved = false;
  while (lane.sendChunk < link.send.committed()) {
    if (lane.sendOffset == 0) {
      const int64_t at = link.send.sendableAt(lane.sendChunk);  // test delay only
      if (at && steadyNanos() < at) {
        if (!nextHeldChunk_ || at < nextHeldChunk_) nextHeldChunk_ = at;
        return moved;
      }
    }
    const uint32_t bytes = link.send.chunkBytesOf(lane.sendChunk);
    if (lane.sendOffset == 0) lane.sendHeader = ChunkHeader{bytes, static_cast<uint32_t>(lane.sendChunk)};
    const size_t total = sizeof(ChunkHeader) + bytes;
    iovec iov[2];
    int niov = 0;
    if (lane.sendOffset < sizeof(ChunkHeader)) {
      iov[niov++] = {reinterpret_cast<char*>(&lane.sendHeader) + lane.sendOffset,
                     sizeof(ChunkHeader) - lane.sendOffset};
      if (bytes) iov[niov++] = {link.send.chunkData(lane.sendChunk), bytes};
    } else {
      size_t done = lane.sendOffset - sizeof(ChunkHeader);
      iov[niov++] = {link.send.chunkData(lane.sendChunk) + done, bytes - done};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(niov);
    ssize_t n = ::sendmsg(lane.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      failLane(link, lane, errno, "sending");
      return moved;
    }
    moved = true;
    lane.sendOffset += static_cast<size_t>(n);
    if (lane.sendOffset == total) {
      link.send.markSent(lane.sendChunk);
      lane.sendChunk += nlanes;
      lane.sendOffset = 0;
    }
  }
  return moved;
}

bool ProgressEngine::recvOn(PeerLink& link, SocketLane& lane, uint32_t nlanes) {
  bool moved = false;
  // One recv(); false when the caller must stop (would block, EOF or error).
  auto receive = [&](char* dst, size_t want, size_t* got) {
    for (;;) {
      ssize_t n = ::recv(lane.socket.fd(), dst, want, MSG_DONTWAIT);
      if (n > 0) {
        *got = static_cast<size_t>(n);
        moved = true;
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      if (n < 0) {
        failLane(link, lane, errno, "receiving");
      } else if (lane.peerSaidGoodbye && lane.recvOffset == 0) {
        lane.closed = true;  // the orderly end of the stream
        epoll_ctl(epollFd_, EPOLL_CTL_DEL, lane.socket.fd(), nullptr);
      } else {
        failLane(link, lane, 0, "the peer closed the connection unexpectedly (process exited or was killed?)");
      }
      moved = true;
      return false;
    }
  };
  for (;;) {
    if (lane.recvOffset < sizeof(ChunkHeader)) {
      size_t got = 0;
      if (!receive(reinterpret_cast<char*>(&lane.recvHeader) + lane.recvOffset,
                   sizeof(ChunkHeader) - lane.recvOffset, &got))
        return moved;
      lane.recvOffset += got;
      if (lane.recvOffset < sizeof(ChunkHeader)) continue;
      const ChunkHeader& h = lane.recvHeader;
      if (h.bytes == kGoodbye) {
        lane.peerSaidGoodbye = true;
        lane.recvOffset = 0;
        continue;
      }
      if (lane.peerSaidGoodbye || h.bytes > link.recv.chunkBytes() || h.seq != static_cast<uint32_t>(lane.recvChunk)) {
        failLane(link, lane, 0,
                 strprintf("malformed chunk header (%u bytes, sequence %u; expected at most %zu bytes, sequence %u)",
                           h.bytes, h.seq, link.recv.chunkBytes(), static_cast<uint32_t>(lane.recvChunk)));
        return moved;
      }
    }
    if (!link.recv.slotFree(lane.recvChunk)) return moved;  // release() wakes us
    const size_t done = lane.recvOffset - sizeof(ChunkHeader);
    const size_t want = lane.recvHeader.bytes - done;
    if (want > 0) {
      size_t got = 0;
      if (!receive(reinterpret_cast<char*>(link.recv.chunkData(lane.recvChunk)) + done, want, &got)) return moved;
      lane.recvOffset += got;
      if (got < want) continue;
    }
    link.recv.markArrived(lane.recvChunk, lane.recvHeader.bytes);
    lane.recvChunk += nlanes;
    lane.recvOffset = 0;
    moved = true;
  }
}

}  // namespace loom::transport::tcp
