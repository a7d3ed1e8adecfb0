#include "tests/faults/bootstrap/resource_count.h"

#include <dirent.h>

#include <chrono>
#include <thread>

namespace loom::bootstrap::testing {
namespace {

// `selfListed`: /proc/self/fd also lists the descriptor opendir() holds.
int countEntries(const char* dir, bool selfListed) {
  DIR* d = ::opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return selfListed ? n - 1 : n;
}

}  // namespace

int openDescriptors() { return countEntries("/proc/self/fd", true); }
int liveThreads() { return countEntries("/proc/self/task", false); }

ResourceCounts waitForCounts(const ResourceCounts& baseline, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  ResourceCounts c = ResourceCounts::now();
  while ((c.fds > baseline.fds || c.threads > baseline.threads) && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c = ResourceCounts::now();
  }
  return c;
}

}  // namespace loom::bootstrap::testing
