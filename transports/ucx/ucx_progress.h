// The progress thread of one UCX transport: turns the connections' ring
// positions into tagged UCP sends and receives (ucx_connection.h) and UCP's
// completions back into ring positions.
//
// Why tagged send/receive with credits (and not active messages or RMA):
// the interface is a FIFO of chunks per direction with `slots` buffers on
// each side, which maps one to one onto receives preposted into the
// receiver's free slots. A data tag carries the chunk's sequence number
// (ucx_tags.h), so chunk i can only land in slot i % slots, in order, with
// no copy beyond UCX's own. The receiver returns every release as credit (one
// 8-byte message, coalesced while one is in flight) and the sender posts
// chunk i only once the receive for it is posted: UCX never holds unexpected
// data, whatever the message size or eager/rendezvous protocol. RMA would
// need registered rings, remote keys and a flag protocol for the same FIFO,
// and over TCP or shared memory UCX emulates it with messages anyway.
//
// Sleeping: the thread drains the worker (ucp_worker_progress until it
// reports nothing), polls for at most LOOM_SPIN_US more, then arms the worker
// and sleeps in epoll on the worker's event fd and an eventfd that commit()
// and release() write while it sleeps. Nothing spins without bound.
//
// Failure: UCX's endpoint error handler (UCP_ERR_HANDLING_MODE_PEER) and
// failed operations fail the peer's link with an error naming its rank and
// host; a goodbye message marks an orderly close instead. Transports without
// peer failure handling (UCX 1.13's posix and sysv shared memory) get an
// endpoint without it, and the peer's process is watched through a pidfd
// (in the epoll set, and polled every 5 ms while busy).
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transports/ucx/ucx_connection.h"
#include "transports/ucx/ucx_worker.h"

namespace loom::transport::ucx {

class ProgressEngine;
struct PeerLink;

enum class OpKind { kDataSend, kDataRecv, kCreditSend, kCreditRecv, kHelloSend, kHelloRecv, kGoodbyeSend, kGoodbyeRecv };

// One UCP operation this transport may have in flight (its callback's user data).
struct PendingOp {
  PeerLink* link = nullptr;
  ProgressEngine* engine = nullptr;
  OpKind kind = OpKind::kDataSend;
  uint64_t seq = 0;
  void* request = nullptr;  // non-null while in flight
  bool done = false;        // completed (hello, goodbye)
  ucs_status_t status = UCS_OK;
  ucp_tag_recv_info_t info{};
};

// What each rank sends every peer once the endpoints exist (ucx_handshake.h).
struct Hello {
  uint32_t magic = 0;
  uint32_t version = 0;
  int32_t from = -1;
  int32_t to = -1;
  uint64_t chunkBytes = 0;
  uint32_t slots = 0;
  uint32_t pad = 0;
  uint64_t jobHash = 0;
};
static_assert(sizeof(Hello) == 40);

// What a closing rank sends every peer. `cause` is non-empty when it closes
// because a peer failed (its first such error), so ranks that never talked
// to the failed rank still learn which one it was.
struct Goodbye {
  uint64_t committed = 0;  // chunks this side committed to the receiver
  char cause[248] = {};
};
static_assert(sizeof(Goodbye) == 256);

// Everything about one peer.
struct PeerLink {
  PeerLink(int selfRank, int peerRank, std::string peerHost, size_t chunkBytes, int slots, ProgressEngine* engine);
  ProgressEngine* engine;
  LinkState state;
  UcxSendConnection send;
  UcxRecvConnection recv;
  ucp_ep_h ep = nullptr;
  bool epFailed = false;  // UCX reported the endpoint broken (close it forcibly)
  // UCX's shared-memory transports (1.13) have no peer failure handling, so
  // such endpoints are created without it and the peer's process is watched
  // through a pidfd instead (it can only be a process of this machine).
  bool peerErrorHandling = true;
  int peerPid = 0;
  int pidFd = -1;

  // Progress side.
  uint64_t nextSend = 0;       // chunks whose send is posted
  uint64_t creditLimit = 0;    // the peer has a receive posted for every chunk below this
  uint64_t nextRecv = 0;       // chunks whose receive is posted
  uint64_t creditGranted = 0;  // releases last reported to the peer
  uint64_t creditOut = 0;      // payload of the credit send in flight
  uint64_t creditIn = 0;       // payload of the credit receive
  Goodbye goodbyeOut, goodbyeIn;
  Hello helloOut, helloIn;
  std::vector<PendingOp> sendOps, recvOps;  // per slot
  PendingOp creditSend, creditRecv, helloSend, helloRecv, goodbyeSend, goodbyeRecv;
};

class ProgressEngine final : public ProgressWaker {
 public:
  ProgressEngine(UcxWorker* worker, int selfRank);
  ~ProgressEngine();

  // Connection setup, on the calling thread before start(): adopts the link
  // (served from now on, closed by shutdown()) and creates its endpoint from
  // the peer's worker address.
  Status createEndpoint(PeerLink& link, const std::vector<uint8_t>& peerAddress, int peerPid);
  // Sends `hello` to every link's peer, receives theirs into helloIn and
  // progresses until all completed, failed or the wait ends.
  Status exchangeHellos(const std::vector<PeerLink*>& links, const WaitContext& wait);
  // Posts every link's receives (data slots, credit, goodbye).
  void postInitialReceives(const std::vector<PeerLink*>& links);

  Status start(int spinMicros);
  // Stops and joins the thread (idempotent).
  void stop();
  // After stop(): goodbye to every healthy peer, cancels receives, closes
  // every endpoint, each step bounded in time. The worker may then be destroyed.
  void shutdown(double seconds);
  void wake() override;

  // UCP callbacks (user data: the PendingOp).
  void completed(PendingOp& op, ucs_status_t status);
  void endpointFailed(PeerLink& link, ucs_status_t status);

 private:
  void run();
  bool pump(PeerLink& link);        // posts what the ring positions allow; true if anything was posted
  bool hasWork(PeerLink& link) const;
  bool drainWorker();               // ucp_worker_progress until idle; true if anything happened
  void postSend(PeerLink& link, PendingOp& op, const void* buffer, size_t bytes, uint64_t tag);
  void postRecv(PeerLink& link, PendingOp& op, void* buffer, size_t bytes, uint64_t tag);
  void failLink(PeerLink& link, ucs_status_t status, const char* during);
  void checkWatchedPeers();         // pidfds of peers without UCX error handling
  template <class Done>
  void progressUntil(Done&& done, double seconds);

  UcxWorker* worker_;
  const int selfRank_;
  std::vector<PeerLink*> links_;
  int epollFd_ = -1;
  int eventFd_ = -1;
  int spinMicros_ = 0;
  Clock::time_point nextPeerCheck_{};
  bool closing_ = false;  // shutdown(): cancellations are expected
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace loom::transport::ucx
