// The device engine's backend over the CUDA runtime (engine_backend.h).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "common/format.h"
#include "kernels/cuda/engine/engine_kernel.h"
#include "kernels/cuda/reduce_copy.h"
#include "src/device/cuda_check.h"
#include "src/device/engine_backend.h"
#include "src/device/runtime.h"

namespace loom::cuda {
namespace engine = kernels::cuda::engine;
namespace {

// Host words the kernels read and write, in mapped pinned memory that is
// never returned: cudaFreeHost may synchronize the device, and a destroy
// must not wait for kernels of other communicators.
class MappedWordSlab {
 public:
  static MappedWordSlab& instance() {
    static MappedWordSlab* slab = new MappedWordSlab;
    return *slab;
  }
  Result<uint32_t*> take(int count) {
    std::lock_guard<std::mutex> lock(mu_);
    // 64-byte lines per request: words of two engines never share a line.
    const size_t words = (static_cast<size_t>(count) + 15) / 16 * 16;
    if (!block_ || used_ + words > kBlockWords) {
      void* p = nullptr;
      LOOM_CUDA_TRY(cudaHostAlloc(&p, kBlockWords * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
      std::memset(p, 0, kBlockWords * sizeof(uint32_t));
      block_ = static_cast<uint32_t*>(p);
      used_ = 0;
    }
    uint32_t* out = block_ + used_;
    used_ += words;
    return out;
  }

 private:
  static constexpr size_t kBlockWords = 4096;
  std::mutex mu_;
  uint32_t* block_ = nullptr;
  size_t used_ = 0;
};

class CudaEngineBackend final : public EngineBackend {
 public:
  explicit CudaEngineBackend(int device) : device_(device) {}
  Status makeOwnStream() {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    return streamOf(nullptr).status();
  }
  ~CudaEngineBackend() override {
    DeviceGuard guard(device_);
    if (view_) (void)cudaFree(view_);
    if (last_) (void)cudaEventDestroy(last_);
    if (ownStream_) (void)cudaStreamDestroy(ownStream_);
  }

  const char* name() const override { return "cuda"; }
  int device() const override { return device_; }

  Result<void*> allocShared(size_t bytes, EngineExport* out) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    void* base = nullptr;
    LOOM_CUDA_TRY(cudaMalloc(&base, bytes));
    Status s = cudaStatus(cudaMemset(base, 0, bytes), "cudaMemset (engine connections)");
    cudaIpcMemHandle_t handle{};
    if (s.isOk()) s = cudaStatus(cudaIpcGetMemHandle(&handle, base), "cudaIpcGetMemHandle (engine connections)");
    if (s.isOk())
      s = cudaStatus(cudaDeviceGetPCIBusId(out->busId, sizeof out->busId, device_), "cudaDeviceGetPCIBusId");
    if (!s.isOk()) {
      (void)cudaFree(base);
      return s;
    }
    static_assert(sizeof(out->handle) == sizeof(handle));
    std::memcpy(out->handle, &handle, sizeof handle);
    out->pid = static_cast<int32_t>(getpid());
    out->pointer = reinterpret_cast<uintptr_t>(base);
    return base;
  }

  void freeShared(void* base) override {
    DeviceGuard guard(device_);
    (void)cudaFree(base);
  }

  Result<bool> reaches(const EngineExport& peer) override {
    auto device = peerDevice(peer);
    LOOM_TRY(device.status());
    if (device.value() == device_) return true;
    return canAccessPeer(device_, device.value());
  }

  Result<void*> mapPeer(const EngineExport& peer) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    auto device = peerDevice(peer);
    LOOM_TRY(device.status());
    if (device.value() != device_) LOOM_TRY(enablePeerAccess(device.value()));
    if (peer.pid == static_cast<int32_t>(getpid())) return reinterpret_cast<void*>(peer.pointer);
    cudaIpcMemHandle_t handle;
    std::memcpy(&handle, peer.handle, sizeof handle);
    void* base = nullptr;
    LOOM_CUDA_TRY(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
    opened_.push_back(base);
    return base;
  }

  void unmapPeer(void* base) override {
    for (void* opened : opened_)
      if (opened == base) (void)cudaIpcCloseMemHandle(base);
  }

  Result<const engine::EngineView*> publishView(const engine::EngineView& view) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    LOOM_CUDA_TRY(cudaMalloc(&view_, sizeof view));
    LOOM_CUDA_TRY(cudaMemcpy(view_, &view, sizeof view, cudaMemcpyHostToDevice));
    return static_cast<const engine::EngineView*>(view_);
  }

