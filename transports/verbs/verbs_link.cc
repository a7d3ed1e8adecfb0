#include "transports/verbs/verbs_link.h"

#include <cstdlib>
#include <new>

#include "common/format.h"
#include "transports/verbs/verbs_progress.h"

namespace loom::transport::verbs {

Result<std::unique_ptr<RegisteredRing>> RegisteredRing::create(size_t chunkBytes, int slots, uint32_t access,
                                                               RegistrationCache& cache) {
  constexpr size_t kAlign = 4096;
  size_t bytes = (chunkBytes * static_cast<size_t>(slots) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (!p) return makeError(Code::kSystemError, "verbs: allocating a ring of %d x %zu bytes failed", slots, chunkBytes);
  std::unique_ptr<RegisteredRing> ring(
      new RegisteredRing(static_cast<std::byte*>(p), bytes, chunkBytes, static_cast<uint32_t>(slots), cache));
  auto region = cache.get(p, bytes, access);
  if (!region.isOk()) return region.status();
  ring->region_ = std::move(region).value();
  return ring;
}

RegisteredRing::~RegisteredRing() {
  // The cache must forget this range before the memory can be reused.
  cache_.invalidate(base_, bytes_);
  region_.reset();
  std::free(base_);
}

size_t VerbsSendConnection::chunkBytes() const { return link_.chunkBytes(); }
size_t VerbsRecvConnection::chunkBytes() const { return link_.chunkBytes(); }

VerbsLink::VerbsLink(LinkIdentity who, size_t chunkBytes, int slots, std::unique_ptr<QueuePair> qp,
                     std::unique_ptr<RegisteredRing> staging, std::unique_ptr<RegisteredRing> inbox,
                     CompletionPump& pump)
    : send(*this), recv(*this), who_(std::move(who)), chunkBytes_(chunkBytes),
      slots_(static_cast<uint32_t>(slots)), qp_(std::move(qp)), staging_(std::move(staging)),
      inbox_(std::move(inbox)), pump_(pump), sizes_(static_cast<size_t>(slots), 0) {}

VerbsLink::~VerbsLink() {
  pump_.remove(this);
  qp_.reset();  // before the rings' memory regions
}

std::string VerbsLink::describe() const {
  return strprintf("rank %d (host %s)", who_.peerRank, who_.peerHost.c_str());
}

Status VerbsLink::prepare(uint8_t portNum) {
  LOOM_TRY(qp_->toInit(portNum, kAccessLocalWrite | kAccessRemoteWrite)
               .withContext(strprintf("verbs: queue pair for %s: ", describe().c_str())));
  for (int i = 0; i < recvDepth(static_cast<int>(slots_)); ++i)
    LOOM_TRY(qp_->postRecv(makeWrId(kWrRecv, recvPosted_++))
                 .withContext(strprintf("verbs: posting receives for %s: ", describe().c_str())));
  return Status::ok();
}

Status VerbsLink::connect(const PortAttributes& local, const RemoteQp& remote, uint32_t localPsn,
                          const RemoteRing& ring) {
  remote_ = ring;
  const std::string ctx = strprintf("verbs: connecting rank %d with %s (QPN %u): ", who_.selfRank, describe().c_str(),
                                    remote.qpn);
  LOOM_TRY(qp_->toRtr(local, remote).withContext(ctx));
  LOOM_TRY(qp_->toRts(localPsn).withContext(ctx));
  return Status::ok();
}

void VerbsLink::fail(Status status, bool clean) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = std::move(status);
    clean_.store(clean, std::memory_order_release);
    failed_.store(true, std::memory_order_release);
  }
}

Status VerbsLink::error() const {
  std::lock_guard<std::mutex> lock(errorMutex_);
  return error_;
}

Status VerbsLink::post(const RdmaWrite& wr) {
  Status s = qp_->postWrite(wr);
  if (!s.isOk()) fail(s.withContext(strprintf("verbs: rank %d posting to %s: ", who_.selfRank, describe().c_str())));
  return s;
}

Status VerbsLink::completionError(const WorkCompletion& wc) const {
  const char* op = "a receive";
  switch (wrKindOf(wc.wrId)) {
    case kWrData: op = "a chunk write"; break;
    case kWrCredit: op = "a credit write"; break;
    case kWrProbe: op = "a liveness probe"; break;
    case kWrGoodbye: op = "the goodbye"; break;
    case kWrRecv: op = "a receive"; break;
  }
  Code code = wc.status == WcStatus::kLocalProtectionError || wc.status == WcStatus::kLocalLengthError
                  ? Code::kInternalError
                  : Code::kRemoteError;
  if (wc.status == WcStatus::kWrFlushError)
    return makeError(code, "verbs: the queue pair of rank %d to %s is in error state (%s flushed)", who_.selfRank,
                     describe().c_str(), op);
  return makeError(code, "verbs: %s from rank %d to %s failed: %s (status %d)", op, who_.selfRank,
                   describe().c_str(), wcStatusName(wc.status), wc.vendorStatus);
}

