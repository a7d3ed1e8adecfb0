#include "perf/harness/memory_bound.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom::perf {
namespace {

constexpr size_t kPageBytes = 4096;

// Two page-aligned buffers, touched on allocation so that no page fault is timed.
class CopyBuffers {
 public:
  explicit CopyBuffers(size_t bytes) : bytes_((bytes + kPageBytes - 1) / kPageBytes * kPageBytes) {
    a_ = static_cast<std::byte*>(std::aligned_alloc(kPageBytes, bytes_));
    b_ = static_cast<std::byte*>(std::aligned_alloc(kPageBytes, bytes_));
    if (!a_ || !b_) {
      std::fprintf(stderr, "perf: cannot allocate 2 x %zu bytes for the stream bandwidth\n", bytes_);
      std::fflush(stderr);
      std::_Exit(1);
    }
    std::memset(a_, 1, bytes_);
    std::memset(b_, 2, bytes_);
  }
  ~CopyBuffers() {
    std::free(a_);
    std::free(b_);
  }
  CopyBuffers(const CopyBuffers&) = delete;
  CopyBuffers& operator=(const CopyBuffers&) = delete;

  // Copies one buffer into the other, alternating the direction, so each copy
  // depends on the last; the empty asm keeps the compiler from dropping
  // copies whose result is never read.
  void copy(int i) {
    std::byte* from = i % 2 ? b_ : a_;
    std::byte* to = i % 2 ? a_ : b_;
    std::memcpy(to, from, bytes_);
    asm volatile("" : : "r"(to) : "memory");
  }

 private:
  size_t bytes_;
  std::byte* a_ = nullptr;
  std::byte* b_ = nullptr;
};

}  // namespace

size_t streamBufferBytes(int nranks) {
  constexpr size_t kMiB = size_t{1} << 20;
  const size_t share = (size_t{1} << 30) / 2 / static_cast<size_t>(std::max(nranks, 1));
  return std::clamp(share / kMiB * kMiB, 16 * kMiB, 64 * kMiB);
}

StreamBandwidth measureStreamBandwidth(RankExecutor& executor, size_t bufferBytes, int copies, int trials) {
  CopyBuffers buffers(bufferBytes);
  buffers.copy(0);  // warm-up: TLB, and the first pass of the library's copy
  double best = 0;
  for (int t = 0; t < trials; ++t) {
    executor.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < copies; ++i) buffers.copy(i);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double slowest = executor.allReduceDouble(elapsed.count(), loomMax);
    const double moved = 2.0 * static_cast<double>(bufferBytes) * copies * executor.nranks();
    if (slowest > 0) best = std::max(best, moved / slowest);
  }
  return {best, bufferBytes, copies, trials};
}

double memoryBoundShare(double trafficFactor, size_t bytes, double seconds, double streamBytesPerSecond) {
  if (bytes < kMemoryBoundMinBytes || seconds <= 0 || streamBytesPerSecond <= 0 || trafficFactor <= 0) return -1;
  const double boundSeconds = trafficFactor * static_cast<double>(bytes) / streamBytesPerSecond;
  return boundSeconds / seconds;
}

double allReduceMemTrafficFactor(int nranks) { return 3.0 * nranks - 1.0; }

}  // namespace loom::perf
