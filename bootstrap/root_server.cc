#include "bootstrap/root_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "bootstrap/sock_addr.h"
#include "bootstrap/wire.h"
#include "common/format.h"

namespace loom::bootstrap {
namespace {

// Bounds the descriptors strangers can make the root hold at once. When it
// is reached the OLDEST pending connection is dropped: a real rank sends its
// hello right after connecting, so it is never the oldest for long, while a
// client that floods the port only evicts its own idle connections.
constexpr size_t kMaxPendingConnections = 256;
// Replies are a few bytes to a peer that is waiting for them.
constexpr double kReplySeconds = 2.0;
// How many missing ranks the timeout message lists by number.
constexpr size_t kMaxListedRanks = 64;
// Dropped strangers logged at WARN before the rest are only counted, so a
// flood of connections cannot flood the log too.
constexpr int kMaxWarnedDrops = 32;

// A connection that has not yet presented a valid hello.
struct Pending {
  Socket sock;
  std::string peer;
  Deadline helloDeadline;
  std::vector<uint8_t> bytes;  // header and payload received so far
  bool finished = false;
};

// A rank whose hello was accepted, waiting for the table.
struct Member {
  Socket sock;
  SockAddr listenAddress;
  std::string peer;
  std::string left;  // why an earlier connection of this rank was dropped, for reportMissing
};

class RootServer {
 public:
  explicit RootServer(RootSettings settings) : s_(std::move(settings)) {}
  void run();

 private:
  bool complete() const { return nranks_ > 0 && arrived_ == nranks_; }
  void pollOnce();
  void acceptNew();
  void readPending(Pending& p);
  void handleHello(Pending& p);
  void admitOrReject(Pending& p, const Hello& hello);
  void reject(Pending& p, const std::string& message);
  // Drops a connection that never authenticated: logs why (rate limited)
  // and tells the peer in one non-blocking Error frame, so a real rank that
  // was corrupted or runs another wire version learns what was wrong.
  void dropStranger(Pending& p, const std::string& why);
  void dropLostMember(int rank);
  void sendTable();
  void reportMissing();

  RootSettings s_;
  std::vector<Pending> pending_;
  std::vector<Member> members_;  // indexed by rank once nranks_ is known
  int nranks_ = 0;               // set by the first accepted hello
  int arrived_ = 0;
  int droppedStrangers_ = 0;
  int evicted_ = 0;
};

void RootServer::run() {
  while (!complete() && !s_.deadline.expired()) pollOnce();
  if (complete()) {
    sendTable();
  } else {
    reportMissing();
  }
  if (evicted_ > 1) {
    LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: evicted %d idle connections in all",
              s_.addressText.c_str(), evicted_);
  }
  if (droppedStrangers_ > kMaxWarnedDrops) {
    LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: dropped %d connections without a valid hello in all",
              s_.addressText.c_str(), droppedStrangers_);
  }
}

void RootServer::pollOnce() {
  std::vector<pollfd> fds;
  fds.push_back({s_.listener.fd(), POLLIN, 0});
  for (const Pending& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});
  std::vector<int> memberRanks;
  for (int r = 0; r < nranks_; ++r) {
    if (!members_[r].sock.valid()) continue;
    fds.push_back({members_[r].sock.fd(), POLLIN, 0});
    memberRanks.push_back(r);
  }
  // Wake for the next hello deadline as well as the root's own.
  int timeout = s_.deadline.remainingMillis(100);
  for (const Pending& p : pending_) timeout = std::min(timeout, p.helloDeadline.remainingMillis(100));
  int rc = ::poll(fds.data(), fds.size(), timeout);
  if (rc < 0) {
    // EINTR: simply poll again. Anything else (ENOMEM) is transient at best;
    // pause so the loop does not spin until the deadline ends it.
    if (errno != EINTR) {
      LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: poll: %s", s_.addressText.c_str(),
                std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return;
  }

  size_t next = 1;
  for (Pending& p : pending_) {
    if (fds[next++].revents != 0) readPending(p);
    if (!p.finished && p.helloDeadline.expired()) {
      dropStranger(p, strprintf("no hello with the job secret within %g s (%zu of %zu bytes received)",
                                s_.helloTimeoutSeconds, p.bytes.size(), kFrameHeaderBytes + kHelloBytes));
    }
  }
  for (int rank : memberRanks) {
    if (fds[next++].revents != 0) dropLostMember(rank);
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const Pending& p) { return p.finished; }),
                 pending_.end());
  if (fds[0].revents != 0) acceptNew();
}

void RootServer::acceptNew() {
  for (;;) {
    SockAddr peer;
    Result<Socket> sock = tryAccept(s_.listener, &peer);
    if (!sock.isOk()) {
      LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: %s", s_.addressText.c_str(),
                sock.status().message().c_str());
      return;
    }
    if (!sock.value().valid()) return;
    if (pending_.size() >= kMaxPendingConnections) {
      // Evictions come in floods: the first is logged, the rest counted.
      Pending& oldest = pending_.front();
      if (evicted_++ == 0) {
        LOOM_WARN(s_.log, kSubsysBootstrap,
                  "bootstrap root at %s: dropping connection from %s: it is the oldest of %zu connections awaiting "
                  "their hello (further evictions are only counted)",
                  s_.addressText.c_str(), oldest.peer.c_str(), pending_.size());
      }
      pending_.erase(pending_.begin());
    }
    Pending p;
    p.sock = std::move(sock.value());
    p.peer = peer.toString();
    p.helloDeadline = Deadline::after(s_.helloTimeoutSeconds);
    pending_.push_back(std::move(p));
  }
}

