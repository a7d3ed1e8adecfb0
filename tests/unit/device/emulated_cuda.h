// Emulated CUDA streams for host tests of stream ordering (no GPU needed).
//
// The semantics that matter for deadlocks, as CUDA has them:
//  - a stream runs its work in order, on its own (here: host) thread;
//    "kernels" are lambdas run by that thread;
//  - an event recorded on a stream is reached once everything before it ran;
//  - a host function (cudaLaunchHostFunc) blocks its stream until it
//    returned, and every host function of the process runs on ONE callback
//    thread, one at a time, in the order their streams reached them;
//  - stream synchronize waits for the work enqueued on the stream before the
//    call; device synchronize for the work of every stream.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace loom::testing {

using Millis = std::chrono::milliseconds;

// An event: reached once the stream ran everything enqueued before it.
class EmulatedEvent {
 public:
  bool reached() const { return reached_.load(std::memory_order_acquire); }
  void markReached() { reached_.store(true, std::memory_order_release); }

 private:
  std::atomic<bool> reached_{false};
};

class EmulatedStream {
 public:
  EmulatedStream();
  // Waits for the enqueued work (a stream blocked forever hangs here: tests
  // release it first), then stops the stream's thread.
  ~EmulatedStream();
  EmulatedStream(const EmulatedStream&) = delete;
  EmulatedStream& operator=(const EmulatedStream&) = delete;

  void launchKernel(std::function<void()> body);
  // Runs `fn` on the process's callback thread; the stream waits for it.
  void launchHostFunc(std::function<void()> fn);
  std::shared_ptr<EmulatedEvent> recordEvent();

  // Waits up to `limit` for the work enqueued so far; true if it all ran.
  bool synchronizeFor(Millis limit);
  void synchronize();

  // Every stream alive: waits up to `limit` for the work each had enqueued
  // at the call; true if it all ran. deviceSynchronize waits without limit.
  static bool deviceSynchronizeFor(Millis limit);
  static void deviceSynchronize() { (void)deviceSynchronizeFor(Millis(24L * 3600 * 1000)); }

 private:
  void enqueue(std::function<void()> item);
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> items_;
  uint64_t enqueued_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loom::testing
