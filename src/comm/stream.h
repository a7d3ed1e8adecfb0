// loomStream_t for host memory: an in-order queue of operations.
//
// Ops enqueued on a stream may belong to different communicators; each op
// records the completion of the op enqueued before it on the same stream,
// and its executor starts it only after that one has finished, which keeps
// stream order across communicators. A CUDA stream will take the same place
// later by implementing the same three operations with events.
#pragma once

#include <deque>
#include <mutex>

#include "comm/completion.h"

namespace loom {

class Stream {
 public:
  // Registers a new op; returns the completion it must wait for first
  // (null if the stream was idle).
  CompletionPtr push(const CompletionPtr& op);
  // Waits for every op enqueued so far; returns the first error among them.
  Status synchronize();
  // kSuccess when every op has finished (the first error if one failed),
  // kInProgress otherwise.
  Status query();

 private:
  void pruneLocked();

  std::mutex mu_;
  std::deque<CompletionPtr> outstanding_;  // in stream order, so they finish front first
  CompletionPtr last_;
  Status firstError_;  // sticky: a failed op stays reported until the stream is destroyed
};

}  // namespace loom
