#include "transports/verbs/verbs_transport.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "common/format.h"
#include "transports/verbs/device_probe.h"
#include "transports/verbs/registration_cache.h"
#include "transports/verbs/verbs_link.h"
#include "transports/verbs/verbs_progress.h"
#include "transports/verbs/verbs_setup.h"
#ifdef LOOM_HAVE_VERBS
#include "transports/verbs/ibv_provider.h"
#endif

namespace loom::transport {
namespace verbs {
namespace {

constexpr double kFlushSeconds = 2.0;    // destruction: wait for committed chunks' writes
constexpr double kGoodbyeSeconds = 0.5;  // destruction: wait for the goodbyes to complete

class NoSend final : public SendConnection {
 public:
  size_t chunkBytes() const override { return 0; }
  Status acquire(std::byte** slot, const WaitContext&) override {
    *slot = nullptr;
    return {Code::kInvalidUsage, "verbs: no connection to that peer rank (not a verbs peer, or connect() failed)"};
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
    return {Code::kInvalidUsage, "verbs: no connection from that peer rank (not a verbs peer, or connect() failed)"};
  }
  bool tryAcquire(const std::byte** data, size_t* bytes) override {
    *data = nullptr;
    *bytes = 0;
    return false;
  }
  void release() override {}
};

class Unavailable final : public Provider {
 public:
  std::string probe() override { return "no RDMA support (Loom was built without libibverbs)"; }
  std::string probeDeviceMemory() override { return probe(); }
  Result<std::unique_ptr<Device>> openDevice() override { return Status(Code::kSystemError, probe()); }
};

class VerbsTransport final : public Transport, public PeerHealth {
 public:
  explicit VerbsTransport(std::shared_ptr<Provider> provider) : provider_(std::move(provider)) {}
  ~VerbsTransport() override { closeLinks(); }

  const char* name() const override { return "ib"; }
  Status connect(const SetupContext& ctx, const std::vector<int>& peers) override;
  SendConnection& sendTo(int peer, Protocol proto) override {
    VerbsLink* l = linkOf(peer, proto);
    return l ? static_cast<SendConnection&>(l->send) : noSend_;
  }
  RecvConnection& recvFrom(int peer, Protocol proto) override {
    VerbsLink* l = linkOf(peer, proto);
    return l ? static_cast<RecvConnection&>(l->recv) : noRecv_;
  }
  PeerHealth* health() override { return connected_ && !links_.empty() ? this : nullptr; }

  // Waits call this every sleep round. Besides reporting failed links, it
  // probes every peer at most every 100 ms (one zero-byte write each), so a
  // rank blocked on a live peer still learns that another peer died.
  Status check() override {
    const int64_t now = Clock::now().time_since_epoch().count();
    const int64_t every = std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(100)).count();
    int64_t last = lastProbe_.load(std::memory_order_relaxed);
    if (now - last >= every && lastProbe_.compare_exchange_strong(last, now)) {
      for (auto& link : links_) link->probe();
      pump_->progress();
    }
    for (auto& link : links_)
      if (link->failedUncleanly()) return link->error();
    return Status::ok();
  }
  std::string describeStalls() override { return ""; }

 private:
  VerbsLink* linkOf(int peer, Protocol proto) const {
    if (!connected_ || proto != Protocol::kSimple || peer < 0 || peer >= static_cast<int>(byRank_.size()))
      return nullptr;
    return byRank_[static_cast<size_t>(peer)];
  }
  Status validate(const SetupContext& ctx, const std::vector<int>& peers) const;
  Status openResources(const SetupContext& ctx, const std::vector<int>& peers);
  Status connectLinks(const SetupContext& ctx, SetupTable& table);
  Status exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) const;
  std::string hostOf(const SetupContext& ctx, int rank) const {
    return ctx.peers && rank < static_cast<int>(ctx.peers->size()) ? (*ctx.peers)[static_cast<size_t>(rank)].hostName
                                                                   : "?";
  }
  void closeLinks();

