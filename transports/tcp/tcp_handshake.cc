#include "transports/tcp/tcp_handshake.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "bootstrap/sock_addr.h"
#include "bootstrap/socket_io.h"
#include "common/format.h"
#include "transports/tcp/interface_select.h"

namespace loom::transport::tcp {
namespace {

constexpr uint64_t kHelloMagic = 0x314c4548504354ull;  // "TCPHEL1"
constexpr uint64_t kAckMagic = 0x314b4341504354ull;    // "TCPACK1"
// The answer to a hello from a rank of this job whose geometry differs: a
// setting that must match on every rank does not. Both ranks fail at once,
// each naming both values, instead of waiting for LOOM_TIMEOUT.
constexpr uint64_t kMismatchMagic = 0x31534d58504354ull;  // "TCPXMS1"
constexpr double kHelloSeconds = 5.0;  // an accepted connection must say hello this fast

struct Hello {
  uint64_t magic = kHelloMagic;
  int32_t fromRank = -1;
  int32_t toRank = -1;
  int32_t lane = -1;
  int32_t lanes = 0;
  uint64_t chunkBytes = 0;
  bootstrap::Secret token{};
};
static_assert(sizeof(Hello) == 48);

// What follows kMismatchMagic: the accepting rank's own values.
struct MismatchBody {
  uint64_t chunkBytes = 0;
  int32_t lanes = 0;
  int32_t pad = 0;
};
static_assert(sizeof(MismatchBody) == 16);

Status geometryMismatch(int rankA, uint64_t chunkA, int lanesA, int rankB, uint64_t chunkB, int lanesB) {
  return makeError(Code::kInvalidUsage,
                   "tcp: rank %d uses chunks of %llu bytes and %d socket(s) per peer, rank %d %llu bytes and %d: the "
                   "chunk size (LOOM_CHUNK_SIZE or loomConfig_t.chunkBytes) and LOOM_NSOCKS must match on every rank",
                   rankA, static_cast<unsigned long long>(chunkA), lanesA, rankB,
                   static_cast<unsigned long long>(chunkB), lanesB);
}

WaitContext shortWait(const WaitContext& wait, double seconds) {
  WaitContext w = wait;
  Deadline d = Deadline::after(seconds);
  if (d.at < w.deadline.at) w.deadline = d;
  return w;
}

}  // namespace

void tuneDataSocket(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int size = 4 << 20;
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

Result<Listener> openListener(const SetupContext& ctx) {
  auto chosen = selectListenAddress(ctx.config->socketIfname, listInterfaceAddresses());
  LOOM_TRY(chosen.status());
  auto socket = bootstrap::listenOn(chosen->addr, false);
  if (!socket.isOk()) return socket.status().withContext(strprintf("tcp: rank %d: ", ctx.rank));
  auto bound = bootstrap::localAddressOf(socket->fd());
  LOOM_TRY(bound.status());
  // Accepted sockets inherit the buffer sizes; setting them before the
  // handshake lets TCP advertise a large enough window scale.
  tuneDataSocket(socket->fd());
  Listener l;
  l.socket = std::move(socket).value();
  std::string host = bound->host();
  LOOM_ENFORCE(host.size() < sizeof(l.endpoint.host), Code::kSystemError, "tcp: address %s is too long",
               host.c_str());
  std::memcpy(l.endpoint.host, host.c_str(), host.size() + 1);
  l.endpoint.port = bound->port();
  l.endpoint.token = bootstrap::randomSecret();
  LOOM_INFO(ctx.log, kSubsysTransport, "tcp: rank %d listens on %s (interface %s)", ctx.rank,
            bound->toString().c_str(), chosen->ifname.c_str());
  return l;
}

Status connectLanes(const SetupContext& ctx, const std::vector<int>& peers, int lanes, const Listener& listener,
                    const std::vector<Endpoint>& table, std::vector<std::vector<bootstrap::Socket>>* sockets) {
  sockets->clear();
  sockets->resize(static_cast<size_t>(ctx.nranks));
  auto describe = [&](int peer) {
    const Endpoint& e = table[static_cast<size_t>(peer)];
    const char* name = ctx.peers ? (*ctx.peers)[static_cast<size_t>(peer)].hostName : "";
    return strprintf("rank %d (host %s, %s port %u)", peer, name, e.host, e.port);
  };
  // Connect to every higher peer and say hello on each lane.
  for (int peer : peers) {
    if (peer < ctx.rank) continue;
    const Endpoint& e = table[static_cast<size_t>(peer)];
    auto addr = bootstrap::SockAddr::fromNumeric(e.host, e.port);
    LOOM_TRY(addr.status());
    for (int lane = 0; lane < lanes; ++lane) {
      auto s = bootstrap::connectWithRetry(addr.value(), ctx.wait, "the TCP transport of " + describe(peer));
      LOOM_TRY(s.status());
      tuneDataSocket(s->fd());
      Hello hello;
      hello.fromRank = ctx.rank;
      hello.toRank = peer;
      hello.lane = lane;
      hello.lanes = lanes;
      hello.chunkBytes = ctx.config->chunkBytes;
      hello.token = e.token;
      LOOM_TRY(bootstrap::sendAll(s->fd(), &hello, sizeof hello, ctx.wait, "hello to " + describe(peer)));
      (*sockets)[static_cast<size_t>(peer)].push_back(std::move(s).value());
    }
  }
  // Accept the lanes of every lower peer.
  std::vector<int> expected(static_cast<size_t>(ctx.nranks), 0);
  int missing = 0;
  for (int peer : peers) {
    if (peer > ctx.rank) continue;
    expected[static_cast<size_t>(peer)] = lanes;
    missing += lanes;
    (*sockets)[static_cast<size_t>(peer)].resize(static_cast<size_t>(lanes));
  }
  std::vector<std::vector<char>> seen(static_cast<size_t>(ctx.nranks), std::vector<char>(lanes, 0));
  while (missing > 0) {
    bootstrap::SockAddr from;
    auto s = bootstrap::acceptOne(listener.socket, ctx.wait,
                                  strprintf("%d more TCP connection(s) from lower-ranked peers of rank %d", missing,
                                            ctx.rank),
                                  &from);
    LOOM_TRY(s.status());
    Hello hello;
    Status got = bootstrap::recvAll(s->fd(), &hello, sizeof hello, shortWait(ctx.wait, kHelloSeconds),
                                    "hello from " + from.toString());
    std::string why;
    if (!got.isOk()) why = got.message();
    else if (hello.magic != kHelloMagic) why = "not a Loom TCP hello";
    else if (hello.token != listener.endpoint.token) why = "wrong job token (not a rank of this communicator)";
    else if (hello.toRank != ctx.rank || hello.fromRank < 0 || hello.fromRank >= ctx.rank ||
             expected[static_cast<size_t>(hello.fromRank)] == 0)
      why = strprintf("unexpected ranks (from %d to %d)", hello.fromRank, hello.toRank);
    else if (hello.lanes != lanes || hello.chunkBytes != ctx.config->chunkBytes) {
      // A rank of this job (it holds the token) set up differently: tell it,
      // so it fails now too, and fail.
      struct {
        uint64_t magic = kMismatchMagic;
        MismatchBody mine;
      } reply;
      reply.mine.chunkBytes = ctx.config->chunkBytes;
      reply.mine.lanes = lanes;
      (void)bootstrap::sendAll(s->fd(), &reply, sizeof reply, shortWait(ctx.wait, kHelloSeconds),
                               "mismatch reply to " + describe(hello.fromRank));
      return geometryMismatch(ctx.rank, ctx.config->chunkBytes, lanes, hello.fromRank, hello.chunkBytes,
                              hello.lanes);
    } else if (hello.lane < 0 || hello.lane >= lanes ||
               seen[static_cast<size_t>(hello.fromRank)][static_cast<size_t>(hello.lane)])
      why = strprintf("socket %d of %d from rank %d is out of range or a duplicate", hello.lane, hello.lanes,
                      hello.fromRank);
    if (!why.empty()) {
      LOOM_WARN(ctx.log, kSubsysTransport, "tcp: rank %d rejected a connection from %s: %s", ctx.rank,
                from.toString().c_str(), why.c_str());
      continue;  // the socket closes; keep waiting for the real peers
    }
    const uint64_t ack = kAckMagic;
    LOOM_TRY(bootstrap::sendAll(s->fd(), &ack, sizeof ack, ctx.wait, "ack to " + describe(hello.fromRank)));
    tuneDataSocket(s->fd());
    seen[static_cast<size_t>(hello.fromRank)][static_cast<size_t>(hello.lane)] = 1;
    (*sockets)[static_cast<size_t>(hello.fromRank)][static_cast<size_t>(hello.lane)] = std::move(s).value();
    --missing;
  }
  // The higher peers' acks: they accepted our token.
  for (int peer : peers) {
    if (peer < ctx.rank) continue;
    for (auto& s : (*sockets)[static_cast<size_t>(peer)]) {
      uint64_t ack = 0;
      LOOM_TRY(bootstrap::recvAll(s.fd(), &ack, sizeof ack, ctx.wait, "the handshake ack of " + describe(peer)));
      if (ack == kMismatchMagic) {
        MismatchBody theirs;
        LOOM_TRY(bootstrap::recvAll(s.fd(), &theirs, sizeof theirs, ctx.wait,
                                    "the mismatch reply of " + describe(peer)));
        return geometryMismatch(ctx.rank, ctx.config->chunkBytes, lanes, peer, theirs.chunkBytes, theirs.lanes);
      }
      LOOM_ENFORCE(ack == kAckMagic, Code::kRemoteError, "tcp: %s answered the handshake with garbage",
                   describe(peer).c_str());
    }
  }
  return Status::ok();
}

}  // namespace loom::transport::tcp
