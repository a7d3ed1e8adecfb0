#include "bootstrap/socket_ring.h"

#include "bootstrap/wire.h"
#include "common/format.h"

namespace loom::bootstrap {
namespace {

Deadline earlier(Deadline a, Deadline b) { return a.at < b.at ? a : b; }

// Why a ring hello is not the one we wait for; empty when it is.
std::string mismatch(const RingHello& hello, int expectedRank, const RingIdentity& self) {
  if (!secretsEqual(hello.secret, self.secret)) return "it did not present this job's secret";
  if (hello.nranks != self.nranks) {
    return strprintf("it says nranks is %d, this rank has %d", hello.nranks, self.nranks);
  }
  if (hello.rank != expectedRank) {
    return strprintf("it says it is rank %d, rank %d was expected", hello.rank, expectedRank);
  }
  return {};
}

// Reads and checks one connection's ring hello; empty string when it is ours.
std::string screenConnection(const Socket& sock, const std::string& peer, int expectedRank,
                             const RingIdentity& self, const WaitContext& wait, double helloTimeoutSeconds) {
  WaitContext helloWait = wait;
  helloWait.deadline = earlier(wait.deadline, Deadline::after(helloTimeoutSeconds));
  Result<Frame> frame = recvFrame(sock.fd(), helloWait, "the ring hello from " + peer);
  if (!frame.isOk()) return frame.status().message();
  if (frame.value().type != MsgType::kRingHello) {
    return strprintf("message type %u where a ring hello was expected", static_cast<unsigned>(frame.value().type));
  }
  Result<RingHello> hello = decodeRingHello(frame.value().payload);
  if (!hello.isOk()) return hello.status().message();
  return mismatch(hello.value(), expectedRank, self);
}

}  // namespace

Result<Socket> connectRingPeer(const SockAddr& addr, int peerRank, const RingIdentity& self,
                               const WaitContext& wait) {
  std::string who = strprintf("rank %d at %s", peerRank, addr.toString().c_str());
  Result<Socket> sock = connectWithRetry(addr, wait, who);
  if (!sock.isOk()) return sock;
  RingHello hello{self.secret, self.rank, self.nranks};
  LOOM_TRY(sendFrame(sock.value().fd(), MsgType::kRingHello, encodeRingHello(hello), wait,
                     "the ring hello to " + who));
  return sock;
}

Result<Socket> acceptRingPeer(const Socket& listener, int expectedRank, const RingIdentity& self,
                              const WaitContext& wait, const Logger& log, double helloTimeoutSeconds) {
  const std::string expected = strprintf("rank %d (ring predecessor) to connect", expectedRank);
  int dropped = 0;
  std::string lastDrop;  // a corrupted hello from the real predecessor ends here: the timeout says so
  for (;;) {
    SockAddr peerAddr;
    Result<Socket> sock = acceptOne(listener, wait, expected, &peerAddr);
    if (!sock.isOk()) {
      if (dropped == 0 || sock.status().code() != Code::kTimeout) return sock;
      return Status(Code::kTimeout, strprintf("%s; %d connection(s) dropped meanwhile, the last from %s",
                                              sock.status().message().c_str(), dropped, lastDrop.c_str()));
    }
    std::string peer = peerAddr.toString();
    std::string why = screenConnection(sock.value(), peer, expectedRank, self, wait, helloTimeoutSeconds);
    if (why.empty()) return sock;
    if (wait.aborted()) return makeError(Code::kRemoteError, "aborted while waiting for %s", expected.c_str());
    LOOM_WARN(log, kSubsysBootstrap, "bootstrap rank %d: dropping connection from %s: %s", self.rank,
              peer.c_str(), why.c_str());
    ++dropped;
    lastDrop = peer + ": " + why;
  }
}

}  // namespace loom::bootstrap
