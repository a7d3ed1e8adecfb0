#include "transports/ucx/ucx_transport.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common/format.h"
#include "transports/ucx/ucx_handshake.h"
#include "transports/ucx/ucx_progress.h"
#include "transports/ucx/ucx_tags.h"
#include "transports/ucx/ucx_worker.h"

namespace loom::transport::ucx {
namespace {

constexpr double kFlushSeconds = 2.0;     // how long destruction waits for unsent chunks
constexpr double kShutdownSeconds = 3.0;  // goodbyes, cancellations and endpoint closes together

class NoSend final : public SendConnection {
 public:
  size_t chunkBytes() const override { return 0; }
  Status acquire(std::byte** slot, const WaitContext&) override {
    *slot = nullptr;
    return {Code::kInvalidUsage, "ucx: no connection to that peer rank (not a UCX peer, or connect() has not succeeded)"};
  }
  bool tryAcquire(std::byte** slot) override {
    *slot = nullptr;
    return false;
  }
  void commit(size_t) override {}
};

class NoRecv final : public RecvConnection {
 public:
  size_t chunkBytes() const override { return 0; }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext&) override {
    *data = nullptr;
    *bytes = 0;
    return {Code::kInvalidUsage,
            "ucx: no connection from that peer rank (not a UCX peer, or connect() has not succeeded)"};
  }
  bool tryAcquire(const std::byte** data, size_t* bytes) override {
    *data = nullptr;
    *bytes = 0;
    return false;
  }
  void release() override {}
};

bool canConnect(const PeerInfo& self, const PeerInfo& peer, const Config& config);

class UcxTransport final : public Transport, public PeerHealth {
 public:
  UcxTransport() = default;
  ~UcxTransport() override { close(); }

  const char* name() const override { return "ucx"; }
  Status connect(const SetupContext& ctx, const std::vector<int>& peers) override;
  SendConnection& sendTo(int peer, Protocol proto) override;
  RecvConnection& recvFrom(int peer, Protocol proto) override;
  PeerHealth* health() override { return connected_ && !links_.empty() ? this : nullptr; }

  Status check() override;
  std::string describeStalls() override { return ""; }

 private:
  Status validate(const SetupContext& ctx, const std::vector<int>& peers) const;
  Status connectPeers(const SetupContext& ctx, const std::vector<int>& peers,
                      const std::vector<std::vector<uint8_t>>& addresses);
  Status helloAll(const SetupContext& ctx);
  void close();

  bool connected_ = false;
  std::unique_ptr<UcxWorker> worker_;
  std::unique_ptr<ProgressEngine> engine_;
  std::vector<std::unique_ptr<PeerLink>> links_;
  std::vector<PeerLink*> byRank_;
  NoSend noSend_;
  NoRecv noRecv_;
};

Status UcxTransport::validate(const SetupContext& ctx, const std::vector<int>& peers) const {
  LOOM_ENFORCE(ctx.config->chunkBytes >= 1 && ctx.config->chunkBytes <= 0xffffffffu, Code::kInvalidArgument,
               "ucx: chunk size (LOOM_CHUNK_SIZE) %zu out of range", ctx.config->chunkBytes);
  LOOM_ENFORCE(ctx.config->fifoSlots >= 1, Code::kInvalidArgument, "ucx: %d slots (LOOM_SHM_SLOTS) is too few",
               ctx.config->fifoSlots);
  LOOM_ENFORCE(ctx.nranks <= kMaxTagRanks, Code::kInvalidArgument,
               "ucx: %d ranks exceed the %d its message tags can name", ctx.nranks, kMaxTagRanks);
  std::vector<int> sorted = peers;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    LOOM_ENFORCE(sorted[i] >= 0 && sorted[i] < ctx.nranks && sorted[i] != ctx.rank, Code::kInvalidArgument,
                 "ucx: peer rank %d out of range [0, %d) or equal to rank %d", sorted[i], ctx.nranks, ctx.rank);
    LOOM_ENFORCE(i == 0 || sorted[i] != sorted[i - 1], Code::kInvalidArgument,
                 "ucx: peer rank %d listed twice on rank %d", sorted[i], ctx.rank);
  }
  return Status::ok();
}

