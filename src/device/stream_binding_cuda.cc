// DeviceStream over a cudaStream_t (loomStreamFromCuda).
//
// Prior work: an event recorded on the CUDA stream at enqueue time; the
// executor polls cudaEventQuery with the usual spin-yield-sleep wait (bounded
// by LOOM_TIMEOUT and abort), instead of cudaEventSynchronize, which could
// block past an abort.
//
// Completion ordered on the CUDA stream: a stream gate (stream_gate.h says
// why a kernel, not a host function or stream memory operations). Its words
// come from a process-wide pool of mapped pinned memory that is never freed:
// a gate kernel may still poll them after its stream is destroyed, and
// cudaFreeHost may synchronize the device, which could deadlock a destroy
// that runs while peers' gates wait.
//
// Graph capture: the host executor runs the operation when it is enqueued,
// so a graph replay could not run it; capturing() lets the caller refuse the
// call at once (src/comm/stream.h).
#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/cuda/stream_gate.h"
#include "src/device/cuda_check.h"
#include "src/device/runtime.h"

namespace loom::cuda {
namespace {

class EventPool;

class EventPriorWork final : public PriorWork {
 public:
  EventPriorWork(std::shared_ptr<EventPool> pool, cudaEvent_t event, Status recorded)
      : pool_(std::move(pool)), event_(event), recorded_(std::move(recorded)) {}
  ~EventPriorWork() override;
  Status wait(const WaitContext& wait) override {
    LOOM_TRY(recorded_);
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaEventQuery(event_);
          return state != cudaErrorNotReady;
        },
        nullptr, gpuWait(wait), [] { return std::string("earlier work on the CUDA stream"); }));
    return cudaStatus(state, "earlier work on the CUDA stream (cudaEventQuery)");
  }

 private:
  std::shared_ptr<EventPool> pool_;
  cudaEvent_t event_;
  Status recorded_;
};

// Events of one device, reused: creating one per operation costs a driver call.
class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  explicit EventPool(int device) : device_(device) {}
  ~EventPool() {
    DeviceGuard guard(device_);
    for (cudaEvent_t e : free_) (void)cudaEventDestroy(e);
  }
  Result<cudaEvent_t> take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    cudaEvent_t e = nullptr;
    LOOM_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give(cudaEvent_t e) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(e);
  }

 private:
  int device_;
  std::mutex mu_;
  std::vector<cudaEvent_t> free_;
};

EventPriorWork::~EventPriorWork() {
  if (event_) pool_->give(event_);
}

// Gate words in mapped pinned memory, handed out one 128-byte slot per gate,
// never reused or freed (a few streams per process: a page serves 32).
class GateWordPool {
 public:
  static GateWordPool& instance() {
    static GateWordPool* pool = new GateWordPool;  // never destroyed, like its memory
    return *pool;
  }
  Result<StreamGateWords*> take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (next_ == end_) {
      void* page = nullptr;
      LOOM_CUDA_TRY(cudaHostAlloc(&page, kPageBytes, cudaHostAllocMapped | cudaHostAllocPortable));
      std::memset(page, 0, kPageBytes);
      next_ = static_cast<StreamGateWords*>(page);
      end_ = next_ + kPageBytes / sizeof(StreamGateWords);
    }
    return next_++;
  }

 private:
  static constexpr size_t kPageBytes = 4096;
  std::mutex mu_;
  StreamGateWords* next_ = nullptr;
  StreamGateWords* end_ = nullptr;
};

class CudaStreamBinding final : public DeviceStream {
 public:
  CudaStreamBinding(cudaStream_t stream, int device, StreamGateWords* words, const StreamGateWords* deviceWords)
      : stream_(stream),
        device_(device),
        events_(std::make_shared<EventPool>(device)),
        gate_(std::make_shared<StreamGate>(words)),
        deviceWords_(deviceWords) {}
  // Stream destroy: every operation on it has completed (loomStreamDestroy
  // synchronizes first); aborting the gate also ends any wait left behind.
  ~CudaStreamBinding() override { gate_->abort(); }

  std::shared_ptr<PriorWork> markPriorWork() override {
    auto event = events_->take();
    if (!event.isOk()) return std::make_shared<EventPriorWork>(events_, nullptr, event.status());
    DeviceGuard guard(device_);
    if (!guard.status().isOk()) return std::make_shared<EventPriorWork>(events_, event.value(), guard.status());
    Status recorded = cudaStatus(cudaEventRecord(event.value(), stream_), "cudaEventRecord on the CUDA stream");
    return std::make_shared<EventPriorWork>(events_, event.value(), std::move(recorded));
  }

  StreamOrderTicket reserveOrder() override { return StreamOrderTicket(gate_, gate_->reserve()); }

  Status orderAfter(uint64_t sequence) override {
    // A launch goes to the current device's context: the stream's, whatever
    // device the calling thread has current.
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    return cudaStatus(kernels::cuda::launchStreamGate(deviceWords_, sequence, stream_),
                      "launching the stream gate kernel on the CUDA stream");
  }

  Result<bool> capturing() override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    LOOM_CUDA_TRY(cudaStreamIsCapturing(stream_, &status));
    return status != cudaStreamCaptureStatusNone;
  }

  int device() const override { return device_; }
  void* cudaStream() const override { return stream_; }

  Result<bool> busy() override {
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaErrorNotReady) return true;
    LOOM_TRY(cudaStatus(state, "the CUDA stream (cudaStreamQuery)"));
    return false;
  }

  Status drain(const WaitContext& wait) override {
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaStreamQuery(stream_);
          return state != cudaErrorNotReady;
        },
        nullptr, gpuWait(wait), [] { return std::string("the CUDA stream's kernels"); }));
    return cudaStatus(state, "the CUDA stream (cudaStreamQuery)");
  }

 private:
  cudaStream_t stream_;
  int device_;
  std::shared_ptr<EventPool> events_;
  std::shared_ptr<StreamGate> gate_;  // aborted when the last ticket and the binding are gone
  const StreamGateWords* deviceWords_;
};

}  // namespace

Result<std::unique_ptr<DeviceStream>> bindCudaStream(void* cudaStream) {
  auto stream = static_cast<cudaStream_t>(cudaStream);
  int device = -1;
  LOOM_CUDA_TRY(cudaStreamGetDevice(stream, &device));
  LOOM_TRY(preloadKernels(device));
  auto words = GateWordPool::instance().take();
  LOOM_TRY(words.status());
  DeviceGuard guard(device);
  LOOM_TRY(guard.status());
  void* deviceWords = nullptr;
  LOOM_CUDA_TRY(cudaHostGetDevicePointer(&deviceWords, words.value(), 0));
  return std::unique_ptr<DeviceStream>(
      new CudaStreamBinding(stream, device, words.value(), static_cast<const StreamGateWords*>(deviceWords)));
}

}  // namespace loom::cuda
