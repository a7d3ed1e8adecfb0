#include "perf/harness/device_buffers.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#if LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::perf {

void RankDevice::die(const char* call, const std::string& error) const {
  std::fprintf(stderr, "rank %d: %s failed on CUDA device %d: %s\n", rank_, call, device_, error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

#if LOOM_HAVE_CUDA

namespace {

cudaStream_t asStream(void* stream) { return static_cast<cudaStream_t>(stream); }

std::string describe(cudaError_t e) { return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e); }

}  // namespace

#define LOOM_PERF_CUDA(call)                            \
  do {                                                  \
    const cudaError_t loom_perf_error = (call);         \
    if (loom_perf_error != cudaSuccess) die(#call, describe(loom_perf_error)); \
  } while (0)

DeviceInventory findDevices() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: later CUDA calls must not see it
    return {0, "cudaGetDeviceCount: " + describe(e)};
  }
  if (count == 0) return {0, "cudaGetDeviceCount reports 0 devices"};
  return {count, ""};
}

RankDevice::RankDevice(int rank, int device) : rank_(rank), device_(device) {
  LOOM_PERF_CUDA(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  LOOM_PERF_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_ = stream;
  cudaDeviceProp properties{};
  LOOM_PERF_CUDA(cudaGetDeviceProperties(&properties, device));
  // nccl-tests' form: [domain:bus:device], then the name.
  char bus[32];
  std::snprintf(bus, sizeof bus, "[%04x:%02x:%02x] ", static_cast<unsigned>(properties.pciDomainID),
                static_cast<unsigned>(properties.pciBusID), static_cast<unsigned>(properties.pciDeviceID));
  description_ = bus + std::string(properties.name);
}

RankDevice::~RankDevice() {
  dropGraph();
  if (stream_) cudaStreamDestroy(asStream(stream_));
}

void RankDevice::synchronize() const { LOOM_PERF_CUDA(cudaStreamSynchronize(asStream(stream_))); }

void* RankDevice::allocate(size_t bytes) const {
  void* pointer = nullptr;
  LOOM_PERF_CUDA(cudaMalloc(&pointer, bytes));
  LOOM_PERF_CUDA(cudaMemsetAsync(pointer, 0, bytes, asStream(stream_)));
  synchronize();
  return pointer;
}

void RankDevice::release(void* pointer) const noexcept {
  if (pointer) cudaFree(pointer);
}

// On the rank's stream, then waited for: a plain cudaMemcpy from pageable
// memory may return before the data reaches the device, and the legacy
// stream it uses does not order with a non-blocking stream.
void RankDevice::upload(void* device, const void* host, size_t bytes) const {
  LOOM_PERF_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, asStream(stream_)));
  synchronize();
}

void RankDevice::download(void* host, const void* device, size_t bytes) const {
  LOOM_PERF_CUDA(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, asStream(stream_)));
  synchronize();
}

double RankDevice::timeCopy(void* dst, const void* src, size_t bytes, int warmup, int iters) const {
  for (int i = 0; i < warmup; ++i)
    LOOM_PERF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, asStream(stream_)));
  synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    LOOM_PERF_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, asStream(stream_)));
  synchronize();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iters;
}

void RankDevice::beginCapture() {
  dropGraph();
  LOOM_PERF_CUDA(cudaStreamBeginCapture(asStream(stream_), cudaStreamCaptureModeThreadLocal));
}

void RankDevice::endCapture() {
  // Failures here are about what the captured calls enqueued (an operation
  // that capture does not allow invalidates it): say that it is -G's graph.
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(asStream(stream_), &graph);
  if (e != cudaSuccess) die("-G: cudaStreamEndCapture of the captured collective calls", describe(e));
  graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) die("-G: cudaGraphInstantiate of the captured collective calls", describe(e));
  graphExec_ = exec;
}

void RankDevice::launchGraph() const {
  LOOM_PERF_CUDA(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graphExec_), asStream(stream_)));
}

void RankDevice::dropGraph() noexcept {
  if (graphExec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graphExec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  graphExec_ = nullptr;
  graph_ = nullptr;
}

#undef LOOM_PERF_CUDA

#else  // !LOOM_HAVE_CUDA: no device is ever found, so no RankDevice is made.

DeviceInventory findDevices() { return {0, "Loom was built without CUDA"}; }

RankDevice::RankDevice(int rank, int device) : rank_(rank), device_(device) {
  die("RankDevice", "Loom was built without CUDA");
}
RankDevice::~RankDevice() = default;
void RankDevice::synchronize() const { die("cudaStreamSynchronize", "built without CUDA"); }
void* RankDevice::allocate(size_t) const { die("cudaMalloc", "built without CUDA"); }
void RankDevice::release(void*) const noexcept {}
void RankDevice::upload(void*, const void*, size_t) const { die("cudaMemcpy", "built without CUDA"); }
void RankDevice::download(void*, const void*, size_t) const { die("cudaMemcpy", "built without CUDA"); }
double RankDevice::timeCopy(void*, const void*, size_t, int, int) const { die("cudaMemcpyAsync", "built without CUDA"); }
void RankDevice::beginCapture() { die("cudaStreamBeginCapture", "built without CUDA"); }
void RankDevice::endCapture() { die("cudaStreamEndCapture", "built without CUDA"); }
void RankDevice::launchGraph() const { die("cudaGraphLaunch", "built without CUDA"); }
void RankDevice::dropGraph() noexcept {}

#endif

}  // namespace loom::perf
