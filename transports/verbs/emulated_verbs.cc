#include "transports/verbs/emulated_verbs.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "common/format.h"

namespace loom::transport::verbs::emulated {
namespace {

constexpr uint32_t kPsnMask = 0xFFFFFF;  // PSNs are 24 bits

class FabricImpl;

class EmuCq final : public CompletionQueue {
 public:
  EmuCq(std::shared_ptr<FabricImpl> fabric, int capacity);
  ~EmuCq() override;
  Result<int> poll(WorkCompletion* out, int max) override;
  Status armNotify() override;
  int eventFd() const override { return fd_; }
  void drainEvents() override {
    uint64_t v;
    while (::read(fd_, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) {
    }
  }
  // Fabric lock held.
  void pushLocked(const WorkCompletion& wc);

 private:
  std::shared_ptr<FabricImpl> fabric_;
  const size_t capacity_;
  std::deque<WorkCompletion> entries_;
  bool overrun_ = false;
  bool armed_ = false;
  int fd_ = -1;
};

struct MrRecord {
  uint64_t pd = 0;
  int device = 0;
  uintptr_t addr = 0;
  size_t length = 0;
  uint32_t access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  bool revoked = false;
};

class EmuQp;

class FabricImpl final : public Fabric, public std::enable_shared_from_this<FabricImpl> {
 public:
  std::shared_ptr<Provider> provider(int index) override;
  void killDevice(int index) override;
  void revokeRemoteAccess(int index) override;
  std::vector<uint32_t> queuePairsOf(int index) const override;
  QpState stateOf(uint32_t qpn) const override;
  int liveMemoryRegions() const override {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(byLkey.size());
  }
  int liveQueuePairs() const override {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(qps.size());
  }
  uint64_t registrations() const override {
    std::lock_guard<std::mutex> lock(mu);
    return registered;
  }
  uint64_t rnrErrors() const override {
    std::lock_guard<std::mutex> lock(mu);
    return rnr;
  }

