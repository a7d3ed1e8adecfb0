// The progress thread of one TCP transport: moves chunks between the
// connections' slot rings and the sockets of every peer.
//
// Wire format, per socket, in chunk order: an 8-byte header (payload bytes,
// low 32 bits of the chunk index) and the payload. Chunk i of a direction
// travels on socket i % nsocks, so several sockets carry one direction in
// parallel and the receiver knows where each chunk belongs. A header with
// bytes == kGoodbye says the peer is closing normally; an EOF without it
// (process died, connection reset) fails the link with an error naming the
// peer's rank and host.
//
// The thread sleeps in epoll_wait (sockets edge-triggered, plus an eventfd
// that commit() and release() write); every wake it does all the work
// possible on every socket until each would block, so no readiness is lost.
// Nothing spins: without events it sleeps.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "transports/tcp/tcp_connection.h"

namespace loom::transport::tcp {

constexpr uint32_t kGoodbye = 0xffffffffu;

struct ChunkHeader {
  uint32_t bytes = 0;
  uint32_t seq = 0;
};
static_assert(sizeof(ChunkHeader) == 8);

// One socket of a peer link and how far each direction has got on it.
struct SocketLane {
  bootstrap::Socket socket;
  uint64_t sendChunk = 0;     // next chunk index this lane sends
  size_t sendOffset = 0;      // bytes of (header + payload) of sendChunk written
  ChunkHeader sendHeader;
  uint64_t recvChunk = 0;     // next chunk index this lane receives
  size_t recvOffset = 0;      // bytes of (header + payload) of recvChunk read
  ChunkHeader recvHeader;
  bool peerSaidGoodbye = false;
  bool closed = false;        // EOF seen or failed: not polled any more
};

// Everything about one peer.
struct PeerLink {
  PeerLink(int selfRank, int peerRank, std::string peerHost, size_t chunkBytes, int slots, ProgressWaker* waker)
      : state(selfRank, peerRank, std::move(peerHost)),
        send(chunkBytes, slots, &state, waker),
        recv(chunkBytes, slots, &state, waker) {}
  LinkState state;
  TcpSendConnection send;
  TcpRecvConnection recv;
  std::vector<SocketLane> lanes;
};

class ProgressEngine final : public ProgressWaker {
 public:
  ProgressEngine() = default;
  ~ProgressEngine();

  // Registers the links' sockets and starts the thread.
  Status start(std::vector<PeerLink*> links);
  // Stops and joins the thread (idempotent).
  void stop();
  void wake() override;

 private:
  void run();
  bool progressLink(PeerLink& link);  // true if anything moved
  bool sendOn(PeerLink& link, SocketLane& lane, uint32_t nlanes);
  bool recvOn(PeerLink& link, SocketLane& lane, uint32_t nlanes);
  void failLane(PeerLink& link, SocketLane& lane, int err, const std::string& why);  // err: errno or 0

  std::vector<PeerLink*> links_;
  int epollFd_ = -1;
  int eventFd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  int64_t nextHeldChunk_ = 0;  // test delay: earliest time a held chunk may go (0: none held)
};

}  // namespace loom::transport::tcp
