// loomStream_t for host memory: an in-order queue of operations.
//
// Ops enqueued on a stream may belong to different communicators; each op
// records the completion of the op enqueued before it on the same stream,
// and its executor starts it only after that one has finished, which keeps
// stream order across communicators.
//
// A stream from loomStreamFromCuda is also bound to a CUDA stream
// (src/device/device_stream.h): each op then first waits for the work enqueued
// before it on the CUDA stream, and later CUDA work waits for the op.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>

#include "common/completion.h"
#include "src/device/device_stream.h"

namespace loom {

class Stream {
 public:
  // Registers a new op that `runner` (the executor that will run it) starts;
  // returns the completion it must wait for first: null if the stream was
  // idle, or if the previous op is done or has the same runner, which starts
  // its operations one after another in the order they were queued.
  // `quick`: a small collective (OpRunner's inline size), which a caller
  // may wait a moment for (onlyQuickOutstanding).
  CompletionPtr push(const CompletionPtr& op, const void* runner, bool quick = false);
  // The most ops a stream holds unfinished before an enqueueing caller waits
  // (LOOM_STREAM_DEPTH sets it per process).
  static size_t maxOutstanding();
  // Called before an op is enqueued outside a group: once maxOutstanding()
  // ops are unfinished, waits until half of them have finished. A caller
  // that enqueues faster than the ops run would otherwise queue without
  // bound (an 8-byte loop of 20000 calls queued them all), touching fresh
  // memory for every op and taking the cores from the thread that runs them.
  void waitForRoom();
  // True when every op enqueued so far has finished.
  bool idle() { return unfinished_.load(std::memory_order_acquire) == 0 || outstanding() == 0; }
  // How many ops enqueued so far have not finished.
  size_t outstanding();
  // True when every unfinished op was pushed as quick (or none is left).
  bool onlyQuickOutstanding();
  // The newest unfinished op, when more than `moreThan` ops are unfinished
  // and all of them were pushed as quick; else null.
  CompletionPtr newestOfQuickBacklog(size_t moreThan);
  // An op that ran at once on the caller's thread, never pushed: its error,
  // if any, is reported like a pushed op's.
  void noteFinished(const Status& status);
  // Waits for every op enqueued so far; returns the first error among them.
  Status synchronize();
  // kSuccess when every op has finished (the first error if one failed),
  // kInProgress otherwise.
  Status query();

  // Held while one op is enqueued (push, then the CUDA stream's event, gate
  // ticket and gate launch): with several threads enqueueing on one stream,
  // the Loom order, the gate's sequence order and the CUDA stream's order
  // must agree, or an op could wait (prior work) behind the gate of an op
  // that waits for it.
  std::unique_lock<std::mutex> enqueueTurn() { return std::unique_lock<std::mutex>(enqueueMu_); }

  // Binds the stream to a CUDA stream; once, before the stream is published.
  void bindDevice(std::unique_ptr<cuda::DeviceStream> device) { device_ = std::move(device); }
  // Null for a host stream.
  cuda::DeviceStream* device() const { return device_.get(); }

  // For a call that Loom's host executor will run (the host and staged
  // paths): fails with kInvalidUsage, naming `call` and `rank`, while the
  // bound CUDA stream is being captured into a CUDA graph. The executor runs
  // the operation when it is enqueued, so a replay of the graph would run
  // none of it; failing at once is the only answer that neither hangs nor
  // silently drops the work. A path whose work is itself captured (a device
  // engine's kernels) does not call this. OK for a host stream.
  Status requireNotCapturing(const char* call, int rank) const;

 private:
  void pruneLocked();

  std::unique_ptr<cuda::DeviceStream> device_;

  std::mutex enqueueMu_;
  std::mutex mu_;
  struct Pushed {
    CompletionPtr op;
    bool quick;
  };
  std::deque<Pushed> outstanding_;  // in stream order, so they finish front first
  size_t slowOutstanding_ = 0;      // entries of outstanding_ not pushed as quick
  // outstanding_.size(), written under mu_: zero means idle without the lock
  // (the check every small stream call makes). Nonzero may be stale (an op
  // finished since), so idle() then prunes under the lock.
  std::atomic<size_t> unfinished_{0};
  CompletionPtr last_;
  const void* lastRunner_ = nullptr;  // the runner of last_
  Status firstError_;  // sticky: a failed op stays reported until the stream is destroyed
};

}  // namespace loom
