#include "transports/tcp/tcp_transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/format.h"
#include "transports/tcp/tcp_handshake.h"
#include "transports/tcp/tcp_progress.h"

namespace loom::transport::tcp {
namespace {

constexpr double kFlushSeconds = 2.0;  // how long destruction waits for unsent chunks

// Without LOOM_CHUNK_SIZE, TCP asks for 2 MiB chunks (src/comm/comm.cc takes
// the smallest preference of the backends in use, so a job that also uses shm
// keeps 256 KiB). Why: each chunk costs a commit wake-up, a progress-thread
// pass, socket calls and, on the receiver, a wake-up of the executor, and in a
// ring step the executor cannot go on before the whole chunk has arrived, so
// those costs sit on the critical path once per chunk. Measured over the netns
// bed (2 hosts x 1 rank, 64 MiB all-reduce, 2 loaded cores): 256K 0.32 GB/s,
// 1M 0.36, 2M 0.41, 4M 0.42; perf/multihost_bench.sh medians 256K -> 2M:
// 0.38 -> 0.43-0.55 unshaped, 0.32-0.39 -> 0.42-0.44 shaped. CPU per
// all-reduce drops only ~5%: the gain is fewer stalls, not fewer cycles.
constexpr size_t kPreferredChunkBytes = size_t{2} << 20;
// Slot memory per direction and peer: the kernel's socket buffers (4 MiB each
// way, tuneDataSocket) already hold what is in flight, so the rings need only
// double-buffer large chunks: 2 slots of 2 MiB, or LOOM_SHM_SLOTS of 256 KiB.
constexpr size_t kRingBudgetBytes = size_t{4} << 20;

size_t preferredChunkBytes(const Config& config) {
  return config.chunkBytesSet ? config.chunkBytes : std::max(config.chunkBytes, kPreferredChunkBytes);
}

int slotsFor(const Config& config) {
  const auto fit = static_cast<int>(std::min<size_t>(64, kRingBudgetBytes / config.chunkBytes));
  return std::min(config.fifoSlots, std::max(2, fit));
}

class NoSend final : public SendConnection {
 public:
  explicit NoSend(std::string why) : why_(std::move(why)) {}
  size_t chunkBytes() const override { return 0; }
  Status acquire(std::byte** slot, const WaitContext&) override {
    *slot = nullptr;
    return {Code::kInvalidUsage, why_};
  }
  bool tryAcquire(std::byte** slot) override {
    *slot = nullptr;
    return false;
  }
  void commit(size_t) override {}
  std::string why_;
};

class NoRecv final : public RecvConnection {
 public:
  explicit NoRecv(std::string why) : why_(std::move(why)) {}
  size_t chunkBytes() const override { return 0; }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext&) override {
    *data = nullptr;
    *bytes = 0;
    return {Code::kInvalidUsage, why_};
  }
  bool tryAcquire(const std::byte** data, size_t* bytes) override {
    *data = nullptr;
    *bytes = 0;
    return false;
  }
  void release() override {}
  std::string why_;
};

class TcpTransport final : public Transport, public PeerHealth {
 public:
  TcpTransport()
      : noSend_("tcp: no connection to that peer rank (not a TCP peer, or connect() has not succeeded)"),
        noRecv_("tcp: no connection from that peer rank (not a TCP peer, or connect() has not succeeded)") {}
  ~TcpTransport() override { closeLinks(); }

  const char* name() const override { return "tcp"; }
  Status connect(const SetupContext& ctx, const std::vector<int>& peers) override;
  SendConnection& sendTo(int peer, Protocol proto) override;
  RecvConnection& recvFrom(int peer, Protocol proto) override;
  PeerHealth* health() override { return connected_ && !links_.empty() ? this : nullptr; }

  Status check() override;
  std::string describeStalls() override { return ""; }

 private:
  Status validate(const SetupContext& ctx, const std::vector<int>& peers) const;
  Status exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) const;
  void closeLinks();

  bool connected_ = false;
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::vector<PeerLink*> byRank_;
  ProgressEngine engine_;
  NoSend noSend_;
  NoRecv noRecv_;
};

