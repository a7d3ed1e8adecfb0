#include "src/device/gdr_path.h"

#include <cstring>
#include <vector>

#include "common/format.h"
#include "src/device/gdr_slices.h"

namespace loom::cuda {

namespace kc = kernels::cuda;

// What each rank says before a call: the exchange that decides "run" for all.
struct GdrPath::CallRecord {
  uint32_t ready;  // device buffers registered, scratch ready
  uint32_t dtype;
  uint64_t count;
  uint64_t recvAddr;
  uint64_t scratchAddr;
  uint32_t recvRkey;
  uint32_t scratchRkey;
};

// The registrations one call writes from and into, held for its duration.
struct GdrPath::Registered {
  transport::RdmaRegionHandle send, recv, scratch;
};

namespace {

// The tag of the path's own scratch registration: the path allocates and
// frees the scratch itself (invalidating it first), so it needs no buffer id.
constexpr uint64_t kScratchIdentity = ~uint64_t{0};

}  // namespace

GdrPath::GdrPath(GdrPathOptions options) : options_(std::move(options)) {
  if (!options_.identify) options_.identify = driverAllocationIdentity;
}

GdrPath::~GdrPath() {
  links_.reset();  // QPs and registrations first: the scratch stays mapped until deregistered
  if (scratch_) reducer_->release(scratch_);
}

transport::RdmaRegistrationStats GdrPath::registrationStats() const {
  return links_ ? links_->registrationStats() : transport::RdmaRegistrationStats{};
}

Status GdrPath::setUp(const WaitContext& wait) {
  std::string whyNot;
  auto links = options_.network->connect(options_.rank, options_.nranks, *options_.bootstrap, wait, &whyNot);
  LOOM_TRY(links.status());
  if (!links.value()) {
    unavailable_ = true;
    LOOM_WARN(options_.log, kSubsysInit, "GDR: LOOM_NET_GDR=1 but %s; device buffers are staged through host memory",
              whyNot.c_str());
    return Status::ok();
  }
  links_ = std::move(links).value();
  for (auto& a : arrived_) a.assign(static_cast<size_t>(options_.nranks), 0);
  LOOM_INFO(options_.log, kSubsysInit, "GDR: rank %d connected to %d peer(s) over %s: device buffers go NIC to GPU",
            options_.rank, options_.nranks - 1, links_->deviceName().c_str());
  return Status::ok();
}

Status GdrPath::ensureScratch(size_t bytes) {
  if (scratchBytes_ >= bytes) return Status::ok();
  if (scratch_) {
    links_->invalidate(scratch_, scratchBytes_);  // before the memory goes
    reducer_->release(scratch_);
    scratch_ = nullptr;
    scratchBytes_ = 0;
  }
  auto p = reducer_->allocate(bytes);
  LOOM_TRY(p.status());
  scratch_ = p.value();
  scratchBytes_ = bytes;
  return Status::ok();
}

std::string GdrPath::registerUserBuffer(const char* what, void* ptr, size_t bytes, uint32_t access,
                                       transport::RdmaRegionHandle* out) {
  // Without the identity a cached registration may belong to memory freed
  // since (and the address reused): never guess, stage instead.
  auto id = options_.identify(ptr);
  if (!id.isOk())
    return strprintf("%s %p: cannot tell which allocation it belongs to: %s", what, ptr, id.status().message().c_str());
  const AllocationIdentity& a = id.value();
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p < a.base || p - a.base > a.size || bytes > a.size - (p - a.base))
    return strprintf("%s %p (%zu bytes) runs past the end of its allocation (%zu bytes at %#llx)", what, ptr, bytes,
                     a.size, static_cast<unsigned long long>(a.base));
  auto r = links_->registerMemory(ptr, bytes, access, a.bufferId);
  if (!r.isOk()) return strprintf("registering %s: %s", what, r.status().message().c_str());
  *out = std::move(r).value();
  return "";
}