  // Declared in creation order: destroyed links first, the device last.
  std::shared_ptr<Provider> provider_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<ProtectionDomain> pd_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<CompletionPump> pump_;
  std::unique_ptr<RegistrationCache> cache_;
  std::vector<std::unique_ptr<VerbsLink>> links_;
  std::vector<VerbsLink*> byRank_;
  std::vector<uint32_t> psns_;  // by rank: the first PSN of our QP to it
  bool connected_ = false;
  std::atomic<int64_t> lastProbe_{0};
  NoSend noSend_;
  NoRecv noRecv_;
};

Status VerbsTransport::validate(const SetupContext& ctx, const std::vector<int>& peers) const {
  const Config& c = *ctx.config;
  LOOM_ENFORCE(c.chunkBytes >= 1 && c.chunkBytes <= (1u << 30), Code::kInvalidArgument,
               "verbs: chunk size (LOOM_CHUNK_SIZE) %zu out of range [1, 1G] on rank %d", c.chunkBytes, ctx.rank);
  LOOM_ENFORCE(c.fifoSlots >= 1 && c.fifoSlots <= 1024, Code::kInvalidArgument,
               "verbs: %d slots (LOOM_SHM_SLOTS) out of range [1, 1024] on rank %d", c.fifoSlots, ctx.rank);
  std::vector<int> sorted = peers;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    LOOM_ENFORCE(sorted[i] >= 0 && sorted[i] < ctx.nranks && sorted[i] != ctx.rank, Code::kInvalidArgument,
                 "verbs: peer rank %d out of range [0, %d) or equal to rank %d", sorted[i], ctx.nranks, ctx.rank);
    LOOM_ENFORCE(i == 0 || sorted[i] != sorted[i - 1], Code::kInvalidArgument,
                 "verbs: peer rank %d listed twice on rank %d", sorted[i], ctx.rank);
  }
  return Status::ok();
}

Status VerbsTransport::openResources(const SetupContext& ctx, const std::vector<int>& peers) {
  const Config& c = *ctx.config;
  auto device = provider_->openDevice();
  if (!device.isOk()) return device.status().withContext(strprintf("verbs on rank %d: ", ctx.rank));
  device_ = std::move(device).value();
  auto pd = device_->allocPd();
  if (!pd.isOk()) return pd.status().withContext(strprintf("verbs on rank %d (%s): ", ctx.rank, device_->name().c_str()));
  pd_ = std::move(pd).value();
  // Every work request yields at most one completion and each QP holds at
  // most sendDepth + recvDepth of them, so this CQ cannot overrun.
  const int perPeer = VerbsLink::sendDepth(c.fifoSlots) + VerbsLink::recvDepth(c.fifoSlots);
  auto cq = device_->createCq(perPeer * static_cast<int>(peers.size()) + 16);
  if (!cq.isOk()) return cq.status().withContext(strprintf("verbs on rank %d (%s): ", ctx.rank, device_->name().c_str()));
  cq_ = std::move(cq).value();
  pump_ = std::make_unique<CompletionPump>(*cq_);
  cache_ = std::make_unique<RegistrationCache>(*pd_, 2 * peers.size() + 16);

  std::random_device rd;
  byRank_.assign(static_cast<size_t>(ctx.nranks), nullptr);
  psns_.assign(static_cast<size_t>(ctx.nranks), 0);
  for (int peer : peers) {
    auto qp = pd_->createRcQp(*cq_, *cq_, {VerbsLink::sendDepth(c.fifoSlots), VerbsLink::recvDepth(c.fifoSlots)});
    if (!qp.isOk()) return qp.status().withContext(strprintf("verbs: queue pair of rank %d for rank %d: ", ctx.rank, peer));
    auto staging = RegisteredRing::create(c.chunkBytes, c.fifoSlots, kAccessLocalWrite, *cache_);
    if (!staging.isOk()) return staging.status();
    auto inbox = RegisteredRing::create(c.chunkBytes, c.fifoSlots, kAccessLocalWrite | kAccessRemoteWrite, *cache_);
    if (!inbox.isOk()) return inbox.status();
    auto link = std::make_unique<VerbsLink>(LinkIdentity{ctx.rank, peer, hostOf(ctx, peer)}, c.chunkBytes,
                                            c.fifoSlots, std::move(qp).value(), std::move(staging).value(),
                                            std::move(inbox).value(), *pump_);
    pump_->add(link.get());
    LOOM_TRY(link->prepare(device_->port().portNum));
    psns_[static_cast<size_t>(peer)] = rd() & 0xFFFFFF;
    byRank_[static_cast<size_t>(peer)] = link.get();
    links_.push_back(std::move(link));
  }
  return Status::ok();
}

