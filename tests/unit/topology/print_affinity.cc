// Prints "affinity <cpu list>" from sched_getaffinity(0), e.g. "affinity 0,2-3".
#include <sched.h>

#include <cstdio>
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
  return 0;
}
