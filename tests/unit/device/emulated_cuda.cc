#include "tests/unit/device/emulated_cuda.h"

#include <set>
#include <vector>

namespace loom::testing {
namespace {

// The CUDA runtime's callback thread: one per process, host functions FIFO.
class CallbackThread {
 public:
  static CallbackThread& instance() {
    // Never destroyed: streams may outlive static destruction in a failing test.
    static CallbackThread* thread = new CallbackThread;
    return *thread;
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  CallbackThread() { std::thread([this] { loop(); }).detach(); }
  void loop() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

std::mutex registryMu;
std::set<EmulatedStream*>& registry() {
  static auto* streams = new std::set<EmulatedStream*>;
  return *streams;
}

}  // namespace

EmulatedStream::EmulatedStream() {
  thread_ = std::thread([this] { loop(); });
  std::lock_guard<std::mutex> lock(registryMu);
  registry().insert(this);
}

EmulatedStream::~EmulatedStream() {
  {
    std::lock_guard<std::mutex> lock(registryMu);
    registry().erase(this);
  }
  synchronize();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EmulatedStream::enqueue(std::function<void()> item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(item));
    ++enqueued_;
  }
  cv_.notify_all();
}

void EmulatedStream::loop() {
  for (;;) {
    std::function<void()> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !items_.empty(); });
      if (items_.empty()) return;
      item = std::move(items_.front());
      items_.pop_front();
    }
    item();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++completed_;
    }
    cv_.notify_all();
  }
}

void EmulatedStream::launchKernel(std::function<void()> body) { enqueue(std::move(body)); }

void EmulatedStream::launchHostFunc(std::function<void()> fn) {
  enqueue([fn = std::move(fn)] {
    // The stream is blocked until the callback thread ran fn.
    struct Done {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
    };
    auto done = std::make_shared<Done>();
    CallbackThread::instance().post([fn, done] {
      fn();
      {
        std::lock_guard<std::mutex> lock(done->mu);
        done->done = true;
      }
      done->cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(done->mu);
    done->cv.wait(lock, [&] { return done->done; });
  });
}

std::shared_ptr<EmulatedEvent> EmulatedStream::recordEvent() {
  auto event = std::make_shared<EmulatedEvent>();
  enqueue([event] { event->markReached(); });
  return event;
}

bool EmulatedStream::synchronizeFor(Millis limit) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  return cv_.wait_for(lock, limit, [&] { return completed_ >= target; });
}

void EmulatedStream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  cv_.wait(lock, [&] { return completed_ >= target; });
}

bool EmulatedStream::deviceSynchronizeFor(Millis limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<std::pair<EmulatedStream*, uint64_t>> targets;
  std::lock_guard<std::mutex> registryLock(registryMu);  // no stream goes away meanwhile
  for (EmulatedStream* s : registry()) {
    std::lock_guard<std::mutex> lock(s->mu_);
    targets.emplace_back(s, s->enqueued_);
  }
  for (auto& [s, target] : targets) {
    std::unique_lock<std::mutex> lock(s->mu_);
    const uint64_t t = target;
    if (!s->cv_.wait_until(lock, deadline, [&] { return s->completed_ >= t; })) return false;
  }
  return true;
}

}  // namespace loom::testing