std::string GdrPath::prepare(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv,
                             CallRecord* mine, Registered* regs) {
  if (send.kind != MemoryKind::kDevice) return strprintf("sendbuff is %s memory", memoryKindName(send.kind));
  if (recv.kind != MemoryKind::kDevice) return strprintf("recvbuff is %s memory", memoryKindName(recv.kind));
  if (send.device != recv.device)
    return strprintf("sendbuff and recvbuff are on devices %d and %d", send.device, recv.device);
  if (!reducer_) {
    auto made = options_.makeReducer(send.device);
    if (!made.isOk()) return made.status().message();
    reducer_ = std::move(made).value();
    device_ = send.device;
  } else if (device_ != send.device) {
    return strprintf("buffers on device %d, but this communicator's GDR path uses device %d", send.device, device_);
  }
  const size_t bytes = args.count * dataTypeSize(args.dtype);
  Status scratch = ensureScratch(static_cast<size_t>(options_.nranks) *
                                 gdrSlotBytes(args.count, options_.nranks, dataTypeSize(args.dtype)));
  if (!scratch.isOk()) return "device scratch: " + scratch.message();
  constexpr uint32_t kWritable = transport::kRdmaLocalWrite | transport::kRdmaRemoteWrite;
  // recvbuff first: in place, sendbuff then hits the same (writable) registration.
  std::string why = registerUserBuffer("recvbuff", args.recvbuf, bytes, kWritable, &regs->recv);
  if (why.empty())
    why = registerUserBuffer("sendbuff", const_cast<void*>(args.sendbuf), bytes, transport::kRdmaLocalWrite, &regs->send);
  if (!why.empty()) return why;
  auto k = links_->registerMemory(scratch_, scratchBytes_, kWritable, kScratchIdentity);
  if (!k.isOk()) return "registering the device scratch: " + k.status().message();
  regs->scratch = std::move(k).value();
  mine->recvAddr = reinterpret_cast<uintptr_t>(args.recvbuf);
  mine->recvRkey = regs->recv->rkey;
  mine->scratchAddr = reinterpret_cast<uintptr_t>(scratch_);
  mine->scratchRkey = regs->scratch->rkey;
  return "";
}

Status GdrPath::allReduce(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv,
                          const WaitContext& wait, bool* ran) {
  *ran = false;
  const int rank = options_.rank, nranks = options_.nranks;
  if (!failed_.isOk())
    return Status(failed_.code(), strprintf("GDR path of rank %d failed in an earlier call: %s", rank,
                                            failed_.message().c_str()));
  if (unavailable_) return Status::ok();
  if (!links_) {
    LOOM_TRY(setUp(wait));
    if (unavailable_) return Status::ok();
  }

  std::vector<CallRecord> records(static_cast<size_t>(nranks));
  std::memset(records.data(), 0, records.size() * sizeof(CallRecord));
  CallRecord& mine = records[static_cast<size_t>(rank)];
  mine.dtype = static_cast<uint32_t>(args.dtype);
  mine.count = args.count;
  Registered regs;
  const std::string whyNot = prepare(args, send, recv, &mine, &regs);
  mine.ready = whyNot.empty() ? 1 : 0;
  LOOM_TRY(options_.bootstrap->allGather(records.data(), sizeof(CallRecord), wait)
               .withContext(strprintf("GDR all-reduce on rank %d, exchanging buffer records: ", rank)));
  std::string notReady;
  for (int r = 0; r < nranks; ++r)
    if (!records[static_cast<size_t>(r)].ready) notReady += (notReady.empty() ? "" : ", ") + std::to_string(r);
  if (!notReady.empty()) {
    // Every rank saw the same records: all stage. Say why once per reason.
    if (!whyNot.empty() && whyNot != notReadyLogged_) {
      notReadyLogged_ = whyNot;
      LOOM_INFO(options_.log, kSubsysColl, "GDR: rank %d cannot run this all-reduce directly (%s); staged",
                rank, whyNot.c_str());
    }
    return Status::ok();
  }
  for (int r = 0; r < nranks; ++r) {
    const CallRecord& rec = records[static_cast<size_t>(r)];
    LOOM_ENFORCE(rec.count == mine.count && rec.dtype == mine.dtype, Code::kInvalidUsage,
                 "GDR all-reduce: rank %d has count %llu (%s) but rank %d has count %llu (%s)", rank,
                 static_cast<unsigned long long>(mine.count), dataTypeName(args.dtype), r,
                 static_cast<unsigned long long>(rec.count), dataTypeName(static_cast<DataType>(rec.dtype)));
  }

  *ran = true;
  ++calls_;
  Status status = runTwoShot(args, records.data(), regs, wait);
  if (!status.isOk()) {
    links_->fail();  // nothing of a peer's lands in our buffers after we return
    failed_ = status;
  }
  return status;
}

Status GdrPath::onImmediate(int peer, uint32_t imm) {
  for (int phase = 0; phase < 2; ++phase) {
    if (imm != gdrImmediate(calls_, static_cast<GdrPhase>(phase + 1))) continue;
    uint8_t& seen = arrived_[phase][static_cast<size_t>(peer)];
    LOOM_ENFORCE(!seen, Code::kInternalError, "GDR all-reduce on rank %d: rank %d wrote phase %d of call %llu twice",
                 options_.rank, peer, phase + 1, static_cast<unsigned long long>(calls_));
    seen = 1;
    return Status::ok();
  }
  return makeError(Code::kInternalError, "GDR all-reduce on rank %d: unexpected immediate 0x%x from rank %d in call %llu",
                   options_.rank, imm, peer, static_cast<unsigned long long>(calls_));
}

