#include "common/wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace loom {

Deadline Deadline::after(double seconds) {
  if (!(seconds < 1e9)) return never();
  auto delta = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  // The precise clock: some deadlines are shorter than the coarse clock's tick.
  return {Clock::now() + delta};
}

int Deadline::remainingMillis(int cap) const {
  if (at == Clock::time_point::max()) return cap;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, cap));
}

void WaitSignal::wakeAll() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void WaitSignal::sleep(uint32_t expected, int timeoutMillis) {
  struct timespec ts;
  ts.tv_sec = timeoutMillis / 1000;
  ts.tv_nsec = static_cast<long>(timeoutMillis % 1000) * 1000000L;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void yieldCore() { sched_yield(); }

}  // namespace loom