Status VerbsTransport::connectLinks(const SetupContext& ctx, SetupTable& table) {
  const RankHeader& mine = table.header(ctx.rank);
  for (auto& link : links_) {
    const int peer = link->who().peerRank;
    const RankHeader& theirs = table.header(peer);
    const QpRecord& rec = table.record(peer, ctx.rank);
    const std::string who = strprintf("rank %d (host %s)", peer, link->who().peerHost.c_str());
    LOOM_ENFORCE(theirs.magic == kWireMagic, Code::kInternalError, "verbs: setup record of %s is corrupt", who.c_str());
    LOOM_ENFORCE(theirs.hasDevice && rec.qpn != 0, Code::kSystemError,
                 "verbs: rank %d chose verbs for %s, which set up no queue pair for it (no RDMA device there? its "
                 "log says; LOOM_TRANSPORT=tcp avoids verbs)",
                 ctx.rank, who.c_str());
    LOOM_ENFORCE(theirs.chunkBytes == mine.chunkBytes && theirs.slots == mine.slots, Code::kInvalidUsage,
                 "verbs: rank %d has LOOM_CHUNK_SIZE=%llu LOOM_SHM_SLOTS=%u but %s has %llu and %u (they must agree)",
                 ctx.rank, static_cast<unsigned long long>(mine.chunkBytes), mine.slots, who.c_str(),
                 static_cast<unsigned long long>(theirs.chunkBytes), theirs.slots);
    LOOM_ENFORCE(theirs.ethernet == mine.ethernet, Code::kSystemError,
                 "verbs: rank %d's port is %s but %s's is %s (one fabric is needed)", ctx.rank,
                 mine.ethernet ? "RoCE" : "InfiniBand", who.c_str(), theirs.ethernet ? "RoCE" : "InfiniBand");
    const RemoteQp remote = remoteQpOf(mine, theirs, rec);
    LOOM_TRY(link->connect(device_->port(), remote, psns_[static_cast<size_t>(peer)], {rec.ringAddr, rec.ringRkey}));
  }
  return Status::ok();
}

// Every rank contributes whether its step succeeded; all learn who failed.
Status VerbsTransport::exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) const {
  std::vector<int32_t> failed(static_cast<size_t>(ctx.nranks), 0);
  failed[static_cast<size_t>(ctx.rank)] = local.isOk() ? 0 : 1;
  Status gathered = ctx.bootstrap->allGather(failed.data(), sizeof(int32_t), ctx.wait);
  if (!local.isOk()) return local;
  if (!gathered.isOk()) return gathered.withContext(strprintf("verbs: exchange after %s: ", step));
  std::string who;
  for (int r = 0; r < ctx.nranks; ++r)
    if (failed[static_cast<size_t>(r)]) who += (who.empty() ? "" : ", ") + std::to_string(r);
  if (who.empty()) return Status::ok();
  return makeError(Code::kRemoteError, "verbs: %s failed on rank(s) %s (see their error)", step, who.c_str());
}