// Whether the registry gives any pair of ranks to UCX (it is listed before TCP).
bool anyPairUsesUcx(const SetupContext& ctx) {
  const auto& table = *ctx.peers;
  for (size_t a = 0; a < table.size(); ++a)
    for (size_t b = a + 1; b < table.size(); ++b)
      if (canConnect(table[a], table[b], *ctx.config)) return true;
  return false;
}

Status UcxTransport::connectPeers(const SetupContext& ctx, const std::vector<int>& peers,
                                  const std::vector<std::vector<uint8_t>>& addresses) {
  engine_ = std::make_unique<ProgressEngine>(worker_.get(), ctx.rank);
  byRank_.assign(static_cast<size_t>(ctx.nranks), nullptr);
  for (int peer : peers) {
    LOOM_ENFORCE(!addresses[static_cast<size_t>(peer)].empty(), Code::kInternalError,
                 "ucx: rank %d published no worker address although rank %d connects to it", peer, ctx.rank);
    const char* host = ctx.peers ? (*ctx.peers)[static_cast<size_t>(peer)].hostName : "?";
    auto link = std::make_unique<PeerLink>(ctx.rank, peer, host, ctx.config->chunkBytes, ctx.config->fifoSlots,
                                           engine_.get());
    byRank_[static_cast<size_t>(peer)] = link.get();
    links_.push_back(std::move(link));
    const int pid = ctx.peers ? (*ctx.peers)[static_cast<size_t>(peer)].pid : 0;
    LOOM_TRY(engine_->createEndpoint(*links_.back(), addresses[static_cast<size_t>(peer)], pid));
  }
  return Status::ok();
}

Status UcxTransport::helloAll(const SetupContext& ctx) {
  const uint64_t job = jobTagHash(ctx.jobTag);
  std::vector<PeerLink*> raw;
  for (auto& l : links_) {
    l->helloOut = makeHello(ctx.rank, l->state.peerRank(), ctx.config->chunkBytes, ctx.config->fifoSlots, job);
    raw.push_back(l.get());
  }
  Status s = engine_->exchangeHellos(raw, ctx.wait);
  if (!s.isOk()) return s.withContext(strprintf("ucx: hello between rank %d and its peers: ", ctx.rank));
  for (PeerLink* l : raw) {
    std::string bad = checkHello(l->helloIn, ctx.rank, l->state.peerRank(), ctx.config->chunkBytes,
                                 ctx.config->fifoSlots, job);
    LOOM_ENFORCE(bad.empty(), Code::kInvalidUsage, "ucx: rank %d: %s", ctx.rank, bad.c_str());
  }
  engine_->postInitialReceives(raw);
  return Status::ok();
}

