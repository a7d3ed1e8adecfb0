// torch.distributed backend "loom": a c10d::Backend (PyTorch >= 2.0) over one
// Loom communicator, registered for CPU and CUDA tensors.
//
// Every operation is checked and its inputs copied where Loom needs
// contiguous memory on the calling thread, then enqueued and returned as a
// WorkLoom at once. CPU tensors: the operation runs on a Loom stream of its
// own, driven by the communicator's progress engine, while the caller
// computes (async_op=True, DDP's bucketed all-reduce during backward);
// results land in the caller's tensors when the work is finished
// (Work::wait(), or the future, see loom_op.h). CUDA tensors: the operation
// is ordered after the caller's current CUDA stream and Work::wait() makes
// that stream wait for it (cuda_ordering.h), as ProcessGroupNCCL does.
//
// Point-to-point tags are ignored: sends and recvs between two ranks match
// in call order, as in NCCL.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <loom/loom.h>

#include "bindings/torch/loom_op.h"

namespace loom_torch {

struct CudaStreams;  // cuda_ordering.h

// c10d's handle on one or more LoomOps (several for a coalesced batch).
// Dropping it before they finished hands them to the FinisherThread, so
// results still land and buffers stay alive.
class WorkLoom : public c10d::Work {
 public:
  WorkLoom(int rank, c10d::OpType type, std::vector<std::shared_ptr<LoomOp>> ops,
           std::shared_ptr<FinisherThread> finisher, std::chrono::milliseconds timeout);
  ~WorkLoom() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // CUDA: the caller's current stream waits for the operation (no host wait).
  void synchronize() override;
  // CPU: waits on the host until done, at most `timeout` (kNoTimeout: the
  // process group's timeout, which is also Loom's deadline); raises with
  // Loom's message if the operation failed or did not finish in time.
  // CUDA: as synchronize(), unless a timeout is given, then also the host waits.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void blockCurrentStream() override { synchronize(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::chrono::milliseconds getTimeout() const override { return timeout_; }
  int sourceRank() const override { return sourceRank_; }
  void setSourceRank(int rank) { sourceRank_ = rank; }

 private:
  void raiseIfFailed() const;

  std::vector<std::shared_ptr<LoomOp>> ops_;
  std::shared_ptr<FinisherThread> finisher_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int sourceRank_ = -1;  // recvAnysource: the rank the tensor came from
};

class LoomBackend : public c10d::Backend {
 public:
  // Bootstraps through `store`: rank 0 creates the Loom unique id and sets it
  // there, the others get it. `timeout` becomes the communicator's deadline.
  LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);
  // Over `comm`, a communicator made by split() (which this then owns).
  LoomBackend(loomComm_t comm, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout);
  ~LoomBackend() override;

  const std::string getBackendName() const override { return "loom"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;

  // split_group(): one loomCommSplit of this communicator.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;

  // batch_isend_irecv and the coalescing manager: the sends and recvs between
  // start and end run as one Loom group, so exchanges in any pattern cannot
  // deadlock (single isend and irecv calls run one after the other, in call
  // order, as in NCCL); collectives called in between run at once and the
  // Work returned by endCoalescing() covers them too.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputTensors,
                                           std::vector<at::Tensor>& inputTensors,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputTensorLists,
                                                     std::vector<at::Tensor>& inputTensors,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputTensors,
                                        std::vector<at::Tensor>& inputTensors,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputTensors,
                                         std::vector<std::vector<at::Tensor>>& inputTensors,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputTensors,
                                                std::vector<std::vector<at::Tensor>>& inputTensors,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputTensors, std::vector<at::Tensor>& inputTensors,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // recvAnysource: every send announces itself in the store under
  // "any/<dst>/<src>" (a counter), so a receiver that does not know the
  // source finds the oldest send to it that no recv has matched yet.
  void announceSend(int peer);
  void countRecv(int peer);

  // A new op for tensors on `device` (its CUDA ordering set up for CUDA).
  std::shared_ptr<LoomOp> newOp(const char* name, const at::Device& device);
  // Launches `op` (its tensors and copy-out already set) by calling `enqueue`
  // with the op's stream under the communicator's lock; raises Loom's message
  // naming the operation if the enqueue fails.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, std::shared_ptr<LoomOp> op,
                                        const std::function<loomResult_t(loomStream_t)>& enqueue);
  c10::intrusive_ptr<c10d::Work> workOf(c10d::OpType type, std::vector<std::shared_ptr<LoomOp>> ops);
  // Point to point: launched at once, or deferred to endCoalescing().
  c10::intrusive_ptr<c10d::Work> pointToPoint(c10d::OpType type, std::shared_ptr<LoomOp> op, void* buf,
                                              size_t bytes, int peer);
  // A group of sends and recvs (each may be empty) on one op's stream:
  // gather, scatter, alltoall and uneven all_to_all_single.
  struct Transfer {
    bool isSend;
    void* buf;
    size_t bytes;
    int peer;
  };
  c10::intrusive_ptr<c10d::Work> launchTransfers(c10d::OpType type, std::shared_ptr<LoomOp> op,
                                                 std::vector<Transfer> transfers);

  struct DeferredP2P {
    std::shared_ptr<LoomOp> op;
    Transfer transfer;
  };

  loomComm_t comm_ = nullptr;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::mutex recvCountMu_;
  std::vector<int64_t> recvCount_;  // recvs posted per source rank
  std::mutex commMu_;  // Loom takes one enqueueing thread per communicator at a time
  std::shared_ptr<StreamPool> streams_;
  std::shared_ptr<FinisherThread> finisher_;
  // CUDA: one internal stream per device, so this communicator's operations
  // run in launch order (cuda_ordering.h).
  std::shared_ptr<CudaStreams> cudaStreams_;
  std::mutex coalesceMu_;
  bool coalescing_ = false;
  std::vector<DeferredP2P> deferred_;                   // sends and recvs since startCoalescing()
  std::vector<std::shared_ptr<LoomOp>> coalescedOps_;  // collectives since startCoalescing()
};

}  // namespace loom_torch
