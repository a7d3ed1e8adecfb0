// A Loom stream's view of the CUDA stream it is bound to (loomStreamFromCuda).
// No CUDA types here: comm/ sees only this interface.
//
// For each operation enqueued on a bound stream, on the caller's thread:
//   1. markPriorWork() records an event on the CUDA stream; the executor waits
//      for it (PriorWork::wait, spin then sleep: the executor is Loom's own
//      thread, so polling there blocks nothing of CUDA) before the operation
//      reads any buffer, so kernels enqueued earlier on the CUDA stream have
//      finished writing the inputs;
//   2. reserveOrder() takes the operation's place in the stream's order (a
//      ticket of the stream's gate, src/device/stream_gate.h), before the
//      operation is queued: it may complete before step 4;
//   3. the operation is queued on its communicator's executor, which
//      releases the ticket when the operation completes, whatever its status
//      (a failed operation releases the stream too; its error surfaces
//      through loomCommGetAsyncError / loomStreamSynchronize, as with NCCL);
//   4. orderAfter(sequence) makes everything enqueued later on the CUDA stream
//      wait on the GPU until that ticket is released (a gate kernel: never a
//      host function that blocks, see stream_gate.h).
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "common/wait.h"
#include "src/device/stream_gate.h"

namespace loom::cuda {

class PriorWork {
 public:
  virtual ~PriorWork() = default;
  // Returns once the marked work finished (or failed: kUnhandledCudaError),
  // or with the deadline/abort error of `wait`.
  virtual Status wait(const WaitContext& wait) = 0;
};

class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  // Never null: a failure to record is reported by the returned wait().
  virtual std::shared_ptr<PriorWork> markPriorWork() = 0;
  // The next place in the stream's order; never empty.
  virtual StreamOrderTicket reserveOrder() = 0;
  // Later work on the stream waits until ticket `sequence` is released.
  virtual Status orderAfter(uint64_t sequence) = 0;
  // Whether the stream is being captured into a CUDA graph now
  // (cudaStreamIsCapturing): work the host executor runs cannot be captured.
  virtual Result<bool> capturing() = 0;
  // The CUDA device of the stream (staging copies run on it).
  virtual int device() const = 0;
  // The cudaStream_t itself: the device engine launches its kernels on it.
  virtual void* cudaStream() const = 0;
  // Waits for everything enqueued on the CUDA stream so far (the device
  // engine's kernels are on it, not in the Loom stream's queue).
  virtual Status drain(const WaitContext& wait) = 0;
  // Whether work enqueued on the CUDA stream is still running or waiting
  // (cudaStreamQuery): the device engine's kernels count there only.
  virtual Result<bool> busy() = 0;
};

}  // namespace loom::cuda
