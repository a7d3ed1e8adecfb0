#include "tests/unit/algorithms/loopback_links.h"

#include <chrono>
#include <functional>

namespace loom::testing {
namespace {

Status waitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, const WaitContext& wait,
               const std::function<bool()>& ready, const char* what) {
  while (!ready()) {
    if (wait.deadline.expired()) return makeError(Code::kTimeout, "loopback: timed out waiting for %s", what);
    if (wait.aborted()) return makeError(Code::kRemoteError, "loopback: aborted while waiting for %s", what);
    cv.wait_for(lock, std::chrono::milliseconds(5));
  }
  return Status::ok();
}

class LoopSend final : public transport::SendConnection {
 public:
  LoopSend(LoopbackFabric& f, int from, int to) : fabric_(f), fifo_(f.fifo(from, to)) {}
  size_t chunkBytes() const override { return fabric_.chunkBytes(); }
  Status acquire(std::byte** slot, const WaitContext& wait) override {
    std::unique_lock<std::mutex> lock(fifo_.mu);
    LOOM_TRY(waitFor(lock, fifo_.cv, wait, [&] { return fifo_.inFlight < fabric_.slots(); }, "a free slot"));
    *slot = take();
    return Status::ok();
  }
  bool tryAcquire(std::byte** slot) override {
    std::lock_guard<std::mutex> lock(fifo_.mu);
    if (fifo_.inFlight >= fabric_.slots()) return false;
    *slot = take();
    return true;
  }
  void commit(size_t bytes) override {
    std::lock_guard<std::mutex> lock(fifo_.mu);
    held_ = false;
    fifo_.writing.resize(bytes);
    fifo_.committed.push_back(std::move(fifo_.writing));
    fifo_.writing.clear();
    ++fifo_.inFlight;
    fifo_.cv.notify_all();
  }

 private:
  // The slot being written; acquiring again before the commit gets the same one.
  std::byte* take() {
    if (!held_) fifo_.writing.assign(fabric_.chunkBytes(), std::byte{0xEE});  // garbage beyond what gets committed
    held_ = true;
    return fifo_.writing.data();
  }

  LoopbackFabric& fabric_;
  LoopbackFabric::Fifo& fifo_;
  bool held_ = false;
};

class LoopRecv final : public transport::RecvConnection {
 public:
  LoopRecv(LoopbackFabric& f, int from, int to) : fabric_(f), fifo_(f.fifo(from, to)) {}
  size_t chunkBytes() const override { return fabric_.chunkBytes(); }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override {
    std::unique_lock<std::mutex> lock(fifo_.mu);
    LOOM_TRY(waitFor(lock, fifo_.cv, wait, [&] { return held_ || !fifo_.committed.empty(); }, "a chunk"));
    take(data, bytes);
    return Status::ok();
  }
  bool tryAcquire(const std::byte** data, size_t* bytes) override {
    std::lock_guard<std::mutex> lock(fifo_.mu);
    if (!held_ && fifo_.committed.empty()) return false;
    take(data, bytes);
    return true;
  }
  void release() override {
    std::lock_guard<std::mutex> lock(fifo_.mu);
    held_ = false;
    reading_.clear();
    --fifo_.inFlight;
    fifo_.cv.notify_all();
  }

 private:
  // The oldest unreleased chunk; acquiring again before the release gets it again.
  void take(const std::byte** data, size_t* bytes) {
    if (!held_) {
      reading_ = std::move(fifo_.committed.front());
      fifo_.committed.pop_front();
      held_ = true;
    }
    *data = reading_.data();
    *bytes = reading_.size();
  }

  LoopbackFabric& fabric_;
  LoopbackFabric::Fifo& fifo_;
  std::vector<std::byte> reading_;
  bool held_ = false;
};

class LoopLinks final : public algo::Links {
 public:
  LoopLinks(LoopbackFabric& f, int rank, int nranks) {
    for (int p = 0; p < nranks; ++p) {
      sends_.push_back(std::make_unique<LoopSend>(f, rank, p));
      recvs_.push_back(std::make_unique<LoopRecv>(f, p, rank));
    }
  }
  transport::SendConnection& sendTo(int peer) override { return *sends_[static_cast<size_t>(peer)]; }
  transport::RecvConnection& recvFrom(int peer) override { return *recvs_[static_cast<size_t>(peer)]; }

 private:
  std::vector<std::unique_ptr<LoopSend>> sends_;
  std::vector<std::unique_ptr<LoopRecv>> recvs_;
};

}  // namespace

LoopbackFabric::LoopbackFabric(int nranks, size_t chunkBytes, int slots)
    : nranks_(nranks), chunkBytes_(chunkBytes), slots_(slots) {
  for (int i = 0; i < nranks * nranks; ++i) fifos_.push_back(std::make_unique<Fifo>());
  for (int r = 0; r < nranks; ++r) links_.push_back(std::make_unique<LoopLinks>(*this, r, nranks));
}

}  // namespace loom::testing
