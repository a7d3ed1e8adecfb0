// torch.distributed backend "loom": a c10d::ProcessGroup over one Loom
// communicator (PyTorch 1.13's ProcessGroup API).
//
// Every operation is checked and its inputs copied where Loom needs
// contiguous memory on the calling thread, then enqueued on a Loom stream of
// its own and returned as a WorkLoom at once: the communicator's progress
// engine runs it while the caller computes (async_op=True, DDP's bucketed
// all-reduce during backward). Results land in the caller's tensors when the
// work is finished (Work::wait(), or the future, see loom_op.h).
//
// CPU tensors of Loom's types (int8, uint8, int32, int64, float16, bfloat16,
// float32, float64); reductions SUM, AVG, PRODUCT, MIN, MAX. Anything else
// raises an error naming the operation. Point-to-point tags are ignored:
// sends and recvs between two ranks match in call order, as in NCCL.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include <loom/loom.h>

#include "bindings/torch/loom_op.h"

namespace loom_torch {

// c10d's handle on one LoomOp. Dropping it before the op finished hands the
// op to the FinisherThread, so results still land and buffers stay alive.
class WorkLoom : public c10d::Work {
 public:
  WorkLoom(int rank, c10d::OpType type, std::shared_ptr<LoomOp> op, std::shared_ptr<FinisherThread> finisher);
  ~WorkLoom() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}  // host memory: nothing to order after completion
  // kNoTimeout waits up to the process group's timeout (Loom's deadline);
  // raises with Loom's message if the operation failed.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::shared_ptr<LoomOp> op_;
  std::shared_ptr<FinisherThread> finisher_;
};

class ProcessGroupLoom : public c10d::ProcessGroup {
 public:
  // Bootstraps through `store`: rank 0 creates the Loom unique id and sets it
  // there, the others get it. `timeout` becomes the communicator's deadline.
  ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupLoom() override;

  const std::string getBackendName() const override { return "loom"; }

  // batch_isend_irecv: the sends and recvs between start and end run as one
  // Loom group, so exchanges in any pattern cannot deadlock (single isend
  // and irecv calls run one after the other, in call order, as in NCCL).
  void startCoalescing() override;
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;

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
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputTensors,
                                                std::vector<std::vector<at::Tensor>>& inputTensors,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Launches `op` (its tensors and copy-out already set) by calling `enqueue`
  // with the op's stream under the communicator's lock; raises Loom's message
  // naming the operation if the enqueue fails.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, std::shared_ptr<LoomOp> op,
                                        const std::function<loomResult_t(loomStream_t)>& enqueue);
  std::shared_ptr<LoomOp> newOp(const char* name);
  // Point to point: launched at once, or deferred to endCoalescing().
  c10::intrusive_ptr<c10d::Work> pointToPoint(c10d::OpType type, std::shared_ptr<LoomOp> op, void* buf,
                                              size_t bytes, int peer);
  void rejectWhileCoalescing(const char* name);

  struct DeferredP2P {
    std::shared_ptr<LoomOp> op;
    bool isSend;
    void* buf;
    size_t bytes;
    int peer;
  };

  loomComm_t comm_ = nullptr;
  std::mutex commMu_;  // Loom takes one enqueueing thread per communicator at a time
  std::shared_ptr<StreamPool> streams_;
  std::shared_ptr<FinisherThread> finisher_;
  std::mutex coalesceMu_;
  bool coalescing_ = false;
  std::vector<DeferredP2P> deferred_;  // sends and recvs since startCoalescing()
};

}  // namespace loom_torch
