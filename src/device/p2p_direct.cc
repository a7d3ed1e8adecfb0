// The direct path over CUDA IPC and the reduce-copy kernels (see p2p_direct.h).
#include "src/device/p2p_direct.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/format.h"
#include "src/device/cuda_check.h"
#include "src/device/runtime.h"
#include "kernels/cuda/reduce_copy.h"

namespace loom::cuda {
namespace {

namespace kc = kernels::cuda;

struct PeerRecord {
  uint32_t ready;  // sendbuff and recvbuff in device memory of one device
  int32_t pid;
  uint64_t sendPtr;
  uint64_t offset;  // of sendbuff in its allocation
  char busId[32];   // cudaDeviceGetPCIBusId of the buffers' device
  IpcHandle handle;
};

class CudaDirectPath final : public DirectPath {
 public:
  CudaDirectPath(int rank, int nranks, bootstrap::Bootstrap* bootstrap)
      : rank_(rank), nranks_(nranks), bootstrap_(bootstrap) {}

  ~CudaDirectPath() override {
    for (auto& [key, base] : opened_) closeIpcHandle(base);
    if (device_ >= 0) {
      DeviceGuard guard(device_);
      if (stream_) (void)cudaStreamDestroy(stream_);
      if (scratch_) deviceFree(scratch_);
    }
  }

  Status allReduce(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv,
                   const WaitContext& wait, bool* ran) override {
    *ran = false;
    const size_t bytes = args.count * dataTypeSize(args.dtype);
    std::vector<PeerRecord> records(static_cast<size_t>(nranks_));
    PeerRecord& mine = records[static_cast<size_t>(rank_)];
    std::memset(&mine, 0, sizeof mine);
    mine.pid = static_cast<int32_t>(getpid());
    mine.sendPtr = reinterpret_cast<uintptr_t>(args.sendbuf);
    mine.ready = send.kind == MemoryKind::kDevice && recv.kind == MemoryKind::kDevice && send.device == recv.device;
    if (mine.ready) {
      // A rank that cannot describe its buffer says "not ready": everyone stages.
      auto exported = exportDeviceBuffer(args.sendbuf);
      mine.ready = exported.isOk() &&
                   cudaDeviceGetPCIBusId(mine.busId, sizeof mine.busId, send.device) == cudaSuccess;
      if (exported.isOk()) {
        mine.handle = exported.value().handle;
        mine.offset = exported.value().offset;
      }
      (void)cudaGetLastError();
    }
    LOOM_TRY(bootstrap_->allGather(records.data(), sizeof(PeerRecord), wait)
                 .withContext("direct all-reduce, exchanging buffer records: "));

    // Verdicts: every rank ready, and this rank's device reaches every peer's.
    std::vector<uint8_t> verdicts(static_cast<size_t>(nranks_), 0);
    std::vector<int> peerDevices(static_cast<size_t>(nranks_), -1);
    bool ok = true;
    for (int r = 0; r < nranks_ && ok; ++r) {
      const PeerRecord& rec = records[static_cast<size_t>(r)];
      ok = rec.ready != 0;
      if (!ok || !mine.ready) break;
      char busId[33] = {};
      std::memcpy(busId, rec.busId, sizeof rec.busId);
      int local = -1;
      ok = cudaDeviceGetByPCIBusId(&local, busId) == cudaSuccess;
      (void)cudaGetLastError();
      if (ok) {
        auto reach = canAccessPeer(send.device, local);
        ok = reach.isOk() && reach.value();
      }
      peerDevices[static_cast<size_t>(r)] = local;
    }
    verdicts[static_cast<size_t>(rank_)] = ok && mine.ready ? 1 : 0;
    LOOM_TRY(bootstrap_->allGather(verdicts.data(), 1, wait).withContext("direct all-reduce, exchanging verdicts: "));
    for (uint8_t v : verdicts)
      if (!v) return Status::ok();  // every rank saw the same verdicts: all stage

    *ran = true;
    // Blocking calls run on the caller's thread: leave its current device as it was.
    DeviceGuard guard(send.device);
    Status status = guard.status();
    if (status.isOk()) status = reduceFromPeers(args, records, peerDevices, send.device, bytes, wait);
    // Always meet the peers at the barrier, even after an error, so none reads freed memory.
    Status met = bootstrap_->barrier(wait).withContext("direct all-reduce, final barrier: ");
    LOOM_TRY(status);
    LOOM_TRY(met);
    if (args.sendbuf == args.recvbuf) {
      LOOM_CUDA_TRY(cudaMemcpyAsync(args.recvbuf, scratch_, bytes, cudaMemcpyDeviceToDevice, stream_));
      LOOM_TRY(waitStream(wait));
    }
    return Status::ok();
  }