// Reads what has arrived without blocking: the header first, so that its
// length is validated before any payload is accepted.
void RootServer::readPending(Pending& p) {
  size_t want = p.bytes.size() < kFrameHeaderBytes ? kFrameHeaderBytes : kFrameHeaderBytes + kHelloBytes;
  size_t have = p.bytes.size();
  p.bytes.resize(want);
  ssize_t n = ::recv(p.sock.fd(), p.bytes.data() + have, want - have, MSG_DONTWAIT);
  if (n <= 0) {
    p.bytes.resize(have);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (++droppedStrangers_ <= kMaxWarnedDrops) {
      LOOM_WARN(s_.log, kSubsysBootstrap,
                "bootstrap root at %s: connection from %s closed after %zu of the hello's %zu bytes, before "
                "presenting the job secret",
                s_.addressText.c_str(), p.peer.c_str(), have, kFrameHeaderBytes + kHelloBytes);
    }
    p.finished = true;
    return;
  }
  p.bytes.resize(have + static_cast<size_t>(n));
  if (p.bytes.size() == kFrameHeaderBytes) {
    Result<FrameHeader> h = decodeHeader(p.bytes.data());
    Status bad = !h.isOk() ? h.status()
                 : h.value().type != MsgType::kHello
                     ? makeError(Code::kInvalidArgument, "message type %u where a hello was expected",
                                 static_cast<unsigned>(h.value().type))
                     : Status::ok();
    if (!bad.isOk()) dropStranger(p, "invalid hello frame: " + bad.message());
    return;
  }
  if (p.bytes.size() == kFrameHeaderBytes + kHelloBytes) handleHello(p);
}

void RootServer::handleHello(Pending& p) {
  p.finished = true;  // admitted, rejected or dropped: it leaves the pending list
  std::vector<uint8_t> payload(p.bytes.begin() + kFrameHeaderBytes, p.bytes.end());
  Result<Hello> hello = decodeHello(payload);
  if (!hello.isOk()) return dropStranger(p, hello.status().message());
  if (!secretsEqual(hello.value().secret, s_.secret)) {
    // Not one of ours (another job, a stale rank, a scanner). Saying so
    // reveals nothing: the secret is compared in constant time and the peer
    // would see the connection close anyway.
    return dropStranger(p, "it did not present this job's secret (a rank of another job, or a stale "
                           "LOOM_JOB_SECRET?)");
  }
  admitOrReject(p, hello.value());
}

void RootServer::admitOrReject(Pending& p, const Hello& hello) {
  const int rank = hello.rank;
  if (hello.nranks < 1 || hello.nranks > kMaxRanks) {
    return reject(p, strprintf("bootstrap: the hello to the root at %s says nranks %d, out of range [1, %d]",
                               s_.addressText.c_str(), hello.nranks, kMaxRanks));
  }
  if (rank < 0 || rank >= hello.nranks) {
    return reject(p, strprintf("bootstrap: the hello to the root at %s says rank %d, out of range [0, %d)",
                               s_.addressText.c_str(), rank, hello.nranks));
  }
  if (nranks_ != 0 && hello.nranks != nranks_) {
    return reject(p, strprintf("bootstrap: rank %d says nranks is %d but earlier ranks said %d (root at %s)",
                               rank, hello.nranks, nranks_, s_.addressText.c_str()));
  }
  if (nranks_ == 0) {
    nranks_ = hello.nranks;
    members_.resize(static_cast<size_t>(nranks_));
  }
  Member& slot = members_[static_cast<size_t>(rank)];
  if (slot.sock.valid()) {
    return reject(p, strprintf("bootstrap: rank %d of %d reached the root at %s twice (from %s and from %s); "
                               "is the same rank used by two processes?",
                               rank, nranks_, s_.addressText.c_str(), slot.peer.c_str(), p.peer.c_str()));
  }
  slot.sock = std::move(p.sock);
  slot.listenAddress = hello.listenAddress;
  slot.peer = p.peer;
  ++arrived_;
  LOOM_TRACE(s_.log, kSubsysBootstrap, "bootstrap root at %s: rank %d of %d arrived from %s (%d present)",
             s_.addressText.c_str(), rank, nranks_, p.peer.c_str(), arrived_);
}

