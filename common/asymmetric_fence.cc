#include "common/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace loom::asymmetric_fence {

namespace detail {
std::atomic<bool> writersSkipFence{false};
}

namespace {

int membarrier(int cmd) { return static_cast<int>(syscall(SYS_membarrier, cmd, 0U, 0)); }

// Whether the kernel offers the global expedited command (asked once).
bool kernelOffersIt() {
  static const bool offered = [] {
    const int commands = membarrier(MEMBARRIER_CMD_QUERY);
    return commands > 0 && (commands & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
           (commands & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0;
  }();
  return offered;
}

// Registration belongs to the process's address space: a child made by
// fork() (tests fork ranks without exec) starts unregistered, whatever the
// flag it copied says, and registers again at its own enable().
std::atomic<bool> tried{false};

// Unused under ThreadSanitizer, where enable() registers nothing.
[[maybe_unused]] void forgetAfterFork() {
  detail::writersSkipFence.store(false, std::memory_order_relaxed);
  tried.store(false, std::memory_order_relaxed);
}

}  // namespace

bool enable() {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  // Two threads racing here may both register (the kernel takes it twice);
  // the flag is set only after a registration succeeded.
  if (!tried.exchange(true)) {
    static const bool hooked = pthread_atfork(nullptr, nullptr, forgetAfterFork) == 0;
    if (hooked && kernelOffersIt() && membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0)
      detail::writersSkipFence.store(true, std::memory_order_relaxed);
  }
  return writersSkipFence();
#endif
}

bool sleeperBarrier() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!kernelOffersIt()) return true;  // then no writer on this host skips its fence
  return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}

}  // namespace loom::asymmetric_fence