Status VerbsTransport::connect(const SetupContext& ctx, const std::vector<int>& peers) {
  LOOM_ENFORCE(!connected_, Code::kInvalidUsage, "verbs: connect() called twice on one transport");
  LOOM_ENFORCE(ctx.nranks >= 1 && ctx.rank >= 0 && ctx.rank < ctx.nranks, Code::kInvalidArgument,
               "verbs: rank %d out of range [0, %d)", ctx.rank, ctx.nranks);
  LOOM_ENFORCE(ctx.config != nullptr, Code::kInvalidArgument, "verbs: SetupContext.config is null");
  if (ctx.nranks == 1 || !verbsMayServeAnyPair(ctx)) {
    // No rank joins the exchanges, so none may have verbs peers.
    LOOM_ENFORCE(peers.empty(), Code::kInternalError,
                 "verbs: rank %d was given %zu verbs peer(s) although no pair of ranks qualifies", ctx.rank,
                 peers.size());
    connected_ = true;
    return Status::ok();
  }
  LOOM_ENFORCE(ctx.bootstrap != nullptr, Code::kInvalidArgument, "verbs: SetupContext.bootstrap is null");

  // Step 1: local resources; the outcome travels with the records.
  Status status = validate(ctx, peers);
  if (status.isOk() && !peers.empty()) status = openResources(ctx, peers);
  SetupTable table(ctx.nranks);
  RankHeader& mine = table.header(ctx.rank);
  mine = RankHeader{};  // the table is raw bytes: set the magic and defaults
  mine.failed = status.isOk() ? 0 : 1;
  mine.slots = static_cast<uint32_t>(ctx.config->fifoSlots);
  mine.chunkBytes = ctx.config->chunkBytes;
  if (status.isOk() && device_) {
    const PortAttributes& port = device_->port();
    mine.hasDevice = 1;
    mine.lid = port.lid;
    mine.portNum = port.portNum;
    mine.ethernet = port.ethernet ? 1 : 0;
    mine.mtu = port.activeMtu;
    std::memcpy(mine.gid, port.gid.data(), 16);
    std::snprintf(mine.device, sizeof mine.device, "%s", device_->name().c_str());
    for (auto& link : links_) {
      QpRecord& rec = table.record(ctx.rank, link->who().peerRank);
      rec.qpn = link->qpn();
      rec.psn = psns_[static_cast<size_t>(link->who().peerRank)];
      rec.ringAddr = link->inboxAddress();
      rec.ringRkey = link->inboxRkey();
    }
  }
  // Step 2: everyone's records.
  Status gathered = ctx.bootstrap->allGather(table.data(), table.slotBytes(), ctx.wait);
  if (!status.isOk()) return status;
  if (!gathered.isOk()) return gathered.withContext("verbs: exchanging queue pair records: ");
  std::string who;
  for (int r = 0; r < ctx.nranks; ++r)
    if (table.header(r).failed) who += (who.empty() ? "" : ", ") + std::to_string(r);
  if (!who.empty())
    return makeError(Code::kRemoteError, "verbs: setting up queue pairs failed on rank(s) %s (see their error)",
                     who.c_str());
  // Step 3: RTR and RTS, then all learn that every QP is ready before any writes.
  LOOM_TRY(exchangeOutcome(ctx, connectLinks(ctx, table), "moving verbs queue pairs to RTS"));
  connected_ = true;
  if (device_)
    LOOM_INFO(ctx.log, kSubsysTransport, "verbs: rank %d connected to %zu peer(s) over %s port %u (LID %u, %s)",
              ctx.rank, links_.size(), device_->name().c_str(), device_->port().portNum, device_->port().lid,
              device_->port().ethernet ? "RoCE" : "InfiniBand");
  return Status::ok();
}

// Flush committed chunks (bounded), say goodbye to every healthy peer, then
// tear down in reverse order of creation.
void VerbsTransport::closeLinks() {
  if (!links_.empty() && pump_) {
    auto waitAll = [&](double seconds, auto&& done) {
      const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
      for (;;) {
        pump_->progress();
        if (std::all_of(links_.begin(), links_.end(), [&](const auto& l) { return l->failed() || done(*l); })) return;
        if (Clock::now() >= end) return;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    };
    if (connected_) {
      waitAll(kFlushSeconds, [](const VerbsLink& l) { return l.allWritten(); });
      for (auto& link : links_) link->sayGoodbye();
      waitAll(kGoodbyeSeconds, [](const VerbsLink& l) { return l.goodbyeDone(); });
    }
  }
  byRank_.clear();
  links_.clear();
}

bool canConnect(const PeerInfo& self, const PeerInfo& peer, const Config& config) {
  static DeviceProbe probe(defaultVerbsProvider());
  return canConnectWith(probe, self, peer, config);
}

std::unique_ptr<Transport> create() { return std::make_unique<VerbsTransport>(defaultVerbsProvider()); }

constexpr TransportFactory kVerbsFactory{"ib", &canConnect, &create};

}  // namespace

}  // namespace verbs

const TransportFactory& verbsTransportFactory() { return verbs::kVerbsFactory; }

std::unique_ptr<Transport> createVerbsTransport(std::shared_ptr<verbs::Provider> provider) {
  return std::make_unique<verbs::VerbsTransport>(std::move(provider));
}

std::shared_ptr<verbs::Provider> defaultVerbsProvider() {
#ifdef LOOM_HAVE_VERBS
  return verbs::ibvProvider();
#else
  return std::make_shared<verbs::Unavailable>();
#endif
}

}  // namespace loom::transport
