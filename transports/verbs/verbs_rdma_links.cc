#include "transports/verbs/verbs_rdma_links.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "common/format.h"
#include "transports/verbs/verbs_setup.h"

namespace loom::transport::verbs {

namespace {

constexpr uint64_t kRecvTag = uint64_t{1} << 63;  // wrId of a receive; sends carry the peer rank alone

std::string rankList(const std::vector<int32_t>& failed) {
  std::string who;
  for (size_t r = 0; r < failed.size(); ++r)
    if (failed[r]) who += (who.empty() ? "" : ", ") + std::to_string(r);
  return who;
}

}  // namespace

VerbsRdmaLinks::~VerbsRdmaLinks() {
  qps_.clear();  // QPs before the memory regions, CQ and PD they use
  cache_.reset();
}

Status VerbsRdmaLinks::open(Provider& provider) {
  auto device = provider.openDevice();
  LOOM_TRY(device.status());
  device_ = std::move(device).value();
  auto pd = device_->allocPd();
  LOOM_TRY(pd.status().withContext(device_->name() + ": "));
  pd_ = std::move(pd).value();
  // Each QP holds at most kSendDepth + kRecvDepth work requests, each with at
  // most one completion: this CQ cannot overrun.
  auto cq = device_->createCq((kSendDepth + kRecvDepth) * (nranks_ - 1) + 16);
  LOOM_TRY(cq.status().withContext(device_->name() + ": "));
  cq_ = std::move(cq).value();
  // Send, receive and scratch buffers of the last few calls (training loops
  // cycle through a handful of gradient buffers).
  cache_ = std::make_unique<RegistrationCache>(*pd_, 64);

  std::random_device rd;
  qps_.resize(static_cast<size_t>(nranks_));
  psns_.assign(static_cast<size_t>(nranks_), 0);
  inFlightTo_.assign(static_cast<size_t>(nranks_), 0);
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    auto qp = pd_->createRcQp(*cq_, *cq_, {kSendDepth, kRecvDepth});
    LOOM_TRY(qp.status().withContext(strprintf("queue pair for rank %d: ", peer)));
    auto& q = qps_[static_cast<size_t>(peer)];
    q = std::move(qp).value();
    LOOM_TRY(q->toInit(device_->port().portNum, kAccessLocalWrite | kAccessRemoteWrite));
    // Posted before the exchange: no peer writes before it has our QPN.
    for (int i = 0; i < kRecvDepth; ++i) LOOM_TRY(q->postRecv(kRecvTag | static_cast<uint64_t>(peer)));
    psns_[static_cast<size_t>(peer)] = rd() & 0xFFFFFF;
  }
  return Status::ok();
}

Status VerbsRdmaLinks::connectQps(void* tablePtr) {
  auto& table = *static_cast<SetupTable*>(tablePtr);
  const RankHeader& mine = table.header(rank_);
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    const RankHeader& theirs = table.header(peer);
    const QpRecord& rec = table.record(peer, rank_);
    LOOM_ENFORCE(theirs.magic == kWireMagic && rec.qpn != 0, Code::kInternalError,
                 "GDR setup on rank %d: the queue pair record of rank %d is corrupt", rank_, peer);
    LOOM_ENFORCE(theirs.ethernet == mine.ethernet, Code::kSystemError,
                 "GDR setup: rank %d's port is %s but rank %d's is %s (one fabric is needed)", rank_,
                 mine.ethernet ? "RoCE" : "InfiniBand", peer, theirs.ethernet ? "RoCE" : "InfiniBand");
    const RemoteQp remote = remoteQpOf(mine, theirs, rec);
    auto& qp = *qps_[static_cast<size_t>(peer)];
    LOOM_TRY(qp.toRtr(device_->port(), remote).withContext(strprintf("GDR queue pair of rank %d to rank %d: ", rank_, peer)));
    LOOM_TRY(qp.toRts(psns_[static_cast<size_t>(peer)])
                 .withContext(strprintf("GDR queue pair of rank %d to rank %d: ", rank_, peer)));
  }
  return Status::ok();
}

Result<std::unique_ptr<RdmaLinks>> VerbsRdmaLinks::connect(int rank, int nranks, Provider& provider,
                                                          bootstrap::Bootstrap& bootstrap, const WaitContext& wait,
                                                          std::string* whyNot) {
  std::unique_ptr<VerbsRdmaLinks> links(new VerbsRdmaLinks(rank, nranks));
  // Step 1: local resources; the outcome travels with the records.
  Status local = links->open(provider);
  SetupTable table(nranks);
  RankHeader& mine = table.header(rank);
  mine = RankHeader{};  // raw bytes: set the magic and defaults
  mine.failed = local.isOk() ? 0 : 1;
  if (local.isOk()) {
    const PortAttributes& port = links->device_->port();
    mine.hasDevice = 1;
    mine.lid = port.lid;
    mine.portNum = port.portNum;
    mine.ethernet = port.ethernet ? 1 : 0;
    mine.mtu = port.activeMtu;
    std::memcpy(mine.gid, port.gid.data(), 16);
    std::snprintf(mine.device, sizeof mine.device, "%s", links->device_->name().c_str());
    for (int peer = 0; peer < nranks; ++peer) {
      if (peer == rank) continue;
      QpRecord& rec = table.record(rank, peer);
      rec.qpn = links->qps_[static_cast<size_t>(peer)]->qpn();
      rec.psn = links->psns_[static_cast<size_t>(peer)];
    }
  }
  LOOM_TRY(bootstrap.allGather(table.data(), table.slotBytes(), wait)
               .withContext(strprintf("GDR setup on rank %d, exchanging queue pairs: ", rank)));
  std::vector<int32_t> failed(static_cast<size_t>(nranks), 0);
  for (int r = 0; r < nranks; ++r) failed[static_cast<size_t>(r)] = table.header(r).failed;
  if (!local.isOk()) {
    *whyNot = local.message();
    return std::unique_ptr<RdmaLinks>();
  }
  if (std::string who = rankList(failed); !who.empty()) {
    *whyNot = strprintf("rank(s) %s could not set up GPUDirect RDMA (their log says why)", who.c_str());
    return std::unique_ptr<RdmaLinks>();
  }
  // Step 2: RTR and RTS; all learn that every QP is ready before anyone writes.
  Status connected = links->connectQps(&table);
  std::fill(failed.begin(), failed.end(), 0);
  failed[static_cast<size_t>(rank)] = connected.isOk() ? 0 : 1;
  LOOM_TRY(bootstrap.allGather(failed.data(), sizeof(int32_t), wait)
               .withContext(strprintf("GDR setup on rank %d, agreeing on connected queue pairs: ", rank)));
  if (!connected.isOk()) {
    *whyNot = connected.message();
    return std::unique_ptr<RdmaLinks>();
  }
  if (std::string who = rankList(failed); !who.empty()) {
    *whyNot = strprintf("rank(s) %s could not connect GPUDirect RDMA queue pairs (their log says why)", who.c_str());
    return std::unique_ptr<RdmaLinks>();
  }
  return std::unique_ptr<RdmaLinks>(std::move(links));
}

