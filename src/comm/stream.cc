#include "comm/stream.h"

namespace loom {

CompletionPtr Stream::push(const CompletionPtr& op) {
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  CompletionPtr previous = last_;
  last_ = op;
  outstanding_.push_back(op);
  return previous;
}

void Stream::pruneLocked() {
  size_t kept = 0;
  for (auto& op : outstanding_) {
    if (op->done()) {
      Status s = op->status();
      if (!s.isOk() && firstError_.isOk()) firstError_ = s;
    } else {
      outstanding_[kept++] = op;
    }
  }
  outstanding_.resize(kept);
}

Status Stream::synchronize() {
  std::vector<CompletionPtr> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending = outstanding_;
  }
  // Every op's own waits are bounded by its communicator's LOOM_TIMEOUT and
  // its abort flag, so each completes in bounded time; this wait needs none.
  WaitContext forever;
  forever.spinMicros = 5;
  forever.yieldMicros = 100;
  for (auto& op : pending) (void)op->wait(forever, "stream operation");
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  return firstError_;
}

Status Stream::query() {
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  if (!firstError_.isOk()) return firstError_;
  if (!outstanding_.empty()) return {Code::kInProgress, "operations still running on the stream"};
  return Status::ok();
}

}  // namespace loom
