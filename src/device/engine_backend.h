// What the device engine (device_engine.h) needs from a device, as one small
// interface: memory its peers can map, the launch of the engine kernel on a
// stream, and the words the kernel reports through. Two implementations:
//   - CUDA (engine_backend_cuda.cc): cudaMalloc, CUDA IPC, the engine kernel
//     of kernels/cuda/engine on the caller's cudaStream_t;
//   - emulated (engine_backend_emulated.cc): host memory, and the same kernel
//     body run by host threads, one in-order queue per "stream". It lets the
//     engine's setup, its exchange and every call it builds be tested end to
//     end on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/wait.h"
#include "kernels/cuda/engine/engine_layout.h"

namespace loom::cuda {

// How one rank names its engine allocation to the others.
struct EngineExport {
  int32_t pid = 0;
  uint64_t pointer = 0;  // the allocation in its owner's address space
  char handle[64] = {};  // a cudaIpcMemHandle_t (CUDA), unused when emulated
  char busId[32] = {};   // the PCI bus id of its device ("" when emulated)
};

class EngineBackend {
 public:
  virtual ~EngineBackend() = default;
  virtual const char* name() const = 0;
  // The device the engine runs on (the current device at creation).
  virtual int device() const = 0;

  // Zero-filled memory of `bytes` that peers can map, with its export record.
  virtual Result<void*> allocShared(size_t bytes, EngineExport* out) = 0;
  virtual void freeShared(void* base) = 0;
  // Whether this device can read and write the memory of the peer that
  // exported `peer` (same device, or peer access between the two).
  virtual Result<bool> reaches(const EngineExport& peer) = 0;
  // The peer's allocation as this process sees it (its own pointer inside
  // one process; an IPC mapping across processes), enabling peer access first.
  virtual Result<void*> mapPeer(const EngineExport& peer) = 0;
  virtual void unmapPeer(void* base) = 0;

  // Copies the view to memory the kernel reads; once, at setup.
  virtual Result<const kernels::cuda::engine::EngineView*> publishView(
      const kernels::cuda::engine::EngineView& view) = 0;
  // Host words the kernel reads (abort) and writes (status), mapped for it.
  virtual Result<uint32_t*> mappedWords(int count) = 0;

  // Enqueues the engine kernel on `stream` (a cudaStream_t; null: the
  // backend's own stream). Launches of one engine are made to run one after
  // another even on different streams: they share the connections' counters.
  virtual Status launch(const kernels::cuda::engine::EngineView* view, const kernels::cuda::engine::EngineLayout& layout,
                        const kernels::cuda::engine::EngineCall& call, void* stream) = 0;
  // One device-to-device copy on `stream` (null: the backend's own): all a
  // one-rank communicator does. Not ordered against other launches: it
  // touches no connection.
  virtual Status copy(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Waits until every launch so far has finished (the deadline and abort of `wait`).
  virtual Status waitIdle(const WaitContext& wait) = 0;
};

// Null in builds without the CUDA kernels.
Result<std::unique_ptr<EngineBackend>> makeCudaEngineBackend();
// Always available: see above. `process` tells ranks of one emulated
// "process" apart (their pointers are shared as they are).
std::unique_ptr<EngineBackend> makeEmulatedEngineBackend();

}  // namespace loom::cuda