  mutable std::mutex mu;  // guards everything below and every emulated object
  std::map<uint32_t, EmuQp*> qps;
  std::map<uint32_t, MrRecord> byLkey;
  std::map<uint32_t, uint32_t> rkeyToLkey;
  uint32_t nextQpn = 0x100;
  uint32_t nextKey = 0x1000;
  uint64_t nextPd = 1;
  uint64_t registered = 0;
  uint64_t rnr = 0;
};

EmuCq::EmuCq(std::shared_ptr<FabricImpl> fabric, int capacity)
    : fabric_(std::move(fabric)), capacity_(static_cast<size_t>(capacity)) {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

EmuCq::~EmuCq() {
  if (fd_ >= 0) ::close(fd_);
}

Result<int> EmuCq::poll(WorkCompletion* out, int max) {
  std::lock_guard<std::mutex> lock(fabric_->mu);
  if (overrun_)
    return makeError(Code::kSystemError, "completion queue overrun (more than %zu completions were not polled)",
                     capacity_);
  int n = 0;
  while (n < max && !entries_.empty()) {
    out[n++] = entries_.front();
    entries_.pop_front();
  }
  return n;
}

Status EmuCq::armNotify() {
  std::lock_guard<std::mutex> lock(fabric_->mu);
  armed_ = true;
  return Status::ok();
}

void EmuCq::pushLocked(const WorkCompletion& wc) {
  if (overrun_) return;
  if (entries_.size() >= capacity_) {
    overrun_ = true;  // as hardware: the CQ is lost, not the oldest entry
  } else {
    entries_.push_back(wc);
  }
  if (armed_) {
    armed_ = false;
    uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }
}

class EmuQp final : public QueuePair {
 public:
  EmuQp(std::shared_ptr<FabricImpl> fabric, uint64_t pd, int device, uint16_t lid, EmuCq& sendCq, EmuCq& recvCq,
        const QpCapacity& cap)
      : fabric_(std::move(fabric)), pd_(pd), device_(device), lid_(lid), sendCq_(sendCq), recvCq_(recvCq),
        cap_(cap) {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    qpn_ = fabric_->nextQpn++;
    fabric_->qps[qpn_] = this;
  }
  ~EmuQp() override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    fabric_->qps.erase(qpn_);
  }

  uint32_t qpn() const override { return qpn_; }
  QpState state() const override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    return state_;
  }
  Status toInit(uint8_t portNum, uint32_t access) override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    LOOM_TRY(expectLocked(QpState::kReset, "INIT"));
    access_ = access;
    state_ = QpState::kInit;
    return Status::ok();
  }
  Status toRtr(const PortAttributes&, const RemoteQp& remote) override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    LOOM_TRY(expectLocked(QpState::kInit, "RTR"));
    LOOM_ENFORCE(remote.qpn != 0 && remote.lid != 0, Code::kSystemError,
                 "ibv_modify_qp(RTR): Invalid argument (remote QPN %u, LID %u)", remote.qpn, remote.lid);
    remote_ = remote;
    recvPsn_ = remote.psn & kPsnMask;
    state_ = QpState::kRtr;
    return Status::ok();
  }
  Status toRts(uint32_t localPsn) override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    LOOM_TRY(expectLocked(QpState::kRtr, "RTS"));
    sendPsn_ = localPsn & kPsnMask;
    state_ = QpState::kRts;
    return Status::ok();
  }
  Status toError() override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    failLocked();
    return Status::ok();
  }
  Status postWrite(const RdmaWrite& wr) override;
  Status postRecv(uint64_t wrId) override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    if (state_ == QpState::kReset)
      return makeError(Code::kSystemError, "ibv_post_recv: Invalid argument (QP %u in state RESET)", qpn_);
    if (state_ == QpState::kError) {
      recvCq_.pushLocked(flushed(wrId));
      return Status::ok();
    }
    if (recvs_.size() >= static_cast<size_t>(cap_.maxRecvWr))
      return makeError(Code::kSystemError, "ibv_post_recv: Cannot allocate memory (receive queue of QP %u full, %d)",
                       qpn_, cap_.maxRecvWr);
    recvs_.push_back(wrId);
    return Status::ok();
  }

  // Fabric lock held.
  void failLocked() {
    if (state_ == QpState::kError) return;
    state_ = QpState::kError;
    for (uint64_t id : recvs_) recvCq_.pushLocked(flushed(id));
    recvs_.clear();
  }
  int device() const { return device_; }
  QpState stateLocked() const { return state_; }

 private:
  Status expectLocked(QpState from, const char* to) const {
    if (state_ == from) return Status::ok();
    return makeError(Code::kSystemError, "ibv_modify_qp(%s): Invalid argument (QP %u is in state %s, not %s)", to,
                     qpn_, qpStateName(state_), qpStateName(from));
  }
  WorkCompletion flushed(uint64_t wrId) const {
    WorkCompletion wc;
    wc.wrId = wrId;
    wc.status = WcStatus::kWrFlushError;
    wc.qpNum = qpn_;
    return wc;
  }
  // The requester's error completion; the QP goes to ERR as on hardware.
  void failWriteLocked(uint64_t wrId, WcStatus status) {
    WorkCompletion wc;
    wc.wrId = wrId;
    wc.status = status;
    wc.qpNum = qpn_;
    sendCq_.pushLocked(wc);
    failLocked();
  }
  bool localRangeOkLocked(const RdmaWrite& wr) const {
    auto it = fabric_->byLkey.find(wr.lkey);
    if (it == fabric_->byLkey.end() || it->second.pd != pd_) return false;
    uintptr_t a = reinterpret_cast<uintptr_t>(wr.localAddr);
    return a >= it->second.addr && a + wr.length <= it->second.addr + it->second.length;
  }

  std::shared_ptr<FabricImpl> fabric_;
  const uint64_t pd_;
  const int device_;
  const uint16_t lid_;
  EmuCq& sendCq_;
  EmuCq& recvCq_;
  const QpCapacity cap_;
  uint32_t qpn_ = 0;
  QpState state_ = QpState::kReset;
  uint32_t access_ = 0;
  RemoteQp remote_;
  uint32_t sendPsn_ = 0;
  uint32_t recvPsn_ = 0;
  std::deque<uint64_t> recvs_;
};

