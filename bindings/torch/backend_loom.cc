#include "bindings/torch/process_group_loom.h"

#include <cstring>
#include <numeric>

#include "bindings/torch/tensor_args.h"

namespace loom_torch {

using c10d::OpType;

// ---- WorkLoom --------------------------------------------------------------

WorkLoom::WorkLoom(int rank, OpType type, std::shared_ptr<LoomOp> op, std::shared_ptr<FinisherThread> finisher)
    : Work(rank, type), op_(std::move(op)), finisher_(std::move(finisher)) {}

WorkLoom::~WorkLoom() {
  if (!op_->finished()) finisher_->adopt(std::move(op_));
}

bool WorkLoom::isCompleted() { return op_->tryFinish(); }

bool WorkLoom::isSuccess() const { return op_->finished() && !op_->error(); }

std::exception_ptr WorkLoom::exception() const { return op_->error(); }

std::vector<at::Tensor> WorkLoom::result() { return op_->outputs; }

bool WorkLoom::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    op_->finish();
  } else {
    TORCH_CHECK(op_->finishWithin(timeout), "loom: ", op_->name(), " on rank ", rank_, " did not finish within ",
                timeout.count(), " ms");
  }
  if (std::exception_ptr e = op_->error()) std::rethrow_exception(e);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkLoom::getFuture() {
  auto [future, created] = op_->future();
  // Someone must finish the op for the future to complete; the caller may
  // never wait() on this Work.
  if (created && !op_->finished()) finisher_->adopt(op_);
  return future;
}

// ---- ProcessGroupLoom: lifetime ---------------------------------------------

ProcessGroupLoom::ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : ProcessGroup(rank, size),
      streams_(std::make_shared<StreamPool>()),
      finisher_(std::make_shared<FinisherThread>()) {
  init();
  // The store is private to this process group (PyTorch prefixes it with the
  // group's name), so one fixed key is enough.
  const std::string key = "loom_unique_id";
  loomUniqueId id;
  if (rank == 0) {
    TORCH_CHECK(loomGetUniqueId(&id) == loomSuccess, "loom: rank 0 cannot create the unique id: ",
                loomGetLastError(nullptr));
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);  // waits for rank 0, up to the store's timeout
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "loom: rank ", rank, " read ", bytes.size(),
                " bytes of unique id from the store, expected ", sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutSeconds = std::chrono::duration<double>(timeout).count();
  TORCH_CHECK(loomCommInitRankConfig(&comm_, size, id, rank, &config) == loomSuccess,
              "loom: creating the communicator of rank ", rank, " of ", size, " failed: ", loomGetLastError(nullptr));
}

ProcessGroupLoom::~ProcessGroupLoom() {
  if (!comm_) return;
  // After a failure peers may be gone: abort rather than wait for them.
  loomResult_t asyncError = loomSuccess;
  if (loomCommGetAsyncError(comm_, &asyncError) == loomSuccess && asyncError != loomSuccess &&
      asyncError != loomInProgress)
    loomCommAbort(comm_);
  else
    loomCommDestroy(comm_);  // finishes queued work first
}

