// LoomBackend's lifetime, launching, Work objects, coalescing, point to
// point and split; the collectives are in collectives.cc.
#include "bindings/torch/backend_loom.h"

#include <cstring>
#include <functional>
#include <thread>

#include "bindings/torch/cuda_ordering.h"
#include "bindings/torch/tensor_args.h"

namespace loom_torch {

using c10d::OpType;

// ---- WorkLoom --------------------------------------------------------------

WorkLoom::WorkLoom(int rank, OpType type, std::vector<std::shared_ptr<LoomOp>> ops,
                   std::shared_ptr<FinisherThread> finisher, std::chrono::milliseconds timeout)
    : Work(rank, type), ops_(std::move(ops)), finisher_(std::move(finisher)), timeout_(timeout) {}

WorkLoom::~WorkLoom() {
  for (auto& op : ops_)
    if (!op->finished()) finisher_->adopt(std::move(op));
}

bool WorkLoom::isCompleted() {
  for (auto& op : ops_)
    if (!op->tryFinish()) return false;
  return true;
}

bool WorkLoom::isSuccess() const {
  for (const auto& op : ops_)
    if (!op->finished() || op->error()) return false;
  return true;
}

std::exception_ptr WorkLoom::exception() const {
  for (const auto& op : ops_)
    if (std::exception_ptr e = op->error()) return e;
  return nullptr;
}

std::vector<at::Tensor> WorkLoom::result() {
  std::vector<at::Tensor> all;
  for (const auto& op : ops_) all.insert(all.end(), op->outputs.begin(), op->outputs.end());
  return all;
}

void WorkLoom::raiseIfFailed() const {
  if (std::exception_ptr e = exception()) std::rethrow_exception(e);
}

void WorkLoom::synchronize() {
  for (auto& op : ops_) {
    if (op->device()) {
      op->waitLaunched();
      op->device()->blockCurrentStream();
      // Someone must still finish it on the host (buffers, future, errors).
      if (!op->finished()) finisher_->adopt(op);
    } else {
      op->finish();
    }
  }
}

bool WorkLoom::wait(std::chrono::milliseconds timeout) {
  const bool onDevice = !ops_.empty() && ops_.front()->device();
  if (onDevice && timeout == kNoTimeout) {
    // As ProcessGroupNCCL: the caller's stream waits, the host does not.
    synchronize();
    if (isCompleted()) raiseIfFailed();
    return true;
  }
  if (onDevice) synchronize();
  if (timeout == kNoTimeout) {
    for (auto& op : ops_) op->finish();
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (auto& op : ops_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      TORCH_CHECK(op->finishWithin(std::max(left, std::chrono::milliseconds(0))), "loom: ", op->name(), " on rank ",
                  rank_, " did not finish within ", timeout.count(), " ms");
    }
  }
  raiseIfFailed();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkLoom::getFuture() {
  if (ops_.size() == 1) {
    auto [future, created] = ops_.front()->future();
    // Someone must finish the op for the future to complete; the caller may
    // never wait() on this Work.
    if (created && !ops_.front()->finished()) finisher_->adopt(ops_.front());
    return future;
  }
  if (future_) return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  if (ops_.empty()) {
    future_->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    return future_;
  }
  // The finisher finishes ops in the order it adopts them: once the last one
  // is finished, all are.
  std::shared_ptr<LoomOp> last;
  for (auto& op : ops_) {
    auto [future, created] = op->future();
    if (created && !op->finished()) finisher_->adopt(op);
    last = op;
  }
  auto ops = ops_;
  auto whole = future_;
  last->future().first->addCallback([ops, whole](c10::ivalue::Future&) {
    std::vector<at::Tensor> outputs;
    for (const auto& op : ops) {
      if (!op->finished()) op->finish();
      if (std::exception_ptr e = op->error()) {
        whole->setError(e);
        return;
      }
      outputs.insert(outputs.end(), op->outputs.begin(), op->outputs.end());
    }
    whole->markCompleted(c10::IValue(outputs));
  });
  return future_;
}

// ---- LoomBackend: lifetime ---------------------------------------------------

LoomBackend::LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout)
    : Backend(rank, size),
      store_(store),
      timeout_(timeout),
      recvCount_(static_cast<size_t>(size), 0),
      streams_(std::make_shared<StreamPool>()),
      finisher_(std::make_shared<FinisherThread>()) {
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

LoomBackend::LoomBackend(loomComm_t comm, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout)
    : Backend(rank, size),
      comm_(comm),
      store_(store),
      timeout_(timeout),
      recvCount_(static_cast<size_t>(size), 0),
      streams_(std::make_shared<StreamPool>()),
      finisher_(std::make_shared<FinisherThread>()) {}

LoomBackend::~LoomBackend() {
  if (!comm_) return;
  // After a failure peers may be gone: abort rather than wait for them.
  loomResult_t asyncError = loomSuccess;
  if (loomCommGetAsyncError(comm_, &asyncError) == loomSuccess && asyncError != loomSuccess &&
      asyncError != loomInProgress)
    loomCommAbort(comm_);
  else
    loomCommDestroy(comm_);  // finishes queued work first
}

c10::intrusive_ptr<c10d::Backend::Options> LoomBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("loom", timeout_);
}

c10::intrusive_ptr<c10d::Backend> LoomBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<Options>& opts) {
  // Every rank of this group calls split (c10d passes a rank outside all
  // new groups the first group's ranks): members of one group share a color
  // made from its ranks, the others take part without one.
  const auto it = std::find(ranks.begin(), ranks.end(), rank_);
  const bool member = it != ranks.end();
  int color = LOOM_SPLIT_NOCOLOR;
  if (member) {
    size_t h = 0;
    for (int r : ranks) h = h * 1000003u ^ std::hash<int>{}(r);
    color = static_cast<int>(h & 0x3fffffff);
  }
  const int key = member ? static_cast<int>(it - ranks.begin()) : 0;
  loomComm_t child = nullptr;
  loomResult_t r;
  {
    std::lock_guard<std::mutex> lock(commMu_);
    r = loomCommSplit(comm_, color, key, &child);
  }
  TORCH_CHECK(r == loomSuccess, "loom: split_group on rank ", rank_, " failed (", loomGetErrorString(r),
              "): ", loomGetLastError(comm_));
  if (!member) return nullptr;
  int childRank = -1, childSize = 0;
  loomCommUserRank(child, &childRank);
  loomCommCount(child, &childSize);
  TORCH_CHECK(childRank == key && childSize == static_cast<int>(ranks.size()), "loom: split_group on rank ", rank_,
              ": Loom made a group of ", childSize, " with this rank at ", childRank, ", expected ", ranks.size(),
              " and ", key, " (two groups' ranks hashed to one color?)");
  const auto timeout = opts ? opts->timeout : timeout_;
  return c10::make_intrusive<LoomBackend>(child, store, childRank, childSize, timeout);
}