Status EmuQp::postWrite(const RdmaWrite& wr) {
  std::lock_guard<std::mutex> lock(fabric_->mu);
  if (state_ == QpState::kError) {
    sendCq_.pushLocked(flushed(wr.wrId));
    return Status::ok();
  }
  if (state_ != QpState::kRts)
    return makeError(Code::kSystemError, "ibv_post_send: Invalid argument (QP %u is in state %s, not RTS)", qpn_,
                     qpStateName(state_));
  if (wr.length > 0 && !localRangeOkLocked(wr)) {
    failWriteLocked(wr.wrId, WcStatus::kLocalProtectionError);
    return Status::ok();
  }
  // The responder: reachable only if it exists, is bound to us and expects our PSN.
  auto peerIt = fabric_->qps.find(remote_.qpn);
  EmuQp* peer = peerIt == fabric_->qps.end() ? nullptr : peerIt->second;
  if (!peer || peer->lid_ != remote_.lid || (peer->state_ != QpState::kRtr && peer->state_ != QpState::kRts) ||
      peer->remote_.qpn != qpn_ || peer->remote_.lid != lid_ || peer->recvPsn_ != sendPsn_) {
    failWriteLocked(wr.wrId, WcStatus::kRetryExceeded);
    return Status::ok();
  }
  if (wr.length > 0) {
    auto rk = fabric_->rkeyToLkey.find(wr.rkey);
    const MrRecord* mr = rk == fabric_->rkeyToLkey.end() ? nullptr : &fabric_->byLkey.at(rk->second);
    bool ok = mr && !mr->revoked && mr->pd == peer->pd_ && (mr->access & kAccessRemoteWrite) &&
              (peer->access_ & kAccessRemoteWrite) && wr.remoteAddr >= mr->addr &&
              wr.remoteAddr + wr.length <= mr->addr + mr->length;
    if (!ok) {
      failWriteLocked(wr.wrId, WcStatus::kRemoteAccessError);
      peer->failLocked();
      return Status::ok();
    }
  }
  if (wr.withImm && peer->recvs_.empty()) {
    ++fabric_->rnr;
    failWriteLocked(wr.wrId, WcStatus::kRnrRetryExceeded);
    return Status::ok();
  }
  if (wr.length > 0) std::memcpy(reinterpret_cast<void*>(wr.remoteAddr), wr.localAddr, wr.length);
  sendPsn_ = (sendPsn_ + 1) & kPsnMask;
  peer->recvPsn_ = (peer->recvPsn_ + 1) & kPsnMask;
  if (wr.withImm) {
    WorkCompletion rc;
    rc.wrId = peer->recvs_.front();
    peer->recvs_.pop_front();
    rc.opcode = WcOpcode::kRecvRdmaWithImm;
    rc.qpNum = peer->qpn_;
    rc.byteLen = wr.length;
    rc.imm = wr.imm;
    rc.withImm = true;
    peer->recvCq_.pushLocked(rc);
  }
  WorkCompletion sc;
  sc.wrId = wr.wrId;
  sc.opcode = WcOpcode::kRdmaWrite;
  sc.qpNum = qpn_;
  sendCq_.pushLocked(sc);
  return Status::ok();
}

class EmuPd final : public ProtectionDomain {
 public:
  EmuPd(std::shared_ptr<FabricImpl> fabric, int device, uint16_t lid) : fabric_(std::move(fabric)), device_(device), lid_(lid) {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    id_ = fabric_->nextPd++;
  }
  Result<MemoryRegion> registerMemory(void* addr, size_t length, uint32_t access) override {
    if (!addr || length == 0)
      return makeError(Code::kSystemError, "ibv_reg_mr: Invalid argument (address %p, %zu bytes)", addr, length);
    if ((access & (kAccessRemoteWrite)) && !(access & kAccessLocalWrite))
      return makeError(Code::kSystemError, "ibv_reg_mr: Invalid argument (remote write without local write)");
    std::lock_guard<std::mutex> lock(fabric_->mu);
    MrRecord rec;
    rec.pd = id_;
    rec.device = device_;
    rec.addr = reinterpret_cast<uintptr_t>(addr);
    rec.length = length;
    rec.access = access;
    rec.lkey = fabric_->nextKey++;
    rec.rkey = fabric_->nextKey++;
    fabric_->byLkey[rec.lkey] = rec;
    fabric_->rkeyToLkey[rec.rkey] = rec.lkey;
    ++fabric_->registered;
    MemoryRegion mr;
    mr.addr = addr;
    mr.length = length;
    mr.lkey = rec.lkey;
    mr.rkey = rec.rkey;
    mr.access = access;
    return mr;
  }
  Status deregisterMemory(const MemoryRegion& mr) override {
    std::lock_guard<std::mutex> lock(fabric_->mu);
    auto it = fabric_->byLkey.find(mr.lkey);
    if (it == fabric_->byLkey.end() || it->second.pd != id_)
      return makeError(Code::kSystemError, "ibv_dereg_mr: Invalid argument (unknown lkey 0x%x)", mr.lkey);
    fabric_->rkeyToLkey.erase(it->second.rkey);
    fabric_->byLkey.erase(it);
    return Status::ok();
  }
  Result<std::unique_ptr<QueuePair>> createRcQp(CompletionQueue& sendCq, CompletionQueue& recvCq,
                                                const QpCapacity& capacity) override {
    auto* s = dynamic_cast<EmuCq*>(&sendCq);
    auto* r = dynamic_cast<EmuCq*>(&recvCq);
    if (!s || !r) return makeError(Code::kInternalError, "emulated verbs: CQ of another backend");
    return std::unique_ptr<QueuePair>(std::make_unique<EmuQp>(fabric_, id_, device_, lid_, *s, *r, capacity));
  }

