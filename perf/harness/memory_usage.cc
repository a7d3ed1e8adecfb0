#include "perf/harness/memory_usage.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace loom::perf {
namespace {
std::atomic<int64_t> startResident{-1};
}  // namespace

int64_t residentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long pages = 0, resident = 0;
  const bool ok = std::fscanf(f, "%lld %lld", &pages, &resident) == 2;
  std::fclose(f);
  return ok ? resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void noteStartOfRun() {
  int64_t unset = -1;
  startResident.compare_exchange_strong(unset, residentBytes());
}

int64_t residentAtStartOfRun() {
  const int64_t value = startResident.load();
  return value < 0 ? 0 : value;
}

}  // namespace loom::perf
