#include "bindings/torch/loom_op.h"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

namespace loom_torch {

// ---- StreamPool ------------------------------------------------------------

StreamPool::~StreamPool() {
  for (loomStream_t s : idle_) loomStreamDestroy(s);
}

loomStream_t StreamPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      loomStream_t s = idle_.back();
      idle_.pop_back();
      return s;
    }
  }
  loomStream_t s = nullptr;
  TORCH_CHECK(loomStreamCreate(&s) == loomSuccess, "loom: cannot create a stream: ", loomGetLastError(nullptr));
  return s;
}

void StreamPool::release(loomStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(stream);
}

void StreamPool::discard(loomStream_t stream) { loomStreamDestroy(stream); }

// ---- LoomOp ----------------------------------------------------------------

LoomOp::LoomOp(std::string name, int rank, std::shared_ptr<StreamPool> pool, std::shared_ptr<DeviceSide> device)
    : name_(std::move(name)),
      rank_(rank),
      pool_(std::move(pool)),
      device_(std::move(device)),
      stream_(device_ ? device_->stream() : pool_->acquire()) {}

LoomOp::~LoomOp() {
  // Only an op whose launch failed (nothing on its stream) or one finished
  // elsewhere gets here; waiting keeps a launched op's buffers alive anyway.
  if (!finished() && stream_) returnStream(streamResult(/*block=*/true) != loomSuccess);
}

loomResult_t LoomOp::streamResult(bool block) {
  if (!device_) return block ? loomStreamSynchronize(stream_) : loomStreamQuery(stream_);
  // The CUDA stream is shared with later operations: this op is done when
  // its end event fired; an error of Loom's stream surfaces through the
  // query (loomInProgress there only means later work is still running).
  if (block)
    device_->synchronize();
  else if (!device_->query())
    return loomInProgress;
  loomResult_t r = loomStreamQuery(stream_);
  return r == loomInProgress ? loomSuccess : r;
}

void LoomOp::returnStream(bool failed) {
  if (device_) return;  // bound to a CUDA stream, owned by Loom's cache
  if (failed)
    StreamPool::discard(stream_);  // its error is sticky
  else
    pool_->release(stream_);
}

void LoomOp::markLaunched() {
  {
    std::lock_guard<std::mutex> lock(launchMu_);
    launched_.store(true, std::memory_order_release);
  }
  launchCv_.notify_all();
}

void LoomOp::failLaunch(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(finishMu_);
    if (!finished()) future = finishLocked(loomSuccess, error);
  }
  markLaunched();
  completeFuture(future);
}

void LoomOp::waitLaunched() {
  std::unique_lock<std::mutex> lock(launchMu_);
  launchCv_.wait(lock, [this] { return launched(); });
}

void LoomOp::finish() {
  if (finished()) return;
  waitLaunched();
  if (leader_) leader_->finish();
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(finishMu_);
    if (finished()) return;
    // The stream holds this op alone, and Loom bounds every wait inside it by
    // the communicator's deadline (PyTorch's process-group timeout).
    future = finishLocked(streamResult(/*block=*/true), leader_ ? leader_->error() : nullptr);
  }
  completeFuture(future);
}

bool LoomOp::tryFinish() {
  if (finished()) return true;
  if (!launched() || (leader_ && !leader_->tryFinish())) return false;
  std::unique_lock<std::mutex> lock(finishMu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (finished()) return true;
  loomResult_t r = streamResult(/*block=*/false);
  if (r == loomInProgress) return false;
  auto future = finishLocked(r, leader_ ? leader_->error() : nullptr);
  lock.unlock();
  completeFuture(future);
  return true;
}

bool LoomOp::finishWithin(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Poll: sleep a little longer each time, so a long wait costs no core
  // while a short one still returns promptly.
  auto nap = std::chrono::microseconds(20);
  while (!tryFinish()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(2000));
  }
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> LoomOp::finishLocked(loomResult_t outcome, std::exception_ptr error) {
  if (error) {
    // Failed before it ran (launch) or with its leader: its stream is idle.
    returnStream(/*failed=*/false);
  } else if (outcome != loomSuccess) {
    // loomStreamSynchronize/Query leave their message as this thread's last error.
    error = std::make_exception_ptr(std::runtime_error(c10::str(
        "loom: ", name_, " on rank ", rank_, " failed (", loomGetErrorString(outcome),
        "): ", loomGetLastError(nullptr))));
    returnStream(/*failed=*/true);
  } else {
    returnStream(/*failed=*/false);
    try {
      if (copyOut && !device_) copyOut();  // a CUDA op copied out on its stream at launch
    } catch (...) {
      error = std::current_exception();
    }
  }
  stream_ = nullptr;
  keepAlive.clear();
  copyOut = nullptr;

  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    // finished_ flips under stateMu_ so that future() either sees it or
    // leaves a future here for us to complete.
    std::lock_guard<std::mutex> lock(stateMu_);
    error_ = error;
    future = future_;
    finished_.store(true, std::memory_order_release);
  }
  return future;
}

void LoomOp::completeFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future) {
  // Its callbacks (DDP's, Python's then()) run here, outside our locks: they
  // may take the GIL or wait for this very op.
  if (!future) return;
  if (std::exception_ptr e = error())
    future->setError(e);
  else
    future->markCompleted(c10::IValue(outputs));
}

std::exception_ptr LoomOp::error() const {
  std::lock_guard<std::mutex> lock(stateMu_);
  return error_;
}

std::pair<c10::intrusive_ptr<c10::ivalue::Future>, bool> LoomOp::future() {
  std::lock_guard<std::mutex> lock(stateMu_);
  if (future_) return {future_, false};
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  if (finished()) {
    // finishLocked() already ran and saw no future: complete it here.
    if (error_)
      future_->setError(error_);
    else
      future_->markCompleted(c10::IValue(outputs));
  }
  return {future_, true};
}

// ---- FinisherThread --------------------------------------------------------

FinisherThread::FinisherThread()
    : queue_(std::make_shared<Queue>()), thread_([queue = queue_] { loop(queue); }) {}

FinisherThread::~FinisherThread() {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->stopping = true;
  }
  queue_->cv.notify_one();
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();  // it drains the queue it co-owns, then ends
  else
    thread_.join();
}

void FinisherThread::adopt(std::shared_ptr<LoomOp> op) {
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->ops.push_back(std::move(op));
  }
  queue_->cv.notify_one();
}

void FinisherThread::loop(const std::shared_ptr<Queue>& queue) {
  for (;;) {
    std::shared_ptr<LoomOp> op;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      queue->cv.wait(lock, [&] { return queue->stopping || !queue->ops.empty(); });
      if (queue->ops.empty()) return;  // stopping, and everything handed over is finished
      op = std::move(queue->ops.front());
      queue->ops.pop_front();
    }
    op->finish();
  }
}

}  // namespace loom_torch