Status VerbsLink::protocolError(const char* what, unsigned long long value) const {
  return makeError(Code::kRemoteError, "verbs: protocol error on the link from %s to rank %d: %s (%llu)",
                   describe().c_str(), who_.selfRank, what, value);
}

void VerbsLink::onCompletion(const WorkCompletion& wc) {
  if (wc.status != WcStatus::kSuccess) {
    fail(completionError(wc));
    return;
  }
  switch (wrKindOf(wc.wrId)) {
    case kWrData:
      written_.fetch_add(1, std::memory_order_acq_rel);
      return;
    case kWrCredit: {
      std::lock_guard<std::mutex> lock(postMutex_);
      --creditsInFlight_;
    }
      returnCredits();  // releases that came while two credits were in flight
      return;
    case kWrProbe: {
      std::lock_guard<std::mutex> lock(postMutex_);
      probeInFlight_ = false;
      return;
    }
    case kWrGoodbye:
      goodbyeDone_.store(true, std::memory_order_release);
      return;
    case kWrRecv:
      break;
  }
  // A message from the peer: repost the receive it consumed first.
  Status reposted = qp_->postRecv(makeWrId(kWrRecv, recvPosted_++));
  if (!reposted.isOk()) {
    fail(reposted.withContext(strprintf("verbs: rank %d reposting a receive for %s: ", who_.selfRank,
                                        describe().c_str())));
    return;
  }
  if (!wc.withImm) {
    fail(protocolError("receive completion without immediate data", wc.wrId));
    return;
  }
  const uint32_t type = wc.imm >> kImmTypeShift;
  const uint32_t count = wc.imm & kImmCountMask;
  if (type == kImmData) {
    uint64_t n = arrived_.load(std::memory_order_relaxed);
    if (count != (n & kImmCountMask)) return fail(protocolError("chunk out of sequence, expected number", n));
    if (wc.byteLen > chunkBytes_) return fail(protocolError("chunk larger than LOOM_CHUNK_SIZE, bytes", wc.byteLen));
    sizes_[n % slots_] = wc.byteLen;
    arrived_.store(n + 1, std::memory_order_release);
  } else if (type == kImmCredit) {
    uint64_t seen = released_.load(std::memory_order_relaxed);
    uint64_t now = seen + ((count - static_cast<uint32_t>(seen)) & kImmCountMask);
    if (now > head_.load(std::memory_order_acquire)) return fail(protocolError("more credits than chunks sent", now));
    released_.store(now, std::memory_order_release);
  } else if (type == kImmGoodbye) {
    fail(makeError(Code::kRemoteError, "verbs: %s closed its connection to rank %d (communicator destroyed)",
                   describe().c_str(), who_.selfRank),
         /*clean=*/true);
  } else {
    fail(protocolError("unknown immediate", wc.imm));
  }
}

bool VerbsLink::hasRoom() const {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t released = released_.load(std::memory_order_acquire);
  const uint64_t written = written_.load(std::memory_order_acquire);
  return head - released < slots_ && head - written < slots_;
}

void VerbsLink::postData(size_t bytes) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  RdmaWrite wr;
  wr.wrId = makeWrId(kWrData, head);
  wr.localAddr = staging_->slot(head);
  wr.length = static_cast<uint32_t>(bytes);
  wr.lkey = staging_->lkey();
  wr.remoteAddr = remote_.address + (head % slots_) * chunkBytes_;
  wr.rkey = remote_.rkey;
  wr.withImm = true;
  wr.imm = makeImm(kImmData, head);
  // Counted before posting: the peer's credit for it may be reaped at once.
  head_.store(head + 1, std::memory_order_release);
  (void)post(wr);
}

void VerbsLink::returnCredits() {
  std::lock_guard<std::mutex> lock(postMutex_);
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  if (failed() || creditSent_ == tail || creditsInFlight_ >= 2) return;
  RdmaWrite wr;
  wr.wrId = makeWrId(kWrCredit, tail);
  wr.remoteAddr = remote_.address;
  wr.rkey = remote_.rkey;
  wr.withImm = true;
  wr.imm = makeImm(kImmCredit, tail);
  if (post(wr).isOk()) {
    creditSent_ = tail;
    ++creditsInFlight_;
  }
}

