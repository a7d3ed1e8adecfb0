#include "transports/shm/shm_transport.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "common/format.h"
#include "transports/shm/shm_bulletin.h"
#include "transports/shm/shm_connection.h"
#include "transports/shm/shm_header_check.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_ll_connection.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_windows.h"
#include "transports/shm/peer_monitor.h"

namespace loom::transport::shm {
namespace {

class ShmTransport final : public Transport {
 public:
  ShmTransport()
      : invalidSend_("shm: no connection for that peer rank (out of range, unknown protocol, or connect() has not succeeded)"),
        invalidRecv_("shm: no connection for that peer rank (out of range, unknown protocol, or connect() has not succeeded)") {}
  ~ShmTransport() override { unlinkOwn(); }

  const char* name() const override { return "shm"; }
  Status connect(const SetupContext& ctx, const std::vector<int>& peers) override;
  bool supports(Protocol proto) const override { return proto == Protocol::kSimple || proto == Protocol::kLL; }
  SendConnection& sendTo(int peer, Protocol proto) override;
  RecvConnection& recvFrom(int peer, Protocol proto) override;
  PeerHealth* health() override { return connected_ ? monitor_.get() : nullptr; }
  Bulletin* bulletin() override { return connected_ ? bulletin_.get() : nullptr; }
  SharedWindows* windows() override { return connected_ ? windows_.get() : nullptr; }

 private:
  Status validate(const SetupContext& ctx, const std::vector<int>& peers) const;
  Status createOwnSegment(const SetupContext& ctx);
  Status connectToPeer(const SetupContext& ctx, int peer);
  Status exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) const;
  void unlinkOwn();
  std::vector<int> ranksOnThisHost(const SetupContext& ctx) const;
  static int protoIndex(Protocol proto) { return static_cast<int>(proto); }
  static bool validProto(Protocol proto) { return protoIndex(proto) >= 0 && protoIndex(proto) < kNumProtocols; }
  void clearConnections();

  bool connected_ = false;
  std::vector<int> peers_;  // sorted
  SegmentLocation own_;
  bool ownLinked_ = false;
  Mapping ownMapping_;
  std::vector<Mapping> peerMappings_;  // the FIFO this rank writes, in each peer's segment
  // [protocol][rank]
  std::vector<std::unique_ptr<SendConnection>> send_[kNumProtocols];
  std::vector<std::unique_ptr<RecvConnection>> recv_[kNumProtocols];
  UnconnectedSend invalidSend_;
  UnconnectedRecv invalidRecv_;
  std::unique_ptr<PeerMonitor> monitor_;  // null without shm peers
  // Every rank's bulletin as mapped here (own and peers'), by rank; the
  // bulletin exists only when this transport serves every other rank.
  std::vector<BulletinView> bulletinViews_;
  std::unique_ptr<ShmBulletin> bulletin_;
  // The same for the shared windows.
  std::vector<WindowView> windowViews_;
  std::unique_ptr<ShmWindows> windows_;
};

Status ShmTransport::validate(const SetupContext& ctx, const std::vector<int>& peers) const {
  LOOM_ENFORCE(ctx.config != nullptr, Code::kInvalidArgument, "shm: SetupContext.config is null");
  LOOM_ENFORCE(ctx.config->chunkBytes >= 1, Code::kInvalidArgument, "shm: chunk size (LOOM_CHUNK_SIZE) is 0");
  LOOM_ENFORCE(ctx.config->fifoSlots >= 1 && ctx.config->fifoSlots <= kMaxSlots, Code::kInvalidArgument,
               "shm: %d FIFO slots (LOOM_SHM_SLOTS) out of range [1, %d]", ctx.config->fifoSlots, kMaxSlots);
  LOOM_ENFORCE(!ctx.jobTag.empty() && ctx.jobTag.find('/') == std::string::npos, Code::kInvalidArgument,
               "shm: job tag \"%s\" must be non-empty and contain no '/'", ctx.jobTag.c_str());
  std::vector<int> sorted = peers;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    LOOM_ENFORCE(sorted[i] >= 0 && sorted[i] < ctx.nranks, Code::kInvalidArgument,
                 "shm: peer rank %d out of range [0, %d) on rank %d", sorted[i], ctx.nranks, ctx.rank);
    LOOM_ENFORCE(i == 0 || sorted[i] != sorted[i - 1], Code::kInvalidArgument,
                 "shm: peer rank %d listed twice on rank %d", sorted[i], ctx.rank);
  }
  return Status::ok();
}