 private:
  std::shared_ptr<FabricImpl> fabric_;
  const int device_;
  const uint16_t lid_;
  uint64_t id_ = 0;
};

class EmuDevice final : public Device {
 public:
  EmuDevice(std::shared_ptr<FabricImpl> fabric, int index) : fabric_(std::move(fabric)), index_(index) {
    name_ = strprintf("emu%d", index);
    port_.portNum = 1;
    port_.lid = static_cast<uint16_t>(index + 1);
    port_.gid[0] = 0xfe;
    port_.gid[1] = 0x80;
    port_.gid[15] = static_cast<uint8_t>(index + 1);
  }
  const std::string& name() const override { return name_; }
  const PortAttributes& port() const override { return port_; }
  Result<std::unique_ptr<ProtectionDomain>> allocPd() override {
    return std::unique_ptr<ProtectionDomain>(std::make_unique<EmuPd>(fabric_, index_, port_.lid));
  }
  Result<std::unique_ptr<CompletionQueue>> createCq(int capacity) override {
    if (capacity < 1) return makeError(Code::kSystemError, "ibv_create_cq: Invalid argument (capacity %d)", capacity);
    auto cq = std::make_unique<EmuCq>(fabric_, capacity);
    if (cq->eventFd() < 0) return makeSystemError(errno, "eventfd for an emulated completion channel");
    return std::unique_ptr<CompletionQueue>(std::move(cq));
  }

 private:
  std::shared_ptr<FabricImpl> fabric_;
  int index_;
  std::string name_;
  PortAttributes port_;
};

class EmuProvider final : public Provider {
 public:
  EmuProvider(std::shared_ptr<FabricImpl> fabric, int index) : fabric_(std::move(fabric)), index_(index) {}
  std::string probe() override { return ""; }
  std::string probeDeviceMemory() override { return ""; }  // any memory is bytes to the emulation
  Result<std::unique_ptr<Device>> openDevice() override {
    return std::unique_ptr<Device>(std::make_unique<EmuDevice>(fabric_, index_));
  }

 private:
  std::shared_ptr<FabricImpl> fabric_;
  int index_;
};

class NoDevice final : public Provider {
 public:
  explicit NoDevice(std::string reason) : reason_(std::move(reason)) {}
  std::string probe() override { return reason_; }
  std::string probeDeviceMemory() override { return reason_; }
  Result<std::unique_ptr<Device>> openDevice() override { return Status(Code::kSystemError, reason_); }

 private:
  std::string reason_;
};

std::shared_ptr<Provider> FabricImpl::provider(int index) {
  return std::make_shared<EmuProvider>(shared_from_this(), index);
}

void FabricImpl::killDevice(int index) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [qpn, qp] : qps)
    if (qp->device() == index) qp->failLocked();
}

void FabricImpl::revokeRemoteAccess(int index) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [lkey, rec] : byLkey)
    if (rec.device == index && (rec.access & kAccessRemoteWrite)) rec.revoked = true;
}

std::vector<uint32_t> FabricImpl::queuePairsOf(int index) const {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<uint32_t> out;
  for (const auto& [qpn, qp] : qps)
    if (qp->device() == index) out.push_back(qpn);
  return out;
}

QpState FabricImpl::stateOf(uint32_t qpn) const {
  std::lock_guard<std::mutex> lock(mu);
  auto it = qps.find(qpn);
  return it == qps.end() ? QpState::kReset : it->second->stateLocked();
}

}  // namespace

std::shared_ptr<Fabric> Fabric::create() { return std::make_shared<FabricImpl>(); }

std::shared_ptr<Provider> noDeviceProvider(std::string reason) { return std::make_shared<NoDevice>(std::move(reason)); }

}  // namespace loom::transport::verbs::emulated
