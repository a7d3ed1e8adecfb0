// The device engine's backend on the host (engine_backend.h): "device
// memory" is host memory, and a launch runs the engine kernel's own body
// (kernels/cuda/engine) on host threads, in launch order, on one worker
// thread per backend (the in-order "stream"). Ranks must be threads of one
// process: their allocations are shared as plain pointers.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/format.h"
#include "kernels/cuda/engine/engine_emulation.h"
#include "src/device/engine_backend.h"

namespace loom::cuda {
namespace engine = kernels::cuda::engine;
namespace {

class EmulatedEngineBackend final : public EngineBackend {
 public:
  EmulatedEngineBackend() : worker_([this] { work(); }) {}
  ~EmulatedEngineBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
    for (void* p : allocations_) std::free(p);
  }

  const char* name() const override { return "emulated"; }
  int device() const override { return 0; }

  Result<void*> allocShared(size_t bytes, EngineExport* out) override {
    void* base = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!base) return makeError(Code::kSystemError, "emulated engine: %zu bytes of connection memory", bytes);
    std::memset(base, 0, bytes);
    allocations_.push_back(base);
    out->pid = static_cast<int32_t>(getpid());
    out->pointer = reinterpret_cast<uintptr_t>(base);
    return base;
  }
  void freeShared(void* base) override {
    for (void*& p : allocations_)
      if (p == base) {
        std::free(p);
        p = nullptr;
      }
  }

  Result<bool> reaches(const EngineExport& peer) override { return peer.pid == static_cast<int32_t>(getpid()); }
  Result<void*> mapPeer(const EngineExport& peer) override {
    if (peer.pid != static_cast<int32_t>(getpid()))
      return makeError(Code::kInvalidUsage, "emulated engine: a peer in process %d (ranks must be threads of one)",
                       peer.pid);
    return reinterpret_cast<void*>(peer.pointer);
  }
  void unmapPeer(void*) override {}

  Result<const engine::EngineView*> publishView(const engine::EngineView& view) override {
    view_ = std::make_unique<engine::EngineView>(view);
    return static_cast<const engine::EngineView*>(view_.get());
  }
  Result<uint32_t*> mappedWords(int count) override {
    words_.push_back(std::make_unique<uint32_t[]>(static_cast<size_t>(count)));
    return words_.back().get();
  }

  Status launch(const engine::EngineView* view, const engine::EngineLayout&, const engine::EngineCall& call,
                void*) override {
    submit([view, call] { (void)engine::runEngineEmulated(*view, call); });
    return Status::ok();
  }
  Status copy(void* dst, const void* src, size_t bytes, void*) override {
    submit([dst, src, bytes] { std::memmove(dst, src, bytes); });
    return Status::ok();
  }
  Status waitIdle(const WaitContext& wait) override {
    return waitUntil([this] { return pending_.load(std::memory_order_acquire) == 0; }, nullptr, wait,
                     [] { return std::string("the emulated device engine's launches"); });
  }

 private:
  void submit(std::function<void()> fn) {
    pending_.fetch_add(1, std::memory_order_acq_rel);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  void work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<void*> allocations_;
  std::unique_ptr<engine::EngineView> view_;
  std::vector<std::unique_ptr<uint32_t[]>> words_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::atomic<int> pending_{0};
  bool stopping_ = false;
  std::thread worker_;  // last: starts once everything above exists
};

}  // namespace

std::unique_ptr<EngineBackend> makeEmulatedEngineBackend() { return std::make_unique<EmulatedEngineBackend>(); }

}  // namespace loom::cuda