Status TcpTransport::validate(const SetupContext& ctx, const std::vector<int>& peers) const {
  LOOM_ENFORCE(ctx.config != nullptr, Code::kInvalidArgument, "tcp: SetupContext.config is null");
  LOOM_ENFORCE(ctx.config->chunkBytes >= 1 && ctx.config->chunkBytes < kGoodbye, Code::kInvalidArgument,
               "tcp: chunk size (LOOM_CHUNK_SIZE) %zu out of range", ctx.config->chunkBytes);
  LOOM_ENFORCE(ctx.config->fifoSlots >= 1, Code::kInvalidArgument, "tcp: %d slots (LOOM_SHM_SLOTS) is too few",
               ctx.config->fifoSlots);
  LOOM_ENFORCE(ctx.config->socketsPerPeer >= 1 && ctx.config->socketsPerPeer <= 64, Code::kInvalidArgument,
               "tcp: LOOM_NSOCKS=%d out of range [1, 64]", ctx.config->socketsPerPeer);
  std::vector<int> sorted = peers;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    LOOM_ENFORCE(sorted[i] >= 0 && sorted[i] < ctx.nranks && sorted[i] != ctx.rank, Code::kInvalidArgument,
                 "tcp: peer rank %d out of range [0, %d) or equal to rank %d", sorted[i], ctx.nranks, ctx.rank);
    LOOM_ENFORCE(i == 0 || sorted[i] != sorted[i - 1], Code::kInvalidArgument,
                 "tcp: peer rank %d listed twice on rank %d", sorted[i], ctx.rank);
  }
  return Status::ok();
}

// Every rank contributes whether its step succeeded; all learn who failed.
Status TcpTransport::exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) const {
  std::vector<int32_t> failed(static_cast<size_t>(ctx.nranks), 0);
  failed[static_cast<size_t>(ctx.rank)] = local.isOk() ? 0 : 1;
  Status gathered = ctx.bootstrap->allGather(failed.data(), sizeof(int32_t), ctx.wait);
  if (!local.isOk()) return local;
  if (!gathered.isOk()) return gathered.withContext(strprintf("tcp: exchange after %s: ", step));
  std::string who;
  for (int r = 0; r < ctx.nranks; ++r)
    if (failed[static_cast<size_t>(r)]) who += (who.empty() ? "" : ", ") + std::to_string(r);
  if (who.empty()) return Status::ok();
  return makeError(Code::kRemoteError, "tcp: %s failed on rank(s) %s (see their error)", step, who.c_str());
}

Status TcpTransport::connect(const SetupContext& ctx, const std::vector<int>& peers) {
  LOOM_ENFORCE(!connected_, Code::kInvalidUsage, "tcp: connect() called twice on one transport");
  LOOM_ENFORCE(ctx.nranks >= 1 && ctx.rank >= 0 && ctx.rank < ctx.nranks, Code::kInvalidArgument,
               "tcp: rank %d out of range [0, %d)", ctx.rank, ctx.nranks);
  if (ctx.nranks == 1) {
    connected_ = true;
    return Status::ok();
  }
  LOOM_ENFORCE(ctx.bootstrap != nullptr, Code::kInvalidArgument, "tcp: SetupContext.bootstrap is null with %d ranks",
               ctx.nranks);
  // The transport policy tells every rank alike whether any pair uses TCP,
  // so a job without TCP pairs (one host) pays nothing for this transport.
  LOOM_ENFORCE(ctx.config != nullptr, Code::kInvalidArgument, "tcp: SetupContext.config is null");
  if (peers.empty() && !ctx.usedByAnyPair) {
    connected_ = true;
    return Status::ok();
  }
  // Step 1 (only ranks with TCP peers listen); its outcome travels with the endpoint.
  Status status = validate(ctx, peers);
  Listener listener;
  if (status.isOk() && !peers.empty()) {
    auto opened = openListener(ctx);
    if (opened.isOk()) listener = std::move(opened).value();
    else status = opened.status();
  }
  std::vector<Endpoint> table(static_cast<size_t>(ctx.nranks));
  table[static_cast<size_t>(ctx.rank)] = listener.endpoint;
  table[static_cast<size_t>(ctx.rank)].failed = status.isOk() ? 0 : 1;
  Status gathered = ctx.bootstrap->allGather(table.data(), sizeof(Endpoint), ctx.wait);
  if (!status.isOk()) return status;
  if (!gathered.isOk()) return gathered.withContext("tcp: exchanging listen addresses: ");
  std::string who;
  for (int r = 0; r < ctx.nranks; ++r)
    if (table[static_cast<size_t>(r)].failed) who += (who.empty() ? "" : ", ") + std::to_string(r);
  if (!who.empty())
    return makeError(Code::kRemoteError, "tcp: opening a listening socket failed on rank(s) %s (see their error)",
                     who.c_str());
  if (std::all_of(table.begin(), table.end(), [](const Endpoint& e) { return e.port == 0; })) {
    connected_ = true;  // no rank has TCP peers
    return Status::ok();
  }
  // Step 3, then everyone learns whether all ranks got their sockets.
  const int lanes = ctx.config->socketsPerPeer;
  std::vector<std::vector<bootstrap::Socket>> sockets;
  if (!peers.empty()) {
    for (int peer : peers)
      if (table[static_cast<size_t>(peer)].port == 0)
        status = makeError(Code::kInternalError, "tcp: rank %d has no listener although rank %d connects to it",
                           peer, ctx.rank);
    if (status.isOk()) status = connectLanes(ctx, peers, lanes, listener, table, &sockets);
  }
  LOOM_TRY(exchangeOutcome(ctx, status, "connecting TCP sockets"));
  listener.socket.close();

  byRank_.assign(static_cast<size_t>(ctx.nranks), nullptr);
  for (int peer : peers) {
    const Endpoint& e = table[static_cast<size_t>(peer)];
    std::string host = strprintf("%s, %s", ctx.peers ? (*ctx.peers)[static_cast<size_t>(peer)].hostName : "?", e.host);
    auto link = std::make_unique<PeerLink>(ctx.rank, peer, host, ctx.config->chunkBytes, slotsFor(*ctx.config),
                                           &engine_);
    if (ctx.config->tcpTestDelayMicros > 0) link->send.holdChunksFor(int64_t{ctx.config->tcpTestDelayMicros} * 1000);
    auto& socks = sockets[static_cast<size_t>(peer)];
    for (int lane = 0; lane < lanes; ++lane) {
      link->lanes.emplace_back();
      SocketLane& l = link->lanes.back();
      l.socket = std::move(socks[static_cast<size_t>(lane)]);
      l.sendChunk = static_cast<uint64_t>(lane);
      l.recvChunk = static_cast<uint64_t>(lane);
    }
    byRank_[static_cast<size_t>(peer)] = link.get();
    links_.push_back(std::move(link));
  }
  std::vector<PeerLink*> raw;
  for (auto& l : links_) raw.push_back(l.get());
  if (!raw.empty()) LOOM_TRY(engine_.start(std::move(raw)));
  LOOM_INFO(ctx.log, kSubsysTransport, "tcp: rank %d connected to %zu peer(s) with %d socket(s) each, %d slots of %zu B",
            ctx.rank, peers.size(), lanes, slotsFor(*ctx.config), ctx.config->chunkBytes);
  connected_ = true;
  return Status::ok();
}