// Step 1: the segment every inbound peer writes into, with its header and
// FIFO control blocks initialised before any peer can see it.
Status ShmTransport::createOwnSegment(const SetupContext& ctx) {
  const Config& cfg = *ctx.config;
  auto fifoCount = static_cast<uint32_t>(peers_.size());
  SegmentGeometry g = SegmentGeometry::compute(fifoCount, static_cast<uint32_t>(cfg.fifoSlots), cfg.chunkBytes);
  own_ = SegmentLocation(cfg.shmDir, ctx.jobTag, ctx.rank);
  Result<Mapping> mapped = createSegment(own_, g.totalBytes, ctx.rank);
  if (!mapped.isOk()) return mapped.status();
  ownLinked_ = true;
  ownMapping_ = std::move(mapped).value();

  auto* header = new (ownMapping_.data()) SegmentHeader(makeSegmentHeader(g, ctx.rank, fifoCount));
  for (uint32_t i = 0; i < fifoCount; ++i) {
    uint64_t offset = g.headerBytes + i * g.fifoBytes;
    header->entries()[i] = FifoEntry{peers_[i], 0, offset};
    std::byte* region = ownMapping_.data() + offset;
    FifoView view{new (region) FifoControl{}, region + kPageBytes, g.slots, g.slotStride, g.chunkBytes};
    recv_[protoIndex(Protocol::kSimple)][peers_[i]] = std::make_unique<ShmRecvConnection>(view, ctx.rank, peers_[i]);
    LLFifoView llView{new (region + g.llOffset) LLFifoControl{}, region + g.llOffset + kPageBytes, g.llSlots,
                      g.llSlotStride, g.llChunkBytes};
    recv_[protoIndex(Protocol::kLL)][peers_[i]] = std::make_unique<ShmLLRecvConnection>(llView, ctx.rank, peers_[i]);
  }
  std::byte* bulletin = ownMapping_.data() + g.bulletinOffset;
  bulletinViews_[ctx.rank] = BulletinView{new (bulletin) BulletinControl{}, bulletin + kPageBytes, g.bulletinStride,
                                          g.bulletinCapacity};
  std::byte* window = ownMapping_.data() + g.windowOffset;
  auto* windowControl = new (window) WindowControl{};
  windowControl->ownerPid = static_cast<uint64_t>(getpid());
  windowControl->ownerAddress = reinterpret_cast<uintptr_t>(windowControl);
  windowViews_[ctx.rank] = WindowView{windowControl, window + kPageBytes, g.windowBytes};
  LOOM_INFO(ctx.log, kSubsysTransport,
            "shm: created %s (%u inbound FIFOs x (%u slots x %llu bytes + LL %u x %llu bytes), %llu bytes)",
            own_.path().c_str(), fifoCount, g.slots, static_cast<unsigned long long>(g.chunkBytes), g.llSlots,
            static_cast<unsigned long long>(g.llChunkBytes), static_cast<unsigned long long>(g.totalBytes));
  return Status::ok();
}

