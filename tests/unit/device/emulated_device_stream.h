// A DeviceStream (src/device/device_stream.h) over an emulated CUDA stream
// (emulated_cuda.h), with either way of ordering later work after a Loom
// operation:
//  - kGate: what the CUDA binding does, a "kernel" on the stream that runs
//    the gate's wait protocol (kernels/cuda/stream_gate_core.h, the same code
//    the GPU runs) on the stream's thread;
//  - kBlockingHostFunction: the design it replaced, a host function that
//    blocks the process's one callback thread until the operation completed;
//    kept here only so tests can show it deadlocks where the gate does not.
// Bind one to a Loom stream with bindEmulatedStream.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "loom/loom.h"
#include "src/device/device_stream.h"
#include "tests/unit/device/emulated_cuda.h"

namespace loom::testing {

enum class StreamOrdering { kGate, kBlockingHostFunction };

class EmulatedDeviceStream final : public cuda::DeviceStream {
 public:
  EmulatedDeviceStream(EmulatedStream& stream, StreamOrdering ordering);
  ~EmulatedDeviceStream() override { gate_->abort(); }

  std::shared_ptr<cuda::PriorWork> markPriorWork() override;
  cuda::StreamOrderTicket reserveOrder() override { return cuda::StreamOrderTicket(gate_, gate_->reserve()); }
  Status orderAfter(uint64_t sequence) override;
  Result<bool> capturing() override { return capturing_.load(); }
  int device() const override { return 0; }
  void* cudaStream() const override { return &stream_; }
  Result<bool> busy() override { return !stream_.synchronizeFor(Millis(0)); }
  Status drain(const WaitContext& wait) override {
    return waitUntil([this] { return stream_.synchronizeFor(Millis(1)); }, nullptr, wait,
                     [] { return std::string("the emulated CUDA stream"); });
  }

  // Called with the sequence number before each ordering item is enqueued,
  // on the enqueueing thread: a test holds the thread there (as if it were
  // descheduled between queueing the operation and ordering the stream
  // after it, a window every real launch has) until some event. Set it
  // before the stream is used.
  void setBeforeOrderLaunch(std::function<void(uint64_t sequence)> hook) { beforeOrderLaunch_ = std::move(hook); }
  // The highest sequence whose ordering item has started to wait (the gate
  // kernel runs, or the host function runs on the callback thread).
  uint64_t reachedOrder() const { return shared_->reachedOrder.load(std::memory_order_acquire); }
  // As if cudaStreamBeginCapture / cudaStreamEndCapture were called.
  void setCapturing(bool on) { capturing_.store(on); }
  // Ends every wait of the gate (a test's cleanup after a provoked deadlock).
  void abortGate() { gate_->abort(); }

 private:
  EmulatedStream& stream_;
  StreamOrdering ordering_;
  // Shared with every wait still queued on the stream (it may run after the
  // binding is gone; the gate's abort in the destructor ends it then).
  struct Shared {
    cuda::StreamGateWords words{};
    std::atomic<uint64_t> reachedOrder{0};
  };
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<cuda::StreamGate> gate_;
  std::atomic<bool> capturing_{false};
  std::function<void(uint64_t)> beforeOrderLaunch_;
};

// A Loom stream bound to an EmulatedDeviceStream over `stream`; `*device`
// (optional) receives the binding, owned by the Loom stream
// (loomStreamDestroy frees it).
loomStream_t bindEmulatedStream(EmulatedStream& stream, StreamOrdering ordering,
                                EmulatedDeviceStream** device = nullptr);

}  // namespace loom::testing
