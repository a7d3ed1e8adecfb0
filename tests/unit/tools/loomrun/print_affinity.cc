// Prints "affinity <cpu list>" from sched_getaffinity(0), e.g. "affinity 0,2,3",
// then "local_cores <LOOM_LOCAL_CORES>" ("-" when loomrun did not set it).
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    std::perror("sched_getaffinity");
    return 1;
  }
  std::string list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    if (!list.empty()) list += ",";
    list += std::to_string(cpu);
  }
  std::printf("affinity %s\n", list.c_str());
  const char* shared = std::getenv("LOOM_LOCAL_CORES");
  std::printf("local_cores %s\n", shared && *shared ? shared : "-");
  return 0;
}