 private:
  Status reduceFromPeers(const algo::CollArgs& args, const std::vector<PeerRecord>& records,
                         const std::vector<int>& peerDevices, int device, size_t bytes, const WaitContext& wait) {
    LOOM_TRY(useDevice(device));
    kc::ReduceCopyArgs launch;
    launch.type = args.dtype;
    launch.op = args.op == RedOp::kAvg ? RedOp::kSum : args.op;
    launch.post = args.op == RedOp::kAvg ? kc::PostOp::kDivideByRanks : kc::PostOp::kNone;
    launch.nranks = nranks_;
    launch.count = args.count;
    launch.nsrcs = nranks_;
    const int32_t myPid = records[static_cast<size_t>(rank_)].pid;
    for (int r = 0; r < nranks_; ++r) {
      const PeerRecord& rec = records[static_cast<size_t>(r)];
      if (r != rank_ && peerDevices[static_cast<size_t>(r)] != device)
        LOOM_TRY(enablePeer(peerDevices[static_cast<size_t>(r)]));
      if (r == rank_ || rec.pid == myPid) {
        launch.srcs[r] = reinterpret_cast<const void*>(rec.sendPtr);  // same address space
        continue;
      }
      auto base = openPeer(rec.handle);
      LOOM_TRY(base.status().withContext(strprintf("mapping rank %d's sendbuff: ", r)));
      launch.srcs[r] = static_cast<const std::byte*>(base.value()) + rec.offset;
    }
    void* dst = args.recvbuf;
    if (args.sendbuf == args.recvbuf) {
      LOOM_TRY(ensureScratch(bytes));
      dst = scratch_;
    }
    launch.ndsts = 1;
    launch.dsts[0] = dst;
    if (const char* why = kc::reduceCopyArgsError(launch))
      return makeError(Code::kInternalError, "direct all-reduce on rank %d: %s", rank_, why);
    LOOM_CUDA_TRY(kc::launchReduceCopy(launch, stream_));
    return waitStream(wait);
  }

  Status useDevice(int device) {
    if (device_ != device) {
      LOOM_ENFORCE(device_ < 0, Code::kInvalidUsage,
                   "direct all-reduce on rank %d: buffers on device %d, but this communicator used device %d before",
                   rank_, device, device_);
      device_ = device;
    }
    if (!stream_) {
      LOOM_TRY(preloadKernels(device));
      LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    }
    return Status::ok();
  }

  Status enablePeer(int peerDevice) {
    if (peersEnabled_.count(peerDevice)) return Status::ok();
    LOOM_TRY(enablePeerAccess(peerDevice));
    peersEnabled_[peerDevice] = true;
    return Status::ok();
  }

  Result<void*> openPeer(const IpcHandle& handle) {
    std::string key(handle.bytes, sizeof handle.bytes);
    if (auto it = opened_.find(key); it != opened_.end()) return it->second;
    // A bounded cache: mappings keep the peer's memory alive after it frees it.
    constexpr size_t kMaxOpen = 64;
    if (opened_.size() >= kMaxOpen) {
      closeIpcHandle(opened_.begin()->second);
      opened_.erase(opened_.begin());
    }
    auto base = openIpcHandle(handle);
    LOOM_TRY(base.status());
    opened_.emplace(std::move(key), base.value());
    return base.value();
  }

  Status ensureScratch(size_t bytes) {
    if (scratchBytes_ >= bytes) return Status::ok();
    if (scratch_) deviceFree(scratch_);
    scratch_ = nullptr;
    scratchBytes_ = 0;
    auto p = deviceAlloc(bytes);
    LOOM_TRY(p.status());
    scratch_ = p.value();
    scratchBytes_ = bytes;
    return Status::ok();
  }

  Status waitStream(const WaitContext& wait) {
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaStreamQuery(stream_);
          return state != cudaErrorNotReady;
        },
        nullptr, gpuWait(wait), [] { return std::string("the direct all-reduce kernel"); }));
    return cudaStatus(state, "direct all-reduce kernel");
  }

  const int rank_;
  const int nranks_;
  bootstrap::Bootstrap* bootstrap_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  std::map<std::string, void*> opened_;  // IPC handle bytes -> mapped base
  std::map<int, bool> peersEnabled_;
};

}  // namespace

std::unique_ptr<DirectPath> makeDirectPath(int rank, int nranks, bootstrap::Bootstrap* bootstrap) {
  return std::make_unique<CudaDirectPath>(rank, nranks, bootstrap);
}

bool directPathBuilt() { return true; }

}  // namespace loom::cuda