void VerbsLink::probe() {
  std::lock_guard<std::mutex> lock(postMutex_);
  if (failed() || probeInFlight_) return;
  RdmaWrite wr;
  wr.wrId = makeWrId(kWrProbe, 0);
  wr.remoteAddr = remote_.address;
  wr.rkey = remote_.rkey;
  if (post(wr).isOk()) probeInFlight_ = true;
}

void VerbsLink::sayGoodbye() {
  std::lock_guard<std::mutex> lock(postMutex_);
  if (failed()) {
    goodbyeDone_.store(true, std::memory_order_release);
    return;
  }
  RdmaWrite wr;
  wr.wrId = makeWrId(kWrGoodbye, 0);
  wr.remoteAddr = remote_.address;
  wr.rkey = remote_.rkey;
  wr.withImm = true;
  wr.imm = makeImm(kImmGoodbye, 0);
  if (!post(wr).isOk()) goodbyeDone_.store(true, std::memory_order_release);
}

// --- the executor's side ---

Status VerbsSendConnection::acquire(std::byte** slot, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  VerbsLink& l = link_;
  l.pump_.progress();  // one non-blocking poll: reports a failed write at the next acquire
  if (!l.hasRoom() && !l.failed()) {
    auto ready = [&] { return l.hasRoom() || l.failed(); };
    auto what = [&] {
      return strprintf("a free slot to send to %s over verbs (%u chunks in flight, %llu written, %llu released)",
                       l.describe().c_str(), l.slots_, static_cast<unsigned long long>(l.written_.load()),
                       static_cast<unsigned long long>(l.released_.load()));
    };
    LOOM_TRY(waitForLink(l, l.pump_, wait, ready, what));
  }
  if (l.failed()) return l.error();
  acquired_ = true;
  *slot = l.staging_->slot(l.head_.load(std::memory_order_relaxed));
  return Status::ok();
}

bool VerbsSendConnection::tryAcquire(std::byte** slot) {
  VerbsLink& l = link_;
  if (!misuse_.isOk() || l.failed()) return false;
  if (!l.hasRoom()) {
    l.pump_.progress();
    if (!l.hasRoom() || l.failed()) return false;
  }
  acquired_ = true;
  *slot = l.staging_->slot(l.head_.load(std::memory_order_relaxed));
  return true;
}

void VerbsSendConnection::commit(size_t bytes) {
  if (!acquired_ || bytes > link_.chunkBytes()) {
    if (misuse_.isOk())
      misuse_ = acquired_ ? makeError(Code::kInternalError,
                                      "verbs send to rank %d: commit of %zu bytes exceeds the chunk size %zu",
                                      link_.who().peerRank, bytes, link_.chunkBytes())
                          : makeError(Code::kInternalError, "verbs send to rank %d: commit without acquire",
                                      link_.who().peerRank);
    return;
  }
  acquired_ = false;
  link_.postData(bytes);
}

Status VerbsRecvConnection::acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  VerbsLink& l = link_;
  if (!l.hasChunk()) {
    auto ready = [&] { return l.hasChunk() || l.failed(); };
    auto what = [&] {
      return strprintf("chunk %llu from %s to rank %d over verbs",
                       static_cast<unsigned long long>(l.tail_.load()), l.describe().c_str(), l.who_.selfRank);
    };
    LOOM_TRY(waitForLink(l, l.pump_, wait, ready, what));
    // Chunks that arrived before a failure are still delivered.
    if (!l.hasChunk()) return l.error();
  }
  const uint64_t tail = l.tail_.load(std::memory_order_relaxed);
  acquired_ = true;
  *data = l.inbox_->slot(tail);
  *bytes = l.sizes_[tail % l.slots_];
  return Status::ok();
}

bool VerbsRecvConnection::tryAcquire(const std::byte** data, size_t* bytes) {
  VerbsLink& l = link_;
  if (!misuse_.isOk()) return false;
  if (!l.hasChunk()) {
    l.pump_.progress();
    if (!l.hasChunk()) return false;
  }
  const uint64_t tail = l.tail_.load(std::memory_order_relaxed);
  acquired_ = true;
  *data = l.inbox_->slot(tail);
  *bytes = l.sizes_[tail % l.slots_];
  return true;
}

void VerbsRecvConnection::release() {
  if (!acquired_) {
    if (misuse_.isOk())
      misuse_ = makeError(Code::kInternalError, "verbs receive from rank %d: release without acquire",
                          link_.who().peerRank);
    return;
  }
  acquired_ = false;
  link_.tail_.fetch_add(1, std::memory_order_acq_rel);
  // Reap finished credit writes first (a non-blocking poll), or a receiver
  // that goes idle now could hold back this credit until its next wait.
  link_.pump_.progress();
  link_.returnCredits();
}

}  // namespace loom::transport::verbs