Status GdrPath::await(int phase, bool ownWrites, const char* what, const WaitContext& wait) {
  const int rank = options_.rank, nranks = options_.nranks;
  auto complete = [&] {
    for (int p = 0; p < nranks; ++p)
      if (p != rank && !arrived_[phase][static_cast<size_t>(p)]) return false;
    return !ownWrites || links_->writesDone();
  };
  Status polled;
  Status waited = waitUntil(
      [&] {
        polled = links_->poll([this](int peer, uint32_t imm) { return onImmediate(peer, imm); });
        return !polled.isOk() || complete();
      },
      nullptr, wait,
      [&] {
        std::string missing;
        for (int p = 0; p < nranks; ++p)
          if (p != rank && !arrived_[phase][static_cast<size_t>(p)])
            missing += (missing.empty() ? "" : ", ") + std::to_string(p);
        return strprintf("GDR all-reduce on rank %d: %s from rank(s) %s%s", rank, what,
                         missing.empty() ? "-" : missing.c_str(),
                         links_->writesDone() ? "" : " (and this rank's own writes to complete)");
      });
  LOOM_TRY(polled);
  return waited;
}

Status GdrPath::runTwoShot(const algo::CollArgs& args, const CallRecord* records, const Registered& regs,
                           const WaitContext& wait) {
  const int rank = options_.rank, nranks = options_.nranks;
  const size_t es = dataTypeSize(args.dtype);
  const size_t slot = gdrSlotBytes(args.count, nranks, es);
  const auto* sendBytes = static_cast<const std::byte*>(args.sendbuf);
  auto* recvBytes = static_cast<std::byte*>(args.recvbuf);
  auto* scratch = static_cast<std::byte*>(scratch_);
  for (auto& a : arrived_) std::fill(a.begin(), a.end(), 0);

  // 1. Reduce-scatter: slice p of sendbuff into rank p's scratch slot `rank`
  //    (peers in a rotated order, so not every rank targets rank 0 first).
  const uint32_t rsImm = gdrImmediate(calls_, GdrPhase::kReduceScatter);
  for (int k = 1; k < nranks; ++k) {
    const int p = (rank + k) % nranks;
    const GdrSlice s = gdrSliceOf(args.count, nranks, p);
    const CallRecord& to = records[p];
    LOOM_TRY(links_->write(p, sendBytes + s.offset * es, regs.send->lkey,
                           to.scratchAddr + static_cast<uint64_t>(rank) * slot, to.scratchRkey, s.count * es, rsImm));
  }
  LOOM_TRY(await(0, false, "the reduce-scatter slices", wait));

  // 2. Own slice: all n sources in rank order, into recvbuff.
  const GdrSlice own = gdrSliceOf(args.count, nranks, rank);
  if (own.count > 0) {
    LOOM_TRY(reducer_->flushRemoteWrites().withContext(strprintf("GDR all-reduce on rank %d: ", rank)));
    kc::ReduceCopyArgs launch;
    launch.type = args.dtype;
    launch.op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
    launch.post = args.op == RedOp::kAvg ? kc::PostOp::kDivideByRanks : kc::PostOp::kNone;
    launch.nranks = nranks;
    launch.count = own.count;
    launch.nsrcs = nranks;
    for (int s = 0; s < nranks; ++s)
      launch.srcs[s] = s == rank ? static_cast<const void*>(sendBytes + own.offset * es)
                                 : static_cast<const void*>(scratch + static_cast<size_t>(s) * slot);
    launch.ndsts = 1;
    launch.dsts[0] = recvBytes + own.offset * es;  // in place: aliases source `rank` exactly, which is allowed
    if (const char* why = kc::reduceCopyArgsError(launch))
      return makeError(Code::kInternalError, "GDR all-reduce on rank %d: %s", rank, why);
    LOOM_TRY(reducer_->reduceCopy(launch, wait).withContext(strprintf("GDR all-reduce on rank %d: ", rank)));
  }

  // 3. All-gather: the reduced slice into every peer's recvbuff.
  const uint32_t agImm = gdrImmediate(calls_, GdrPhase::kAllGather);
  for (int k = 1; k < nranks; ++k) {
    const int p = (rank + k) % nranks;
    const CallRecord& to = records[p];
    LOOM_TRY(links_->write(p, recvBytes + own.offset * es, regs.recv->lkey, to.recvAddr + own.offset * es,
                           to.recvRkey, own.count * es, agImm));
  }
  LOOM_TRY(await(1, true, "the all-gather slices", wait));
  // What peers wrote into recvbuff must be visible to the caller's next kernels.
  return reducer_->flushRemoteWrites().withContext(strprintf("GDR all-reduce on rank %d: ", rank));
}

}  // namespace loom::cuda
