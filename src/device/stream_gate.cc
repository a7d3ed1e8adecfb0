#include "src/device/stream_gate.h"

namespace loom::cuda {

uint64_t StreamGate::reserve() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++reserved_;
}

void StreamGate::release(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sequence != releasedPrefix_ + 1) {
    doneAhead_.insert(sequence);
    return;
  }
  releasedPrefix_ = sequence;
  while (!doneAhead_.empty() && *doneAhead_.begin() == releasedPrefix_ + 1) {
    releasedPrefix_ = *doneAhead_.begin();
    doneAhead_.erase(doneAhead_.begin());
  }
  kernels::cuda::gateRelease(words_, releasedPrefix_);
}

}  // namespace loom::cuda
