// Loom's thin layer over the CUDA runtime: the only place that includes
// cuda_runtime_api.h (runtime_cuda.cc). A build without CUDA compiles
// runtime_none.cc instead: the same API, where no device exists and every
// pointer is host memory (which is simply true of such a build), and where
// the pinned pool hands out ordinary host memory.
//
// Nothing here is on the host-buffer fast path except devicesUsable(): one
// relaxed atomic load once the first call has asked the driver.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/wait.h"
#include "src/device/device_stream.h"
#include "src/device/memory_kind.h"

namespace loom::cuda {

// ---- Availability: asked once per process, then cached ----
struct Availability {
  bool compiledWithCuda = false;
  int deviceCount = 0;
  int error = 0;            // the cudaError_t of cudaGetDeviceCount (0: none)
  std::string errorString;  // its cudaGetErrorString, or why there is no CUDA at all
  bool usable() const { return deviceCount > 0; }
  // "no CUDA device found (cudaGetDeviceCount: <error string>)", or "N CUDA device(s)".
  std::string describe() const;
};
const Availability& availability();
bool devicesUsable();

// Loads every kernel Loom launches into `device`'s context, once per process
// and device (kernel_preload_cuda.cc says why); ok at once after the first.
// Call it where a device is first used for collectives: engine creation,
// stream binding, the device reducer.
Status preloadKernels(int device);

// ---- Pointers ----
// What cudaPointerGetAttributes said, as plain numbers (cudaError_t,
// cudaMemoryType), so the mapping below is testable without CUDA.
struct RawPointerAttributes {
  int error = 0;
  int type = 0;
  int device = -1;
};
// Pure: the kind of `ptr` from its attributes. cudaMemoryTypeUnregistered
// (plain malloc memory since CUDA 11) and cudaErrorInvalidValue (what older
// runtimes returned for it) are host memory; any other error is reported,
// naming `what` (e.g. "sendbuff 0x1234 on rank 2").
Result<PointerInfo> pointerInfoFromAttributes(const RawPointerAttributes& attrs, const std::string& what);
// The kind of `ptr`. Without a usable device: host, without asking CUDA.
Result<PointerInfo> classifyPointer(const void* ptr, const std::string& what);

// ---- Pinned staging memory ----
// A process-wide pool of pinned host buffers (cudaHostAlloc; plain aligned
// host memory without CUDA). A lease returns its buffer to the pool; buffers
// are reused by size, so steady-state calls allocate nothing.
class PinnedPool {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept : data_(other.data_), bytes_(other.bytes_) { other.data_ = nullptr; }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    void* data() const { return data_; }
    size_t bytes() const { return bytes_; }

   private:
    friend class PinnedPool;
    Lease(void* data, size_t bytes) : data_(data), bytes_(bytes) {}
    void* data_ = nullptr;
    size_t bytes_ = 0;
  };

  static PinnedPool& instance();
  // A buffer of at least `bytes` (rounded up to a power of two, at least 64 KiB).
  Result<Lease> acquire(size_t bytes);
  // Buffers kept for reuse, in bytes (tests).
  size_t cachedBytes();

 private:
  void release(void* data, size_t bytes);
  std::mutex mu_;
  std::vector<std::pair<size_t, void*>> free_;  // (capacity, buffer)
  size_t cachedBytes_ = 0;
};

// ---- Copies ----
// Copies between any two kinds of memory (UVA: the runtime knows each
// pointer's kind), queued, then waited for together.
class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  // Queues `height` rows of `width` bytes; pitches are the row strides in bytes.
  virtual Status copy2D(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width,
                        size_t height) = 0;
  // Waits for every queued copy (spin, yield, sleep; the deadline and abort of `wait`).
  virtual Status finish(const WaitContext& wait) = 0;
};
// memcpy on the calling thread (both builds; the staged path's tests).
std::unique_ptr<CopyEngine> makeHostCopyEngine();
// cudaMemcpy2DAsync on a private non-blocking stream of `device`.
Result<std::unique_ptr<CopyEngine>> makeCudaCopyEngine(int device);

// ---- CUDA streams ----
// A DeviceStream (src/device/device_stream.h) over the CUDA stream `cudaStream`
// (a cudaStream_t; NULL is the legacy default stream).
Result<std::unique_ptr<DeviceStream>> bindCudaStream(void* cudaStream);

// ---- Devices, IPC and peer access (the direct P2P path) ----
Result<int> currentDevice();
Status setDevice(int device);
// cudaDeviceCanAccessPeer(device -> peer).
Result<bool> canAccessPeer(int device, int peer);
// cudaDeviceEnablePeerAccess from the current device (already enabled is fine).
Status enablePeerAccess(int peer);

struct IpcHandle {
  char bytes[64];  // a cudaIpcMemHandle_t
};
// What a peer needs to map `devicePtr`: the handle of its allocation and the
// offset of the pointer inside it.
struct IpcExport {
  IpcHandle handle{};
  size_t offset = 0;
};
Result<IpcExport> exportDeviceBuffer(const void* devicePtr);
// Maps a peer's allocation into this process (cudaIpcMemHandleLazyEnablePeerAccess).
Result<void*> openIpcHandle(const IpcHandle& handle);
void closeIpcHandle(void* base);

Result<void*> deviceAlloc(size_t bytes);
// Frees later, on a thread of its own: cudaFree synchronizes the device, which
// an operation must never do while peers' stream gates wait (stream_gate.h).
// closeIpcHandle and the pinned pool's frees do the same.
void deviceFree(void* ptr);

}  // namespace loom::cuda
