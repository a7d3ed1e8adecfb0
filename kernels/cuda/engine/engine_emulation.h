// Host emulation of the device engine: runs one rank's kernel for a call,
// the very code the CUDA kernel runs (engine_collectives.h), with one host
// thread per emulated thread of every block. Tests start one std::thread per
// rank, each calling runEngineEmulated on its own view, all concurrently:
// ranks are threads and peers' "device memory" is host memory.
//
// Blocks spin on flags, so every block of every rank must be running at once
// (as on a GPU, where the engine's grids are small enough to be resident
// together); the waits yield, so more threads than cores only cost time.
#pragma once

#include <atomic>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/cuda/engine/engine_collectives.h"
#include "kernels/cuda/engine/engine_layout.h"
#include "kernels/cuda/engine/memory_layer.h"

namespace loom::kernels::cuda::engine {

// The threads emulating one block: a std::barrier for __syncthreads, and its
// completion step ORs the threads' votes for __syncthreads_or.
class HostBlockShared {
 public:
  explicit HostBlockShared(int nthreads) : barrier_(nthreads, Completion{this}) {}
  void sync() { barrier_.arrive_and_wait(); }
  bool syncOr(bool vote) {
    if (vote) votes_.store(true, std::memory_order_relaxed);
    barrier_.arrive_and_wait();
    // `result_` is rewritten only by the next phase's completion, which
    // needs every thread to arrive again, i.e. after each has read it.
    return result_.load(std::memory_order_relaxed);
  }

 private:
  struct Completion {
    HostBlockShared* self;
    void operator()() noexcept {
      self->result_.store(self->votes_.exchange(false, std::memory_order_relaxed), std::memory_order_relaxed);
    }
  };
  std::atomic<bool> votes_{false};
  std::atomic<bool> result_{false};
  std::barrier<Completion> barrier_;
};

struct HostBlock {
  int thread;
  int threads;
  HostBlockShared* shared;
  int tid() const { return thread; }
  int nthreads() const { return threads; }
  void sync() const {
    if (threads > 1) shared->sync();
  }
  bool syncOr(bool vote) const { return threads > 1 ? shared->syncOr(vote) : vote; }
};

// The (T, kOp) instantiations an emulated run may use: every one the
// kernel has (engineDispatch). A test that runs many Memory policies on a
// few types passes a narrower set (its dispatch returns false for a call
// outside it), which keeps its build from instantiating the whole engine
// once per type, reduction and policy.
struct EveryInstantiation {
  template <class F>
  static bool dispatch(const EngineCall& call, int nranks, F&& f) {
    engineDispatch(call, nranks, f);
    return true;
  }
};

// Runs this rank's part of `call` on `view` with the Memory policy given
// (tests pass delaying or mutated ones); returns the first failure of any
// block, or kInvalidCall (nothing run) when engineCallError rejects the call,
// it asks for more channels than the view has, or Instantiations lacks its
// type and reduction.
template <class Memory, class Instantiations = EveryInstantiation>
EngineStatus runEngineEmulatedWith(const EngineView& view, const EngineCall& call, int threadsPerBlock = 1) {
  if (engineCallError(call, view.nranks, view.rank) || call.channels > view.nchannels || threadsPerBlock < 1)
    return EngineStatus::kInvalidCall;
  if (!Instantiations::dispatch(call, view.nranks, []<class T, RedOp kOp>() {})) return EngineStatus::kInvalidCall;
  const int channels = engineChannels(call, view.nchannels);
  const int blocks = engineBlocks(call, view.nranks, channels);
  if (blocks == 0) return EngineStatus::kOk;
  std::atomic<uint32_t> failure{0};
  auto runBlockThread = [&](int blockIndex, HostBlock block) {
    Instantiations::dispatch(call, view.nranks, [&]<class T, RedOp kOp>() {
      const EngineStatus s = runEngineBlock<T, kOp, Memory>(view, call, blockIndex, block);
      if (s != EngineStatus::kOk && block.tid() == 0) {
        uint32_t expected = 0;
        failure.compare_exchange_strong(expected, static_cast<uint32_t>(s));
      }
    });
  };
  std::vector<std::unique_ptr<HostBlockShared>> shared;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(blocks) * static_cast<size_t>(threadsPerBlock));
  for (int b = 0; b < blocks; ++b) {
    shared.push_back(std::make_unique<HostBlockShared>(threadsPerBlock));
    for (int t = 0; t < threadsPerBlock; ++t) {
      if (b == blocks - 1 && t == threadsPerBlock - 1) break;  // the caller's thread runs the last one
      threads.emplace_back(runBlockThread, b, HostBlock{t, threadsPerBlock, shared.back().get()});
    }
  }
  runBlockThread(blocks - 1, HostBlock{threadsPerBlock - 1, threadsPerBlock, shared.back().get()});
  for (std::thread& t : threads) t.join();
  const EngineStatus status = static_cast<EngineStatus>(failure.load());
  if (status != EngineStatus::kOk && call.status) {
    if (*call.status == 0) *call.status = static_cast<uint32_t>(status);
  }
  return status;
}

// runEngineEmulatedWith<SystemMemory>: the real memory layer.
EngineStatus runEngineEmulated(const EngineView& view, const EngineCall& call, int threadsPerBlock = 1);

}  // namespace loom::kernels::cuda::engine