// Step 2: map the FIFO `peer` keeps for this rank, after checking that the
// peer's segment describes the same geometry.
Status ShmTransport::connectToPeer(const SetupContext& ctx, int peer) {
  const Config& cfg = *ctx.config;
  SegmentLocation where(cfg.shmDir, ctx.jobTag, peer);
  uint64_t fileBytes = 0;
  Result<UniqueFd> fd = openPeerSegment(where, peer, &fileBytes);
  if (!fd.isOk()) return fd.status();
  LOOM_ENFORCE(fileBytes >= kPageBytes, Code::kSystemError, "shm: segment %s of peer rank %d is truncated (%llu bytes)",
               where.path().c_str(), peer, static_cast<unsigned long long>(fileBytes));
  Result<Mapping> headerMap = mapRange(fd->get(), 0, kPageBytes, false, where, peer);
  if (!headerMap.isOk()) return headerMap.status();
  SegmentHeader header;
  std::memcpy(&header, headerMap->data(), sizeof header);
  const PeerSegmentExpectation expect{
      peer, ctx.rank, ctx.nranks, static_cast<uint32_t>(cfg.fifoSlots), cfg.chunkBytes, fileBytes, where.path()};
  Result<SegmentGeometry> geometry = checkSegmentHeader(header, expect);
  if (!geometry.isOk()) return geometry.status();
  const SegmentGeometry g = geometry.value();
  if (g.headerBytes > kPageBytes) {
    headerMap = mapRange(fd->get(), 0, g.headerBytes, false, where, peer);
    if (!headerMap.isOk()) return headerMap.status();
  }
  const auto* entries = reinterpret_cast<const SegmentHeader*>(headerMap->data())->entries();
  Result<uint64_t> fifoOffset = findFifoOffset(entries, header.fifoCount, g, expect);
  if (!fifoOffset.isOk()) return fifoOffset.status();
  Result<Mapping> fifoMap = mapRange(fd->get(), fifoOffset.value(), g.fifoBytes, true, where, peer);
  if (!fifoMap.isOk()) return fifoMap.status();
  std::byte* base = fifoMap->data();
  FifoView view{reinterpret_cast<FifoControl*>(base), base + kPageBytes, g.slots, g.slotStride, g.chunkBytes};
  send_[protoIndex(Protocol::kSimple)][peer] = std::make_unique<ShmSendConnection>(view, ctx.rank, peer);
  LLFifoView llView{reinterpret_cast<LLFifoControl*>(base + g.llOffset), base + g.llOffset + kPageBytes, g.llSlots,
                    g.llSlotStride, g.llChunkBytes};
  send_[protoIndex(Protocol::kLL)][peer] = std::make_unique<ShmLLSendConnection>(llView, ctx.rank, peer);
  peerMappings_.push_back(std::move(fifoMap).value());
  // The peer's bulletin, read here (its signal is written too: a reader
  // that goes to sleep registers there).
  Result<Mapping> bulletinMap = mapRange(fd->get(), g.bulletinOffset, g.bulletinBytes, true, where, peer);
  if (!bulletinMap.isOk()) return bulletinMap.status();
  std::byte* bulletin = bulletinMap->data();
  bulletinViews_[peer] = BulletinView{reinterpret_cast<BulletinControl*>(bulletin), bulletin + kPageBytes,
                                      g.bulletinStride, g.bulletinCapacity};
  peerMappings_.push_back(std::move(bulletinMap).value());
  // The peer's window, read here (its control page is written too, by a
  // reader that goes to sleep on its signal).
  Result<Mapping> windowMap = mapRange(fd->get(), g.windowOffset, kPageBytes + g.windowBytes, true, where, peer);
  if (!windowMap.isOk()) return windowMap.status();
  std::byte* window = windowMap->data();
  windowViews_[peer] = WindowView{reinterpret_cast<WindowControl*>(window), window + kPageBytes, g.windowBytes};
  peerMappings_.push_back(std::move(windowMap).value());
  return Status::ok();
}

// Every rank contributes whether its step succeeded; all learn who failed.
Status ShmTransport::exchangeOutcome(const SetupContext& ctx, const Status& local, const char* step) const {
  if (ctx.nranks == 1) return local;
  std::vector<int32_t> failed(ctx.nranks, 0);
  failed[ctx.rank] = local.isOk() ? 0 : 1;
  Status gathered = ctx.bootstrap->allGather(failed.data(), sizeof(int32_t), ctx.wait);
  if (!local.isOk()) return local;
  if (!gathered.isOk()) return gathered.withContext(strprintf("shm: exchange after %s: ", step));
  std::string who;
  for (int r = 0; r < ctx.nranks; ++r)
    if (failed[r]) who += (who.empty() ? "" : ", ") + std::to_string(r);
  if (who.empty()) return Status::ok();
  return makeError(Code::kRemoteError, "shm: %s failed on rank(s) %s (see their error)", step, who.c_str());
}

// The ranks whose liveness this rank watches: every rank of its host (by the
// peer table, so all of them agree on the list even when the shm peer lists
// are sparse), this rank included, sorted.
std::vector<int> ShmTransport::ranksOnThisHost(const SetupContext& ctx) const {
  std::vector<int> local;
  if (ctx.peers && static_cast<int>(ctx.peers->size()) == ctx.nranks) {
    const uint64_t host = (*ctx.peers)[static_cast<size_t>(ctx.rank)].hostHash;
    for (int r = 0; r < ctx.nranks; ++r)
      if ((*ctx.peers)[static_cast<size_t>(r)].hostHash == host) local.push_back(r);
    return local;
  }
  return {};  // no peer table (pid, host name): nothing to watch
}

