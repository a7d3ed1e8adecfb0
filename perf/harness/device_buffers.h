// The perf tools' only contact with the CUDA runtime: which devices exist,
// one rank's device and stream, device memory and its copies to and from the
// host, the device-to-device copy baseline and -G's CUDA graph. No CUDA type
// appears here (a stream is a void*), so the rest of the harness compiles the
// same with and without CUDA; built without CUDA (LOOM_HAVE_CUDA off),
// findDevices reports none and nothing else is called.
#pragma once

#include <cstddef>
#include <string>

namespace loom::perf {

// The CUDA devices this process can use, or why there are none.
struct DeviceInventory {
  int count = 0;
  std::string whyNone;  // set when count is 0
};
DeviceInventory findDevices();

// One rank's GPU: a CUDA device and a stream on it created with
// cudaStreamNonBlocking (so it never waits for the legacy default stream).
// Construct and use it on the rank's own thread: the constructor makes the
// device current there. A failed CUDA call ends the process with status 1
// and a message naming the call, the rank and the device: a perf tool has
// nothing sensible to do after one.
class RankDevice {
 public:
  RankDevice(int rank, int device);
  ~RankDevice();
  RankDevice(const RankDevice&) = delete;
  RankDevice& operator=(const RankDevice&) = delete;

  int device() const { return device_; }
  void* cudaStream() const { return stream_; }  // a cudaStream_t, for loomStreamFromCuda
  // "[0000:1b:00.0] NVIDIA H100 80GB HBM3": the device lines of the header.
  const std::string& description() const { return description_; }

  // cudaStreamSynchronize on the rank's stream.
  void synchronize() const;

  void* allocate(size_t bytes) const;  // zeroed
  void release(void* pointer) const noexcept;
  void upload(void* device, const void* host, size_t bytes) const;    // synchronous
  void download(void* host, const void* device, size_t bytes) const;  // synchronous

  // Seconds per device-to-device cudaMemcpyAsync of `bytes` on the rank's
  // stream: `warmup` copies, then `iters` back to back, timed by the host
  // clock around the stream synchronize (as the collectives are).
  double timeCopy(void* dst, const void* src, size_t bytes, int warmup, int iters) const;

  // -G: what the calling thread enqueues on the stream between beginCapture
  // and endCapture becomes a graph (cudaStreamCaptureModeThreadLocal, so that
  // other ranks' threads may keep using CUDA meanwhile); launchGraph enqueues
  // it once more. A new capture replaces the previous graph.
  void beginCapture();
  void endCapture();
  void launchGraph() const;

 private:
  [[noreturn]] void die(const char* call, const std::string& error) const;
  void dropGraph() noexcept;

  int rank_;
  int device_;
  void* stream_ = nullptr;
  void* graph_ = nullptr;      // cudaGraph_t
  void* graphExec_ = nullptr;  // cudaGraphExec_t
  std::string description_;
};

// Device memory of one rank, freed with it.
class DeviceBuffer {
 public:
  DeviceBuffer(const RankDevice& device, size_t bytes) : device_(device), data_(device.allocate(bytes)) {}
  ~DeviceBuffer() { device_.release(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }

 private:
  const RankDevice& device_;
  void* data_;
};

}  // namespace loom::perf
