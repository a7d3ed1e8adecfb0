// DeviceStream over a cudaStream_t (loomStreamFromCuda).
//
// Prior work: an event recorded on the CUDA stream at enqueue time; the
// executor polls cudaEventQuery with the usual spin-yield-sleep wait (bounded
// by LOOM_TIMEOUT and abort), instead of cudaEventSynchronize, which could
// block past an abort.
//
// Completion ordered on the CUDA stream: cudaLaunchHostFunc with a function
// that blocks until the Loom operation has completed. Chosen over the
// alternatives because it needs nothing but the runtime API and works on every
// device and driver (MIG, MPS, no stream memory operations):
//  - cost: the host function occupies the CUDA runtime's callback thread while
//    the collective runs, so other host functions of the process (and of
//    other streams) queue behind it, and the stream restarts a callback
//    round-trip (~10-20 us) after Loom finishes. It must not (and does not)
//    call CUDA. It cannot deadlock Loom: an executor never waits for work
//    enqueued after an operation's host function, only for the event before it.
//  - cuStreamWaitValue32 on a flag in mapped pinned memory would release the
//    stream from the GPU side without the callback thread (the better choice
//    for overlap), but needs CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS and
//    the driver API; a spinning wait kernel would hold an SM for the whole
//    collective and could starve the reduction kernels of the P2P path.
// Either can replace orderAfter() alone; nothing else depends on the choice.
#include <cuda_runtime_api.h>

#include <vector>

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
        nullptr, wait, [] { return std::string("earlier work on the CUDA stream"); }));
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

// Runs on the CUDA runtime's callback thread: blocks until the operation is done.
void CUDART_CB waitForLoomOperation(void* data) {
  auto* op = static_cast<CompletionPtr*>(data);
  // Bounded through the operation itself: every wait inside it has the
  // communicator's deadline and abort flag, and destroy finishes queued work.
  WaitContext forever;
  forever.spinMicros = 0;
  forever.yieldMicros = 0;
  (void)(*op)->wait(forever, "Loom operation");
  delete op;
}

class CudaStreamBinding final : public DeviceStream {
 public:
  CudaStreamBinding(cudaStream_t stream, int device)
      : stream_(stream), device_(device), events_(std::make_shared<EventPool>(device)) {}

  std::shared_ptr<PriorWork> markPriorWork() override {
    auto event = events_->take();
    if (!event.isOk()) return std::make_shared<EventPriorWork>(events_, nullptr, event.status());
    Status recorded = cudaStatus(cudaEventRecord(event.value(), stream_), "cudaEventRecord on the CUDA stream");
    return std::make_shared<EventPriorWork>(events_, event.value(), std::move(recorded));
  }

  Status orderAfter(const CompletionPtr& op) override {
    auto* data = new CompletionPtr(op);
    Status s = cudaStatus(cudaLaunchHostFunc(stream_, waitForLoomOperation, data), "cudaLaunchHostFunc");
    if (!s.isOk()) delete data;
    return s;
  }

  int device() const override { return device_; }
  void* cudaStream() const override { return stream_; }

  Status drain(const WaitContext& wait) override {
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaStreamQuery(stream_);
          return state != cudaErrorNotReady;
        },
        nullptr, wait, [] { return std::string("the CUDA stream's kernels"); }));
    return cudaStatus(state, "the CUDA stream (cudaStreamQuery)");
  }

 private:
  cudaStream_t stream_;
  int device_;
  std::shared_ptr<EventPool> events_;
};

}  // namespace

Result<std::unique_ptr<DeviceStream>> bindCudaStream(void* cudaStream) {
  auto stream = static_cast<cudaStream_t>(cudaStream);
  int device = -1;
  LOOM_CUDA_TRY(cudaStreamGetDevice(stream, &device));
  return std::unique_ptr<DeviceStream>(new CudaStreamBinding(stream, device));
}

}  // namespace loom::cuda