  Result<uint32_t*> mappedWords(int count) override { return MappedWordSlab::instance().take(count); }

  Status launch(const engine::EngineView* view, const engine::EngineLayout& layout, const engine::EngineCall& call,
                void* stream) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    auto chosen = streamOf(stream);
    LOOM_TRY(chosen.status());
    cudaStream_t s = chosen.value();
    // Launches of this engine share its connections' counters: one on a new
    // stream waits for everything enqueued so far on the previous one.
    if (launched_ && s != lastStream_) {
      if (!last_) LOOM_CUDA_TRY(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming));
      LOOM_CUDA_TRY(cudaEventRecord(last_, lastStream_));
      LOOM_CUDA_TRY(cudaStreamWaitEvent(s, last_, 0));
    }
    LOOM_CUDA_TRY(engine::launchEngine(view, layout, call, s));
    launched_ = true;
    lastStream_ = s;
    return Status::ok();
  }

  Status copy(void* dst, const void* src, size_t bytes, void* stream) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    auto chosen = streamOf(stream);
    LOOM_TRY(chosen.status());
    cudaStream_t s = chosen.value();
    // cudaMemcpyAsync costs 13-27 us a call below 2 MiB on an H100, a copy
    // kernel a launch (a few us); above that the copy engine's bandwidth wins.
    if (bytes < kKernelCopyBelow) {
      void* dsts[1] = {dst};
      kernels::cuda::ReduceCopyArgs args;
      args.type = DataType::kUint8;
      args.nsrcs = 1;
      args.srcs[0] = src;
      args.ndsts = 1;
      args.dsts[0] = dsts[0];
      args.count = bytes;
      LOOM_CUDA_TRY(kernels::cuda::launchReduceCopy(args, s));
    } else {
      LOOM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    }
    if (s != lastStream_ || !launched_) {
      launched_ = true;
      lastStream_ = s;
    }
    return Status::ok();
  }

  Status waitIdle(const WaitContext& wait) override {
    if (!launched_) return Status::ok();
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    if (!last_) LOOM_CUDA_TRY(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming));
    LOOM_CUDA_TRY(cudaEventRecord(last_, lastStream_));
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaEventQuery(last_);
          return state != cudaErrorNotReady;
        },
        nullptr, gpuWait(wait), [] { return std::string("the device engine's kernels"); }));
    return cudaStatus(state, "device engine kernel (cudaEventQuery)");
  }

 private:
  // The caller's stream, or (null) the backend's own, created on first use.
  Result<cudaStream_t> streamOf(void* stream) {
    if (stream) return static_cast<cudaStream_t>(stream);
    if (!ownStream_) LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&ownStream_, cudaStreamNonBlocking));
    return ownStream_;
  }

  Result<int> peerDevice(const EngineExport& peer) {
    char busId[sizeof peer.busId + 1] = {};
    std::memcpy(busId, peer.busId, sizeof peer.busId);
    int device = -1;
    const cudaError_t err = cudaDeviceGetByPCIBusId(&device, busId);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return makeError(Code::kInvalidUsage, "a peer's device (PCI %s) is not visible to this process", busId);
    }
    return device;
  }

  static constexpr size_t kKernelCopyBelow = size_t{2} << 20;

  const int device_;
  void* view_ = nullptr;
  std::vector<void*> opened_;
  cudaStream_t ownStream_ = nullptr;
  cudaStream_t lastStream_ = nullptr;
  cudaEvent_t last_ = nullptr;
  bool launched_ = false;
};

}  // namespace

Result<std::unique_ptr<EngineBackend>> makeCudaEngineBackend() {
  auto device = currentDevice();
  LOOM_TRY(device.status());
  LOOM_TRY(preloadKernels(device.value()));
  auto backend = std::make_unique<CudaEngineBackend>(device.value());
  // The stream of blocking calls is made now, while no engine kernel can be
  // waiting for this rank: stream creation is not promised to be quick,
  // and a first blocking call then only launches.
  LOOM_TRY(backend->makeOwnStream());
  return std::unique_ptr<EngineBackend>(std::move(backend));
}

}  // namespace loom::cuda
