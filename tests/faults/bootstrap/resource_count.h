// Counts of this process's open descriptors and threads, to check that a
// failed rendezvous leaves nothing behind once its root thread has exited.
#pragma once

namespace loom::bootstrap::testing {

int openDescriptors();  // entries of /proc/self/fd
int liveThreads();      // entries of /proc/self/task

struct ResourceCounts {
  int fds = 0;
  int threads = 0;
  static ResourceCounts now() { return {openDescriptors(), liveThreads()}; }
};

// Waits (up to `seconds`, polling every 20 ms) until the counts drop back to
// `baseline` (roots are detached threads that exit at their own deadline);
// returns the last counts seen.
ResourceCounts waitForCounts(const ResourceCounts& baseline, double seconds);

}  // namespace loom::bootstrap::testing