void RootServer::dropStranger(Pending& p, const std::string& why) {
  p.finished = true;
  if (++droppedStrangers_ <= kMaxWarnedDrops) {
    LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: dropping connection from %s: %s%s",
              s_.addressText.c_str(), p.peer.c_str(), why.c_str(),
              droppedStrangers_ == kMaxWarnedDrops ? " (further drops are only counted)" : "");
  }
  std::string text = strprintf("bootstrap: the root at %s dropped the connection from %s: %s", s_.addressText.c_str(),
                               p.peer.c_str(), why.c_str());
  // One attempt, no waiting: the root serves everyone from this thread, and a
  // few bytes always fit a fresh socket's buffer.
  (void)sendFrame(p.sock.fd(), MsgType::kError, encodeRemoteError({Code::kRemoteError, text}),
                  WaitContext{Deadline::after(0)}, "the drop notice sent to " + p.peer);
}

void RootServer::reject(Pending& p, const std::string& message) {
  LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: rejecting %s: %s", s_.addressText.c_str(),
            p.peer.c_str(), message.c_str());
  Status sent = sendFrame(p.sock.fd(), MsgType::kError, encodeRemoteError({Code::kRemoteError, message}),
                          WaitContext{Deadline::after(kReplySeconds)}, "the rejection sent to " + p.peer);
  if (!sent.isOk()) {
    LOOM_TRACE(s_.log, kSubsysBootstrap, "bootstrap root: %s", sent.message().c_str());
  }
}

// A present rank's socket became readable: it closed (gave up, crashed) or
// sent something it must not. Either way it no longer counts as present.
void RootServer::dropLostMember(int rank) {
  Member& m = members_[static_cast<size_t>(rank)];
  uint8_t byte = 0;
  ssize_t n = ::recv(m.sock.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;  // spurious wake-up
  std::string why = n > 0 ? "sent data out of turn (it should wait for the address table)"
                          : "closed its connection before the address table was sent";
  LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: rank %d (%s) %s; it no longer counts as present",
            s_.addressText.c_str(), rank, m.peer.c_str(), why.c_str());
  std::string left = strprintf("rank %d arrived from %s, then %s", rank, m.peer.c_str(), why.c_str());
  m = Member();
  m.left = std::move(left);
  --arrived_;
}

void RootServer::sendTable() {
  std::vector<SockAddr> table;
  for (const Member& m : members_) table.push_back(m.listenAddress);
  std::vector<uint8_t> payload = encodeAddressTable(table);
  for (int r = 0; r < nranks_; ++r) {
    Member& m = members_[static_cast<size_t>(r)];
    Status sent = sendFrame(m.sock.fd(), MsgType::kAddressTable, payload,
                            WaitContext{Deadline::after(kReplySeconds)},
                            strprintf("the address table sent to rank %d (%s)", r, m.peer.c_str()));
    if (!sent.isOk()) {
      LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: %s", s_.addressText.c_str(),
                sent.message().c_str());
    }
  }
  LOOM_INFO(s_.log, kSubsysBootstrap, "bootstrap root at %s: all %d ranks arrived, address table sent",
            s_.addressText.c_str(), nranks_);
}

void RootServer::reportMissing() {
  if (nranks_ == 0) {
    LOOM_WARN(s_.log, kSubsysBootstrap, "bootstrap root at %s: no rank arrived within %g s; root exits",
              s_.addressText.c_str(), s_.timeoutSeconds);
    return;
  }
  std::vector<int> missing;
  for (int r = 0; r < nranks_; ++r) {
    if (!members_[static_cast<size_t>(r)].sock.valid()) missing.push_back(r);
  }
  std::string list;
  for (size_t i = 0; i < missing.size() && i < kMaxListedRanks; ++i) {
    list += (i ? "," : "") + std::to_string(missing[i]);
  }
  if (missing.size() > kMaxListedRanks) list += strprintf(",... (%zu in all)", missing.size());
  std::string text = strprintf("bootstrap: %s %s of %d never reached the root at %s within %g s",
                               missing.size() == 1 ? "rank" : "ranks", list.c_str(), nranks_,
                               s_.addressText.c_str(), s_.timeoutSeconds);
  // Ranks that did arrive and then left: say so, it changes what to debug.
  int notes = 0;
  for (int r : missing) {
    const std::string& left = members_[static_cast<size_t>(r)].left;
    if (left.empty() || notes == 4) continue;
    text += (notes++ ? "; " : " (") + left;
  }
  if (notes) text += ")";
  LOOM_WARN(s_.log, kSubsysBootstrap, "%s", text.c_str());
  std::vector<uint8_t> payload = encodeRemoteError({Code::kTimeout, text});
  for (const Member& m : members_) {
    if (!m.sock.valid()) continue;
    Status sent = sendFrame(m.sock.fd(), MsgType::kError, payload, WaitContext{Deadline::after(kReplySeconds)},
                            "the timeout report sent to " + m.peer);
    if (!sent.isOk()) LOOM_TRACE(s_.log, kSubsysBootstrap, "bootstrap root: %s", sent.message().c_str());
  }
}

}  // namespace

void runRoot(RootSettings settings) {
  try {
    RootServer server(std::move(settings));
    server.run();
  } catch (const std::exception& e) {
    // Only allocation can throw here; the ranks then see the root close.
    LOOM_WARN(Logger::process(), kSubsysBootstrap, "bootstrap root failed: %s", e.what());
  }
}

}  // namespace loom::bootstrap