std::shared_ptr<LoomOp> ProcessGroupLoom::newOp(const char* name) {
  return std::make_shared<LoomOp>(name, rank_, streams_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::launch(OpType type, std::shared_ptr<LoomOp> op,
                                                        const std::function<loomResult_t(loomStream_t)>& enqueue) {
  rejectWhileCoalescing(op->name().c_str());
  loomResult_t r;
  {
    std::lock_guard<std::mutex> lock(commMu_);
    r = enqueue(op->stream());
  }
  if (r != loomSuccess) {
    // Loom leaves the message as this thread's last error.
    auto error = std::make_exception_ptr(std::runtime_error(c10::str("loom: ", op->name(), " on rank ", rank_,
                                                                     " failed (", loomGetErrorString(r),
                                                                     "): ", loomGetLastError(nullptr))));
    op->failLaunch(error);
    std::rethrow_exception(error);
  }
  op->markLaunched();
  return c10::make_intrusive<WorkLoom>(rank_, type, std::move(op), finisher_);
}

void ProcessGroupLoom::rejectWhileCoalescing(const char* name) {
  std::lock_guard<std::mutex> lock(coalesceMu_);
  TORCH_CHECK(!coalescing_, "loom: ", name, " cannot run inside a coalesced batch (only send and recv can)");
}

// ---- Coalesced point to point ----------------------------------------------------

void ProcessGroupLoom::startCoalescing() {
  std::lock_guard<std::mutex> lock(coalesceMu_);
  TORCH_CHECK(!coalescing_, "loom: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

void ProcessGroupLoom::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) {
  std::vector<DeferredP2P> batch;
  {
    std::lock_guard<std::mutex> lock(coalesceMu_);
    TORCH_CHECK(coalescing_, "loom: endCoalescing called without startCoalescing");
    coalescing_ = false;
    batch.swap(deferred_);
  }
  if (batch.empty()) return;
  // One group on the first op's stream; the others follow it (loom_op.h).
  const std::shared_ptr<LoomOp>& leader = batch.front().op;
  loomResult_t first = loomSuccess;
  {
    std::lock_guard<std::mutex> lock(commMu_);
    first = loomGroupStart();
    for (size_t i = 0; i < batch.size() && first == loomSuccess; ++i) {
      const DeferredP2P& p = batch[i];
      first = p.isSend ? loomSend(p.buf, p.bytes, loomUint8, p.peer, comm_, leader->stream())
                       : loomRecv(p.buf, p.bytes, loomUint8, p.peer, comm_, leader->stream());
    }
    loomResult_t end = loomGroupEnd();  // closes the group even after a failed call
    if (first == loomSuccess) first = end;
  }
  if (first != loomSuccess) {
    auto error = std::make_exception_ptr(std::runtime_error(c10::str("loom: coalesced send/recv on rank ", rank_,
                                                                     " failed (", loomGetErrorString(first),
                                                                     "): ", loomGetLastError(nullptr))));
    for (DeferredP2P& p : batch) p.op->failLaunch(error);
    std::rethrow_exception(error);
  }
  for (DeferredP2P& p : batch) p.op->markLaunched();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::pointToPoint(OpType type, std::shared_ptr<LoomOp> op, void* buf,
                                                              size_t bytes, int peer) {
  const bool isSend = type == OpType::SEND;
  {
    std::lock_guard<std::mutex> lock(coalesceMu_);
    if (coalescing_) {
      if (!deferred_.empty()) op->follow(deferred_.front().op);
      deferred_.push_back({op, isSend, buf, bytes, peer});
      return c10::make_intrusive<WorkLoom>(rank_, type, std::move(op), finisher_);
    }
  }
  return launch(type, std::move(op), [&](loomStream_t s) {
    return isSend ? loomSend(buf, bytes, loomUint8, peer, comm_, s) : loomRecv(buf, bytes, loomUint8, peer, comm_, s);
  });
}

// ---- Reductions and broadcast -------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  at::Tensor tensor = singleTensor(tensors, name);
  const loomDataType_t dtype = loomTypeOf(tensor, name);
  const loomRedOp_t redOp = loomOpOf(opts.reduceOp, name);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name);
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor)) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return launch(OpType::ALLREDUCE, std::move(op), [&](loomStream_t s) {
    return loomAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), dtype, redOp, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "loom: ", name, " got no tensors");
  for (const at::Tensor& t : tensors) {
    checkCpuDense(t, name);
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "loom: ", name, " takes tensors of one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  const loomDataType_t dtype = loomTypeOf(tensors[0], name);
  const loomRedOp_t redOp = loomOpOf(opts.reduceOp, name);
  // One all-reduce over the tensors back to back: one call's latency instead of n.
  at::Tensor flat = flatten(tensors);
  auto op = newOp(name);
  op->keepAlive = {flat};
  op->outputs = tensors;
  op->copyOut = [flat, outs = tensors] { scatterInto(flat, outs); };
  return launch(OpType::ALLREDUCE_COALESCED, std::move(op), [&](loomStream_t s) {
    return loomAllReduce(flat.data_ptr(), flat.data_ptr(), flat.numel(), dtype, redOp, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const char* name = "reduce";
  at::Tensor tensor = singleTensor(tensors, name);
  TORCH_CHECK(opts.rootTensor == 0, "loom: ", name, " takes one tensor per process, rootTensor must be 0");
  const loomDataType_t dtype = loomTypeOf(tensor, name);
  const loomRedOp_t redOp = loomOpOf(opts.reduceOp, name);
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name);
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor) && root == rank_) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return launch(OpType::REDUCE, std::move(op), [&](loomStream_t s) {
    return loomReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), dtype, redOp, root, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  at::Tensor tensor = singleTensor(tensors, name);
  TORCH_CHECK(opts.rootTensor == 0, "loom: ", name, " takes one tensor per process, rootTensor must be 0");
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name);
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor) && root != rank_) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return launch(OpType::BROADCAST, std::move(op),
                [&](loomStream_t s) { return loomBcast(buf.data_ptr(), byteCount(buf), loomUint8, root, comm_, s); });
}