Result<RdmaRegionHandle> VerbsRdmaLinks::registerMemory(void* addr, size_t length, uint32_t access,
                                                        uint64_t identity) {
  static_assert(uint32_t{kRdmaLocalWrite} == uint32_t{kAccessLocalWrite} &&
                    uint32_t{kRdmaRemoteWrite} == uint32_t{kAccessRemoteWrite},
                "the contract's access bits are the verbs ones");
  auto region = cache_->get(addr, length, access, identity);
  LOOM_TRY(region.status());
  // The handle keeps the cached registration alive as long as its user holds it.
  struct Held : RdmaRegion {
    RegistrationCache::Handle region;
  };
  auto held = std::make_shared<Held>();
  held->lkey = region.value()->lkey;
  held->rkey = region.value()->rkey;
  held->region = std::move(region).value();
  return RdmaRegionHandle(std::move(held));
}

RdmaRegistrationStats VerbsRdmaLinks::registrationStats() const {
  const RegistrationCache::Stats s = cache_ ? cache_->stats() : RegistrationCache::Stats{};
  return RdmaRegistrationStats{s.hits, s.misses, s.evictions, s.merged, s.invalidations, s.stale};
}

Status VerbsRdmaLinks::write(int peer, const void* local, uint32_t lkey, uint64_t remote, uint32_t rkey, size_t bytes,
                       uint32_t imm) {
  LOOM_ENFORCE(peer >= 0 && peer < nranks_ && peer != rank_, Code::kInternalError,
               "GDR on rank %d: write to rank %d out of range [0, %d)", rank_, peer, nranks_);
  size_t done = 0;
  do {
    const size_t piece = std::min(bytes - done, kMaxWriteBytes);
    const bool last = done + piece == bytes;
    int& queued = inFlightTo_[static_cast<size_t>(peer)];
    LOOM_ENFORCE(queued < kSendDepth, Code::kInternalError,
                 "GDR on rank %d: more than %d writes in flight to rank %d", rank_, kSendDepth, peer);
    RdmaWrite wr;
    wr.wrId = static_cast<uint64_t>(peer);
    wr.localAddr = static_cast<const std::byte*>(local) + done;
    wr.length = static_cast<uint32_t>(piece);
    wr.lkey = lkey;
    wr.remoteAddr = remote + done;
    wr.rkey = rkey;
    wr.withImm = last;
    wr.imm = imm;
    LOOM_TRY(qps_[static_cast<size_t>(peer)]->postWrite(wr).withContext(
        strprintf("GDR on rank %d, writing %zu bytes to rank %d: ", rank_, piece, peer)));
    ++queued;
    ++inFlight_;
    done += piece;
  } while (done < bytes);
  return Status::ok();
}

Status VerbsRdmaLinks::poll(const std::function<Status(int peer, uint32_t imm)>& onImmediate) {
  WorkCompletion wcs[32];
  auto polled = cq_->poll(wcs, 32);
  LOOM_TRY(polled.status().withContext(strprintf("GDR on rank %d: ", rank_)));
  for (int i = 0; i < polled.value(); ++i) {
    const WorkCompletion& wc = wcs[i];
    const bool isRecv = (wc.wrId & kRecvTag) != 0;
    const int peer = static_cast<int>(wc.wrId & 0xFFFFFFFFu);
    if (wc.status != WcStatus::kSuccess)
      return makeError(Code::kRemoteError, "GDR on rank %d: %s rank %d failed: %s (status %d)", rank_,
                       isRecv ? "a receive from" : "an RDMA write to", peer, wcStatusName(wc.status),
                       wc.vendorStatus);
    if (!isRecv) {
      --inFlightTo_[static_cast<size_t>(peer)];
      --inFlight_;
      continue;
    }
    LOOM_ENFORCE(wc.withImm, Code::kInternalError, "GDR on rank %d: a receive from rank %d without immediate",
                 rank_, peer);
    LOOM_TRY(qps_[static_cast<size_t>(peer)]->postRecv(kRecvTag | static_cast<uint64_t>(peer)));
    LOOM_TRY(onImmediate(peer, wc.imm));
  }
  return Status::ok();
}

void VerbsRdmaLinks::fail() {
  for (auto& qp : qps_)
    if (qp) (void)qp->toError();
}

}  // namespace loom::transport::verbs
