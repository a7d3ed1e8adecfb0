#include "common/clock.h"

#include <time.h>

namespace loom {
namespace {

int64_t nanosOf(const timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec; }

}  // namespace

int64_t monotonicNanos() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return nanosOf(ts);
}

int64_t coarseMonotonicNanos() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return nanosOf(ts);
}

int64_t coarseTickNanos() {
  static const int64_t tick = [] {
    timespec res{};
    return clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 ? nanosOf(res) : int64_t{-1};
  }();
  return tick;
}

}  // namespace loom