// ---- Launching -------------------------------------------------------------------

std::shared_ptr<LoomOp> LoomBackend::newOp(const char* name, const at::Device& device) {
  return std::make_shared<LoomOp>(name, rank_, streams_, device.is_cuda() ? cudaSideFor(device, cudaStreams_) : nullptr);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::workOf(OpType type, std::vector<std::shared_ptr<LoomOp>> ops) {
  return c10::make_intrusive<WorkLoom>(rank_, type, std::move(ops), finisher_, timeout_);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::launch(OpType type, std::shared_ptr<LoomOp> op,
                                                   const std::function<loomResult_t(loomStream_t)>& enqueue) {
  loomResult_t r;
  {
    std::lock_guard<std::mutex> lock(commMu_);
    if (op->device()) op->device()->orderAfterCurrent();
    r = enqueue(op->stream());
    // CUDA: results are copied out on the op's stream, before its end event.
    if (r == loomSuccess && op->device()) {
      if (op->copyOut) runOnDeviceStream(*op->device(), op->copyOut);
      op->device()->recordEnd();
    }
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
  {
    std::lock_guard<std::mutex> lock(coalesceMu_);
    if (coalescing_) coalescedOps_.push_back(op);
  }
  return workOf(type, {std::move(op)});
}

c10::intrusive_ptr<c10d::Work> LoomBackend::launchTransfers(OpType type, std::shared_ptr<LoomOp> op,
                                                            std::vector<Transfer> transfers) {
  // No announcements (recvAnysource): these transfers match each other,
  // both sides issue them in the same order.
  return launch(type, std::move(op), [&](loomStream_t s) {
    loomResult_t first = loomGroupStart();
    for (const Transfer& t : transfers) {
      if (first != loomSuccess) break;
      if (t.bytes == 0) continue;
      first = t.isSend ? loomSend(t.buf, t.bytes, loomUint8, t.peer, comm_, s)
                       : loomRecv(t.buf, t.bytes, loomUint8, t.peer, comm_, s);
    }
    // The group must be closed even when a call in it failed.
    loomResult_t end = loomGroupEnd();
    return first != loomSuccess ? first : end;
  });
}

// ---- Coalescing ---------------------------------------------------------------------

void LoomBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(coalesceMu_);
  TORCH_CHECK(!coalescing_, "loom: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> LoomBackend::endCoalescing() {
  std::vector<DeferredP2P> batch;
  std::vector<std::shared_ptr<LoomOp>> ops;
  {
    std::lock_guard<std::mutex> lock(coalesceMu_);
    TORCH_CHECK(coalescing_, "loom: endCoalescing called without startCoalescing");
    coalescing_ = false;
    batch.swap(deferred_);
    ops.swap(coalescedOps_);
  }
  if (!batch.empty()) {
    // One group on the first op's stream; the others follow it (loom_op.h).
    const std::shared_ptr<LoomOp>& leader = batch.front().op;
    loomResult_t first = loomSuccess;
    {
      std::lock_guard<std::mutex> lock(commMu_);
      if (leader->device()) leader->device()->orderAfterCurrent();
      first = loomGroupStart();
      for (size_t i = 0; i < batch.size() && first == loomSuccess; ++i) {
        const Transfer& t = batch[i].transfer;
        first = t.isSend ? loomSend(t.buf, t.bytes, loomUint8, t.peer, comm_, leader->stream())
                         : loomRecv(t.buf, t.bytes, loomUint8, t.peer, comm_, leader->stream());
      }
      loomResult_t end = loomGroupEnd();  // closes the group even after a failed call
      if (first == loomSuccess) first = end;
      if (first == loomSuccess && leader->device()) {
        for (DeferredP2P& p : batch)
          if (p.op->copyOut) runOnDeviceStream(*leader->device(), p.op->copyOut);
        leader->device()->recordEnd();
      }
    }
    if (first != loomSuccess) {
      auto error = std::make_exception_ptr(std::runtime_error(c10::str("loom: coalesced send/recv on rank ", rank_,
                                                                       " failed (", loomGetErrorString(first),
                                                                       "): ", loomGetLastError(nullptr))));
      for (DeferredP2P& p : batch) p.op->failLaunch(error);
      std::rethrow_exception(error);
    }
    for (DeferredP2P& p : batch) {
      p.op->markLaunched();
      ops.push_back(p.op);
    }
  }
  return workOf(OpType::COALESCED, std::move(ops));
}

// ---- Point to point -------------------------------------------------------------------

void LoomBackend::announceSend(int peer) { store_->add(c10::str("any/", peer, "/", rank_), 1); }

void LoomBackend::countRecv(int peer) {
  std::lock_guard<std::mutex> lock(recvCountMu_);
  ++recvCount_.at(static_cast<size_t>(peer));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::pointToPoint(OpType type, std::shared_ptr<LoomOp> op, void* buf,
                                                         size_t bytes, int peer) {
  const bool isSend = type == OpType::SEND;
  TORCH_CHECK(peer >= 0 && peer < size_, "loom: ", op->name(), " on rank ", rank_, ": peer ", peer,
              " is not a rank of this group of ", size_);
  if (isSend)
    announceSend(peer);
  else
    countRecv(peer);
  {
    std::lock_guard<std::mutex> lock(coalesceMu_);
    if (coalescing_) {
      if (!deferred_.empty()) op->follow(deferred_.front().op);
      deferred_.push_back({op, {isSend, buf, bytes, peer}});
      return workOf(type, {std::move(op)});
    }
  }
  return launch(type, std::move(op), [&](loomStream_t s) {
    return isSend ? loomSend(buf, bytes, loomUint8, peer, comm_, s) : loomRecv(buf, bytes, loomUint8, peer, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const char* name = "send";
  at::Tensor tensor = singleTensor(tensors, name);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name, tensor.device());
  op->keepAlive = {buf};
  return pointToPoint(OpType::SEND, std::move(op), buf.data_ptr(), byteCount(buf), dstRank);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const char* name = "recv";
  at::Tensor tensor = singleTensor(tensors, name);
  at::Tensor buf = contiguousOf(tensor);
  auto op = newOp(name, tensor.device());
  op->keepAlive = {buf};
  op->outputs = {tensor};
  if (!buf.is_same(tensor)) op->copyOut = [tensor, buf] { tensor.copy_(buf); };
  return pointToPoint(OpType::RECV, std::move(op), buf.data_ptr(), byteCount(buf), srcRank);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  // The oldest send to this rank that no recv has matched: sends announce
  // themselves in the store (announceSend), recvs count what they matched.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  auto nap = std::chrono::microseconds(50);
  for (;;) {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      const int64_t announced = store_->add(c10::str("any/", rank_, "/", peer), 0);
      int64_t matched;
      {
        std::lock_guard<std::mutex> lock(recvCountMu_);
        matched = recvCount_[static_cast<size_t>(peer)];
      }
      if (announced > matched) {
        auto work = recv(tensors, peer, tag);
        static_cast<WorkLoom*>(work.get())->setSourceRank(peer);
        return work;
      }
    }
    TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "loom: recvAnysource on rank ", rank_,
                ": no send to this rank arrived within ", timeout_.count(), " ms");
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(5000));
  }
}

c10::intrusive_ptr<c10d::Work> LoomBackend::barrier(const c10d::BarrierOptions& opts) {
  return launch(OpType::BARRIER, newOp("barrier", at::Device(at::kCPU)),
                [&](loomStream_t s) { return loomBarrier(comm_, s); });
}

}  // namespace loom_torch