Status UcxTransport::connect(const SetupContext& ctx, const std::vector<int>& peers) {
  LOOM_ENFORCE(!connected_, Code::kInvalidUsage, "ucx: connect() called twice on one transport");
  LOOM_ENFORCE(ctx.nranks >= 1 && ctx.rank >= 0 && ctx.rank < ctx.nranks, Code::kInvalidArgument,
               "ucx: rank %d out of range [0, %d)", ctx.rank, ctx.nranks);
  if (ctx.nranks == 1) {
    connected_ = true;
    return Status::ok();
  }
  LOOM_ENFORCE(ctx.bootstrap != nullptr, Code::kInvalidArgument, "ucx: SetupContext.bootstrap is null with %d ranks",
               ctx.nranks);
  LOOM_ENFORCE(ctx.config != nullptr, Code::kInvalidArgument, "ucx: SetupContext.config is null");
  // Every rank holds the same peer table and the same rule, so all agree
  // without a word when no pair uses UCX, and such jobs pay nothing for it.
  if (ctx.peers && static_cast<int>(ctx.peers->size()) == ctx.nranks && peers.empty() && !anyPairUsesUcx(ctx)) {
    connected_ = true;
    return Status::ok();
  }
  // Steps 1 and 2: only ranks with UCX peers open a worker.
  Status status = validate(ctx, peers);
  if (status.isOk() && !peers.empty()) {
    auto opened = UcxWorker::open(peers.size(), ctx.rank);
    if (opened.isOk()) worker_ = std::move(opened).value();
    else status = opened.status();
  }
  static const std::vector<uint8_t> kNone;
  auto exchanged = exchangeAddresses(ctx, worker_ ? worker_->address() : kNone, status);
  LOOM_TRY(exchanged.status());
  const auto& addresses = exchanged.value();
  if (std::all_of(addresses.begin(), addresses.end(), [](const auto& a) { return a.empty(); })) {
    connected_ = true;  // no rank has UCX peers
    return Status::ok();
  }
  // Step 3: endpoints; step 4: hellos. Each ends with every rank learning who failed.
  if (!peers.empty()) status = connectPeers(ctx, peers, addresses);
  LOOM_TRY(exchangeOutcome(ctx, status, "creating UCX endpoints"));
  if (!peers.empty()) status = helloAll(ctx);
  LOOM_TRY(exchangeOutcome(ctx, status, "the UCX hello"));

  if (!links_.empty()) LOOM_TRY(engine_->start(ctx.wait.spinMicros));
  LOOM_INFO(ctx.log, kSubsysTransport, "ucx: rank %d connected to %zu peer(s) (worker address %zu bytes)", ctx.rank,
            peers.size(), worker_ ? worker_->address().size() : size_t{0});
  connected_ = true;
  return Status::ok();
}

SendConnection& UcxTransport::sendTo(int peer, Protocol proto) {
  if (!connected_ || proto != Protocol::kSimple || peer < 0 || peer >= static_cast<int>(byRank_.size()) ||
      !byRank_[static_cast<size_t>(peer)])
    return noSend_;
  return byRank_[static_cast<size_t>(peer)]->send;
}

RecvConnection& UcxTransport::recvFrom(int peer, Protocol proto) {
  if (!connected_ || proto != Protocol::kSimple || peer < 0 || peer >= static_cast<int>(byRank_.size()) ||
      !byRank_[static_cast<size_t>(peer)])
    return noRecv_;
  return byRank_[static_cast<size_t>(peer)]->recv;
}

Status UcxTransport::check() {
  for (auto& link : links_)
    if (link->state.failedUncleanly()) return link->state.error();
  return Status::ok();
}

// Flush what executors committed (bounded), stop the thread, then goodbye,
// cancel, close endpoints and destroy the worker, in that order.
void UcxTransport::close() {
  if (engine_) {
    const auto flushEnd =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kFlushSeconds));
    for (;;) {
      bool done = std::all_of(links_.begin(), links_.end(),
                              [](const auto& l) { return l->state.failed() || l->send.allSent(); });
      if (done || Clock::now() >= flushEnd) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    engine_->stop();
    engine_->shutdown(kShutdownSeconds);
  }
  worker_.reset();  // after every endpoint is closed and every request released
  engine_.reset();
  byRank_.clear();
  links_.clear();
}

bool canConnect(const PeerInfo& self, const PeerInfo& peer, const Config& config) {
  if (config.transport == "ucx") return true;
  if (!config.transport.empty()) return false;
  return self.hostHash != peer.hostHash;
}

std::unique_ptr<Transport> create() { return std::make_unique<UcxTransport>(); }

constexpr TransportFactory kUcxFactory{"ucx", &canConnect, &create};

}  // namespace
}  // namespace loom::transport::ucx

namespace loom::transport {

const TransportFactory& ucxTransportFactory() { return ucx::kUcxFactory; }

}  // namespace loom::transport
