// Where the ranks of a perf tool run, and in which memory their buffers live.
//
// As in nccl-tests, a job has WORLD_SIZE processes x -t threads x -g ranks per
// thread, and rank i of thread t of the process with local rank p (its index
// among the processes of its host) uses CUDA device
//   (p * threads * gpus + t * gpus + i) mod (devices visible),
// so ranks share a GPU as soon as there are more of them than devices.
// Pure functions: the CUDA calls are in device_buffers.h.
#pragma once

#include <string>

#include "perf/harness/perf_options.h"

namespace loom::perf {

// Rank `gpu` of thread `thread` of process `process`.
int globalRank(int process, int thread, int gpu, const PerfOptions& options);
int deviceOf(int localProcess, int thread, int gpu, const PerfOptions& options, int deviceCount);

// The buffers of a run: device memory when a CUDA device is usable and
// neither --host-mem nor --algos asks for host memory.
struct MemoryChoice {
  bool device = false;
  std::string note;   // one "# ..." line saying which memory and why
  std::string error;  // non-empty: a flag needs device buffers that this run cannot have (exit 2)
};

// deviceCount: devices the CUDA runtime reports; whyNone: why there are none
// (built without CUDA, no driver, no device) when deviceCount is 0.
MemoryChoice chooseMemory(const PerfOptions& options, int deviceCount, const std::string& whyNone);

}  // namespace loom::perf
