#include "perf/harness/rank_layout.h"

namespace loom::perf {
namespace {

// The first flag of the options that only device buffers can honour, or "".
std::string deviceOnlyFlag(const PerfOptions& o) {
  if (o.gpus > 1) return "-g " + std::to_string(o.gpus);
  if (o.graphLaunches > 0) return "-G " + std::to_string(o.graphLaunches);
  if (o.memcpyBaseline) return "--memcpy-baseline";
  return "";
}

}  // namespace

int globalRank(int process, int thread, int gpu, const PerfOptions& o) {
  return (process * o.threads + thread) * o.gpus + gpu;
}

int deviceOf(int localProcess, int thread, int gpu, const PerfOptions& o, int deviceCount) {
  if (deviceCount <= 0) return -1;
  const long slot = (static_cast<long>(localProcess) * o.threads + thread) * o.gpus + gpu;
  return static_cast<int>(slot % deviceCount);
}

MemoryChoice chooseMemory(const PerfOptions& o, int deviceCount, const std::string& whyNone) {
  MemoryChoice choice;
  const std::string needsDevice = deviceOnlyFlag(o);
  if (o.hostMemory || !o.algos.empty()) {
    // parseOptions already refuses device-only flags with these two.
    choice.note = o.hostMemory ? "# --host-mem: host buffers" : "# --algos: host buffers";
    return choice;
  }
  if (deviceCount <= 0) {
    if (!needsDevice.empty()) choice.error = needsDevice + " needs device buffers, but there is no CUDA device: " + whyNone;
    choice.note = "# no CUDA device: host buffers (" + whyNone + ")";
    return choice;
  }
  choice.device = true;
  choice.note = "# device buffers: " + std::to_string(deviceCount) + " CUDA device" + (deviceCount > 1 ? "s" : "") +
                " visible, " + std::to_string(o.gpus) + " rank" + (o.gpus > 1 ? "s" : "") +
                " per thread (--host-mem for host buffers)";
  return choice;
}

}  // namespace loom::perf
