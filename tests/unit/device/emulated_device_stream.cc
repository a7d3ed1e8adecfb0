#include "tests/unit/device/emulated_device_stream.h"

#include <thread>

#include "common/wait.h"
#include "kernels/cuda/stream_gate_core.h"
#include "src/api/cuda_streams.h"

namespace loom::testing {
namespace {

class EventPriorWork final : public cuda::PriorWork {
 public:
  explicit EventPriorWork(std::shared_ptr<EmulatedEvent> event) : event_(std::move(event)) {}
  Status wait(const WaitContext& wait) override {
    return waitUntil([this] { return event_->reached(); }, nullptr, wait,
                     [] { return std::string("earlier work on the emulated CUDA stream"); });
  }

 private:
  std::shared_ptr<EmulatedEvent> event_;
};

// The host's stand-in for __nanosleep backoff.
struct HostPause {
  void operator()(uint32_t round) const {
    if (round < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
};

}  // namespace

EmulatedDeviceStream::EmulatedDeviceStream(EmulatedStream& stream, StreamOrdering ordering)
    : stream_(stream),
      ordering_(ordering),
      shared_(std::make_shared<Shared>()),
      gate_(std::make_shared<cuda::StreamGate>(&shared_->words, shared_)) {}

std::shared_ptr<cuda::PriorWork> EmulatedDeviceStream::markPriorWork() {
  return std::make_shared<EventPriorWork>(stream_.recordEvent());
}

Status EmulatedDeviceStream::orderAfter(uint64_t sequence) {
  if (beforeOrderLaunch_) beforeOrderLaunch_(sequence);
  auto wait = [shared = shared_, sequence] {
    shared->reachedOrder.store(sequence, std::memory_order_release);
    (void)kernels::cuda::gateWait(&shared->words, sequence, HostPause{});
  };
  if (ordering_ == StreamOrdering::kGate) stream_.launchKernel(wait);
  else stream_.launchHostFunc(wait);
  return Status::ok();
}

loomStream_t bindEmulatedStream(EmulatedStream& stream, StreamOrdering ordering, EmulatedDeviceStream** device) {
  auto binding = std::make_unique<EmulatedDeviceStream>(stream, ordering);
  if (device) *device = binding.get();
  return api::bindStreamToDeviceForTesting(std::move(binding));
}

}  // namespace loom::testing
