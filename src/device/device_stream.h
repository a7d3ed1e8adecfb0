// A Loom stream's view of the CUDA stream it is bound to (loomStreamFromCuda).
// No CUDA types here: comm/ sees only this interface.
//
// For each operation enqueued on a bound stream, on the caller's thread:
//   1. markPriorWork() records an event on the CUDA stream; the executor waits
//      for it (PriorWork::wait, spin then sleep) before the operation reads
//      any buffer, so kernels enqueued earlier on the CUDA stream have
//      finished writing the inputs;
//   2. the operation is queued on its communicator's executor;
//   3. orderAfter(op) makes everything enqueued later on the CUDA stream wait
//      until the operation has completed (whatever its status: a failed
//      operation releases the stream too; its error surfaces through
//      loomCommGetAsyncError / loomStreamSynchronize, as with NCCL).
#pragma once

#include <memory>

#include "common/completion.h"
#include "common/status.h"
#include "common/wait.h"

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
  virtual Status orderAfter(const CompletionPtr& op) = 0;
  // The CUDA device of the stream (staging copies run on it).
  virtual int device() const = 0;
  // The cudaStream_t itself: the device engine launches its kernels on it.
  virtual void* cudaStream() const = 0;
  // Waits for everything enqueued on the CUDA stream so far (the device
  // engine's kernels are on it, not in the Loom stream's queue).
  virtual Status drain(const WaitContext& wait) = 0;
};

}  // namespace loom::cuda
