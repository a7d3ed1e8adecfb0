#include "common/wait.h"

#include "common/clock.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

namespace loom {

namespace {

// A coarse clock reading plus one tick: never earlier than Clock::now() at
// the reading, a few ns instead of ~25 here. Falls back to the precise clock
// if the tick is unknown or too coarse to be worth it.
Clock::time_point roundedUp(int64_t coarseNowNanos) {
  const int64_t tick = coarseTickNanos();
  if (tick < 0 || tick > 10'000'000) return Clock::now();
  const auto sinceEpoch = std::chrono::nanoseconds(coarseNowNanos + tick);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(sinceEpoch));
}

}  // namespace

Deadline Deadline::after(double seconds) {
  // Every call takes a LOOM_TIMEOUT deadline (minutes), where a tick (<= 10 ms,
  // rounded up: never early) is noise; shorter ones need the precise clock.
  return afterCoarse(seconds >= 1.0 && seconds < 1e9 ? coarseMonotonicNanos() : 0, seconds);
}

Deadline Deadline::afterCoarse(int64_t coarseNowNanos, double seconds) {
  if (!(seconds < 1e9)) return never();
  auto delta = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  if (seconds >= 1.0) return {roundedUp(coarseNowNanos) + delta};
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

void WaitSignal::sleep(uint32_t expected, int timeoutMillis) { sleepMicros(expected, timeoutMillis * 1000L); }

void WaitSignal::sleepMicros(uint32_t expected, long timeoutMicros) {
  struct timespec ts;
  ts.tv_sec = timeoutMicros / 1000000;
  ts.tv_nsec = (timeoutMicros % 1000000) * 1000L;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void yieldCore() { sched_yield(); }

Status peerFailureWithin(const WaitContext& wait, const std::string& what, double seconds) {
  if (!wait.health) return Status::ok();
  const Deadline until = Deadline::after(seconds);
  for (;;) {
    Status peers = wait.health->check();
    if (!peers.isOk()) return {peers.code(), peers.message() + " (noticed while waiting for " + what + ")"};
    if (until.expired() || wait.deadline.expired()) return Status::ok();
    usleep(1000);
  }
}

}  // namespace loom