SendConnection& TcpTransport::sendTo(int peer, Protocol proto) {
  if (!connected_ || proto != Protocol::kSimple || peer < 0 || peer >= static_cast<int>(byRank_.size()) ||
      !byRank_[static_cast<size_t>(peer)])
    return noSend_;
  return byRank_[static_cast<size_t>(peer)]->send;
}

RecvConnection& TcpTransport::recvFrom(int peer, Protocol proto) {
  if (!connected_ || proto != Protocol::kSimple || peer < 0 || peer >= static_cast<int>(byRank_.size()) ||
      !byRank_[static_cast<size_t>(peer)])
    return noRecv_;
  return byRank_[static_cast<size_t>(peer)]->recv;
}

Status TcpTransport::check() {
  for (auto& link : links_)
    if (link->state.failedUncleanly()) return link->state.error();
  return Status::ok();
}

// Flush what executors committed (bounded), stop the thread, then say goodbye
// on every healthy socket so the peer sees an orderly end, not a crash.
void TcpTransport::closeLinks() {
  if (links_.empty()) return;
  const auto flushEnd = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kFlushSeconds));
  for (;;) {
    bool done = std::all_of(links_.begin(), links_.end(),
                            [](const auto& l) { return l->state.failed() || l->send.allSent(); });
    if (done || Clock::now() >= flushEnd) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  engine_.stop();
  const ChunkHeader goodbye{kGoodbye, 0};
  for (auto& link : links_) {
    if (link->state.failedUncleanly() || !link->send.allSent()) continue;
    for (auto& lane : link->lanes) {
      if (!lane.socket.valid()) continue;
      // 8 bytes into an idle socket's buffer: a non-blocking send succeeds
      // unless the peer stopped reading, and then the goodbye does not matter.
      (void)::send(lane.socket.fd(), &goodbye, sizeof goodbye, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)::shutdown(lane.socket.fd(), SHUT_WR);
      // Unread bytes (the peer's own goodbye) would turn close() into a reset.
      char scratch[256];
      while (::recv(lane.socket.fd(), scratch, sizeof scratch, MSG_DONTWAIT) > 0) {
      }
    }
  }
  links_.clear();
  byRank_.clear();
}

// TCP reaches any peer, on this host (loopback) or another; whether it should
// is the transport policy's call (src/comm/transport_policy.h).
bool canConnect(const PeerInfo&, const PeerInfo&, const Config&) { return true; }

std::unique_ptr<Transport> create() { return std::make_unique<TcpTransport>(); }

constexpr TransportFactory kTcpFactory{"tcp", &canConnect, &create, &preferredChunkBytes};

}  // namespace
}  // namespace loom::transport::tcp

namespace loom::transport {

const TransportFactory& tcpTransportFactory() { return tcp::kTcpFactory; }

}  // namespace loom::transport
