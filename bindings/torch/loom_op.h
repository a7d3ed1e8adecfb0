// One Loom operation launched by the PyTorch backend, from enqueue to the
// moment its results are visible in the caller's tensors.
//
// Every operation runs alone on a Loom stream of its own (leased from a
// StreamPool), so waiting for it never waits for operations launched after
// it; the communicator's progress engine still runs them in launch order.
// "Finishing" an operation means: wait for its stream, copy results into the
// caller's tensors where Loom worked on a temporary (non-contiguous tensors,
// tensor lists), record the outcome, return the stream and complete the
// future. It happens exactly once, on whichever thread gets there first: the
// one in Work::wait(), or the FinisherThread (futures, dropped works).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <loom/loom.h>

namespace loom_torch {

// Idle Loom streams, reused so that launching an operation does not allocate one.
class StreamPool {
 public:
  StreamPool() = default;
  ~StreamPool();
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  loomStream_t acquire();                   // throws if Loom cannot create a stream
  void release(loomStream_t stream);        // the stream is idle and error-free
  static void discard(loomStream_t stream);  // a failed stream keeps its error: drop it

 private:
  std::mutex mu_;
  std::vector<loomStream_t> idle_;
};

// The CUDA side of an operation on CUDA tensors (cuda_ordering.h): it runs
// on a Loom stream bound to an internal CUDA stream that first waits for the
// caller's current CUDA stream, and it is done when an event recorded after
// it has fired.
class DeviceSide {
 public:
  virtual ~DeviceSide() = default;
  virtual loomStream_t stream() const = 0;
  virtual void orderAfterCurrent() = 0;   // before the enqueue: after the caller's queued work
  virtual void recordEnd() = 0;           // after the enqueue and any device-side copy-out
  virtual bool query() = 0;               // the end event has fired
  virtual void synchronize() = 0;         // the host waits for the end event
  virtual void blockCurrentStream() = 0;  // the caller's current CUDA stream waits for it
};

class LoomOp {
 public:
  // `name` is the c10d operation ("allreduce", ...), used in messages.
  // Host tensors run on a stream leased from `pool`; CUDA tensors on
  // `device`'s stream, and their copyOut runs at launch, in stream order.
  LoomOp(std::string name, int rank, std::shared_ptr<StreamPool> pool, std::shared_ptr<DeviceSide> device = nullptr);
  ~LoomOp();

  DeviceSide* device() const { return device_.get(); }

  const std::string& name() const { return name_; }
  loomStream_t stream() const { return stream_; }

  // Set before launch: tensors Loom reads or writes until the op is done, the
  // tensors result() returns, and what to run once it has succeeded.
  std::vector<at::Tensor> keepAlive;
  std::vector<at::Tensor> outputs;
  std::function<void()> copyOut;

  // The op's work is on its stream (or on its leader's, see follow()).
  // Nothing finishes an op before this, so results never land early.
  void markLaunched();
  // The launch failed: finishes the op with `error` at once.
  void failLaunch(std::exception_ptr error);
  // For send/recv coalesced into one Loom group: the group runs on the
  // leader's stream, so this op finishes after the leader, with its error.
  void follow(std::shared_ptr<LoomOp> leader) { leader_ = std::move(leader); }

  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Blocks until markLaunched() or failLaunch() (coalesced ops launch at endCoalescing()).
  void waitLaunched();
  // Waits for the launch and the stream (bounded by the communicator's
  // timeout), then finishes.
  void finish();
  // Finishes if the stream is done; false if it is still running (or another
  // thread is finishing it right now).
  bool tryFinish();
  // Polls until finished or until `timeout` passes; false on timeout.
  bool finishWithin(std::chrono::milliseconds timeout);

  // Valid once finished(): null on success.
  std::exception_ptr error() const;
  // A future completed with `outputs` (or the error) when the op finishes.
  // Returns it and whether it was created by this call (the caller must then
  // make sure someone finishes the op).
  std::pair<c10::intrusive_ptr<c10::ivalue::Future>, bool> future();

 private:
  // Needs finishMu_. Returns the future to complete once finishMu_ is released.
  c10::intrusive_ptr<c10::ivalue::Future> finishLocked(loomResult_t outcome, std::exception_ptr error = nullptr);
  void completeFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future);
  bool launched() const { return launched_.load(std::memory_order_acquire); }
  // The stream's outcome once its work is done: waits for it (blocking) or
  // returns loomInProgress (polling).
  loomResult_t streamResult(bool block);
  void returnStream(bool failed);

  const std::string name_;
  const int rank_;
  std::shared_ptr<StreamPool> pool_;
  std::shared_ptr<DeviceSide> device_;
  loomStream_t stream_ = nullptr;
  std::shared_ptr<LoomOp> leader_;

  std::mutex launchMu_;
  std::condition_variable launchCv_;
  std::atomic<bool> launched_{false};

  std::mutex finishMu_;  // held while waiting for the stream and finishing
  std::atomic<bool> finished_{false};
  mutable std::mutex stateMu_;  // error_ and future_
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Finishes operations nobody waits for on the calling thread: those whose
// future was taken (DDP's buckets) and those whose Work was dropped.
// Operations finish in launch order, so one thread waiting for them in that
// order is enough.
class FinisherThread {
 public:
  FinisherThread();
  ~FinisherThread();  // finishes everything handed over, then joins
  FinisherThread(const FinisherThread&) = delete;
  FinisherThread& operator=(const FinisherThread&) = delete;

  void adopt(std::shared_ptr<LoomOp> op);

 private:
  // Owned by the thread too: the last owner of the FinisherThread may be a
  // future callback running on that thread, which must then outlive it.
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<LoomOp>> ops;
    bool stopping = false;
  };
  static void loop(const std::shared_ptr<Queue>& queue);

  std::shared_ptr<Queue> queue_;
  std::thread thread_;
};

}  // namespace loom_torch