// ---- Gathers and scatters ----------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather(std::vector<std::vector<at::Tensor>>& outputTensors,
                                                           std::vector<at::Tensor>& inputTensors,
                                                           const c10d::AllgatherOptions& opts) {
  const char* name = "allgather";
  at::Tensor input = singleTensor(inputTensors, name);
  TORCH_CHECK(outputTensors.size() == 1, "loom: ", name, " takes one output list per process, got ",
              outputTensors.size());
  const std::vector<at::Tensor>& outs = outputTensors[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "loom: ", name, " needs ", size_, " output tensors, got ",
              outs.size());
  for (const at::Tensor& t : outs) {
    checkCpuDense(t, name);
    TORCH_CHECK(t.numel() == input.numel() && t.scalar_type() == input.scalar_type(), "loom: ", name,
                ": every output tensor must match the input's ", input.numel(), " elements of ", input.scalar_type());
  }
  at::Tensor in = contiguousOf(input);
  at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
  auto op = newOp(name);
  op->keepAlive = {in, flat};
  op->outputs = outs;
  op->copyOut = [flat, outs] { scatterInto(flat, outs); };
  return launch(OpType::ALLGATHER, std::move(op), [&](loomStream_t s) {
    return loomAllGather(in.data_ptr(), flat.data_ptr(), byteCount(in), loomUint8, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_allgather_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                                 const c10d::AllgatherOptions& opts) {
  const char* name = "_allgather_base";
  checkCpuDense(inputBuffer, name);
  checkCpuDense(outputBuffer, name);
  TORCH_CHECK(outputBuffer.scalar_type() == inputBuffer.scalar_type(), "loom: ", name,
              ": output dtype ", outputBuffer.scalar_type(), " differs from input dtype ", inputBuffer.scalar_type());
  TORCH_CHECK(outputBuffer.numel() == size_ * inputBuffer.numel(), "loom: ", name, ": output has ",
              outputBuffer.numel(), " elements, expected ", size_, " x ", inputBuffer.numel());
  at::Tensor in = contiguousOf(inputBuffer);
  at::Tensor out = contiguousOf(outputBuffer);
  auto op = newOp(name);
  op->keepAlive = {in, out};
  op->outputs = {outputBuffer};
  if (!out.is_same(outputBuffer)) op->copyOut = [outputBuffer, out] { outputBuffer.copy_(out); };
  return launch(OpType::_ALLGATHER_BASE, std::move(op), [&](loomStream_t s) {
    return loomAllGather(in.data_ptr(), out.data_ptr(), byteCount(in), loomUint8, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter(std::vector<at::Tensor>& outputTensors,
                                                                std::vector<std::vector<at::Tensor>>& inputTensors,
                                                                const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  at::Tensor output = singleTensor(outputTensors, name);
  TORCH_CHECK(inputTensors.size() == 1, "loom: ", name, " takes one input list per process, got ",
              inputTensors.size());
  const std::vector<at::Tensor>& ins = inputTensors[0];
  TORCH_CHECK(static_cast<int>(ins.size()) == size_, "loom: ", name, " needs ", size_, " input tensors, got ",
              ins.size());
  for (const at::Tensor& t : ins) {
    checkCpuDense(t, name);
    TORCH_CHECK(t.numel() == output.numel() && t.scalar_type() == output.scalar_type(), "loom: ", name,
                ": every input tensor must match the output's ", output.numel(), " elements of ",
                output.scalar_type());
  }
  const loomDataType_t dtype = loomTypeOf(output, name);
  const loomRedOp_t redOp = loomOpOf(opts.reduceOp, name);
  at::Tensor flat = flatten(ins);
  at::Tensor out = contiguousOf(output);
  auto op = newOp(name);
  op->keepAlive = {flat, out};
  op->outputs = {output};
  if (!out.is_same(output)) op->copyOut = [output, out] { output.copy_(out); };
  return launch(OpType::REDUCE_SCATTER, std::move(op), [&](loomStream_t s) {
    return loomReduceScatter(flat.data_ptr(), out.data_ptr(), out.numel(), dtype, redOp, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_reduce_scatter_base(at::Tensor& outputBuffer,
                                                                      at::Tensor& inputBuffer,
                                                                      const c10d::ReduceScatterOptions& opts) {
  const char* name = "_reduce_scatter_base";
  checkCpuDense(inputBuffer, name);
  checkCpuDense(outputBuffer, name);
  TORCH_CHECK(outputBuffer.scalar_type() == inputBuffer.scalar_type(), "loom: ", name,
              ": output dtype ", outputBuffer.scalar_type(), " differs from input dtype ", inputBuffer.scalar_type());
  TORCH_CHECK(inputBuffer.numel() == size_ * outputBuffer.numel(), "loom: ", name, ": input has ",
              inputBuffer.numel(), " elements, expected ", size_, " x ", outputBuffer.numel());
  const loomDataType_t dtype = loomTypeOf(outputBuffer, name);
  const loomRedOp_t redOp = loomOpOf(opts.reduceOp, name);
  at::Tensor in = contiguousOf(inputBuffer);
  at::Tensor out = contiguousOf(outputBuffer);
  auto op = newOp(name);
  op->keepAlive = {in, out};
  op->outputs = {outputBuffer};
  if (!out.is_same(outputBuffer)) op->copyOut = [outputBuffer, out] { outputBuffer.copy_(out); };
  return launch(OpType::_REDUCE_SCATTER_BASE, std::move(op), [&](loomStream_t s) {
    return loomReduceScatter(in.data_ptr(), out.data_ptr(), out.numel(), dtype, redOp, comm_, s);
  });
}

namespace {

// Rows (dim 0) per peer: the given split sizes, or an equal share.
std::vector<int64_t> rowsPerPeer(const std::vector<int64_t>& splits, const at::Tensor& t, int nranks,
                                 const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    TORCH_CHECK(rows % nranks == 0, "loom: alltoall_base: ", what, " has ", rows,
                " rows, not divisible by the world size ", nranks);
    return std::vector<int64_t>(static_cast<size_t>(nranks), rows / nranks);
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == nranks, "loom: alltoall_base: ", what, " split sizes have ",
              splits.size(), " entries, expected ", nranks);
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "loom: alltoall_base: ", what,
              " split sizes do not add up to its ", rows, " rows");
  return splits;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall_base(at::Tensor& outputBuffer, at::Tensor& inputBuffer,
                                                               std::vector<int64_t>& outputSplitSizes,
                                                               std::vector<int64_t>& inputSplitSizes,
                                                               const c10d::AllToAllOptions& opts) {
  const char* name = "alltoall_base";
  checkCpuDense(inputBuffer, name);
  checkCpuDense(outputBuffer, name);
  TORCH_CHECK(outputBuffer.scalar_type() == inputBuffer.scalar_type(), "loom: ", name,
              ": output dtype ", outputBuffer.scalar_type(), " differs from input dtype ", inputBuffer.scalar_type());
  const std::vector<int64_t> sendRows = rowsPerPeer(inputSplitSizes, inputBuffer, size_, "input");
  const std::vector<int64_t> recvRows = rowsPerPeer(outputSplitSizes, outputBuffer, size_, "output");
  const int64_t inRowElems = inputBuffer.numel() / std::max<int64_t>(1, inputBuffer.dim() ? inputBuffer.size(0) : 1);
  const int64_t outRowElems =
      outputBuffer.numel() / std::max<int64_t>(1, outputBuffer.dim() ? outputBuffer.size(0) : 1);
  at::Tensor in = contiguousOf(inputBuffer);
  at::Tensor out = contiguousOf(outputBuffer);
  auto op = newOp(name);
  op->keepAlive = {in, out};
  op->outputs = {outputBuffer};
  if (!out.is_same(outputBuffer)) op->copyOut = [outputBuffer, out] { outputBuffer.copy_(out); };

  const bool equal = std::all_of(sendRows.begin(), sendRows.end(), [&](int64_t r) { return r == sendRows[0]; }) &&
                     sendRows == recvRows && inRowElems == outRowElems;
  if (equal) {
    const size_t bytes = static_cast<size_t>(sendRows[0] * inRowElems) * in.element_size();
    return launch(OpType::ALLTOALL_BASE, std::move(op), [&](loomStream_t s) {
      return loomAllToAll(in.data_ptr(), out.data_ptr(), bytes, loomUint8, comm_, s);
    });
  }
  // Uneven splits: one fused group of sends and recvs, as Loom's own all-to-all.
  const size_t elemBytes = static_cast<size_t>(in.element_size());
  return launch(OpType::ALLTOALL_BASE, std::move(op), [&](loomStream_t s) {
    loomResult_t first = loomGroupStart();
    auto* send = static_cast<char*>(in.data_ptr());
    auto* recv = static_cast<char*>(out.data_ptr());
    for (int peer = 0; peer < size_ && first == loomSuccess; ++peer) {
      const size_t sendBytes = static_cast<size_t>(sendRows[peer] * inRowElems) * elemBytes;
      const size_t recvBytes = static_cast<size_t>(recvRows[peer] * outRowElems) * elemBytes;
      if (sendBytes) first = loomSend(send, sendBytes, loomUint8, peer, comm_, s);
      if (recvBytes && first == loomSuccess) first = loomRecv(recv, recvBytes, loomUint8, peer, comm_, s);
      send += sendBytes;
      recv += recvBytes;
    }
    // The group must be closed even when a call in it failed.
    loomResult_t end = loomGroupEnd();
    return first != loomSuccess ? first : end;
  });
}

// ---- Point to point and barrier ------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const char* name = "send";
  at::Tensor tensor = singleTensor(tensors, name);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name);
  op->keepAlive = {buf};
  return pointToPoint(OpType::SEND, std::move(op), buf.data_ptr(), byteCount(buf), dstRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const char* name = "recv";
  at::Tensor tensor = singleTensor(tensors, name);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name);
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor)) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return pointToPoint(OpType::RECV, std::move(op), buf.data_ptr(), byteCount(buf), srcRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::barrier(const c10d::BarrierOptions& opts) {
  return launch(OpType::BARRIER, newOp("barrier"), [&](loomStream_t s) { return loomBarrier(comm_, s); });
}

}  // namespace loom_torch