Status ShmTransport::connect(const SetupContext& ctx, const std::vector<int>& peers) {
  // Errors that make the outcome exchange itself impossible (or that no peer
  // shares): fail locally, leaving any existing connection intact.
  LOOM_ENFORCE(!connected_, Code::kInvalidUsage, "shm: connect() called twice on one transport");
  LOOM_ENFORCE(ctx.nranks >= 1 && ctx.rank >= 0 && ctx.rank < ctx.nranks, Code::kInvalidArgument,
               "shm: rank %d out of range [0, %d)", ctx.rank, ctx.nranks);
  LOOM_ENFORCE(ctx.bootstrap != nullptr || ctx.nranks == 1, Code::kInvalidArgument,
               "shm: SetupContext.bootstrap is null with %d ranks", ctx.nranks);
  LOOM_ENFORCE(ctx.bootstrap == nullptr || (ctx.bootstrap->rank() == ctx.rank && ctx.bootstrap->nranks() == ctx.nranks),
               Code::kInvalidArgument, "shm: SetupContext says rank %d of %d but its bootstrap says rank %d of %d",
               ctx.rank, ctx.nranks, ctx.bootstrap->rank(), ctx.bootstrap->nranks());
  Status status = validate(ctx, peers);
  if (status.isOk()) {
    peers_ = peers;
    std::sort(peers_.begin(), peers_.end());
    clearConnections();
    bulletinViews_.assign(ctx.nranks, BulletinView{});
    windowViews_.assign(ctx.nranks, WindowView{});
    for (int p = 0; p < kNumProtocols; ++p) {
      send_[p].resize(ctx.nranks);
      recv_[p].resize(ctx.nranks);
    }
    if (!peers_.empty()) status = createOwnSegment(ctx);
    std::vector<int> local = ranksOnThisHost(ctx);
    if (status.isOk() && local.size() > 1) {
      monitor_ = std::make_unique<PeerMonitor>(ctx, std::move(local));
      if (monitor_->isOwner()) status = monitor_->createBoard();
    }
  }
  status = exchangeOutcome(ctx, status, "creating shared-memory segments");
  if (status.isOk()) {
    for (int peer : peers_) {
      status = connectToPeer(ctx, peer);
      if (!status.isOk()) break;
    }
    if (status.isOk() && monitor_) status = monitor_->attach();
    status = exchangeOutcome(ctx, status, "mapping peers' shared-memory segments");
  }
  // Every peer has mapped its FIFO (or setup failed): the name is no longer needed.
  unlinkOwn();
  if (monitor_) monitor_->unlinkBoard();
  if (!status.isOk()) {
    monitor_.reset();
    bulletinViews_.clear();
    windowViews_.clear();
    clearConnections();
    peerMappings_.clear();
    ownMapping_.reset();
    return status;
  }
  for (int p = 0; p < kNumProtocols; ++p) {
    for (int r = 0; r < ctx.nranks; ++r) {
      std::string why = strprintf("shm: rank %d has no connection to rank %d (not among its shm peers)", ctx.rank, r);
      if (!send_[p][r]) send_[p][r] = std::make_unique<UnconnectedSend>(why);
      if (!recv_[p][r]) recv_[p][r] = std::make_unique<UnconnectedRecv>(why);
    }
  }
  if (!peers_.empty() && static_cast<int>(peers_.size()) == ctx.nranks - 1) {
    bulletin_ = std::make_unique<ShmBulletin>(ctx.rank, bulletinViews_);
    windows_ = std::make_unique<ShmWindows>(ctx.rank, windowViews_);
    if (ctx.config->shmSingleCopy) windows_->enablePeerCopies();
    LOOM_INFO(ctx.log, kSubsysTransport, "shm: direct copies with peers' buffers %s",
              windows_->peerCopiesInProcess() ? "work (memcpy: every peer is a thread of this process)"
              : windows_->peerCopies()         ? "work (process_vm_readv with peers in other processes)"
              : ctx.config->shmSingleCopy      ? "refused by the kernel (windows only)"
                                               : "off (LOOM_SHM_SINGLE_COPY=0)");
  }
  connected_ = true;
  return Status::ok();
}

void ShmTransport::clearConnections() {
  for (int p = 0; p < kNumProtocols; ++p) {
    send_[p].clear();
    recv_[p].clear();
  }
}

void ShmTransport::unlinkOwn() {
  if (!ownLinked_) return;
  own_.unlink();
  ownLinked_ = false;
}

SendConnection& ShmTransport::sendTo(int peer, Protocol proto) {
  if (!validProto(proto) || !connected_) return invalidSend_;
  auto& byRank = send_[protoIndex(proto)];
  if (peer < 0 || peer >= static_cast<int>(byRank.size())) return invalidSend_;
  return *byRank[peer];
}

RecvConnection& ShmTransport::recvFrom(int peer, Protocol proto) {
  if (!validProto(proto) || !connected_) return invalidRecv_;
  auto& byRank = recv_[protoIndex(proto)];
  if (peer < 0 || peer >= static_cast<int>(byRank.size())) return invalidRecv_;
  return *byRank[peer];
}

bool canConnect(const PeerInfo& self, const PeerInfo& peer, const Config&) { return self.hostHash == peer.hostHash; }

std::unique_ptr<Transport> create() { return std::make_unique<ShmTransport>(); }

constexpr TransportFactory kShmFactory{"shm", &canConnect, &create};

}  // namespace
}  // namespace loom::transport::shm

namespace loom::transport {

const TransportFactory& shmTransportFactory() { return shm::kShmFactory; }

}  // namespace loom::transport
